"""Schemas of the segmentation helpers: ``segmentation.select_masks``, ``roi_random_crop``,
``random_crop_generator``, ``segmentation.random_mask_pixel`` and
``segmentation.random_object_bbox`` (kernels in ndd-ops-cpu).

Argument names and defaults follow DALI 2.4. Where DALI tells "not given" from "given"
(``random_mask_pixel``'s ``threshold`` against ``value``, ``random_object_bbox``'s
``background`` against ``classes``) the default here is None and the doc says what "not
given" means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _dtype
from ._schema import BOOL, FLOAT, FLOATS, INT, INTS, STR, Arg, OpSchema, OutMeta, given

_PKG = "ndd-ops-cpu"
_INT_KINDS = (_dtype.DType.Kind.signed, _dtype.DType.Kind.unsigned)


def _err(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


# -- segmentation.select_masks ----------------------------------------------------------


def _select_masks_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "segmentation.select_masks"
    ids, polys, verts = inputs
    if ids.dtype != _dtype.int32 or ids.ndim != 1:
        raise ValueError(f"Operator `{op}`: input 'mask_ids' must be a 1-D int32 tensor, got {ids.ndim}-D {ids.dtype}")
    if polys.dtype != _dtype.int32 or polys.ndim != 2:
        raise ValueError(f"Operator `{op}`: input 'polygons' must be a 2-D int32 tensor (mask_id, start, end "
                         f"rows), got {polys.ndim}-D {polys.dtype}")
    if verts.ndim != 2:
        raise ValueError(f"Operator `{op}`: input 'vertices' must be 2-D (one row per vertex), got {verts.ndim}-D")
    return [OutMeta(_dtype.int32, 2, None), OutMeta(verts.dtype, 2, None)]


SELECT_MASKS = OpSchema(
    "segmentation.select_masks",
    inputs=("mask_ids", "polygons", "vertices"),
    args={"reindex_masks": Arg(BOOL, False, doc="replace the output mask ids by their index in mask_ids")},
    infer=_select_masks_infer, provided_by=_PKG,
    doc="Keep the polygons of the masks listed in ``mask_ids`` (in that order) and their vertices. Returns "
        "(polygons, vertices). As DALI 2.4, a mask keeps one polygon: the last one listed for its id.",
)

# -- roi_random_crop ------------------------------------------------------------------------


def _roi_validate(args: Any) -> None:
    op = "roi_random_crop"
    if given(args, "roi_end") == given(args, "roi_shape"):
        raise ValueError(f"Operator `{op}`: give exactly one of 'roi_end' and 'roi_shape'")


def _roi_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    if inputs and inputs[0] is not None and given(args, "in_shape"):
        raise _err("roi_random_crop", "in_shape", "cannot be given with an input (the input gives the shape)")
    return [OutMeta(_dtype.int64, 1, None)]


ROI_RANDOM_CROP = OpSchema(
    "roi_random_crop",
    inputs=("input",), min_inputs=0,
    args={
        "crop_shape": Arg(INTS, None, per_sample=True, required=True, doc="the crop window's shape"),
        "roi_start": Arg(INTS, None, per_sample=True, required=True, doc="the region of interest's start"),
        "roi_end": Arg(INTS, None, per_sample=True, doc="the region's end (exclusive); or give roi_shape"),
        "roi_shape": Arg(INTS, None, per_sample=True, doc="the region's shape; or give roi_end"),
        "in_shape": Arg(INTS, None, per_sample=True,
                        doc="shape of the data to crop: the window stays inside (or pass the data as the input)"),
    },
    infer=_roi_infer, validate=_roi_validate, random=True, provided_by=_PKG,
    doc="A random start (int64, one value per dimension) of a crop_shape window that holds as much of the "
        "region of interest as it can: inside the region when the window is smaller, around it when larger.",
)

# -- random_crop_generator ------------------------------------------------------------------


def _range(op: str, args: Any, name: str, positive: bool) -> None:
    v = args[name]
    if len(v) not in (1, 2):
        raise _err(op, name, f"must be [min, max] (or one value), got {list(v)}")
    lo, hi = v[0], v[-1]
    if lo > hi:
        raise _err(op, name, f"must be [min, max] with min <= max, got {list(v)}")
    if lo <= 0 if positive else lo < 0:
        want = "positive" if positive else "non-negative"
        raise _err(op, name, f"must be {want}, got {list(v)}")


def _rcg_validate(args: Any) -> None:
    op = "random_crop_generator"
    _range(op, args, "random_area", False)
    _range(op, args, "random_aspect_ratio", True)
    if args["num_attempts"] < 0:
        raise _err(op, "num_attempts", f"must be non-negative, got {args['num_attempts']}")


def _rcg_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    m = inputs[0]
    if m.dtype.kind not in _INT_KINDS or m.ndim != 1:
        raise ValueError("Operator `random_crop_generator`: the input must be a 1-D integer shape (HW or HWC), "
                         f"got {m.ndim}-D {m.dtype}")
    return [OutMeta(_dtype.int32, 1, None), OutMeta(_dtype.int32, 1, None)]


RANDOM_CROP_GENERATOR = OpSchema(
    "random_crop_generator",
    args={
        "num_attempts": Arg(INT, 10, doc="attempts at drawing a window before the fallback"),
        "random_area": Arg(FLOATS, (0.08, 1.0), doc="range of the window area as a fraction of the input area"),
        "random_aspect_ratio": Arg(FLOATS, (0.75, 4 / 3),
                                   doc="range of the window aspect ratio (w / h), drawn log-uniformly"),
    },
    infer=_rcg_infer, validate=_rcg_validate, random=True, provided_by=_PKG,
    doc="A random crop window of a shape (HW or HWC), as random_resized_crop draws it. Returns int32 "
        "(anchor, shape), each (y, x).",
)

# -- segmentation.random_mask_pixel --------------------------------------------------------

MASK_PIXEL_DTYPES = (_dtype.uint8, _dtype.int8, _dtype.uint16, _dtype.int16, _dtype.uint32, _dtype.int32,
                     _dtype.uint64, _dtype.int64, _dtype.float32, _dtype.bool)


def _rmp_validate(args: Any) -> None:
    if given(args, "value") and given(args, "threshold"):
        raise ValueError("Operator `segmentation.random_mask_pixel`: 'value' and 'threshold' cannot both be given")


def _rmp_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "segmentation.random_mask_pixel"
    m = inputs[0]
    if m.dtype not in MASK_PIXEL_DTYPES:
        raise ValueError(f"Operator `{op}`: unsupported mask type {m.dtype} (integers, bool or float32)")
    if m.ndim < 1:
        raise ValueError(f"Operator `{op}`: the mask must have at least 1 dimension, got a scalar")
    return [OutMeta(_dtype.int64, 1, None)]


RANDOM_MASK_PIXEL = OpSchema(
    "segmentation.random_mask_pixel",
    args={
        "value": Arg(INT, None, per_sample=True, doc="foreground: elements equal to this (or use threshold)"),
        "threshold": Arg(FLOAT, None, per_sample=True,
                         doc="foreground: elements above this. Not given (and no value): 0.0"),
        "foreground": Arg(INT, 0, per_sample=True,
                          doc="non-zero: a uniform pick among foreground elements; 0: among all elements"),
    },
    infer=_rmp_infer, validate=_rmp_validate, random=True, provided_by=_PKG,
    doc="Random coordinates (int64, one per dimension) of a mask element; a uniform pick among the "
        "foreground ones when foreground is non-zero and there are any, else among all.",
)

# -- segmentation.random_object_bbox -----------------------------------------------------

OBJECT_BBOX_DTYPES = (_dtype.bool, _dtype.uint8, _dtype.int8, _dtype.uint16, _dtype.int16, _dtype.uint32,
                      _dtype.int32)


def _rob_validate(args: Any) -> None:
    op = "segmentation.random_object_bbox"
    if args["ignore_class"] and (given(args, "classes") or given(args, "class_weights") or args["output_class"]):
        raise ValueError(f"Operator `{op}`: 'classes', 'class_weights' and 'output_class' cannot be used "
                         "with ignore_class=True")
    k = args["k_largest"]
    if k is not None and k < 1:
        raise _err(op, "k_largest", f"must be at least 1, got {k}")
    c, w = args["classes"], args["class_weights"]
    if c is not None and w is not None and len(c) != len(w):
        raise _err(op, "class_weights", f"must have one value per class: {len(c)} classes, {len(w)} weights")
    if w is not None and any(x < 0 for x in w):
        raise _err(op, "class_weights", f"must be non-negative, got {list(w)}")


def _rob_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "segmentation.random_object_bbox"
    m = inputs[0]
    if m.dtype not in OBJECT_BBOX_DTYPES:
        raise ValueError(f"Operator `{op}`: unsupported input type {m.dtype} (bool, 8-, 16-bit integers, "
                         "uint32 or int32 labels)")
    if not 1 <= m.ndim <= 6:
        raise ValueError(f"Operator `{op}`: the input must have 1 to 6 dimensions, got {m.ndim}")
    box = OutMeta(_dtype.int32, 1, None)
    out = [box] if args["format"] == "box" else [box, box]
    if args["output_class"]:
        out.append(OutMeta(_dtype.int32, 0, None))
    return out


RANDOM_OBJECT_BBOX = OpSchema(
    "segmentation.random_object_bbox",
    args={
        "background": Arg(INT, None, per_sample=True,
                          doc="background label. Not given: 0, or min(classes) - 1 when classes holds 0"),
        "cache_objects": Arg(BOOL, False, doc="accepted for DALI compatibility; ndd finds the objects each call"),
        "class_weights": Arg(FLOATS, None, per_sample=True,
                             doc="relative probabilities of the classes (without classes: labels 1, 2, ...)"),
        "classes": Arg(INTS, None, per_sample=True,
                       doc="foreground labels. Not given: every label present but the background"),
        "foreground_prob": Arg(FLOAT, 1.0, per_sample=True, doc="probability of picking an object box"),
        "format": Arg(STR, "anchor_shape", choices=("anchor_shape", "start_end", "box"),
                      doc="'anchor_shape', 'start_end' (two outputs) or 'box' (one: start then end)"),
        "ignore_class": Arg(BOOL, False, doc="pick among all objects at once instead of a class first"),
        "k_largest": Arg(INT, None, doc="pick among the k largest boxes (by volume) only"),
        "output_class": Arg(BOOL, False, doc="also return the picked label (the background when no object)"),
        "threshold": Arg(INTS, None, per_sample=True, doc="minimum box extent per axis"),
    },
    infer=_rob_infer, validate=_rob_validate, random=True, provided_by=_PKG,
    doc="The int32 bounding box of a random connected object (face-connected blob of one label) of a "
        "label map; with probability 1 - foreground_prob, or when no object qualifies, the whole input.",
)

SEGMENTATION_SCHEMAS = (SELECT_MASKS, ROI_RANDOM_CROP, RANDOM_CROP_GENERATOR, RANDOM_MASK_PIXEL,
                        RANDOM_OBJECT_BBOX)
