"""Bounding-box kernels: ``bb_flip`` and ``box_encoder`` (SSD encoding).

All arithmetic is float32, in the order DALI 2.4 uses, so the results match it
to the bit (observed): ``bb_flip`` goes through ltrb even for xywh boxes, and
``box_encoder`` takes the log of the float32 width/height ratio.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext

from ._common import sample_name

_F32 = np.float32
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)


def _flags(ctx: KernelContext, args: KernelArgs, name: str, n: int) -> np.ndarray:
    """One bool per sample: whether the int argument ``name`` is non-zero."""
    out = np.empty(n, bool)
    for i, v in enumerate(args.per_sample(name)):
        a = np.asarray(v)
        if a.size != 1:
            raise ValueError(f"Operator `{ctx.op}`: argument '{name}' must be one value per sample, "
                             f"got shape {a.shape} for sample {i}")
        out[i] = a.reshape(()) != 0
    return out


# -- bb_flip ----------------------------------------------------------------------


def _check_flip_shape(ctx: KernelContext, bd: BatchData, i: int, shape: tuple[int, ...]) -> None:
    if shape[-1] == 4 or (len(shape) == 1 and shape[0] % 4 == 0):
        return
    raise ValueError(f"Operator `{ctx.op}`: {sample_name(ctx, bd, i)} must hold boxes of 4 values, shape (N, 4) "
                     f"(3-D boxes are not supported), got shape {shape}")


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
    n = len(bd)
    h, v, ltrb = _flags(ctx, args, "horizontal", n), _flags(ctx, args, "vertical", n), args["ltrb"]
    if bd.dense is not None:
        d = bd.dense
        if n == 0:
            return d.copy()
        _check_flip_shape(ctx, bd, 0, d.shape[1:])
        return flip_boxes(d.reshape(n, -1, 4), h[:, None], v[:, None], ltrb).reshape(d.shape)
    out = []
    for i, s in enumerate(bd.samples):
        _check_flip_shape(ctx, bd, i, s.shape)
        out.append(flip_boxes(s.reshape(-1, 4), h[i], v[i], ltrb).reshape(s.shape))
    return out


# -- box_encoder ------------------------------------------------------------------


def centers(b: np.ndarray) -> np.ndarray:
    """ltrb boxes (K, 4) as (cx, cy, w, h), float32."""
    return np.stack([(b[:, 0] + b[:, 2]) * _HALF, (b[:, 1] + b[:, 3]) * _HALF,
                     b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)


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
    bb, lb = inputs
    boxes, labels = np.asarray(bb.sample(i)), np.asarray(lb.sample(i))
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"Operator `{ctx.op}`: bboxes of {sample_name(ctx, bb, i)} must have shape (N, 4), "
                         f"got {boxes.shape}")
    if labels.shape not in ((len(boxes),), (len(boxes), 1)):
        raise ValueError(f"Operator `{ctx.op}`: labels of {sample_name(ctx, lb, i)} must have shape "
                         f"({len(boxes)},) or ({len(boxes)}, 1), one per box, got {labels.shape}")
    return boxes, labels.reshape(-1)


def box_encoder_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``box_encoder``: per anchor, the matched box as (cx, cy, w, h) (or its normalised offsets
    from the anchor) and its label; unmatched anchors keep themselves (offsets 0) and label 0."""
    anchors = np.asarray(args["anchors"], _F32).reshape(-1, 4)
    na = len(anchors)
    a_cen = centers(anchors)
    criteria, scale = _F32(args["criteria"]), _F32(args["scale"])
    means, stds = np.asarray(args["means"], _F32), np.asarray(args["stds"], _F32)
    n = ctx.batch_size
    out_boxes = np.empty((n, na, 4), _F32)
    out_labels = np.zeros((n, na), np.int32)
    for i in range(n):
        boxes, labels = _box_encoder_inputs(ctx, inputs, i)
        m = match(boxes, anchors, criteria)
        sel = m >= 0
        out_labels[i, sel] = labels[m[sel]]
        b_cen = centers(boxes[m[sel]])
        if not args["offset"]:
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
