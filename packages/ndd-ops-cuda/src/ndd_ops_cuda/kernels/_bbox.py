"""Box and point operators on the GPU with torch: ``bb_flip``, ``box_encoder``,
``coord_transform``.

Arguments and shape checks come from core, as for the CPU kernels, and the arithmetic is
theirs, one float32 (or float64) operation at a time in the same order, so the values are
the CPU's bit for bit (box_encoder's log is float64 on both, rounded to float32).
``box_encoder`` matches every sample of a batch at once: the boxes are padded to the
longest sample, and padding takes no part in the matching.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ndd.plugins import (
    BatchData,
    BoxEncoding,
    KernelArgs,
    KernelContext,
    bb_flip_flags,
    box_encoding,
    check_box_encoder_sample,
    check_points,
    coord_transform_params,
    transform_points,
)

from ._common import cached_constant, call_stream, device_of, numpy_dtype, out_dtype, upload
from ._core import _saturate_cast

# -- bb_flip -------------------------------------------------------------------------------


def _flip(b: torch.Tensor, h: bool | torch.Tensor, v: bool | torch.Tensor, ltrb: bool) -> torch.Tensor:
    """Boxes ``b`` (..., 4) mirrored where ``h`` / ``v`` (one flag, or bools broadcasting
    against ``b[..., 0]``), as the CPU's ``flip_boxes``."""
    left, top, right, bottom = b.unbind(-1)
    if not ltrb:
        right, bottom = left + right, top + bottom
    if isinstance(h, torch.Tensor):
        left, right = torch.where(h, 1 - right, left), torch.where(h, 1 - left, right)
    elif h:
        left, right = 1 - right, 1 - left
    if isinstance(v, torch.Tensor):
        top, bottom = torch.where(v, 1 - bottom, top), torch.where(v, 1 - top, bottom)
    elif v:
        top, bottom = 1 - bottom, 1 - top
    if not ltrb:
        right, bottom = right - left, bottom - top
    return torch.stack([left, top, right, bottom], -1)


def _flag(flags: np.ndarray, dev: torch.device) -> bool | torch.Tensor:
    """One Python bool when every sample has the same flag (no upload), else (n, 1) bools."""
    if flags.all() or not flags.any():
        return bool(flags.all())
    return upload(flags[:, None], dev)


def bb_flip_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    h, v = bb_flip_flags(ctx, bd, args)
    if bd.dense is not None:
        d = bd.dense
        return _flip(d.reshape(len(bd), math.prod(d.shape[1:]) // 4, 4), _flag(h, d.device), _flag(v, d.device), args["ltrb"]).reshape(d.shape)
    return [_flip(s.reshape(-1, 4), bool(h[i]), bool(v[i]), args["ltrb"]).reshape(s.shape)
            for i, s in enumerate(bd.samples)]


# -- box_encoder -----------------------------------------------------------------------------

# Samples matched at once: their (samples x boxes x anchors) IoU matrices stay under this
# many values (the matching keeps a few arrays of that size alive).
_MATCH_VALUES = 1 << 23


def _centers(b: torch.Tensor) -> torch.Tensor:
    """ltrb boxes (..., 4) as (cx, cy, w, h), as core's ``box_centers``."""
    left, top, right, bottom = b.unbind(-1)
    return torch.stack([(left + right) * 0.5, (top + bottom) * 0.5, right - left, bottom - top], -1)


def _iou(boxes: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """IoU (n, K, A) of boxes (n, K, 4) with anchors (A, 4), as the CPU's ``iou``."""
    b, a = boxes[:, :, None, :], anchors
    iw = (torch.minimum(b[..., 2], a[..., 2]) - torch.maximum(b[..., 0], a[..., 0])).clamp_(min=0)
    ih = (torch.minimum(b[..., 3], a[..., 3]) - torch.maximum(b[..., 1], a[..., 1])).clamp_(min=0)
    inter = iw * ih
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    return torch.where(inter > 0, inter / (area_b + area_a - inter), 0.0)


def _match(boxes: torch.Tensor, valid: torch.Tensor, anchors: torch.Tensor, criteria: float) -> torch.Tensor:
    """The box index (n, A) matched to each anchor, -1 for none, as the CPU's ``match``: an
    anchor takes its best box above ``criteria``, then each box takes its best anchor, later
    boxes overriding earlier ones; ties go to the last box and the last anchor. ``valid``
    (n, K) marks the real boxes among the padding."""
    k, na = boxes.shape[1], anchors.shape[0]
    ious = _iou(boxes, anchors).masked_fill_(~valid[:, :, None], -1.0)  # padding: never a best box
    # (max over a reversed axis: torch gives the first of equal maxima, i.e. the last one here)
    best, at = ious.flip(1).max(dim=1)
    m = torch.where(best > criteria, k - 1 - at, -1)
    best_anchor = na - 1 - ious.flip(2).argmax(dim=2)  # (n, K)
    box = torch.arange(k, device=boxes.device).expand_as(best_anchor)
    forced = torch.full_like(m, -1).scatter_reduce_(1, best_anchor, torch.where(valid, box, -1), reduce="amax")
    return torch.where(forced >= 0, forced, m)


def _encode(boxes: list[torch.Tensor], labels: list[torch.Tensor], const: torch.Tensor,
            enc: BoxEncoding) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples ``boxes`` (each (K_i, 4)) with their ``labels`` (K_i,) encoded at once."""
    na = len(enc.anchors)
    anchors, a_cen = const[:na], const[na:2 * na]
    n, dev = len(boxes), const.device
    counts = [len(b) for b in boxes]
    k = max(counts)
    if k == 0:  # nothing to match: every anchor keeps itself (offsets 0) and label 0
        out = a_cen.expand(n, na, 4).clone() if not enc.offset else torch.zeros((n, na, 4), device=dev)
        return out, torch.zeros((n, na), dtype=torch.int32, device=dev)
    if min(counts) < k:  # padded to the longest sample
        pad = torch.nn.utils.rnn.pad_sequence
        b, lab = pad(boxes, batch_first=True), pad(labels, batch_first=True)
        valid = torch.arange(k, device=dev) < upload(np.array(counts, np.int64), dev)[:, None]
    else:
        b, lab = torch.stack(boxes), torch.stack(labels)
        valid = torch.ones((n, k), dtype=torch.bool, device=dev)
    m = _match(b, valid, anchors, float(enc.criteria))
    sel = m >= 0
    at = m.clamp(min=0)
    matched = b.gather(1, at[:, :, None].expand(n, na, 4))
    out_labels = torch.where(sel, lab.gather(1, at), 0).to(torch.int32)
    b_cen = _centers(matched)
    if not enc.offset:
        return torch.where(sel[:, :, None], b_cen, a_cen), out_labels
    means, stds = const[2 * na], const[2 * na + 1]
    scale = float(enc.scale)
    b_cen, ac = b_cen * scale, a_cen * scale
    xy = (b_cen[..., :2] - ac[..., :2]) / ac[..., 2:]
    wh = torch.log((b_cen[..., 2:] / ac[..., 2:]).to(torch.float64)).to(torch.float32)
    coded = (torch.cat([xy, wh], -1) - means) / stds
    return torch.where(sel[:, :, None], coded, 0.0), out_labels


def box_encoder_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    enc = box_encoding(args)
    n = ctx.batch_size
    dev = device_of(ctx, inputs)
    boxes, labels = [], []
    for i in range(n):
        b, lab = inputs[0].sample(i), inputs[1].sample(i)
        check_box_encoder_sample(ctx, inputs, i, b.shape, lab.shape)
        boxes.append(torch.as_tensor(b, device=dev))
        labels.append(torch.as_tensor(lab, device=dev).reshape(-1))
    # anchors, their centres, means and stds: one upload for every call with these arguments
    host = np.concatenate([enc.anchors, enc.centers, enc.means[None], enc.stds[None]])
    const = cached_constant(("box_encoder", str(dev), host.tobytes()), call_stream(ctx), lambda: upload(host, dev))
    na = len(enc.anchors)
    if n == 0:
        return torch.empty((0, na, 4), device=dev), torch.empty((0, na), dtype=torch.int32, device=dev)
    per = max(1, _MATCH_VALUES // max(1, na * max(len(b) for b in boxes)))
    parts = [_encode(boxes[lo:lo + per], labels[lo:lo + per], const, enc) for lo in range(0, n, per)]
    if len(parts) == 1:
        return parts[0]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


# -- coord_transform ---------------------------------------------------------------------------


def coord_transform_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    dt = out_dtype(ctx)
    samples = bd.samples if bd.dense is None else list(bd.dense)
    params = []
    for i, x in enumerate(samples):
        check_points(i, x.shape)
        params.append(coord_transform_params(args, i, x.shape[-1]))

    def finish(y: torch.Tensor) -> torch.Tensor:
        return y.to(torch.float32) if dt == torch.float32 else _saturate_cast(y, numpy_dtype(dt), dt)

    if bd.dense is not None and len(samples) and all(lin.shape == params[0][0].shape for lin, _ in params):
        # one matrix per sample, uploaded together: the batch in one pass
        x = bd.dense
        mats = np.stack([np.concatenate([lin, off[:, None]], 1) for lin, off in params])  # (n, out, d + 1)
        m = upload(mats.astype(np.float64), x.device)
        lead = (x.shape[0],) + (1,) * (x.dim() - 2)  # each sample's matrix against all its points
        lin, off = m[..., :-1].reshape(lead + m.shape[1:2] + (-1,)), m[..., -1].reshape(lead + m.shape[1:2])
        return finish(transform_points(x.to(torch.float64), lin, off))
    out = []
    for x, (lin, off) in zip(samples, params):
        m = upload(np.concatenate([lin, off[:, None]], 1).astype(np.float64), x.device)
        out.append(finish(transform_points(x.to(torch.float64), m[:, :-1], m[:, -1])))
    return out
