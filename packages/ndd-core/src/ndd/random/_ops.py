"""Random operators: ``uniform``, ``normal``, ``coin_flip``, ``choice``, ``beta``.

Draw pattern (capture mode relies on it): every call takes exactly **7 words** from
its RNG (the ``rng=`` argument or this thread's default), whatever the batch size,
and derives all values from the Philox sub-generator ``RNG.from_words(words)``.
Inside it, samples are filled in order, element by element in C order:
``uniform`` and ``coin_flip`` use one word per value, ``normal`` two (Box–Muller,
see ``_philox.normal``), ``choice`` one, ``uniform(values=…)`` one (an index).
``beta`` seeds NumPy's Generator with the 7 words (its rejection sampler needs a
variable number of draws, which stays inside the call).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _dtype
from .._dispatch import KernelArgs, KernelContext
from .._saturate import saturate_cast
from .._schema import DTYPE, FLOAT, FLOATS, INTS, Arg, OpSchema, OutMeta
from .._storage import BatchData
from . import _philox
from ._rng import RNG


def _shape_of(args: KernelArgs, inputs: list, i: int, like: int | None) -> tuple[int, ...]:
    if like is not None and like < len(inputs) and inputs[like] is not None:
        return tuple(inputs[like].sample(i).shape)
    shape = args.sample("shape", i)
    if shape is None:
        return ()
    return tuple(int(d) for d in np.atleast_1d(shape))


def _check_shape(op: str, shape: Sequence[int]) -> None:
    if any(d < 0 for d in shape):
        raise ValueError(f"Operator `{op}`: argument 'shape' must be non-negative, got {tuple(shape)}")


def _ndim(inputs: Sequence[OutMeta], args: KernelArgs, like: int | None) -> int:
    if like is not None and len(inputs) > like and inputs[like] is not None:
        return inputs[like].ndim
    b = args.batch_args.get("shape")
    if b is not None:
        shapes = b.shape
        return shapes[0][0] if shapes and shapes[0] else 0
    shape = args["shape"]
    return 0 if shape is None else len(shape)


def _out_dtype(args: KernelArgs, default: _dtype.DType) -> _dtype.DType:
    return args["dtype"] or default


def _infer(default: _dtype.DType, like: int | None):
    def infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
        return [OutMeta(_out_dtype(args, default), _ndim(inputs, args, like), None)]

    return infer


def _fill(ctx: KernelContext, inputs: list, args: KernelArgs, like: int | None, words_per_value: int,
          make, uniform_args: tuple[str, ...] = (), batch_whole: bool = True) -> Any:
    """Split one draw of words into per-sample arrays and convert them with ``make``.

    When every sample has the same shape, the arguments named in ``uniform_args`` are
    constants and ``batch_whole`` (the inputs ``make`` reads are the same for every sample),
    ``make(0, all_words)`` converts the whole batch at once (elementwise transforms give the
    same values either way) and the result is one dense array.
    """
    n = ctx.batch_size
    if args.is_per_sample("shape") or (like is not None and like < len(inputs) and inputs[like] is not None):
        shapes = [_shape_of(args, inputs, i, like) for i in range(n)]
        for s in shapes:
            _check_shape(ctx.op, s)
        sizes = [math.prod(s) for s in shapes]
    else:  # one shape for every sample (checked at the call)
        shapes = [_shape_of(args, inputs, 0, None)] * n
        sizes = [math.prod(shapes[0])] * n if n else []
    sub = RNG.from_words(ctx.random_state)
    words = sub.draw_words(sum(sizes) * words_per_value)
    if n and batch_whole and all(s == shapes[0] for s in shapes) and not any(args.is_per_sample(a) for a in uniform_args):
        vals = np.asarray(make(0, words))
        return vals.reshape((n,) + shapes[0] + vals.shape[1:])  # (a value may be a row: choice)
    out, start = [], 0
    for i, (s, k) in enumerate(zip(shapes, sizes)):
        w = words[start * words_per_value:(start + k) * words_per_value]
        start += k
        vals = np.asarray(make(i, w))
        out.append(vals.reshape(s + vals.shape[1:]))
    return out


def _uniform(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs):
    npd = _out_dtype(args, _dtype.float32).numpy_dtype
    if args["values"] is not None or args.is_per_sample("values"):
        def pick(i, w):
            vals = np.asarray(args.sample("values", i), np.float32).reshape(-1)
            if vals.size == 0:
                raise ValueError(f"Operator `{ctx.op}`: argument 'values' is empty for sample {i}")
            return saturate_cast(vals[_philox.bounded_int(w, vals.size)], npd)  # rounded, as DALI

        return _fill(ctx, inputs, args, 0, 1, pick, ("values",))

    def uni(i, w):  # integer types: the float value rounded and saturated, as DALI converts it
        lo, hi = (float(v) for v in np.asarray(args.sample("range", i), np.float32).reshape(-1))
        if npd.kind in "iu":  # the bounds in the integer type first (truncated; saturated, where DALI wraps)
            lo, hi = (float(saturate_cast(np.array(math.trunc(v), np.float64), npd)) for v in (lo, hi))
        return saturate_cast(_philox.uniform(w, np.float32(lo), np.float32(hi)), npd)

    return _fill(ctx, inputs, args, 0, 1, uni, ("range",))


def _validate_common(op: str, args: dict) -> None:
    shape = args.get("shape")
    if shape is not None:
        _check_shape(op, shape)
    p = args.get("probability")
    if p is not None and not 0.0 <= p <= 1.0:
        raise ValueError(f"Operator `{op}`: argument 'probability' must be in [0, 1], got {p}")


def _validator(op: str):
    return lambda args: _validate_common(op, args)


def _validate_range(args: dict) -> None:
    _validate_common("random.uniform", args)
    r = args.get("range")
    if r is not None and (len(r) != 2 or r[0] > r[1]):
        raise ValueError(f"Operator `random.uniform`: argument 'range' must be [lo, hi] with lo <= hi, got {list(r)}")


def _normal(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs):
    npd = _out_dtype(args, _dtype.float32).numpy_dtype

    def nrm(i, w):
        z = _philox.normal(w[0::2], w[1::2])
        mean = np.float32(args.sample("mean", i))
        std = np.float32(args.sample("stddev", i))
        return saturate_cast(mean + std * z, npd)  # integer types: rounded and saturated, as DALI

    return _fill(ctx, inputs, args, 0, 2, nrm, ("mean", "stddev"))


def _coin_flip(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs):
    npd = _out_dtype(args, _dtype.int32).numpy_dtype

    def flip(i, w):
        p = float(args.sample("probability", i))
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Operator `{ctx.op}`: argument 'probability' must be in [0, 1], got {p} (sample {i})")
        return (_philox.to_unit_float32(w) < np.float32(p)).astype(npd)

    return _fill(ctx, inputs, args, 0, 1, flip, ("probability",))


def _choice(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs):
    a = inputs[0]

    def pick(i, w):  # a tensor input: its entries along the first axis (rows of a matrix), as DALI
        src = a.sample(i)
        p = args.sample("p", i)
        if src.ndim == 0 and p is None:  # 0..a-1, without making them
            if not 1 <= int(src) <= 2**32:  # (one 32-bit word per value)
                raise ValueError(f"Operator `{ctx.op}`: input 'a' must be from 1 to 2**32 values to choose "
                                 f"from, got {int(src)} (sample {i})")
            return _philox.bounded_int(w, int(src)).astype(src.dtype)
        vals = np.arange(int(src), dtype=src.dtype) if src.ndim == 0 else src
        if len(vals) == 0:
            raise ValueError(f"Operator `{ctx.op}`: input 'a' has no elements to choose from (sample {i})")
        if p is None:
            return vals[_philox.bounded_int(w, len(vals))]
        p = np.asarray(p, np.float64).reshape(-1)
        # (DALI's tolerance on the sum)
        if p.size != len(vals) or np.any(p < 0) or not abs(p.sum() - 1.0) < 1e-4:
            raise ValueError(
                f"Operator `{ctx.op}`: argument 'p' must be {len(vals)} non-negative probabilities "
                f"summing to 1 (sample {i})"
            )
        cdf = np.cumsum(p)
        idx = np.searchsorted(cdf, _philox.to_unit_float32(w).astype(np.float64), side="right")
        return vals[np.minimum(idx, len(vals) - 1)]

    # one conversion for the whole batch only when every sample chooses from the same `a`
    same_a = a.dense is not None and len(a) > 0 and bool(np.all(a.dense == a.dense[:1]))
    return _fill(ctx, inputs, args, 1, 1, pick, ("p",), batch_whole=same_a or len(a) <= 1)


def _choice_infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
    return [OutMeta(inputs[0].dtype, _ndim(inputs, args, 1) + max(inputs[0].ndim - 1, 0), None)]


def _beta(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs):
    npd = _out_dtype(args, _dtype.float32).numpy_dtype
    gen = np.random.Generator(np.random.Philox(key=[int(x) for x in ctx.random_state[:2]],
                                               counter=[int(x) for x in ctx.random_state[2:6]]))
    out = []
    for i in range(ctx.batch_size):
        shape = _shape_of(args, inputs, i, 0)
        _check_shape(ctx.op, shape)
        a, b = float(args.sample("alpha", i)), float(args.sample("beta", i))
        if a <= 0 or b <= 0:
            raise ValueError(f"Operator `{ctx.op}`: arguments 'alpha' and 'beta' must be positive (sample {i})")
        out.append(np.asarray(gen.beta(a, b, size=shape), dtype=npd).reshape(shape))
    return out


_COMMON = {"shape": Arg(INTS, per_sample=True), "dtype": Arg(DTYPE)}

UNIFORM = OpSchema(
    "random.uniform", inputs=("shape_like",), min_inputs=0, random=True,
    args={"range": Arg(FLOATS, default=(-1.0, 1.0), per_sample=True),
          "values": Arg(FLOATS, per_sample=True), **_COMMON},
    infer=_infer(_dtype.float32, 0), validate=_validate_range,
    doc="Uniform values in [range[0], range[1]), or picks from ``values``. Draws 7 words per call.",
)
NORMAL = OpSchema(
    "random.normal", validate=_validator("random.normal"), inputs=("shape_like",), min_inputs=0, random=True,
    args={"mean": Arg(FLOAT, default=0.0, per_sample=True),
          "stddev": Arg(FLOAT, default=1.0, per_sample=True), **_COMMON},
    infer=_infer(_dtype.float32, 0),
    doc="Normally distributed values. Draws 7 words per call.",
)
COIN_FLIP = OpSchema(
    "random.coin_flip", validate=_validator("random.coin_flip"), inputs=("shape_like",), min_inputs=0, random=True,
    args={"probability": Arg(FLOAT, default=0.5, per_sample=True), **_COMMON},
    infer=_infer(_dtype.int32, 0),
    doc="1 with ``probability``, else 0 (int32 by default). Draws 7 words per call.",
)
CHOICE = OpSchema(
    "random.choice", validate=_validator("random.choice"), inputs=("a", "shape_like"), min_inputs=1, random=True,
    host_args_from=0,
    args={"p": Arg(FLOATS, per_sample=True), "shape": Arg(INTS, per_sample=True)},
    infer=_choice_infer,
    doc="Values picked from ``a`` (a 1-D tensor, or an int n meaning range(n)), with "
        "probabilities ``p``. Draws 7 words per call.",
)
BETA = OpSchema(
    "random.beta", validate=_validator("random.beta"), inputs=("shape_like",), min_inputs=0, random=True,
    args={"alpha": Arg(FLOAT, default=1.0, per_sample=True),
          "beta": Arg(FLOAT, default=1.0, per_sample=True), **_COMMON},
    infer=_infer(_dtype.float32, 0),
    doc="Beta-distributed values. Draws 7 words per call.",
)

RANDOM_OPS = ((UNIFORM, _uniform), (NORMAL, _normal), (COIN_FLIP, _coin_flip), (CHOICE, _choice),
              (BETA, _beta))
