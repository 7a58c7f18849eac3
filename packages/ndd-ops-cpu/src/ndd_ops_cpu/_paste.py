"""Kernels of the paste family: ``coord_flip``, ``paste``, ``bbox_paste``, ``bbox_rotate``,
``multi_paste``.

Coordinates are computed in float32 in DALI 2.4's order, so the results match it to the bit
(observed on random inputs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext, coord_flip_axes, paste_geometry

from ._common import batch_nbytes, map_samples, sample_name

_F32 = np.float32


def _floats(args: KernelArgs, name: str, n: int) -> np.ndarray:
    """Per-sample float32 values of a scalar argument, shape (n,)."""
    if args.is_per_sample(name):
        return args[name].array().reshape(n).astype(_F32)
    return np.full(n, args[name], _F32)


# -- coord_flip -------------------------------------------------------------------


def coord_flip_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``coord_flip``: a flipped coordinate v becomes 2 * center - v."""
    bd = inputs[0]
    n = len(bd)
    flips = [(args.per_sample(f"flip_{c}"), _floats(args, f"center_{c}", n)) for c in "xyz"]
    samples = bd.samples
    if bd.dense is not None:
        shapes = [bd.dense.shape[1:]]
    else:
        shapes = [s.shape for s in samples]
    cols_of = {sh[1]: coord_flip_axes(ctx.op, args["layout"], sh[1]) for sh in set(shapes)}
    if bd.dense is not None and n:
        out = bd.dense.copy()
        for col, (flip, center) in zip(cols_of[shapes[0][1]], flips):
            on = np.array([bool(f) for f in flip])
            out[on, :, col] = _F32(2) * center[on, None] - out[on, :, col]
        return out
    outs = []
    for i, s in enumerate(samples):
        o = s.copy()
        for col, (flip, center) in zip(cols_of[s.shape[1]], flips):
            if flip[i]:
                o[:, col] = _F32(2) * center[i] - o[:, col]
        outs.append(o)
    return outs


# -- paste ------------------------------------------------------------------------


def paste_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``paste``: each image on a canvas of fill_value (see ``paste_geometry``)."""
    bd = inputs[0]
    fill = np.asarray(args["fill_value"], np.int64).astype(np.uint8)  # wraps modulo 256, as DALI
    n_channels = args["n_channels"]

    def one(i: int) -> np.ndarray:
        img = bd.samples[i]
        h, w, c = img.shape
        if len(fill) > 1 and c != n_channels:
            raise ValueError(f"Operator `paste`: {sample_name(ctx, bd, i)} has {c} channels, but "
                             f"'fill_value' gives {len(fill)} (n_channels = {n_channels})")
        ch, cw, y, x = paste_geometry(ctx.op, h, w, args.sample("ratio", i), args.sample("paste_x", i),
                                      args.sample("paste_y", i), args.sample("min_canvas_size", i),
                                      sample_name(ctx, bd, i))
        out = np.empty((ch, cw, c), np.uint8)
        out[...] = fill
        out[y:y + h, x:x + w] = img
        return out

    return map_samples(ctx, one, len(bd), batch_nbytes(bd.samples))


# -- bbox_paste -------------------------------------------------------------------


def bbox_paste_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``bbox_paste``: corners c * (1 / ratio) + paste * ((ratio - 1) / ratio), sizes
    w * (1 / ratio) (float32, DALI's order of operations)."""
    bd = inputs[0]
    n = len(bd)
    ratio = _floats(args, "ratio", n)
    bad = np.flatnonzero(~(ratio >= 1))
    if bad.size:  # (DALI gives boxes that ignore paste_x and paste_y there)
        i = int(bad[0])
        raise ValueError(f"Operator `bbox_paste`: argument 'ratio' must be at least 1, got {ratio[i]} "
                         f"({sample_name(ctx, bd, i)})")
    scale = _F32(1) / ratio
    move = (ratio - _F32(1)) / ratio
    shift = np.stack([_floats(args, "paste_x", n) * move, _floats(args, "paste_y", n) * move], axis=1)
    shift = np.concatenate([shift, shift if args["ltrb"] else np.zeros_like(shift)], axis=1)
    samples = bd.samples
    for i, s in enumerate(samples):
        if s.size % 4:
            raise ValueError(f"Operator `bbox_paste`: {sample_name(ctx, bd, i)} holds {s.size} values, "
                             "not a multiple of 4 (boxes of 4 coordinates)")
    if bd.dense is not None and n:
        d = bd.dense.reshape(n, -1, 4)
        return (d * scale[:, None, None] + shift[:, None, :]).reshape(bd.dense.shape)
    return [(s.reshape(-1, 4) * scale[i] + shift[i]).reshape(s.shape) for i, s in enumerate(samples)]
