"""Segmentation helpers (CPU): select_masks against a plain-Python reference; the random
operators' supports and distributions on many draws against their documented rules
(scipy.ndimage.label as the connected-components reference); determinism, batches,
per-sample arguments and errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from ops_cpu_helpers import as_np, raises
from scipy import ndimage

import ndd

I32 = np.int32


def rows(x) -> list:
    return [as_np(t) for t in x] if isinstance(x, ndd.Batch) else [as_np(x)]


# -- segmentation.select_masks ----------------------------------------------------------


def select_ref(ids, polys, verts, reindex):
    """DALI 2.4's rule: masks in mask_ids order, each with its last polygon's vertices."""
    last = {int(p[0]): (int(p[1]), int(p[2])) for p in polys}
    out_p, out_v, off = [], [], 0
    for j, m in enumerate(ids):
        s, e = last[int(m)]
        out_p.append([j if reindex else int(m), off, off + e - s])
        out_v.extend(verts[s:e].tolist())
        off += e - s
    return np.array(out_p, I32).reshape(-1, 3), np.array(out_v, verts.dtype).reshape(-1, verts.shape[1])


def test_select_masks_examples_of_the_dali_docs():
    polys = np.array([[0, 0, 3], [1, 3, 7], [2, 7, 10]], I32)
    verts = np.arange(20, dtype=np.float32).reshape(10, 2)
    p, v = ndd.segmentation.select_masks(np.array([1], I32), polys, verts)
    np.testing.assert_array_equal(as_np(p), [[1, 0, 4]])
    np.testing.assert_array_equal(as_np(v), verts[3:7])
    p, v = ndd.segmentation.select_masks(np.array([2, 0], I32), polys, verts, reindex_masks=True)
    np.testing.assert_array_equal(as_np(p), [[0, 0, 3], [1, 3, 6]])
    np.testing.assert_array_equal(as_np(v), np.concatenate([verts[7:10], verts[0:3]]))
    assert p.dtype == ndd.int32 and v.dtype == ndd.float32


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8, np.float64])
def test_select_masks_random_ragged_batches_match_the_reference(dtype):
    r = np.random.default_rng(0)
    ids_l, polys_l, verts_l = [], [], []
    for _ in range(6):
        nv = int(r.integers(3, 20))
        npoly = int(r.integers(1, 6))
        se = np.sort(r.integers(0, nv + 1, (npoly, 2)), axis=1)
        polys = np.concatenate([r.integers(0, 4, (npoly, 1)), se], axis=1).astype(I32)
        present = np.unique(polys[:, 0])
        ids_l.append(r.permutation(present)[: int(r.integers(0, len(present) + 1))].astype(I32))
        polys_l.append(polys)
        verts_l.append(r.integers(0, 100, (nv, int(r.integers(1, 4)))).astype(dtype))
    for reindex in (False, True):
        p, v = ndd.segmentation.select_masks(ndd.as_batch(ids_l), ndd.as_batch(polys_l), ndd.as_batch(verts_l),
                                             reindex_masks=reindex)
        for i in range(6):
            rp, rv = select_ref(ids_l[i], polys_l[i], verts_l[i], reindex)
            np.testing.assert_array_equal(as_np(p.tensors[i]), rp)
            np.testing.assert_array_equal(as_np(v.tensors[i]), rv)
            assert as_np(v.tensors[i]).dtype == dtype


def test_select_masks_keeps_one_polygon_per_mask_as_dali():
    polys = np.array([[1, 0, 2], [0, 2, 4], [1, 4, 5]], I32)
    verts = np.arange(10, dtype=np.float32).reshape(5, 2)
    p, v = ndd.segmentation.select_masks(np.array([1], I32), polys, verts)
    np.testing.assert_array_equal(as_np(p), [[1, 0, 1]])
    np.testing.assert_array_equal(as_np(v), verts[4:5])


@pytest.mark.parametrize("ids, polys, pattern", [
    ([1, 1], [[1, 0, 2]], "must not repeat a value, got 1"),
    ([5], [[1, 0, 2]], "mask id 5 of 'mask_ids' is not in 'polygons'"),
    ([1], [[1, 0, 9]], r"vertex range \[0, 9\)"),
    ([1], [[1, 3, 2]], r"vertex range \[3, 2\)"),
    ([1], [[1, -1, 2]], r"vertex range \[-1, 2\)"),
    ([1], [[1, 0]], "must have 3 columns"),
])
def test_select_masks_errors(ids, polys, pattern):
    verts = np.zeros((4, 2), np.float32)
    with raises(ValueError, r"Operator `segmentation.select_masks`.*" + pattern):
        ndd.segmentation.select_masks(np.array(ids, I32), np.array(polys, I32), verts)


def test_select_masks_input_types():
    verts = np.zeros((4, 2), np.float32)
    with raises(ValueError, "'mask_ids' must be a 1-D int32"):
        ndd.segmentation.select_masks(np.array([1], np.int64), np.array([[1, 0, 2]], I32), verts)
    with raises(ValueError, "'polygons' must be a 2-D int32"):
        ndd.segmentation.select_masks(np.array([1], I32), np.array([1, 0, 2], I32), verts)
    with raises(ValueError, "'vertices' must be 2-D"):
        ndd.segmentation.select_masks(np.array([1], I32), np.array([[1, 0, 2]], I32), verts.reshape(-1))


# -- roi_random_crop ------------------------------------------------------------------------


def roi_range(start, end, crop, shape=None):
    """Per dimension, the documented range of starts: inside the ROI when the window is
    smaller, holding it when larger; clipped to the input when its shape is known."""
    start, end, crop = (np.array(v) for v in (start, end, crop))
    inside = end - start >= crop
    lo = np.where(inside, start, end - crop)
    hi = np.where(inside, end - crop, start)
    if shape is not None:
        lo, hi = np.maximum(lo, 0), np.minimum(hi, np.array(shape) - crop)
    return lo, hi


def test_roi_random_crop_is_uniform_over_its_range():
    r = np.random.default_rng(1)
    for case in range(8):
        shape = r.integers(8, 30, 3)
        start = np.array([r.integers(0, s) for s in shape])
        end = np.array([r.integers(a, s + 1) for a, s in zip(start, shape)])
        crop = np.array([r.integers(0, s + 1) for s in shape])
        kw = dict(crop_shape=crop.tolist(), roi_start=start.tolist())
        if case % 2:
            kw["roi_shape"] = (end - start).tolist()
        else:
            kw["roi_end"] = end.tolist()
        known = case % 3
        if known == 1:
            kw["in_shape"] = shape.tolist()
            out = ndd.roi_random_crop(batch_size=1500, rng=ndd.random.RNG(case), **kw)
        elif known == 2:
            out = ndd.roi_random_crop(ndd.as_batch([np.zeros(shape, np.uint8)] * 1500), rng=ndd.random.RNG(case), **kw)
        else:
            out = ndd.roi_random_crop(batch_size=1500, rng=ndd.random.RNG(case), **kw)
        assert out.dtype == ndd.int64
        got = np.array(rows(out))
        lo, hi = roi_range(start, end, crop, shape if known else None)
        for k in range(3):
            counts = np.bincount(got[:, k] - lo[k], minlength=hi[k] - lo[k] + 1)
            assert len(counts) == hi[k] - lo[k] + 1 and counts.min() > 0, (case, k)
            # uniform: each count within 5 standard deviations of its mean (binomial)
            p = 1 / len(counts)
            assert np.abs(counts - 1500 * p).max() <= 5 * np.sqrt(1500 * p * (1 - p)) + 1


def test_roi_random_crop_tensor_per_sample_args_and_determinism():
    t = ndd.roi_random_crop(crop_shape=[4, 4], roi_start=[10, 0], roi_shape=[4, 8], rng=ndd.random.RNG(3))
    a = as_np(t)
    assert a.shape == (2,) and a[0] == 10 and 0 <= a[1] <= 4
    again = as_np(ndd.roi_random_crop(crop_shape=[4, 4], roi_start=[10, 0], roi_shape=[4, 8], rng=ndd.random.RNG(3)))
    np.testing.assert_array_equal(a, again)
    starts = ndd.as_batch([np.array([0, 0], I32), np.array([5, 7], I32)])
    out = rows(ndd.roi_random_crop(crop_shape=[2, 2], roi_start=starts, roi_shape=[2, 2]))
    np.testing.assert_array_equal(out, [[0, 0], [5, 7]])


@pytest.mark.parametrize("kw, pattern", [
    (dict(roi_start=[1, 1]), "exactly one of 'roi_end' and 'roi_shape'"),
    (dict(roi_start=[1, 1], roi_end=[2, 2], roi_shape=[1, 1]), "exactly one"),
    (dict(roi_start=[1, 1, 1], roi_end=[2, 2, 2]), "'roi_start' must have 2 values"),
    (dict(roi_start=[1, 1], roi_end=[2, 2], in_shape=[3, 50]), "larger than the input shape"),
    (dict(roi_start=[1, 1], roi_end=[2, 60], in_shape=[50, 50]), "outside the input shape"),
    (dict(roi_start=[4, 1], roi_end=[2, 2]), "negative extent"),
])
def test_roi_random_crop_errors(kw, pattern):
    with raises(ValueError, "Operator `roi_random_crop`.*" + pattern):
        as_np(ndd.roi_random_crop(crop_shape=[5, 5], **kw))


def test_roi_random_crop_reads_the_leading_dimensions_of_its_input():
    img = np.zeros((30, 8, 3), np.uint8)  # a window over H and W of an HWC image: x start <= 8 - 6
    out = np.array(rows(ndd.roi_random_crop(ndd.as_batch([img] * 300), crop_shape=[4, 6], roi_start=[10, 3],
                                            roi_end=[12, 4], rng=ndd.random.RNG(1))))
    assert set(out[:, 0]) == set(range(8, 11)) and set(out[:, 1]) == {0, 1, 2}
    with raises(ValueError, "the input has 1 dimensions but 'crop_shape' has 2 values"):
        as_np(ndd.roi_random_crop(np.zeros(9), crop_shape=[2, 2], roi_start=[0, 0], roi_end=[3, 3]))


def test_roi_random_crop_in_shape_and_input_exclude_each_other():
    with raises(ValueError, "'in_shape' cannot be given with an input"):
        as_np(ndd.roi_random_crop(np.zeros((9, 9)), crop_shape=[2, 2], roi_start=[0, 0], roi_end=[3, 3], in_shape=[9, 9]))


# -- random_crop_generator ------------------------------------------------------------------


def test_random_crop_generator_windows_follow_area_and_ratio():
    n, H, W = 4000, 120, 160
    anchor, shape = ndd.random_crop_generator(ndd.as_batch([np.array([H, W, 3], np.int64)] * n),
                                              random_area=[0.2, 0.6], random_aspect_ratio=[0.5, 2.0],
                                              rng=ndd.random.RNG(0))
    assert anchor.dtype == shape.dtype == ndd.int32
    a, s = np.array(rows(anchor)), np.array(rows(shape))
    assert (a >= 0).all() and (a + s <= [H, W]).all()
    area = s.prod(axis=1) / (H * W)
    ratio = s[:, 1] / s[:, 0]
    assert 0.19 <= area.min() and area.max() <= 0.61 and 0.49 <= ratio.min() and ratio.max() <= 2.01
    # the area uniform in [0.2, 0.6]; the log aspect ratio uniform in [log 0.5, log 2], less the
    # tall windows that do not fit (a failed attempt draws again; DALI 2.4 gave 0.16, 0.28, 0.27, 0.29)
    assert abs(area.mean() - 0.4) < 0.02
    hist = np.histogram(np.log(ratio), bins=4, range=(np.log(0.5), np.log(2)))[0] / n
    assert np.abs(hist[1:] - 0.28).max() < 0.03 and 0.12 < hist[0] < 0.21
    # anchors are uniform over the free space: the relative position has mean 1/2
    free = np.array([H, W]) - s
    rel = a[free.min(axis=1) > 0] / free[free.min(axis=1) > 0]
    assert np.abs(rel.mean(axis=0) - 0.5).max() < 0.03


def test_random_crop_generator_fallback_zero_extent_and_errors():
    # no attempt: the whole input cut to the allowed ratio (1.0), at a random place
    a, s = ndd.random_crop_generator(np.array([10, 30], I32), num_attempts=0, random_aspect_ratio=[1.0, 1.0])
    assert as_np(s).tolist() == [10, 10] and as_np(a)[0] == 0
    # larger than the largest area: both sides shrunk by one factor, truncated: 69x25 cut to ratio
    # 0.2 is 69x13 (897 pixels); 0.4 * 1725 = 690 pixels is a factor sqrt(690 / 897) = 0.877: 60x11
    a, s = ndd.random_crop_generator(np.array([69, 25], I32), num_attempts=0, random_area=[0.1, 0.4],
                                     random_aspect_ratio=[0.17, 0.2])
    assert as_np(s).tolist() == [60, 11] and 0 <= as_np(a)[0] <= 9 and 0 <= as_np(a)[1] <= 14
    a, s = ndd.random_crop_generator(np.array([0, 30], I32))
    assert as_np(a).tolist() == [0, 0] and as_np(s).tolist() == [0, 0]
    with raises(ValueError, "2 or 3 non-negative values"):
        ndd.random_crop_generator(np.array([10, 20, 3, 1], I32))
    with raises(ValueError, "1-D integer shape"):
        ndd.random_crop_generator(np.array([10.0, 20.0], np.float32))
    with raises(ValueError, "'random_area' must be \\[min, max\\] with min <= max"):
        ndd.random_crop_generator(np.array([10, 20], I32), random_area=[0.5, 0.2])
    with raises(ValueError, "'random_aspect_ratio' must be positive"):
        ndd.random_crop_generator(np.array([10, 20], I32), random_aspect_ratio=[0.0, 1.0])


# -- segmentation.random_mask_pixel --------------------------------------------------------


def test_random_mask_pixel_picks_foreground_uniformly():
    r = np.random.default_rng(2)
    mask = (r.random((6, 7)) < 0.3).astype(np.uint8) * 3
    n = 6000
    for kw in (dict(value=3), dict(threshold=2.5), dict()):
        out = np.array(rows(ndd.segmentation.random_mask_pixel(ndd.as_batch([mask] * n), foreground=1,
                                                               rng=ndd.random.RNG(1), **kw)))
        assert (mask[out[:, 0], out[:, 1]] == 3).all()
        counts = Counter(map(tuple, out.tolist()))
        k = int(np.count_nonzero(mask))
        assert len(counts) == k and max(abs(c - n / k) for c in counts.values()) <= 5 * np.sqrt(n / k) + 1


def test_random_mask_pixel_uniform_when_no_foreground_or_not_asked():
    mask = np.zeros((3, 4, 2), np.float32)
    n = 4800
    for kw in (dict(foreground=1), dict(foreground=0), dict(foreground=1, value=300)):
        out = ndd.segmentation.random_mask_pixel(ndd.as_batch([mask] * n), rng=ndd.random.RNG(2), **kw)
        assert out.dtype == ndd.int64
        counts = Counter(map(tuple, np.array(rows(out)).tolist()))
        assert len(counts) == 24 and max(abs(c - n / 24) for c in counts.values()) <= 5 * np.sqrt(n / 24)


def test_random_mask_pixel_value_not_of_the_type_is_no_foreground_and_per_sample_args():
    mask = np.full((2, 50), 44, np.uint8)
    mask[1, 7] = 1
    out = rows(ndd.segmentation.random_mask_pixel(ndd.as_batch([mask] * 2), foreground=1,
                                                  value=ndd.as_batch([np.array(1, I32), np.array(44, I32)])))
    assert out[0].tolist() == [1, 7] and mask[tuple(out[1])] == 44
    a = as_np(ndd.segmentation.random_mask_pixel(mask, foreground=1, value=1, rng=ndd.random.RNG(5)))
    assert a.tolist() == [1, 7]


def test_random_mask_pixel_errors():
    with raises(ValueError, "'value' and 'threshold' cannot both be given"):
        ndd.segmentation.random_mask_pixel(np.ones((2, 2), np.uint8), value=1, threshold=0.5)
    with raises(ValueError, "unsupported mask type"):
        ndd.segmentation.random_mask_pixel(np.ones((2, 2), np.float16))
    with raises(ValueError, "the mask is empty"):
        ndd.segmentation.random_mask_pixel(np.ones((0, 2), np.uint8))


# -- segmentation.random_object_bbox -----------------------------------------------------


def ref_boxes(x, label):
    """Face-connected blobs of ``x == label`` by scipy, ordered by their first element:
    (start, end) tuples."""
    lab, n = ndimage.label(x == label)
    firsts = [np.flatnonzero(lab.ravel() == k)[0] for k in range(1, n + 1)]
    objs = ndimage.find_objects(lab)
    out = [(tuple(s.start for s in o), tuple(s.stop for s in o)) for o in objs]
    return [out[k] for k in np.argsort(firsts, kind="stable")]


def draw_boxes(x, n, **kw):
    o = ndd.segmentation.random_object_bbox(ndd.as_batch([x] * n), format="start_end", rng=ndd.random.RNG(7), **kw)
    return Counter((tuple(as_np(s).tolist()), tuple(as_np(e).tolist())) for s, e in zip(o[0], o[1]))


@pytest.mark.parametrize("shape", [(9, 11), (5, 6, 7), (40,)])
def test_random_object_bbox_blobs_match_scipy_labels(shape):
    r = np.random.default_rng(3)
    x = ((r.random(shape) < 0.4) * r.integers(1, 3, shape)).astype(np.uint8)
    n = 800
    got = draw_boxes(x, n, ignore_class=True)
    want = ref_boxes(x, 1) + ref_boxes(x, 2)
    assert set(got) == set(want)
    k = len(want)  # ignore_class: every blob equally likely
    assert max(abs(c - n / k) for c in got.values()) <= 5 * np.sqrt(n / k) + 1


def test_random_object_bbox_classes_weights_k_largest_and_threshold():
    x = np.zeros((8, 8), np.int16)
    x[0, 0:3] = 1          # class 1: 1x3 (first), 2x2, 1x1
    x[2:4, 5:7] = 1
    x[7, 7] = 1
    x[5:8, 0:2] = 2        # class 2: 3x2
    n = 1500
    got = draw_boxes(x, n, class_weights=[1.0, 3.0])  # without classes: labels 1 and 2
    c2 = got[((5, 0), (8, 2))]
    assert abs(c2 / n - 0.75) < 0.05  # 4.5 standard deviations
    n = 200
    got = draw_boxes(x, n, classes=[1], k_largest=2)
    assert set(got) == {((0, 0), (1, 3)), ((2, 5), (4, 7))}  # the 1x1 box is out; 3 and 4 elements
    got = draw_boxes(x, n, classes=[1], k_largest=1)
    assert set(got) == {((2, 5), (4, 7))}
    got = draw_boxes(x, n, classes=[1, 2], threshold=[2, 2])
    assert set(got) == {((2, 5), (4, 7)), ((5, 0), (8, 2))}
    got = draw_boxes(x, n, classes=[1], threshold=[3, 3])  # nothing qualifies: the whole input
    assert set(got) == {((0, 0), (8, 8))}


def test_random_object_bbox_formats_class_output_and_foreground_prob():
    x = np.zeros((4, 5), np.uint8)
    x[1:3, 2:5] = 4
    anchor, shape, cls = ndd.segmentation.random_object_bbox(x, output_class=True)
    assert as_np(anchor).tolist() == [1, 2] and as_np(shape).tolist() == [2, 3] and int(as_np(cls)) == 4
    assert anchor.dtype == cls.dtype == ndd.int32 and cls.ndim == 0
    box = ndd.segmentation.random_object_bbox(x, format="box")
    assert as_np(box).tolist() == [1, 2, 3, 5]
    n = 2000
    out = ndd.segmentation.random_object_bbox(ndd.as_batch([x] * n), foreground_prob=0.3, output_class=True,
                                              format="box", rng=ndd.random.RNG(0))
    labels = np.array([int(as_np(c)) for c in out[1]])
    boxes = np.array(rows(out[0]))
    assert abs((labels == 4).mean() - 0.3) < 0.03
    assert (boxes[labels == 0] == [0, 0, 4, 5]).all() and (boxes[labels == 4] == [1, 2, 3, 5]).all()
    # classes holding 0 without a background: the background is min(classes) - 1
    _, _, cls = ndd.segmentation.random_object_bbox(x, classes=[0, 7], foreground_prob=0.0, output_class=True)
    assert int(as_np(cls)) == -1


def test_random_object_bbox_ragged_batch_per_sample_args_and_determinism():
    xs = [np.eye(4, dtype=np.uint8), np.ones((3, 6), np.uint8) * 2]
    kw = dict(background=ndd.as_batch([np.array(0, I32), np.array(1, I32)]), format="box")
    a = rows(ndd.segmentation.random_object_bbox(ndd.as_batch(xs), rng=ndd.random.RNG(9), **kw))
    b = rows(ndd.segmentation.random_object_bbox(ndd.as_batch(xs), rng=ndd.random.RNG(9), **kw))
    assert [t.tolist() for t in a] == [t.tolist() for t in b]
    assert a[1].tolist() == [0, 0, 3, 6] and a[0][2:].tolist() == (a[0][:2] + 1).tolist()


@pytest.mark.parametrize("kw, pattern", [
    (dict(ignore_class=True, output_class=True), "cannot be used with ignore_class=True"),
    (dict(k_largest=0), "'k_largest' must be at least 1"),
    (dict(format="xywh"), "'format' must be one of"),
    (dict(classes=[1, 2], class_weights=[1.0]), "one value per class"),
    (dict(classes=[0, 1], background=0), "is the background label"),
    (dict(threshold=[1, 1, 1]), "'threshold' must have 2 values"),
])
def test_random_object_bbox_errors(kw, pattern):
    with raises(ValueError, "Operator `segmentation.random_object_bbox`.*" + pattern):
        ndd.segmentation.random_object_bbox(np.ones((3, 3), np.uint8), **kw)


def test_random_object_bbox_input_types():
    with raises(ValueError, "unsupported input type"):
        ndd.segmentation.random_object_bbox(np.ones((3, 3), np.float32))
    with raises(ValueError, "1 to 6 dimensions"):
        ndd.segmentation.random_object_bbox(np.ones((1,) * 7, np.uint8))
