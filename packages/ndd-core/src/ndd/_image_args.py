"""Argument handling shared by the CPU and GPU image kernels (internal; exported
through :mod:`ndd.plugins`).

Pure NumPy: crop windows, random crop windows, resize plans and filter taps, rotate
and warp matrices, normalisation coefficients, colour matrices. Kernels of every
device compute their per-sample parameters here, so they agree on the semantics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._dispatch import KernelArgs, KernelContext
from .random._philox import bounded_int, uniform
from .types import DALIImageType, DALIInterpType

# -- common ---------------------------------------------------------------------------


def image_layout(ctx: KernelContext, ndim: int) -> str:
    """The input image layout, guessing HWC / HW from ``ndim`` when it has none."""
    lay = ctx.input_layouts[0]
    if lay:
        return lay
    if ndim not in (2, 3):
        raise ValueError(f"Operator `{ctx.op}`: expects images (HWC or HW), got a {ndim}-D input without "
                         "a layout")
    return "HWC" if ndim == 3 else "HW"


def check_hw_layout(ctx: KernelContext, samples: list) -> None:
    """Raise unless the images are HWC or HW."""
    if samples:
        lay = image_layout(ctx, samples[0].ndim)
        if lay not in ("HWC", "HW"):
            raise ValueError(f"Operator `{ctx.op}`: expects HWC or HW images, got layout {lay!r}")


def interp_of(op: str, name: str, v: Any, i: int) -> DALIInterpType:
    """A per-sample interpolation value (int32 from a Batch) as a DALIInterpType."""
    try:
        return DALIInterpType(int(v))
    except ValueError:
        raise ValueError(f"Operator `{op}`: argument '{name}': {int(v)} (sample {i}) is not a valid "
                         "DALIInterpType") from None


def fill_vector(op: str, fill: Sequence[float], channels: int) -> np.ndarray:
    """Padding values as a (channels,) float64 array (one value broadcasts)."""
    f = np.asarray(fill, np.float64)
    if f.size == 1:
        return np.full(channels, f[0])
    if f.size != channels:
        raise ValueError(
            f"Operator `{op}`: argument 'fill_values' has {f.size} values but the image has {channels} channels"
        )
    return f


def sample_floats(args: KernelArgs, name: str, i: int) -> tuple[float, ...] | None:
    """A FLOATS argument of sample ``i`` as a tuple (None when not set)."""
    v = args.sample(name, i)
    if v is None:
        return None
    return tuple(float(x) for x in np.ravel(v))


def shared_args(args: KernelArgs, names: Sequence[str]) -> bool:
    """True when none of ``names`` has per-sample values."""
    return not any(args.is_per_sample(k) for k in names)


def random_words(ctx: KernelContext, n: int, attempts: int) -> np.ndarray:
    """The call's random words, shaped (samples, attempts, 4)."""
    from .random import RNG

    sub = RNG.from_words(ctx.random_state)
    return sub.draw_words(n * attempts * 4).reshape(n, attempts, 4)


# -- crop windows ------------------------------------------------------------------------

Window = tuple[tuple[int, int], tuple[int, int]]  # ((y0, x0), (h, w))


def _round(x: float, mode: str) -> int:
    # DALI's "round" is std::round: halves away from zero.
    return int(math.trunc(x)) if mode == "truncate" else int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def crop_window(op: str, args: KernelArgs, i: int, hw: tuple[int, int], policy: str) -> Window:
    """The crop window of sample ``i`` for an image of spatial shape ``hw``.

    Shape: ``crop`` (H, W) or ``crop_h``/``crop_w`` (0: the whole extent), fractions
    dropped as DALI drops them (10.6 gives 10). Anchor: ``crop_pos * (extent - window)`` rounded as
    ``rounding`` says. With ``policy`` "error" a window outside the image raises;
    "trim_to_shape" shrinks it to the image; "pad" returns it as is.
    """
    H, W = hw
    crop = args.sample("crop", i)
    if crop is not None and np.size(crop):
        c = [float(v) for v in np.ravel(crop)]
        if len(c) != 2:
            raise ValueError(f"Operator `{op}`: argument 'crop' must be (H, W), got {c} for sample {i}")
        ch, cw = c
    else:
        ch, cw = float(args.sample("crop_h", i) or 0), float(args.sample("crop_w", i) or 0)
    if ch < 0 or cw < 0:
        raise ValueError(f"Operator `{op}`: the crop window of sample {i} must be non-negative, got {(ch, cw)}")
    h = int(ch) if ch else H
    w = int(cw) if cw else W
    mode = args["rounding"]
    # float32 positions multiplied in double, as DALI (0.35 of 50 is 17.4999..., anchor 17)
    y0 = _round(float(np.float32(args.sample("crop_pos_y", i))) * (H - h), mode)
    x0 = _round(float(np.float32(args.sample("crop_pos_x", i))) * (W - w), mode)
    inside = y0 >= 0 and x0 >= 0 and y0 + h <= H and x0 + w <= W
    if inside or policy == "pad":
        return (y0, x0), (h, w)
    if policy == "error":
        raise ValueError(
            f"Operator `{op}`: the crop window of sample {i} (anchor y={y0}, x={x0}, shape {h}x{w}) lies "
            f"outside the input of shape {H}x{W}"
            + ("; pass out_of_bounds_policy='pad' or 'trim_to_shape'" if "out_of_bounds_policy" in args else "")
        )
    ya, xa = max(y0, 0), max(x0, 0)
    return (ya, xa), (max(0, min(y0 + h, H) - ya), max(0, min(x0 + w, W) - xa))


_WINDOW_ARGS = ("crop", "crop_w", "crop_h", "crop_pos_x", "crop_pos_y")


def windows_per_sample(args: KernelArgs) -> bool:
    """True when a window argument (crop size or position) has per-sample values."""
    return not shared_args(args, _WINDOW_ARGS)


def batch_windows(op: str, args: KernelArgs, shapes: list[tuple[int, int]], policy: str) -> list[Window]:
    """The windows of all samples; computed once when arguments and shapes are shared."""
    if shapes and len(set(shapes)) == 1 and shared_args(args, _WINDOW_ARGS):
        return [crop_window(op, args, 0, shapes[0], policy)] * len(shapes)
    return [crop_window(op, args, i, hw, policy) for i, hw in enumerate(shapes)]


def random_windows(words: np.ndarray, shapes: list[tuple[int, int]], args: KernelArgs,
                   tries: int | None = None) -> list[Window]:
    """Random crop windows, one per sample, from ``words`` of shape (n, attempts, 4).

    For attempt ``a`` of a sample the four words give: the area fraction
    (uniform in ``random_area``), the log aspect ratio (uniform in
    log ``random_aspect_ratio``), then the x and y anchors (uniform integers).
    The first attempt whose window, rounded to whole pixels, fits the image and keeps
    its aspect ratio in range wins; if none does, the whole image cut to the nearest
    allowed aspect ratio, shrunk (both sides by one factor) to the largest allowed area
    when it is larger, at a random place (the first attempt's anchor words), as DALI.
    ``tries`` (default: every attempt) limits the attempts made; 0 goes straight to the
    fallback (``random_crop_generator``'s ``num_attempts=0``).
    """
    amin, amax = args["random_area"]
    rmin, rmax = args["random_aspect_ratio"]
    hw = np.array(shapes, np.int64).reshape(-1, 2)
    H, W = hw[:, :1], hw[:, 1:]
    area = uniform(words[..., 0], amin, amax).astype(np.float64) * (H * W)
    ratio = np.exp(uniform(words[..., 1], math.log(rmin), math.log(rmax)).astype(np.float64))
    # rounded, at least 1 (as DALI: a window of under half a pixel is 1 pixel wide)
    ws = np.maximum(np.floor(np.sqrt(area * ratio) + 0.5).astype(np.int64), 1)
    hs = np.maximum(np.floor(np.sqrt(area / ratio) + 0.5).astype(np.int64), 1)
    r = ws / hs  # after rounding, as DALI checks it (about 1% of windows fell outside)
    ok = (ws <= W) & (hs <= H) & (r >= rmin) & (r <= rmax)
    if tries is not None:
        ok[:, tries:] = False
    rows = np.arange(len(hw))
    first = ok.argmax(axis=1)
    found = ok[rows, first]
    w, h = ws[rows, first], hs[rows, first]
    x0 = bounded_int(words[rows, first, 2], np.where(found, W[:, 0] - w + 1, 1))
    y0 = bounded_int(words[rows, first, 3], np.where(found, H[:, 0] - h + 1, 1))
    out = []
    for i in range(len(hw)):
        if found[i]:
            out.append(((int(y0[i]), int(x0[i])), (int(h[i]), int(w[i]))))
            continue
        Hi, Wi = int(hw[i, 0]), int(hw[i, 1])
        fw, fh = float(Wi), float(Hi)
        if Wi / Hi < rmin:
            fh = Wi / rmin
        elif Wi / Hi > rmax:
            fw = Hi * rmax
        # as DALI: the size truncated (37 rows at ratio 3 of 53 columns: 17 rows), the place
        # uniform (DALI 2.4 does not centre it)
        hh, ww = max(1, int(fh)), max(1, int(fw))
        scale = min(np.float32(1), np.float32(amax) * np.float32(Hi * Wi) / np.float32(hh * ww))
        if scale < 1:  # float32 as DALI (random_area [0.3, 0.4] of 25x69 at ratio 0.2: 55x11)
            root = np.sqrt(scale)
            hh, ww = max(1, int(np.float32(hh) * root)), max(1, int(np.float32(ww) * root))
        x, y = (int(v) for v in bounded_int(words[i, 0, 2:4], np.array([Wi - ww + 1, Hi - hh + 1])))
        out.append(((y, x), (hh, ww)))
    return out


def spatial_axes(layout: str) -> tuple[int, int]:
    return layout.index("H"), layout.index("W")


# -- crop_mirror_normalize and normalize -----------------------------------------------


def _per_channel(op: str, name: str, v: Any, c: int, i: int) -> np.ndarray:
    a = np.asarray(v, np.float32).ravel()
    if a.size == 1:
        return np.full(c, a[0], np.float32)
    if a.size != c:
        raise ValueError(f"Operator `{op}`: argument '{name}' has {a.size} values but sample {i} has {c} "
                         "channel(s)")
    return a


def cmn_coefficients(op: str, args: KernelArgs, chans: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sample ``(a, b)`` with ``(x - mean) / std * scale + shift == x * a + b``."""
    scale, shift = np.float32(args["scale"]), np.float32(args["shift"])

    def one(i: int) -> tuple[np.ndarray, np.ndarray]:
        mean = _per_channel(op, "mean", args.sample("mean", i), chans[i], i)
        std = _per_channel(op, "std", args.sample("std", i), chans[i], i)
        if np.any(std == 0):
            raise ValueError(f"Operator `{op}`: argument 'std' must not contain 0 (sample {i})")
        a = scale / std
        return a, shift - mean * a

    if len(set(chans)) == 1 and not args.is_per_sample("mean") and not args.is_per_sample("std"):
        return [one(0)] * len(chans)
    return [one(i) for i in range(len(chans))]


def reduced_axes(op: str, args: KernelArgs, layout: str | None, ndim: int) -> tuple[int, ...]:
    """The axes ``normalize`` reduces over (``axis_names``, ``axes`` or all)."""
    if args["axis_names"] is not None:
        if not layout:
            raise ValueError(f"Operator `{op}`: argument 'axis_names' needs an input with a layout")
        return tuple(sorted(layout.index(ch) for ch in args["axis_names"]))
    if args["axes"] is not None:
        return tuple(sorted(a % ndim for a in args["axes"]))
    return tuple(range(ndim))


def shaped_param(op: str, name: str, v: Any, red_shape: tuple[int, ...], i: int) -> np.ndarray:
    """A ``mean`` / ``stddev`` value of ``normalize`` shaped to the reduced shape."""
    a = np.asarray(v, np.float32)
    if a.size == 1:
        return a.reshape([1] * len(red_shape))
    if a.size != int(np.prod(red_shape)):
        raise ValueError(f"Operator `{op}`: argument '{name}' of sample {i} has {a.size} values; the reduced "
                         f"shape is {red_shape}")
    return a.reshape(red_shape)


# -- colour ----------------------------------------------------------------------------

# DALI's constants (its colour matrices, fitted from DALI 2.4's outputs, are exactly these
# and their inverse)
_RGB2YIQ = np.array([[0.299, 0.587, 0.114],
                     [0.596, -0.274, -0.321],
                     [0.211, -0.523, 0.311]])
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
    """RGB -> RGB matrix: rotate the hue by ``hue`` degrees, scale chroma and luma, in YIQ space.
    A positive ``hue`` turns red towards yellow (HSV's hue grows), as DALI's does."""
    a = -math.radians(hue)
    c, s = math.cos(a), math.sin(a)
    m = np.array([[value, 0, 0],
                  [0, value * saturation * c, -value * saturation * s],
                  [0, value * saturation * s, value * saturation * c]])
    return _YIQ2RGB @ m @ _RGB2YIQ


def brightness_contrast_params(args: KernelArgs, n: int, in_dt: np.dtype,
                               dt: np.dtype) -> tuple[list[float], list[float]]:
    """Per sample ``(gain, offset)`` with ``out = x * gain + offset``. As in DALI, values keep
    their scale when ``dtype`` differs from the input type (uint8 172 gives float 172.0); only
    ``brightness_shift`` is in units of the output type's range. Computed in float32 in DALI's
    order, so that uint8 results at exact halves round as DALI's do (contrast 1.42: 203 gives 234)."""
    f32 = np.float32
    gains, offsets = [], []
    for i in range(n):
        b = f32(args.sample("brightness", i))
        sh = f32(args.sample("brightness_shift", i))
        ct = f32(args.sample("contrast", i))
        cc = args.sample("contrast_center", i)
        cc = f32(half_range(in_dt) if cc is None else cc)
        gains.append(float(b * ct))
        offsets.append(float(b * (cc - ct * cc) + sh * f32(type_range(dt))))
    return gains, offsets


def hsv_params(args: KernelArgs, n: int, in_dt: np.dtype,
               dt: np.dtype) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per sample ``(matrix, offset)`` of ``hsv``: ``out = matrix @ rgb + offset`` (values keep
    their scale across a change of type, as in DALI)."""
    mats = [hsv_matrix(float(args.sample("hue", i)), float(args.sample("saturation", i)),
                           float(args.sample("value", i))) for i in range(n)]
    return mats, [np.zeros(3)] * n


def color_twist_params(args: KernelArgs, n: int, in_dt: np.dtype,
                       dt: np.dtype) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per sample ``(matrix, offset)`` of ``color_twist``:
    ``brightness * (contrast * (HS(rgb) - half) + half)``, HS the hue/saturation matrix
    (values keep their scale across a change of type, as in DALI). ``half`` is 0.5 for floats
    and 128 for every integer type (DALI 2.4's color_twist; its ``contrast`` op centres
    int16 at 16384)."""
    half = 0.5 if np.dtype(in_dt).kind == "f" else 128.0
    swap = np.eye(3)[::-1] if args["image_type"] == DALIImageType.BGR else np.eye(3)
    mats, offs = [], []
    for i in range(n):
        b, ct = float(args.sample("brightness", i)), float(args.sample("contrast", i))
        hs = swap @ hsv_matrix(float(args.sample("hue", i)), float(args.sample("saturation", i)), 1.0) @ swap
        mats.append(b * ct * hs)
        offs.append(np.full(3, b * (1 - ct) * half))
    return mats, offs


# -- rotate and warp_affine ----------------------------------------------------------------


def rotated_size(h: np.ndarray, w: np.ndarray, angle_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DALI's canvas for rotated images (arrays, one per sample): the bounding box, with
    the parity of the dominant input extent kept so the centre stays on the pixel grid.
    The angle in radians is a float32, as DALI's: that decides which extent dominates at
    odd multiples of 45 degrees (float32(pi / 4) is above pi / 4, so the sine wins at 45)."""
    a = np.radians(np.asarray(angle_deg, np.float64)).astype(np.float32).astype(np.float64)
    c, s = np.abs(np.cos(a)), np.abs(np.sin(a))
    eps = 1e-2
    ow = np.ceil(c * w + s * h - eps).astype(np.int64)
    oh = np.ceil(c * h + s * w - eps).astype(np.int64)
    pw = np.where(s <= c, w % 2, h % 2)
    ph = np.where(s <= c, h % 2, w % 2)
    return oh + ((oh % 2) ^ ph), ow + ((ow % 2) ^ pw)


def rotation_matrices(in_hw: np.ndarray, out_hw: np.ndarray, angle_deg: np.ndarray) -> np.ndarray:
    """DALI's output-to-input maps of ``rotate`` (counter-clockwise on screen), (n, 2, 3)."""
    a = np.radians(angle_deg)
    c, s = np.cos(a), np.sin(a)
    # cos(90 deg) is 6e-17, not 0: exact at multiples of 90 degrees, so that pixel centres
    # land on pixel centres there (a quarter turn is then a plain permutation of pixels)
    c[np.abs(c) < 1e-12] = 0.0
    s[np.abs(s) < 1e-12] = 0.0
    m = np.empty((len(a), 2, 3))
    m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = c, -s, s, c
    in_xy, out_xy = in_hw[:, ::-1] * 0.5, out_hw[:, ::-1] * 0.5
    m[:, :, 2] = in_xy - np.einsum("nij,nj->ni", m[:, :, :2], out_xy)
    return m


def pixel_maps(mc: np.ndarray) -> np.ndarray:
    """Whether each pixel-centre (OpenCV) matrix of ``mc`` (..., 2, 3) sends every output
    pixel centre onto an input pixel centre (a multiple of 90 degrees, a flip, a whole-pixel
    shift): each output pixel is then one input pixel, which both devices read as it is
    (bilinear interpolation would multiply the neighbours by a zero weight, and NaN or inf
    there would leak into the result)."""
    r = np.round(mc)
    return (np.abs(mc - r) < 1e-9).all(axis=(-2, -1)) & (np.abs(r[..., :2]) <= 1).all(axis=(-2, -1))


def warp_size(op: str, args: KernelArgs, i: int) -> tuple[int, int] | None:
    """The ``size`` argument of sample ``i`` as integers (None when not set)."""
    size = sample_floats(args, "size", i)
    if size is None or not size:
        return None
    if len(size) != 2 or min(size) < 0:
        raise ValueError(f"Operator `{op}`: argument 'size' must be (H, W) non-negative, got {list(size)} "
                         f"for sample {i}")
    return int(round(size[0])), int(round(size[1]))


def warp_fill(fill: float | None, dtype: np.dtype) -> Any:
    """The fill value of ``rotate`` / ``warp_affine`` as OpenCV stores it in an image of
    ``dtype`` (uint8: rounded half to even and saturated, NaN as 0; OpenCV's own conversion
    of a value beyond int32 wraps), which both devices fill with."""
    if fill is None:
        return dtype.type(0)
    if dtype == np.uint8:
        f = float(fill)
        if f != f:  # NaN
            return np.uint8(0)
        return np.uint8(min(max(round(f), 0), 255) if abs(f) < 1e9 else (255 if f > 0 else 0))  # half to even
    return dtype.type(fill)


def check_not_empty(op: str, in_hw: Any) -> None:
    """A clear error for an image with no pixels (0 rows or columns), where sampling has
    nothing to read (rotate, warp_affine, resize, random_resized_crop)."""
    for i, (h, w) in enumerate(in_hw):
        if h == 0 or w == 0:
            raise ValueError(f"Operator `{op}`: sample {i} is an empty image ({h}x{w} pixels): "
                             f"there is nothing to sample")


def rotate_params(op: str, args: KernelArgs, in_hw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(matrices (n, 2, 3), output sizes (n, 2))`` of ``rotate`` for input sizes ``in_hw``."""
    check_not_empty(op, in_hw)
    n = len(in_hw)
    angles = np.asarray(args.per_sample("angle"), np.float64).reshape(n)
    if args["keep_size"]:
        out_hw = in_hw
    else:
        oh, ow = rotated_size(in_hw[:, 0], in_hw[:, 1], angles)
        out_hw = np.stack([oh, ow], axis=1)
    if args["size"] is not None or args.is_per_sample("size"):  # before keep_size, as DALI
        out_hw = np.array([warp_size(op, args, i) or tuple(out_hw[i]) for i in range(n)], np.int64).reshape(n, 2)
    return rotation_matrices(in_hw, out_hw, angles), out_hw


# DALI's nearest neighbour reads the pixel whose area holds the source point (floor);
# OpenCV's and torch's round the pixel-centre coordinate half to even, which picks the
# other neighbour when the point falls exactly on a pixel edge (common with the matrices
# users give warp_affine: scales of 2 or 1/2). Shifting every source point by this much
# makes those ties go DALI's way, and moves the pick only for points this close below an
# edge. (Not for rotate: its points are rarely exact ties, and at 45 degrees many fall
# just below an edge, where the shift measured worse against DALI.)
_NN_NUDGE = 2.0 ** -12


def _nn_floor(mats: np.ndarray, args: KernelArgs) -> np.ndarray:
    """``mats`` with the nudge above when ``interp_type`` is NN (both devices use these)."""
    if args["interp_type"] != DALIInterpType.INTERP_NN:
        return mats
    out = np.array(mats, np.float64)
    out[:, :, 2] += _NN_NUDGE
    return out


def warp_affine_params(op: str, args: KernelArgs, mtx: Any, in_hw: Sequence[tuple[int, int]]
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``(output-to-input matrices (n, 2, 3), output sizes (n, 2))`` of ``warp_affine``;
    ``mtx`` is the optional matrix input (a BatchData of host arrays) or None."""
    check_not_empty(op, in_hw)
    if mtx is not None and args["matrix"] is not None:
        raise ValueError(f"Operator `{op}`: give the matrix either as argument 'matrix' or as the 'mtx' "
                         "input, not both")
    mats, sizes = [], []
    for i, hw in enumerate(in_hw):
        if mtx is not None:
            raw = np.asarray(mtx.sample(i), np.float64).ravel()
        else:
            v = args.sample("matrix", i)
            if v is None:
                raise ValueError(f"Operator `{op}`: a matrix is required (argument 'matrix' or input 'mtx')")
            raw = np.asarray(v, np.float64).ravel()
        if raw.size != 6:
            raise ValueError(f"Operator `{op}`: argument 'matrix' must have 6 values (2x3), got {raw.size} "
                             f"for sample {i}")
        m = raw.reshape(2, 3)
        if not args["inverse_map"]:
            full = np.vstack([m, [0, 0, 1]])
            try:
                m = np.linalg.inv(full)[:2]
            except np.linalg.LinAlgError:
                raise ValueError(f"Operator `{op}`: argument 'matrix' of sample {i} is singular and "
                                 "inverse_map=False needs its inverse") from None
        mats.append(m)
        sizes.append(warp_size(op, args, i) or tuple(hw))
    return _nn_floor(np.array(mats, np.float64).reshape(-1, 2, 3), args), np.array(sizes, np.int64).reshape(-1, 2)


# -- resize --------------------------------------------------------------------------------

NN, LINEAR, CUBIC, LANCZOS3, TRIANGULAR, GAUSSIAN = (
    DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC,
    DALIInterpType.INTERP_LANCZOS3, DALIInterpType.INTERP_TRIANGULAR, DALIInterpType.INTERP_GAUSSIAN,
)


def _round_half_away(x: float) -> int:
    return int(math.floor(abs(x) + 0.5))


def _adjust_output_size(out: list[float], ins: list[float], mode: str, max_size: list[float] | None) -> list[float]:
    """DALI's output-size rule for requested extents ``out`` (0: not given), in float32 as
    DALI computes it (25 * float32(46 / 20) is 57.5, which rounds to 58; in double it is
    57.4999..., which rounds to 57)."""
    f32 = np.float32
    nd = len(out)
    mask = [out[d] != 0 and ins[d] != 0 for d in range(nd)]
    scale = [f32(out[d]) / f32(ins[d]) if ins[d] else f32(1) for d in range(nd)]
    given = sum(mask)
    if given == 0:
        return list(ins)
    out = list(out)
    if mode in ("default", "stretch"):
        if given < nd:
            if mode == "default":
                avg = f32(math.prod(float(abs(scale[d])) for d in range(nd) if mask[d]) ** (1.0 / given))
            else:
                avg = f32(1)
            for d in range(nd):
                if not mask[d]:
                    out[d] = float(f32(ins[d]) * avg)
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
                final = min(final, f32(max_size[d]) / f32(ins[d]))
    for d in range(nd):
        if not mask[d] or abs(scale[d]) != final:
            out[d] = float(f32(ins[d]) * f32(math.copysign(final, scale[d])))
    return out


class ResizePlan:
    """Output size and input ROI of one sample: rows/cols ``lo``..``hi`` map onto ``out``."""

    __slots__ = ("out", "lo", "hi")

    def __init__(self, out: tuple[int, int], lo: tuple[float, float], hi: tuple[float, float]) -> None:
        self.out, self.lo, self.hi = out, lo, hi


def resize_plan(op: str, args: KernelArgs, i: int, hw: tuple[int, int]) -> ResizePlan:
    """Apply DALI's size arguments to sample ``i`` of spatial shape ``hw``."""
    size = sample_floats(args, "size", i)
    rx, ry, rs, rl = (args.sample(n, i) for n in ("resize_x", "resize_y", "resize_shorter", "resize_longer"))
    # Given counts, 0 included (0: that extent is derived, or kept), as DALI
    methods = [name for name, on in (("resize_x/resize_y", rx is not None or ry is not None),
                                     ("size", size is not None), ("resize_shorter", rs is not None),
                                     ("resize_longer", rl is not None)) if on]
    rx, ry, rs, rl = (float(v or 0) for v in (rx, ry, rs, rl))
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
        req = list(size)  # a negative extent flips, as resize_x / resize_y
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
    return ResizePlan((out[0], out[1]), (lo[0], lo[1]), (hi[0], hi[1]))


RESIZE_SIZE_ARGS = ("size", "resize_x", "resize_y", "resize_shorter", "resize_longer", "roi_start", "roi_end")
RESIZE_FILTER_ARGS = ("interp_type", "min_filter", "mag_filter")


def resize_filters(op: str, args: KernelArgs, i: int) -> tuple[DALIInterpType, DALIInterpType]:
    """``(min_filter, mag_filter)`` of sample ``i`` (both default to ``interp_type``)."""
    interp = interp_of(op, "interp_type", args.sample("interp_type", i), i)
    mn, mg = args.sample("min_filter", i), args.sample("mag_filter", i)
    mn = interp if mn is None else interp_of(op, "min_filter", mn, i)
    mg = interp if mg is None else interp_of(op, "mag_filter", mg, i)
    return mn, mg


def axis_kinds(plan: ResizePlan, min_f: DALIInterpType, mag_f: DALIInterpType,
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


# The reach of Pillow's filters, in input pixels per output pixel when not shrinking.
_PIL_SUPPORT = {TRIANGULAR: 1.0, CUBIC: 2.0, LANCZOS3: 3.0}


def pil_edge_pads(hw: tuple[int, int], plan: ResizePlan, kind: DALIInterpType) -> tuple[tuple[int, int], ...]:
    """Rows and columns ``((top, bottom), (left, right))`` of copies of the edge pixels that
    the CPU kernel adds around an image of size ``hw`` before Pillow resamples it as ``plan``
    says with filter ``kind``: as far as the ROI and the filter reach past the border, so that
    Pillow sees DALI's clamped edges. (The GPU kernel needs the padded size too: see
    :func:`pil_vertical_first`.)"""
    pads = []
    for d in range(2):
        lo, hi = sorted((plan.lo[d], plan.hi[d]))
        radius = _PIL_SUPPORT[kind] * max((hi - lo) / plan.out[d], 1.0)
        before = int(np.ceil(radius - lo)) + 2 if lo - radius < 0 else 0
        after = int(np.ceil(hi + radius - hw[d])) + 2 if hi + radius > hw[d] else 0
        pads.append((before, after))
    return pads[0], pads[1]


def pil_vertical_first(in_hw: tuple[int, int], out_hw: tuple[int, int], pillow_version: tuple[int, ...]) -> bool:
    """Whether Pillow ``pillow_version`` resamples an ``in_hw`` image (as passed to it) to
    ``out_hw`` rows first. From Pillow 13 it does when the height shrinks by more rows than
    twice the columns the width shrinks by (the horizontal pass then has fewer rows); before,
    always columns first. With uint8 pixels, rounded between the passes, the order changes
    the result by a few levels: a GPU kernel that follows Pillow must take the same one."""
    dh, dw = in_hw[0] - out_hw[0], in_hw[1] - out_hw[1]
    return pillow_version[:1] >= (13,) and dh > 0 and dh > 2 * dw


def _cubic(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1, (1.5 * x - 2.5) * x * x + 1,
                    np.where(x < 2, ((-0.5 * x + 2.5) * x - 4) * x + 2, 0.0))


def _lanczos3(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def nn_indices(n_in: int, n_out: int, lo: float, hi: float, rows: bool) -> np.ndarray:
    """The input pixel nearest-neighbour resizing reads for each output pixel of one axis:
    the one whose area holds the output pixel's centre, computed in float32 as DALI does,
    so that centres falling (almost) exactly on a pixel edge pick the same pixel: columns as
    ``lo + (x + 0.5) * scale``, rows by adding ``scale`` row after row (observed in DALI 2.4
    on whole images and ROIs)."""
    if n_out == 0:
        return np.zeros(0, np.intp)
    f32 = np.float32
    scale = f32(f32(hi - lo) / f32(n_out))
    if rows:
        steps = np.full(n_out, scale, f32)
        steps[0] = f32(f32(lo) + f32(0.5) * scale)
        centres = np.add.accumulate(steps, dtype=f32)
    else:
        centres = f32(lo) + (np.arange(n_out, dtype=f32) + f32(0.5)) * scale
    return np.clip(np.floor(centres), 0, n_in - 1).astype(np.intp)


def axis_taps(kind: DALIInterpType, n_in: int, n_out: int, lo: float, hi: float,
              antialias: bool, rows: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Input indices and weights (n_out, taps) of one axis (``rows``: the vertical one);
    edges clamped, weights sum to 1."""
    if kind == NN:
        return nn_indices(n_in, n_out, lo, hi, rows)[:, None], np.ones((n_out, 1), np.float32)
    return _table_taps(kind, n_in, n_out, lo, hi, antialias)


# DALI's resampling filters are tables read with linear interpolation, stretched to the
# filter's support in pixels, all in float32: LINEAR and TRIANGULAR the 3 samples 0 1 0 (support
# 2, TRIANGULAR's 2 * radius), GAUSSIAN 65 samples of exp(-x^2)
# over x in [-2, 2] (support 4 * sqrt(2) * sigma, sigma = radius / (2 * sqrt(2)), at least 1),
# CUBIC 129 samples of the a = -0.5 cubic over [-2, 2] (support 4), LANCZOS3 193 samples over
# [-3, 3] (support 6); the radius and supports widen by the shrink factor under antialias. The
# taps start at the first pixel at or after the support's left end and there are
# ceil(support) of them, so float rounding of the support (a hair under 2 for a Gaussian of
# radius 1) decides whether a pixel at the very edge is read. The tables differ from the exact
# functions by up to 1% (a few tenths of a level on 0-255 data); ndd computes the taps the
# same way, so that its resampling gives DALI 2.4's values.
def _table(n: int, half: float, fn: Any) -> np.ndarray:
    f32 = np.float32
    x = f32(2 * half) * (np.arange(n, dtype=f32) - f32((n - 1) * 0.5)) / f32(n - 1)
    return fn(x.astype(np.float64)).astype(f32)


_GAUSS_TABLE = np.exp(-np.square((np.arange(65, dtype=np.float32) - np.float32(32)) / np.float32(16)))
_CUBIC_TABLE = _table(129, 2, _cubic)
_TENT_TABLE = np.array([0, 1, 0], np.float32)
_LANCZOS3_TABLE = _table(193, 3, _lanczos3)


def _table_taps(kind: DALIInterpType, n_in: int, n_out: int, lo: float, hi: float,
                antialias: bool) -> tuple[np.ndarray, np.ndarray]:
    if n_out == 0 or n_in == 0:
        return np.zeros((n_out, 1), np.intp), np.zeros((n_out, 1), np.float32)
    f32 = np.float32
    size = f32(abs(hi - lo))
    radius = size / f32(n_out) if antialias and size > n_out else f32(1)
    if kind == GAUSSIAN:
        table = _GAUSS_TABLE
        sigma = f32(float(radius * f32(0.5)) / math.sqrt(2))
        support = max(f32(1), f32(4 * math.sqrt(2)) * sigma)
    elif kind in (LINEAR, TRIANGULAR):
        table = _TENT_TABLE
        support = max(f32(1), f32(2) * (radius if kind == TRIANGULAR else f32(1)))
    else:
        table, width = (_CUBIC_TABLE, 4) if kind == CUBIC else (_LANCZOS3_TABLE, 6)
        support = f32(width) * radius
    last = len(table) - 1
    tscale = f32(last) / support  # table entries per pixel
    anchor = f32(last * 0.5) / tscale
    taps = max(1, int(np.ceil(f32(last) / tscale)))
    pscale = f32(f32(hi) - f32(lo)) / f32(n_out)
    x0 = f32(lo) + f32(0.5) * pscale - f32(0.5) - anchor
    start = (np.arange(n_out, dtype=f32) * pscale + x0).astype(f32)
    first = np.ceil(start)
    t = ((first - start)[:, None] + np.arange(taps, dtype=f32)) * tscale  # table positions
    i0 = np.floor(t).astype(np.intp)
    frac = t - i0
    padded = np.concatenate([table, np.zeros(2, f32)])  # past the end reads 0
    inside = (t > -1) & (t < last + 1)
    a = np.where(i0 >= 0, padded[np.clip(i0, 0, last + 1)], f32(0))
    b = padded[np.clip(i0 + 1, 0, last + 1)]
    w = np.where(inside, a + frac * (b - a), f32(0)).astype(f32)
    total = w.sum(axis=1, keepdims=True, dtype=f32)
    w = np.where(total != 0, w / np.where(total != 0, total, f32(1)), w)
    pos = first.astype(np.intp)[:, None] + np.arange(taps)
    return np.clip(pos, 0, n_in - 1), w.astype(np.float32)


def resize_plans(op: str, args: KernelArgs, shapes: list[tuple[int, int]]) -> tuple[list, list]:
    """The plans and (min, mag) filters of every sample; computed once when arguments and
    input shapes are shared by the batch."""
    check_not_empty(op, shapes)
    n = len(shapes)
    if n and len(set(shapes)) == 1 and shared_args(args, RESIZE_SIZE_ARGS):
        plans = [resize_plan(op, args, 0, shapes[0])] * n
    else:
        plans = [resize_plan(op, args, i, hw) for i, hw in enumerate(shapes)]
    if n and shared_args(args, RESIZE_FILTER_ARGS):
        filters = [resize_filters(op, args, 0)] * n
    else:
        filters = [resize_filters(op, args, i) for i in range(n)]
    return plans, filters


# -- gaussian_blur ----------------------------------------------------------------------


def reflect101(n_in: int, radius: int) -> np.ndarray:
    """Source indices of the positions -radius .. n_in + radius - 1 with the border mirrored
    without repeating the edge (``dcb|abcd|cba``), as far as it reaches (a short axis
    mirrors again)."""
    pos = np.arange(-radius, n_in + radius)
    if n_in == 1:
        return np.zeros_like(pos)
    period = 2 * (n_in - 1)
    m = np.mod(pos, period)
    return np.where(m < n_in, m, period - m)


def blur_axes(op: str, layout: str | None, ndim: int) -> tuple[int, ...]:
    """The axes a blur runs along: every axis but channels (C) and frames (F); all of them
    when there is no layout."""
    if not layout:
        return tuple(range(ndim))
    return tuple(k for k, c in enumerate(layout) if c not in "CF")


def gaussian_taps(op: str, args: KernelArgs, i: int, n_axes: int) -> list[np.ndarray]:
    """Per blurred axis (in layout order), the float32 weights of sample ``i``'s kernel.

    ``window_size`` 0 means 2 * ceil(3 * sigma) + 1; ``sigma`` 0 means OpenCV's default for
    the window, 0.3 * ((window - 1) / 2 - 1) + 0.8. One value serves every axis.
    """
    def per_axis(name: str) -> list[float]:
        v = args.sample(name, i)
        vals = [0.0] if v is None else [float(x) for x in np.asarray(v, np.float64).reshape(-1)]
        if len(vals) == 1:
            return vals * n_axes
        if len(vals) != n_axes:
            raise ValueError(f"Operator `{op}`: argument '{name}' has {len(vals)} values for "
                             f"{n_axes} blurred axes (sample {i})")
        return vals

    taps = []
    for ax, (sigma, win) in enumerate(zip(per_axis("sigma"), per_axis("window_size"))):
        if sigma < 0:
            raise ValueError(f"Operator `{op}`: argument 'sigma' must be non-negative, got {sigma} "
                             f"(sample {i}, axis {ax})")
        if win != int(win) or win < 0 or (win and int(win) % 2 == 0):
            raise ValueError(f"Operator `{op}`: argument 'window_size' must be odd, got {win:g} "
                             f"(sample {i}, axis {ax})")
        if sigma == 0 and win == 0:
            raise ValueError(f"Operator `{op}`: 'sigma' and 'window_size' cannot both be 0 "
                             f"(sample {i}, axis {ax})")
        win = int(win) if win else 2 * math.ceil(3 * sigma) + 1
        sigma = sigma if sigma else 0.3 * ((win - 1) * 0.5 - 1) + 0.8
        x = np.arange(win, dtype=np.float64) - win // 2
        w = np.exp(-x * x / (2 * sigma * sigma))
        taps.append((w / w.sum()).astype(np.float32))
    return taps
