"""Kernels of the operators DALI runs only on the GPU (schemas in core's ``_schemas_gpu_only``):
``jitter``, ``experimental.median_blur``, ``experimental.dilate``/``erode`` and
``experimental.remap`` (``experimental.resize`` is ``resize``'s kernel).

The window filters bring the image axes (H, W) last, every other axis (channels, frames)
in front, so that one call filters all the planes of a sample; each window is read with
``unfold`` from a copy of the plane extended at its borders.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd._schemas_gpu_only import anchor, filter_layout, window
from ndd.plugins import BatchData, KernelArgs, KernelContext
from ndd.types import DALIInterpType

from ._common import cast_to, upload

# Types torch cannot sort or compare in all its kernels: computed in a wider signed one.
_WIDER = {torch.uint16: torch.int32, torch.uint32: torch.int64}


def _planes(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, Any]:
    """``x`` as (planes, H, W) and the function that puts a result back in ``x``'s layout."""
    h, w = layout.index("H"), layout.index("W")
    moved = x.movedim((h, w), (-2, -1))
    front = moved.shape[:-2]

    def back(y: torch.Tensor) -> torch.Tensor:
        return y.reshape(front + y.shape[-2:]).movedim((-2, -1), (h, w)).contiguous()

    return moved.reshape((-1,) + moved.shape[-2:]), back


def border_indices(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Indices into an axis of ``n`` for the positions ``-before .. n + after - 1`` under a
    border mode (replicate, reflect, reflect_101, wrap); -1 marks a position outside (constant)."""
    i = np.arange(-before, n + after)
    if mode == "constant":
        return np.where((i >= 0) & (i < n), i, -1)
    if mode == "replicate" or n == 1:
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    if mode == "reflect":  # fedcba|abcdef|fedcba: period 2n
        j = np.mod(i, 2 * n)
        return np.where(j < n, j, 2 * n - 1 - j)
    j = np.mod(i, 2 * n - 2)  # reflect_101, gfedcb|abcdefgh|gfedcba: period 2n - 2
    return np.where(j < n, j, 2 * n - 2 - j)


def _extended(p: torch.Tensor, pads: tuple[int, int, int, int], mode: str, fill: Any) -> torch.Tensor:
    """Planes (n, H, W) extended by (top, bottom, left, right) pixels under ``mode``; positions
    outside the image under ``constant`` hold ``fill``."""
    top, bottom, left, right = pads
    ys = border_indices(p.shape[1], top, bottom, mode)
    xs = border_indices(p.shape[2], left, right, mode)
    out = p[:, upload(np.maximum(ys, 0), p.device)][:, :, upload(np.maximum(xs, 0), p.device)]
    if mode == "constant" and ((ys < 0).any() or (xs < 0).any()):
        outside = upload((ys < 0)[:, None] | (xs < 0)[None, :], p.device)
        out = out.masked_fill(outside, fill)
    return out


def _windows(p: torch.Tensor, kh: int, kw: int) -> torch.Tensor:
    """(n, H, W, kh * kw): the window at each position of extended planes (n, H+kh-1, W+kw-1)."""
    u = p.unfold(1, kh, 1).unfold(2, kw, 1)
    return u.reshape(u.shape[:3] + (kh * kw,))


def _each_sample(ctx: KernelContext, bd: BatchData, fn: Any, per_sample: bool) -> Any:
    """``fn(i, planes)`` for each sample as (planes, H, W), back in the sample's layout; a dense
    batch with arguments shared by its samples in one call (``fn(0, planes of all)``)."""
    if bd.dense is not None and len(bd) and bd.dense.numel() and not per_sample:
        x = bd.dense
        layout = "N" + filter_layout(ctx.op, ctx.input_layouts[0], x.ndim - 1)
        p, back = _planes(x, layout)
        wide = _WIDER.get(p.dtype)
        y = fn(0, p if wide is None else p.to(wide))
        return back(y if wide is None else y.to(p.dtype))
    out = []
    for i in range(len(bd)):
        x = bd.sample(i)
        layout = filter_layout(ctx.op, ctx.input_layouts[0], x.ndim)
        if not x.numel():
            out.append(x.clone())
            continue
        p, back = _planes(x, layout)
        wide = _WIDER.get(p.dtype)
        y = fn(i, p if wide is None else p.to(wide))
        out.append(back(y if wide is None else y.to(p.dtype)))
    return out


def median_blur_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The median of each (odd-sized) window, the edge pixels replicated past the border."""

    def run(i: int, p: torch.Tensor) -> torch.Tensor:
        kw, kh = window(ctx.op, "window_size", args.sample("window_size", i), i, odd=True)
        ext = _extended(p, (kh // 2, kh // 2, kw // 2, kw // 2), "replicate", 0)
        return _windows(ext, kh, kw).median(dim=-1).values

    return _each_sample(ctx, inputs[0], run, args.is_per_sample("window_size"))


def _morphology(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs, dilate: bool) -> Any:
    """Each pass starts from CV-CUDA's identity value, ``numeric_limits<T>::min()`` for a
    dilation and ``max()`` for an erosion, which also fills a constant border: for float32
    the smallest *positive* float (a dilation clamps negative results to it) and the largest
    finite one (an erosion clamps +inf to it)."""
    mode = args["border_mode"]

    def run(i: int, p: torch.Tensor) -> torch.Tensor:
        kw, kh = window(ctx.op, "mask_size", args.sample("mask_size", i), i)
        ax, ay = anchor(ctx.op, args.sample("anchor", i), (kw, kh), i)
        info = torch.finfo(p.dtype) if p.dtype.is_floating_point else torch.iinfo(p.dtype)
        start = (info.tiny if p.dtype.is_floating_point else info.min) if dilate else info.max
        for _ in range(args["iterations"]):
            ext = _extended(p, (ay, kh - 1 - ay, ax, kw - 1 - ax), mode, start)
            win = _windows(ext, kh, kw)
            p = win.amax(dim=-1).clamp(min=start) if dilate else win.amin(dim=-1).clamp(max=start)
        return p if args["iterations"] else p.clone()

    return _each_sample(ctx, inputs[0], run, args.is_per_sample("mask_size") or args.is_per_sample("anchor"))


def dilate_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The maximum over the structuring element at each pixel, ``iterations`` times."""
    return _morphology(ctx, inputs, args, True)


def erode_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The minimum over the structuring element at each pixel, ``iterations`` times."""
    return _morphology(ctx, inputs, args, False)


# -- jitter ------------------------------------------------------------------------------------


def _generator(ctx: KernelContext) -> np.random.Generator:
    """The call's NumPy Philox generator, keyed by its random state's 7 words."""
    w = [int(x) for x in ctx.random_state]
    return np.random.Generator(np.random.Philox(key=[w[0] | w[1] << 32, w[2] | w[3] << 32],
                                                counter=[w[4], w[5], w[6], 0]))


def jitter_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each pixel (all its channels) taken from ``(y + dy, x + dx)`` clamped to the image, with
    ``dy, dx`` uniform whole numbers in ``[-(nDegree // 2), nDegree - nDegree // 2]``, drawn on
    the host from the call's Philox stream (sample after sample, (dy, dx) per pixel in row
    order) and uploaded."""
    bd = inputs[0]
    gen = _generator(ctx)
    n = args["nDegree"]
    out = []
    for i in range(len(bd)):
        x = bd.sample(i)
        h, w = x.shape[:2]
        if not int(args.sample("mask", i)) or not x.numel():
            out.append(x.clone())
            continue
        d = gen.integers(0, n + 1, size=(2, h, w), dtype=np.int64) - n // 2
        ys = np.clip(np.arange(h)[:, None] + d[0], 0, h - 1)
        xs = np.clip(np.arange(w)[None, :] + d[1], 0, w - 1)
        out.append(x[upload(ys, x.device), upload(xs, x.device)])
    return out


# -- remap ------------------------------------------------------------------------------------------


def _map(op: str, name: str, m: torch.Tensor, hw: tuple[int, int], i: int) -> torch.Tensor:
    """A map as (frames or 1, H, W) float32; checked against the image's (H, W)."""
    if m.ndim >= 3 and m.shape[-1] == 1 and tuple(m.shape[-3:-1]) == hw:
        m = m[..., 0]
    if tuple(m.shape[-2:]) != hw or m.ndim not in (2, 3):
        raise ValueError(f"Operator `{op}`: input '{name}' of sample {i} has shape {tuple(m.shape)}; "
                         f"expected the image's (H, W) = {hw}, optionally with frames first or a channel of 1")
    return m.reshape((-1,) + hw)


def _tap(x: torch.Tensor, yi: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
    """Pixels ``x[f, yi, xi]`` of frames (F, H, W, C) at integer coordinates (F or 1, H', W'); 0 outside."""
    f, h, w = x.shape[:3]
    inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
    frame = torch.arange(f, device=x.device)[:, None, None]
    return x[frame, yi.clamp(0, h - 1), xi.clamp(0, w - 1)] * inside[..., None]


def _sample(x: torch.Tensor, my: torch.Tensor, mx: torch.Tensor, nearest: bool) -> torch.Tensor:
    """float32 frames (F, H, W, C) sampled at (my, mx), pixel centres at whole coordinates."""
    if nearest:
        return _tap(x, torch.floor(my + 0.5).long(), torch.floor(mx + 0.5).long())
    x0, y0 = torch.floor(mx), torch.floor(my)
    fx, fy = (mx - x0)[..., None], (my - y0)[..., None]
    x0, y0 = x0.long(), y0.long()
    top = _tap(x, y0, x0) * (1 - fx) + _tap(x, y0, x0 + 1) * fx
    bottom = _tap(x, y0 + 1, x0) * (1 - fx) + _tap(x, y0 + 1, x0 + 1) * fx
    return top * (1 - fy) + bottom * fy


def remap_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``out(y, x) = in(mapy(y, x), mapx(y, x))``: nearest pixel or bilinear interpolation (float32
    weights), pixels outside the input reading 0; "corner" origin shifts the maps by -0.5."""
    bd, bx, by = inputs
    shift = 0.5 if args["pixel_origin"] == "corner" else 0.0
    nearest = args["interp"] == DALIInterpType.INTERP_NN
    out = []
    for i in range(len(bd)):
        img = bd.sample(i)
        x = img if img.ndim == 4 else img[None]  # (F, H, W, C)
        f, h, w = x.shape[:3]
        mx = _map(ctx.op, "mapx", bx.sample(i), (h, w), i) - shift
        my = _map(ctx.op, "mapy", by.sample(i), (h, w), i) - shift
        if mx.shape[0] not in (1, f) or my.shape[0] not in (1, f):
            raise ValueError(f"Operator `{ctx.op}`: the maps of sample {i} have {mx.shape[0]} and {my.shape[0]} "
                             f"frames; the input has {f}")
        if not x.numel():
            out.append(img.clone())
            continue
        y = cast_to(_sample(x.float(), my, mx, nearest), x.dtype)
        out.append(y if img.ndim == 4 else y[0])
    return out
