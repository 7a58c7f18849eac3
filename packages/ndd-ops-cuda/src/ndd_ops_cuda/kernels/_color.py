"""Colour operators on the GPU with torch: ``brightness_contrast``, ``hsv``, ``color_twist``.

The per-sample gains, offsets and 3x3 matrices come from the CPU's functions
(``brightness_contrast_params``, ``hsv_params``, ``color_twist_params``); a device graph
takes them as its input arrays (the graph stages), so random per-sample values replay.
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

from ._common import as_float, cast_to, graph_shape, numpy_dtype, out_dtype, stacked, upload


def _per_sample_shape(x: torch.Tensor, n: int) -> tuple[int, ...]:
    return (n,) + (1,) * (x.ndim - 1)


def _bc_tables(ctx: KernelContext, bd: BatchData) -> bool:
    """Whether brightness_contrast looks uint8 values up in per-sample uint8 tables."""
    return bd.sample(0).dtype == torch.uint8 and out_dtype(ctx) == torch.uint8


def _bc_host(ctx: KernelContext, bd: BatchData, args: KernelArgs) -> np.ndarray:
    """The per-sample tables (n, 256) uint8 or gains and offsets (2, n) float32."""
    n = len(bd)
    gains, offsets = brightness_contrast_params(args, n, numpy_dtype(bd.sample(0).dtype), numpy_dtype(out_dtype(ctx)))
    if _bc_tables(ctx, bd):  # (rounded half away from zero, as the CPU's tables)
        return saturate_cast(np.arange(256, dtype=np.float32) * np.array(gains, np.float32)[:, None]
                             + np.array(offsets, np.float32)[:, None], np.uint8)
    return np.array([gains, offsets], np.float32)


def _bc_apply(ctx: KernelContext, bd: BatchData, t: torch.Tensor) -> Any:
    n, dt = len(bd), out_dtype(ctx)
    x = stacked(bd)
    if _bc_tables(ctx, bd):
        if x is not None:
            return t.gather(1, x.reshape(n, -1).long()).reshape(x.shape)
        return [t[i][s.long()] for i, s in enumerate(bd.samples)]
    if x is not None:
        shape = _per_sample_shape(x, n)
        return cast_to(as_float(x) * t[0].reshape(shape) + t[1].reshape(shape), dt)
    return [cast_to(as_float(s) * t[0, i] + t[1, i], dt) for i, s in enumerate(bd.samples)]


def brightness_contrast_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    if len(bd) == 0:
        return []
    return _bc_apply(ctx, bd, upload(_bc_host(ctx, bd, args), bd.sample(0).device))


def _bc_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    bd = inputs[0]
    return [_bc_host(ctx, bd, args)], (graph_shape(ctx, bd), str(bd.sample(0).dtype))


def _bc_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    return _bc_apply(ctx, inputs[0], uploaded[0])


def _affine_host(ctx: KernelContext, bd: BatchData, mats: list[np.ndarray], offs: list[np.ndarray]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The matrices (n, 3, 3) (pixel row @ m) and offsets (n, 1, 3) of out_i = mats[i] @ pixel
    + offs[i], float32."""
    channels = bd.sample(0).shape[-1]
    if channels != 3:
        raise ValueError(f"Operator `{ctx.op}`: expects 3 channels, got {channels}")
    return np.stack([mi.T for mi in mats]).astype(np.float32), np.stack(offs).astype(np.float32)[:, None, :]


def _affine_apply(ctx: KernelContext, bd: BatchData, tm: torch.Tensor, to: torch.Tensor) -> Any:
    """Every RGB pixel of sample i times ``tm[i]`` plus ``to[i]`` (float32), cast."""
    dt = out_dtype(ctx)
    x = stacked(bd)
    if x is not None:
        y = torch.baddbmm(to, as_float(x).reshape(len(bd), -1, 3), tm)
        return cast_to(y.reshape(x.shape), dt)
    return [cast_to(torch.addmm(to[i], as_float(s).reshape(-1, 3), tm[i]).reshape(s.shape), dt)
            for i, s in enumerate(bd.samples)]


def _affine_params(ctx: KernelContext, bd: BatchData, args: KernelArgs) -> tuple[np.ndarray, np.ndarray]:
    params = hsv_params if ctx.op == "hsv" else color_twist_params
    mats, offs = params(args, len(bd), numpy_dtype(bd.sample(0).dtype), numpy_dtype(out_dtype(ctx)))
    return _affine_host(ctx, bd, mats, offs)


def color_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``hsv`` and ``color_twist``: a 3x3 matrix and an offset per sample."""
    bd = inputs[0]
    if len(bd) == 0:
        return []
    dev = bd.sample(0).device
    m, o = _affine_params(ctx, bd, args)
    return _affine_apply(ctx, bd, upload(m, dev), upload(o, dev))


def _color_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    bd = inputs[0]
    return list(_affine_params(ctx, bd, args)), (graph_shape(ctx, bd), str(bd.sample(0).dtype))


def _color_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    return _affine_apply(ctx, inputs[0], uploaded[0], uploaded[1])
