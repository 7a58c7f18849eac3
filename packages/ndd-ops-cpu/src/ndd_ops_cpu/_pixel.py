"""Per-pixel operators on the CPU: ``color_space_conversion``, ``lookup_table``, ``erase``.

The recipes, tables, regions and fill values come from core (``ndd.plugins``), shared
with the GPU kernels; here they are applied with NumPy. Colour conversions run their
float32 steps one operation at a time, in the recipe's order, so the results are DALI
2.4's to the bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
    lookup_indices,
    lookup_table_array,
)

from ._common import cast_to, map_samples


def _pick(x: np.ndarray, channels: tuple[int, ...]) -> np.ndarray:
    return x if channels == tuple(range(x.shape[-1])) else x[..., list(channels)]


def convert_colors(x: np.ndarray, conv: ColorConversion) -> np.ndarray:
    """uint8 pixels ``x`` (channels last) converted by the recipe ``conv``."""
    src = _pick(x, conv.source)
    if conv.kind == "copy":
        y = src
    elif conv.kind == "gray":
        acc = sum(src[..., k].astype(np.int32) * w for k, w in enumerate(GRAY_WEIGHTS))
        y = ((acc + (1 << 14)) >> 15).astype(np.uint8)[..., None]
    else:
        m, pre, post = conv.matrix, conv.pre, conv.post
        cols = range(m.shape[1])
        chans = [src[..., k].astype(np.float32) - pre[k] if pre[k] else src[..., k].astype(np.float32)
                 for k in cols]
        rows = []
        for j in range(len(m)):
            acc = None
            for k in cols:
                if m[j, k]:
                    term = chans[k] * m[j, k]
                    acc = term if acc is None else acc + term
            if acc is None:
                acc = np.zeros(x.shape[:-1], np.float32)
            if post[j]:
                acc = acc + post[j]
            rows.append(cast_to(acc, np.uint8))
        y = np.stack(rows, -1)
    return np.ascontiguousarray(_pick(y, conv.target))


def _check_channels(op: str, samples: list[np.ndarray], conv: ColorConversion, name: str) -> None:
    for i, s in enumerate(samples):
        if s.shape[-1] != conv.in_channels:
            raise ValueError(f"Operator `{op}`: '{name}' needs {conv.in_channels} channel(s), sample {i} "
                             f"has {s.shape[-1]}")


def color_space_conversion_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    conv = color_conversion(ctx.op, args["image_type"], args["output_type"])
    _check_channels(ctx.op, bd.samples, conv, f"image_type={args['image_type'].name}")
    if bd.dense is not None:
        return convert_colors(bd.dense, conv)
    samples = bd.samples
    return map_samples(ctx, lambda i: convert_colors(samples[i], conv), len(samples),
                       sum(s.nbytes for s in samples))


def lookup_table_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    dt = ctx.output_meta[0].dtype.numpy_dtype
    table = lookup_table_array(args["keys"], args["values"], args["default_value"], dt)
    n = len(table) - 1
    full: dict[np.dtype, np.ndarray] = {}

    def run(x: np.ndarray) -> np.ndarray:
        if x.dtype in (np.uint8, np.uint16):  # one table over every input value
            if x.dtype not in full:
                full[x.dtype] = table[lookup_indices(np.arange(np.iinfo(x.dtype).max + 1), n)]
            return full[x.dtype][x]
        return table[lookup_indices(x, n)]

    bd = inputs[0]
    if bd.dense is not None:
        return run(bd.dense)
    return [run(s) for s in bd.samples]


def _erase_one(op: str, args: KernelArgs, i: int, x: np.ndarray, layout: str | None, lead: int = 0
               ) -> np.ndarray:
    """Sample ``i``'s regions erased in a copy of ``x`` (with ``lead`` leading batch axes)."""
    shape = x.shape[lead:]
    out = x.copy()
    regions = erase_regions(op, args, i, shape, erase_axes(op, args, layout, len(shape)))
    if not regions:
        return out
    fill, c = erase_fill(op, args, i, x.dtype, shape, layout)
    for box in regions:
        val = fill if c is None else fill[box[c]].reshape((-1,) + (1,) * (len(shape) - 1 - c))
        out[(slice(None),) * lead + box] = val
    return out


def erase_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    layout = ctx.input_layouts[0]
    shared = not any(args.is_per_sample(k) for k in ("anchor", "shape", "fill_value"))
    if bd.dense is not None and shared and len(bd):
        return _erase_one(ctx.op, args, 0, bd.dense, layout, lead=1)
    return [_erase_one(ctx.op, args, i, s, layout) for i, s in enumerate(bd.samples)]
