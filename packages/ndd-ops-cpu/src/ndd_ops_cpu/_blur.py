"""``gaussian_blur`` on the CPU: separable float32 filtering, the border mirrored without
repeating the edge (reflect-101), as DALI's; the result converted with rounding and
saturation.

Images with two adjacent blurred axes (H, W) and at most 4 channels after them go through
OpenCV's ``sepFilter2D`` (SIMD, releases the GIL); anything else (volumes, CHW, more
channels) through the NumPy filter below: the same taps and border, but H first where
OpenCV goes W first, so float results may differ in the last bit (integer ones, rarely, by 1).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext, blur_axes, gaussian_taps, reflect101

from ._common import cast_to, map_samples

# sepFilter2D into float32 reads these (not float64: "unsupported combination of buffer
# format"); other types go through the NumPy filter, also in float32 (as on the GPU)
_CV_TYPES = (np.uint8, np.uint16, np.int16, np.float32)


def _blur_numpy(x: np.ndarray, axes: tuple[int, ...], taps: list[np.ndarray]) -> np.ndarray:
    y = x.astype(np.float32)
    for ax, w in zip(axes, taps):
        n, r = y.shape[ax], len(w) // 2
        src = np.take(y, reflect101(n, r), axis=ax)
        acc = np.zeros_like(y)
        for k, wk in enumerate(w):
            sl = [slice(None)] * y.ndim
            sl[ax] = slice(k, k + n)
            acc += wk * src[tuple(sl)]
        y = acc
    return y


def _blur_cv(x: np.ndarray, hw: tuple[int, int], taps: list[np.ndarray]) -> np.ndarray:
    """Blur along axes ``hw`` (adjacent) of ``x``, whose later axes hold at most 4 channels."""
    h, w = hw
    lead, tail = x.shape[:h], x.shape[w + 1:]
    c = int(np.prod(tail)) if tail else 1
    planes = x.reshape((-1, x.shape[h], x.shape[w], c))
    out = np.empty(planes.shape, np.float32)
    for k, p in enumerate(planes):
        res = cv2.sepFilter2D(p if c > 1 else p[..., 0], cv2.CV_32F, taps[1], taps[0],
                              borderType=cv2.BORDER_REFLECT_101)
        out[k] = res.reshape(out.shape[1:])
    return out.reshape(lead + (x.shape[h], x.shape[w]) + tail)


def blur_one(op: str, args: KernelArgs, i: int, x: np.ndarray, layout: str | None, dt: np.dtype) -> np.ndarray:
    axes = blur_axes(op, layout, x.ndim)
    taps = gaussian_taps(op, args, i, len(axes))
    if not axes or not x.size:  # (an empty image: nothing to blur)
        return cast_to(x, dt)
    tail = int(np.prod(x.shape[axes[-1] + 1:])) if axes[-1] + 1 < x.ndim else 1
    if len(axes) == 2 and axes[1] == axes[0] + 1 and x.dtype in _CV_TYPES and tail <= 4:
        y = _blur_cv(x, axes, taps)
    else:
        y = _blur_numpy(x, axes, taps)
    return cast_to(y, dt)


# OpenCV filters at most 512 channels (CV_CN_MAX); small images of one batch are stacked
# as channels of one image, so that one call does the whole batch.
_CV_MAX_CHANNELS = 512
_SMALL_BYTES = 1 << 16


def _blur_stacked(ctx: KernelContext, d: np.ndarray, args: KernelArgs, layout: str | None,
                  dt: np.dtype) -> np.ndarray | None:
    """The whole dense batch ``d`` in one OpenCV call, when its samples are small HW/HWC
    images with one set of taps; None otherwise."""
    n = d.shape[0]
    axes = blur_axes(ctx.op, layout, d.ndim - 1)
    if axes != (0, 1) or d.dtype not in _CV_TYPES or d[0].nbytes > _SMALL_BYTES or not d.size:
        return None
    chans = int(np.prod(d.shape[3:])) if d.ndim > 3 else 1
    if n * chans > _CV_MAX_CHANNELS:
        return None
    taps = [gaussian_taps(ctx.op, args, i, 2) for i in range(n)]
    if any(not all(np.array_equal(a, b) for a, b in zip(t, taps[0])) for t in taps[1:]):
        return None
    planes = np.moveaxis(d.reshape(n, d.shape[1], d.shape[2], chans), 0, 2).reshape(d.shape[1], d.shape[2], -1)
    res = cv2.sepFilter2D(np.ascontiguousarray(planes), cv2.CV_32F, taps[0][1], taps[0][0],
                          borderType=cv2.BORDER_REFLECT_101)
    res = np.moveaxis(res.reshape(d.shape[1], d.shape[2], n, chans), 2, 0).reshape(d.shape)
    return cast_to(res, dt)


def gaussian_blur_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    samples = inputs[0].samples
    dt = ctx.output_meta[0].dtype.numpy_dtype
    layout = ctx.input_layouts[0]
    if inputs[0].dense is not None and len(samples) > 1:
        out = _blur_stacked(ctx, inputs[0].dense, args, layout, dt)
        if out is not None:
            return out
    out = map_samples(ctx, lambda i: blur_one(ctx.op, args, i, samples[i], layout, dt), len(samples),
                      sum(s.nbytes for s in samples))
    if len(out) > 1 and all(o.shape == out[0].shape for o in out):
        return np.stack(out)
    return out
