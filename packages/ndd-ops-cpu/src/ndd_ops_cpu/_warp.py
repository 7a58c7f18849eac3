"""``rotate`` and ``warp_affine`` through OpenCV.

Coordinates follow DALI: a matrix maps the output point (x + 0.5, y + 0.5) to a
continuous input point whose pixel centres sit at i + 0.5; without
``fill_value`` the border pixel is repeated. OpenCV puts pixel centres at
integers, so each matrix is shifted by half a pixel on both sides.

Two paths, both with the matrices of the whole batch computed together in NumPy:

* small images of one shape (the MNIST loop): ONE ``cv2.remap`` for the whole
  batch (:func:`_mosaic_warp`). The samples are tiled into one mosaic, each tile
  with a margin of the fill value wide enough for every coordinate the matrices
  can reach (or, when that margin would be large and always without
  ``fill_value``, coordinates clamped to the tile), and the per-pixel source
  coordinates of all samples come from one small matrix product. The output
  maps put the samples side by side (rows of ``n * out_w`` pixels, so OpenCV's
  SIMD loop never hits a short row) and are un-tiled with one transposing copy.
* ragged batches, large images, 2 or more than 4 channels: one
  ``cv2.warpAffine`` per sample (:func:`_warp`).

Measured on this 2-core box (kernel only, µs per batch of 64 uint8 grey images,
keep_size, angles in +-7.5 deg, OpenCV 5.0, best of 7, box shared with other jobs):
28x28 loop 821 / mosaic 298; 32x32 898 / 397; 40x40 972 / 2377; 64x64 1368 / 2647.
Per pixel ``remap`` costs as much as ``warpAffine`` (~2 ns); the mosaic only saves the
per-call overhead, and between 32x32 and 40x40 its cost jumps ~6x (not explained yet;
maybe ``remap``'s internal blocking once a map row passes ~2048 pixels), so it is used up
to ``_MOSAIC_MAX_PIXELS`` (32x32).

The two paths differ by at most 1 grey level (uint8, LINEAR), in about 1 pixel
in 2000: OpenCV 5's ``warpAffine`` computes each source coordinate in float32
as ``fma(M0, x, float(float(M1*y) + M2))`` and interpolates in float, and
``remap`` with float maps interpolates the same way, but in the mosaic the
coordinate carries the tile offset (up to a few hundred pixels), so it is
rounded to float32 at a coarser step (2**-16 instead of ~2**-19 px): the
bilinear weights move by ~1e-5 and a value that sat within ~0.005 of a
rounding boundary can round the other way. float32 images differ by ~1e-5
relative for the same reason. NN (both paths) rebuilds warpAffine's float32 coordinate and
picks the pixel whose area holds it, ties up (:func:`_nn_round`; OpenCV's own rounding
changed between versions), before adding the integer tile offset.
"""

from __future__ import annotations

import functools
from typing import Any

import cv2
import numpy as np

from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    check_hw_layout,
    pixel_maps,
    rotate_params,
    warp_affine_params,
    warp_fill,
)
from ndd.types import DALIInterpType

from ._common import CV_INTERP, cast_to, map_samples


def _to_cv(m: np.ndarray) -> np.ndarray:
    """Shift a pixel-corner matrix to OpenCV's pixel-centre convention."""
    out = m.astype(np.float64).copy()
    out[:, 2] = m[:, :2] @ [0.5, 0.5] + m[:, 2] - 0.5
    return out


# Largest sample (h * w) that takes the one-remap path; above it the per-sample warpAffine
# loop is as fast or faster (numbers in the module docstring).
_MOSAIC_MAX_PIXELS = 32 * 32
_CV_MAX = 32767  # cv2.remap wants every image and map extent below SHRT_MAX


def _cv_mats(m: np.ndarray) -> np.ndarray:
    """:func:`_to_cv` for a stack of matrices (n, 2, 3)."""
    out = np.array(m, np.float64)
    out[:, :, 2] = m[:, :, :2] @ [0.5, 0.5] + m[:, :, 2] - 0.5
    return out


@functools.lru_cache(maxsize=16)
def _features(oh: int, ow: int) -> np.ndarray:
    """[x, y, 1] for every output pixel, row-major, (oh * ow, 3) float32 (read-only)."""
    feat = np.ones((oh, ow, 3), np.float32)
    feat[:, :, 0] = np.arange(ow)
    feat[:, :, 1] = np.arange(oh)[:, None]
    feat.flags.writeable = False
    return feat.reshape(oh * ow, 3)


def _mosaic_warp(imgs: np.ndarray, mats: np.ndarray, out_hw: tuple[int, int], interp: Any,
                 fill: float | None) -> np.ndarray:
    """Warp ``imgs`` (n, h, w[, c]; uint8 or float32; c in 1, 3, 4) with the OpenCV
    (pixel-centre, output-to-input) matrices ``mats`` (n, 2, 3) to (n, oh, ow[, c]) in one
    ``cv2.remap``. See the module docstring for the layout and the rounding."""
    n, h, w = imgs.shape[:3]
    ch = imgs.shape[3:]
    oh, ow = out_hw
    nearest = interp == cv2.INTER_NEAREST
    # The map is one matrix product: pixel (y, x) has features [x, y, 1]; column (i, k) of
    # `coef` holds row k of sample i's matrix, so the product is coordinate k of sample i.
    coef = mats.transpose(2, 0, 1).reshape(3, 2 * n)
    # Where can the maps reach? Affine: the extremes sit at the corners of the output grid.
    corners = np.array([[0.0, 0.0, 1.0], [ow - 1, 0.0, 1.0], [0.0, oh - 1, 1.0], [ow - 1, oh - 1, 1.0]])
    sxy = (corners @ coef).reshape(4 * n, 2)
    reach = max(-sxy.min(), (sxy.max(axis=0) - (w - 1, h - 1)).max(), 0.0)
    # A margin of `pad` fill pixels before every tile (shared with the tile before it)
    # covers every pixel bilinear sampling touches; beyond the last tile remap's own
    # constant border supplies the fill. Without fill_value, or when the margin would
    # be large, coordinates are clamped to the tile (plus 1 fill pixel) instead.
    pad = int(np.ceil(reach)) + 1
    clamp = fill is None or pad > max(h, w, 4)
    if clamp:
        pad = 1
    th, tw = h + pad, w + pad
    g = int(np.ceil(np.sqrt(n)))
    r = -(-n // g)
    fv = warp_fill(fill, imgs.dtype)
    mos = np.full((r * th, g * tw) + ch, fv, imgs.dtype)
    v = mos.reshape((r, th, g, tw) + ch)
    full = n // g
    if full:
        v[:full, pad:, :, pad:] = imgs[:full * g].reshape((full, g, h, w) + ch).swapaxes(1, 2)
    if full < r:
        v[full, pad:, :n - full * g, pad:] = imgs[full * g:].swapaxes(0, 1)
    idx = np.arange(n)
    offs = np.stack([(idx % g) * tw + pad, (idx // g) * th + pad], axis=1).reshape(2 * n)
    # One two-channel float map of shape (oh, ow * n, 2): output row y holds pixel x of
    # every sample, then pixel x + 1 of every sample, ...
    feat = _features(oh, ow)
    if nearest:
        # warpAffine's own float32 arithmetic, fma(M0, x, float(float(M1 * y) + M2)) (the FMA
        # done exactly in float64), so that coordinates on a half pixel round the same way.
        c32 = coef.astype(np.float32)
        rp = (feat[::ow, 1:2] * c32[1]).astype(np.float32) + c32[2]  # (oh, 2n)
        xy = rp[:, None, :].astype(np.float64) + feat[:ow, :1].astype(np.float64) * c32[0].astype(np.float64)
        xy = _nn_round(xy.astype(np.float32)).astype(np.float32).reshape(oh * ow, 2 * n)
    elif clamp:
        xy = feat @ coef.astype(np.float32)
    else:
        c = coef.astype(np.float32)
        c[2] += offs
        xy = feat @ c
    xy = xy.reshape(oh, ow * n, 2)
    if nearest or clamp:
        if clamp:
            lo = -1.0 if fill is not None else 0.0
            hi = (w, h) if fill is not None else (w - 1, h - 1)
            for k in (0, 1):
                np.clip(xy[..., k], lo, hi[k], out=xy[..., k])
        xy.reshape(oh, ow, n, 2)[...] += offs.astype(np.float32).reshape(n, 2)
    out = cv2.remap(mos, xy, None, interp, borderMode=cv2.BORDER_CONSTANT, borderValue=(float(fv),) * 4)
    return out.reshape((oh, ow, n) + ch).transpose((2, 0, 1) + tuple(range(3, 3 + len(ch))))


def _batch_warp(bd: BatchData, mats: np.ndarray, out_hw: np.ndarray, interp: Any,
                fill: float | None, dtype: np.dtype) -> Any:
    """The whole batch through :func:`_mosaic_warp` (dense result, or a list when the output
    sizes differ); None when the per-sample loop should run instead."""
    n = len(bd)
    if n < 2:
        return None
    s0 = bd.dense[0] if bd.dense is not None else bd.samples[0]
    if s0.ndim not in (2, 3) or (s0.ndim == 3 and s0.shape[2] not in (1, 3, 4)):
        return None
    h, w = s0.shape[:2]
    if h * w > _MOSAIC_MAX_PIXELS or h == 0 or w == 0 or not bd.is_uniform():
        return None
    oh, ow = (int(v) for v in out_hw.max(axis=0))
    areas = out_hw[:, 0] * out_hw[:, 1]
    if oh * ow * n > 2 * int(areas.sum()) or oh * ow == 0 or ow >= _CV_MAX or oh >= _CV_MAX:
        return None  # very different output sizes: the shared grid would waste the work
    imgs = bd.dense if bd.dense is not None else np.stack(bd.samples)
    if imgs.dtype not in (np.uint8, np.float32) or np.dtype(dtype).kind == "f":
        imgs = imgs.astype(np.float32, copy=False)  # (a float output is not rounded on the way)
    mc = _cv_mats(mats)
    if interp != DALIInterpType.INTERP_NN and pixel_maps(mc).any() and (
            (fill is not None and not np.isfinite(fill)) or (imgs.dtype.kind == "f" and not np.isfinite(imgs).all())):
        return None  # NaN or inf near a sample turned by 90 degrees: sample by sample, read exactly
    # remap extents stay below SHRT_MAX: one call per chunk of samples (one for any
    # realistic batch of small images).
    tile = max(h, w) + max(h, w, 4) + 1  # the largest tile pitch _mosaic_warp uses
    k = max(1, min(n, (_CV_MAX - 1) // ow, ((_CV_MAX - 1) // tile) ** 2))
    parts = [_mosaic_warp(imgs[i:i + k], mc[i:i + k], (oh, ow), CV_INTERP[interp], fill)
             for i in range(0, n, k)]
    res = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if (areas == oh * ow).all():
        return cast_to(res, dtype)
    return [cast_to(res[i, :int(out_hw[i, 0]), :int(out_hw[i, 1])], dtype) for i in range(n)]


def _nn_round(x: np.ndarray) -> np.ndarray:
    """The pixel (OpenCV's pixel-centre coordinates, float32) that nearest-neighbour sampling
    reads: the one whose area holds the point, ties up (DALI's floor of the pixel-corner
    coordinate). OpenCV's own warpAffine rounds ties half to even up to 5.0 and half up
    from 5.1 (keeping a point on the far edge inside): not used for NN, so that results do
    not depend on its version."""
    return np.floor(x.astype(np.float64) + 0.5)


def _warp_nearest(src: np.ndarray, m: np.ndarray, out_hw: tuple[int, int], fill: float | None) -> np.ndarray:
    """NN warp of one HWC / HW image with the OpenCV matrix ``m`` (2, 3): each source
    coordinate computed as warpAffine computes it, ``fma(M0, x, float(float(M1 * y) + M2))``
    in float32, then :func:`_nn_round`; one gather."""
    oh, ow = out_hw
    h, w = src.shape[:2]
    m32 = m.astype(np.float32)
    ys = np.arange(oh, dtype=np.float32)[:, None]
    xs = np.arange(ow, dtype=np.float64)[None, :]
    ix, iy = (_nn_round((((ys * m32[k, 1]).astype(np.float32) + m32[k, 2]).astype(np.float64)
                         + xs * np.float64(m32[k, 0])).astype(np.float32)) for k in (0, 1))
    out = src[np.clip(iy, 0, h - 1).astype(np.intp), np.clip(ix, 0, w - 1).astype(np.intp)]
    if fill is not None:
        out[(ix < 0) | (ix >= w) | (iy < 0) | (iy >= h)] = warp_fill(fill, src.dtype)
    return out


def _warp(img: np.ndarray, m: np.ndarray, out_hw: tuple[int, int], interp: Any, fill: float | None,
          dtype: np.dtype) -> np.ndarray:
    src = img if img.dtype in (np.uint8, np.float32) and np.dtype(dtype).kind != "f" else img.astype(np.float32)
    flags = CV_INTERP[interp] | cv2.WARP_INVERSE_MAP
    c = src.shape[2] if src.ndim == 3 else 0
    if out_hw[0] == 0 or out_hw[1] == 0:  # (OpenCV takes an empty size for the input's)
        return np.zeros(tuple(out_hw[:2]) + src.shape[2:], dtype)
    if fill is None:
        border, value = cv2.BORDER_REPLICATE, 0
    else:  # as the image stores it (passed raw, OpenCV wraps a huge uint8 fill through int)
        border, value = cv2.BORDER_CONSTANT, (float(warp_fill(fill, src.dtype)),) * 4
    mc = _to_cv(m)
    size = (out_hw[1], out_hw[0])
    if interp == DALIInterpType.INTERP_NN or pixel_maps(mc):
        out = _warp_nearest(src, np.round(mc) if interp != DALIInterpType.INTERP_NN else mc,
                            (int(out_hw[0]), int(out_hw[1])), fill)
    elif c == 2 or c > 4:
        # OpenCV warps at most 4 channels at a time, and 2 on a coarser fixed-point grid than
        # 1, 3 or 4 (up to 5 levels off): those one by one
        step = 1 if c == 2 else 4
        out = np.concatenate([_warp(np.ascontiguousarray(src[..., k:k + step]), m, out_hw, interp, fill, src.dtype)
                              for k in range(0, c, step)], axis=2)
    else:
        out = cv2.warpAffine(src, mc, size, flags=flags, borderMode=border, borderValue=value)
        if src.ndim == 3 and out.ndim == 2:
            out = out[..., None]
    return cast_to(out, dtype)


def rotate_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    dense = bd.dense
    samples = [dense[0]] if dense is not None and len(dense) else bd.samples
    check_hw_layout(ctx, samples)
    dt = ctx.output_meta[0].dtype.numpy_dtype
    interp, fill = args["interp_type"], args["fill_value"]
    n = len(bd)
    if dense is not None:
        in_hw = np.tile(np.array(dense.shape[1:3], np.int64), (n, 1))
    else:
        in_hw = np.array([s.shape[:2] for s in samples], np.int64).reshape(n, 2)
    mats, out_hw = rotate_params(ctx.op, args, in_hw)
    res = _batch_warp(inputs[0], mats, out_hw, interp, fill, dt)
    if res is not None:
        return res
    samples = bd.samples
    sizes = [tuple(int(v) for v in hw) for hw in out_hw]
    return map_samples(ctx, lambda i: _warp(samples[i], mats[i], sizes[i], interp, fill, dt),
                       n, sum(s.nbytes for s in samples))


def warp_affine_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    samples = inputs[0].samples
    check_hw_layout(ctx, samples)
    mtx = inputs[1] if len(inputs) > 1 else None
    dt = ctx.output_meta[0].dtype.numpy_dtype
    interp, fill = args["interp_type"], args["fill_value"]
    mats, out_hw = warp_affine_params(ctx.op, args, mtx, [s.shape[:2] for s in samples])
    if samples:
        res = _batch_warp(inputs[0], mats, out_hw, interp, fill, dt)
        if res is not None:
            return res
    sizes = [tuple(int(v) for v in hw) for hw in out_hw]
    return map_samples(ctx, lambda i: _warp(samples[i], mats[i], sizes[i], interp, fill, dt),
                       len(samples), sum(s.nbytes for s in samples))
