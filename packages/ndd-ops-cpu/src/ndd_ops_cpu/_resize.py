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

* OpenCV (``cv2.resize``, or ``cv2.warpAffine`` for a fractional ROI) for NN and
  plain LINEAR: fastest, uint8 results within 1 of exact (fixed-point weights).
* Pillow for antialiased TRIANGULAR / CUBIC (a = -0.5) / LANCZOS3: the same
  filters, widened the same way, and faster than anything in NumPy.
* A NumPy separable resampler (below) for the rest: GAUSSIAN, CUBIC / LANCZOS3
  without antialias when shrinking, mixed filters, ROIs reaching outside the image.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np
from PIL import Image

from ndd.plugins import BatchData, KernelArgs, KernelContext
from ndd.types import DALIInterpType

from ._common import cast_to, image_layout, interp_of, map_samples, sample_floats

NN, LINEAR, CUBIC, LANCZOS3, TRIANGULAR, GAUSSIAN = (
    DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC,
    DALIInterpType.INTERP_LANCZOS3, DALIInterpType.INTERP_TRIANGULAR, DALIInterpType.INTERP_GAUSSIAN,
)
_PIL_FILTER = {TRIANGULAR: Image.Resampling.BILINEAR, CUBIC: Image.Resampling.BICUBIC,
               LANCZOS3: Image.Resampling.LANCZOS}


def _round_half_away(x: float) -> int:
    return int(math.floor(abs(x) + 0.5))


def _adjust_output_size(out: list[float], ins: list[float], mode: str, max_size: list[float] | None) -> list[float]:
    """DALI's output-size rule for requested extents ``out`` (0: not given)."""
    nd = len(out)
    mask = [out[d] != 0 and ins[d] != 0 for d in range(nd)]
    scale = [out[d] / ins[d] if ins[d] else 1.0 for d in range(nd)]
    given = sum(mask)
    if given == 0:
        return list(ins)
    out = list(out)
    if mode in ("default", "stretch"):
        if given < nd:
            if mode == "default":
                avg = math.prod(abs(scale[d]) for d in range(nd) if mask[d]) ** (1.0 / given)
            else:
                avg = 1.0
            for d in range(nd):
                if not mask[d]:
                    out[d] = ins[d] * avg
        if max_size:
            for d in range(nd):
                if max_size[d] > 0 and abs(out[d]) > max_size[d]:
                    out[d] = math.copysign(max_size[d], out[d])
        return out
    final = None
    for d in range(nd):
        if mask[d]:
            s = abs(scale[d])
            if final is None or (mode == "not_smaller" and s > final) or (mode == "not_larger" and s < final):
                final = s
    if max_size:
        for d in range(nd):
            if max_size[d] > 0:
                final = min(final, max_size[d] / ins[d])
    for d in range(nd):
        if not mask[d] or abs(scale[d]) != final:
            out[d] = ins[d] * math.copysign(final, scale[d])
    return out


class Plan:
    """Output size and input ROI of one sample: rows/cols ``lo``..``hi`` map onto ``out``."""

    __slots__ = ("out", "lo", "hi")

    def __init__(self, out: tuple[int, int], lo: tuple[float, float], hi: tuple[float, float]) -> None:
        self.out, self.lo, self.hi = out, lo, hi


def resize_plan(op: str, args: KernelArgs, i: int, hw: tuple[int, int]) -> Plan:
    """Apply DALI's size arguments to sample ``i`` of spatial shape ``hw``."""
    size = sample_floats(args, "size", i)
    rx, ry = float(args.sample("resize_x", i)), float(args.sample("resize_y", i))
    rs, rl = float(args.sample("resize_shorter", i)), float(args.sample("resize_longer", i))
    methods = [name for name, on in (("resize_x/resize_y", rx or ry), ("size", size is not None),
                                     ("resize_shorter", rs), ("resize_longer", rl)) if on]
    if len(methods) != 1:
        raise ValueError(
            f"Operator `{op}`: exactly one way of giving the size must be used (resize_x/resize_y, size, "
            f"resize_shorter or resize_longer); got {', '.join(methods) or 'none'}"
        )
    mode = args["mode"]
    if size is not None:
        if len(size) == 1:
            size = size * 2
        if len(size) != 2:
            raise ValueError(f"Operator `{op}`: argument 'size' must be (H, W), got {list(size)} for sample {i}")
        if min(size) < 0:
            raise ValueError(f"Operator `{op}`: argument 'size' must be non-negative, got {list(size)} for sample {i}")
        req = list(size)
    elif rs or rl:
        v = rs or rl
        if v < 0:
            name = "resize_shorter" if rs else "resize_longer"
            raise ValueError(f"Operator `{op}`: argument '{name}' must be non-negative, got {v} for sample {i}")
        req = [v, v]
        mode = "not_smaller" if rs else "not_larger"
    else:
        req = [ry, rx]
    max_size = args["max_size"]
    if max_size is not None:
        max_size = list(max_size) * 2 if len(max_size) == 1 else list(max_size)
    lo, hi = [0.0, 0.0], [float(hw[0]), float(hw[1])]
    start, end = sample_floats(args, "roi_start", i), sample_floats(args, "roi_end", i)
    if start is not None and end is not None:
        if len(start) != 2 or len(end) != 2:
            raise ValueError(f"Operator `{op}`: arguments 'roi_start' and 'roi_end' must be (y, x) for sample {i}")
        for d in range(2):
            a, b = start[d], end[d]
            if args["roi_relative"]:
                a, b = a * hw[d], b * hw[d]
            if abs(b - a) < 1e-3:  # a degenerate ROI samples one spot instead of dividing by 0
                off = 0.5e-3 if a <= b else -0.5e-3
                a, b = a - off, b + off
            lo[d], hi[d] = a, b
    ins = []
    for d in range(2):
        if hi[d] < lo[d]:
            lo[d], hi[d] = hi[d], lo[d]
            req[d] = -req[d]
        ins.append(hi[d] - lo[d])
    req = _adjust_output_size(req, ins, mode, max_size)
    empty = hw[0] == 0 or hw[1] == 0
    out = []
    for d in range(2):
        n = max(0 if empty else 1, _round_half_away(req[d]))
        if req[d] < 0:
            lo[d], hi[d] = hi[d], lo[d]
        if args["subpixel_scale"] and req[d] and n != abs(req[d]):
            adj = min(max(n / abs(req[d]), -10.0), 10.0)
            c = (lo[d] + hi[d]) * 0.5
            lo[d], hi[d] = c + (lo[d] - c) * adj, c + (hi[d] - c) * adj
        out.append(n)
    return Plan((out[0], out[1]), (lo[0], lo[1]), (hi[0], hi[1]))


# -- resampling -------------------------------------------------------------------


def _cubic(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1, (1.5 * x - 2.5) * x * x + 1,
                    np.where(x < 2, ((-0.5 * x + 2.5) * x - 4) * x + 2, 0.0))


def _lanczos3(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def _filter(kind: DALIInterpType, in_size: float, out_size: int, antialias: bool) -> tuple[Any, float]:
    """The 1-D filter of one axis as (function of the distance in filter units, radius in pixels)."""
    shrink = in_size / out_size if out_size and in_size > out_size and antialias else 1.0
    if kind == LINEAR:
        return (lambda d: np.maximum(0.0, 1 - np.abs(d))), 1.0
    if kind == TRIANGULAR:
        return (lambda d: np.maximum(0.0, 1 - np.abs(d))), shrink
    if kind == GAUSSIAN:
        return (lambda d: np.where(np.abs(d) <= 1, np.exp(-(2 * d) ** 2), 0.0)), shrink
    if kind == CUBIC:
        return (lambda d: _cubic(2 * d)), 2 * shrink
    return (lambda d: _lanczos3(3 * d)), 3 * shrink


def _axis_taps(kind: DALIInterpType, n_in: int, n_out: int, lo: float, hi: float,
               antialias: bool) -> tuple[np.ndarray, np.ndarray]:
    """Input indices and weights (n_out, taps) of one axis; edges clamped, weights sum to 1."""
    scale = (hi - lo) / n_out
    centres = lo + (np.arange(n_out) + 0.5) * scale
    if kind == NN:
        idx = np.clip(np.floor(centres), 0, n_in - 1).astype(np.intp)[:, None]
        return idx, np.ones((n_out, 1), np.float32)
    f, radius = _filter(kind, abs(hi - lo), n_out, antialias)
    taps = int(math.ceil(2 * radius)) + 2
    first = np.floor(centres - radius - 0.5).astype(np.intp)
    pos = first[:, None] + np.arange(taps)
    w = f((pos + 0.5 - centres[:, None]) / radius)
    w /= np.maximum(w.sum(axis=1, keepdims=True), 1e-12)
    return np.clip(pos, 0, n_in - 1), w.astype(np.float32)


def _resample_numpy(img: np.ndarray, plan: Plan, kinds: tuple[DALIInterpType, DALIInterpType],
                    antialias: bool) -> np.ndarray:
    """Separable resampling in float32 (reference quality; used for the less common filters)."""
    x = img.astype(np.float32, copy=False)
    for axis in (0, 1):
        idx, w = _axis_taps(kinds[axis], x.shape[axis], plan.out[axis], plan.lo[axis], plan.hi[axis], antialias)
        acc = None
        for k in range(idx.shape[1]):
            part = np.take(x, idx[:, k], axis=axis)
            shape = [1] * x.ndim
            shape[axis] = -1
            part *= w[:, k].reshape(shape)
            acc = part if acc is None else acc + part
        x = acc
    return x


def _is_whole(plan: Plan, hw: tuple[int, ...]) -> bool:
    return plan.lo == (0.0, 0.0) and plan.hi == (float(hw[0]), float(hw[1]))


def _resample_cv(img: np.ndarray, plan: Plan, kind: DALIInterpType) -> np.ndarray:
    oh, ow = plan.out
    flag = cv2.INTER_NEAREST_EXACT if kind == NN else cv2.INTER_LINEAR
    src = img if img.dtype in (np.uint8, np.float32) else img.astype(np.float32)
    if _is_whole(plan, img.shape):
        out = cv2.resize(src, (ow, oh), interpolation=flag)
    else:
        sy = (plan.hi[0] - plan.lo[0]) / oh
        sx = (plan.hi[1] - plan.lo[1]) / ow
        m = np.array([[sx, 0, plan.lo[1] + 0.5 * sx - 0.5], [0, sy, plan.lo[0] + 0.5 * sy - 0.5]])
        flag = cv2.INTER_NEAREST if kind == NN else cv2.INTER_LINEAR
        out = cv2.warpAffine(src, m, (ow, oh), flags=flag | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE)
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


def _resample_pil(img: np.ndarray, plan: Plan, kind: DALIInterpType, out: np.ndarray | None = None) -> np.ndarray:
    oh, ow = plan.out
    flip_y, flip_x = plan.hi[0] < plan.lo[0], plan.hi[1] < plan.lo[1]
    box = (min(plan.lo[1], plan.hi[1]), min(plan.lo[0], plan.hi[0]),
           max(plan.lo[1], plan.hi[1]), max(plan.lo[0], plan.hi[0]))
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
    if x.dtype == np.uint8 and c in (1, 3, 4):
        mode = {1: "L", 3: "RGB", 4: "RGBA"}[c]
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


def _axis_kinds(plan: Plan, min_f: DALIInterpType, mag_f: DALIInterpType,
                antialias: bool) -> tuple[DALIInterpType, DALIInterpType]:
    """The filter of each axis: min_filter when it shrinks, LINEAR <-> TRIANGULAR by ``antialias``."""
    kinds = []
    for d in range(2):
        shrink = plan.out[d] < abs(plan.hi[d] - plan.lo[d])
        k = min_f if shrink else mag_f
        if k == LINEAR and antialias and shrink:
            k = TRIANGULAR
        elif k == TRIANGULAR and not (antialias and shrink):
            k = LINEAR
        kinds.append(k)
    return kinds[0], kinds[1]


def resample(img: np.ndarray, plan: Plan, min_f: DALIInterpType, mag_f: DALIInterpType,
             antialias: bool, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """Resample one HWC / HW image as ``plan`` says, choosing the engine (see module doc);
    into ``out`` (the result's shape and ``dtype``) when given."""
    k0, k1 = _axis_kinds(plan, min_f, mag_f, antialias)
    inside = all(0 <= min(plan.lo[d], plan.hi[d]) and max(plan.lo[d], plan.hi[d]) <= img.shape[d]
                 for d in range(2))
    # Pillow's BILINEAR is a tent widened only on shrinking axes: TRIANGULAR there, LINEAR elsewhere.
    pil = TRIANGULAR if {k0, k1} == {LINEAR, TRIANGULAR} else k0
    if k0 == k1 and k0 in (NN, LINEAR):
        res = _resample_cv(img, plan, k0)
    elif ((k0 == k1 or pil == TRIANGULAR) and pil in _PIL_FILTER and inside
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


def _filters(op: str, args: KernelArgs, i: int) -> tuple[DALIInterpType, DALIInterpType]:
    interp = interp_of(op, "interp_type", args.sample("interp_type", i), i)
    mn, mg = args.sample("min_filter", i), args.sample("mag_filter", i)
    mn = interp if mn is None else interp_of(op, "min_filter", mn, i)
    mg = interp if mg is None else interp_of(op, "mag_filter", mg, i)
    return mn, mg


def _check_layout(ctx: KernelContext, samples: list) -> None:
    if samples:
        lay = image_layout(ctx, samples[0].ndim)
        if lay not in ("HWC", "HW"):
            raise ValueError(f"Operator `{ctx.op}`: expects HWC or HW images, got layout {lay!r}")


_SIZE_ARGS = ("size", "resize_x", "resize_y", "resize_shorter", "resize_longer", "roi_start", "roi_end")
_FILTER_ARGS = ("interp_type", "min_filter", "mag_filter")


def _shared(args: KernelArgs, names: tuple[str, ...]) -> bool:
    return not any(args.is_per_sample(k) for k in names)


def _resize_stacked(samples: list[np.ndarray], plan: Plan, kind: DALIInterpType, dtype: np.dtype) -> np.ndarray:
    """One ``cv2.resize`` for a small uniform batch: the samples become channels."""
    x = np.stack(samples, axis=-1)  # (H, W, [C,] N)
    shape = x.shape
    flat = x.reshape(shape[0], shape[1], -1)
    flag = cv2.INTER_NEAREST_EXACT if kind == NN else cv2.INTER_LINEAR
    y = cv2.resize(flat, (plan.out[1], plan.out[0]), interpolation=flag)
    y = y.reshape(plan.out[0], plan.out[1], *shape[2:])
    return cast_to(np.moveaxis(y, -1, 0), dtype)


# OpenCV (5.0) accepts at most 128 channels in one image; the stacked path packs the
# samples' channels side by side, so it must stay under that.
_CV_MAX_CHANNELS = 128


def resize_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    samples = inputs[0].samples
    _check_layout(ctx, samples)
    n = len(samples)
    dt = ctx.output_meta[0].dtype.numpy_dtype
    shapes = [s.shape[:2] for s in samples]
    if n and len(set(shapes)) == 1 and _shared(args, _SIZE_ARGS):
        plans = [resize_plan(ctx.op, args, 0, shapes[0])] * n
    else:
        plans = [resize_plan(ctx.op, args, i, hw) for i, hw in enumerate(shapes)]
    if n and _shared(args, _FILTER_ARGS):
        filters = [_filters(ctx.op, args, 0)] * n
    else:
        filters = [_filters(ctx.op, args, i) for i in range(n)]
    aa = args["antialias"]
    nbytes = sum(s.nbytes for s in samples)
    attrs = [np.array(p.out, np.int32) for p in plans]
    # A small uniform batch with one plan and a plain NN / LINEAR filter: one OpenCV call.
    if (n > 1 and nbytes < 1 << 18 and len({s.shape for s in samples}) == 1 and plans[0] is plans[-1]
            and filters[0] is filters[-1] and samples[0].dtype in (np.uint8, np.float32)
            and int(np.prod(samples[0].shape[2:])) * n <= _CV_MAX_CHANNELS
            and _is_whole(plans[0], samples[0].shape)):
        kind = _axis_kinds(plans[0], *filters[0], aa)
        if kind[0] == kind[1] and kind[0] in (NN, LINEAR):
            out = _resize_stacked(samples, plans[0], kind[0], dt)
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
    from ._crop import random_windows
    from ._decode import random_words

    samples = inputs[0].samples
    _check_layout(ctx, samples)
    n = len(samples)
    dt = ctx.output_meta[0].dtype.numpy_dtype
    size = args["size"]
    oh, ow = (int(round(size[0])), int(round(size[-1])))
    wins = random_windows(random_words(ctx, n, args["num_attempts"]), [s.shape[:2] for s in samples], args)
    plans = [Plan((oh, ow), (float(y0), float(x0)), (float(y0 + h), float(x0 + w))) for (y0, x0), (h, w) in wins]
    filters = [_filters(ctx.op, args, i) for i in range(n)]
    aa = args["antialias"]
    return map_samples(ctx, lambda i: resample(samples[i], plans[i], *filters[i], aa, dt), n,
                       sum(s.nbytes for s in samples))
