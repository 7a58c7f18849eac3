"""random_bbox_crop (CPU): every rule checked on many seeds and random box sets against a
NumPy reference; the draw pattern, determinism, layouts, errors and facts observed from DALI
2.4 (as literals). A captured COCO loop is in tests/test_detection_pipeline.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from ops_cpu_helpers import as_np, raises

import ndd

F32 = np.float32
OP = r"Operator `random_bbox_crop`"


def crop(*inputs, **kw):
    """The call's outputs as NumPy: arrays for a Tensor input, lists for a Batch."""
    return [as_np(o) for o in ndd.random_bbox_crop(*inputs, **kw)]


# -- the reference ---------------------------------------------------------------------


def corners(b: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    d = len(layout) // 2
    lo = b[:, [layout.index(c) for c in "xyz"[:d]]]
    if "X" in layout:
        return lo, b[:, [layout.index(c) for c in "XYZ"[:d]]]
    return lo, lo + b[:, [layout.index(c) for c in "WHD"[:d]]]


def fprod(x: np.ndarray) -> np.ndarray:
    out = x[..., 0]
    for k in range(1, x.shape[-1]):
        out = out * x[..., k]
    return out


def reference(b: np.ndarray, layout: str, a: np.ndarray, s: np.ndarray, prune: float | None):
    """Kept indices and boxes by the prune rule, in float32: centre in [a, a + s), or
    intersection > 0 and intersection / area >= prune; kept boxes clipped to the window
    and made relative to it, in the input layout."""
    d = len(a)
    lo, hi = corners(b, layout)
    e = a + s
    if prune is None:
        c = (lo + hi) * F32(0.5)
        keep = np.all((a <= c) & (c < e), axis=1)
    else:
        inter = fprod(np.maximum(np.minimum(hi, e) - np.maximum(lo, a), F32(0)))
        area = fprod(np.maximum(hi - lo, F32(0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(area > 0, inter / area, F32(0))
        keep = (inter > 0) & (frac >= F32(prune))
    idx = np.flatnonzero(keep)
    nlo = (np.clip(lo[idx], a, e) - a) / s
    nhi = (np.clip(hi[idx], a, e) - a) / s
    out = np.empty((len(idx), 2 * d), F32)
    out[:, [layout.index(c) for c in "xyz"[:d]]] = nlo
    if "X" in layout:
        out[:, [layout.index(c) for c in "XYZ"[:d]]] = nhi
    else:
        out[:, [layout.index(c) for c in "WHD"[:d]]] = nhi - nlo
    return idx, out


def metrics(b: np.ndarray, layout: str, a: np.ndarray, s: np.ndarray, kind: str) -> np.ndarray:
    """Each box's IoU with the window, or overlap (intersection / box area), in float64."""
    lo, hi = (x.astype(np.float64) for x in corners(b, layout))
    a, s = a.astype(np.float64), s.astype(np.float64)
    inter = np.prod(np.clip(np.minimum(hi, a + s) - np.maximum(lo, a), 0, None), axis=1)
    area = np.prod(np.clip(hi - lo, 0, None), axis=1)
    den = area + np.prod(s) - inter if kind == "iou" else area
    return np.where(den > 0, inter / np.where(den > 0, den, 1), 0.0)


def random_boxes(r: np.random.Generator, n: int, layout: str, sides: tuple = (0.05, 0.6)) -> np.ndarray:
    """``n`` boxes inside the image, each side uniform in ``sides``."""
    d = len(layout) // 2
    size = r.uniform(*sides, (n, d))
    lo = r.uniform(0, 1, (n, d)) * (1 - size)
    hi = lo + size
    out = np.empty((n, 2 * d), F32)
    out[:, [layout.index(c) for c in "xyz"[:d]]] = lo
    if "X" in layout:
        out[:, [layout.index(c) for c in "XYZ"[:d]]] = hi
    else:
        out[:, [layout.index(c) for c in "WHD"[:d]]] = hi - lo
    return out


def pairs(ndim: int, aspect) -> list[tuple[int, int, float, float]]:
    ar = aspect or (1.0, 1.0)
    ij = [(0, 1)] if ndim == 2 else [(0, 1), (0, 2), (1, 2)]
    rng = [(ar[0], ar[1])] * len(ij) if len(ar) == 2 else [(ar[0], ar[1]), (ar[2], ar[3]), (ar[4], ar[5])]
    return [(i, j, lo, hi) for (i, j), (lo, hi) in zip(ij, rng)]


def check_window(a: np.ndarray, s: np.ndarray, kw: dict) -> None:
    """Aspect ratios in range (absolute with input_shape) and sides in ``scaling``; a pair
    with a fixed ratio keeps the longer side, so the longest side is a drawn scale."""
    d = len(a)
    ext = np.asarray(kw.get("input_shape", [1] * d), np.float64)
    side = s.astype(np.float64) * ext
    prs = pairs(d, kw.get("aspect_ratio"))
    for i, j, lo, hi in prs:
        assert lo * (1 - 1e-5) <= side[i] / side[j] <= hi * (1 + 1e-5), (s, kw)
    smin, smax = kw.get("scaling", (1.0, 1.0))
    if all(lo == hi for *_, lo, hi in prs):
        assert any(smin - 1e-6 <= side.max() / e <= smax + 1e-6 for e in ext), (s, kw)
    else:
        assert np.all((smin - 1e-6 <= s) & (s <= smax + 1e-6)), (s, kw)
    assert np.all(a >= 0) and np.all(a + s <= 1 + 1e-6), (a, s)


# -- every rule, many seeds ------------------------------------------------------------

CONFIGS = [
    # (layout, boxes per sample, arguments). Sides of 0.3 or more make "every box" feasible.
    ("xyXY", 2, dict(scaling=(0.3, 1.0), aspect_ratio=(0.5, 2.0), thresholds=[0.05]), (0.3, 0.6)),
    ("xyXY", 10, dict(scaling=(0.1, 1.0), aspect_ratio=(0.5, 2.0), thresholds=[0.5],
                      all_boxes_above_threshold=False), (0.05, 0.6)),
    ("xyXY", 3, dict(scaling=(0.2, 1.0), aspect_ratio=(0.5, 2.0), thresholds=[0.5], threshold_type="overlap",
                     bbox_prune_threshold=0.3), (0.05, 0.6)),
    ("xyXY", 8, dict(scaling=(0.2, 0.9), aspect_ratio=(0.7, 1.4), thresholds=[0.9], threshold_type="overlap",
                     all_boxes_above_threshold=False, bbox_prune_threshold=0.0), (0.05, 0.6)),
    ("xyXY", 6, dict(scaling=(0.3, 1.0), aspect_ratio=(0.5, 2.0), thresholds=[0.2], input_shape=[640, 480],
                     all_boxes_above_threshold=False, bbox_prune_threshold=1.0), (0.2, 0.6)),
    ("xyXY", 4, dict(scaling=(0.1, 1.0), thresholds=[0.0, 0.1, 0.3]), (0.05, 0.6)),  # fixed ratio 1 (default)
    ("xyXY", 4, dict(scaling=(0.2, 1.0), aspect_ratio=(4 / 3, 4 / 3), input_shape=[640, 480], thresholds=[0.2],
                     all_boxes_above_threshold=False), (0.05, 0.6)),
    ("xyWH", 5, dict(scaling=(0.3, 1.0), aspect_ratio=(0.5, 2.0), thresholds=[0.2],
                     all_boxes_above_threshold=False, num_attempts=7), (0.05, 0.6)),
    ("yxYX", 5, dict(scaling=(0.3, 1.0), aspect_ratio=(0.5, 2.0), thresholds=[0.4], threshold_type="overlap",
                     all_boxes_above_threshold=False, bbox_prune_threshold=0.5, total_num_attempts=-1),
     (0.05, 0.6)),
    ("xyzXYZ", 2, dict(scaling=(0.3, 1.0), aspect_ratio=(0.5, 2.0), thresholds=[0.02]), (0.3, 0.6)),
    ("xyzWHD", 4, dict(scaling=(0.2, 1.0), aspect_ratio=(0.25, 4.0), thresholds=[0.05],
                       all_boxes_above_threshold=False, input_shape=[100, 200, 50], shape_layout="WHD"),
     (0.2, 0.6)),
    ("xyzXYZ", 3, dict(scaling=(0.2, 1.0), aspect_ratio=(2, 2, 2, 2, 1, 1), thresholds=[0.5],
                       threshold_type="overlap", all_boxes_above_threshold=False), (0.05, 0.6)),
]


@pytest.mark.parametrize("layout,nbox,kw,sides", CONFIGS, ids=[f"cfg{i}" for i in range(len(CONFIGS))])
def test_every_rule_holds(layout, nbox, kw, sides):
    r = np.random.default_rng(len(layout) * 100 + nbox)
    kind = kw.get("threshold_type", "iou")
    agg = np.min if kw.get("all_boxes_above_threshold", True) else np.max
    args = dict(kw, allow_no_crop=False, output_bbox_indices=True)
    if layout not in ("xyXY", "xyzXYZ"):
        args["bbox_layout"] = layout
    for seed in range(6):
        boxes = [random_boxes(r, int(r.integers(1, nbox + 1)), layout, sides) for _ in range(16)]
        labels = [r.integers(0, 100, (len(b), 2)).astype(np.int32) for b in boxes]
        A, S, B, L, idx = crop(ndd.as_batch(boxes), ndd.as_batch(labels), rng=ndd.random.RNG(seed), **args)
        for i in range(16):
            a, s = A[i], S[i]
            assert a.dtype == s.dtype == B[i].dtype == F32 and L[i].dtype == idx[i].dtype == np.int32
            check_window(a, s, kw)
            assert agg(metrics(boxes[i], layout, a, s, kind)) >= min(kw["thresholds"]) - 1e-6
            ref_idx, ref_boxes = reference(boxes[i], layout, a, s, kw.get("bbox_prune_threshold"))
            assert len(ref_idx) >= 1  # a window is only taken when it keeps a box
            np.testing.assert_array_equal(idx[i], ref_idx)
            np.testing.assert_array_equal(B[i], ref_boxes)
            np.testing.assert_array_equal(L[i], labels[i][ref_idx])


def test_every_rule_holds_with_crop_shape():
    r = np.random.default_rng(3)
    for seed in range(6):
        boxes = [random_boxes(r, int(r.integers(1, 6)), "xyXY", (0.2, 0.6)) for _ in range(16)]
        ins = [np.array([r.integers(60, 400), r.integers(60, 400)], np.int32) for _ in range(16)]
        crops = [np.array([r.integers(x // 3, x + 1) for x in s], np.int32) for s in ins]
        A, S, B, idx = crop(ndd.as_batch(boxes), input_shape=ndd.as_batch(ins), crop_shape=ndd.as_batch(crops),
                            allow_no_crop=False, thresholds=[0.02], all_boxes_above_threshold=False,
                            output_bbox_indices=True, rng=ndd.random.RNG(seed))
        for i in range(16):
            a, s = A[i], S[i]
            np.testing.assert_array_equal(s, crops[i].astype(F32))  # absolute, as float32
            assert np.all(a == np.round(a)) and np.all(a >= 0) and np.all(a <= ins[i] - crops[i])
            a_rel, s_rel = a / ins[i].astype(F32), crops[i].astype(F32) / ins[i].astype(F32)
            assert metrics(boxes[i], "xyXY", a_rel, s_rel, "iou").max() >= 0.02 - 1e-6
            ref_idx, ref_boxes = reference(boxes[i], "xyXY", a_rel, s_rel, None)
            assert len(ref_idx) >= 1
            np.testing.assert_array_equal(idx[i], ref_idx)
            np.testing.assert_array_equal(B[i], ref_boxes)


def test_crop_shape_anchor_covers_its_range_and_larger_crops_go_negative():
    box = np.array([[0.0, 0.0, 1.0, 1.0]], F32)
    A, S, _ = crop(ndd.as_batch([box] * 512), input_shape=[20, 5], crop_shape=[16, 5], allow_no_crop=False,
                   rng=ndd.random.RNG(1))
    xs = {int(a[0]) for a in A}
    assert xs == set(range(5)) and {int(a[1]) for a in A} == {0}
    # Observed from DALI 2.4: a crop_shape wider than input_shape gives a negative anchor
    # (crop 200 of 100: x = -9).
    A, S, _ = crop(ndd.as_batch([box] * 256), input_shape=[100, 100], crop_shape=[200, 10], allow_no_crop=False,
                   rng=ndd.random.RNG(2))
    xs = np.array([a[0] for a in A])
    assert xs.min() >= -100 and xs.max() <= 0 and xs.min() < -50


def test_sides_are_drawn_per_dimension_with_rejection():
    """Scales are drawn per side and a window whose ratio is out of range is void: with the
    ratio range [0.5, 2] the side means match that model (DALI 2.4 gave w 0.653, h 0.652)."""
    g = np.linspace(0.0, 0.98, 50)
    xx, yy = np.meshgrid(g, g)
    grid = np.stack([xx.ravel(), yy.ravel(), xx.ravel() + 0.02, yy.ravel() + 0.02], 1).astype(F32)
    _, S, _ = crop(ndd.as_batch([grid] * 1024), scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], allow_no_crop=False,
                   rng=ndd.random.RNG(4))
    S = np.array(S)
    assert abs(S[:, 0].mean() - 0.653) < 0.02 and abs(S[:, 1].mean() - 0.652) < 0.02
    assert (S[:, 0] / S[:, 1]).min() >= 0.5 and (S[:, 0] / S[:, 1]).max() <= 2.0


def test_fixed_ratio_with_input_shape_may_leave_the_image():
    """Observed from DALI 2.4: aspect_ratio [1, 1] with input_shape [400, 100] gives w = h / 4
    (square in pixels) with h up to 4 (beyond the image) and anchors below 0."""
    box = np.array([[0.0, 0.0, 1.0, 1.0]], F32)
    A, S, _ = crop(ndd.as_batch([box] * 256), scaling=[0.1, 1.0], input_shape=[400, 100], allow_no_crop=False,
                   rng=ndd.random.RNG(5))
    S, A = np.array(S), np.array(A)
    np.testing.assert_allclose(S[:, 0] * 400, S[:, 1] * 100, rtol=1e-5)
    assert S[:, 0].max() <= 1.0 and S[:, 1].max() > 2.0 and A[:, 1].min() < -1.0


def test_3d_fixed_ratios_chain_in_a_random_order():
    """Observed from DALI 2.4: fixed 3-D ratios are imposed one after another in a random
    order of the sides, then every side is scaled so the longest is a drawn scale. Two
    consistent fixed pairs (xz 1.5, yz 1.8) give windows; with xy fixed to 1 and xz, yz free
    the x side is as often below z as not (DALI: 0.49 of 400; keeping the longer of x and y
    would give 1/3)."""
    empty = ndd.as_batch([np.zeros((0, 6), F32)] * 400)
    A, S, _ = crop(empty, aspect_ratio=[0.5, 2.0, 1.5, 1.5, 1.8, 1.8], scaling=[0.3, 1.0], allow_no_crop=False,
                   total_num_attempts=50, quiet=True, rng=ndd.random.RNG(7))
    S = np.array(S)
    assert S.shape == (400, 3) and S.min() > 0
    np.testing.assert_allclose(S[:, 0] / S[:, 2], 1.5, rtol=1e-5)
    np.testing.assert_allclose(S[:, 1] / S[:, 2], 1.8, rtol=1e-5)
    assert np.all(S.max(axis=1) >= 0.3 - 1e-6) and np.all(S.max(axis=1) <= 1.0 + 1e-6)
    _, S, _ = crop(empty, aspect_ratio=[1, 1, 0.01, 100, 0.01, 100], scaling=[0.3, 1.0], allow_no_crop=False,
                   rng=ndd.random.RNG(3))
    S = np.array(S)
    np.testing.assert_allclose(S[:, 0], S[:, 1], rtol=1e-6)
    assert abs(np.mean(S[:, 0] < S[:, 2]) - 0.5) < 0.08


def test_crop_shape_turns_the_default_no_crop_off():
    """Observed from DALI 2.4: with crop_shape, allow_no_crop not given is off (only an
    explicit True is an error), so every window has the crop's shape."""
    box = np.array([[0.0, 0.0, 1.0, 1.0]], F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, S, B = crop(ndd.as_batch([box] * 256), input_shape=[64, 48], crop_shape=[20, 10], rng=ndd.random.RNG(8))
    np.testing.assert_array_equal(np.array(S), np.tile([20.0, 10.0], (256, 1)))


# -- choices, no crop, fallbacks --------------------------------------------------------

IMPOSSIBLE = np.array([[0.45, 0.45, 0.5, 0.5]], F32)  # IoU 0.99 cannot be met with scaling >= 0.3


def is_no_crop(a, s, b, boxes) -> bool:
    return bool(np.all(a == 0) and np.all(s == 1) and b.shape == boxes.shape and np.array_equal(b, boxes))


@pytest.mark.parametrize("na,total,expected", [
    # Observed from DALI 2.4 on 2048 samples: 0.506, 0.741, 0.877, 0.491, 0.739, 0.755, 0.871.
    (1, 1, 0.5), (1, 2, 0.75), (1, 3, 0.875), (2, 2, 0.5), (2, 3, 0.75), (2, 4, 0.75), (2, 5, 0.875),
])
def test_a_choice_per_round_of_num_attempts(na, total, expected):
    """Each round picks among thresholds and 'no crop'; a new round every num_attempts."""
    A, S, B = crop(ndd.as_batch([IMPOSSIBLE] * 1024), scaling=[0.3, 1.0], thresholds=[0.99], num_attempts=na,
                   total_num_attempts=total, quiet=True, rng=ndd.random.RNG(na * 10 + total))
    frac = np.mean([is_no_crop(a, s, b, IMPOSSIBLE) for a, s, b in zip(A, S, B)])
    assert abs(frac - expected) < 0.05


def test_no_crop_is_one_more_choice_and_keeps_the_boxes_as_given():
    boxes = np.array([[0.1, 0.1, 0.5, 0.5], [0.4, 0.3, 0.9, 0.8], [0.9, 0.9, 0.1, 0.1], [1, 1, 1, 1]], F32)
    labels = np.array([5, 6, 7, 8], np.int32)
    A, S, B, L, idx = crop(ndd.as_batch([boxes] * 512), ndd.as_batch([labels] * 512), scaling=[0.3, 1.0],
                           output_bbox_indices=True, rng=ndd.random.RNG(6))
    no = [is_no_crop(a, s, b, boxes) for a, s, b in zip(A, S, B)]
    assert abs(np.mean(no) - 0.5) < 0.06  # observed from DALI 2.4: 0.495 with thresholds [0.0]
    for n, lab, ix in zip(no, L, idx):
        if n:
            np.testing.assert_array_equal(lab, labels)
            np.testing.assert_array_equal(ix, np.arange(4))
    A, S, B = crop(ndd.as_batch([boxes] * 64), scaling=[0.3, 1.0], allow_no_crop=False, rng=ndd.random.RNG(6))
    assert not any(is_no_crop(a, s, b, boxes) for a, s, b in zip(A, S, B))


def test_full_window_drops_centres_on_the_far_edge():
    """Observed from DALI 2.4 (default scaling: the window is the whole image): a centre at
    x = 0 is kept, one at (1, 1) is not; with bbox_prune_threshold 0 only boxes with area
    in the window stay; 'no crop' keeps all six."""
    boxes = np.array([[0, 0.2, 0, 0.4], [1, 1, 1, 1], [0.5, 0.5, 0.5, 0.5], [0.2, 0.2, 0.2, 0.6],
                      [0.9, 0.9, 0.1, 0.1], [0.3, 0.1, 0.6, 0.2]], F32)
    *_, idx = crop(boxes, allow_no_crop=False, output_bbox_indices=True)
    assert idx.tolist() == [0, 2, 3, 4, 5]
    *_, idx = crop(boxes, allow_no_crop=False, output_bbox_indices=True, bbox_prune_threshold=0.0)
    assert idx.tolist() == [5]
    seen = {tuple(i.tolist()) for i in crop(ndd.as_batch([boxes] * 64), output_bbox_indices=True)[-1]}
    assert seen == {(0, 1, 2, 3, 4, 5), (0, 2, 3, 4, 5)}


def _iou(a, s):
    return metrics(np.array([[0.2, 0.2, 0.8, 0.8]], F32), "xyXY", a, s, "iou")[0]


def test_best_window_after_total_num_attempts():
    box = np.array([[0.2, 0.2, 0.8, 0.8]], F32)
    best = []
    for total in range(1, 9):
        with pytest.warns(UserWarning, match="no crop window met the constraints"):
            a, s, _ = crop(box, scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], thresholds=[0.99],
                           allow_no_crop=False, total_num_attempts=total, rng=ndd.random.RNG(11))
        if np.any(s > 0):
            check_window(a, s, dict(scaling=(0.3, 1.0), aspect_ratio=(0.5, 2.0)))
        best.append(_iou(a, s) if np.any(s > 0) else -1.0)
    assert all(x <= y + 1e-7 for x, y in zip(best, best[1:])) and best[-1] > best[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        crop(box, scaling=[0.3, 1.0], thresholds=[0.99], allow_no_crop=False, total_num_attempts=3, quiet=True)


def test_best_window_ties_go_to_the_first():
    """Observed from DALI 2.4: a box without area has IoU 0 with every window; the result
    is the same window for total_num_attempts 1, 2 and 3 (here also 300)."""
    box = np.array([[0.5, 0.5, 0.5, 0.5]], F32)
    outs = [crop(box, scaling=[0.3, 1.0], thresholds=[0.9], allow_no_crop=False, total_num_attempts=t, quiet=True,
                 rng=ndd.random.RNG(11))[:2] for t in (1, 2, 3, 300)]  # 300: over several blocks
    for a, s in outs[1:]:
        np.testing.assert_array_equal(a, outs[0][0])
        np.testing.assert_array_equal(s, outs[0][1])


def test_no_valid_attempt_gives_an_empty_window():
    """Observed from DALI 2.4: when every attempt's ratio was out of range, anchor and shape
    are 0 and no box is kept (98% of samples with the range [0.99, 1.01] and 1 attempt)."""
    A, S, B, L = crop(ndd.as_batch([IMPOSSIBLE] * 256), ndd.as_batch([np.array([3], np.int32)] * 256),
                      scaling=[0.3, 1.0], aspect_ratio=[0.99, 1.01], thresholds=[0.99], allow_no_crop=False,
                      total_num_attempts=1, quiet=True, rng=ndd.random.RNG(12))
    empty = [np.all(s == 0) for s in S]
    assert np.mean(empty) > 0.9
    for e, a, b, lab in zip(empty, A, B, L):
        if e:
            assert np.all(a == 0) and b.shape == (0, 4) and lab.shape == (0,)


def test_without_boxes_the_first_valid_window_is_taken():
    """Observed from DALI 2.4: no boxes: any window, whatever the threshold, with no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A, S, B, L = crop(ndd.as_batch([np.zeros((0, 4), F32)] * 32), ndd.as_batch([np.zeros(0, np.int32)] * 32),
                          scaling=[0.3, 1.0], thresholds=[0.9], allow_no_crop=False, total_num_attempts=1,
                          rng=ndd.random.RNG(13))
    for a, s, b, lab in zip(A, S, B, L):
        check_window(a, s, dict(scaling=(0.3, 1.0)))
        assert b.shape == (0, 4) and lab.shape == (0,)


def test_impossible_constraints_raise_instead_of_looping_forever():
    with raises(ValueError, OP + r": no crop window met the constraints .* attempts"):
        crop(IMPOSSIBLE, scaling=[0.3, 1.0], thresholds=[0.99], allow_no_crop=False, rng=ndd.random.RNG(1))
    with raises(ValueError, r"no crop window met the constraints"):  # DALI 2.4 hangs here
        crop(IMPOSSIBLE, crop_shape=[0, 10], input_shape=[100, 100], allow_no_crop=False)


# -- draws, determinism, batch and sample ---------------------------------------------------


def test_seven_words_per_call_and_same_state_same_result():
    r = np.random.default_rng(0)
    boxes = [random_boxes(r, 6, "xyXY") for _ in range(16)]
    kw = dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9],
              num_attempts=50, output_bbox_indices=True)
    rng = ndd.random.RNG(21)
    first = crop(ndd.as_batch(boxes), **kw, rng=rng)
    assert rng._draws == 7
    second = crop(ndd.as_batch(boxes), **kw, rng=rng)
    crop(boxes[0], **kw, rng=rng)
    assert rng._draws == 21
    again = crop(ndd.as_batch(boxes), **kw, rng=ndd.random.RNG(21))
    for x, y in zip(first, again):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    assert any(not np.array_equal(u, v) for u, v in zip(first[0], second[0]))
    default = ndd.random.get_default_rng()
    before = default._draws
    crop(ndd.as_batch(boxes), **kw)
    assert default._draws - before == 7


def test_sample_mode_equals_a_batch_of_one():
    box = random_boxes(np.random.default_rng(1), 5, "xyXY")
    labels = np.arange(5, dtype=np.int32)
    kw = dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], thresholds=[0.1, 0.3], output_bbox_indices=True)
    t = ndd.random_bbox_crop(box, labels, **kw, rng=ndd.random.RNG(3))
    b = ndd.random_bbox_crop(ndd.as_batch([box]), ndd.as_batch([labels]), **kw, rng=ndd.random.RNG(3))
    assert len(t) == 5 and all(isinstance(x, ndd.Tensor) for x in t) and all(isinstance(x, ndd.Batch) for x in b)
    for x, y in zip(t, b):
        np.testing.assert_array_equal(as_np(x), as_np(y)[0])


def test_a_tensor_input_is_broadcast_to_batch_labels():
    """Observed from DALI 2.4: boxes as a Tensor with labels as a Batch give a batch."""
    box = np.array([[0.4, 0.4, 0.6, 0.6]], F32)
    out = ndd.random_bbox_crop(box, ndd.as_batch([np.array([1], np.int32)] * 3))
    assert all(isinstance(o, ndd.Batch) and o.batch_size == 3 for o in out)


def test_layouts_give_the_same_window():
    """Observed from DALI 2.4: the same seed gives the same window for every layout; the
    boxes come back in the input layout (xyWH: the clipped width and height)."""
    boxes = np.array([[0.1, 0.1, 0.5, 0.5], [0.4, 0.3, 0.9, 0.8], [0.0, 0.6, 0.2, 0.95]], F32)
    kw = dict(scaling=[0.3, 0.8], aspect_ratio=[0.5, 2.0], allow_no_crop=False)
    a, s, b = crop(boxes, **kw, rng=ndd.random.RNG(3))
    wh = np.c_[boxes[:, :2], boxes[:, 2:] - boxes[:, :2]]
    for inp, extra, expect in [
        (boxes[:, [1, 0, 3, 2]], dict(bbox_layout="yxYX"), b[:, [1, 0, 3, 2]]),
        (wh, dict(bbox_layout="xyWH"), np.c_[b[:, :2], b[:, 2:] - b[:, :2]]),
        (wh, dict(ltrb=False), np.c_[b[:, :2], b[:, 2:] - b[:, :2]]),
        (np.c_[wh[:, 2:], wh[:, :2]], dict(bbox_layout="WHxy"), np.c_[b[:, 2:] - b[:, :2], b[:, :2]]),
    ]:
        a2, s2, b2 = crop(np.ascontiguousarray(inp), **kw, **extra, rng=ndd.random.RNG(3))
        np.testing.assert_array_equal(a2, a)
        np.testing.assert_array_equal(s2, s)
        np.testing.assert_allclose(b2, expect, atol=1e-6)


def test_shape_layout_orders_input_shape():
    box = np.array([[0.0, 0.0, 1.0, 1.0]], F32)
    kw = dict(scaling=[0.1, 1.0], aspect_ratio=[1.0, 1.0], allow_no_crop=False)
    a, s, _ = crop(box, input_shape=[400, 100], **kw, rng=ndd.random.RNG(8))
    a2, s2, _ = crop(box, input_shape=[100, 400], shape_layout="HW", **kw, rng=ndd.random.RNG(8))
    np.testing.assert_array_equal(s, s2)
    np.testing.assert_array_equal(a, a2)


# -- facts observed from DALI 2.4 ---------------------------------------------------------

BOXES3 = np.array([[0.1, 0.1, 0.5, 0.5], [0.4, 0.3, 0.9, 0.8], [0.0, 0.6, 0.2, 0.95]], F32)


def test_observed_outputs():
    """Observed from DALI 2.4 with the defaults (the window is the whole image): anchor
    [0, 0] and shape [1, 1] (float32, shape (2,)), the boxes (3, 4) float32, labels int32;
    3 outputs without labels, 5 with output_bbox_indices (int32)."""
    out = ndd.random_bbox_crop(BOXES3, np.array([1, 2, 3], np.int32))
    assert len(out) == 4 and [o.dtype for o in out] == [ndd.float32] * 3 + [ndd.int32]
    a, s, b, lab = (as_np(o) for o in out)
    assert a.tolist() == [0, 0] and s.tolist() == [1, 1] and lab.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(b, BOXES3)
    assert len(ndd.random_bbox_crop(BOXES3)) == 3
    out = ndd.random_bbox_crop(BOXES3, np.array([1, 2, 3], np.int32), output_bbox_indices=True)
    assert len(out) == 5 and out[4].dtype == ndd.int32 and as_np(out[4]).tolist() == [0, 1, 2]
    assert [o.ndim for o in out] == [1, 1, 2, 1, 1]
    # labels keep their trailing dimensions: (3, 2) and (3, 1, 1)
    assert as_np(ndd.random_bbox_crop(BOXES3, np.zeros((3, 2), np.int32))[3]).shape == (3, 2)
    assert as_np(ndd.random_bbox_crop(BOXES3, np.zeros((3, 1, 1), np.int32))[3]).shape == (3, 1, 1)
    # no boxes: (0, 4), (0,), (0,)
    a, s, b, lab, idx = crop(np.zeros((0, 4), F32), np.zeros(0, np.int32), output_bbox_indices=True)
    assert a.shape == s.shape == (2,) and b.shape == (0, 4) and lab.shape == idx.shape == (0,)
    # 3-D boxes: anchor and shape of 3
    a, s, b = crop(np.array([[0.1, 0.1, 0.1, 0.5, 0.5, 0.5]], F32))
    assert a.shape == s.shape == (3,) and b.shape == (1, 6)
    # boxes touching the image's edges are valid; inverted boxes too
    crop(np.array([[0, 0, 1, 1], [0.5, 0.1, 0.1, 0.5]], F32))


def test_observed_crop_shape_output():
    """Observed from DALI 2.4: input_shape [400, 100], crop_shape [100, 50], anchor (29, 49):
    the box [0, 0.6, 0.2, 0.95] becomes [0, 0.22, 0.51, 0.92] in the window."""
    idx, out = reference(BOXES3[2:], "xyXY", F32([29, 49]) / F32([400, 100]), F32([100, 50]) / F32([400, 100]),
                         None)
    np.testing.assert_allclose(out, [[0.0, 0.22, 0.51, 0.92]], atol=1e-6)


# -- errors ----------------------------------------------------------------------------------

BAD_CALLS = [
    ((np.zeros(4, F32),), {}, r"'boxes' must be a 2-D float32"),
    ((np.zeros((1, 1, 4), F32),), {}, r"'boxes' must be a 2-D float32"),
    ((np.zeros((1, 4), np.float64),), {}, r"'boxes' must be a 2-D float32"),
    ((np.zeros((1, 4), np.int32),), {}, r"'boxes' must be a 2-D float32"),
    ((np.zeros((1, 5), F32),), {}, r"4 \(2-D\) or 6 \(3-D\) coordinates, got 5"),
    ((np.zeros((1, 8), F32),), {}, r"4 \(2-D\) or 6 \(3-D\) coordinates, got 8"),
    ((BOXES3, np.array([1, 2], np.int32)), {}, r"'labels' has 2 rows but 'boxes' has 3 boxes"),
    ((BOXES3, np.array([1, 2, 3], np.int64)), {}, r"'labels' must be int32"),
    ((BOXES3, np.array([1, 2, 3], F32)), {}, r"'labels' must be int32"),
    ((BOXES3[:1], np.int32(3)), {}, r"'labels' must be int32 with one row per box"),
    ((np.array([[-0.1, 0.1, 0.5, 0.5]], F32),), {}, r"box 0 of the input .* is outside \[0, 1\]"),
    ((np.array([[0.1, 0.1, 1.5, 0.5]], F32),), {}, r"outside \[0, 1\]"),
    ((np.array([[np.nan, 0.1, 0.5, 0.5]], F32),), {}, r"outside \[0, 1\]"),
    ((np.array([[0.5, 0.1, 0.6, 0.5]], F32),), dict(bbox_layout="xyWH"), r"outside \[0, 1\]"),
    ((BOXES3,), dict(scaling=[0.9, 0.5]), r"'scaling' must hold ranges"),
    ((BOXES3,), dict(scaling=[-0.1, 0.5]), r"'scaling' must hold ranges"),
    ((BOXES3,), dict(scaling=[0.5]), r"'scaling' must have 2 values"),
    ((BOXES3,), dict(aspect_ratio=[2.0, 1.0]), r"'aspect_ratio' must hold ranges"),
    ((BOXES3,), dict(aspect_ratio=[1, 2, 1, 2]), r"'aspect_ratio' must have 2 or 6 values"),
    ((BOXES3,), dict(thresholds=[1.5]), r"'thresholds' values must be in \[0, 1\]"),
    ((BOXES3,), dict(thresholds=[-0.5]), r"'thresholds' values must be in \[0, 1\]"),
    ((BOXES3,), dict(thresholds=[]), r"'thresholds' needs at least one value"),
    ((BOXES3,), dict(threshold_type="IOU"), r"'threshold_type' must be one of 'iou', 'overlap'"),
    ((BOXES3,), dict(bbox_layout="abcd"), r"'bbox_layout' must be a permutation"),
    ((BOXES3,), dict(bbox_layout="xxXY"), r"'bbox_layout' must be a permutation"),
    ((BOXES3,), dict(bbox_layout="xyzXYZ"), r"'bbox_layout' 'xyzXYZ' has 6 coordinates, but the boxes have 4"),
    ((BOXES3,), dict(bbox_layout="xyWH", ltrb=True), r"'ltrb' and 'bbox_layout' cannot both be given"),
    ((BOXES3,), dict(bbox_prune_threshold=1.5), r"'bbox_prune_threshold' must be in \[0, 1\]"),
    ((BOXES3,), dict(num_attempts=0), r"'num_attempts' must be at least 1"),
    ((BOXES3,), dict(total_num_attempts=0), r"'total_num_attempts' must be -1"),
    ((BOXES3,), dict(total_num_attempts=-2), r"'total_num_attempts' must be -1"),
    ((BOXES3,), dict(crop_shape=[10, 10], allow_no_crop=False), r"'input_shape' must be given with 'crop_shape'"),
    ((BOXES3,), dict(crop_shape=[10, 10], input_shape=[99, 99], allow_no_crop=True),
     r"'allow_no_crop' must be False"),
    ((BOXES3,), dict(crop_shape=[10, 10], input_shape=[99, 99], allow_no_crop=False, scaling=[1.0, 1.0]),
     r"'scaling' cannot be given with 'crop_shape'"),
    ((BOXES3,), dict(crop_shape=[10, 10], input_shape=[99, 99], allow_no_crop=False, aspect_ratio=[0.5, 1]),
     r"'aspect_ratio' cannot be given with 'crop_shape'"),
    ((BOXES3,), dict(crop_shape=[-5, 10], input_shape=[99, 99], allow_no_crop=False),
     r"'crop_shape' must be non-negative"),
    ((BOXES3,), dict(crop_shape=[10, 10, 10], input_shape=[99, 99], allow_no_crop=False),
     r"'crop_shape' must have 2 values for 2-D boxes"),
    ((BOXES3,), dict(input_shape=[100, 100, 100]), r"'input_shape' must have 2 values for 2-D boxes"),
    ((BOXES3,), dict(input_shape=[-100, 100]), r"'input_shape' must be positive"),
    ((BOXES3,), dict(input_shape=[0, 100]), r"'input_shape' must be positive"),
    ((BOXES3,), dict(input_shape=[4]), r"'input_shape' must have 2 or 3 values"),
    ((BOXES3,), dict(shape_layout="XY"), r"'shape_layout' must be a permutation"),
    ((BOXES3,), dict(shape_layout="WHD"), r"'shape_layout' 'WHD' must have 2 letters"),
    ((BOXES3,), dict(rng=3), r"rng must be an ndd.random.RNG"),
]


@pytest.mark.parametrize("inputs,kw,match", BAD_CALLS, ids=[f"bad{i}" for i in range(len(BAD_CALLS))])
def test_errors(inputs, kw, match):
    with raises(ValueError, OP + ".*" + match):
        crop(*inputs, **kw)


def test_more_errors():
    mixed = ndd.as_batch([np.full((2, 4), 0.5, F32), np.full((1, 6), 0.5, F32)])
    with raises(ValueError, r"every sample's boxes must have 4 coordinates, got 6 \(sample 1\)"):
        crop(mixed)
    with raises(ValueError, r"'labels' has 1 rows but 'boxes' has 2 boxes \(sample 1\)"):
        crop(ndd.as_batch([BOXES3[:2], BOXES3[:2]]), ndd.as_batch([np.zeros(2, np.int32), np.zeros(1, np.int32)]))
    with raises(ValueError, r"'crop_shape' must be non-negative, got \[-1, 5\] \(sample 1\)"):
        crop(ndd.as_batch([BOXES3, BOXES3]), input_shape=[50, 50], allow_no_crop=False,
             crop_shape=ndd.as_batch([np.array([5, 5], np.int32), np.array([-1, 5], np.int32)]))
    with pytest.raises(TypeError, match="unexpected keyword argument 'seed'"):  # DALI 2.4's dynamic mode too
        ndd.random_bbox_crop(BOXES3, seed=1)
    with pytest.raises(TypeError, match="takes 1 to 2 positional input"):
        ndd.random_bbox_crop(BOXES3, np.zeros(3, np.int32), BOXES3)
