"""Image augmentations on the CPU: ``equalize``, ``grid_mask``, ``jpeg_compression_distortion``,
``clahe`` and ``debayer``.

DALI 2.4's CPU operators run OpenCV (equalizeHist, JPEG through imencode/imdecode, CLAHE,
demosaicing); the same OpenCV calls here give its pixels to the bit. ``grid_mask`` repeats
DALI's float32 arithmetic step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import cv2
import numpy as np

from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    bayer_pattern,
    debayer_algorithm,
    grid_mask_keep,
    grid_mask_tile,
)

from ._common import map_samples, sample_name


def _run(ctx: KernelContext, bd: BatchData, fn: Callable[[int, np.ndarray], np.ndarray]) -> list[np.ndarray]:
    """``fn(i, sample i)`` for every sample, on the thread pool when the batch is large."""
    samples = bd.samples
    return map_samples(ctx, lambda i: fn(i, samples[i]), len(samples), sum(s.nbytes for s in samples))


def _where(ctx: KernelContext, bd: BatchData, i: int) -> str:
    return f" ({sample_name(ctx, bd, i)})"


def _frames(x: np.ndarray, layout: str) -> Iterator[int | tuple]:
    """Indices of the frames of ``x`` (one index, ``()``, when the layout has no F)."""
    return iter(range(len(x))) if layout[0] == "F" else iter([()])


def _scalar(args: KernelArgs, name: str, i: int) -> Any:
    """Sample ``i``'s value of a one-value argument (a per-sample value may be shaped (1,))."""
    return np.ravel(args.sample(name, i))[0]


def _not_empty(ctx: KernelContext, bd: BatchData, i: int, h: int, w: int) -> None:
    if h == 0 or w == 0:
        raise ValueError(f"Operator `{ctx.op}`: {sample_name(ctx, bd, i)} is an empty image ({h}x{w} pixels)")


# -- equalize ---------------------------------------------------------------------------

_MAX_CHANNELS = 128  # as DALI's CPU operator


def equalize_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    layout = ctx.output_meta[0].layout
    c_axis = layout.find("C")

    def one(i: int, x: np.ndarray) -> np.ndarray:
        c = x.shape[c_axis] if c_axis >= 0 else 1
        if not 1 <= c <= _MAX_CHANNELS:
            raise ValueError(f"Operator `equalize`: supports 1 to {_MAX_CHANNELS} channels, "
                             f"{sample_name(ctx, bd, i)} has {c}")
        out = np.empty_like(x)
        # planes as (..., C, H, W) views of the input and the output
        src = np.moveaxis(x, c_axis, -3) if c_axis >= 0 else x
        dst = np.moveaxis(out, c_axis, -3) if c_axis >= 0 else out
        if x.size:
            for idx in np.ndindex(src.shape[:-2]):
                dst[idx] = cv2.equalizeHist(np.ascontiguousarray(src[idx]))
        return out

    return _run(ctx, bd, one)


# -- grid_mask --------------------------------------------------------------------------


_GM_ARGS = ("tile", "ratio", "angle", "shift_x", "shift_y")


def grid_mask_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]

    def params(i: int) -> tuple:
        where = _where(ctx, bd, i) if args.is_per_sample("tile") else ""
        return (grid_mask_tile(ctx.op, _scalar(args, "tile", i), where),) + tuple(
            float(_scalar(args, k, i)) for k in _GM_ARGS[1:])

    if bd.dense is not None and len(bd) and not any(args.is_per_sample(k) for k in _GM_ARGS):
        n, h, w = bd.dense.shape[:3]
        keep = grid_mask_keep(h, w, *params(0))
        return bd.dense * keep[None, :, :, None].astype(bd.dense.dtype)  # x * 0 as DALI: NaN stays NaN

    def one(i: int, x: np.ndarray) -> np.ndarray:
        keep = grid_mask_keep(x.shape[0], x.shape[1], *params(i))
        return x * keep[:, :, None].astype(x.dtype)

    return _run(ctx, bd, one)


# -- jpeg_compression_distortion --------------------------------------------------------


def jpeg_roundtrip(rgb: np.ndarray, quality: int) -> np.ndarray:
    """An RGB uint8 image encoded as JPEG (libjpeg-turbo through OpenCV: 4:2:0, integer DCT)
    with ``quality`` and decoded again."""
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise RuntimeError("OpenCV could not encode the image as JPEG")
    return cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def jpeg_compression_distortion_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    layout = ctx.output_meta[0].layout

    def one(i: int, x: np.ndarray) -> np.ndarray:
        if x.shape[-1] != 3:
            raise ValueError(f"Operator `{ctx.op}`: expects RGB images (3 channels, last), "
                             f"{sample_name(ctx, bd, i)} has shape {x.shape}")
        _not_empty(ctx, bd, i, x.shape[-3], x.shape[-2])
        q = min(max(int(_scalar(args, "quality", i)), 1), 100)
        out = np.empty_like(x)
        for f in _frames(x, layout):
            out[f] = jpeg_roundtrip(np.ascontiguousarray(x[f]), q)
        return out

    return _run(ctx, bd, one)


# -- clahe ------------------------------------------------------------------------------


def clahe_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    grid = (args["tiles_x"], args["tiles_y"])
    clip, luma_only = args["clip_limit"], args["luma_only"]

    def one(i: int, x: np.ndarray) -> np.ndarray:
        c = x.shape[2]
        if c not in (1, 3):
            raise ValueError(f"Operator `clahe`: supports 1 or 3 (RGB) channels, {sample_name(ctx, bd, i)} has {c}")
        _not_empty(ctx, bd, i, x.shape[0], x.shape[1])
        eq = cv2.createCLAHE(clipLimit=clip, tileGridSize=grid)
        if c == 3 and luma_only:
            lab = cv2.cvtColor(x, cv2.COLOR_RGB2Lab)
            lab[..., 0] = eq.apply(np.ascontiguousarray(lab[..., 0]))
            return cv2.cvtColor(lab, cv2.COLOR_Lab2RGB)
        return np.stack([eq.apply(np.ascontiguousarray(x[..., k])) for k in range(c)], -1)

    return _run(ctx, bd, one)


# -- debayer ----------------------------------------------------------------------------

_DEBAYER_SUFFIX = {"bilinear_ocv": "2RGB", "edgeaware_ocv": "2RGB_EA", "vng_ocv": "2RGB_VNG", "gray_ocv": "2GRAY"}


def debayer_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    layout = ctx.output_meta[0].layout  # HWC or FHWC
    seq = layout[0] == "F"
    alg = debayer_algorithm(ctx.op, args["algorithm"])
    suffix = _DEBAYER_SUFFIX[alg]
    out_c = 1 if alg == "gray_ocv" else 3

    def _patterns(i: int, frames: int) -> list[str]:
        """Sample ``i``'s Bayer pattern, or one per frame (a per-sample value shaped (frames, 2))."""
        where = _where(ctx, bd, i) if args.is_per_sample("blue_position") else ""
        pos = np.asarray(args.sample("blue_position", i))
        if pos.ndim < 2:
            return [bayer_pattern(ctx.op, pos, where)]
        if len(pos) not in (1, frames):
            raise ValueError(f"Operator `debayer`: argument 'blue_position' has {len(pos)} per-frame values, "
                             f"but the input has {frames} frame(s){where}")
        return [bayer_pattern(ctx.op, p, where) for p in pos]

    def one(i: int, x: np.ndarray) -> np.ndarray:
        if x.ndim == 3 + seq and x.shape[-1] != 1:
            raise ValueError(f"Operator `debayer`: expects single-channel Bayer images, {sample_name(ctx, bd, i)} "
                             f"has {x.shape[-1]} channels")
        h, w = x.shape[seq], x.shape[seq + 1]
        if h % 2 or w % 2:
            raise ValueError(f"Operator `debayer`: height and width must be even, {sample_name(ctx, bd, i)} "
                             f"is {h}x{w}")
        _not_empty(ctx, bd, i, h, w)
        codes = [getattr(cv2, f"COLOR_Bayer{p}{suffix}") for p in _patterns(i, len(x) if seq else 1)]
        planes = x.reshape(x.shape[:seq + 2])
        out = np.empty(planes.shape + (out_c,), x.dtype)
        for f in _frames(x, layout):
            code = codes[f if f != () and len(codes) > 1 else 0]
            out[f] = cv2.cvtColor(np.ascontiguousarray(planes[f]), code).reshape(h, w, out_c)
        return out

    return _run(ctx, bd, one)
