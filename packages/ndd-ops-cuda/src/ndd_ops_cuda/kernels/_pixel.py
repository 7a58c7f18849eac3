"""Per-pixel operators on the GPU with torch: ``color_space_conversion``, ``lookup_table``,
``erase``.

Recipes, tables, regions and fill values come from core, as for the CPU kernels. The
colour conversions run the same float32 operations one at a time (separate multiplies
and adds, never fused) and the same rounding cast, so the results equal the CPU's bit for
bit. Tables are gathered and fills written through same-size signed views, which every
torch device supports for unsigned types.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd.plugins import (
    GRAY_WEIGHTS,
    BatchData,
    ColorConversion,
    KernelArgs,
    KernelContext,
    color_conversion,
    erase_axes,
    erase_fill,
    erase_regions,
    lookup_table_array,
)

from ._common import (
    SIGNED_TWIN,
    cached_constant,
    call_stream,
    cast_to,
    graph_shape,
    numpy_dtype,
    out_dtype,
    stacked,
    upload,
)


def _signed(t: torch.Tensor) -> torch.Tensor:
    """``t`` viewed as the signed type of its size (itself when it is not unsigned 16-64 bit)."""
    s = SIGNED_TWIN.get(t.dtype)
    return t if s is None else t.view(s)


def _pick(x: torch.Tensor, channels: tuple[int, ...]) -> torch.Tensor:
    if channels == tuple(range(x.shape[-1])):
        return x
    # (stacked views rather than indexing with a list, whose index tensor would be an upload:
    # a device graph could not take the call)
    return torch.stack([x[..., c] for c in channels], -1)


def _convert(x: torch.Tensor, conv: ColorConversion) -> torch.Tensor:
    """uint8 pixels ``x`` (channels last) converted by the recipe ``conv`` (see the CPU's)."""
    src = _pick(x, conv.source)
    if conv.kind == "copy":
        y = src
    elif conv.kind == "gray":
        acc = src[..., 0].to(torch.int32) * GRAY_WEIGHTS[0]
        for k in (1, 2):
            acc = acc + src[..., k].to(torch.int32) * GRAY_WEIGHTS[k]
        y = ((acc + (1 << 14)) >> 15).to(torch.uint8).unsqueeze(-1)
    else:
        m, pre, post = conv.matrix, conv.pre, conv.post
        cols = range(m.shape[1])
        chans = [src[..., k].to(torch.float32) - float(pre[k]) if pre[k] else src[..., k].to(torch.float32)
                 for k in cols]
        rows = []
        for j in range(len(m)):
            acc = None
            for k in cols:
                if m[j, k]:
                    term = chans[k] * float(m[j, k])  # (float32 constants: exact as Python floats)
                    acc = term if acc is None else acc + term
            if acc is None:
                acc = torch.zeros(x.shape[:-1], dtype=torch.float32, device=x.device)
            if post[j]:
                acc = acc + float(post[j])
            rows.append(cast_to(acc, torch.uint8))
        y = torch.stack(rows, -1)
    return _pick(y, conv.target).contiguous()


def color_space_conversion_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    conv = color_conversion(ctx.op, args["image_type"], args["output_type"])
    for i, s in enumerate(bd.samples):
        if s.shape[-1] != conv.in_channels:
            raise ValueError(f"Operator `{ctx.op}`: 'image_type={args['image_type'].name}' needs "
                             f"{conv.in_channels} channel(s), sample {i} has {s.shape[-1]}")
    x = stacked(bd)
    if x is not None:
        return _convert(x, conv)
    return [_convert(s, conv) for s in bd.samples]


def lookup_table_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    if not len(bd):
        return []
    dt = out_dtype(ctx)
    table = lookup_table_array(args["keys"], args["values"], args["default_value"], numpy_dtype(dt))
    n = len(table) - 1
    dev = bd.sample(0).device
    # a constant of the arguments, uploaded once (a device graph takes the call)
    t = _signed(cached_constant(("lookup_table", table.dtype.str, table.tobytes(), str(dev)), call_stream(ctx),
                                lambda: upload(table, dev)))

    def run(x: torch.Tensor) -> torch.Tensor:
        # (uint64 values of 2**63 or more read negative: outside the table, as they are)
        idx = x.view(torch.int64) if x.dtype == torch.uint64 else x.to(torch.int64)
        idx = torch.where((idx >= 0) & (idx < n), idx, n)
        return t[idx].view(dt)

    x = stacked(bd)
    if x is not None:
        return run(x)
    return [run(s) for s in bd.samples]


def _erase_one(op: str, args: KernelArgs, i: int, x: torch.Tensor, layout: str | None, lead: int = 0
               ) -> torch.Tensor:
    """Sample ``i``'s regions erased in a copy of ``x`` (with ``lead`` leading batch axes)."""
    shape = tuple(x.shape[lead:])
    out = x.clone()
    regions = erase_regions(op, args, i, shape, erase_axes(op, args, layout, len(shape)))
    if not regions:
        return out
    fill, c = erase_fill(op, args, i, numpy_dtype(x.dtype), shape, layout)
    f = _signed(upload(np.atleast_1d(fill), x.device))
    view = _signed(out)
    for box in regions:
        val = f[0] if c is None else f[box[c]].reshape((-1,) + (1,) * (len(shape) - 1 - c))
        view[(slice(None),) * lead + box] = val
    return out


def erase_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    layout = ctx.input_layouts[0]
    shared = not any(args.is_per_sample(k) for k in ("anchor", "shape", "fill_value"))
    x = stacked(bd) if shared else None
    if x is not None:
        return _erase_one(ctx.op, args, 0, x, layout, lead=1)
    return [_erase_one(ctx.op, args, i, s, layout) for i, s in enumerate(bd.samples)]


def _erase_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """Every sample's erased pixels as a mask (size 1 on the axes the regions cover whole)
    and its fill values, the graph's input arrays: regions that change each step (random
    anchors) replay."""
    bd = inputs[0]
    shape = graph_shape(ctx, bd)
    n, layout, npd = len(bd), ctx.input_layouts[0], numpy_dtype(bd.sample(0).dtype)
    axes = erase_axes(ctx.op, args, layout, len(shape))
    mask = np.zeros((n,) + tuple(d if a in axes else 1 for a, d in enumerate(shape)), bool)
    fills = [erase_fill(ctx.op, args, i, npd, shape, layout) for i in range(n)]
    c = next((ch for _, ch in fills if ch is not None), None)
    fill_shape = tuple(shape[a] if a == c else 1 for a in range(len(shape)))
    fill = np.empty((n,) + fill_shape, npd)
    for i, (f, _) in enumerate(fills):
        fill[i] = f.reshape(fill_shape) if f.ndim else f
        for box in erase_regions(ctx.op, args, i, shape, axes):
            mask[(i,) + tuple(b if a in axes else slice(None) for a, b in enumerate(box))] = True
    return [mask, fill], (shape, npd.str, axes, c)


def _erase_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    x = stacked(inputs[0])
    mask, fill = uploaded
    return torch.where(mask, _signed(fill), _signed(x)).view(x.dtype)
