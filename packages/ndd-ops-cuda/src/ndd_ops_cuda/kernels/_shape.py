"""``pad``, ``one_hot`` and ``slice`` on the device with torch, bit-identical to core's
CPU kernels (``ndd._shape_ops``).

The per-sample windows and padded shapes come from core's own argument helpers, run on
the host on the samples' shapes (which the host knows); only these few numbers are
uploaded, the sample data never leaves the device. The exceptions are slice's anchor and
shape *inputs*: given as device batches, their few numbers are copied to the host, as
DALI also reads them there.

* pad: one ``torch.full`` of the whole output and one slice-assign per batch (per sample
  for a ragged batch) when every sample pads to the same shape; else one per sample.
* one_hot: one comparison with the class indices and one ``masked_fill_``.
* slice: one slice of the dense batch when every sample has the same window; one gather
  (``window`` indices per axis, clamped, a mask for the padding) when the windows differ
  but share their extents; per sample otherwise.

torch has only copies and a few operations for uint16/32/64, so those run on the
signed type of the same size (``.view``: the same bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd._shape_ops import (  # core's argument helpers (the CPU kernels' own)
    _SLICE_ARGS,
    _fill_array,
    _one_hot_axis,
    _pad_axes,
    _pad_target,
    _reshaped,
    _slice_axes,
    _slice_box,
    _slice_window,
)
from ndd.plugins import BatchData, KernelArgs, KernelContext

from ._common import (
    SIGNED_TWIN,
    device_of,
    graph_shape,
    host_batch,
    stacked,
    torch_dtype,
    upload,
    window_cast,
)
from ._core import HOST_KERNELS

_SIGNED_NP = {np.dtype(np.uint16): np.int16, np.dtype(np.uint32): np.int32, np.dtype(np.uint64): np.int64}


def _bits(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a dtype torch fully supports, with the same bits (a view)."""
    dt = SIGNED_TWIN.get(x.dtype)
    return x if dt is None else x.view(dt)


def _np_bits(v: Any) -> np.ndarray:
    """The NumPy counterpart of :func:`_bits`."""
    a = np.asarray(v)
    dt = _SIGNED_NP.get(a.dtype)
    return a if dt is None else a.view(dt)


def _scalar(v: Any) -> Any:
    """A NumPy scalar as the Python number torch fills the :func:`_bits` dtype with."""
    return _np_bits(v).item()


def _fill_tensor(v: Any, dev: torch.device) -> torch.Tensor:
    """Host fill values (already of the output dtype) on the device, in the :func:`_bits` dtype."""
    a = _np_bits(v)
    if a.ndim == 0:
        return torch.full((), a.item(), dtype=torch_dtype(a.dtype), device=dev)  # no upload
    return upload(a, dev)


# -- pad ----------------------------------------------------------------------------


def _region(shape: tuple) -> tuple:
    return tuple(slice(0, d) for d in shape)


def pad_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = ctx.batch_size
    if n == 0:
        return []
    layout = ctx.input_layouts[0]
    ndim = ctx.output_meta[0].ndim
    shapes = [tuple(s) for s in bd.shapes()]
    batch_max = [max(s[a] for s in shapes) for a in range(ndim)]
    per_sample = any(args.is_per_sample(k) for k in ("shape", "align", "axes"))
    if not per_sample and len(set(shapes)) == 1:  # one target for all (as the CPU's dense path)
        targets = [tuple(_pad_target(args, 0, shapes[0], _pad_axes(args, 0, ndim, layout), batch_max))] * n
    else:
        targets = [tuple(_pad_target(args, i, s, _pad_axes(args, i, ndim, layout), batch_max))
                   for i, s in enumerate(shapes)]
    if targets == shapes:  # nothing to pad: the input itself, as on the CPU
        return bd.dense if bd.dense is not None else list(bd.samples)
    npd = ctx.output_meta[0].dtype.numpy_dtype
    # the fill value as np.full casts it to the dtype (float to integer: truncated)
    if args.is_per_sample("fill_value"):
        fills = [np.full((1,), f, npd).reshape(()) for f in args.per_sample("fill_value")]
    else:
        fills = [np.full((), args["fill_value"], npd)] * n
    dev = device_of(ctx, inputs)
    odt = torch_dtype(npd)
    dt = SIGNED_TWIN.get(odt, odt)
    if len(set(targets)) == 1:  # one output tensor for the batch
        out = torch.empty((n,) + targets[0], dtype=dt, device=dev)
        if args.is_per_sample("fill_value"):
            out[...] = upload(_np_bits(np.stack(fills)), dev).reshape((n,) + (1,) * ndim)
        else:
            out.fill_(_scalar(fills[0]))
        if bd.dense is not None:
            out[(slice(None),) + _region(shapes[0])] = _bits(bd.dense)
        else:  # a copy per sample, into the one output
            for i, s in enumerate(bd.samples):
                out[(i,) + _region(shapes[i])] = _bits(s)
        return out.view(odt)
    res = []
    for s, shape, target, f in zip(bd.samples, shapes, targets, fills):
        if shape == target:
            res.append(s)
            continue
        o = torch.full(target, _scalar(f), dtype=dt, device=dev)
        o[_region(shape)] = _bits(s)
        res.append(o.view(odt))
    return res


# -- reshape ------------------------------------------------------------------------


def _reshape_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """Graph host stage of reshape (a view): the output shapes are the signature; shapes
    given as an input must be on the host."""
    shp_in = inputs[1] if len(inputs) > 1 else None
    if shp_in is not None and len(shp_in) and isinstance(shp_in.sample(0), torch.Tensor):
        raise RuntimeError(f"Operator `{ctx.op}`: shapes on the device cannot enter a graph")
    shapes = inputs[0].shapes()
    return [], (tuple(shapes), tuple(_reshaped(args, i, s, shp_in) for i, s in enumerate(shapes)))


def _reshape_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    return HOST_KERNELS["reshape"](ctx, inputs, args)


# -- one_hot ------------------------------------------------------------------------


def one_hot_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    if not len(bd):
        return []
    npd = ctx.output_meta[0].dtype.numpy_dtype
    on, off = np.asarray(args["on_value"]).astype(npd), np.asarray(args["off_value"]).astype(npd)
    axis = _one_hot_axis(args, ctx.output_meta[0].ndim - 1)
    dev = device_of(ctx, inputs)
    odt = torch_dtype(npd)
    bdt = SIGNED_TWIN.get(odt, odt)
    num = args["num_classes"]

    def encode(x: torch.Tensor, ax: int) -> torch.Tensor:
        # NumPy compares the labels with the int64 classes exactly (integers as integers,
        # floats in float64); int64 / float64 here do the same (uint64 labels past 2**63
        # wrap to negative numbers, which match no class either)
        cdt = torch.float64 if x.is_floating_point() else torch.int64
        if x.is_floating_point():  # float labels lose their fraction, as on the CPU
            x = torch.trunc(x)
        hit = (x.to(cdt).unsqueeze(-1) == torch.arange(num, dtype=cdt, device=dev)).movedim(-1, ax)
        out = torch.full(hit.shape, _scalar(off), dtype=bdt, device=dev)
        return out.masked_fill_(hit, _scalar(on)).view(odt)

    x = stacked(bd)
    if x is not None:
        return encode(x, axis + 1)
    return [encode(s, axis) for s in bd.samples]


# -- slice --------------------------------------------------------------------------


def _cut(x: torch.Tensor, box: list, lead: int, fill: torch.Tensor | None, dt: torch.dtype) -> torch.Tensor:
    """The window ``box`` of the sample axes after ``lead`` leading ones; ``fill`` (in the
    :func:`_bits` dtype of ``dt``) where it leaves the input, None when it does not."""
    shape = x.shape[lead:]
    inner = tuple(slice(min(max(st, 0), d), min(max(en, 0), d)) for (st, en), d in zip(box, shape))
    src = x[(slice(None),) * lead + inner]
    if fill is None:  # a view (converted as window_cast says)
        return window_cast(src, dt)
    out = torch.empty(x.shape[:lead] + tuple(en - st for st, en in box), dtype=fill.dtype, device=x.device)
    out[...] = fill
    if src.numel():
        dst = tuple(slice(s.start - st, s.stop - st) for s, (st, _) in zip(inner, box))
        out[(slice(None),) * lead + dst] = _bits(window_cast(src, dt))
    return out.view(dt)


def _window_indices(boxes: list, shape: tuple, masks: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per sample axis, the indices (n, extent) of windows of one size, clamped, and with
    ``masks`` where they fall inside the input."""
    index, valid = [], []
    for a, d in enumerate(shape):
        st = np.array([b[a][0] for b in boxes], np.int64)[:, None]
        pos = st + np.arange(boxes[0][a][1] - boxes[0][a][0])
        index.append(np.clip(pos, 0, max(d - 1, 0)))
        ok = (pos >= 0) & (pos < d)
        if masks:
            valid.append(ok)
    return index, valid


def _gather(x: torch.Tensor, index: list[torch.Tensor], valid: list[torch.Tensor], fill: torch.Tensor | None,
            dt: torch.dtype) -> torch.Tensor:
    """Windows of one size, one per sample of the dense batch ``x``, in one gather with the
    per-axis ``index`` of :func:`_window_indices` (on the device); ``fill`` outside, where
    the per-axis ``valid`` masks (if any) say."""
    n, k = x.shape[0], x.ndim - 1

    def along(a: int, t: torch.Tensor) -> torch.Tensor:  # (n, extent) broadcast along axis a
        return t.reshape((n,) + (1,) * a + (t.shape[1],) + (1,) * (k - a - 1))

    idx = [torch.arange(n, device=x.device).reshape((n,) + (1,) * k)] + [along(a, t) for a, t in enumerate(index)]
    out = window_cast(_bits(x)[tuple(idx)].view(x.dtype), dt)
    if valid:
        mask = along(0, valid[0])
        for a, v in enumerate(valid[1:], 1):
            mask = mask & along(a, v)
        out = torch.where(mask, _bits(out), fill).view(dt)
    return out


def _host_arg(bd: BatchData | None) -> BatchData | None:
    """An anchor / shape input on the host: a few numbers per sample (a small device-to-host
    copy, which synchronises; DALI reads these on the host too)."""
    if bd is None or not len(bd) or not isinstance(bd.sample(0), torch.Tensor):
        return bd
    return host_batch(bd)


def _slice_plans(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> list[tuple[list, Any]]:
    """Each sample's window and its fill values (None: no padding), computed and checked as
    the CPU kernel does (one window for all when nothing is per sample and the samples
    share a shape, as the CPU's dense path; else sample after sample: the same error first)."""
    bd = inputs[0]
    anchor = _host_arg(inputs[1] if len(inputs) > 1 else None)
    shp = _host_arg(inputs[2] if len(inputs) > 2 else None)
    layout = ctx.input_layouts[0]
    npd = ctx.output_meta[0].dtype.numpy_dtype
    policy, fill_values, names = args["out_of_bounds_policy"], args["fill_values"], args["axis_names"]
    shapes = [tuple(s) for s in bd.shapes()]

    def plan(i: int, shape: tuple, axes: tuple, anchor_i: Any, shape_i: Any) -> tuple[list, Any]:
        box, pad = _slice_window(_slice_box(args, i, shape, axes, anchor_i, shape_i), shape, policy)
        return box, (_fill_array(fill_values, tuple(en - st for st, en in box), layout, npd) if pad else None)

    if anchor is None and shp is None and not any(args.is_per_sample(a) for a in _SLICE_ARGS) \
            and len(set(shapes)) == 1:
        return [plan(0, shapes[0], _slice_axes(names, args["axes"], len(shapes[0]), layout), None, None)] * len(bd)
    return [plan(i, s, _slice_axes(names, args.sample("axes", i), len(s), layout),
                 None if anchor is None else anchor.sample(i), None if shp is None else shp.sample(i))
            for i, s in enumerate(shapes)]


def _extent(box: list) -> tuple[int, ...]:
    return tuple(en - st for st, en in box)


def slice_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    if not len(bd):
        return []
    dt = torch_dtype(ctx.output_meta[0].dtype.numpy_dtype)
    plans = _slice_plans(ctx, inputs, args)
    shapes = [tuple(s) for s in bd.shapes()]
    dev = device_of(ctx, inputs)
    boxes = [box for box, _ in plans]
    x = stacked(bd) if len(set(shapes)) == 1 and 0 not in shapes[0] else None
    if x is not None:
        if all(box == boxes[0] for box in boxes):
            f = plans[0][1]
            return _cut(x, boxes[0], 1, None if f is None else _fill_tensor(f, dev), dt)
        if len({_extent(box) for box in boxes}) == 1:
            # windows of one size: every one that pads has the same fill values
            f = next((f for _, f in plans if f is not None), None)
            index, valid = _window_indices(boxes, shapes[0], f is not None)
            return _gather(x, [upload(i, dev) for i in index], [upload(v, dev) for v in valid],
                           None if f is None else _fill_tensor(f, dev), dt)
    return [_cut(s, box, 0, None if f is None else _fill_tensor(f, dev), dt)
            for s, (box, f) in zip(bd.samples, plans)]


def _slice_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """Graph host stage of slice: windows of one size in a batch of one shape, anchors and
    shapes given on the host (random draws, say). One window for all without padding is a
    slice (the window in the signature); else each axis's gather indices, and with the "pad"
    policy each axis's mask and the fill values, are input arrays."""
    bd = inputs[0]
    shape = graph_shape(ctx, bd)
    if any(x is not None and len(x) and isinstance(x.sample(0), torch.Tensor) for x in inputs[1:]):
        raise RuntimeError(f"Operator `{ctx.op}`: anchors or shapes on the device cannot enter a graph")
    plans = _slice_plans(ctx, inputs, args)
    boxes = [box for box, _ in plans]
    size = _extent(boxes[0])
    if 0 in shape or any(_extent(box) != size for box in boxes):
        raise RuntimeError(f"Operator `{ctx.op}`: a graph takes windows of one size in samples that are not empty")
    pad = args["out_of_bounds_policy"] == "pad"  # (masks and fill whether or not this step pads)
    sig = (len(bd), shape, str(bd.sample(0).dtype))
    if not pad and all(box == boxes[0] for box in boxes):
        return [], (sig, tuple(map(tuple, boxes[0])))
    index, valid = _window_indices(boxes, shape, pad)
    if not pad:
        return index, (sig, size, False)
    fill = _fill_array(args["fill_values"], size, ctx.input_layouts[0], ctx.output_meta[0].dtype.numpy_dtype)
    return index + valid + [_np_bits(fill)], (sig, size, True)


def _slice_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    x = stacked(inputs[0])
    dt = torch_dtype(ctx.output_meta[0].dtype.numpy_dtype)
    if not uploaded:  # the one window of the signature
        return _cut(x, _slice_plans(ctx, inputs, args)[0][0], 1, None, dt)
    k = x.ndim - 1
    index, rest = uploaded[:k], uploaded[k:]
    return _gather(x, index, rest[:k], rest[k] if rest else None, dt)
