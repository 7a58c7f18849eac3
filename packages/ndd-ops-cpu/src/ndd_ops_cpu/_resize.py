"""``resize`` and ``random_resized_crop``.

Output size: DALI's rules (resize_attr): ``resize_x``/``resize_y``, ``size``,
``resize_shorter`` (mode not_smaller) or ``resize_longer`` (mode not_larger);
"default" scales missing extents by the geometric mean of the given scales,
"stretch" leaves them unscaled, not_larger / not_smaller keep the aspect ratio
with the smallest / largest scale; ``max_size`` caps each extent (in the
aspect-keeping modes by lowering the common scale). Sizes are rounded half away
from zero, at least 1. A negative size or an ROI with end < start flips. With
``subpixel_scale`` the ROI is adjusted about its centre so that the scale stays
exactly the requested one after rounding.

Resampling: DALI's filters on pixel centres ((x + 0.5) * scale), edges
clamped. Filter choice per axis: ``min_filter`` when the axis shrinks,
``mag_filter`` otherwise (both default to ``interp_type``); with ``antialias``
LINEAR becomes TRIANGULAR when shrinking, and TRIANGULAR, GAUSSIAN, CUBIC and
LANCZOS3 widen by the shrink factor. Three engines, picked per sample:

* OpenCV (``cv2.resize``, or ``cv2.warpAffine`` for a fractional ROI) for plain
  LINEAR: fastest, uint8 results within 1 of exact (fixed-point weights).
* NumPy indexing for NN: the pixel whose area holds the centre, computed as DALI
  computes it (``nn_indices``; OpenCV's nearest modes break near-ties differently).
* Pillow for antialiased TRIANGULAR / CUBIC (a = -0.5) / LANCZOS3: the same
  filters, widened the same way, and faster than anything in NumPy. Pillow drops the
  taps that fall outside the image and renormalises; DALI repeats the edge pixel, so
  the image is first padded with copies of its edge, as far as the ROI (which
  ``subpixel_scale`` often widens a little past the image) and the filter reach.
* When the output is a float type and the input is not, every engine works on float
  input, so the result is not rounded to whole numbers on the way.
* A NumPy separable resampler (below) for the rest: GAUSSIAN, CUBIC / LANCZOS3
  without antialias when shrinking, mixed filters.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
from PIL import Image

from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    axis_kinds,
    axis_taps,
    check_hw_layout,
    check_not_empty,
    pil_edge_pads,
    random_windows,
    random_words,
    resize_filters,
    resize_plans,
)
from ndd.plugins import ResizePlan as Plan
from ndd.types import DALIInterpType

from ._common import cast_to, map_samples

NN, LINEAR, CUBIC, LANCZOS3, TRIANGULAR = (
    DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC,
    DALIInterpType.INTERP_LANCZOS3, DALIInterpType.INTERP_TRIANGULAR,
)
_PIL_FILTER = {TRIANGULAR: Image.Resampling.BILINEAR, CUBIC: Image.Resampling.BICUBIC,
               LANCZOS3: Image.Resampling.LANCZOS}


# -- resampling -------------------------------------------------------------------


def _resample_numpy(img: np.ndarray, plan: Plan, kinds: tuple[DALIInterpType, DALIInterpType],
                    antialias: bool) -> np.ndarray:
    """Separable resampling in float32 (reference quality; used for the less common filters)."""
    x = img.astype(np.float32, copy=False)
    for axis in (0, 1):
        idx, w = axis_taps(kinds[axis], x.shape[axis], plan.out[axis], plan.lo[axis], plan.hi[axis], antialias,
                           rows=axis == 0)
        acc = None
        for k in range(idx.shape[1]):
            part = np.take(x, idx[:, k], axis=axis)
            shape = [1] * x.ndim
            shape[axis] = -1
            part *= w[:, k].reshape(shape)
            acc = part if acc is None else acc + part
        x = acc
    return x


def _resample_nn(img: np.ndarray, plan: Plan) -> np.ndarray:
    """Nearest neighbour by indexing: rows, then columns (flips and ROIs included)."""
    iy, _ = axis_taps(NN, img.shape[0], plan.out[0], plan.lo[0], plan.hi[0], False, rows=True)
    ix, _ = axis_taps(NN, img.shape[1], plan.out[1], plan.lo[1], plan.hi[1], False)
    return np.take(np.take(img, iy[:, 0], axis=0), ix[:, 0], axis=1)


def _is_whole(plan: Plan, hw: tuple[int, ...]) -> bool:
    return plan.lo == (0.0, 0.0) and plan.hi == (float(hw[0]), float(hw[1]))


def _resample_cv(img: np.ndarray, plan: Plan) -> np.ndarray:
    """Plain (not antialiased) LINEAR through OpenCV; a flipped axis is resampled unflipped
    and the result flipped (the same sampling points, so a flip is exactly the mirror)."""
    flip_y, flip_x = plan.hi[0] < plan.lo[0], plan.hi[1] < plan.lo[1]
    if flip_y or flip_x:
        lo = tuple(min(a, b) for a, b in zip(plan.lo, plan.hi))
        hi = tuple(max(a, b) for a, b in zip(plan.lo, plan.hi))
        out = _resample_cv(img, Plan(plan.out, lo, hi))
        return out[::-1 if flip_y else 1, ::-1 if flip_x else 1]
    oh, ow = plan.out
    src = img if img.dtype in (np.uint8, np.float32) else img.astype(np.float32)
    if _is_whole(plan, img.shape):
        out = cv2.resize(src, (ow, oh), interpolation=cv2.INTER_LINEAR)
    else:
        sy = (plan.hi[0] - plan.lo[0]) / oh
        sx = (plan.hi[1] - plan.lo[1]) / ow
        m = np.array([[sx, 0, plan.lo[1] + 0.5 * sx - 0.5], [0, sy, plan.lo[0] + 0.5 * sy - 0.5]])
        out = cv2.warpAffine(src, m, (ow, oh), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                             borderMode=cv2.BORDER_REPLICATE)
    if out.ndim == 2:
        out = out[..., None] if img.ndim == 3 else out
    return out


def _pil_map(buf: np.ndarray, mode: str) -> Image.Image:
    """A Pillow image sharing ``buf``'s memory: mode "L" over (H, W), "RGB" over (H, W, 4).

    Pillow keeps RGB pixels 4 bytes wide, so an RGB image maps an RGBX buffer without a
    copy. ``Image.frombuffer`` maps only L/RGBX/RGBA (and RGBX resamples 4 channels,
    RGBA premultiplies alpha), hence the call one level down; it is checked once
    against ``Image.fromarray`` (:func:`_pil_map_ok`).
    """
    h, w = buf.shape[:2]
    im = Image.new(mode, (0, 0))._new(Image.core.map_buffer(buf, (w, h), "raw", 0, (mode, 0, 1)))
    im.readonly = 0  # writable: paste() writes into buf
    return im


_PIL_MAP_OK: bool | None = None


def _pil_map_ok() -> bool:
    """Whether :func:`_pil_map` works with this Pillow (probed on a small image, once)."""
    global _PIL_MAP_OK
    if _PIL_MAP_OK is None:
        try:
            x = (np.arange(5 * 7 * 3) * 37 % 251).astype(np.uint8).reshape(5, 7, 3)
            ref = np.asarray(Image.fromarray(x, "RGB").resize((4, 3), Image.Resampling.BILINEAR))
            got = np.empty((3, 4, 3), np.uint8)
            _resample_pil_mapped(x, (3, 4), (0.0, 0.0, 7.0, 5.0), Image.Resampling.BILINEAR, got)
            _PIL_MAP_OK = bool(np.array_equal(got, ref))
        except Exception:  # noqa: BLE001 - any failure means: use the public path
            _PIL_MAP_OK = False
    return _PIL_MAP_OK


def _resample_pil_mapped(x: np.ndarray, out_hw: tuple[int, int], box: tuple[float, ...], f: Any,
                         out: np.ndarray) -> None:
    """Pillow resize of uint8 HWC ``x`` (1 or 3 channels) written into ``out`` (HWC).

    Pillow's own conversions (``fromarray`` unpacking RGB to RGBX, ``np.asarray`` packing
    it back through ``tobytes``) cost ~0.3 ms of ~0.8 ms per 256x256 image and hold the
    GIL; here OpenCV adds / drops the fourth byte (SIMD, GIL released) and Pillow reads
    and writes mapped NumPy buffers. Same resampling call, same pixels.
    """
    oh, ow = out_hw
    if x.shape[2] == 1:
        src = _pil_map(np.ascontiguousarray(x[..., 0]), "L")
        dst = np.empty((oh, ow), np.uint8)
        _pil_map(dst, "L").paste(src.resize((ow, oh), f, box=box))
        out[...] = dst.reshape(oh, ow, 1)
        return
    src = _pil_map(cv2.cvtColor(np.ascontiguousarray(x), cv2.COLOR_RGB2RGBA), "RGB")
    dst = np.empty((oh, ow, 4), np.uint8)
    _pil_map(dst, "RGB").paste(src.resize((ow, oh), f, box=box))
    if out.flags.c_contiguous:
        cv2.cvtColor(dst, cv2.COLOR_RGBA2RGB, dst=out)
    else:
        out[...] = dst[..., :3]


def _edge_pad(img: np.ndarray, plan: Plan, kind: DALIInterpType) -> tuple[np.ndarray, int, int]:
    """``img`` padded with copies of its edge pixels (see ``pil_edge_pads``), and the rows
    and columns added before it."""
    pads = pil_edge_pads(img.shape[:2], plan, kind)
    (t, b), (left, r) = pads
    if not (t or b or left or r):
        return img, 0, 0
    if img.dtype in (np.uint8, np.float32) and (img.ndim == 2 or img.shape[2] <= 4):
        padded = cv2.copyMakeBorder(img, t, b, left, r, cv2.BORDER_REPLICATE)
        return (padded[..., None] if img.ndim == 3 and padded.ndim == 2 else padded), t, left
    return np.pad(img, [(t, b), (left, r)] + [(0, 0)] * (img.ndim - 2), mode="edge"), t, left


def _resample_pil(img: np.ndarray, plan: Plan, kind: DALIInterpType, out: np.ndarray | None = None) -> np.ndarray:
    oh, ow = plan.out
    flip_y, flip_x = plan.hi[0] < plan.lo[0], plan.hi[1] < plan.lo[1]
    img, ph, pw = _edge_pad(img, plan, kind)
    box = (min(plan.lo[1], plan.hi[1]) + pw, min(plan.lo[0], plan.hi[0]) + ph,
           max(plan.lo[1], plan.hi[1]) + pw, max(plan.lo[0], plan.hi[0]) + ph)
    f = _PIL_FILTER[kind]
    x = img if img.ndim == 3 else img[..., None]
    c = x.shape[2]
    if x.dtype == np.uint8 and c in (1, 3) and oh and ow and _pil_map_ok():
        direct = out is not None and not (flip_x or flip_y)
        res = out.reshape(oh, ow, c) if direct else np.empty((oh, ow, c), np.uint8)
        _resample_pil_mapped(x, (oh, ow), box, f, res)
        if direct:
            return out
        res = res[::-1] if flip_y else res
        res = res[:, ::-1] if flip_x else res
        if out is not None:
            out.reshape(oh, ow, c)[...] = res
            return out
        return res if img.ndim == 3 else res[..., 0]
    if x.dtype == np.uint8 and c in (1, 3):  # (not RGBA: Pillow premultiplies alpha; planes below)
        mode = {1: "L", 3: "RGB"}[c]
        im = Image.fromarray(x[..., 0] if c == 1 else x, mode)
        res = np.asarray(im.resize((ow, oh), f, box=box))
        res = res.reshape(oh, ow, c)
    else:
        xf = x.astype(np.float32, copy=False) if x.dtype != np.uint8 else x
        mode = "L" if xf.dtype == np.uint8 else "F"
        planes = [np.asarray(Image.fromarray(np.ascontiguousarray(xf[..., k]), mode).resize((ow, oh), f, box=box))
                  for k in range(c)]
        res = np.stack(planes, axis=2)
    if flip_y:
        res = res[::-1]
    if flip_x:
        res = res[:, ::-1]
    res = res if img.ndim == 3 else res[..., 0]
    if out is not None:
        out[...] = cast_to(res, out.dtype)
        return out
    return res


def resample(img: np.ndarray, plan: Plan, min_f: DALIInterpType, mag_f: DALIInterpType,
             antialias: bool, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """Resample one HWC / HW image as ``plan`` says, choosing the engine (see module doc);
    into ``out`` (the result's shape and ``dtype``) when given."""
    k0, k1 = axis_kinds(plan, min_f, mag_f, antialias)
    # Pillow's BILINEAR is a tent widened only on shrinking axes: TRIANGULAR there, LINEAR elsewhere.
    tents = {k0, k1} == {LINEAR, TRIANGULAR}
    pil = TRIANGULAR if tents else k0
    if k0 == k1 == NN:
        res = _resample_nn(img, plan)
        return res.astype(dtype, copy=False) if out is None else _into(out, res)
    if np.dtype(dtype).kind == "f" and img.dtype.kind != "f":
        img = img.astype(np.float32)  # not rounded on the way to a float output
    if k0 == k1 == LINEAR:
        res = _resample_cv(img, plan)
    elif ((k0 == k1 or tents) and pil in _PIL_FILTER
          and (antialias or all(plan.out[d] >= abs(plan.hi[d] - plan.lo[d]) for d in range(2)))):
        if out is not None and np.dtype(dtype) == np.uint8 and img.dtype == np.uint8:
            return _resample_pil(img, plan, pil, out)
        res = _resample_pil(img, plan, pil)
    else:
        res = _resample_numpy(img, plan, (k0, k1), antialias)
    res = cast_to(res, dtype)
    if out is None:
        return res
    out[...] = res
    return out


def _into(out: np.ndarray, res: np.ndarray) -> np.ndarray:
    out[...] = res
    return out


def _resize_stacked(samples: list[np.ndarray], plan: Plan, dtype: np.dtype) -> np.ndarray:
    """One LINEAR ``cv2.resize`` for a small uniform batch: the samples become channels."""
    x = np.stack(samples, axis=-1)  # (H, W, [C,] N)
    if np.dtype(dtype).kind == "f" and x.dtype.kind != "f":
        x = x.astype(np.float32)
    shape = x.shape
    flat = x.reshape(shape[0], shape[1], -1)
    y = cv2.resize(flat, (plan.out[1], plan.out[0]), interpolation=cv2.INTER_LINEAR)
    y = y.reshape(plan.out[0], plan.out[1], *shape[2:])
    return cast_to(np.moveaxis(y, -1, 0), dtype)


# OpenCV (5.0) accepts at most 128 channels in one image; the stacked path packs the
# samples' channels side by side, so it must stay under that.
_CV_MAX_CHANNELS = 128


def resize_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    samples = inputs[0].samples
    check_hw_layout(ctx, samples)
    n = len(samples)
    dt = ctx.output_meta[0].dtype.numpy_dtype
    shapes = [s.shape[:2] for s in samples]
    plans, filters = resize_plans(ctx.op, args, shapes)
    aa = args["antialias"]
    nbytes = sum(s.nbytes for s in samples)
    attrs = [np.array(hw, np.int32) for hw in shapes]  # as DALI: each input's (H, W)
    # A small uniform batch with one plan and a plain LINEAR filter: one OpenCV call.
    if (n > 1 and nbytes < 1 << 18 and len({s.shape for s in samples}) == 1 and plans[0] is plans[-1]
            and filters[0] is filters[-1] and samples[0].dtype in (np.uint8, np.float32)
            and int(np.prod(samples[0].shape[2:])) * n <= _CV_MAX_CHANNELS
            and _is_whole(plans[0], samples[0].shape)):
        kind = axis_kinds(plans[0], *filters[0], aa)
        if kind[0] == kind[1] == LINEAR:
            out = _resize_stacked(samples, plans[0], dt)
            return (out, attrs) if args["save_attrs"] else out
    if n > 1 and len({(p.out, s.shape[2:]) for p, s in zip(plans, samples)}) == 1:
        # One output shape: every sample writes its slice of one dense batch (no np.stack
        # downstream, and crop_mirror_normalize takes its dense path).
        dense = np.empty((n, *plans[0].out, *samples[0].shape[2:]), dt)
        map_samples(ctx, lambda i: resample(samples[i], plans[i], *filters[i], aa, dt, dense[i]), n, nbytes)
        return (dense, attrs) if args["save_attrs"] else dense
    out = map_samples(ctx, lambda i: resample(samples[i], plans[i], *filters[i], aa, dt), n, nbytes)
    return (out, attrs) if args["save_attrs"] else out


def random_resized_crop_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Crop a random window and resize it to ``size``.

    Draw pattern: ``RNG.from_words(ctx.random_state)`` gives ``batch_size *
    num_attempts * 4`` words, 4 per attempt per sample in sample order (area,
    aspect ratio, x, y; see ``random_windows``).
    """
    samples = inputs[0].samples
    check_hw_layout(ctx, samples)
    n = len(samples)
    dt = ctx.output_meta[0].dtype.numpy_dtype
    size = args["size"]
    oh, ow = (int(round(size[0])), int(round(size[-1])))
    check_not_empty(ctx.op, [s.shape[:2] for s in samples])
    wins = random_windows(random_words(ctx, n, args["num_attempts"]), [s.shape[:2] for s in samples], args)
    plans = [Plan((oh, ow), (float(y0), float(x0)), (float(y0 + h), float(x0 + w))) for (y0, x0), (h, w) in wins]
    filters = [resize_filters(ctx.op, args, i) for i in range(n)]
    aa = args["antialias"]
    return map_samples(ctx, lambda i: resample(samples[i], plans[i], *filters[i], aa, dt), n,
                       sum(s.nbytes for s in samples))
