"""Segmentation helpers (CPU): ``segmentation.select_masks``, ``roi_random_crop``,
``random_crop_generator``, ``segmentation.random_mask_pixel`` and
``segmentation.random_object_bbox``.

Draw patterns (``RNG.from_words(ctx.random_state)``, the call's stream):

* ``roi_random_crop``: one word per sample and dimension, in sample order.
* ``random_crop_generator``: 4 words per attempt (at least one attempt) per sample, as
  ``random_resized_crop`` (``ndd.plugins.random_windows``).
* ``random_mask_pixel``: ``1 + ndim`` words per sample: the first picks the foreground
  element, the others the coordinates of a uniform pick (used when there is no pick
  among the foreground).
* ``random_object_bbox``: 7 words per sample seed the sample's own generator, which draws
  2 words for the foreground coin, then for each class tried 2 words (the class) and 1
  word (the box); with ``ignore_class`` 1 word (the box).

Objects are face-connected blobs (4-connected in 2-D, 6 in 3-D) of equal labels. A blob's
place in the list of boxes is that of its first element in C order, which decides ties of
``k_largest``.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext, random_windows, random_words
from ndd.random._philox import bounded_int, to_unit_float64

from ._common import batch_nbytes, map_samples, sample_name

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def _stream(ctx: KernelContext, n: int) -> np.ndarray:
    from ndd.random import RNG

    return RNG.from_words(ctx.random_state).draw_words(n)


# -- segmentation.select_masks ----------------------------------------------------------


def _select_one(op: str, where: str, ids: np.ndarray, polys: np.ndarray, verts: np.ndarray,
                reindex: bool) -> tuple[np.ndarray, np.ndarray]:
    if polys.shape[1] != 3:
        raise ValueError(f"Operator `{op}`: 'polygons' must have 3 columns (mask_id, start, end), got "
                         f"{polys.shape[1]} ({where})")
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"Operator `{op}`: 'mask_ids' must not repeat a value, got {int(uniq[counts > 1][0])} "
                         f"more than once ({where})")
    rows = np.flatnonzero(np.isin(polys[:, 0], ids))
    start, end = polys[rows, 1], polys[rows, 2]
    nv = len(verts)
    bad = np.flatnonzero((start < 0) | (end > nv) | (end < start))
    if bad.size:
        k = rows[bad[0]]
        raise ValueError(f"Operator `{op}`: polygon {k} of mask id {polys[k, 0]} has the vertex range "
                         f"[{polys[k, 1]}, {polys[k, 2]}), which is not a range within the {nv} vertices ({where})")
    last = dict(zip(polys[rows, 0].tolist(), rows.tolist()))  # as DALI 2.4: the last polygon of each mask
    out_polys = np.empty((len(ids), 3), np.int32)
    parts, offset = [], 0
    for j, m in enumerate(ids.tolist()):
        k = last.get(m)
        if k is None:
            raise ValueError(f"Operator `{op}`: mask id {m} of 'mask_ids' is not in 'polygons' ({where})")
        s, e = int(polys[k, 1]), int(polys[k, 2])
        out_polys[j] = (j if reindex else m, offset, offset + e - s)
        parts.append(verts[s:e])
        offset += e - s
    out_verts = np.concatenate(parts) if parts else verts[:0]
    return out_polys, np.ascontiguousarray(out_verts)


def select_masks_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Keep the selected masks' polygons (in ``mask_ids`` order) and their vertices."""
    ids_bd, polys_bd, verts_bd = inputs
    out_p, out_v = [], []
    for i in range(ctx.batch_size):
        p, v = _select_one(ctx.op, sample_name(ctx, polys_bd, i), np.asarray(ids_bd.sample(i)),
                           np.asarray(polys_bd.sample(i)), np.asarray(verts_bd.sample(i)), args["reindex_masks"])
        out_p.append(p)
        out_v.append(v)
    return out_p, out_v


# -- roi_random_crop ------------------------------------------------------------------------


def _vec(op: str, args: KernelArgs, name: str, i: int, d: int | None, where: str) -> np.ndarray | None:
    v = args.sample(name, i)
    if v is None:
        return None
    a = np.asarray(v, np.int64).reshape(-1)
    if d is not None and a.size != d:
        raise ValueError(f"Operator `{op}`: argument '{name}' must have {d} values (one per dimension), got "
                         f"{a.tolist()} ({where})")
    return a


def roi_random_crop_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each sample's crop start: per dimension uniform in the starts that keep the window inside
    the ROI (window smaller) or the ROI inside the window (window larger), clipped to the input
    (``in_shape``, or the input's leading dimensions)."""
    op, n = ctx.op, ctx.batch_size
    data = inputs[0] if inputs else None
    d = _vec(op, args, "crop_shape", 0, None, "sample 0").size if n else 0
    lo, hi = np.zeros((n, d), np.int64), np.zeros((n, d), np.int64)
    for i in range(n):
        where = sample_name(ctx, data, i) if data is not None else f"sample {i}"
        crop = _vec(op, args, "crop_shape", i, d, where)
        start = _vec(op, args, "roi_start", i, d, where)
        end = _vec(op, args, "roi_end", i, d, where)
        end = start + _vec(op, args, "roi_shape", i, d, where) if end is None else end
        shape = _vec(op, args, "in_shape", i, d, where)
        if data is not None:  # its leading dimensions, as DALI (a 2-D window of an HWC image)
            shape = np.asarray(data.shapes()[i], np.int64)
            if shape.size < d:
                raise ValueError(f"Operator `{op}`: the input has {shape.size} dimensions but 'crop_shape' has "
                                 f"{d} values ({where})")
            shape = shape[:d]
        if (crop < 0).any():
            raise ValueError(f"Operator `{op}`: argument 'crop_shape' must be non-negative, got {crop.tolist()} "
                             f"({where})")
        if (end < start).any():
            raise ValueError(f"Operator `{op}`: the ROI [{start.tolist()}, {end.tolist()}) has a negative extent "
                             f"({where})")
        if shape is not None:
            if (crop > shape).any():
                raise ValueError(f"Operator `{op}`: 'crop_shape' {crop.tolist()} is larger than the input shape "
                                 f"{shape.tolist()} ({where})")
            if (start < 0).any() or (end > shape).any():
                raise ValueError(f"Operator `{op}`: the ROI [{start.tolist()}, {end.tolist()}) is outside the "
                                 f"input shape {shape.tolist()} ({where})")
        inside = end - start >= crop  # the window fits in the ROI: it moves inside it
        lo[i] = np.where(inside, start, end - crop)
        hi[i] = np.where(inside, end - crop, start)
        if shape is not None:
            lo[i], hi[i] = np.maximum(lo[i], 0), np.minimum(hi[i], shape - crop)
    span = hi - lo + 1
    if (span > 2**32).any():
        raise ValueError(f"Operator `{op}`: a range of crop starts is wider than 2**32")
    words = _stream(ctx, n * d).reshape(n, d)
    return lo + bounded_int(words, span)


# -- random_crop_generator ------------------------------------------------------------------


def random_crop_generator_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each sample's window (anchor and shape, (y, x)), drawn as ``random_resized_crop`` draws it;
    a shape with a zero extent gives an empty window at 0."""
    op, bd, n = ctx.op, inputs[0], ctx.batch_size
    hw = np.zeros((n, 2), np.int64)
    for i, sh in enumerate(bd.shapes()):
        v = np.asarray(bd.sample(i))
        if sh[0] not in (2, 3) or (v < 0).any():
            raise ValueError(f"Operator `{op}`: the input must hold 2 or 3 non-negative values (HW or HWC), "
                             f"got {v.tolist()} ({sample_name(ctx, bd, i)})")
        hw[i] = v[:2]
    empty = (hw == 0).any(axis=1)
    area, ratio = args["random_area"], args["random_aspect_ratio"]
    wargs = {"random_area": (area[0], area[-1]), "random_aspect_ratio": (ratio[0], ratio[-1])}
    tries = args["num_attempts"]
    shapes = [(1, 1) if e else (int(h), int(w)) for e, (h, w) in zip(empty, hw)]
    wins = random_windows(random_words(ctx, n, max(tries, 1)), shapes, wargs, tries)
    anchor = np.array([a for a, _ in wins], np.int32).reshape(n, 2)
    shape = np.array([s for _, s in wins], np.int32).reshape(n, 2)
    anchor[empty] = 0
    shape[empty] = 0
    return anchor, shape


# -- segmentation.random_mask_pixel --------------------------------------------------------

_EXACT_F32 = frozenset(map(np.dtype, (np.float32, np.uint8, np.int8, np.uint16, np.int16, np.bool_)))


def _foreground(x: np.ndarray, value: Any, threshold: Any) -> np.ndarray | None:
    """The foreground elements: equal to ``value`` (None when it is not a value of the type, as
    DALI), or above ``threshold`` compared in float32."""
    if value is not None:
        v = int(value)
        t = np.array(v).astype(x.dtype)
        return x == t if int(t) == v else None
    thr = np.float32(0.0 if threshold is None else threshold)
    return (x if x.dtype in _EXACT_F32 else x.astype(np.float32)) > thr


def random_mask_pixel_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each sample's coordinates: a uniform foreground element, else a uniform element."""
    op, bd, n = ctx.op, inputs[0], ctx.batch_size
    shapes = bd.shapes()
    d = len(shapes[0]) if n else 1
    words = _stream(ctx, n * (1 + d)).reshape(n, 1 + d)
    out = np.empty((n, d), np.int64)
    for i in range(n):
        x = np.asarray(bd.sample(i))
        if x.size == 0:
            raise ValueError(f"Operator `{op}`: the mask is empty (shape {x.shape}) ({sample_name(ctx, bd, i)})")
        if args.sample("foreground", i):
            fg = _foreground(x, args.sample("value", i), args.sample("threshold", i))
            count = 0 if fg is None else int(np.count_nonzero(fg))
            if count:
                k = int(bounded_int(words[i, 0], count))
                out[i] = np.unravel_index(np.flatnonzero(fg)[k], x.shape)
                continue
        out[i] = bounded_int(words[i, 1:], np.asarray(x.shape, np.int64))
    return out


# -- segmentation.random_object_bbox -----------------------------------------------------


def _union_roots(pairs: np.ndarray, count: int) -> np.ndarray:
    """Each of ``count`` parts' component root, given the (k, 2) pairs of parts that touch."""
    parent = np.arange(count)
    u, v = pairs[:, 0], pairs[:, 1]
    while True:
        pu, pv = parent[u], parent[v]
        if (pu == pv).all():
            return parent
        m = np.minimum(pu, pv)
        np.minimum.at(parent, pu, m)
        np.minimum.at(parent, pv, m)
        while True:  # point every part at its root
            nxt = parent[parent]
            if (nxt == parent).all():
                break
            parent = nxt


def components(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Face-connected blobs of a boolean mask (1 to 6 dimensions): their boxes' starts and ends
    (k, ndim) and first elements (flat C-order index), ordered by first element.

    2-D slices (the last two axes) are labelled by OpenCV; blobs of neighbouring slices that
    share an element are then merged.
    """
    nd = mask.ndim
    shape = mask.shape if nd >= 2 else (1, *mask.shape)
    lead, (H, W) = shape[:-2], shape[-2:]
    S = int(np.prod(lead, dtype=np.int64))
    if mask.size == 0:
        z = np.zeros((0, nd), np.int64)
        return z, z, np.zeros(0, np.int64)
    m = np.ascontiguousarray(mask.reshape(S, H, W), np.uint8)
    labels = np.zeros((S, H, W), np.int32) if S > 1 else None
    boxes, firsts, slices, off = [], [], [], 0
    for s in range(S):
        k, lab, stats, _ = cv2.connectedComponentsWithStats(m[s], connectivity=4, ltype=cv2.CV_32S)
        if k <= 1:
            continue
        nz = np.flatnonzero(lab)[::-1]
        first = np.empty(k, np.int64)
        first[lab.reshape(-1)[nz]] = nz  # written last to first: each label keeps its first element
        firsts.append(first[1:] + s * H * W)
        boxes.append(stats[1:, :4])
        slices.append(np.full(k - 1, s))
        if labels is not None:
            np.add(lab, off, out=labels[s], where=lab > 0)
        off += k - 1
    if not off:
        z = np.zeros((0, nd), np.int64)
        return z, z, np.zeros(0, np.int64)
    box = np.concatenate(boxes).astype(np.int64)  # left, top, width, height
    first = np.concatenate(firsts).astype(np.int64)
    idx = np.stack(np.unravel_index(np.concatenate(slices), lead), axis=1) if lead else np.zeros((off, 0), np.int64)
    lo = np.concatenate([idx, box[:, 1:2], box[:, 0:1]], axis=1)
    hi = np.concatenate([idx + 1, box[:, 1:2] + box[:, 3:4], box[:, 0:1] + box[:, 2:3]], axis=1)
    if labels is not None:
        g = labels.reshape(*lead, H, W)
        keys = []  # touching parts (u, v) as one number u * off + v, to drop repeats fast
        for a in range(len(lead)):
            x0 = g[(slice(None),) * a + (slice(None, -1),)]
            x1 = g[(slice(None),) * a + (slice(1, None),)]
            both = (x0 > 0) & (x1 > 0)
            keys.append((x0[both].astype(np.int64) - 1) * off + (x1[both] - 1))
        key = np.unique(np.concatenate(keys))
        p = np.stack([key // off, key % off], axis=1)
        _, comp = np.unique(_union_roots(p, off), return_inverse=True)
        c = int(comp.max()) + 1
        big = np.iinfo(np.int64).max
        lo2, hi2, f2 = np.full((c, lo.shape[1]), big), np.full((c, lo.shape[1]), -1), np.full(c, big)
        np.minimum.at(lo2, comp, lo)
        np.maximum.at(hi2, comp, hi)
        np.minimum.at(f2, comp, first)
        lo, hi, first = lo2, hi2, f2
    order = np.argsort(first, kind="stable")
    lo, hi, first = lo[order], hi[order], first[order]
    if nd == 1:
        lo, hi = lo[:, 1:], hi[:, 1:]
    return lo, hi, first


def _pick_box(lo: np.ndarray, hi: np.ndarray, threshold: np.ndarray | None, k_largest: int | None,
              rng: Any) -> int | None:
    """DALI's choice among boxes: those at least ``threshold`` in every extent, then the
    ``k_largest`` by volume (ties: the earlier box), then a uniform pick; None when none is left."""
    keep = np.arange(len(lo))
    if threshold is not None:
        keep = keep[np.all(hi - lo >= threshold, axis=1)]
    n = len(keep)
    if n == 0:
        return None
    if k_largest is not None and k_largest < n:
        vol = np.prod(hi[keep] - lo[keep], axis=1)
        keep, n = keep[np.argsort(-vol, kind="stable")][:k_largest], k_largest
    return int(keep[int(bounded_int(rng.draw_words(1)[0], n))])


def _labels_in(x: np.ndarray) -> np.ndarray:
    """The distinct labels of a label map (int64, sorted)."""
    if x.dtype.itemsize <= 2:
        v = x.reshape(-1).astype(np.int32)
        mn = int(v.min())
        return np.flatnonzero(np.bincount(v - mn)) + mn
    return np.unique(x).astype(np.int64)


def _class_info(op: str, args: KernelArgs, i: int, where: str) -> tuple[int, list[int] | None, list[float] | None]:
    """Background, classes and weights of sample ``i`` as DALI resolves them (None: not given)."""
    bg_arg = args.sample("background", i)
    bg = 0 if bg_arg is None else int(bg_arg)
    if args["ignore_class"]:
        return bg, None, None
    cls = args.sample("classes", i)
    w = args.sample("class_weights", i)
    cls = None if cls is None else [int(c) for c in np.ravel(cls)]
    w = None if w is None else [float(v) for v in np.ravel(w)]
    if w is not None and any(v < 0 for v in w):
        raise ValueError(f"Operator `{op}`: argument 'class_weights' must be non-negative, got {w} ({where})")
    if cls is not None:
        if w is not None and len(w) != len(cls):
            raise ValueError(f"Operator `{op}`: argument 'class_weights' must have one value per class: "
                             f"{len(cls)} classes, {len(w)} weights ({where})")
        if bg in cls:
            if bg_arg is not None:
                raise ValueError(f"Operator `{op}`: class {bg} of 'classes' is the background label; give "
                                 f"another 'background' or drop it from 'classes' ({where})")
            bg = min(cls) - 1
            if bg < _I32_MIN:  # as DALI: the largest int32 not among the classes
                bg = _I32_MAX
                while bg in cls:
                    bg -= 1
    elif w is not None:  # consecutive labels from 0, skipping the background
        cls, c = [], 0
        for _ in w:
            c += c == bg
            cls.append(c)
            c += 1
    if cls is not None and w is None:
        w = [1.0] * len(cls)
    return bg, cls, w


def _object_box(op: str, x: np.ndarray, args: KernelArgs, i: int, rng: Any,
                where: str) -> tuple[np.ndarray, np.ndarray, int]:
    """One sample: (start, end, label) of the picked box, or the whole input and the background."""
    bg, cls, w = _class_info(op, args, i, where)
    full = (np.zeros(x.ndim, np.int64), np.asarray(x.shape, np.int64), bg)
    thr = args.sample("threshold", i)
    if thr is not None:
        thr = np.asarray(thr, np.int64).reshape(-1)
        if thr.size != x.ndim:
            raise ValueError(f"Operator `{op}`: argument 'threshold' must have {x.ndim} values (one per "
                             f"dimension), got {thr.tolist()} ({where})")
    k = args["k_largest"]
    u = to_unit_float64(*rng.draw_words(2))
    if not u < np.float32(args.sample("foreground_prob", i)) or x.size == 0:
        return full
    present = [int(v) for v in _labels_in(x) if v != bg]
    if args["ignore_class"]:
        parts = [components(x == v) for v in present]
        if not parts:
            return full
        lo, hi, first = (np.concatenate(p) for p in zip(*parts))
        order = np.argsort(first, kind="stable")
        b = _pick_box(lo[order], hi[order], thr, k, rng)
        return full if b is None else (lo[order][b], hi[order][b], bg)
    if cls is None:
        cls, w = present, [1.0] * len(present)
    else:
        w = [wi if c in present else 0.0 for c, wi in zip(cls, w)]
    weights = np.asarray(w, np.float64)
    while weights.sum() > 0:  # pick a class as DALI: a float32 CDF, the first non-zero weight at or after
        cdf = np.cumsum(weights).astype(np.float32)
        pos = to_unit_float64(*rng.draw_words(2)) * float(cdf[-1])
        j = int(np.searchsorted(cdf, pos, side="left"))
        while j < len(cls) and weights[j] == 0:
            j += 1
        if j >= len(cls):
            return full
        lo, hi, _ = components(x == cls[j])
        b = _pick_box(lo, hi, thr, k, rng)
        if b is not None:
            return lo[b], hi[b], cls[j]
        weights[j] = 0
    return full


def random_object_bbox_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each sample's box in the requested format (and label), as the module docstring says."""
    from ndd.random import RNG

    op, bd, n = ctx.op, inputs[0], ctx.batch_size
    seeds = _stream(ctx, 7 * n).reshape(n, 7)
    d = len(bd.shapes()[0]) if n else 1
    starts, ends = np.zeros((n, d), np.int64), np.zeros((n, d), np.int64)
    labels = np.zeros(n, np.int32)

    def one(i: int) -> None:
        starts[i], ends[i], labels[i] = _object_box(op, np.asarray(bd.sample(i)), args, i,
                                                    RNG.from_words(seeds[i]), sample_name(ctx, bd, i))

    map_samples(ctx, one, n, batch_nbytes(bd.samples) if bd.dense is None else bd.dense.nbytes)
    fmt = args["format"]
    if fmt == "box":
        out: list[Any] = [np.concatenate([starts, ends], axis=1).astype(np.int32)]
    elif fmt == "start_end":
        out = [starts.astype(np.int32), ends.astype(np.int32)]
    else:
        out = [starts.astype(np.int32), (ends - starts).astype(np.int32)]
    if args["output_class"]:
        out.append(labels)
    return tuple(out)
