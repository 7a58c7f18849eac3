"""bb_flip and box_encoder: against values observed from DALI 2.4 (nvidia-dali 2.4.0, CPU,
dynamic mode) and against independent NumPy references written here as plain per-box loops.

Tolerances: bb_flip and box_encoder without ``offset`` are float32 additions and
multiplications done in DALI's order, compared exactly; box_encoder with ``offset`` takes a
log and divisions, compared with a relative tolerance of 1e-6 (and an absolute one of 1e-7
against the references, for offsets near 0).
"""

from __future__ import annotations

import numpy as np
import pytest
from ops_cpu_helpers import as_np, raises

import ndd

F32 = np.float32
ONE = F32(1)

# -- NumPy references ----------------------------------------------------------------


def ref_flip(boxes: np.ndarray, h: bool, v: bool, ltrb: bool) -> np.ndarray:
    """One box at a time, in float32 scalars: xywh goes through ltrb, as DALI does."""
    out = []
    for x0, y0, x1, y1 in np.asarray(boxes, F32).reshape(-1, 4):
        if not ltrb:
            x1, y1 = x0 + x1, y0 + y1
        if h:
            x0, x1 = ONE - x1, ONE - x0
        if v:
            y0, y1 = ONE - y1, ONE - y0
        if not ltrb:
            x1, y1 = x1 - x0, y1 - y0
        out.append([x0, y0, x1, y1])
    return np.array(out, F32).reshape(np.shape(boxes))


def ref_iou(b: np.ndarray, a: np.ndarray) -> np.float32:
    iw = max(min(b[2], a[2]) - max(b[0], a[0]), F32(0))
    ih = max(min(b[3], a[3]) - max(b[1], a[1]), F32(0))
    inter = iw * ih
    if inter <= 0:
        return F32(0)
    return inter / ((b[2] - b[0]) * (b[3] - b[1]) + (a[2] - a[0]) * (a[3] - a[1]) - inter)


def ref_encode(boxes, labels, anchors, criteria=0.5, offset=False, means=(0, 0, 0, 0), stds=(1, 1, 1, 1),
               scale=1.0) -> tuple[np.ndarray, np.ndarray]:
    """SSD matching with explicit loops: threshold first, then each box forces its best
    anchor (later boxes win); ties go to the last box / last anchor."""
    boxes = np.asarray(boxes, F32).reshape(-1, 4)
    anchors = np.asarray(anchors, F32).reshape(-1, 4)
    labels = np.asarray(labels).reshape(-1)
    ious = [[ref_iou(b, a) for a in anchors] for b in boxes]
    match = [-1] * len(anchors)
    for j in range(len(anchors)):
        best, best_iou = -1, F32(-1)
        for i in range(len(boxes)):
            if ious[i][j] >= best_iou:
                best, best_iou = i, ious[i][j]
        if best >= 0 and best_iou > F32(criteria):
            match[j] = best
    for i in range(len(boxes)):
        best, best_iou = -1, F32(-1)
        for j in range(len(anchors)):
            if ious[i][j] >= best_iou:
                best, best_iou = j, ious[i][j]
        match[best] = i

    def cwh(b):
        return [(b[0] + b[2]) * F32(0.5), (b[1] + b[3]) * F32(0.5), b[2] - b[0], b[3] - b[1]]

    out_b = np.zeros((len(anchors), 4), F32)
    out_l = np.zeros(len(anchors), np.int32)
    for j, a in enumerate(anchors):
        i = match[j]
        if i < 0:
            out_b[j] = 0 if offset else cwh(a)
            continue
        out_l[j] = labels[i]
        if not offset:
            out_b[j] = cwh(boxes[i])
            continue
        s = F32(scale)
        bx, by, bw, bh = (c * s for c in cwh(boxes[i]))
        ax, ay, aw, ah = (c * s for c in cwh(a))
        with np.errstate(divide="ignore", invalid="ignore"):  # (a zero-width box: log(0) = -inf)
            raw = [(bx - ax) / aw, (by - ay) / ah, F32(np.log(np.float64(bw / aw))), F32(np.log(np.float64(bh / ah)))]
        out_b[j] = [(r - F32(m)) / F32(sd) for r, m, sd in zip(raw, means, stds)]
    return out_b, out_l


def encode(boxes, labels, anchors, **kw) -> tuple[np.ndarray, np.ndarray]:
    b, lab = ndd.box_encoder(np.asarray(boxes, F32).reshape(-1, 4), np.asarray(labels, np.int32),
                             anchors=np.asarray(anchors, F32).ravel().tolist(), **kw)
    return np.asarray(b), np.asarray(lab)


# -- bb_flip --------------------------------------------------------------------------

B3 = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.2, 0.1], [0.9, 0.2, 0.3, 0.4]], F32)

# bb_flip(B3, **kw) as observed from DALI 2.4.
FLIP_DALI = [
    ({}, [[0.6, 0.2, 0.29999995, 0.40000004], [0.3, 0.5, 0.19999999, 0.100000024],
          [-0.20000005, 0.2, 0.30000007, 0.40000004]]),
    ({"ltrb": True, "vertical": 1}, [[0.7, 0.6, 0.9, 0.8], [0.8, 0.9, 0.5, 0.5], [0.7, 0.6, 0.100000024, 0.8]]),
    ({"horizontal": 0, "vertical": 1}, [[0.1, 0.39999998, 0.3, 0.40000004], [0.5, 0.39999998, 0.19999999, 0.100000024],
                                        [0.9, 0.39999998, 0.30000007, 0.40000004]]),
    ({"horizontal": 0}, [[0.1, 0.2, 0.3, 0.40000004], [0.5, 0.5, 0.19999999, 0.100000024],
                         [0.9, 0.2, 0.30000007, 0.40000004]]),  # no flip: still rounded through ltrb
    ({"ltrb": True, "horizontal": 0}, B3.tolist()),  # ltrb, no flip: unchanged
    ({"horizontal": -1, "vertical": 2}, [[0.6, 0.39999998, 0.29999995, 0.40000004],
                                         [0.3, 0.39999998, 0.19999999, 0.100000024],
                                         [-0.20000005, 0.39999998, 0.30000007, 0.40000004]]),  # non-zero flips
]


@pytest.mark.parametrize("kw,want", FLIP_DALI)
def test_bb_flip_as_dali(kw, want):
    out = ndd.bb_flip(ndd.as_tensor(B3), **kw)
    assert out.dtype == ndd.float32 and out.shape == (3, 4) and out.layout is None
    np.testing.assert_array_equal(np.asarray(out), np.array(want, F32))
    h, v = kw.get("horizontal", 1) != 0, kw.get("vertical", 0) != 0
    np.testing.assert_array_equal(np.asarray(out), ref_flip(B3, h, v, kw.get("ltrb", False)))


def test_bb_flip_defaults_are_dalis():
    s = ndd.bb_flip._ndd_schema
    assert {k: a.default for k, a in s.args.items()} == {"ltrb": False, "horizontal": 1, "vertical": 0}
    assert s.args["horizontal"].per_sample and s.args["vertical"].per_sample and not s.args["ltrb"].per_sample


def test_bb_flip_flat_and_nested_shapes():
    # DALI 2.4 reads any float buffer as consecutive boxes; the shape is kept.
    flat = np.asarray(ndd.bb_flip(B3[:2].reshape(-1)))
    np.testing.assert_array_equal(flat, np.array([0.6, 0.2, 0.29999995, 0.40000004, 0.3, 0.5, 0.19999999,
                                                  0.100000024], F32))  # observed from DALI 2.4
    nested = np.asarray(ndd.bb_flip(B3[:2].reshape(1, 2, 4), vertical=1))
    np.testing.assert_array_equal(nested, np.array([[[0.6, 0.39999998, 0.29999995, 0.40000004],
                                                     [0.3, 0.39999998, 0.19999999, 0.100000024]]], F32))
    empty = ndd.bb_flip(np.zeros((0, 4), F32))
    assert empty.shape == (0, 4) and empty.dtype == ndd.float32


def test_bb_flip_per_sample_flags_in_a_batch():
    batch = ndd.as_batch([B3, B3[:1], np.zeros((0, 4), F32), B3[2:]])
    out = ndd.bb_flip(batch, horizontal=ndd.as_batch([np.int32(f) for f in (1, 0, 1, 0)]),
                      vertical=ndd.as_batch([np.int32(f) for f in (1, 1, 0, 0)]))
    assert isinstance(out, ndd.Batch) and out.batch_size == 4 and out.dtype == ndd.float32
    got = as_np(out)
    want = [  # observed from DALI 2.4
        [[0.6, 0.39999998, 0.29999995, 0.40000004], [0.3, 0.39999998, 0.19999999, 0.100000024],
         [-0.20000005, 0.39999998, 0.30000007, 0.40000004]],
        [[0.1, 0.39999998, 0.3, 0.40000004]],
        np.zeros((0, 4)),
        [[0.9, 0.2, 0.30000007, 0.40000004]],
    ]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.array(w, F32).reshape(-1, 4))
    for g, s, h, v in zip(got, [B3, B3[:1], np.zeros((0, 4), F32), B3[2:]], (1, 0, 1, 0), (1, 1, 0, 0)):
        np.testing.assert_array_equal(g, ref_flip(s, h, v, False))
    # bool flags, ltrb (observed from DALI 2.4: samples 0 and 2 flipped)
    out = as_np(ndd.bb_flip(batch, ltrb=True, horizontal=ndd.as_batch([np.bool_(f) for f in (1, 0, 1, 0)])))
    np.testing.assert_array_equal(out[0], np.array([[0.7, 0.2, 0.9, 0.4], [0.8, 0.5, 0.5, 0.1],
                                                    [0.7, 0.2, 0.100000024, 0.4]], F32))
    np.testing.assert_array_equal(out[1], B3[:1])
    np.testing.assert_array_equal(out[3], B3[2:])


def test_bb_flip_dense_batch_matches_reference(rng):
    boxes = rng.random((5, 7, 4), dtype=F32)
    hs, vs = rng.integers(0, 2, 5), rng.integers(0, 2, 5)
    for ltrb in (False, True):
        out = as_np(ndd.bb_flip(ndd.as_batch(list(boxes)), ltrb=ltrb, horizontal=ndd.as_batch(list(hs.astype(np.int32))),
                                vertical=ndd.as_batch(list(vs.astype(np.int32)))))
        for g, b, h, v in zip(out, boxes, hs, vs):
            np.testing.assert_array_equal(g, ref_flip(b, h, v, ltrb))
    # a constant flag with a batch: every sample flipped
    out = as_np(ndd.bb_flip(ndd.as_batch(list(boxes)), horizontal=0, vertical=1))
    for g, b in zip(out, boxes):
        np.testing.assert_array_equal(g, ref_flip(b, False, True, False))


def test_bb_flip_keeps_the_input_layout():
    out = ndd.bb_flip(ndd.as_tensor(B3, layout="NC"))
    assert out.layout == "NC"  # (DALI 2.4 drops it and then fails its own output check)


@pytest.mark.parametrize("data,pattern", [
    (B3.astype(np.float64), r"input 'input' must be float32, got f64"),  # DALI 2.4: "Bounding box in wrong format"
    (B3.astype(np.int32), r"input 'input' must be float32, got i32"),
    (np.float32(0.5), r"must hold boxes of 4 values, got a 0-D input"),
])
def test_bb_flip_bad_input_at_the_call(data, pattern):
    with pytest.raises(ValueError, match=pattern):
        ndd.bb_flip(ndd.as_tensor(data))


@pytest.mark.parametrize("shape", [(2, 5), (1, 6), (3,), (2, 2)])
def test_bb_flip_rejects_other_box_shapes(shape):
    # DALI 2.4 returns uninitialised memory for (2, 5), (1, 6) (no 3-D boxes) and (3,).
    with raises(ValueError, r"`bb_flip`: the input must hold boxes of 4 values.*got shape " + str(shape).replace("(", r"\(").replace(")", r"\)")):
        np.asarray(ndd.bb_flip(np.zeros(shape, F32)))
    good = np.full((1,) * (len(shape) - 1) + (4,), 0.25, F32)
    batch = ndd.as_batch([good, np.zeros(shape, F32)])
    with raises(ValueError, r"sample 1 must hold boxes of 4 values"):
        as_np(ndd.bb_flip(batch))


def test_bb_flip_bad_flags():
    batch = ndd.as_batch([B3, B3])
    with raises(ValueError, r"argument 'horizontal' takes one value per sample, but sample 1 of its batch has shape \(2,\)"):
        as_np(ndd.bb_flip(batch, horizontal=ndd.as_batch([np.int32([1]), np.int32([1, 0])])))
    with pytest.raises(TypeError, match="argument 'horizontal' expects an int"):
        ndd.bb_flip(B3, horizontal=0.5)
    with pytest.raises(TypeError, match="argument 'ltrb' does not accept per-sample values"):
        ndd.bb_flip(batch, ltrb=ndd.as_batch([np.bool_(True)] * 2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'depthwise'"):
        ndd.bb_flip(B3, depthwise=1)  # DALI 2.4's bb_flip has no 3-D boxes either


# -- box_encoder ----------------------------------------------------------------------

A5 = [[0.0, 0.0, 0.5, 0.5], [0.5, 0.0, 1.0, 0.5], [0.0, 0.5, 0.5, 1.0], [0.5, 0.5, 1.0, 1.0], [0.25, 0.25, 0.75, 0.75]]
B2 = [[0.05, 0.05, 0.5, 0.45], [0.5, 0.5, 0.95, 1.0]]
NORM = {"means": [0.1, 0.2, 0.3, 0.4], "stds": [0.1, 0.1, 0.2, 0.2], "scale": 2.0}
_Z = [0.0, 0.0, 0.0, 0.0]

# (boxes, labels, anchors, kwargs, encoded boxes, labels) as observed from DALI 2.4.
ENCODE_DALI = {
    "default": (B2, [3, 7], A5, {}, [[0.275, 0.25, 0.45, 0.39999998], [0.75, 0.25, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5],
                                     [0.725, 0.75, 0.45, 0.5], [0.5, 0.5, 0.5, 0.5]], [3, 0, 0, 7, 0]),
    # criteria 0: an IoU of 0 still does not match (the test is IoU > criteria)
    "criteria_0": (B2, [3, 7], A5, {"criteria": 0.0},
                   [[0.275, 0.25, 0.45, 0.39999998], [0.75, 0.25, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5],
                    [0.725, 0.75, 0.45, 0.5], [0.725, 0.75, 0.45, 0.5]], [3, 0, 0, 7, 7]),
    # criteria 1: each box still gets its best anchor
    "criteria_1": (B2, [3, 7], A5, {"criteria": 1.0},
                   [[0.275, 0.25, 0.45, 0.39999998], [0.75, 0.25, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5],
                    [0.725, 0.75, 0.45, 0.5], [0.5, 0.5, 0.5, 0.5]], [3, 0, 0, 7, 0]),
    # scale, means and stds do nothing without offset
    "no_offset_ignores_norm": (B2, [3, 7], A5, NORM,
                               [[0.275, 0.25, 0.45, 0.39999998], [0.75, 0.25, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5],
                                [0.725, 0.75, 0.45, 0.5], [0.5, 0.5, 0.5, 0.5]], [3, 0, 0, 7, 0]),
    "empty": (np.zeros((0, 4)), [], A5, {}, [[0.25, 0.25, 0.5, 0.5], [0.75, 0.25, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5],
                                             [0.75, 0.75, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]], [0, 0, 0, 0, 0]),
    "iou_equal_to_criteria": ([[0, 0, 0.5, 0.25]], [5], [[0, 0, 0.5, 0.25], [0, 0, 0.5, 0.5]], {},
                              [[0.25, 0.125, 0.5, 0.25], [0.25, 0.25, 0.5, 0.5]], [5, 0]),
    "iou_above_criteria": ([[0, 0, 0.5, 0.25]], [5], [[0, 0, 0.5, 0.25], [0, 0, 0.5, 0.5]], {"criteria": 0.49},
                           [[0.25, 0.125, 0.5, 0.25], [0.25, 0.125, 0.5, 0.25]], [5, 5]),
    "forced_below_criteria": ([[0, 0, 0.1, 0.1]], [5], [[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]], {},
                              [[0.05, 0.05, 0.1, 0.1], [0.75, 0.75, 0.5, 0.5]], [5, 0]),
    # a box overlapping no anchor takes the last one
    "no_overlap": ([[0.6, 0.0, 0.7, 0.1], [0.1, 0.1, 0.4, 0.4]], [5, 6], [[0, 0, 0.5, 0.5], [0, 0.5, 0.5, 1]], {},
                   [[0.25, 0.25, 0.3, 0.3], [0.65, 0.05, 0.099999964, 0.1]], [6, 5]),
    "tie_anchors_last_wins": ([[0.25, 0, 0.75, 0.5]], [5], [[0, 0, 0.5, 0.5], [0.5, 0, 1, 0.5], [0.5, 0, 1, 0.5]], {},
                              [[0.25, 0.25, 0.5, 0.5], [0.75, 0.25, 0.5, 0.5], [0.5, 0.25, 0.5, 0.5]], [0, 0, 5]),
    "tie_boxes_last_wins": ([[0.1, 0.1, 0.5, 0.5], [0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]], [4, 5, 6],
                            [[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5], [0.1, 0.1, 0.5, 0.5]], {},
                            [[0.25, 0.25, 0.5, 0.5], [0.25, 0.25, 0.5, 0.5], [0.3, 0.3, 0.4, 0.4]], [6, 6, 4]),
    # box 1's best anchor is anchor 0: it takes it from box 0 (IoU 1); the later box wins
    "forced_overrides": ([[0, 0, 0.5, 0.5], [0, 0, 0.2, 0.2]], [5, 6], [[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]], {},
                         [[0.1, 0.1, 0.2, 0.2], [0.75, 0.75, 0.5, 0.5]], [6, 0]),
    "forced_overrides_reversed": ([[0, 0, 0.2, 0.2], [0, 0, 0.5, 0.5]], [6, 5], [[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]],
                                  {}, [[0.25, 0.25, 0.5, 0.5], [0.75, 0.75, 0.5, 0.5]], [5, 0]),
    "zero_area": ([[0.2, 0.2, 0.2, 0.2]], [5], [[0.2, 0.2, 0.2, 0.2], [0.6, 0.6, 1, 1], [0.2, 0.2, 0.2, 0.2]], {},
                  [[0.2, 0.2, 0.0, 0.0], [0.8, 0.8, 0.39999998, 0.39999998], [0.2, 0.2, 0.0, 0.0]], [0, 0, 5]),
    "negative_label": ([[0.0, 0.0, 0.5, 0.5]], [-3], [[0, 0, 0.5, 0.5], [0.6, 0.6, 1, 1]], {},
                       [[0.25, 0.25, 0.5, 0.5], [0.8, 0.8, 0.39999998, 0.39999998]], [-3, 0]),
}

# With offset=True (observed from DALI 2.4); unmatched anchors give 0, whatever means/stds.
OFFSET_DALI = {
    "plain": (B2, [3, 7], A5, {}, [[0.050000012, 0.0, -0.105360545, -0.2231436], _Z, _Z,
                                   [-0.049999952, 0.0, -0.105360545, 0.0], _Z], [3, 0, 0, 7, 0]),
    "normalised": (B2, [3, 7], A5, NORM, [[-0.49999988, -2.0, -2.0268028, -3.1157181], _Z, _Z,
                                          [-1.4999994, -2.0, -2.0268028, -2.0], _Z], [3, 0, 0, 7, 0]),
    "scale_300": (B2, [3, 7], A5, {"criteria": 0.1, "stds": [0.1, 0.1, 0.2, 0.2], "scale": 300.0},
                  [[0.5, 0.0, -0.5268027, -1.115718], _Z, _Z, [-0.5, 0.0, -0.5268027, 0.0],
                   [4.5, 5.0, -0.5268027, 0.0]], [3, 0, 0, 7, 7]),
    "negative_stds": (B2, [3, 7], A5, {"stds": [-1, 2, -2, 1]}, [[-0.050000012, 0.0, 0.052680273, -0.2231436], _Z, _Z,
                                                                 [0.049999952, 0.0, 0.052680273, 0.0], _Z],
                      [3, 0, 0, 7, 0]),
    "empty": (np.zeros((0, 4)), [], A5, {"means": [0.1, 0.2, 0.3, 0.4]}, [_Z] * 5, [0] * 5),
    "zero_width_box": ([[0.2, 0.2, 0.2, 0.2]], [5], [[0.2, 0.2, 0.4, 0.4], [0.6, 0.6, 1, 1]], {},
                       [_Z, [-1.5000001, -1.5000001, -np.inf, -np.inf]], [0, 5]),
}


@pytest.mark.parametrize("name", sorted(ENCODE_DALI))
def test_box_encoder_as_dali(name):
    boxes, labels, anchors, kw, want_b, want_l = ENCODE_DALI[name]
    b, lab = ndd.box_encoder(np.asarray(boxes, F32).reshape(-1, 4), np.asarray(labels, np.int32),
                             anchors=np.ravel(anchors).tolist(), **kw)
    assert (b.dtype, lab.dtype, b.layout, lab.layout) == (ndd.float32, ndd.int32, None, None)
    assert b.shape == (len(anchors), 4) and lab.shape == (len(anchors),)
    np.testing.assert_array_equal(np.asarray(b), np.array(want_b, F32))
    np.testing.assert_array_equal(np.asarray(lab), np.array(want_l, np.int32))
    rb, rl = ref_encode(boxes, labels, anchors, **kw)
    np.testing.assert_array_equal(np.asarray(b), rb)
    np.testing.assert_array_equal(np.asarray(lab), rl)


@pytest.mark.parametrize("name", sorted(OFFSET_DALI))
def test_box_encoder_offsets_as_dali(name):
    boxes, labels, anchors, kw, want_b, want_l = OFFSET_DALI[name]
    b, lab = encode(boxes, labels, anchors, offset=True, **kw)
    np.testing.assert_allclose(b, np.array(want_b, F32), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(lab, np.array(want_l, np.int32))
    rb, rl = ref_encode(boxes, labels, anchors, offset=True, **kw)
    np.testing.assert_allclose(b, rb, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(lab, rl)


def test_box_encoder_defaults_are_dalis():
    s = ndd.box_encoder._ndd_schema
    assert {k: a.default for k, a in s.args.items()} == {
        "anchors": None, "criteria": 0.5, "means": (0.0, 0.0, 0.0, 0.0), "stds": (1.0, 1.0, 1.0, 1.0),
        "offset": False, "scale": 1.0}
    assert s.args["anchors"].required and not any(a.per_sample for a in s.args.values())


def test_box_encoder_scale_zero_gives_nan_for_matched_anchors():
    # observed from DALI 2.4: 0 / 0 for the matched anchors, 0 for the others
    b, lab = encode(B2, [3, 7], A5, offset=True, scale=0.0)
    assert np.isnan(b[[0, 3]]).all() and (b[[1, 2, 4]] == 0).all()
    np.testing.assert_array_equal(lab, [3, 0, 0, 7, 0])


def test_box_encoder_labels_as_a_column():
    # DALI 2.4 takes (N, 1) labels as (N,)
    b, lab = encode(B2, np.array([[3], [7]], np.int32), A5)
    np.testing.assert_array_equal(lab, [3, 0, 0, 7, 0])
    np.testing.assert_array_equal(b, encode(B2, [3, 7], A5)[0])


@pytest.mark.parametrize("grid", [True, False])
def test_box_encoder_matches_reference_on_random_boxes(rng, grid):
    # On a coarse grid many IoUs tie exactly, which exercises the tie rules.
    for _ in range(12):
        nb, na = int(rng.integers(0, 6)), int(rng.integers(1, 30))
        corner = rng.random((nb + na, 2)) * 0.7
        side = rng.random((nb + na, 2)) * 0.5 + 0.02
        if grid:
            corner, side = np.round(corner * 8) / 8, rng.integers(1, 5, (nb + na, 2)) / 8
        xy = np.concatenate([corner, corner + side], 1).astype(F32)
        boxes, anchors = xy[:nb], xy[nb:]
        labels = rng.integers(1, 90, nb).astype(np.int32)
        kw = {"criteria": float(rng.choice([0.0, 0.25, 0.5, 0.75]))}
        b, lab = encode(boxes, labels, anchors, **kw)
        rb, rl = ref_encode(boxes, labels, anchors, **kw)
        np.testing.assert_array_equal(b, rb)
        np.testing.assert_array_equal(lab, rl)
        kw.update(means=rng.normal(size=4).tolist(), stds=(rng.random(4) + 0.1).tolist(),
                  scale=float(rng.choice([1.0, 0.5, 300.0])))
        b, lab = encode(boxes, labels, anchors, offset=True, **kw)
        rb, rl = ref_encode(boxes, labels, anchors, offset=True, **kw)
        np.testing.assert_allclose(b, rb, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(lab, rl)


def test_box_encoder_large_batches_run_on_threads_with_the_same_values(rng):
    """Enough work (boxes x anchors) splits the batch over the thread pool; every sample
    equals its encoding alone (too little work for threads) and, for one sample, the loops."""
    lo = rng.random((3000, 2)) * 0.8
    anchors = np.concatenate([lo, lo + rng.random((3000, 2)) * 0.2 + 0.01], 1).astype(F32)
    boxes, labels = [], []
    for k in (10, 0, 14, 7, 12, 9, 11, 8):
        lo = rng.random((k, 2)) * 0.7
        boxes.append(np.concatenate([lo, lo + rng.random((k, 2)) * 0.3 + 0.01], 1).astype(F32))
        labels.append(rng.integers(1, 90, k).astype(np.int32))
    assert sum(len(b) for b in boxes) * len(anchors) * 4 > 1 << 18  # over map_samples' threshold
    kw = {"anchors": anchors.ravel().tolist(), "criteria": 0.4, "offset": True, "stds": [0.1, 0.1, 0.2, 0.2]}
    old = ndd.get_num_threads()
    ndd.set_num_threads(4)
    try:
        b, lab = ndd.box_encoder(ndd.as_batch(boxes), ndd.as_batch(labels), **kw)
    finally:
        ndd.set_num_threads(old)
    for i, (g, gl) in enumerate(zip(as_np(b), as_np(lab))):
        one_b, one_l = ndd.box_encoder(ndd.as_batch([boxes[i]]), ndd.as_batch([labels[i]]), **kw)
        np.testing.assert_array_equal(g, as_np(one_b)[0])
        np.testing.assert_array_equal(gl, as_np(one_l)[0])
    rb, rl = ref_encode(boxes[3], labels[3], anchors[:400], criteria=0.4, offset=True, stds=(0.1, 0.1, 0.2, 0.2))
    got_b, got_l = encode(boxes[3], labels[3], anchors[:400], criteria=0.4, offset=True, stds=[0.1, 0.1, 0.2, 0.2])
    np.testing.assert_allclose(got_b, rb, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got_l, rl)


def test_box_encoder_batch():
    boxes = ndd.as_batch([np.array(B2, F32), np.array(B2[1:], F32), np.zeros((0, 4), F32)])
    labels = ndd.as_batch([np.array([3, 7], np.int32), np.array([9], np.int32), np.zeros((0,), np.int32)])
    b, lab = ndd.box_encoder(boxes, labels, anchors=np.ravel(A5).tolist(), offset=True, criteria=0.1)
    assert isinstance(b, ndd.Batch) and isinstance(lab, ndd.Batch) and b.batch_size == 3
    assert b.dtype == ndd.float32 and lab.dtype == ndd.int32
    off = [-0.049999952, 0.0, -0.105360545, 0.0]
    last = [0.45000005, 0.5, -0.105360545, 0.0]
    want_b = [  # observed from DALI 2.4
        [[0.050000012, 0.0, -0.105360545, -0.2231436], _Z, _Z, off, last],
        [_Z, _Z, _Z, off, last],
        [_Z] * 5,
    ]
    want_l = [[3, 0, 0, 7, 7], [0, 0, 0, 9, 9], [0] * 5]
    for g, w in zip(as_np(b), want_b):
        np.testing.assert_allclose(g, np.array(w, F32), rtol=1e-6, atol=0)
    assert [t.tolist() for t in as_np(lab)] == want_l
    # a Tensor of boxes is shared by every sample of a Batch of labels
    b, lab = ndd.box_encoder(np.array(B2, F32), ndd.as_batch([np.int32([3, 7]), np.int32([1, 2])]),
                             anchors=np.ravel(A5).tolist())
    assert [t.tolist() for t in as_np(lab)] == [[3, 0, 0, 7, 0], [1, 0, 0, 2, 0]]
    np.testing.assert_array_equal(as_np(b)[0], as_np(b)[1])


@pytest.mark.parametrize("kw,exc,pattern", [
    ({}, TypeError, r"missing the required argument 'anchors'"),
    ({"anchors": [0.0, 0.0, 0.5]}, ValueError, r"argument 'anchors' must be a non-empty list .* got 3 value"),
    ({"anchors": 0.5}, ValueError, r"argument 'anchors' .* got 1 value"),
    ({"anchors": []}, ValueError, r"argument 'anchors' .* got 0 value"),  # DALI 2.4 crashes (SIGSEGV)
    ({"criteria": 1.5}, ValueError, r"argument 'criteria' must be in \[0, 1\], got 1.5"),
    ({"criteria": -0.1}, ValueError, r"argument 'criteria' must be in \[0, 1\], got -0.1"),
    ({"means": [0, 0, 0]}, ValueError, r"argument 'means' must have 4 values .*got 3"),
    ({"means": 0.5}, ValueError, r"argument 'means' must have 4 values .*got 1"),
    ({"stds": [1, 1, 1, 1, 1]}, ValueError, r"argument 'stds' must have 4 values .*got 5"),
    ({"stds": [1, 1, 0, 1]}, ValueError, r"argument 'stds' must not contain 0"),  # (DALI: even without offset)
    ({"scale": float("inf")}, ValueError, r"argument 'scale' must be finite"),
    ({"anchors": [0.0, 0.0, float("nan"), 0.5]}, ValueError, r"argument 'anchors' must be finite"),
])
def test_box_encoder_bad_arguments(kw, exc, pattern):
    if exc is not TypeError:
        kw = {"anchors": np.ravel(A5).tolist(), **kw}
    with pytest.raises(exc, match=pattern):
        ndd.box_encoder(np.array(B2, F32), np.int32([3, 7]), **kw)


@pytest.mark.parametrize("boxes,labels,pattern", [
    (np.array(B2, np.float64), np.int32([3, 7]), r"input 'bboxes' must be float32, got f64"),
    (np.array(B2, F32), np.int64([3, 7]), r"input 'labels' must be int32, got i64"),
    (np.array(B2, F32), np.float32([3, 7]), r"input 'labels' must be int32, got f32"),
    (np.array(B2, F32).ravel(), np.int32([3, 7]), r"input 'bboxes' must be 2-D, got 1-D"),
    (np.array(B2, F32)[None], np.int32([3, 7]), r"input 'bboxes' must be 2-D, got 3-D"),
    (np.array(B2, F32), np.int32(3), r"input 'labels' must be 1-D or 2-D, got 0-D"),
])
def test_box_encoder_bad_inputs_at_the_call(boxes, labels, pattern):
    with pytest.raises(ValueError, match=pattern):
        ndd.box_encoder(boxes, labels, anchors=np.ravel(A5).tolist())


@pytest.mark.parametrize("boxes,labels,pattern", [
    (np.zeros((2, 3), F32), np.int32([3, 7]), r"bboxes of the input must have shape \(N, 4\), got \(2, 3\)"),
    (np.array(B2, F32), np.int32([3]), r"labels of the input must have shape \(2,\) or \(2, 1\), one per box, "
                                       r"got \(1,\)"),  # DALI 2.4 reads past the end
    (np.array(B2, F32), np.int32([[3, 4], [7, 8]]), r"labels .* got \(2, 2\)"),
])
def test_box_encoder_bad_shapes(boxes, labels, pattern):
    with raises(ValueError, pattern):
        np.asarray(ndd.box_encoder(boxes, labels, anchors=np.ravel(A5).tolist())[0])


def test_box_encoder_bad_sample_in_a_batch():
    boxes = ndd.as_batch([np.array(B2, F32), np.array(B2, F32)])
    labels = ndd.as_batch([np.int32([3, 7]), np.int32([1, 2, 3])])
    with raises(ValueError, r"labels of sample 1 must have shape \(2,\) or \(2, 1\)"):
        as_np(ndd.box_encoder(boxes, labels, anchors=np.ravel(A5).tolist())[1])
