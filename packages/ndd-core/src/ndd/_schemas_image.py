"""Schemas of the image operators (decoders, geometry, colour, normalisation).

They live in core so that every backend package (``ndd-ops-cpu``, ``ndd-ops-cuda``)
shares one public surface: names, arguments, defaults, output metadata and the
argument checks that can run at call time. Kernels are attached by the plugins.

Argument names and defaults follow DALI. Where DALI's default means "not set"
(``min_filter``, ``mag_filter``, ``contrast_center``, ``fill_value``) the default
here is None and the doc string says what "not set" does.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _dtype
from ._schema import (
    BOOL,
    DTYPE,
    FLOAT,
    FLOATS,
    IMAGE_TYPE,
    INT,
    INTERP_TYPE,
    INTS,
    STR,
    Arg,
    OpSchema,
    OutMeta,
    given,
)
from .types import DALIImageType, DALIInterpType

_PKG = "ndd-ops-cpu"
_LINEAR = DALIInterpType.INTERP_LINEAR


def _err(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


def image_axes(op: str, layout: str | None, ndim: int) -> str:
    """The layout of an image input: its own, or HWC / HW guessed from ``ndim``."""
    if layout:
        return layout
    if ndim == 3:
        return "HWC"
    if ndim == 2:
        return "HW"
    raise ValueError(f"Operator `{op}`: expects an image (HWC, HW or CHW), got a {ndim}-D input without a layout")


def _check_hw_image(op: str, m: OutMeta, allowed: tuple[str, ...] = ("HWC", "HW")) -> None:
    lay = image_axes(op, m.layout, m.ndim)
    if lay not in allowed:
        raise ValueError(
            f"Operator `{op}`: expects an input with layout {' or '.join(allowed)}, got {lay!r}"
        )


def _non_negative(op: str, args: dict, *names: str) -> None:
    for name in names:
        v = args.get(name)
        if v is None:
            continue
        vals = v if isinstance(v, tuple) else (v,)
        if any(x < 0 for x in vals):
            shown = v if isinstance(v, tuple) else v
            raise _err(op, name, f"must be non-negative, got {shown}")


def _check_interp(op: str, args: dict, names: Sequence[str], allowed: Sequence[DALIInterpType]) -> None:
    for name in names:
        v = args.get(name)
        if v is not None and v not in allowed:
            raise _err(op, name, f"must be one of {', '.join(i.name for i in allowed)}; got {v.name}")


def _float_or_same(op: str, m: OutMeta, dt: _dtype.DType | None) -> _dtype.DType:
    if dt is None:
        return m.dtype
    if dt != m.dtype and dt != _dtype.float32:
        raise _err(op, "dtype", f"must be the input type ({m.dtype}) or float32, got {dt}")
    return dt


def _given(args: dict, name: str) -> bool:
    """Whether ``name`` was given: a constant (0 included: the size arguments default to None
    to tell, as DALI does), or per-sample values (a Batch)."""
    return args.get(name) is not None or name in (getattr(args, "batch_args", None) or ())


def _window_size(op: str, args: dict, names: tuple[str, ...]) -> None:
    crop = args.get("crop")
    if crop is not None and len(crop) not in (2, 3):
        raise _err(op, "crop", f"must have 2 (H, W) or 3 (D, H, W) values, got {len(crop)}")
    if _given(args, "crop") and any(_given(args, n) for n in names):
        raise ValueError(f"Operator `{op}`: argument 'crop' cannot be combined with {'/'.join(names)}")
    _non_negative(op, args, "crop", *names)
    present = [n for n in names if _given(args, n)]
    if present and len(present) != len(names):
        raise ValueError(f"Operator `{op}`: arguments {' and '.join(repr(n) for n in names)} must be "
                         f"given together (as in DALI), got only {present[0]!r}")


# -- decoders ---------------------------------------------------------------------

_ALL_INTERP = tuple(DALIInterpType)
_WARP_INTERP = (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR)
_DECODER_DTYPES = (_dtype.uint8, _dtype.uint16, _dtype.uint32, _dtype.int8, _dtype.int16, _dtype.int32,
                   _dtype.float32)

_DECODER_ARGS = {
    "output_type": Arg(IMAGE_TYPE, DALIImageType.RGB, doc="colour space of the output (RGB, BGR, GRAY, YCbCr, ANY_DATA)"),
    "dtype": Arg(DTYPE, _dtype.uint8, doc="output type: uint8, uint16, uint32, int8, int16, int32 or float32 "
                                            "(values scaled to its range, float to [0, 1])"),
    "adjust_orientation": Arg(BOOL, True, doc="apply the EXIF orientation tag"),
    "use_fast_idct": Arg(BOOL, False, doc="use libjpeg-turbo's fast (less accurate) integer IDCT"),
    # Accepted for compatibility with DALI; they tune the GPU decoder and caches only.
    "affine": Arg(BOOL, True, doc="ignored on the CPU"),
    "hw_decoder_load": Arg(FLOAT, 0.65, doc="ignored on the CPU"),
    "hybrid_huffman_threshold": Arg(INT, 1000000, doc="ignored on the CPU"),
    "device_memory_padding": Arg(INT, 16777216, doc="ignored on the CPU"),
    "host_memory_padding": Arg(INT, 8388608, doc="ignored on the CPU"),
    "device_memory_padding_jpeg2k": Arg(INT, 0, doc="ignored on the CPU"),
    "host_memory_padding_jpeg2k": Arg(INT, 0, doc="ignored on the CPU"),
    "jpeg_fancy_upsampling": Arg(BOOL, False, doc="GPU only; the CPU decoder always upsamples chroma smoothly"),
    "preallocate_width_hint": Arg(INT, 0, doc="ignored on the CPU"),
    "preallocate_height_hint": Arg(INT, 0, doc="ignored on the CPU"),
}
# Only decoders.image has DALI's decoded-image cache arguments (the crop and slice decoders do not).
_CACHE_ARGS = {
    "cache_size": Arg(INT, 0, doc="ignored on the CPU"),
    "cache_threshold": Arg(INT, 0, doc="ignored on the CPU"),
    "cache_type": Arg(STR, "", doc="ignored on the CPU"),
    "cache_batch_copy": Arg(BOOL, True, doc="ignored on the CPU"),
    "cache_debug": Arg(BOOL, False, doc="ignored on the CPU"),
}

_CROP_WINDOW_ARGS = {
    "crop": Arg(FLOATS, None, per_sample=True, doc="window shape (H, W); exclusive with crop_w/crop_h"),
    "crop_w": Arg(FLOAT, None, per_sample=True, doc="window width in pixels (0 or not given: whole width)"),
    "crop_h": Arg(FLOAT, None, per_sample=True, doc="window height in pixels (0 or not given: whole height)"),
    "crop_d": Arg(FLOAT, 0.0, per_sample=True, doc="window depth (volumes only; must be 0 for images)"),
    "crop_pos_x": Arg(FLOAT, 0.5, per_sample=True, doc="normalised horizontal anchor: x0 = crop_pos_x * (W - crop_w)"),
    "crop_pos_y": Arg(FLOAT, 0.5, per_sample=True, doc="normalised vertical anchor: y0 = crop_pos_y * (H - crop_h)"),
    "crop_pos_z": Arg(FLOAT, 0.5, per_sample=True, doc="normalised depth anchor (volumes only)"),
    "rounding": Arg(STR, "round", choices=("round", "truncate"), doc="how the window anchor is rounded"),
}

_OOB = {
    "out_of_bounds_policy": Arg(STR, "error", choices=("error", "pad", "trim_to_shape"),
                                doc="a window outside the input: raise, pad with fill_values, or shrink it"),
    "fill_values": Arg(FLOATS, (0.0,), doc="padding value, one for all channels or one per channel"),
}

_RANDOM_CROP_ARGS = {
    "random_area": Arg(FLOATS, (0.08, 1.0), doc="range of the window area as a fraction of the image area"),
    "random_aspect_ratio": Arg(FLOATS, (0.75, 4 / 3), doc="range of the window aspect ratio (w / h), drawn log-uniformly"),
    "num_attempts": Arg(INT, 10, doc="tries before falling back to a centre crop"),
}


def _check_random_crop(op: str, args: dict) -> None:
    area, ratio = args["random_area"], args["random_aspect_ratio"]
    if len(area) != 2 or not 0 < area[0] <= area[1]:
        raise _err(op, "random_area", f"must be [min, max] with 0 < min <= max, got {list(area)}")
    if len(ratio) != 2 or not 0 < ratio[0] <= ratio[1]:
        raise _err(op, "random_aspect_ratio", f"must be [min, max] with 0 < min <= max, got {list(ratio)}")
    if args["num_attempts"] < 1:
        raise _err(op, "num_attempts", f"must be at least 1, got {args['num_attempts']}")


def _decoder_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    return [OutMeta(args["dtype"], 3, "HWC")]


def _decoder_validate(op: str):
    def validate(args: dict) -> None:
        if args["dtype"] not in _DECODER_DTYPES:
            raise _err(op, "dtype", f"must be uint8, uint16, uint32, int8, int16, int32 or float32, got {args['dtype']}")
        if op == "decoders.image_crop":
            _window_size(op, args, ("crop_w", "crop_h"))
        if op == "decoders.image_random_crop":
            _check_random_crop(op, args)

    return validate


# DALI's deprecated arguments of these operators (see OpSchema.deprecated).
DECODER_DEPRECATED = dict.fromkeys(("memory_stats", "split_stages", "use_chunk_allocator"))
WINDOW_DEPRECATED = {"output_dtype": "dtype", "image_type": None}

DECODE = OpSchema(
    "decoders.image", args={**_DECODER_ARGS, **_CACHE_ARGS}, deprecated=DECODER_DEPRECATED, infer=_decoder_infer,
    validate=_decoder_validate("decoders.image"), provided_by=_PKG, host_inputs=True,
    doc="Decode encoded images (JPEG, PNG, BMP, TIFF, WebP; a 1-D uint8 tensor each) to HWC.",
)
DECODE_CROP = OpSchema(
    "decoders.image_crop", args={**_DECODER_ARGS, **_CROP_WINDOW_ARGS}, infer=_decoder_infer,
    deprecated=DECODER_DEPRECATED,
    validate=_decoder_validate("decoders.image_crop"), provided_by=_PKG, host_inputs=True,
    doc="Decode images and crop a window (arguments as in `crop`; the window must lie inside the image).",
)
DECODE_RANDOM_CROP = OpSchema(
    "decoders.image_random_crop", args={**_DECODER_ARGS, **_RANDOM_CROP_ARGS}, infer=_decoder_infer,
    deprecated=DECODER_DEPRECATED,
    validate=_decoder_validate("decoders.image_random_crop"), random=True, provided_by=_PKG,
    host_inputs=True,
    doc="Decode images and crop a random window (area and aspect ratio as in `random_resized_crop`).",
)

_SLICE_WINDOW_ARGS = ("start", "end", "shape", "rel_start", "rel_end", "rel_shape", "axes", "axis_names",
                      "normalized_anchor", "normalized_shape")


def _image_slice_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    window = [n for n in _SLICE_WINDOW_ARGS[:6] if given(args, n)]
    n_in = sum(x is not None for x in inputs)
    if n_in == 3 and window:
        raise _err("decoders.image_slice", window[0], "cannot be combined with the anchor and shape inputs")
    if n_in == 2 or (n_in == 1 and not window):
        raise ValueError("Operator `decoders.image_slice`: give the window as arguments (start/end, "
                         "start/shape, rel_start/rel_shape, ...) or as both the anchor and the shape "
                         f"inputs; got {n_in} input(s) and {len(window)} window argument(s)")
    if given(args, "start") and given(args, "rel_start"):
        raise ValueError("Operator `decoders.image_slice`: arguments 'start' and 'rel_start' are mutually exclusive")
    if sum(given(args, n) for n in ("end", "rel_end", "shape", "rel_shape")) > 1:
        raise ValueError("Operator `decoders.image_slice`: only one of 'end', 'rel_end', 'shape' and "
                         "'rel_shape' can be given")
    return _decoder_infer(inputs, args)


def _image_slice_schema() -> OpSchema:
    from ._shape_ops import SLICE  # the window arguments are slice's (defaults and docs)

    return OpSchema(
        "decoders.image_slice", inputs=("data", "anchor", "shape_input"), min_inputs=1, device_inputs=1,
        deprecated=DECODER_DEPRECATED,
        args={**_DECODER_ARGS, **{n: SLICE.args[n] for n in _SLICE_WINDOW_ARGS}},
        infer=_image_slice_infer, validate=_decoder_validate("decoders.image_slice"), provided_by=_PKG,
        host_inputs=True,
        doc="Decode images and cut a window, given as in `slice` (it must lie inside the image).",
    )


DECODE_SLICE = _image_slice_schema()

_PEEK_DTYPES = (_dtype.int32, _dtype.uint32, _dtype.int64, _dtype.uint64, _dtype.float32, _dtype.float64)


def _peek_validate(args: dict) -> None:
    if args["dtype"] not in _PEEK_DTYPES:
        raise _err("peek_image_shape", "dtype", f"must be int32, uint32, int64, uint64, float32 or "
                                                f"float64, got {args['dtype']}")


PEEK_IMAGE_SHAPE = OpSchema(
    "peek_image_shape",
    args={
        "adjust_orientation": Arg(BOOL, True, doc="swap height and width for EXIF orientations 5-8"),
        "dtype": Arg(DTYPE, _dtype.int64, doc="output type"),
        "image_type": Arg(IMAGE_TYPE, DALIImageType.RGB,
                          doc="the colour space the image would be decoded to (sets the channel count)"),
    },
    infer=lambda inputs, args: [OutMeta(args["dtype"], 1, None)], validate=_peek_validate, provided_by=_PKG,
    doc="The (H, W, C) shape an encoded image would have once decoded, from its header only.",
)

# -- resize -----------------------------------------------------------------------

_RESAMPLING_ARGS = {
    "interp_type": Arg(INTERP_TYPE, _LINEAR, per_sample=True, doc="interpolation for both directions"),
    "min_filter": Arg(INTERP_TYPE, None, per_sample=True,
                      doc="filter when scaling down (DALI default LINEAR; not set: interp_type)"),
    "mag_filter": Arg(INTERP_TYPE, None, per_sample=True,
                      doc="filter when scaling up (DALI default LINEAR; not set: interp_type)"),
    "antialias": Arg(BOOL, True, doc="widen the filter when scaling down (not for NN)"),
    "dtype": Arg(DTYPE, None, doc="output type: the input type (default) or float32"),
    "minibatch_size": Arg(INT, 32, doc="ignored on the CPU"),
    "temp_buffer_hint": Arg(INT, 0, doc="ignored on the CPU"),
}


def _image_layout(m: OutMeta) -> str | None:
    """The output layout of an image operator: the input's, or HWC for a 3-D input without
    one (DALI's default image layout, so that ``axis_names`` work downstream)."""
    return m.layout or ("HWC" if m.ndim == 3 else None)


def _resize_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "resize"
    m = inputs[0]
    _check_hw_image(op, m)
    out = [OutMeta(_float_or_same(op, m, args["dtype"]), m.ndim, _image_layout(m))]
    if args.get("save_attrs"):
        out.append(OutMeta(_dtype.int32, 1, None))
    return out


def _resize_validate(args: dict) -> None:
    op = "resize"
    _non_negative(op, args, "resize_shorter", "resize_longer", "max_size")  # a negative size flips
    if args["size"] is not None and len(args["size"]) not in (1, 2):
        raise _err(op, "size", f"must have one value per spatial dimension (H, W), got {len(args['size'])}")
    if args["resize_z"]:
        raise _err(op, "resize_z", "applies to volumes only; images take resize_x and resize_y")
    if _given(args, "resize_shorter") and _given(args, "resize_longer"):
        raise ValueError(f"Operator `{op}`: arguments 'resize_shorter' and 'resize_longer' are mutually exclusive")
    if args["mode"] != "default" and (_given(args, "resize_shorter") or _given(args, "resize_longer")):
        raise _err(op, "mode", "cannot be combined with resize_shorter or resize_longer")
    if (args["roi_start"] is None) != (args["roi_end"] is None):
        raise ValueError(f"Operator `{op}`: arguments 'roi_start' and 'roi_end' must be given together")
    _check_interp(op, args, ("interp_type", "min_filter", "mag_filter"), _ALL_INTERP)


RESIZE = OpSchema(
    "resize", deprecated={"image_type": None},
    args={
        "size": Arg(FLOATS, None, per_sample=True, doc="output size (H, W); a 0 extent is derived from the others, a negative one flips"),
        "resize_x": Arg(FLOAT, None, per_sample=True, doc="output width (negative flips; 0: derived)"),
        "resize_y": Arg(FLOAT, None, per_sample=True, doc="output height (negative flips; 0: derived)"),
        "resize_z": Arg(FLOAT, 0.0, per_sample=True, doc="volumes only"),
        "resize_shorter": Arg(FLOAT, None, per_sample=True,
                              doc="length of the shorter side (mode not_smaller; 0: the input's size)"),
        "resize_longer": Arg(FLOAT, None, per_sample=True,
                             doc="length of the longer side (mode not_larger; 0: the input's size)"),
        "max_size": Arg(FLOATS, None, doc="limit of the output size, one value or (H, W)"),
        "mode": Arg(STR, "default", choices=("default", "stretch", "not_larger", "not_smaller"),
                    doc="how the requested extents combine (see DALI's resize)"),
        "roi_start": Arg(FLOATS, None, per_sample=True, doc="input region start (y, x)"),
        "roi_end": Arg(FLOATS, None, per_sample=True, doc="input region end (y, x); end < start flips"),
        "roi_relative": Arg(BOOL, False, doc="ROI given as fractions of the input size"),
        "subpixel_scale": Arg(BOOL, True, doc="keep the exact scale when the output size is rounded"),
        "save_attrs": Arg(BOOL, False, doc="also return the (H, W) of each input sample, int32 (as DALI)"),
        **_RESAMPLING_ARGS,
    },
    infer=_resize_infer, validate=_resize_validate, provided_by=_PKG,
    doc="Resize images (HWC or HW).",
)


def _rrc_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "random_resized_crop"
    m = inputs[0]
    _check_hw_image(op, m)
    return [OutMeta(_float_or_same(op, m, args["dtype"]), m.ndim, _image_layout(m))]


def _rrc_validate(args: dict) -> None:
    op = "random_resized_crop"
    size = args["size"]
    if len(size) not in (1, 2):
        raise _err(op, "size", f"must be (H, W) or one value, got {list(size)}")
    if any(s <= 0 for s in size):
        raise _err(op, "size", f"must be positive, got {list(size)}")
    _check_random_crop(op, args)
    _check_interp(op, args, ("interp_type", "min_filter", "mag_filter"), _ALL_INTERP)


RANDOM_RESIZED_CROP = OpSchema(
    "random_resized_crop",
    args={"size": Arg(FLOATS, required=True, doc="output size (H, W)"), **_RANDOM_CROP_ARGS, **_RESAMPLING_ARGS},
    infer=_rrc_infer, validate=_rrc_validate, random=True, provided_by=_PKG,
    doc="Crop a random window (area and aspect ratio in the given ranges) and resize it to ``size``.",
)

# -- warps ------------------------------------------------------------------------


def _warp_infer(op: str):
    def infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
        m = inputs[0]
        _check_hw_image(op, m)
        dt = args["dtype"] or m.dtype
        return [OutMeta(dt, m.ndim, _image_layout(m))]

    return infer


def _rotate_validate(args: dict) -> None:
    op = "rotate"
    _non_negative(op, args, "size")
    if args["size"] is not None and len(args["size"]) != 2:
        raise _err(op, "size", f"must be (H, W), got {list(args['size'])}")
    _check_interp(op, args, ("interp_type",), _WARP_INTERP)


ROTATE = OpSchema(
    "rotate", deprecated={"output_dtype": "dtype"},
    args={
        "angle": Arg(FLOAT, required=True, per_sample=True, doc="degrees, counter-clockwise"),
        "axis": Arg(FLOATS, None, per_sample=True, doc="rotation axis (volumes only; ignored for images, as DALI)"),
        "size": Arg(FLOATS, None, per_sample=True, doc="output size (H, W); default: the rotated bounding box"),
        "keep_size": Arg(BOOL, False, doc="keep the input size (unless size is given)"),
        "fill_value": Arg(FLOAT, None, doc="value outside the source (not set: repeat the border pixel)"),
        "interp_type": Arg(INTERP_TYPE, _LINEAR, doc="NN or LINEAR"),
        "dtype": Arg(DTYPE, None, doc="output type (default: the input type)"),
    },
    infer=_warp_infer("rotate"), validate=_rotate_validate, provided_by=_PKG,
    doc="Rotate images about their centre.",
)


def _warp_validate(args: dict) -> None:
    op = "warp_affine"
    m = args["matrix"]
    if m is not None and len(m) != 6:
        raise _err(op, "matrix", f"must have 6 values (a 2x3 matrix), got {len(m)}")
    _non_negative(op, args, "size")
    if args["size"] is not None and len(args["size"]) != 2:
        raise _err(op, "size", f"must be (H, W), got {list(args['size'])}")
    _check_interp(op, args, ("interp_type",), _WARP_INTERP)


WARP_AFFINE = OpSchema(
    "warp_affine", inputs=("data", "mtx"), min_inputs=1, host_args_from=1, deprecated={"output_dtype": "dtype"},
    args={
        "matrix": Arg(FLOATS, None, per_sample=True, doc="2x3 matrix (row-major); or the second input"),
        "size": Arg(FLOATS, None, per_sample=True, doc="output size (H, W); default: the input size"),
        "inverse_map": Arg(BOOL, True, doc="the matrix maps output to input coordinates"),
        "fill_value": Arg(FLOAT, None, doc="value outside the source (not set: repeat the border pixel)"),
        "interp_type": Arg(INTERP_TYPE, _LINEAR, doc="NN or LINEAR"),
        "dtype": Arg(DTYPE, None, doc="output type (default: the input type)"),
    },
    infer=_warp_infer("warp_affine"), validate=_warp_validate, provided_by=_PKG,
    doc="Apply an affine transform; coordinates are pixel corners, (0, 0) is the top-left corner.",
)

# -- flip and crops ---------------------------------------------------------------

FLIP = OpSchema(
    "flip",
    args={
        "horizontal": Arg(INT, 1, per_sample=True, doc="flip along W"),
        "vertical": Arg(INT, 0, per_sample=True, doc="flip along H"),
        "depthwise": Arg(INT, 0, per_sample=True, doc="flip along D (ignored without a D axis, as DALI)"),
    },
    infer=lambda inputs, args: [OutMeta(inputs[0].dtype, inputs[0].ndim, _image_layout(inputs[0]))],
    provided_by=_PKG, doc="Flip images horizontally and/or vertically (any layout with H and W).",
)


def _crop_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    _check_hw_image("crop", m, ("HWC", "HW", "CHW"))
    return [OutMeta(args["dtype"] or m.dtype, m.ndim, _image_layout(m))]


def _crop_validate(args: dict) -> None:
    _window_size("crop", args, ("crop_w", "crop_h"))
    if args["crop_d"]:
        raise _err("crop", "crop_d", "applies to volumes only")


CROP = OpSchema(
    "crop", args={**_CROP_WINDOW_ARGS, **_OOB, "dtype": Arg(DTYPE, None, doc="output type (default: the input type)")},
    deprecated=WINDOW_DEPRECATED,
    infer=_crop_infer, validate=_crop_validate, provided_by=_PKG,
    doc="Crop a window from images (HWC, HW or CHW).",
)


def _cmn_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "crop_mirror_normalize"
    m = inputs[0]
    _check_hw_image(op, m, ("HWC", "HW", "CHW"))
    lay = image_axes(op, m.layout, m.ndim)
    out = args["output_layout"]
    if sorted(out) != sorted(lay):
        raise _err(op, "output_layout", f"must be a permutation of the input layout {lay!r}, got {out!r}")
    if args["pad_output"] and "C" not in lay:
        raise _err(op, "pad_output", f"needs a channel dimension, the input layout is {lay!r}")
    return [OutMeta(args["dtype"], m.ndim, out)]


def _cmn_validate(args: dict) -> None:
    op = "crop_mirror_normalize"
    _window_size(op, args, ("crop_w", "crop_h"))
    mean, std = args["mean"], args["std"]
    if len(mean) > 1 and len(std) > 1 and len(mean) != len(std):
        raise ValueError(
            f"Operator `{op}`: arguments 'mean' and 'std' must have the same length (or one value), "
            f"got {len(mean)} and {len(std)}"
        )
    if any(s == 0 for s in std):
        raise _err(op, "std", "must not contain 0")
    if args["crop_d"]:
        raise _err(op, "crop_d", "applies to volumes only")


CROP_MIRROR_NORMALIZE = OpSchema(
    "crop_mirror_normalize", deprecated=WINDOW_DEPRECATED,
    args={
        **_CROP_WINDOW_ARGS,
        "mean": Arg(FLOATS, (0.0,), per_sample=True, doc="subtracted, one value or one per channel"),
        "std": Arg(FLOATS, (1.0,), per_sample=True, doc="divisor, one value or one per channel"),
        "scale": Arg(FLOAT, 1.0, doc="multiplies the normalised value"),
        "shift": Arg(FLOAT, 0.0, doc="added last: out = (in - mean) / std * scale + shift"),
        "mirror": Arg(INT, 0, per_sample=True, doc="flip horizontally (after cropping)"),
        "dtype": Arg(DTYPE, _dtype.float32, doc="output type (integers are rounded and saturated)"),
        "output_layout": Arg(STR, "CHW", doc="a permutation of the input layout"),
        "pad_output": Arg(BOOL, False, doc="pad 3 channels to 4 (the extra channel is 0); other counts stay"),
        **_OOB,
    },
    infer=_cmn_infer, validate=_cmn_validate, provided_by=_PKG,
    doc="Crop, mirror, normalise ((in - mean) / std * scale + shift) and transpose images in one pass.",
)

# -- normalize --------------------------------------------------------------------


def _normalize_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "normalize"
    m = inputs[0]
    axes, names = args["axes"], args["axis_names"]
    if axes is not None and names is not None:
        raise ValueError(f"Operator `{op}`: arguments 'axes' and 'axis_names' are mutually exclusive")
    if axes is not None and any(not -m.ndim <= a < m.ndim for a in axes):
        raise _err(op, "axes", f"has an axis out of range for a {m.ndim}-D input: {list(axes)}")
    if axes is not None and len({a % m.ndim for a in axes}) != len(axes):
        raise _err(op, "axes", f"names an axis twice: {list(axes)}")
    if names is not None:
        if not m.layout:
            raise _err(op, "axis_names", "needs an input with a layout")
        missing = [c for c in names if c not in m.layout]
        if missing:
            raise _err(op, "axis_names", f"names {''.join(missing)!r}, not in the input layout {m.layout!r}")
        if len(set(names)) != len(names):
            raise _err(op, "axis_names", f"names an axis twice: {names!r}")
    return [OutMeta(args["dtype"], m.ndim, m.layout)]


def _normalize_validate(args: dict) -> None:
    op = "normalize"
    if args["ddof"] < 0:
        raise _err(op, "ddof", f"must be non-negative, got {args['ddof']}")
    if args["epsilon"] < 0:
        raise _err(op, "epsilon", f"must be non-negative, got {args['epsilon']}")
    if args["stddev"] is not None and any(s <= 0 for s in args["stddev"]):
        raise _err(op, "stddev", "must be positive")


NORMALIZE = OpSchema(
    "normalize",
    args={
        "mean": Arg(FLOATS, None, per_sample=True, doc="mean to subtract (not set: computed)"),
        "stddev": Arg(FLOATS, None, per_sample=True, doc="standard deviation (not set: computed)"),
        "axes": Arg(INTS, None, doc="reduced axes (default: all)"),
        "axis_names": Arg(STR, None, doc="reduced axes by layout name, e.g. 'HW'"),
        "batch": Arg(BOOL, False, doc="compute mean and stddev over the whole batch"),
        "ddof": Arg(INT, 0, doc="delta degrees of freedom of the computed variance"),
        "epsilon": Arg(FLOAT, 0.0, doc="added to the variance: out = scale * (in - mean) / sqrt(var + eps) + shift"),
        "scale": Arg(FLOAT, 1.0, doc="multiplies the normalised value"),
        "shift": Arg(FLOAT, 0.0, doc="added to the result"),
        "dtype": Arg(DTYPE, _dtype.float32, doc="output type (integers are rounded and saturated)"),
    },
    infer=_normalize_infer, validate=_normalize_validate, provided_by=_PKG,
    doc="Normalise: subtract the mean and divide by the standard deviation along ``axes``.",
)

# -- colour -----------------------------------------------------------------------


def _color_infer(op: str):
    def infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
        m = inputs[0]
        lay = image_axes(op, m.layout, m.ndim)
        if not lay.endswith("C"):
            raise ValueError(f"Operator `{op}`: expects channel-last images (HWC), got layout {lay!r}")
        return [OutMeta(args["dtype"] or m.dtype, m.ndim, _image_layout(m))]

    return infer


def _color_twist_validate(args: dict) -> None:
    op = "color_twist"
    if args["image_type"] not in (DALIImageType.RGB, DALIImageType.BGR):
        raise _err(op, "image_type", f"must be RGB or BGR, got {args['image_type'].name}")
    _non_negative(op, args, "brightness", "contrast", "saturation")


COLOR_TWIST = OpSchema(
    "color_twist",
    args={
        "brightness": Arg(FLOAT, 1.0, per_sample=True, doc="multiplier (0: black)"),
        "contrast": Arg(FLOAT, 1.0, per_sample=True, doc="multiplier of the distance from mid-grey"),
        "hue": Arg(FLOAT, 0.0, per_sample=True, doc="rotation of the hue, degrees"),
        "saturation": Arg(FLOAT, 1.0, per_sample=True, doc="multiplier (0: grey)"),
        "image_type": Arg(IMAGE_TYPE, DALIImageType.RGB, doc="channel order, RGB or BGR"),
        "dtype": Arg(DTYPE, None, doc="output type (default: the input type)"),
    },
    infer=_color_infer("color_twist"), validate=_color_twist_validate, provided_by=_PKG,
    doc="Adjust hue, saturation, brightness and contrast of RGB images.",
)


def _bc_validate(args: dict) -> None:
    _non_negative("brightness_contrast", args, "brightness", "contrast")


BRIGHTNESS_CONTRAST = OpSchema(
    "brightness_contrast",
    args={
        "brightness": Arg(FLOAT, 1.0, per_sample=True, doc="multiplier"),
        "brightness_shift": Arg(FLOAT, 0.0, per_sample=True, doc="added, as a fraction of the output range"),
        "contrast": Arg(FLOAT, 1.0, per_sample=True, doc="multiplier of the distance from contrast_center"),
        "contrast_center": Arg(FLOAT, None, per_sample=True,
                               doc="value unchanged by contrast (not set: half the input range, 128 or 0.5)"),
        "dtype": Arg(DTYPE, None, doc="output type (default: the input type)"),
    },
    infer=lambda inputs, args: [OutMeta(args["dtype"] or inputs[0].dtype, inputs[0].ndim, _image_layout(inputs[0]))],
    validate=_bc_validate, provided_by=_PKG,
    doc="out = brightness_shift * range + brightness * (contrast_center + contrast * (in - contrast_center)).",
)


def _hsv_validate(args: dict) -> None:
    _non_negative("hsv", args, "saturation", "value")


HSV = OpSchema(
    "hsv",
    args={
        "hue": Arg(FLOAT, 0.0, per_sample=True, doc="rotation of the hue, degrees"),
        "saturation": Arg(FLOAT, 1.0, per_sample=True, doc="multiplier"),
        "value": Arg(FLOAT, 1.0, per_sample=True, doc="multiplier"),
        "dtype": Arg(DTYPE, None, doc="output type (default: the input type)"),
    },
    infer=_color_infer("hsv"), validate=_hsv_validate, provided_by=_PKG,
    doc="Hue, saturation and value adjustment of RGB images (a linear transform in YIQ space).",
)

def _blur_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    return [OutMeta(args["dtype"] or m.dtype, m.ndim, m.layout)]


GAUSSIAN_BLUR = OpSchema(
    "gaussian_blur",
    args={
        "sigma": Arg(FLOATS, per_sample=True, doc="standard deviation per blurred axis (one value: all)"),
        "window_size": Arg(INTS, per_sample=True, doc="odd kernel size per blurred axis (one value: all)"),
        "dtype": Arg(DTYPE, None, doc="output type (default: the input type)"),
    },
    infer=_blur_infer, provided_by=_PKG,
    doc="Gaussian blur along every axis but channels and frames; the border mirrored (dcb|abcd|cba).",
)

IMAGE_SCHEMAS = (
    DECODE, DECODE_CROP, DECODE_RANDOM_CROP, DECODE_SLICE, PEEK_IMAGE_SHAPE, RESIZE, RANDOM_RESIZED_CROP, ROTATE, WARP_AFFINE, FLIP,
    CROP, CROP_MIRROR_NORMALIZE, NORMALIZE, COLOR_TWIST, BRIGHTNESS_CONTRAST, HSV, GAUSSIAN_BLUR,
)
