"""Schema of ``random_bbox_crop``: a random crop window that keeps boxes (and labels) valid.

Argument names and defaults follow DALI 2.4. ``scaling``, ``aspect_ratio``, ``ltrb`` and
``allow_no_crop`` default to None here because DALI tells "not given" from "given":
``crop_shape`` refuses an explicit ``scaling``, ``aspect_ratio`` (even ``[1.0, 1.0]``) or
``allow_no_crop=True`` (and turns the default off), and ``bbox_layout`` an explicit
``ltrb``. Not given, they mean ``[1.0, 1.0]``, ``[1.0, 1.0]``, True and True.
The kernel is attached by ``ndd-ops-cpu``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _dtype
from ._schema import BOOL, FLOAT, FLOATS, INT, INTS, STR, Arg, OpSchema, OutMeta, given

_PKG = "ndd-ops-cpu"
_OP = "random_bbox_crop"
_BOX_LAYOUTS = ("xyXY", "xyWH", "xyzXYZ", "xyzWHD")


def _err(name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{_OP}`: argument '{name}' {msg}")


def _check_ranges(name: str, vals: tuple, sizes: tuple[int, ...]) -> None:
    if len(vals) not in sizes:
        raise _err(name, f"must have {' or '.join(map(str, sizes))} values (pairs [min, max]), got {len(vals)}")
    for lo, hi in zip(vals[0::2], vals[1::2]):
        if not 0.0 <= lo <= hi:
            raise _err(name, f"must hold ranges [min, max] with 0 <= min <= max, got {list(vals)}")


def _is_permutation(layout: str, of: Sequence[str]) -> bool:
    return any(sorted(layout) == sorted(p) for p in of)


def _validate(args: dict) -> None:
    if args["scaling"] is not None:
        _check_ranges("scaling", args["scaling"], (2,))
    if args["aspect_ratio"] is not None:
        _check_ranges("aspect_ratio", args["aspect_ratio"], (2, 6))
    thr = args["thresholds"]
    if not thr:
        raise _err("thresholds", "needs at least one value")
    if any(not 0.0 <= t <= 1.0 for t in thr):
        raise _err("thresholds", f"values must be in [0, 1], got {list(thr)}")
    if args["num_attempts"] < 1:
        raise _err("num_attempts", f"must be at least 1, got {args['num_attempts']}")
    total = args["total_num_attempts"]
    if total != -1 and total < 1:
        raise _err("total_num_attempts", f"must be -1 (no limit) or at least 1, got {total}")
    p = args["bbox_prune_threshold"]
    if p is not None and not 0.0 <= p <= 1.0:
        raise _err("bbox_prune_threshold", f"must be in [0, 1], got {p}")
    lay = args["bbox_layout"]
    if lay is not None:
        if not _is_permutation(lay, _BOX_LAYOUTS):
            raise _err("bbox_layout", f"must be a permutation of {', '.join(_BOX_LAYOUTS)}; got {lay!r}")
        if args["ltrb"] is not None:
            raise ValueError(f"Operator `{_OP}`: 'ltrb' and 'bbox_layout' cannot both be given "
                             "(ltrb is deprecated: use bbox_layout)")
    sl = args["shape_layout"]
    if sl is not None and not _is_permutation(sl, ("WH", "WHD")):
        raise _err("shape_layout", f"must be a permutation of 'WH' or 'WHD'; got {sl!r}")
    for name in ("crop_shape", "input_shape"):
        v = args[name]
        if v is not None:
            if len(v) not in (2, 3):
                raise _err(name, f"must have 2 or 3 values (one per dimension), got {len(v)}")
            if any(x < 0 for x in v) or (name == "input_shape" and 0 in v):
                want = "positive" if name == "input_shape" else "non-negative"
                raise _err(name, f"must be {want}, got {list(v)}")


def _infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    boxes, labels = inputs[0], (inputs[1] if len(inputs) > 1 else None)
    if boxes.dtype != _dtype.float32 or boxes.ndim != 2:
        raise ValueError(f"Operator `{_OP}`: input 'boxes' must be a 2-D float32 tensor (boxes x coordinates), "
                         f"got {boxes.ndim}-D {boxes.dtype}")
    if labels is not None and (labels.dtype != _dtype.int32 or labels.ndim < 1):
        raise ValueError(f"Operator `{_OP}`: input 'labels' must be int32 with one row per box "
                         f"(at least 1-D), got {labels.ndim}-D {labels.dtype}")
    if given(args, "crop_shape"):
        if not given(args, "input_shape"):
            raise _err("input_shape", "must be given with 'crop_shape'")
        for name in ("scaling", "aspect_ratio"):
            if given(args, name):
                raise _err(name, "cannot be given with 'crop_shape'")
        if args["allow_no_crop"]:
            raise _err("allow_no_crop", "must be False with 'crop_shape' (not given, it is off there)")
    f32 = _dtype.float32
    out = [OutMeta(f32, 1, None), OutMeta(f32, 1, None), OutMeta(f32, 2, None)]
    if labels is not None:
        out.append(OutMeta(labels.dtype, labels.ndim, None))
    if args["output_bbox_indices"]:
        out.append(OutMeta(_dtype.int32, 1, None))
    return out


RANDOM_BBOX_CROP = OpSchema(
    "random_bbox_crop",
    inputs=("boxes", "labels"), min_inputs=1,
    args={
        "aspect_ratio": Arg(FLOATS, None, doc="window aspect ratio range [min, max] (w/h), or 6 values for 3-D "
                            "(xy, xz, yz); a range of one value fixes it. Not given: [1.0, 1.0]"),
        "thresholds": Arg(FLOATS, (0.0,), doc="minimum IoU (or overlap) values; each round picks one at random"),
        "scaling": Arg(FLOATS, None, doc="range [min, max] of each window side relative to the image. "
                       "Not given: [1.0, 1.0]"),
        "num_attempts": Arg(INT, 1, doc="attempts per picked threshold before picking again"),
        "total_num_attempts": Arg(INT, -1, doc="attempts in all before using the best window (-1: no limit)"),
        "allow_no_crop": Arg(BOOL, None, doc="'no crop' is one more choice besides the thresholds. "
                             "Not given: True, or False with crop_shape"),
        "all_boxes_above_threshold": Arg(BOOL, True, doc="every box must meet the threshold (else at least one)"),
        "bbox_layout": Arg(STR, None, doc="order of box coordinates: a permutation of xyXY or xyWH "
                           "(xyzXYZ or xyzWHD in 3-D); default xyXY / xyzXYZ"),
        "ltrb": Arg(BOOL, None, doc="deprecated: True is bbox_layout xyXY, False xyWH. Not given: True"),
        "bbox_prune_threshold": Arg(FLOAT, None, doc="keep boxes with at least this fraction of their area in "
                                    "the window (not given: keep boxes whose centre is in it)"),
        "threshold_type": Arg(STR, "iou", choices=("iou", "overlap"),
                              doc="'iou' of window and box, or 'overlap': the box's area fraction in the window"),
        "crop_shape": Arg(INTS, None, per_sample=True, doc="fixed window shape in pixels (needs input_shape)"),
        "input_shape": Arg(INTS, None, per_sample=True, doc="image shape; aspect ratios become absolute"),
        "shape_layout": Arg(STR, None, doc="order of crop_shape / input_shape: a permutation of WH or WHD"),
        "output_bbox_indices": Arg(BOOL, False, doc="also return the input indices of the kept boxes"),
        "quiet": Arg(BOOL, False, doc="no warning when the best window is used after total_num_attempts"),
    },
    infer=_infer, validate=_validate, random=True, provided_by=_PKG,
    doc="A random crop window of the image space whose boxes meet an IoU or overlap threshold. Returns "
        "(anchor, shape, boxes[, labels][, indices]): anchor and shape in [x, y(, z)] order, relative "
        "(absolute with crop_shape), the kept boxes relative to the window. Draws 7 words per call.",
)

RANDOM_BBOX_SCHEMAS = (RANDOM_BBOX_CROP,)
