"""Operators built into core (registered through the ``ndd.ops`` entry point)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _convert, _dispatch
from ._batch import Batch
from ._device import Device
from ._dispatch import KernelArgs, KernelContext
from ._plugins import Registry
from ._saturate import saturate_cast
from ._schema import ANY, DTYPE, Arg, OpSchema, OutMeta
from ._storage import BatchData
from ._tensor import Tensor
from .random._ops import RANDOM_OPS

# -- cast -------------------------------------------------------------------------


def _cast_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    return [OutMeta(args["dtype"], inputs[0].ndim, inputs[0].layout)]




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
    # results are contiguous copies, as DALI's (a strided view broke .torch().view())
    if not ctx.is_batch:
        s = bd.sample(0)
        return np.ascontiguousarray(s[tuple(_to_index(c, extras, 0) for c in _expand(comps, s.ndim))][None])
    if not extras and bd.dense is not None:
        full = _expand(comps, bd.dense.ndim - 1)
        idx = tuple(_to_index(c, extras, 0) for c in full)
        return np.ascontiguousarray(bd.dense[(slice(None),) + idx])
    out = []
    for i, s in enumerate(bd.samples):
        full = _expand(comps, s.ndim)
        out.append(np.ascontiguousarray(s[tuple(_to_index(c, extras, i) for c in full)]))
    return out


def _to_index(c: tuple, extras: list[BatchData], i: int) -> Any:
    if c[0] == "i":
        return _resolve(c[1], extras, i)
    if c[0] == "n":
        return None
    return slice(*(_resolve(v, extras, i) for v in c[1:]))


SUBSCRIPT = OpSchema(
    "_subscript", variadic=True, args={"index": Arg(ANY, required=True)},
    infer=_subscript_infer, internal=True, host_args_from=1,
)


def subscript(x: Tensor | Batch, index: Any) -> Any:
    """``x[index]`` for a Tensor, or per-sample indexing for a Batch (``.slice``)."""
    is_batch = isinstance(x, Batch)
    template, extra = _normalise(index, is_batch)
    _expand(template, x.ndim)  # raises IndexError now for too many indices
    return _dispatch.call(SUBSCRIPT, (x, *extra), {"index": template})


# -- copies to the GPU ---------------------------------------------------------------


def _to_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Upload CPU batches to ``ctx.device`` through the GPU backend, on the context's stream
    (one output per input)."""
    be = _convert.gpu_backend()
    dev, ec = ctx.device.device_id, ctx.eval_context
    out = [be.to_device(bd.dense, dev, ec) if bd.dense is not None else [be.to_device(x, dev, ec) for x in bd.samples]
           for bd in inputs]
    return out[0] if len(out) == 1 else tuple(out)


def upload_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """Graph host stage of an upload (see ``Plan.graph_host``): each host batch's arrays,
    one dense array or one per sample."""
    arrays, kinds = [], []
    for bd in inputs:
        if bd.dense is not None:
            arrays.append(np.asarray(bd.dense))
            kinds.append("dense")
        else:
            arrays.extend(np.asarray(x) for x in bd.samples)
            kinds.append("samples")
    return arrays, tuple(kinds)


def upload_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    """Graph device stage of an upload: the uploaded arrays are the results."""
    out, at = [], 0
    for bd in inputs:
        n = 1 if bd.dense is not None else len(bd.samples)
        out.append(uploaded[at] if bd.dense is not None else list(uploaded[at:at + n]))
        at += n
    return out[0] if len(out) == 1 else tuple(out)


_to_gpu.graph_stages = (upload_host, upload_device)  # type: ignore[attr-defined]

TO_DEVICE = OpSchema(
    "_to_device", variadic=True, infer=lambda inputs, args: list(inputs), internal=True, capturable=True,
    host_inputs=True,
    doc="Batches copied to another device (one output each): ``Batch.gpu()`` calls it, and an operator "
        "called with device=\"gpu\" on host batches, so capture mode replays the copy.",
)


def to_device(b: Batch, device: Device, *more: Batch) -> Any:
    """``b`` (and ``more``; on the CPU) copied to GPU ``device``, as one operator call: one
    batch, or a tuple of them."""
    _convert.gpu_backend()  # a clear error now when no usable GPU backend is installed
    return _dispatch.call(TO_DEVICE, (b, *more), {"device": device})


BUILTINS = ((CAST, _cast_cpu), (CAST_LIKE, _cast_cpu), (SUBSCRIPT, _subscript_cpu), *RANDOM_OPS)


def register(reg: Registry) -> None:
    """Entry point of core's own operators (group ``ndd.ops``)."""
    from ._arith import ARITH_OPS
    from ._noise import NOISE_OPS
    from ._reductions import REDUCTION_OPS
    from ._shape_ops import SHAPE_OPS
    from ._transforms import TRANSFORM_OPS
    from ._util_ops import UTIL_OPS, alias_schemas

    for schema, kernel in BUILTINS + ARITH_OPS + SHAPE_OPS + TRANSFORM_OPS + REDUCTION_OPS + NOISE_OPS + UTIL_OPS:
        reg.add_schema(schema)
        reg.add_kernel(schema.name, "cpu", kernel)
    reg.add_schema(TO_DEVICE)
    reg.add_kernel(TO_DEVICE.name, "gpu", _to_gpu)
    # Operators whose kernels come from plugins (ndd-ops-cpu, ndd-ops-cuda): schemas only.
    from ._schemas_audio import AUDIO_SCHEMAS
    from ._schemas_augment import AUGMENT_SCHEMAS
    from ._schemas_bbox import BBOX_SCHEMAS
    from ._schemas_dump_inflate import DUMP_INFLATE_SCHEMAS
    from ._schemas_filters import FILTERS_SCHEMAS
    from ._schemas_gpu_only import GPU_ONLY_SCHEMAS
    from ._schemas_image import IMAGE_SCHEMAS
    from ._schemas_paste import PASTE_SCHEMAS
    from ._schemas_pixel import PIXEL_SCHEMAS
    from ._schemas_random_bbox import RANDOM_BBOX_SCHEMAS
    from ._schemas_segmentation import SEGMENTATION_SCHEMAS
    from ._schemas_video import VIDEO_SCHEMAS

    for group in (IMAGE_SCHEMAS, BBOX_SCHEMAS, PIXEL_SCHEMAS, RANDOM_BBOX_SCHEMAS, AUGMENT_SCHEMAS,
                  SEGMENTATION_SCHEMAS, PASTE_SCHEMAS, AUDIO_SCHEMAS, FILTERS_SCHEMAS, alias_schemas(),
                  GPU_ONLY_SCHEMAS, DUMP_INFLATE_SCHEMAS, VIDEO_SCHEMAS):
        for s in group:
            reg.add_schema(s)
