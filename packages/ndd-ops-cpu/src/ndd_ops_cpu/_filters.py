"""Filter operators on the CPU: ``laplacian``.

Each partial derivative is a separable correlation in float32, one axis at a time from
the innermost spatial axis outwards, the border mirrored without repeating the edge
(reflect-101, again and again on axes shorter than the window); the partials are scaled
and summed in axis order and the sum converted with rounding and saturation. That order
gives DALI 2.4's float results to the bit. A dense batch with shared arguments is
filtered in one pass, with the batch as a leading axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndd._schemas_filters import filter_axes, laplacian_windows
from ndd.plugins import BatchData, KernelArgs, KernelContext, reflect101

from ._common import cast_to, map_samples


def _correlate_axis(y: np.ndarray, ax: int, w: np.ndarray) -> np.ndarray:
    """``y`` (float32) correlated with the centred taps ``w`` along axis ``ax``, reflect-101."""
    n, r = y.shape[ax], len(w) // 2
    src = np.take(y, reflect101(n, r), axis=ax)
    acc = np.zeros_like(y)
    sl = [slice(None)] * y.ndim
    for k, wk in enumerate(w):
        if wk:
            sl[ax] = slice(k, k + n)
            acc += wk * src[tuple(sl)]
    return acc


def laplacian_one(x: np.ndarray, axes: tuple[int, ...], windows: list[tuple[list[np.ndarray], float]],
                  dt: np.dtype) -> np.ndarray:
    """The Laplacian of ``x`` along ``axes`` with one sample's windows, as ``dt``."""
    if not x.size:
        return np.zeros(x.shape, dt)
    src = x.astype(np.float32)
    out = None
    for taps, scale in windows:
        y = src
        for ax, w in reversed(list(zip(axes, taps))):
            if len(w) > 1:
                y = _correlate_axis(y, ax, w)
        y = np.float32(scale) * y
        out = y if out is None else out + y
    return cast_to(out, dt)


_LAPLACIAN_ARGS = ("window_size", "smoothing_size", "scale")


def laplacian_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    dt = ctx.output_meta[0].dtype.numpy_dtype
    layout = ctx.input_layouts[0]
    ndim = samples[0].ndim if samples else 0
    axes = filter_axes(ctx.op, layout, ndim)
    if bd.dense is not None and len(samples) > 1 and not any(args.is_per_sample(k) for k in _LAPLACIAN_ARGS):
        windows = laplacian_windows(ctx.op, args, 0, len(axes))
        return laplacian_one(bd.dense, tuple(a + 1 for a in axes), windows, dt)

    def one(i: int) -> np.ndarray:
        return laplacian_one(samples[i], axes, laplacian_windows(ctx.op, args, i, len(axes)), dt)

    return map_samples(ctx, one, len(samples), sum(s.nbytes for s in samples))
