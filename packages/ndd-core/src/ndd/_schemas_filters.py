"""Schemas of the filter operators ``laplacian`` and ``filter``, of the displacement
operators ``water`` and ``sphere``, of ``experimental.warp_perspective``,
``resize_crop_mirror`` and ``tensor_resize``, and the argument handling their kernels share (CPU
here, a GPU kernel later): spatial axes, window taps, anchors, source coordinates.

Argument names and defaults follow DALI 2.4. Where DALI's behaviour depends on whether an
argument was given at all (``laplacian``'s ``scale`` and ``smoothing_size``) the default
here is None and the doc string says what "not set" does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._image_args import _adjust_output_size, _round_half_away
from ._schema import BOOL, DTYPE, FLOAT, FLOATS, INT, INTERP_TYPE, INTS, STR, Arg, OpSchema, OutMeta, given
from ._schemas_image import (
    _ALL_INTERP,
    _RESAMPLING_ARGS,
    RESIZE,
    _check_hw_image,
    _check_interp,
    _err,
    _float_or_same,
    _image_layout,
    _non_negative,
)
from .types import DALIInterpType

_PKG = "ndd-ops-cpu"



def filter_axes(op: str, layout: str | None, ndim: int) -> tuple[int, ...]:
    """The spatial axes a filter runs along: every axis but channels (C) and frames (F), which
    must lie outside the spatial ones; every axis (at most 3) when there is no layout."""
    if not layout:
        if not 1 <= ndim <= 3:
            raise ValueError(f"Operator `{op}`: an input without a layout must have 1 to 3 dimensions, "
                             f"got {ndim}")
        return tuple(range(ndim))
    axes = tuple(k for k, c in enumerate(layout) if c not in "CF")
    if not axes or len(axes) > 3:
        raise ValueError(f"Operator `{op}`: expects 1 to 3 spatial axes (besides C and F), got layout {layout!r}")
    if axes != tuple(range(axes[0], axes[-1] + 1)):
        raise ValueError(f"Operator `{op}`: only channel-first or channel-last layouts are supported, "
                         f"got {layout!r}")
    return axes


# -- laplacian ---------------------------------------------------------------------------

LAPLACIAN_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32,
                                               np.uint64, np.int64, np.float16, np.float32))
LAPLACIAN_MAX_WINDOW = 31


def _out_dtype(op: str, m: OutMeta, dtype: _dtype.DType | None, allowed: Sequence[np.dtype]) -> _dtype.DType:
    """The output type of a filter: ``dtype`` (the input's or float32) or the input's."""
    npd = _dtype.numpy_or_none(m.dtype)
    if npd is None or npd not in allowed:
        raise ValueError(f"Operator `{op}`: does not support input type {m.dtype}")
    if dtype is not None and dtype != m.dtype and dtype != _dtype.float32:
        raise ValueError(f"Operator `{op}`: argument 'dtype' must be the input type ({m.dtype}) or float32, "
                         f"got {dtype}")
    return dtype or m.dtype


def _laplacian_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "laplacian"
    m = inputs[0]
    filter_axes(op, m.layout, m.ndim)
    return [OutMeta(_out_dtype(op, m, args["dtype"], LAPLACIAN_DTYPES), m.ndim, m.layout)]


def _laplacian_validate(args: Any) -> None:
    if args["normalized_kernel"] and given(args, "scale"):
        raise ValueError("Operator `laplacian`: argument 'scale' cannot be given when 'normalized_kernel' is True")


def smoothing_window(size: int) -> np.ndarray:
    """Binomial smoothing taps of odd ``size`` ([1, 2, 1] for 3), float32."""
    return np.array([math.comb(size - 1, k) for k in range(size)], np.float32)


def derivative_window(size: int) -> np.ndarray:
    """Second-derivative taps of odd ``size`` >= 3: [1, -2, 1] smoothed by binomial taps of
    ``size - 2`` ([1, 0, -2, 0, 1] for 5), float32."""
    return np.convolve([1.0, -2.0, 1.0], smoothing_window(size - 2)).astype(np.float32)


def _per_axis_ints(op: str, args: Any, name: str, i: int, n: int) -> list[int] | None:
    v = args.sample(name, i)
    if v is None:
        return None
    vals = [int(x) for x in np.ravel(v)]
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise ValueError(f"Operator `{op}`: argument '{name}' has {len(vals)} values for {n} spatial axes "
                         f"(sample {i}); give 1 or {n}")
    return vals


def laplacian_windows(op: str, args: Any, i: int, n: int) -> list[tuple[list[np.ndarray], float]]:
    """Sample ``i``'s partial derivatives over ``n`` spatial axes: for each, the taps per axis
    (the derivative window along its own axis, smoothing windows along the others: of
    ``smoothing_size`` per axis or, not set, of the derivative's window size) and its scale
    (``scale``, or with ``normalized_kernel`` 2 ** (n + 2 - sum of its window sizes))."""
    wins = _per_axis_ints(op, args, "window_size", i, n)
    smooth = _per_axis_ints(op, args, "smoothing_size", i, n)
    v = args.sample("scale", i)
    scales = [1.0] if v is None else [float(x) for x in np.ravel(v)]
    if len(scales) == 1:
        scales = scales * n
    elif len(scales) != n:
        raise ValueError(f"Operator `{op}`: argument 'scale' has {len(scales)} values for {n} spatial axes "
                         f"(sample {i}); give 1 or {n}")
    for name, vals, low in (("window_size", wins, 3), ("smoothing_size", smooth, 1)):
        for w in vals or ():
            if not low <= w <= LAPLACIAN_MAX_WINDOW or w % 2 == 0:
                raise ValueError(f"Operator `{op}`: argument '{name}' must be odd and between {low} and "
                                 f"{LAPLACIAN_MAX_WINDOW}, got {w} (sample {i})")
    out = []
    for d in range(n):
        sizes = [wins[d] if j == d else (smooth[j] if smooth else wins[d]) for j in range(n)]
        taps = [derivative_window(s) if j == d else smoothing_window(s) for j, s in enumerate(sizes)]
        scale = 2.0 ** (n + 2 - sum(sizes)) if args["normalized_kernel"] else scales[d]
        out.append((taps, scale))
    return out


LAPLACIAN = OpSchema(
    "laplacian",
    args={
        "window_size": Arg(INTS, (3,), per_sample=True,
                           doc="odd size (3 to 31) of the derivative window: one, or one per spatial axis"),
        "smoothing_size": Arg(INTS, None, per_sample=True,
                              doc="odd size (1 to 31) of the smoothing window applied along each axis: one, or one "
                                  "per spatial axis (not set: each derivative's window size)"),
        "scale": Arg(FLOATS, None, per_sample=True,
                     doc="factor of each partial derivative: one, or one per spatial axis (not set: 1)"),
        "normalized_kernel": Arg(BOOL, False, doc="scale each partial derivative by 2 ** (n + 2 - sum of its "
                                                  "window sizes); not with 'scale'"),
        "dtype": Arg(DTYPE, None, doc="output type: the input type (default) or float32"),
    },
    infer=_laplacian_infer, validate=_laplacian_validate, provided_by=_PKG,
    doc="Sum of the second derivatives along the spatial axes (not C, not F), each a separable "
        "convolution in float32; the border mirrored (dcb|abcd|cba).",
)


# -- filter ------------------------------------------------------------------------------

FILTER_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.float16, np.float32))
FILTER_BORDERS = ("reflect_101", "reflect_1001", "wrap", "clamp", "constant")


def filter_layout(op: str, layout: str | None, ndim: int) -> tuple[int, int, bool]:
    """How ``filter`` reads a sample: (leading frame/channel axes, spatial axes, channels last).
    The layout may start with F, C or FC and end with C; without one every axis is spatial."""
    if not layout:
        return 0, ndim, False
    lead = 2 if layout.startswith("FC") else int(layout[:1] in ("F", "C"))
    last = layout.endswith("C") and len(layout) > lead
    spatial = layout[lead:len(layout) - last]
    if "F" in layout[lead:] or "C" in spatial:
        raise ValueError(f"Operator `{op}`: expects the layout [F][C]<spatial>[C] (frames first, channels "
                         f"first or last), got {layout!r}")
    return lead, len(spatial), last


def _filter_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "filter"
    m, f = inputs[0], inputs[1]
    npd = _dtype.numpy_or_none(m.dtype)
    if npd is None or npd not in FILTER_DTYPES:
        raise ValueError(f"Operator `{op}`: does not support input type {m.dtype} (as DALI: uint8, int8, uint16, "
                         "int16, float16, float32)")
    if f.dtype != _dtype.float32:
        raise ValueError(f"Operator `{op}`: the filter must be float32, got {f.dtype}")
    _, n_sp, _ = filter_layout(op, m.layout, m.ndim)
    if n_sp not in (2, 3):
        raise ValueError(f"Operator `{op}`: expects 2 or 3 spatial axes, got a {m.ndim}-D input with layout "
                         f"{m.layout!r}; mark channels and frames in the layout (HWC, CHW, FHWC)")
    if f.ndim != n_sp:
        raise ValueError(f"Operator `{op}`: the filter must have as many dimensions as the input has spatial axes "
                         f"({n_sp}), got {f.ndim}")
    if len(inputs) > 2 and inputs[2] is not None:
        fv = inputs[2]
        if fv.dtype != m.dtype or fv.ndim != 0:
            raise ValueError(f"Operator `{op}`: fill_value must be a scalar of the input type ({m.dtype}), got a "
                             f"{fv.ndim}-D {fv.dtype} value")
    dt = args["dtype"]
    if dt is not None and dt != m.dtype and dt != _dtype.float32:
        raise ValueError(f"Operator `{op}`: argument 'dtype' must be the input type ({m.dtype}) or float32, "
                         f"got {dt}")
    return [OutMeta(dt or m.dtype, m.ndim, m.layout)]


def filter_anchor(op: str, args: Any, i: int, fshape: tuple[int, ...]) -> tuple[int, ...]:
    """Sample ``i``'s anchor in the filter (-1: the middle, rounded down), checked."""
    vals = [int(x) for x in np.ravel(args.sample("anchor", i))]
    if len(vals) == 1:
        vals = vals * len(fshape)
    if len(vals) != len(fshape):
        raise ValueError(f"Operator `{op}`: argument 'anchor' must have {len(fshape)} values (or one), got "
                         f"{len(vals)} (sample {i})")
    for a, n in zip(vals, fshape):
        if not -1 <= a < n:
            raise ValueError(f"Operator `{op}`: argument 'anchor' {vals} must lie within the filter of shape "
                             f"{tuple(fshape)} (sample {i})")
    return tuple(n // 2 if a < 0 else a for a, n in zip(vals, fshape))


FILTER = OpSchema(
    "filter", inputs=("data", "filter", "fill_value"), min_inputs=2, host_args_from=1,
    args={
        "anchor": Arg(INTS, (-1,), per_sample=True,
                      doc="position of the filter over the output point, one value per filter axis "
                          "(-1: the middle, rounded down); ignored in 'valid' mode"),
        "border": Arg(STR, "reflect_101", choices=FILTER_BORDERS,
                      doc="out-of-bounds handling: reflect_101 (dcb|abcd), reflect_1001 (cba|abc), wrap, clamp, "
                          "constant (the fill_value input, or 0)"),
        "mode": Arg(STR, "same", choices=("same", "valid"),
                    doc="'same': output of the input's size; 'valid': only positions with the whole filter "
                        "inside (each spatial extent shrinks by the filter extent - 1)"),
        "dtype": Arg(DTYPE, None, doc="output type: the input type (default) or float32"),
    },
    infer=_filter_infer, provided_by=_PKG,
    doc="Correlate each sample with its filter (the second input, float32; not flipped), in float32; "
        "the optional third input is the scalar padding value of border='constant'.",
)


# -- water and sphere --------------------------------------------------------------------

DISPLACEMENT_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32))


def _displacement_infer(op: str) -> Any:
    def infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
        m = inputs[0]
        npd = _dtype.numpy_or_none(m.dtype)
        if npd is None or npd not in DISPLACEMENT_DTYPES:
            raise ValueError(f"Operator `{op}`: expects uint8 or float32 images (as DALI), got {m.dtype}")
        if (m.layout or ("HWC" if m.ndim == 3 else None)) != "HWC":
            raise ValueError(f"Operator `{op}`: expects HWC images (as DALI), got a {m.ndim}-D input with layout "
                             f"{m.layout!r}")
        if args["interp_type"] not in (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR):
            raise ValueError(f"Operator `{op}`: argument 'interp_type' must be INTERP_NN or INTERP_LINEAR, got "
                             f"{args['interp_type'].name}")
        return [OutMeta(m.dtype, 3, "HWC")]
    return infer


def water_coords(args: Any, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinates (x, y), float32 (h, w), of every output pixel (y, x) of ``water``:
    x + ampl_x * sin(freq_x * y + phase_x) and y + ampl_y * cos(freq_y * x + phase_y), in
    float32 (the sine and cosine rounded from float64)."""
    f32 = np.float32
    ys, xs = np.arange(h, dtype=f32), np.arange(w, dtype=f32)
    arg_x = ys * f32(args["freq_x"]) + f32(args["phase_x"])
    arg_y = xs * f32(args["freq_y"]) + f32(args["phase_y"])
    dx = f32(args["ampl_x"]) * np.sin(arg_x.astype(np.float64)).astype(f32)
    dy = f32(args["ampl_y"]) * np.cos(arg_y.astype(np.float64)).astype(f32)
    return xs[None, :] + dx[:, None], ys[:, None] + dy[None, :]


def sphere_coords(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinates (x, y), float32 (h, w), of every output pixel of ``sphere``: the
    offset from the image centre (of the pixel centre) scaled by its length over the integer
    part of the larger half-extent."""
    f32 = np.float32
    mid_x, mid_y = f32(w) * f32(0.5), f32(h) * f32(0.5)
    d = f32(int(max(mid_x, mid_y)))
    ty = (np.arange(h, dtype=f32) + f32(0.5) - mid_y)[:, None]
    tx = (np.arange(w, dtype=f32) + f32(0.5) - mid_x)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):  # a 1x1 image: d is 0, as in DALI
        rad = np.sqrt(tx * tx + ty * ty) / d
    return mid_x + rad * tx, mid_y + rad * ty


def displacement_fill(fill: float, dtype: np.dtype) -> Any:
    """``fill_value`` as the pixel type, as DALI converts it: for uint8 truncated and wrapped
    (300 gives 44, -3.7 gives 253)."""
    if np.dtype(dtype) == np.uint8:
        return np.uint8(int(math.trunc(fill)) & 0xFF) if math.isfinite(fill) else np.uint8(0)
    return np.float32(fill)


_DISPLACEMENT_ARGS = {
    "fill_value": Arg(FLOAT, 0.0, doc="value of the pixels sampled outside the image (uint8 images: "
                                      "truncated and wrapped to 0..255, as DALI)"),
    "interp_type": Arg(INTERP_TYPE, DALIInterpType.INTERP_NN, doc="INTERP_NN or INTERP_LINEAR"),
    "mask": Arg(INT, 1, per_sample=True, doc="0: return the sample unchanged; 1: apply the augmentation"),
}

WATER = OpSchema(
    "water",
    args={
        "ampl_x": Arg(FLOAT, 10.0, doc="amplitude of the wave along x, in pixels"),
        "ampl_y": Arg(FLOAT, 10.0, doc="amplitude of the wave along y, in pixels"),
        "freq_x": Arg(FLOAT, 2 * math.pi / 128, doc="frequency of the wave along x (per pixel row)"),
        "freq_y": Arg(FLOAT, 2 * math.pi / 128, doc="frequency of the wave along y (per pixel column)"),
        "phase_x": Arg(FLOAT, 0.0, doc="phase of the wave along x"),
        "phase_y": Arg(FLOAT, 0.0, doc="phase of the wave along y"),
        **_DISPLACEMENT_ARGS,
    },
    infer=_displacement_infer("water"), provided_by=_PKG,
    doc="Underwater look: output pixel (x, y) samples the input at (x + ampl_x * sin(freq_x * y + phase_x), "
        "y + ampl_y * cos(freq_y * x + phase_y)); HWC uint8 or float32 images.",
)

SPHERE = OpSchema(
    "sphere", args=dict(_DISPLACEMENT_ARGS), infer=_displacement_infer("sphere"), provided_by=_PKG,
    doc="Bulge the image as if seen on a sphere: each pixel samples the input at its offset from the "
        "centre scaled by the offset's length over half the larger extent; HWC uint8 or float32 images.",
)


# -- experimental.warp_perspective -------------------------------------------------------

PERSPECTIVE_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int16, np.uint16, np.float32))
PERSPECTIVE_BORDERS = ("constant", "replicate", "reflect", "reflect_101", "wrap")
_PERSPECTIVE_GUESS = {2: "HW", 3: "HWC"}


def perspective_layout(op: str, layout: str | None, ndim: int) -> tuple[str, int, bool]:
    """(layout, leading frame/channel axes, channels last) of a ``warp_perspective`` input:
    HW, HWC, CHW, optionally after F; without a layout 2-D is HW and 3-D HWC."""
    lay = layout or _PERSPECTIVE_GUESS.get(ndim)
    if lay not in ("HW", "HWC", "FHWC", "CHW", "FCHW"):
        raise ValueError(f"Operator `{op}`: expects the layout HW, HWC, FHWC, CHW or FCHW, got "
                         f"{lay!r} ({ndim}-D input)")
    return lay, lay.index("H"), lay.endswith("C")


def _perspective_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "experimental.warp_perspective"
    m = inputs[0]
    npd = _dtype.numpy_or_none(m.dtype)
    if npd is None or npd not in PERSPECTIVE_DTYPES:
        raise ValueError(f"Operator `{op}`: accepts uint8, int16, uint16 and float32 inputs, got {m.dtype}")
    lay, _, _ = perspective_layout(op, m.layout, m.ndim)
    has_matrix = given(args, "matrix")
    if len(inputs) > 1 and inputs[1] is not None:
        if has_matrix:
            raise ValueError(f"Operator `{op}`: the matrix input and the 'matrix' argument cannot both be given")
        if inputs[1].dtype != _dtype.float32 or inputs[1].ndim != 2:
            raise ValueError(f"Operator `{op}`: the matrix input must hold float32 3x3 matrices, got "
                             f"{inputs[1].ndim}-D {inputs[1].dtype}")
    elif not has_matrix:
        raise ValueError(f"Operator `{op}`: give the 3x3 matrix, as the 'matrix' argument or as the second input")
    if args["interp_type"] not in (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR,
                                   DALIInterpType.INTERP_CUBIC):
        raise ValueError(f"Operator `{op}`: argument 'interp_type' must be INTERP_NN, INTERP_LINEAR or "
                         f"INTERP_CUBIC, got {args['interp_type'].name}")
    fill = args["fill_value"] or ()
    if len(fill) > 1 and not lay.endswith("C"):
        raise ValueError(f"Operator `{op}`: only one fill_value can be given for planar ({lay}) data")
    return [OutMeta(m.dtype, m.ndim, lay)]


def perspective_matrix(op: str, m: Any, i: int, corner: bool) -> np.ndarray:
    """Sample ``i``'s 3x3 float32 matrix; with ``corner`` (pixel_origin="corner") moved to
    OpenCV's pixel centres (shift by -0.5 after and +0.5 before), in float32 as DALI does."""
    a = np.asarray(m, np.float32)
    if a.size != 9:
        raise ValueError(f"Operator `{op}`: the matrix must be 3x3, got {a.size} values (shape {a.shape}) "
                         f"for sample {i}")
    a = a.reshape(3, 3)
    if not corner:
        return a
    f32 = np.float32
    shift = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]], f32)
    back = np.array([[1, 0, -0.5], [0, 1, -0.5], [0, 0, 1]], f32)

    def mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # float32 sums in order k = 0, 1, 2
        return (f32(0) + x[:, :1] * y[:1, :]) + x[:, 1:2] * y[1:2, :] + x[:, 2:] * y[2:, :]

    return mul(back, mul(a, shift))


def perspective_size(op: str, args: Any, i: int, hw: tuple[int, int]) -> tuple[int, int]:
    """Sample ``i``'s output (H, W): ``size`` rounded half away from zero, at least 1; not set:
    the input's."""
    v = args.sample("size", i)
    if v is None or not np.size(v):
        return hw
    vals = [float(x) for x in np.ravel(v)]
    if len(vals) != 2:
        raise ValueError(f"Operator `{op}`: argument 'size' must be (H, W), got {vals} for sample {i}")
    return tuple(max(int(math.copysign(math.floor(abs(x) + 0.5), x)), 1) for x in vals)


def perspective_fill(op: str, fill: Sequence[float] | None, channels: int) -> tuple[float, float, float, float]:
    """``fill_value`` as OpenCV's 4-value border scalar: none -> 0, one value -> every channel,
    else one per channel."""
    fill = tuple(fill or ())
    if len(fill) > 1:
        if len(fill) != channels:
            raise ValueError(f"Operator `{op}`: argument 'fill_value' has {len(fill)} values but the images have "
                             f"{channels} channels")
        return tuple(fill) + (0.0,) * (4 - len(fill))
    v = fill[0] if fill else 0.0
    return (v, v, v, v)


WARP_PERSPECTIVE = OpSchema(
    "experimental.warp_perspective", inputs=("input", "matrix_input"), min_inputs=1, host_args_from=1,
    args={
        "matrix": Arg(FLOATS, None, per_sample=True,
                      doc="3x3 perspective matrix, output to input coordinates (see inverse_map); or the second input"),
        "size": Arg(FLOATS, None, per_sample=True, doc="output size (H, W), rounded, at least 1 (not set: the "
                                                       "input size)"),
        "inverse_map": Arg(BOOL, True, doc="the matrix maps output to input coordinates; False: input to output"),
        "fill_value": Arg(FLOATS, (), doc="value(s) outside the source with border_mode='constant': one, or one "
                                          "per channel (not set: 0)"),
        "interp_type": Arg(INTERP_TYPE, DALIInterpType.INTERP_LINEAR, doc="INTERP_NN, INTERP_LINEAR or INTERP_CUBIC"),
        "border_mode": Arg(STR, "constant", choices=PERSPECTIVE_BORDERS,
                           doc="constant, replicate, reflect (cba|abc), reflect_101 (dcb|abcd) or wrap"),
        "pixel_origin": Arg(STR, "corner", choices=("corner", "center"),
                            doc="'corner': (0, 0) is the top-left corner of the first pixel; 'center': its centre "
                                "(OpenCV's convention)"),
    },
    infer=_perspective_infer, provided_by=_PKG,
    doc="Perspective warp of images (HW, HWC, CHW, and sequences of them), as OpenCV's warpPerspective.",
)


# -- resize_crop_mirror ------------------------------------------------------------------


def _rcm_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "resize_crop_mirror"
    m = inputs[0]
    _check_hw_image(op, m)
    return [OutMeta(_float_or_same(op, m, args["dtype"]), m.ndim, _image_layout(m))]


def _rcm_validate(args: Any) -> None:
    op = "resize_crop_mirror"
    _non_negative(op, args, "resize_shorter", "resize_longer", "max_size")
    if args["resize_z"] or args["crop_d"]:
        raise _err(op, "resize_z" if args["resize_z"] else "crop_d", "applies to volumes only (ndd resizes "
                                                                     "HWC and HW images)")
    if given(args, "crop_w") != given(args, "crop_h"):
        raise ValueError(f"Operator `{op}`: arguments 'crop_w' and 'crop_h' must be given together")
    if given(args, "crop") and given(args, "crop_w"):
        raise ValueError(f"Operator `{op}`: argument 'crop' cannot be combined with 'crop_w' and 'crop_h'")
    if (args["roi_start"] is None) != (args["roi_end"] is None):
        raise ValueError(f"Operator `{op}`: arguments 'roi_start' and 'roi_end' must be given together")
    _check_interp(op, args, ("interp_type", "min_filter", "mag_filter"), _ALL_INTERP)


RESIZE_CROP_MIRROR = OpSchema(
    "resize_crop_mirror",
    args={
        **{k: a for k, a in RESIZE.args.items() if k != "save_attrs"},
        "crop": Arg(FLOATS, None, per_sample=True, doc="window (H, W) cut from the resized image (fractions dropped)"),
        "crop_h": Arg(FLOAT, None, per_sample=True, doc="window height (with crop_w; 0 or not set: the whole height)"),
        "crop_w": Arg(FLOAT, None, per_sample=True, doc="window width (with crop_h; 0 or not set: the whole width)"),
        "crop_d": Arg(FLOAT, 0.0, per_sample=True, doc="volumes only"),
        "crop_pos_x": Arg(FLOAT, 0.5, per_sample=True, doc="window position: x0 = crop_pos_x * (W - crop_W)"),
        "crop_pos_y": Arg(FLOAT, 0.5, per_sample=True, doc="window position: y0 = crop_pos_y * (H - crop_H)"),
        "crop_pos_z": Arg(FLOAT, 0.5, per_sample=True, doc="volumes only"),
        "rounding": Arg(STR, "round", choices=("round", "truncate"), doc="how the window position is rounded"),
        "mirror": Arg(INT, 0, per_sample=True, doc="flips: 1 horizontal, 2 vertical (4 depthwise), or a sum"),
    },
    infer=_rcm_infer, validate=_rcm_validate, provided_by=_PKG,
    doc="resize, then crop, then flip, in one operator (HWC or HW images).",
)


# -- tensor_resize -----------------------------------------------------------------------

TENSOR_RESIZE_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int16, np.uint16, np.float32))
_ROUNDING = {"round": _round_half_away, "truncate": math.trunc, "ceil": math.ceil}


def tensor_resize_axes(op: str, args: Any, layout: str | None, ndim: int) -> tuple[int, ...]:
    """The axes ``sizes``, ``scales``, ``max_size`` and the ROI refer to: ``axes`` (negative from
    the back), ``axis_names`` (letters of the layout) or every axis."""
    if args["axes"] is not None:
        out = []
        for a in args["axes"]:
            if not -ndim <= a < ndim:
                raise ValueError(f"Operator `{op}`: axis {a} is out of range for a {ndim}-D input")
            out.append(a % ndim)
        return tuple(out)
    if args["axis_names"] is not None:
        if not layout:
            raise ValueError(f"Operator `{op}`: 'axis_names' needs an input with a layout")
        missing = [c for c in args["axis_names"] if c not in layout]
        if missing:
            raise ValueError(f"Operator `{op}`: axis {missing[0]!r} is not in the input layout {layout!r}")
        return tuple(layout.index(c) for c in args["axis_names"])
    return tuple(range(ndim))


def _tr_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "tensor_resize"
    m = inputs[0]
    npd = _dtype.numpy_or_none(m.dtype)
    if npd is None or npd not in TENSOR_RESIZE_DTYPES:
        raise ValueError(f"Operator `{op}`: supports uint8, int16, uint16 and float32 inputs, got {npd or m.dtype}")
    tensor_resize_axes(op, args, m.layout, m.ndim)
    return [OutMeta(_float_or_same(op, m, args["dtype"]), m.ndim, m.layout)]


def _tr_validate(args: Any) -> None:
    op = "tensor_resize"
    if given(args, "sizes") == given(args, "scales"):
        raise ValueError(f"Operator `{op}`: give one of 'sizes' or 'scales', not both")
    if given(args, "scales") and args["mode"] in ("not_larger", "not_smaller"):
        raise ValueError(f"Operator `{op}`: 'scales' cannot be used with mode {args['mode']!r} (give 'sizes')")
    if args["axes"] is not None and args["axis_names"] is not None:
        raise ValueError(f"Operator `{op}`: arguments 'axes' and 'axis_names' are mutually exclusive")
    if (args["roi_start"] is None) != (args["roi_end"] is None):
        raise ValueError(f"Operator `{op}`: arguments 'roi_start' and 'roi_end' must be given together")
    _non_negative(op, args, "max_size")
    _check_interp(op, args, ("interp_type", "min_filter", "mag_filter"), _ALL_INTERP)


def _per_axis(op: str, args: Any, name: str, i: int, n: int, one_ok: bool) -> list[float] | None:
    v = args.sample(name, i) if args.is_per_sample(name) else args[name]
    if v is None:
        return None
    vals = [float(x) for x in np.ravel(v)]
    if one_ok and len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise ValueError(f"Operator `{op}`: argument '{name}' has {len(vals)} values for {n} axes (sample {i})")
    return vals


def tensor_resize_plan(op: str, args: Any, i: int, shape: tuple[int, ...], axes: tuple[int, ...]
                       ) -> list[tuple[int, int, float, float]]:
    """Sample ``i``'s resampling of every axis: (axis, output extent, ROI start, ROI end), the
    ROI in input coordinates (end < start: flipped), following DALI's rules. The axes not
    listed count as requested at their own extent (scale 1): they weigh in the average scale
    that fills a 0 size ("default" mode) and in the common scale of "not_larger" and
    "not_smaller" (which can resize them too). Sizes are rounded half away from zero; scales
    multiply the whole extent and are rounded as ``size_rounding`` says; ``max_size`` caps
    the listed axes; with ``subpixel_scale`` the ROI moves about the ``alignment`` point so
    that the scale stays the requested one after rounding (an explicit ``alignment`` leaves
    the axes not listed aligned at their start)."""
    n, nd = len(axes), len(shape)
    full = [float(e) for e in shape]
    lo, hi = [0.0] * nd, list(full)
    start, end = _per_axis(op, args, "roi_start", i, n, False), _per_axis(op, args, "roi_end", i, n, False)
    if start is not None and end is not None:
        for d, ax in enumerate(axes):
            a, b = start[d], end[d]
            if args["roi_relative"]:
                a, b = a * full[ax], b * full[ax]
            lo[ax], hi[ax] = a, b
    sizes = _per_axis(op, args, "sizes", i, n, False)
    scales = _per_axis(op, args, "scales", i, n, False)
    align = [0.0 if given(args, "alignment") else 0.5] * nd
    limit = [0.0] * nd
    for name, dst in (("alignment", align), ("max_size", limit)):
        vals = _per_axis(op, args, name, i, n, True)
        for d, ax in enumerate(axes):
            if vals is not None:
                dst[ax] = vals[d]
    flip = [hi[d] < lo[d] for d in range(nd)]
    ins = [abs(hi[d] - lo[d]) for d in range(nd)]
    req = list(full)
    for d, ax in enumerate(axes):
        req[ax] = sizes[d] if sizes is not None else scales[d] * full[ax]
    req = [-r if f else r for r, f in zip(req, flip)]
    req = _adjust_output_size(req, ins, args["mode"], limit if any(limit) else None)
    rnd = _round_half_away if sizes is not None else _ROUNDING[args["size_rounding"]]
    out = []
    for d in range(nd):
        a, b = lo[d], hi[d]
        k = max(1, int(rnd(abs(req[d])))) if shape[d] else 0  # an empty axis stays empty
        if args["subpixel_scale"] and req[d] and k != abs(req[d]):
            adj = k / abs(req[d])
            c = a + align[d] * (b - a)  # alignment counts from the ROI's start, flipped or not
            a, b = c + (a - c) * adj, c + (b - c) * adj
        if (req[d] < 0) != (b < a):
            a, b = b, a
        out.append((d, k, a, b))
    return out


def resized_block(plans: Sequence[list[tuple[int, int, float, float]]], shapes: Sequence[tuple[int, ...]],
                  ndim: int) -> tuple[int, ...]:
    """The consecutive axes DALI 2.4 resamples in every sample of a batch, from the samples'
    ``tensor_resize_plan`` results: from the first to the last axis that changes in any sample.
    An axis that keeps its extent counts as changed only when its ROI ends before the input's
    end (so one whose ROI merely widens past the end, as ``subpixel_scale`` does when rounding
    raises the size, is left as it is). With no changed axis, the last one; a single axis is
    paired with the next one (the one before it at the end)."""
    changed = sorted({d for plan, shape in zip(plans, shapes) for d, n_out, _, hi in plan
                      if n_out != shape[d] or hi < shape[d]}) or [ndim - 1]
    first, last = changed[0], changed[-1]
    if first == last and ndim > 1:
        first, last = (first, first + 1) if first + 1 < ndim else (first - 1, first)
    return tuple(range(first, last + 1))


TENSOR_RESIZE = OpSchema(
    "tensor_resize",
    args={
        "sizes": Arg(FLOATS, None, per_sample=True, doc="output extents of the axes (0: derived as 'mode' says)"),
        "scales": Arg(FLOATS, None, per_sample=True, doc="scale factors of the axes (output: scale * whole extent, "
                                                         "rounded as size_rounding says)"),
        "axes": Arg(INTS, None, doc="the axes sizes, scales, max_size and the ROI refer to (not set: all)"),
        "axis_names": Arg(STR, None, doc="the same axes as layout letters"),
        "alignment": Arg(FLOATS, None, per_sample=True,
                         doc="point of the ROI that keeps its place when the output extent is rounded "
                             "(0: start, 0.5: centre, 1: end); one value or one per axis (not set: 0.5 "
                             "on every axis; set: 0 on the axes not listed, as DALI 2.4)"),
        "size_rounding": Arg(STR, "round", choices=("round", "truncate", "ceil"),
                             doc="how an output extent computed from scales is rounded"),
        "mode": Arg(STR, "default", choices=("default", "stretch", "not_larger", "not_smaller"),
                    doc="how the requested extents combine (see resize)"),
        "max_size": Arg(FLOATS, None, doc="limit of the output extents, one value or one per axis"),
        "roi_start": Arg(FLOATS, None, per_sample=True, doc="input region start, one value per axis"),
        "roi_end": Arg(FLOATS, None, per_sample=True, doc="input region end, one value per axis (end < start flips)"),
        "roi_relative": Arg(BOOL, False, doc="ROI given as fractions of the extents"),
        "subpixel_scale": Arg(BOOL, True, doc="keep the exact scale when the output extent is rounded"),
        **_RESAMPLING_ARGS,
    },
    infer=_tr_infer, validate=_tr_validate, provided_by=_PKG,
    doc="Resize any axes of a tensor (at most 3 consecutive ones change), with resize's filters.",
)

FILTERS_SCHEMAS = (LAPLACIAN, FILTER, WATER, SPHERE, WARP_PERSPECTIVE, RESIZE_CROP_MIRROR, TENSOR_RESIZE)
