"""Windows and crops: ``crop``, ``flip`` and the window logic the decoders and
``crop_mirror_normalize`` / ``random_resized_crop`` share."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ndd.plugins import (  # noqa: F401 - crop_window, random_windows: used by _decode
    BatchData,
    KernelArgs,
    KernelContext,
    Window,
    batch_windows,
    crop_window,
    fill_vector,
    image_layout,
    random_windows,
    spatial_axes,
)

from ._common import window_cast


def extract(img: np.ndarray, layout: str, win: Window, fill: Any) -> np.ndarray:
    """Copy window ``win`` out of ``img``; parts outside the image get ``fill`` (per channel,
    converted as crop converts: truncated and saturated), or ``fill()`` when a callable (the
    values are checked only when there is padding, as on the GPU)."""
    (y0, x0), (h, w) = win
    ha, wa = spatial_axes(layout)
    H, W = img.shape[ha], img.shape[wa]
    ys, ye = max(y0, 0), min(y0 + h, H)
    xs, xe = max(x0, 0), min(x0 + w, W)
    idx = [slice(None)] * img.ndim
    idx[ha], idx[wa] = slice(ys, ye), slice(xs, xe)
    if ys == y0 and xs == x0 and ye == y0 + h and xe == x0 + w:
        return np.ascontiguousarray(img[tuple(idx)])
    shape = list(img.shape)
    shape[ha], shape[wa] = h, w
    out = np.empty(shape, img.dtype)
    fill = window_cast(np.asarray(fill() if callable(fill) else fill, np.float64), img.dtype)
    if "C" in layout:
        fshape = [1] * img.ndim
        fshape[layout.index("C")] = -1
        out[...] = fill.reshape(fshape)
    else:
        out[...] = fill[0]
    if ye > ys and xe > xs:
        dst = [slice(None)] * img.ndim
        dst[ha], dst[wa] = slice(ys - y0, ye - y0), slice(xs - x0, xe - x0)
        out[tuple(dst)] = img[tuple(idx)]
    return out


def _channels(layout: str, shape: tuple[int, ...]) -> int:
    return shape[layout.index("C")] if "C" in layout else 1


def crop_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    layout = image_layout(ctx, samples[0].ndim) if samples else "HWC"
    ha, wa = spatial_axes(layout)
    policy = args["out_of_bounds_policy"]
    dt = ctx.output_meta[0].dtype.numpy_dtype
    wins = batch_windows(ctx.op, args, [(s.shape[ha], s.shape[wa]) for s in samples], policy)
    if bd.dense is not None and len(set(wins)) == 1:
        (y0, x0), (h, w) = wins[0]
        if y0 >= 0 and x0 >= 0 and y0 + h <= bd.dense.shape[ha + 1] and x0 + w <= bd.dense.shape[wa + 1]:
            idx = [slice(None)] * bd.dense.ndim
            idx[ha + 1], idx[wa + 1] = slice(y0, y0 + h), slice(x0, x0 + w)
            return window_cast(bd.dense[tuple(idx)], dt)
    out = []
    for s, win in zip(samples, wins):
        c = _channels(layout, s.shape)
        fill = functools.partial(fill_vector, ctx.op, args["fill_values"], c)
        out.append(window_cast(extract(s, layout, win, fill), dt))
    return out


def flip_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    if not samples:
        return []
    layout = image_layout(ctx, samples[0].ndim)
    axes = {"horizontal": layout.find("W"), "vertical": layout.find("H"), "depthwise": layout.find("D")}
    n = len(samples)
    flags = {k: np.asarray(args.per_sample(k), bool).reshape(n) for k in axes}
    if axes["depthwise"] < 0:  # ignored without a D axis, as DALI
        flags["depthwise"] = np.zeros(n, bool)
    for k, ax in axes.items():
        if ax < 0 and flags[k].any():
            raise ValueError(f"Operator `{ctx.op}`: argument '{k}': the input layout {layout!r} has no "
                             f"{'WHD'[list(axes).index(k)]} dimension")
    if bd.dense is not None:
        # Whole batch: one copy, then flip the selected samples in place along each axis.
        out = bd.dense.copy()
        for k, ax in axes.items():
            sel = np.flatnonzero(flags[k])
            if sel.size:
                idx = [slice(None)] * out.ndim
                idx[ax + 1] = slice(None, None, -1)
                out[sel] = out[sel][tuple(idx)]
        return out
    out = []
    for i, s in enumerate(samples):
        idx = [slice(None)] * s.ndim
        for k, ax in axes.items():
            if flags[k][i]:
                idx[ax] = slice(None, None, -1)
        out.append(np.ascontiguousarray(s[tuple(idx)]))
    return out
