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

from ._common import map_samples

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


def iou(boxes: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """IoU of every box (K, 4) with every anchor, shape (K, anchors); 0 without overlap. Both
    ltrb; the anchors as four contiguous rows ``cols`` (4, anchors), and the work done in
    place: the same float32 operations as the plain formula, in its order, in a third less
    time (the passes over K x anchors values are what costs)."""
    bl, bt, br, bb = (boxes[:, k, None] for k in range(4))
    al, at, ar, ab = cols
    inter = np.minimum(br, ar)
    inter -= np.maximum(bl, al)
    np.maximum(inter, _F32(0), out=inter)
    ih = np.minimum(bb, ab)
    ih -= np.maximum(bt, at)
    np.maximum(ih, _F32(0), out=ih)
    inter *= ih
    union = ih  # (reused)
    np.add((br - bl) * (bb - bt), (ar - al) * (ab - at), out=union)
    union -= inter
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(inter, union, out=union)
    union[~(inter > 0)] = 0
    return union


def match(boxes: np.ndarray, cols: np.ndarray, criteria: np.float32) -> np.ndarray:
    """The box index matched to each anchor (``cols``: see :func:`iou`), -1 for none (as
    DALI 2.4).

    An anchor takes its best box when their IoU is above ``criteria``; then every box
    takes its own best anchor whatever the IoU, later boxes overriding earlier ones.
    Ties go to the last box and the last anchor.
    """
    na = cols.shape[1]
    m = np.full(na, -1, np.intp)
    nb = len(boxes)
    if nb == 0:
        return m
    ious = iou(boxes, cols)
    best_box = nb - 1 - np.argmax(ious[::-1], axis=0)
    above = ious[best_box, np.arange(na)] > criteria
    m[above] = best_box[above]
    best_anchor = na - 1 - np.argmax(ious[:, ::-1], axis=1)
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
    cols = np.ascontiguousarray(enc.anchors.T)
    a_cen, criteria, scale, means, stds = enc[1:6]
    na = len(enc.anchors)
    n = ctx.batch_size
    out_boxes = np.empty((n, na, 4), _F32)
    out_labels = np.zeros((n, na), np.int32)
    samples = [_box_encoder_inputs(ctx, inputs, i) for i in range(n)]

    def one(i: int) -> None:  # sample i's rows of the outputs (threads write disjoint rows)
        boxes, labels = samples[i]
        m = match(boxes, cols, criteria)
        sel = m >= 0
        out_labels[i, sel] = labels[m[sel]]
        b_cen = box_centers(boxes[m[sel]])
        if not enc.offset:
            out_boxes[i] = a_cen
            out_boxes[i, sel] = b_cen
            return
        out_boxes[i] = 0
        with np.errstate(divide="ignore", invalid="ignore"):
            b_cen, ac = b_cen * scale, a_cen[sel] * scale
            xy = (b_cen[:, :2] - ac[:, :2]) / ac[:, 2:]
            wh = np.log((b_cen[:, 2:] / ac[:, 2:]).astype(np.float64)).astype(_F32)
            out_boxes[i, sel] = (np.concatenate([xy, wh], 1) - means) / stds

    # the IoU matrices' bytes: NumPy releases the interpreter lock over them, so the samples
    # run on the thread pool when there is enough work
    map_samples(ctx, one, n, sum(len(b) for b, _ in samples) * na * 4)
    return out_boxes, out_labels
