"""Colour operators on the GPU with torch: ``brightness_contrast``, ``hsv``, ``color_twist``.

The per-sample gains, offsets and 3x3 matrices come from the CPU's functions
(``brightness_contrast_params``, ``hsv_params``, ``color_twist_params``).
brightness_contrast uint8 -> uint8 looks the values up in per-sample tables built on
the host exactly as the CPU builds its ``cv2.LUT`` tables (bit-exact); everything
else is float32 arithmetic (``x * g + o``, or one batched matrix product for the
colour matrices) followed by a rounding, saturating cast.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    brightness_contrast_params,
    color_twist_params,
    hsv_params,
    saturate_cast,
)

from ._common import as_float, cast_to, numpy_dtype, out_dtype, stacked, upload


def _per_sample_shape(x: torch.Tensor, n: int) -> tuple[int, ...]:
    return (n,) + (1,) * (x.ndim - 1)


def brightness_contrast_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    first = bd.sample(0)
    in_dt = numpy_dtype(first.dtype)
    dt = out_dtype(ctx)
    gains, offsets = brightness_contrast_params(args, n, in_dt, numpy_dtype(dt))
    x = stacked(bd)
    if in_dt == np.uint8 and dt == torch.uint8:
        luts = saturate_cast(np.arange(256) * np.array(gains)[:, None] + np.array(offsets)[:, None], np.uint8)
        t = upload(luts, first.device)  # (rounded half away from zero, as the CPU's tables)
        if x is not None:
            flat = x.reshape(n, -1).long()
            return t.gather(1, flat).reshape(x.shape)
        return [t[i][s.long()] for i, s in enumerate(bd.samples)]
    go = np.array([gains, offsets], np.float32)
    t = upload(go, first.device)
    if x is not None:
        shape = _per_sample_shape(x, n)
        return cast_to(as_float(x) * t[0].reshape(shape) + t[1].reshape(shape), dt)
    return [cast_to(as_float(s) * t[0, i] + t[1, i], dt) for i, s in enumerate(bd.samples)]


def _apply_affine(ctx: KernelContext, bd: BatchData, first: torch.Tensor, mats: list[np.ndarray],
                  offs: list[np.ndarray], dt: torch.dtype) -> Any:
    """out_i = mats[i] @ pixel + offs[i] for every RGB pixel of sample i (float32); ``first``
    is sample 0."""
    n = len(bd)
    if first.shape[-1] != 3:
        raise ValueError(f"Operator `{ctx.op}`: expects 3 channels, got {first.shape[-1]}")
    m = np.stack([mi.T for mi in mats]).astype(np.float32)  # (n, 3, 3): pixel row @ m
    o = np.stack(offs).astype(np.float32)[:, None, :]  # (n, 1, 3)
    dev = first.device
    tm, to = upload(m, dev), upload(o, dev)
    x = stacked(bd)
    if x is not None:
        y = torch.baddbmm(to, as_float(x).reshape(n, -1, 3), tm)
        return cast_to(y.reshape(x.shape), dt)
    return [cast_to(torch.addmm(to[i], as_float(s).reshape(-1, 3), tm[i]).reshape(s.shape), dt)
            for i, s in enumerate(bd.samples)]


def hsv_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    dt = out_dtype(ctx)
    first = bd.sample(0)
    mats, offs = hsv_params(args, n, numpy_dtype(first.dtype), numpy_dtype(dt))
    return _apply_affine(ctx, bd, first, mats, offs, dt)


def color_twist_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    dt = out_dtype(ctx)
    first = bd.sample(0)
    mats, offs = color_twist_params(args, n, numpy_dtype(first.dtype), numpy_dtype(dt))
    return _apply_affine(ctx, bd, first, mats, offs, dt)
