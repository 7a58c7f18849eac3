"""Noise operators: ``noise.gaussian``, ``noise.salt_and_pepper``, ``noise.shot`` (NumPy only).

Supported input types, as in DALI 2.4: uint8/16/32/64, int8/16/32/64 and float32 (DALI
rejects float16, float64 and bool). The output has the input's type, shape and layout.

Draw pattern (capture mode relies on it): every call takes exactly **7 words** from its RNG
(the ``rng=`` argument or this thread's default), whatever the batch size. The call's random
arrays come from NumPy's ``Generator(Philox)`` keyed by those words (as ``random.beta``
does): its C code makes them about 15 times faster than ndd's own word-by-word Philox
stream, which matters for noise over every pixel of a batch. Groups (the dense batch, or
each sample) draw in order, values in C order:

* ``gaussian``: ``z = standard_normal`` (float32); the noise is
  ``float32(mean) + float32(stddev) * z`` in float32 operations, and the output is
  ``ConvertSat(float64(x) + float64(noise))`` (integers: rounded half away from zero and
  saturated, as DALI; its int32 outputs keep every input bit, so the sum is taken in float64).
* ``salt_and_pepper``: ``u = random`` (float32) per decision: salt when
  ``u < prob * salt_vs_pepper``, else pepper when ``u < prob``, else the input value. One
  decision per element with ``per_channel=True``; otherwise one per pixel, shared by the
  channel axis (the first or last axis of the layout, named 'C'; the last one when there is
  no layout).
* ``shot``: per sample, ``u = random`` (float64) for its elements, then
  ``z = standard_normal`` (float32); the output is ``ConvertSat(float32(k) * factor)`` with ``k ~ Poisson(lam)``,
  ``lam = x / factor`` in float32 (0 where it is negative, NaN or infinite, as DALI's
  outputs show). See :func:`poisson` for the method and its accuracy.

Each kernel is split into a host part that turns words into arrays (shared with the GPU
kernels of ndd-ops-cuda, which upload them) and elementwise arithmetic made of correctly
rounded operations only, so that a GPU computes the very same values.

Where ndd refuses what DALI 2.4 accepts: a negative ``stddev`` (DALI draws as with its
absolute value), ``factor <= 0`` (DALI gives zeros, or -0.0, though it documents factor 0 as
the identity), a salt or pepper value outside an integer type's range (DALI wraps it
around); also NaN or infinite arguments, as everywhere in ndd. A 0-d input to
``salt_and_pepper`` is one value here (DALI 2.4 crashes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._dispatch import KernelArgs, KernelContext
from ._saturate import saturate_cast
from ._schema import BOOL, FLOAT, Arg, OpSchema, OutMeta
from ._storage import BatchData

SUPPORTED = (_dtype.uint8, _dtype.uint16, _dtype.uint32, _dtype.uint64,
             _dtype.int8, _dtype.int16, _dtype.int32, _dtype.int64, _dtype.float32)

Group = tuple[tuple[int, ...], tuple[int, ...]]
"""Samples processed together: (shape with a leading batch axis, sample indices)."""

# -- arguments -------------------------------------------------------------------------

_RULES = {"stddev": "must be >= 0", "factor": "must be > 0",
          "prob": "must be in [0, 1]", "salt_vs_pepper": "must be in [0, 1]"}


def _bad(name: str, v: np.ndarray) -> np.ndarray:
    """Where the values of argument ``name`` break its rule (see ``_RULES``)."""
    if name == "stddev":
        return v < 0
    if name == "factor":
        return v <= 0
    return (v < 0) | (v > 1)


def _validator(op: str, names: Sequence[str]):
    def validate(args: dict) -> None:
        for name in names:
            v = args.get(name)
            if v is not None and _bad(name, np.float32(v)):
                raise ValueError(f"Operator `{op}`: argument '{name}' {_RULES[name]}, got {v}")

    return validate


def param(op: str, args: KernelArgs, name: str, idx: Sequence[int], ndim: int) -> np.ndarray:
    """float32 values of argument ``name`` for samples ``idx``: a 0-d array for a constant,
    else shape ``(len(idx), 1, ...)`` with ``ndim`` axes (checked against ``_RULES``)."""
    if not args.is_per_sample(name):
        return np.asarray(args[name], np.float32)
    vals = []
    for i in idx:
        v = np.asarray(args.sample(name, i), np.float32)  # (one value: dispatch checked)
        if name in _RULES and _bad(name, v).any():
            raise ValueError(f"Operator `{op}`: argument '{name}' {_RULES[name]}, got {v.item()} (sample {i})")
        vals.append(v.reshape(()))
    return np.array(vals, np.float32).reshape((len(idx),) + (1,) * (ndim - 1))


def _infer(op: str):
    def infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
        m = inputs[0]
        if m.dtype not in SUPPORTED:
            raise ValueError(f"Operator `{op}`: input type {m.dtype} is not supported "
                             f"(supported: {', '.join(str(d) for d in SUPPORTED)})")
        if op == "noise.salt_and_pepper" and not args["per_channel"]:
            channel_axis(op, m.layout, m.ndim)
        return [m]

    return infer


# -- batches and words ----------------------------------------------------------------


def batch_groups(bd: BatchData) -> list[Group]:
    """The whole batch as one group when it is dense, else one group per sample."""
    if bd.dense is not None:
        return [(tuple(bd.dense.shape), tuple(range(len(bd))))]
    return [((1, *s.shape), (i,)) for i, s in enumerate(bd.samples)]


def group_arrays(bd: BatchData) -> list[Any]:
    """The arrays of :func:`batch_groups` (NumPy or torch), each with its batch axis."""
    if bd.dense is not None:
        return [bd.dense]
    return [s[None] for s in bd.samples]


def group_result(bd: BatchData, outs: list[Any]) -> Any:
    """A kernel's result from its per-group outputs (one dense array, or the samples)."""
    if bd.dense is not None:
        return outs[0]
    return [o[0, ...] for o in outs]  # (a 0-d sample stays an array)


def _generator(ctx: KernelContext) -> np.random.Generator:
    """The call's NumPy generator, keyed by its 7 words (see the module docstring)."""
    w = [int(x) for x in ctx.random_state]
    return np.random.Generator(np.random.Philox(key=[w[0] | w[1] << 32, w[2] | w[3] << 32],
                                                counter=[w[4], w[5], w[6], 0]))


# -- gaussian ---------------------------------------------------------------------------


def gaussian_noise(ctx: KernelContext, args: KernelArgs, groups: list[Group]) -> list[np.ndarray]:
    """float32 noise of each group: ``mean + stddev * z`` (two float32 operations)."""
    gen = _generator(ctx)
    out = []
    for shape, idx in groups:
        z = gen.standard_normal(math.prod(shape), dtype=np.float32).reshape(shape)
        mean = param(ctx.op, args, "mean", idx, len(shape))
        std = param(ctx.op, args, "stddev", idx, len(shape))
        out.append(mean + std * z)
    return out


def _gaussian(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    npd = ctx.output_meta[0].dtype.numpy_dtype
    noise = gaussian_noise(ctx, args, batch_groups(bd))
    outs = [saturate_cast(np.asarray(x, np.float64) + n.astype(np.float64), npd)
            for x, n in zip(group_arrays(bd), noise)]
    return group_result(bd, outs)


# -- salt and pepper ----------------------------------------------------------------------

KEEP, SALT, PEPPER = 0, 1, 2


def channel_axis(op: str, layout: str | None, ndim: int) -> int | None:
    """The axis whose values share one decision with ``per_channel=False``: where 'C' is in
    the layout, which must be first or last (DALI's rule); the last axis without a layout;
    None for a 0-d sample (one value, one decision)."""
    if ndim == 0:
        return None
    if not layout:
        return ndim - 1
    c = layout.find("C")
    if c not in (0, ndim - 1):
        raise ValueError(f"Operator `{op}`: with per_channel=False the layout must have 'C' as its first "
                         f"or last axis (or be empty: channels last), got {layout!r}")
    return c


def salt_pepper_codes(ctx: KernelContext, args: KernelArgs, groups: list[Group]) -> list[np.ndarray]:
    """uint8 codes of each group (KEEP, SALT or PEPPER), with the group's shape, or 1 on the
    channel axis when the channels share the decision."""
    axis = None
    if groups and not args["per_channel"]:
        axis = channel_axis(ctx.op, ctx.input_layouts[0], len(groups[0][0]) - 1)
    shapes = []
    for shape, _ in groups:
        if axis is not None:
            shape = shape[:axis + 1] + (1,) + shape[axis + 2:]  # (axis of a sample: +1 here)
        shapes.append(shape)
    gen = _generator(ctx)
    out = []
    for shape, (_, idx) in zip(shapes, groups):
        u = gen.random(math.prod(shape), dtype=np.float32).reshape(shape).astype(np.float64)
        prob = param(ctx.op, args, "prob", idx, len(shape)).astype(np.float64)
        salt = prob * param(ctx.op, args, "salt_vs_pepper", idx, len(shape)).astype(np.float64)
        out.append(np.where(u < salt, SALT, np.where(u < prob, PEPPER, KEEP)).astype(np.uint8))
    return out


def fill_value(op: str, name: str, v: Any, npd: np.dtype) -> Any:
    """Salt or pepper value ``v`` (None: the default) in type ``npd``. Defaults: 1 and -1 for
    float32, the type's maximum and minimum for integers. An integer type takes the float32
    value truncated toward zero (DALI's conversion); a value outside its range is an error
    (DALI 2.4 wraps it around)."""
    npd = np.dtype(npd)
    if v is None:
        if npd.kind == "f":
            return npd.type(1.0 if name == "salt_val" else -1.0)
        info = np.iinfo(npd)
        return npd.type(info.max if name == "salt_val" else info.min)
    f = np.float32(np.asarray(v, np.float32).reshape(()))
    if npd.kind == "f":
        return npd.type(f)
    info = np.iinfo(npd)
    t = int(np.trunc(f))
    if not info.min <= t <= info.max:
        raise ValueError(f"Operator `{op}`: argument '{name}' = {float(f)} is out of the range of {npd} "
                         f"[{info.min}, {info.max}]")
    return npd.type(t)


def salt_pepper_values(op: str, args: KernelArgs, npd: np.dtype, idx: Sequence[int], ndim: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Salt and pepper values of samples ``idx`` in type ``npd``: 0-d for constants, else
    shape ``(len(idx), 1, ...)`` with ``ndim`` axes."""
    out = []
    for name in ("salt_val", "pepper_val"):
        if args.is_per_sample(name):
            vals = [fill_value(op, name, args.sample(name, i), npd) for i in idx]
            out.append(np.array(vals, npd).reshape((len(idx),) + (1,) * (ndim - 1)))
        else:
            out.append(np.asarray(fill_value(op, name, args[name], npd), npd))
    return out[0], out[1]


def _salt_and_pepper(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    npd = ctx.output_meta[0].dtype.numpy_dtype
    groups = batch_groups(bd)
    codes = salt_pepper_codes(ctx, args, groups)
    outs = []
    for x, code, (shape, idx) in zip(group_arrays(bd), codes, groups):
        salt, pepper = salt_pepper_values(ctx.op, args, npd, idx, len(shape))
        outs.append(np.where(code == SALT, salt, np.where(code == PEPPER, pepper, x)).astype(npd, copy=False))
    return group_result(bd, outs)


# -- shot -----------------------------------------------------------------------------------

POISSON_SMALL = 16.0
"""Rates below this are sampled by inversion, the others by a corrected normal approximation."""
POISSON_STEPS = 64
"""Most steps of the inversion search (a count over 64 at a rate below 16: odds below 1e-18)."""
POISSON_SHIFT = 5.0 / 36.0
"""Variance of the normal approximation's rounding and skew terms, taken from its scale."""
RECIPROCALS = tuple(1.0 / j for j in range(1, POISSON_STEPS + 1))
EXP_TERMS = 12
EXP_SQUARINGS = 6


def shot_randoms(ctx: KernelContext, groups: list[Group]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group: ``u`` (float64 in [0, 1), 53 bits) for the inversion and ``z`` (float32
    standard normal) for the normal approximation, one of each per element."""
    gen = _generator(ctx)
    out = []
    for shape, idx in groups:  # sample by sample, so that a dense batch draws as its samples would
        n = math.prod(shape[1:])
        pairs = [(gen.random(n), gen.standard_normal(n, dtype=np.float32)) for _ in idx]
        out.append((np.stack([u for u, _ in pairs]).reshape(shape), np.stack([z for _, z in pairs]).reshape(shape)))
    return out


def shot_rate(x: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """``lam = float32(x) / factor`` (float32), 0 where negative, NaN or infinite."""
    with np.errstate(over="ignore", invalid="ignore"):  # (a huge rate overflows to inf: 0)
        lam = np.asarray(x).astype(np.float32) / factor
    return np.where(np.isfinite(lam) & (lam > 0), lam, np.float32(0))


def exp_neg(lam: Any) -> Any:
    """``exp(-lam)`` for float64 ``0 <= lam < 16`` from multiplications and additions only, so
    that a GPU reproduces it bit for bit: a 12-term Taylor series of ``exp(-t)`` at
    ``t = lam / 64`` (Horner), squared six times. Relative error below 2e-14. ``lam`` is a
    NumPy array or a torch tensor (the GPU kernel runs this same code on the device)."""
    t = lam * (1.0 / 64.0)
    r = t * 0.0 + 1.0  # ones of t's kind, without naming NumPy or torch (t is finite)
    for j in range(EXP_TERMS, 0, -1):
        r = 1.0 - (t * RECIPROCALS[j - 1]) * r
    for _ in range(EXP_SQUARINGS):
        r = r * r
    return r


def poisson_inversion(lam: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The smallest ``k`` with ``u < F(k)``, F the Poisson(lam) CDF summed term by term
    (``p(k) = p(k - 1) * lam * (1 / k)``), at most ``POISSON_STEPS``; float64 counts."""
    p = exp_neg(lam)
    cdf = p.copy()
    k = np.zeros_like(lam)
    idx = np.flatnonzero(u >= cdf)
    for j in range(1, POISSON_STEPS + 1):
        if idx.size == 0:
            break
        k[idx] = j
        p[idx] = p[idx] * lam[idx] * RECIPROCALS[j - 1]
        cdf[idx] = cdf[idx] + p[idx]
        idx = idx[u[idx] >= cdf[idx]]
    return k


def poisson_normal(lam: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``max(0, floor(lam + sqrt(lam - 5/36) * z + (z*z - 1) / 6 + 1/2))``, float64 counts:
    a normal value with the Poisson skewness term (Cornish-Fisher), rounded to an integer;
    the 5/36 offsets the variance that rounding (1/12) and the skew term (1/18) add."""
    z = z.astype(np.float64)
    s = np.sqrt(lam - POISSON_SHIFT)
    g = ((lam + s * z) + (z * z - 1.0) * (1.0 / 6.0)) + 0.5
    return np.maximum(np.floor(g), 0.0)


def poisson(lam: np.ndarray, u: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Poisson counts (float64) for float64 rates ``lam``, from ``u`` and ``z`` (see
    :func:`shot_randoms`), one of each per value.

    Accuracy: below ``POISSON_SMALL`` (16) the counts are exact inversion of the CDF, up to
    float64 rounding of the CDF (relative 1e-14) and the 2**-53 steps of ``u``. From 16 on,
    :func:`poisson_normal`: its mean and variance match the Poisson ones to 1e-5 relative,
    and its total variation distance from the Poisson distribution is 1.3e-3 at 16, 3e-4 at
    64 and about 0.02 / lam beyond.
    """
    small = lam < POISSON_SMALL
    k = np.empty_like(lam)
    k[small] = poisson_inversion(lam[small], u[small])
    big = ~small
    k[big] = poisson_normal(lam[big], z[big])
    return k


def _shot(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    npd = ctx.output_meta[0].dtype.numpy_dtype
    groups = batch_groups(bd)
    outs = []
    for x, (u, z), (shape, idx) in zip(group_arrays(bd), shot_randoms(ctx, groups), groups):
        factor = param(ctx.op, args, "factor", idx, len(shape))
        lam = shot_rate(x, factor).astype(np.float64)
        k = poisson(lam, u, z)
        outs.append(saturate_cast(k.astype(np.float32) * factor, npd))
    return group_result(bd, outs)


# -- schemas ------------------------------------------------------------------------------------

GAUSSIAN = OpSchema(
    "noise.gaussian", random=True, infer=_infer("noise.gaussian"),
    validate=_validator("noise.gaussian", ("stddev",)),
    args={"mean": Arg(FLOAT, default=0.0, per_sample=True, doc="mean of the noise"),
          "stddev": Arg(FLOAT, default=1.0, per_sample=True, doc="standard deviation of the noise (>= 0)")},
    doc="Adds normally distributed noise; integer outputs are rounded and saturated. Draws 7 words per call.",
)
SALT_AND_PEPPER = OpSchema(
    "noise.salt_and_pepper", random=True, infer=_infer("noise.salt_and_pepper"),
    validate=_validator("noise.salt_and_pepper", ("prob", "salt_vs_pepper")),
    args={"prob": Arg(FLOAT, default=0.05, per_sample=True, doc="probability that a value is replaced"),
          "salt_vs_pepper": Arg(FLOAT, default=0.5, per_sample=True,
                                doc="probability that a replaced value is salt rather than pepper"),
          "salt_val": Arg(FLOAT, per_sample=True, doc="salt value (default: 1.0, or the type's maximum)"),
          "pepper_val": Arg(FLOAT, per_sample=True, doc="pepper value (default: -1.0, or the type's minimum)"),
          "per_channel": Arg(BOOL, default=False, doc="one decision per value instead of per pixel")},
    doc="Replaces values by salt or pepper at random. Draws 7 words per call.",
)
SHOT = OpSchema(
    "noise.shot", random=True, infer=_infer("noise.shot"),
    validate=_validator("noise.shot", ("factor",)),
    args={"factor": Arg(FLOAT, default=12.0, per_sample=True,
                        doc="value of one event (> 0); 12 by default, what DALI 2.4's operator uses "
                            "(its documentation says 20)")},
    doc="Shot noise: Poisson(max(0, x / factor)) * factor; integer outputs are rounded and "
        "saturated. Draws 7 words per call.",
)

NOISE_OPS = ((GAUSSIAN, _gaussian), (SALT_AND_PEPPER, _salt_and_pepper), (SHOT, _shot))
