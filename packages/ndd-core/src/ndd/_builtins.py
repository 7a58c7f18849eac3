"""Operators built into core (registered through the ``ndd.ops`` entry point)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _convert, _dispatch
from ._batch import Batch
from ._device import Device
from ._dispatch import KernelArgs, KernelContext
from ._plugins import Registry
from ._schema import ANY, DTYPE, Arg, OpSchema, OutMeta
from ._storage import BatchData
from ._tensor import Tensor
from .random._ops import RANDOM_OPS

# -- cast -------------------------------------------------------------------------


def _cast_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    return [OutMeta(args["dtype"], inputs[0].ndim, inputs[0].layout)]


# DALI's Cast converts each element with ConvertSat (dali/core/convert.h): a float going to
# an integer type is rounded to the nearest integer and clamped to the target's range, an
# integer going to a narrower (or differently signed) integer type is clamped, a NaN
# becomes 0. Rounding: DALI's CPU backend uses std::round (ties go away from zero), its
# CUDA kernels __float2int_rn (ties to even), so DALI's two devices differ on exact .5
# ties. ndd takes the CPU rule, half away from zero, on both devices (core's kernel here
# and ndd-ops-cuda's, which runs the same plan with torch), so that CPU and GPU agree
# bit for bit and the CPU results match DALI's CPU operator. Casts to a float type or to
# bool, and integer casts the target can hold (same type, widening, int -> float), are a
# plain ``astype`` as before.


def cast_plan(src: np.dtype, dst: np.dtype) -> tuple:
    """How ``cast`` converts elements of ``src`` to ``dst`` (shared by the CPU and GPU kernels):

    * ``("plain",)``: a plain conversion (``astype``): same type, float or bool target,
      bool source, or an integer target that holds every source value;
    * ``("clip", lo, hi)``: integers: clamp to ``[lo, hi]`` (Python ints, both in the range
      of ``src`` and of ``dst``), then convert;
    * ``("round", work, half, lo, hi, big, top)``: floats to integers, computed in the float
      type ``work`` (``src``; float32 for float16, whose range some targets exceed, as DALI
      also converts float16 through float): clamp to ``[lo, hi]`` (integer floats that
      convert exactly), round with ``trunc(x + copysign(half, x))`` (``half`` is the largest
      ``work`` float below 0.5: ties go away from zero, and unlike adding 0.5 the addition
      never carries a value just below a tie over it), NaN to 0, convert; then, when ``big``
      is not None (``dst``'s maximum is no ``work`` float, e.g. float32 -> int32, so ``hi``
      is the float below it), ``top`` (that maximum) where ``x >= big``.
    """
    return _cast_plan(np.dtype(src), np.dtype(dst))


@functools.cache
def _cast_plan(src: np.dtype, dst: np.dtype) -> tuple:
    if src == dst or dst.kind not in "iu" or src.kind == "b":
        return ("plain",)
    info = np.iinfo(dst)
    if src.kind in "iu":
        sinfo = np.iinfo(src)
        lo, hi = max(info.min, sinfo.min), min(info.max, sinfo.max)
        return ("plain",) if (lo, hi) == (sinfo.min, sinfo.max) else ("clip", lo, hi)
    work = np.dtype(np.float32) if src == np.float16 else src
    f = work.type
    half = np.nextafter(f(0.5), f(0))
    lo, hi = f(info.min), f(info.max)  # the minimum (0 or -2**k) is exact
    big = None
    if int(hi) > info.max:  # the maximum rounded up (2**k): clamp below it, fix up after
        big, hi = hi, np.nextafter(hi, f(0))
    return ("round", work, half, lo, hi, big, info.max)


# Floats to integers are converted in chunks of this many elements, so the temporaries
# of the rounding stay in cache (64x224x224x3 float32 -> uint8: 12.8 ms in whole-array
# passes, ~4 ms in chunks, against 1.8 ms for a plain astype). A second thread only
# added interpreter-lock contention at this grain.
_CHUNK = 1 << 17


def saturate_cast(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """``x.astype(dst)`` with DALI's ConvertSat rules (see :func:`cast_plan`)."""
    plan = _cast_plan(x.dtype, dst)
    if plan[0] == "plain":
        return x.astype(dst)
    if plan[0] == "clip":
        src = x.dtype.type
        return np.clip(x, src(plan[1]), src(plan[2])).astype(dst)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, dst)
    dest = out.reshape(-1)
    for lo in range(0, flat.size, _CHUNK):
        _round_into(flat[lo:lo + _CHUNK], dest[lo:lo + _CHUNK], plan)
    return out


def _round_into(x: np.ndarray, out: np.ndarray, plan: tuple) -> None:
    """One chunk of a float-to-integer ``("round", ...)`` plan, written into ``out``: the
    clamped value plus ``half`` (with the value's sign), truncated toward zero by the
    conversion itself."""
    _, work, half, lo, hi, big, top = plan
    x = np.asarray(x, dtype=work)
    r = np.clip(x, lo, hi)  # a NaN stays NaN
    least = np.minimum.reduce(r)  # (np.minimum keeps a NaN: one cheap pass finds both)
    if np.isnan(least):
        r[np.isnan(r)] = 0
        least = np.minimum.reduce(r)
    if least < 0:  # copysign costs ~5x an add here: only for chunks with negative values
        r += np.copysign(half, r)
    else:
        r += half
    np.copyto(out, r, casting="unsafe")
    if big is not None and np.fmax.reduce(x) >= big:  # (fmax: a NaN does not hide the rest)
        out[x >= big] = top


def _cast_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``cast`` and ``cast_like``: to the inferred output type (``dtype``, or ``like``'s)."""
    npd = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
    bd = inputs[0]
    if bd.dense is not None:
        return saturate_cast(bd.dense, npd)
    return [saturate_cast(s, npd) for s in bd.samples]


CAST = OpSchema(
    "cast",
    args={"dtype": Arg(DTYPE, required=True, doc="output element type")},
    infer=_cast_infer,
    doc="Convert the elements to ``dtype``, saturating as DALI's Cast does: floats going to "
        "integers are rounded to nearest (ties away from zero) and clamped to the target's "
        "range (NaN gives 0); integers are clamped to the target's range.",
)

CAST_LIKE = OpSchema(
    "cast_like",
    inputs=("input", "like"),
    infer=lambda inputs, args: [OutMeta(inputs[1].dtype, inputs[0].ndim, inputs[0].layout)],
    device_inputs=1,  # runs where ``input`` is: ``like``'s data is not read
    doc="``cast`` of ``input`` to the element type of ``like`` (whose data is not read).",
)

# -- subscript: Tensor[...] and Batch.slice[...] ---------------------------------
# The index is normalised to a template of components: ("i", v), ("s", start, stop,
# step), ("e",) for Ellipsis and ("n",) for None; a value may be ("$", k), meaning
# "the per-sample value of extra input k".


def _component_value(v: Any, extra: list, is_batch: bool) -> Any:
    if v is None or isinstance(v, (int, np.integer)):
        return None if v is None else int(v)
    if isinstance(v, Batch):
        if not is_batch:
            raise TypeError("A Batch index needs a Batch to index (use batch.slice[...]).")
        extra.append(v)
        return ("$", len(extra))
    if isinstance(v, Tensor):
        return int(v.item())
    raise TypeError(f"Invalid index component of type {type(v).__name__}")


def _normalise(index: Any, is_batch: bool) -> tuple[tuple, list]:
    if not isinstance(index, tuple):
        index = (index,)
    extra: list = []
    comps = []
    for c in index:
        if c is Ellipsis:
            comps.append(("e",))
        elif c is None:
            comps.append(("n",))
        elif isinstance(c, slice):
            comps.append(("s",) + tuple(_component_value(v, extra, is_batch)
                                         for v in (c.start, c.stop, c.step)))
        else:
            comps.append(("i", _component_value(c, extra, is_batch)))
    if sum(1 for c in comps if c[0] == "e") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    return tuple(comps), extra


def _expand(template: tuple, ndim: int) -> tuple:
    used = sum(1 for c in template if c[0] in "is")
    if used > ndim:
        raise IndexError(f"too many indices: {used} for a sample of {ndim} dimension(s)")
    out = []
    for c in template:
        if c[0] == "e":
            out.extend([("s", None, None, None)] * (ndim - used))
        else:
            out.append(c)
    if not any(c[0] == "e" for c in template):
        out.extend([("s", None, None, None)] * (ndim - used))
    return tuple(out)


def _subscript_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    comps = _expand(args["index"], m.ndim)
    ndim = sum(1 for c in comps if c[0] in "sn")
    layout = None
    if m.layout and not any(c[0] == "n" for c in comps):
        axes = [c for c in comps if c[0] in "is"]
        layout = "".join(ch for ch, c in zip(m.layout, axes) if c[0] == "s") or None
    return [OutMeta(m.dtype, ndim, layout)]


def _resolve(v: Any, extras: list[BatchData], i: int) -> Any:
    if isinstance(v, tuple):
        return int(extras[v[1] - 1].sample(i))
    return v


def _subscript_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd, extras = inputs[0], inputs[1:]
    comps = args["index"]
    if not ctx.is_batch:
        s = bd.sample(0)
        return s[tuple(_to_index(c, extras, 0) for c in _expand(comps, s.ndim))][None]
    if not extras and bd.dense is not None:
        full = _expand(comps, bd.dense.ndim - 1)
        idx = tuple(_to_index(c, extras, 0) for c in full)
        return bd.dense[(slice(None),) + idx]
    out = []
    for i, s in enumerate(bd.samples):
        full = _expand(comps, s.ndim)
        out.append(s[tuple(_to_index(c, extras, i) for c in full)])
    return out


def _to_index(c: tuple, extras: list[BatchData], i: int) -> Any:
    if c[0] == "i":
        return _resolve(c[1], extras, i)
    if c[0] == "n":
        return None
    return slice(*(_resolve(v, extras, i) for v in c[1:]))


SUBSCRIPT = OpSchema(
    "_subscript", variadic=True, args={"index": Arg(ANY, required=True)},
    infer=_subscript_infer, internal=True,
)


def subscript(x: Tensor | Batch, index: Any) -> Any:
    """``x[index]`` for a Tensor, or per-sample indexing for a Batch (``.slice``)."""
    is_batch = isinstance(x, Batch)
    template, extra = _normalise(index, is_batch)
    _expand(template, x.ndim)  # raises IndexError now for too many indices
    return _dispatch.call(SUBSCRIPT, (x, *extra), {"index": template})


# -- copies to the GPU ---------------------------------------------------------------


def _to_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Upload a CPU batch to ``ctx.device`` through the GPU backend, on the context's stream."""
    be = _convert.gpu_backend()
    bd, dev, ec = inputs[0], ctx.device.device_id, ctx.eval_context
    if bd.dense is not None:
        return be.to_device(bd.dense, dev, ec)
    return [be.to_device(s, dev, ec) for s in bd.samples]


def upload_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """Graph host stage of an upload (see ``Plan.graph_host``): the host batch's arrays,
    one dense array or one per sample."""
    bd = inputs[0]
    if bd.dense is not None:
        return [np.asarray(bd.dense)], "dense"
    return [np.asarray(s) for s in bd.samples], "samples"


def upload_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    """Graph device stage of an upload: the uploaded arrays are the result."""
    return uploaded[0] if inputs[0].dense is not None else list(uploaded)


_to_gpu.graph_stages = (upload_host, upload_device)  # type: ignore[attr-defined]

TO_DEVICE = OpSchema(
    "_to_device", infer=lambda inputs, args: [inputs[0]], internal=True, capturable=True,
    doc="A batch copied to another device: ``Batch.gpu()`` calls it, so capture mode replays the copy.",
)


def to_device(b: Batch, device: Device) -> Batch:
    """``b`` (on the CPU) copied to GPU ``device``, as an operator call."""
    _convert.gpu_backend()  # a clear error now when no usable GPU backend is installed
    return _dispatch.call(TO_DEVICE, (b,), {"device": device})


BUILTINS = ((CAST, _cast_cpu), (CAST_LIKE, _cast_cpu), (SUBSCRIPT, _subscript_cpu), *RANDOM_OPS)


def register(reg: Registry) -> None:
    """Entry point of core's own operators (group ``ndd.ops``)."""
    from ._arith import ARITH_OPS
    from ._shape_ops import SHAPE_OPS

    for schema, kernel in BUILTINS + ARITH_OPS + SHAPE_OPS:
        reg.add_schema(schema)
        reg.add_kernel(schema.name, "cpu", kernel)
    reg.add_schema(TO_DEVICE)
    reg.add_kernel(TO_DEVICE.name, "gpu", _to_gpu)
    from ._schemas_image import IMAGE_SCHEMAS

    for s in IMAGE_SCHEMAS:
        reg.add_schema(s)
