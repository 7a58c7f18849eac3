"""Schemas of the bounding-box operators (``bb_flip``, ``box_encoder``).

Boxes are float32, in relative coordinates ([0, 1] for boxes inside the image).
Argument names and defaults follow DALI; kernels are attached by the plugins.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _dtype
from ._schema import BOOL, FLOAT, FLOATS, INT, Arg, OpSchema, OutMeta

_PKG = "ndd-ops-cpu"


def _err(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


def _check_input(op: str, name: str, m: OutMeta, dtype: str, ndims: tuple[int, ...] | None) -> None:
    if m.dtype != getattr(_dtype, dtype):
        raise ValueError(f"Operator `{op}`: input '{name}' must be {dtype}, got {m.dtype}")
    if ndims is not None and m.ndim not in ndims:
        want = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"Operator `{op}`: input '{name}' must be {want}, got {m.ndim}-D")


# -- bb_flip ----------------------------------------------------------------------


def _bb_flip_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    _check_input("bb_flip", "input", m, "float32", None)
    if m.ndim < 1:
        raise ValueError("Operator `bb_flip`: input 'input' must hold boxes of 4 values, got a 0-D input")
    return [m]


BB_FLIP = OpSchema(
    "bb_flip",
    args={
        "ltrb": Arg(BOOL, False, doc="boxes are [left, top, right, bottom] (default: [x, y, w, h])"),
        "horizontal": Arg(INT, 1, per_sample=True, doc="flip horizontally (non-zero: flip)"),
        "vertical": Arg(INT, 0, per_sample=True, doc="flip vertically (non-zero: flip)"),
    },
    infer=_bb_flip_infer, provided_by=_PKG,
    doc="Mirror float32 boxes (N, 4) in relative coordinates: x becomes 1 - x (and/or y, 1 - y).",
)

# -- box_encoder ------------------------------------------------------------------


def _box_encoder_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "box_encoder"
    _check_input(op, "bboxes", inputs[0], "float32", (2,))
    _check_input(op, "labels", inputs[1], "int32", (1, 2))
    return [OutMeta(_dtype.float32, 2, None), OutMeta(_dtype.int32, 1, None)]


def _box_encoder_validate(args: dict) -> None:
    op = "box_encoder"
    anchors = args["anchors"]
    if not anchors or len(anchors) % 4:
        raise _err(op, "anchors", f"must be a non-empty list of ltrb boxes (a multiple of 4 values), "
                                  f"got {len(anchors)} value(s)")
    if not 0.0 <= args["criteria"] <= 1.0:
        raise _err(op, "criteria", f"must be in [0, 1], got {args['criteria']}")
    for name in ("means", "stds"):
        if len(args[name]) != 4:
            raise _err(op, name, f"must have 4 values (x, y, w, h), got {len(args[name])}")
    if 0.0 in args["stds"]:
        raise _err(op, "stds", f"must not contain 0, got {list(args['stds'])}")


BOX_ENCODER = OpSchema(
    "box_encoder", inputs=("bboxes", "labels"),
    args={
        "anchors": Arg(FLOATS, required=True, doc="anchor boxes, ltrb, 4 values each"),
        "criteria": Arg(FLOAT, 0.5, doc="an anchor matches its best box when their IoU is above this"),
        "means": Arg(FLOATS, (0.0, 0.0, 0.0, 0.0), doc="subtracted from the offsets (x, y, w, h)"),
        "stds": Arg(FLOATS, (1.0, 1.0, 1.0, 1.0), doc="divide the offsets (x, y, w, h); no 0"),
        "offset": Arg(BOOL, False, doc="return offsets from the anchors instead of boxes"),
        "scale": Arg(FLOAT, 1.0, doc="multiplies boxes and anchors before the offsets are computed"),
    },
    infer=_box_encoder_infer, validate=_box_encoder_validate, provided_by=_PKG,
    doc="SSD encoding: match each anchor to a ground-truth box (ltrb, float32) and return per anchor "
        "the box as (cx, cy, w, h) (or its offsets, with offset=True) and the box's int32 label "
        "(0 and the anchor itself when unmatched).",
)

BBOX_SCHEMAS = (BB_FLIP, BOX_ENCODER)
