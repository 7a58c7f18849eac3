"""Colour operators: ``brightness_contrast``, ``hsv``, ``color_twist``.

All three are per-pixel affine maps. uint8 -> uint8 goes through OpenCV
(``cv2.LUT`` for brightness/contrast, ``cv2.transform`` for the 3x3 colour
matrices; both saturate and release the GIL); other types through NumPy.
Values are converted between the input and output ranges (uint8: 255, float: 1)
when ``dtype`` differs from the input type.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext
from ndd.types import DALIImageType

from ._common import cast_to, map_samples

_RGB2YIQ = np.array([[0.299, 0.587, 0.114],
                     [0.596, -0.274, -0.322],
                     [0.211, -0.523, 0.312]])
_YIQ2RGB = np.linalg.inv(_RGB2YIQ)


def type_range(dt: np.dtype) -> float:
    """The nominal maximum of a type: 1 for floats, the largest value for integers."""
    dt = np.dtype(dt)
    return 1.0 if dt.kind == "f" else float(np.iinfo(dt).max)


def half_range(dt: np.dtype) -> float:
    """DALI's default contrast centre: 0.5 for floats, 2**(bits-1) (unsigned) or 2**(bits-2) (signed)."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return 0.5
    return float(1 << (dt.itemsize * 8 - 1 - (dt.kind == "i")))


def hsv_matrix(hue: float, saturation: float, value: float) -> np.ndarray:
    """RGB -> RGB matrix: rotate the hue by ``hue`` degrees, scale chroma and luma, in YIQ space."""
    a = math.radians(hue)
    c, s = math.cos(a), math.sin(a)
    m = np.array([[value, 0, 0],
                  [0, value * saturation * c, -value * saturation * s],
                  [0, value * saturation * s, value * saturation * c]])
    return _YIQ2RGB @ m @ _RGB2YIQ


def _apply_affine(ctx: KernelContext, bd: BatchData, mats: list[np.ndarray], offs: list[np.ndarray],
                  dt: np.dtype) -> Any:
    """out_i = mats[i] @ pixel + offs[i] for every RGB pixel of sample i."""
    samples = bd.samples
    n = len(samples)
    same = all(np.array_equal(mats[0], m) and np.array_equal(offs[0], o) for m, o in zip(mats, offs))

    def run(x: np.ndarray, m: np.ndarray, o: np.ndarray) -> np.ndarray:
        if x.dtype == np.uint8 and dt == np.uint8:
            flat = np.ascontiguousarray(x).reshape(-1, x.shape[-2], 3)
            return cv2.transform(flat, np.hstack([m, o[:, None]])).reshape(x.shape)
        y = x.astype(np.float32) @ m.T.astype(np.float32) + o.astype(np.float32)
        return cast_to(y, dt)

    if same and bd.dense is not None:
        return run(bd.dense, mats[0], offs[0])
    return map_samples(ctx, lambda i: run(samples[i], mats[i], offs[i]), n, sum(s.nbytes for s in samples))


def _channels(ctx: KernelContext, bd: BatchData, want: tuple[int, ...]) -> int:
    c = bd.samples[0].shape[-1] if len(bd) else want[0]
    if c not in want:
        raise ValueError(f"Operator `{ctx.op}`: expects {' or '.join(map(str, want))} channels, got {c}")
    return c


def brightness_contrast_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    in_dt = bd.samples[0].dtype
    dt = ctx.output_meta[0].dtype.numpy_dtype
    k = type_range(dt) / type_range(in_dt)
    gains, offsets = [], []
    for i in range(n):
        b = float(args.sample("brightness", i))
        sh = float(args.sample("brightness_shift", i))
        ct = float(args.sample("contrast", i))
        cc = args.sample("contrast_center", i)
        cc = half_range(in_dt) if cc is None else float(cc)
        gains.append(k * b * ct)
        offsets.append(k * b * cc * (1 - ct) + sh * type_range(dt))
    samples = bd.samples

    def run(x: np.ndarray, g: float, o: float) -> np.ndarray:
        if x.dtype == np.uint8 and dt == np.uint8:
            lut = np.clip(np.rint(np.arange(256) * g + o), 0, 255).astype(np.uint8)
            flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1] if x.ndim > 1 else 1)
            return cv2.LUT(flat, lut).reshape(x.shape)
        return cast_to(x.astype(np.float32) * np.float32(g) + np.float32(o), dt)

    if bd.dense is not None and len(set(zip(gains, offsets))) == 1:
        return run(bd.dense, gains[0], offsets[0])
    return map_samples(ctx, lambda i: run(samples[i], gains[i], offsets[i]), n, sum(s.nbytes for s in samples))


def hsv_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    _channels(ctx, bd, (3,))
    in_dt = bd.samples[0].dtype
    dt = ctx.output_meta[0].dtype.numpy_dtype
    k = type_range(dt) / type_range(in_dt)
    mats = [k * hsv_matrix(float(args.sample("hue", i)), float(args.sample("saturation", i)),
                           float(args.sample("value", i))) for i in range(n)]
    return _apply_affine(ctx, bd, mats, [np.zeros(3)] * n, dt)


def color_twist_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``brightness * (contrast * (HS(rgb) - half) + half)``, HS the hue/saturation matrix."""
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    _channels(ctx, bd, (3,))
    in_dt = bd.samples[0].dtype
    dt = ctx.output_meta[0].dtype.numpy_dtype
    k = type_range(dt) / type_range(in_dt)
    half = half_range(in_dt)
    swap = np.eye(3)[::-1] if args["image_type"] == DALIImageType.BGR else np.eye(3)
    mats, offs = [], []
    for i in range(n):
        b, ct = float(args.sample("brightness", i)), float(args.sample("contrast", i))
        hs = swap @ hsv_matrix(float(args.sample("hue", i)), float(args.sample("saturation", i)), 1.0) @ swap
        mats.append(k * b * ct * hs)
        offs.append(np.full(3, k * b * (1 - ct) * half))
    return _apply_affine(ctx, bd, mats, offs, dt)
