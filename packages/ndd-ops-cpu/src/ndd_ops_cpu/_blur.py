"""``gaussian_blur`` on the CPU: separable float32 filtering, the border mirrored without
repeating the edge (reflect-101), as DALI's; the result converted with rounding and
saturation.

Images with two adjacent blurred axes (H, W) and at most 4 channels after them go through
OpenCV's ``sepFilter2D`` (SIMD, releases the GIL); anything else (volumes, CHW, more
channels) through the NumPy filter below, which computes the same sums.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext, blur_axes, gaussian_taps, reflect101

from ._common import cast_to, map_samples

_CV_TYPES = (np.uint8, np.uint16, np.int16, np.float32, np.float64)


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
    if not axes:
        return cast_to(x, dt)
    tail = int(np.prod(x.shape[axes[-1] + 1:])) if axes[-1] + 1 < x.ndim else 1
    if len(axes) == 2 and axes[1] == axes[0] + 1 and x.dtype in _CV_TYPES and tail <= 4:
        y = _blur_cv(x, axes, taps)
    else:
        y = _blur_numpy(x, axes, taps)
    return cast_to(y, dt)


def gaussian_blur_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    samples = inputs[0].samples
    dt = ctx.output_meta[0].dtype.numpy_dtype
    layout = ctx.input_layouts[0]
    out = map_samples(ctx, lambda i: blur_one(ctx.op, args, i, samples[i], layout, dt), len(samples),
                      sum(s.nbytes for s in samples))
    if len(out) > 1 and all(o.shape == out[0].shape for o in out):
        return np.stack(out)
    return out
