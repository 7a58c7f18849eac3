"""Schemas of the paste family: ``coord_flip``, ``paste``, ``bbox_paste``, ``bbox_rotate``,
``multi_paste``.

Argument names, defaults and per-sample (tensor) arguments follow DALI 2.4; kernels are
attached by the plugins. The argument checks a GPU kernel would repeat live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._schema import BOOL, DTYPE, FLOAT, FLOATS, INT, INTS, STR, Arg, OpSchema, OutMeta

_PKG = "ndd-ops-cpu"


def _err(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


def _input(op: str, name: str, m: OutMeta, dtype: _dtype.DType, ndims: tuple[int, ...] | None) -> None:
    if m.dtype != dtype:
        raise ValueError(f"Operator `{op}`: input '{name}' must be {dtype}, got {m.dtype}")
    if ndims is not None and m.ndim not in ndims:
        want = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"Operator `{op}`: input '{name}' must be {want}, got {m.ndim}-D")


# -- coord_flip -------------------------------------------------------------------


def coord_flip_axes(op: str, layout: str, ndim: int) -> tuple[int, ...]:
    """The columns holding x, y (and z) for points with ``ndim`` coordinates (1 to 3): their
    positions in ``layout`` ("" means "x", "xy" or "xyz")."""
    if not 1 <= ndim <= 3:
        raise ValueError(f"Operator `{op}`: expects points of 1 to 3 coordinates (N, D), got D = {ndim}")
    lay = layout or "xyz"[:ndim]
    cols = []
    for c in "xyz"[:ndim]:
        k = lay.find(c)
        if not 0 <= k < ndim:
            raise _err(op, "layout", f"{layout!r} does not place {c!r} among the {ndim} coordinate(s) of "
                                     "the input")
        cols.append(k)
    return tuple(cols)


def _coord_flip_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    _input("coord_flip", "input", inputs[0], _dtype.float32, (2,))
    return [OutMeta(_dtype.float32, 2, None)]


COORD_FLIP = OpSchema(
    "coord_flip",
    args={
        "layout": Arg(STR, "", doc='order of the coordinates: "x", "xy" or "xyz" in any order '
                                   '("" : "x", "xy" or "xyz" by the number of coordinates)'),
        "flip_x": Arg(INT, 1, per_sample=True, doc="flip the x coordinate (non-zero: flip)"),
        "flip_y": Arg(INT, 0, per_sample=True, doc="flip the y coordinate (non-zero: flip)"),
        "flip_z": Arg(INT, 0, per_sample=True, doc="flip the z coordinate (non-zero: flip)"),
        "center_x": Arg(FLOAT, 0.5, per_sample=True, doc="x of the flip centre"),
        "center_y": Arg(FLOAT, 0.5, per_sample=True, doc="y of the flip centre"),
        "center_z": Arg(FLOAT, 0.5, per_sample=True, doc="z of the flip centre"),
    },
    infer=_coord_flip_infer, provided_by=_PKG,
    doc="Reflect float32 points (N, D), D = 1..3, about a centre: a flipped coordinate v becomes "
        "2 * center - v.",
)

# -- paste ------------------------------------------------------------------------


def paste_geometry(op: str, h: int, w: int, ratio: float, paste_x: float, paste_y: float,
                   min_canvas_size: float, sample: str) -> tuple[int, int, int, int]:
    """``(canvas_h, canvas_w, y0, x0)`` of ``paste`` for an (h, w) image, in float32 as DALI:
    the canvas is ``int(size * ratio)``, at least ``int(min_canvas_size)``, and the image's
    corner ``int(paste * (canvas - size))``."""
    if not ratio >= 1.0:
        raise _err(op, "ratio", f"must be at least 1, got {ratio} ({sample})")
    for name, v in (("paste_x", paste_x), ("paste_y", paste_y)):
        if not 0.0 <= v <= 1.0:
            raise _err(op, name, f"must be in [0, 1], got {v} ({sample})")
    f32 = np.float32
    r, least = f32(ratio), int(f32(min_canvas_size))
    if least < 0:  # DALI truncates first: -0.5 is accepted
        raise _err(op, "min_canvas_size", f"must be at least 0, got {min_canvas_size} ({sample})")
    ch, cw = max(int(f32(h) * r), least), max(int(f32(w) * r), least)
    return ch, cw, int(f32(paste_y) * f32(ch - h)), int(f32(paste_x) * f32(cw - w))


def _paste_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    _input("paste", "input", m, _dtype.uint8, (3,))
    if m.layout not in (None, "", "HWC"):
        raise ValueError(f"Operator `paste`: expects HWC images, got the layout {m.layout!r}")
    return [OutMeta(_dtype.uint8, 3, "HWC")]


def _paste_validate(args: dict) -> None:
    n, fill = args["n_channels"], args["fill_value"]
    if len(fill) != 1 and len(fill) != n:
        raise _err("paste", "fill_value", f"must have one value or n_channels ({n}) values, got {len(fill)}")


PASTE = OpSchema(
    "paste",
    args={
        "ratio": Arg(FLOAT, required=True, per_sample=True, doc="canvas size / image size (at least 1)"),
        "fill_value": Arg(INTS, required=True, doc="colour of the canvas: one value, or one per channel"),
        "paste_x": Arg(FLOAT, 0.5, per_sample=True, doc="horizontal position of the image, 0 (left) to 1 (right)"),
        "paste_y": Arg(FLOAT, 0.5, per_sample=True, doc="vertical position of the image, 0 (top) to 1 (bottom)"),
        "min_canvas_size": Arg(FLOAT, 0.0, per_sample=True, doc="least height and width of the canvas"),
        "n_channels": Arg(INT, 3, doc="number of channels: the length of a per-channel fill_value"),
    },
    infer=_paste_infer, validate=_paste_validate, provided_by=_PKG,
    doc="Place uint8 HWC images on a larger canvas filled with fill_value (SSD's zoom-out).",
)

# -- bbox_paste -------------------------------------------------------------------


def _bbox_paste_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    _input("bbox_paste", "input", m, _dtype.float32, None)
    return [OutMeta(_dtype.float32, m.ndim, None)]


BBOX_PASTE = OpSchema(
    "bbox_paste",
    args={
        "ratio": Arg(FLOAT, required=True, per_sample=True, doc="canvas size / image size, as given to paste"),
        "ltrb": Arg(BOOL, False, doc="boxes are [left, top, right, bottom] (default: [x, y, w, h])"),
        "paste_x": Arg(FLOAT, 0.5, per_sample=True, doc="horizontal position of the paste, as given to paste"),
        "paste_y": Arg(FLOAT, 0.5, per_sample=True, doc="vertical position of the paste, as given to paste"),
    },
    infer=_bbox_paste_infer, provided_by=_PKG,
    doc="Move relative float32 boxes (groups of 4 values) to where paste puts their image: "
        "corners become c / ratio + paste * (ratio - 1) / ratio, sizes w / ratio.",
)

# -- bbox_rotate ------------------------------------------------------------------


def _bbox_rotate_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "bbox_rotate"
    _input(op, "bboxes", inputs[0], _dtype.float32, (2,))
    out = [OutMeta(_dtype.float32, 2, None)]
    if len(inputs) > 1 and inputs[1] is not None:
        _input(op, "labels", inputs[1], _dtype.int32, (1, 2))
        out.append(OutMeta(_dtype.int32, inputs[1].ndim, None))
    return out


def _bbox_rotate_validate(args: dict) -> None:
    op = "bbox_rotate"
    if not 0.0 <= args["remove_threshold"] < 1.0:
        raise _err(op, "remove_threshold", f"must be in [0, 1), got {args['remove_threshold']}")
    if args["keep_size"] and (args["size"] or "size" in args.batch_args):
        raise ValueError(f"Operator `{op}`: arguments 'keep_size' and 'size' cannot both be given")
    lay = args["shape_layout"]
    if "H" not in lay or "W" not in lay:
        raise _err(op, "shape_layout", f"must contain 'H' and 'W', got {lay!r}")


def bbox_rotate_sizes(op: str, args: Any, i: int, sample: str) -> tuple[int, int, int, int] | tuple[int, int]:
    """``(h, w)`` of sample ``i``'s image from input_shape (ordered as shape_layout), with
    ``(out_h, out_w)`` when ``size`` gives the canvas (truncated to ints, as DALI)."""
    shape = [int(v) for v in np.ravel(args.sample("input_shape", i))]
    lay = args["shape_layout"]
    kh, kw = lay.index("H"), lay.index("W")
    if max(kh, kw) >= len(shape):
        raise _err(op, "input_shape", f"has {len(shape)} value(s), too few for shape_layout {lay!r} ({sample})")
    h, w = shape[kh], shape[kw]
    if h < 1 or w < 1:
        raise _err(op, "input_shape", f"must give a positive height and width, got {h} x {w} ({sample})")
    size = [] if args["size"] is None else np.ravel(args.sample("size", i))
    if len(size) == 0:
        return h, w
    if len(size) != 2:
        raise _err(op, "size", f"must have 2 values (H, W), got {len(size)} ({sample})")
    oh, ow = int(size[0]), int(size[1])
    if oh < 1 or ow < 1:
        raise _err(op, "size", f"must be at least 1 x 1, got {oh} x {ow} ({sample})")
    return h, w, oh, ow


BBOX_ROTATE = OpSchema(
    "bbox_rotate", inputs=("bboxes", "labels"), min_inputs=1,
    args={
        "angle": Arg(FLOAT, required=True, per_sample=True, doc="rotation angle in degrees (as given to rotate)"),
        "input_shape": Arg(INTS, required=True, per_sample=True,
                           doc="shape of the image before rotation, ordered as shape_layout"),
        "bbox_layout": Arg(STR, "xyXY", choices=("xyXY", "xyWH"), doc="box format: xyXY (ltrb) or xyWH"),
        "bbox_normalized": Arg(BOOL, True, doc="boxes are relative to the image size (else in pixels)"),
        "keep_size": Arg(BOOL, False, doc="the rotated image keeps its size (rotate's keep_size)"),
        "mode": Arg(STR, "expand", choices=("expand", "halfway", "fixed"),
                    doc="expand: enclose the rotated box; fixed: keep its size; halfway: between the two"),
        "remove_threshold": Arg(FLOAT, 0.1, doc="boxes keeping less than this fraction of their area "
                                                "inside the canvas are removed, in [0, 1)"),
        "shape_layout": Arg(STR, "HW", doc="meaning of the values of input_shape (must contain H and W)"),
        "size": Arg(FLOATS, None, per_sample=True, doc="output canvas (H, W) as given to rotate (not set or "
                                                       "empty: rotate's default canvas)"),
    },
    infer=_bbox_rotate_infer, validate=_bbox_rotate_validate, provided_by=_PKG,
    doc="Move boxes (N, 4) float32 (and drop their int32 labels with them) to follow an image "
        "rotated by rotate with the same angle, keep_size and size.",
)

# -- multi_paste ------------------------------------------------------------------

MULTI_PASTE_DTYPES = (_dtype.uint8, _dtype.int16, _dtype.int32, _dtype.float32)
# (absolute argument, relative one): each region's input anchor, shape and output anchor
MULTI_PASTE_REGION_ARGS = (("in_anchors", "in_anchors_rel"), ("shapes", "shapes_rel"),
                           ("out_anchors", "out_anchors_rel"))


def _multi_paste_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "multi_paste"
    m = inputs[0]
    if len(inputs) > 1 and (args["in_ids"] is not None or "in_ids" in args.batch_args):
        raise ValueError(f"Operator `{op}`: with 'in_ids' it takes exactly one input batch, got {len(inputs)}")
    for k, x in enumerate(inputs):
        if x.dtype not in MULTI_PASTE_DTYPES:
            raise ValueError(f"Operator `{op}`: input {k} has type {x.dtype}; supported: "
                             f"{', '.join(map(str, MULTI_PASTE_DTYPES))}")
        if x.dtype != m.dtype:
            raise ValueError(f"Operator `{op}`: all inputs must have the same type, got {m.dtype} and {x.dtype}")
        if x.ndim != 3 or x.layout not in (None, "", "HWC"):
            raise ValueError(f"Operator `{op}`: input {k} must be HWC images, got {x.ndim}-D "
                             f"with layout {x.layout!r}")
    out = args["dtype"] or m.dtype
    if out not in MULTI_PASTE_DTYPES:
        raise _err(op, "dtype", f"must be one of {', '.join(map(str, MULTI_PASTE_DTYPES))}, got {out}")
    return [OutMeta(out, 3, "HWC")]


def _multi_paste_validate(args: Any) -> None:
    for absolute, rel in MULTI_PASTE_REGION_ARGS:
        if all(args[k] is not None or k in args.batch_args for k in (absolute, rel)):
            raise ValueError(f"Operator `multi_paste`: arguments '{absolute}' and '{rel}' cannot both be given")


def _regions_doc(what: str) -> str:
    return f"{what}, one (y, x) pair per pasted region: a (regions, 2) array"


MULTI_PASTE = OpSchema(
    "multi_paste", inputs=("input_0",), variadic=True,
    args={
        "in_ids": Arg(INTS, None, per_sample=True,
                      doc="indices of the samples of the (single) input pasted into each output sample, in order "
                          "(not set: sample i of every input goes into output sample i)"),
        "in_anchors": Arg(INTS, None, per_sample=True, doc=_regions_doc("top-left corner in the input (not set: 0)")),
        "in_anchors_rel": Arg(FLOATS, None, per_sample=True,
                              doc=_regions_doc("in_anchors as fractions of the input size, in [0, 1]")),
        "shapes": Arg(INTS, None, per_sample=True,
                      doc=_regions_doc("region size (not set: from the input anchor to the input's end)")),
        "shapes_rel": Arg(FLOATS, None, per_sample=True,
                          doc=_regions_doc("shapes as fractions of the input size, in [0, 1]")),
        "out_anchors": Arg(INTS, None, per_sample=True,
                           doc=_regions_doc("top-left corner in the output (not set: 0)")),
        "out_anchors_rel": Arg(FLOATS, None, per_sample=True,
                               doc=_regions_doc("out_anchors as fractions of the output size, in [0, 1]")),
        "output_size": Arg(INTS, None, per_sample=True,
                           doc="(H, W) of the output canvas (not set: the inputs' shared shape)"),
        "dtype": Arg(DTYPE, None, doc="output type: uint8, int16, int32 or float32 (not set: the input's)"),
    },
    infer=_multi_paste_infer, validate=_multi_paste_validate, provided_by=_PKG,
    doc="Paste regions of HWC images into zero-filled canvases, later regions over earlier ones; "
        "relative anchors round down and relative shapes up.",
)

PASTE_SCHEMAS = (COORD_FLIP, PASTE, BBOX_PASTE, BBOX_ROTATE, MULTI_PASTE)
