"""``random_bbox_crop`` (CPU): a random crop window that keeps boxes and labels consistent.

The rules, as observed in DALI 2.4:

* Each *round* picks one choice uniformly among ``thresholds`` (plus "no crop" when
  ``allow_no_crop``), then makes up to ``num_attempts`` attempts with it; then it picks
  again. ``total_num_attempts`` (when not -1) caps the attempts of all rounds; "no crop"
  rounds make none.
* An attempt draws each side's scale uniformly in ``scaling`` (relative to the image; in
  pixels when ``input_shape`` is given, which makes aspect ratios absolute). A pair of
  sides with a fixed ratio (``[r, r]``) is imposed: the sides are visited in a random
  order, each later side of a fixed pair is set from the earlier one by the ratio, then
  all sides are scaled so that the longest is as long as the longest drawn one. The
  attempt counts but is void when a pair's ratio is outside its range (fixed ratios that
  contradict each other, in 3-D). The anchor is uniform in
  ``[0, 1 - shape]``. With ``crop_shape`` the shape is fixed and the anchor is a uniform
  integer in ``[0, input_shape - crop_shape]``.
* The window's metric is the min (``all_boxes_above_threshold``) or max over the boxes of
  their IoU with it, or of their ``overlap`` (intersection / box area). A window is
  taken when the metric is at least the round's threshold and it keeps at least one
  box (a sample without boxes takes its first valid window).
* Boxes are kept when their centre lies in ``[anchor, anchor + shape)``, or with
  ``bbox_prune_threshold`` t when ``intersection > 0`` and ``intersection / area >= t``;
  kept boxes are clipped to the window and expressed relative to it, in the input
  layout. "No crop" returns the boxes as given.
* When ``total_num_attempts`` runs out, the valid attempt with the highest metric (the
  first of equals) is used, with a warning unless ``quiet``; if no attempt was valid,
  the window is empty (anchor 0, shape 0, no boxes).

All geometry is float32. With ``crop_shape`` the window in relative terms is
``anchor / input_shape`` and ``crop_shape / input_shape``; the window's far edge is
``anchor + shape``.

Draw pattern: ``RNG.from_words(ctx.random_state)`` gives 7 words per sample, the seed of
that sample's own generator. A sample's generator gives blocks of rounds: first one
word per round (the choice), then ``2 * ndim`` words per attempt (the side scales, then
the anchor fractions). The random order of fixed-ratio sides takes the low 8 bits of
the side-scale words, which the scales themselves leave unused. The first block holds
64 attempts (at least one round); each next block twice as many, up to 4096. The layout
does not depend on ``total_num_attempts``.

DALI loops forever when no window can meet the constraints and ``total_num_attempts``
is -1; this raises an error after 1,000,000 attempts instead.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext

from ._common import sample_name

_F32 = np.float32
_MAX_ATTEMPTS = 1_000_000
_FIRST_BLOCK, _MAX_BLOCK = 64, 4096
_PAIRS = {2: ((0, 1),), 3: ((0, 1), (0, 2), (1, 2))}
_FIT_TOL = 1e-5  # a fitted pair's ratio is exact up to float32 rounding


def _unit(words: np.ndarray) -> np.ndarray:
    """float32 in [0, 1) from the top 24 bits of each word."""
    return (words >> np.uint32(8)).astype(_F32) * _F32(2.0**-24)


def _bounded(words: np.ndarray, n: Any) -> np.ndarray:
    """Integers in [0, n) by multiply-shift."""
    return ((words.astype(np.uint64) * np.asarray(n, np.uint64)) >> np.uint64(32)).astype(np.int64)


def _prod(x: np.ndarray) -> np.ndarray:
    """Product over the last axis, left to right in float32."""
    out = x[..., 0]
    for k in range(1, x.shape[-1]):
        out = out * x[..., k]
    return out


@dataclass
class _Setup:
    """The call's constant arguments, resolved for one number of dimensions."""

    ndim: int
    starts: list[int]
    ends: list[int]
    sizes: bool
    scaling: tuple[float, float]
    ratios: list[tuple[float, float]]
    thresholds: np.ndarray
    allow_no_crop: bool
    all_boxes: bool
    iou: bool
    prune: float | None
    num_attempts: int
    total: float
    shape_order: list[int]
    quiet: bool


def _setup(op: str, args: KernelArgs, ncoords: int) -> _Setup:
    d = ncoords // 2
    lay = args["bbox_layout"]
    if lay is None:  # ltrb: not given or True is xyXY, False is xyWH
        lay = "xyz"[:d] + ("WHD" if args["ltrb"] is False else "XYZ")[:d]
    if len(lay) != ncoords:
        raise ValueError(f"Operator `{op}`: argument 'bbox_layout' {lay!r} has {len(lay)} coordinates, "
                         f"but the boxes have {ncoords}")
    sizes = "X" not in lay
    sl = args["shape_layout"] or "WHD"[:d]
    if len(sl) != d:
        raise ValueError(f"Operator `{op}`: argument 'shape_layout' {sl!r} must have {d} letters for {d}-D boxes")
    ar = args["aspect_ratio"] or (1.0, 1.0)
    pairs = [(ar[0], ar[1])] * len(_PAIRS[d]) if len(ar) == 2 else [(ar[0], ar[1]), (ar[2], ar[3]), (ar[4], ar[5])]
    total = args["total_num_attempts"]
    return _Setup(
        ndim=d, starts=[lay.index(c) for c in "xyz"[:d]],
        ends=[lay.index(c) for c in ("WHD" if sizes else "XYZ")[:d]], sizes=sizes,
        scaling=tuple(args["scaling"] or (1.0, 1.0)), ratios=pairs[:len(_PAIRS[d])],
        thresholds=np.asarray(args["thresholds"], _F32), allow_no_crop=args["allow_no_crop"] is not False,
        all_boxes=args["all_boxes_above_threshold"], iou=args["threshold_type"] == "iou",
        prune=args["bbox_prune_threshold"], num_attempts=args["num_attempts"],
        total=math.inf if total == -1 else float(total),
        shape_order=[sl.index(c) for c in "WHD"[:d]], quiet=args["quiet"],
    )


def _shape_arg(op: str, args: KernelArgs, name: str, i: int, s: _Setup, where: str) -> np.ndarray | None:
    """Sample ``i``'s ``input_shape`` / ``crop_shape`` in x, y(, z) order, or None."""
    v = args.sample(name, i)
    if v is None:
        return None
    a = np.asarray(v, np.int64).reshape(-1)
    if a.size != s.ndim:
        raise ValueError(f"Operator `{op}`: argument '{name}' must have {s.ndim} values for {s.ndim}-D boxes, "
                         f"got {a.tolist()} ({where})")
    if np.any(a < 0) or (name == "input_shape" and np.any(a == 0)):
        want = "positive" if name == "input_shape" else "non-negative"
        raise ValueError(f"Operator `{op}`: argument '{name}' must be {want}, got {a.tolist()} ({where})")
    return a[s.shape_order]


class _Boxes:
    """One sample's boxes as float32 corners, with their areas."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi
        self.area = _prod(np.maximum(hi - lo, _F32(0)))
        self.centre = (lo + hi) * _F32(0.5)

    def __len__(self) -> int:
        return len(self.lo)

    def inter(self, a: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Intersection areas (windows x boxes) of windows from ``a`` to ``e``."""
        ext = np.minimum(self.hi, e[:, None]) - np.maximum(self.lo, a[:, None])
        return _prod(np.maximum(ext, _F32(0)))

    def kept(self, s: _Setup, a: np.ndarray, e: np.ndarray, inter: np.ndarray) -> np.ndarray:
        """Which boxes each window keeps (windows x boxes)."""
        if s.prune is None:
            c = self.centre
            return np.all((a[:, None] <= c) & (c < e[:, None]), axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(self.area > 0, inter / self.area, _F32(0))
        return (inter > 0) & (frac >= _F32(s.prune))

    def metric(self, s: _Setup, shape: np.ndarray, inter: np.ndarray) -> np.ndarray:
        """Each window's IoU or overlap, the min or max over the boxes (0 without boxes)."""
        if not len(self):
            return np.zeros(len(inter), _F32)
        den = (self.area + _prod(shape)[:, None] - inter) if s.iou else np.broadcast_to(self.area, inter.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(den > 0, inter / den, _F32(0))
        return m.min(axis=1) if s.all_boxes else m.max(axis=1)


def _fix_ratios(s: _Setup, side: np.ndarray, w_scale: np.ndarray) -> np.ndarray:
    """Sides (attempts x ndim) with the fixed-ratio pairs imposed, as the module docstring says."""
    d = s.ndim
    follow = np.zeros((d, d), _F32)  # follow[j, i]: side j = side i * follow[j, i]
    for (i, j), (rlo, rhi) in zip(_PAIRS[d], s.ratios):
        if rlo == rhi:
            follow[j, i], follow[i, j] = _F32(1.0 / rlo) if rlo > 0 else _F32(0), _F32(rlo)
    if not follow.any():
        return side
    # The order comes from the scale words' low 8 bits, which _unit leaves unused: no extra draws.
    low = sum((w_scale[:, a] & np.uint32(0xFF)).astype(np.uint64) << np.uint64(8 * a) for a in range(d))
    orders = list(itertools.permutations(range(d)))
    pick = ((low * np.uint64(len(orders))) >> np.uint64(8 * d)).astype(np.int64)
    before = side.max(axis=1)
    out = side.copy()
    for n, order in enumerate(orders):
        rows = np.flatnonzero(pick == n)
        for a, i in enumerate(order):
            for j in order[a + 1:]:
                if follow[j, i] > 0:
                    out[rows, j] = out[rows, i] * follow[j, i]
    with np.errstate(divide="ignore", invalid="ignore"):
        return before[:, None] * out / out.max(axis=1)[:, None]


def _windows(s: _Setup, w_scale: np.ndarray, w_anchor: np.ndarray, in_shape: np.ndarray | None,
             crop: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidate windows from words (attempts x ndim): relative anchor and shape, validity,
    and the anchor and shape to output (absolute with ``crop_shape``)."""
    k = len(w_scale)
    if crop is not None:
        span = in_shape - crop
        anchor = _bounded(w_anchor, np.abs(span) + 1) * np.where(span < 0, -1, 1)
        ext = in_shape.astype(_F32)
        rel = np.broadcast_to(crop.astype(_F32) / ext, (k, s.ndim))
        return anchor.astype(_F32) / ext, rel, np.ones(k, bool), anchor.astype(_F32), \
            np.broadcast_to(crop.astype(_F32), (k, s.ndim))
    lo, hi = (_F32(v) for v in s.scaling)
    ext = np.ones(s.ndim, _F32) if in_shape is None else in_shape.astype(_F32)
    side = _fix_ratios(s, (lo + (hi - lo) * _unit(w_scale)) * ext, w_scale)
    ok = np.ones(k, bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for (i, j), (rlo, rhi) in zip(_PAIRS[s.ndim], s.ratios):
            tol = _FIT_TOL if rlo == rhi else 0.0
            r = side[:, i] / side[:, j]
            ok &= (r >= _F32(rlo * (1 - tol))) & (r <= _F32(rhi * (1 + tol)))
    rel = side / ext
    anchor = _unit(w_anchor) * (_F32(1) - rel)
    return anchor, rel, ok, anchor, rel


@dataclass
class _Pick:
    """The chosen window: relative anchor and shape, output anchor and shape (None: no crop)."""

    anchor: np.ndarray | None = None
    shape: np.ndarray | None = None
    out_anchor: np.ndarray | None = None
    out_shape: np.ndarray | None = None
    metric: float = -math.inf


def _search(op: str, s: _Setup, boxes: _Boxes, rng: Any, in_shape: np.ndarray | None,
            crop: np.ndarray | None, where: str) -> tuple[_Pick, bool]:
    """Rounds of attempts as described in the module docstring; ``(window, found)``."""
    na, d = s.num_attempts, s.ndim
    n_opt = len(s.thresholds) + (s.allow_no_crop and crop is None)
    best, count, block = _Pick(), 0, _FIRST_BLOCK
    while True:
        rounds = max(1, -(-block // na))
        words = rng.draw_words(rounds * (1 + 2 * d * na))
        choice = _bounded(words[:rounds], n_opt)
        att = words[rounds:].reshape(rounds * na, 2, d)
        anchor, shape, ok, out_a, out_s = _windows(s, att[:, 0], att[:, 1], in_shape, crop)
        inter = boxes.inter(anchor, anchor + shape)
        metric = boxes.metric(s, shape, inter)
        no_crop = choice == len(s.thresholds)
        thr = s.thresholds[np.minimum(choice, len(s.thresholds) - 1)]
        if len(boxes):
            meets = boxes.kept(s, anchor, anchor + shape, inter).any(axis=1) & (metric >= np.repeat(thr, na))
        else:  # no boxes: any valid window
            meets = np.ones(len(ok), bool)
        cropping = ~no_crop
        start = count + (np.cumsum(cropping) - cropping) * na  # attempts made before each round
        reached = start < s.total
        index = start[:, None] + np.arange(na)
        valid = (cropping[:, None] & (index < s.total)).reshape(-1) & ok
        good = (valid & meets).reshape(rounds, na)
        done = reached & (no_crop | good.any(axis=1))
        last = int(np.argmax(done)) if done.any() else rounds
        tried = valid.reshape(rounds, na)[:last].reshape(-1)
        if tried.any():
            k = int(np.argmax(np.where(tried, metric[:last * na], -np.inf)))
            if metric[k] > best.metric:
                best = _Pick(anchor[k], shape[k], out_a[k], out_s[k], float(metric[k]))
        if last < rounds:
            if no_crop[last]:
                return _Pick(), True
            k = last * na + int(np.argmax(good[last]))
            return _Pick(anchor[k], shape[k], out_a[k], out_s[k], float(metric[k])), True
        count = min(count + int(cropping.sum()) * na, s.total)
        if count >= s.total:
            return best, False
        if count >= _MAX_ATTEMPTS:
            raise ValueError(
                f"Operator `{op}`: no crop window met the constraints for {where} in {count} attempts "
                "(DALI would loop forever); set total_num_attempts to use the best window found, "
                "or relax thresholds, scaling, aspect_ratio or crop_shape")
        block = min(2 * block, _MAX_BLOCK)


def _sample(op: str, s: _Setup, raw: np.ndarray, rng: Any, in_shape: np.ndarray | None,
            crop: np.ndarray | None, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One sample: (anchor, shape, kept boxes, kept indices)."""
    d = s.ndim
    lo = raw[:, s.starts]
    hi = raw[:, s.ends] + lo if s.sizes else raw[:, s.ends]
    bad = ~(np.all(lo >= 0, axis=1) & np.all(hi <= 1, axis=1))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"Operator `{op}`: box {k} of {where} ({raw[k].tolist()}) is outside [0, 1]: boxes are "
                         "relative coordinates")
    boxes = _Boxes(lo, hi)
    pick, found = _search(op, s, boxes, rng, in_shape, crop, where)
    if not found and not s.quiet:
        warnings.warn(f"Operator `{op}`: no crop window met the constraints for {where} in "
                      f"{int(s.total)} attempts; using the best one (metric {max(pick.metric, 0.0):.6g})",
                      UserWarning, stacklevel=2)
    if found and pick.anchor is None:  # no crop
        return np.zeros(d, _F32), np.ones(d, _F32), raw.copy(), np.arange(len(raw), dtype=np.int32)
    if pick.anchor is None:  # no valid attempt at all
        return np.zeros(d, _F32), np.zeros(d, _F32), np.zeros((0, 2 * d), _F32), np.zeros(0, np.int32)
    a, e = pick.anchor[None], (pick.anchor + pick.shape)[None]
    idx = np.flatnonzero(boxes.kept(s, a, e, boxes.inter(a, e))[0]).astype(np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        new_lo = (np.clip(lo[idx], a, e) - a) / pick.shape
        new_hi = (np.clip(hi[idx], a, e) - a) / pick.shape
    out = np.empty((len(idx), 2 * d), _F32)
    out[:, s.starts] = new_lo
    out[:, s.ends] = new_hi - new_lo if s.sizes else new_hi
    return np.array(pick.out_anchor, _F32), np.array(pick.out_shape, _F32), out, idx


def random_bbox_crop_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Pick each sample's window and crop its boxes (see the module docstring)."""
    from ndd.random import RNG

    op = ctx.op
    boxes_bd = inputs[0]
    labels_bd = inputs[1] if len(inputs) > 1 else None
    n = ctx.batch_size
    shapes = boxes_bd.shapes()
    ncoords = shapes[0][1] if n else 4
    for i, sh in enumerate(shapes):
        if sh[1] not in (4, 6):
            raise ValueError(f"Operator `{op}`: boxes must have 4 (2-D) or 6 (3-D) coordinates, got {sh[1]} "
                             f"({sample_name(ctx, boxes_bd, i)})")
        if sh[1] != ncoords:
            raise ValueError(f"Operator `{op}`: every sample's boxes must have {ncoords} coordinates, got "
                             f"{sh[1]} ({sample_name(ctx, boxes_bd, i)})")
    s = _setup(op, args, ncoords)
    seeds = RNG.from_words(ctx.random_state).draw_words(7 * n).reshape(n, 7)
    anchors, crop_shapes, out_boxes, out_labels, out_idx = [], [], [], [], []
    for i in range(n):
        where = sample_name(ctx, boxes_bd, i)
        raw = np.asarray(boxes_bd.sample(i))
        labels = None if labels_bd is None else np.asarray(labels_bd.sample(i))
        if labels is not None and labels.shape[0] != len(raw):
            raise ValueError(f"Operator `{op}`: 'labels' has {labels.shape[0]} rows but 'boxes' has "
                             f"{len(raw)} boxes ({where})")
        in_shape = _shape_arg(op, args, "input_shape", i, s, where)
        crop = _shape_arg(op, args, "crop_shape", i, s, where)
        a, sh, b, idx = _sample(op, s, raw, RNG.from_words(seeds[i]), in_shape, crop, where)
        anchors.append(a)
        crop_shapes.append(sh)
        out_boxes.append(b)
        out_idx.append(idx)
        if labels is not None:
            out_labels.append(labels[idx])
    outs: list[Any] = [np.stack(anchors) if n else [], np.stack(crop_shapes) if n else [], out_boxes]
    if labels_bd is not None:
        outs.append(out_labels)
    if args["output_bbox_indices"]:
        outs.append(out_idx)
    return tuple(outs)
