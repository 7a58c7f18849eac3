"""Bounding-box kernels: ``bb_flip`` and ``box_encoder`` (SSD encoding).

All arithmetic is float32, in the order DALI 2.4 uses, so the results match it
to the bit (observed): ``bb_flip`` goes through ltrb even for xywh boxes, and
``box_encoder`` takes the log of the float32 width/height ratio.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    bb_flip_flags,
    box_centers,
    box_encoding,
    check_box_encoder_sample,
)

_F32 = np.float32
_ONE = np.float32(1.0)

# -- bb_flip ----------------------------------------------------------------------


def flip_boxes(b: np.ndarray, h: Any, v: Any, ltrb: bool) -> np.ndarray:
    """Mirror boxes ``b`` (..., 4); ``h`` and ``v`` (bools) broadcast against ``b[..., 0]``."""
    left, top, right, bottom = (b[..., k] for k in range(4))
    if not ltrb:
        right, bottom = left + right, top + bottom
    left, right = np.where(h, _ONE - right, left), np.where(h, _ONE - left, right)
    top, bottom = np.where(v, _ONE - bottom, top), np.where(v, _ONE - top, bottom)
    if not ltrb:
        right, bottom = right - left, bottom - top
    return np.stack([left, top, right, bottom], -1).astype(_F32, copy=False)


def bb_flip_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``bb_flip``: per-sample horizontal/vertical mirror of relative boxes."""
    bd = inputs[0]
    h, v = bb_flip_flags(ctx, bd, args)
    if bd.dense is not None:
        d = bd.dense
        return flip_boxes(d.reshape(len(bd), math.prod(d.shape[1:]) // 4, 4), h[:, None], v[:, None], args["ltrb"]).reshape(d.shape)
    return [flip_boxes(s.reshape(-1, 4), h[i], v[i], args["ltrb"]).reshape(s.shape) for i, s in enumerate(bd.samples)]


# -- box_encoder ------------------------------------------------------------------


def iou(boxes: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """IoU of every box with every anchor (both ltrb), shape (boxes, anchors); 0 without overlap."""
    b, a = boxes[:, None, :], anchors[None, :, :]
    iw = np.maximum(np.minimum(b[..., 2], a[..., 2]) - np.maximum(b[..., 0], a[..., 0]), _F32(0))
    ih = np.maximum(np.minimum(b[..., 3], a[..., 3]) - np.maximum(b[..., 1], a[..., 1]), _F32(0))
    inter = iw * ih
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(inter > 0, inter / (area_b + area_a - inter), _F32(0)).astype(_F32, copy=False)


def match(boxes: np.ndarray, anchors: np.ndarray, criteria: np.float32) -> np.ndarray:
    """The box index matched to each anchor, -1 for none (as DALI 2.4).

    An anchor takes its best box when their IoU is above ``criteria``; then every box
    takes its own best anchor whatever the IoU, later boxes overriding earlier ones.
    Ties go to the last box and the last anchor.
    """
    m = np.full(len(anchors), -1, np.intp)
    nb = len(boxes)
    if nb == 0:
        return m
    ious = iou(boxes, anchors)
    best_box = nb - 1 - np.argmax(ious[::-1], axis=0)
    above = ious[best_box, np.arange(len(anchors))] > criteria
    m[above] = best_box[above]
    best_anchor = len(anchors) - 1 - np.argmax(ious[:, ::-1], axis=1)
    taken, last = np.unique(best_anchor[::-1], return_index=True)  # the last box naming each anchor
    m[taken] = nb - 1 - last
    return m


def _box_encoder_inputs(ctx: KernelContext, inputs: list[BatchData], i: int) -> tuple[np.ndarray, np.ndarray]:
    boxes, labels = np.asarray(inputs[0].sample(i)), np.asarray(inputs[1].sample(i))
    check_box_encoder_sample(ctx, inputs, i, boxes.shape, labels.shape)
    return boxes, labels.reshape(-1)


def box_encoder_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``box_encoder``: per anchor, the matched box as (cx, cy, w, h) (or its normalised offsets
    from the anchor) and its label; unmatched anchors keep themselves (offsets 0) and label 0."""
    enc = box_encoding(args)
    anchors, a_cen, criteria, scale, means, stds = enc[:6]
    na = len(anchors)
    n = ctx.batch_size
    out_boxes = np.empty((n, na, 4), _F32)
    out_labels = np.zeros((n, na), np.int32)
    for i in range(n):
        boxes, labels = _box_encoder_inputs(ctx, inputs, i)
        m = match(boxes, anchors, criteria)
        sel = m >= 0
        out_labels[i, sel] = labels[m[sel]]
        b_cen = box_centers(boxes[m[sel]])
        if not enc.offset:
            out_boxes[i] = a_cen
            out_boxes[i, sel] = b_cen
            continue
        out_boxes[i] = 0
        with np.errstate(divide="ignore", invalid="ignore"):
            b_cen, ac = b_cen * scale, a_cen[sel] * scale
            xy = (b_cen[:, :2] - ac[:, :2]) / ac[:, 2:]
            wh = np.log((b_cen[:, 2:] / ac[:, 2:]).astype(np.float64)).astype(_F32)
            out_boxes[i, sel] = (np.concatenate([xy, wh], 1) - means) / stds
    return out_boxes, out_labels
