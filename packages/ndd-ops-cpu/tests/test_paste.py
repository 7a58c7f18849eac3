"""The paste family (coord_flip, paste, bbox_paste, bbox_rotate, multi_paste) against
independent references written here: per-point / per-box float32 loops of the documented
formulas, and canvases built pixel region by region.

Tolerances: coord_flip, bbox_paste and the paste geometry are float32 operations in DALI's
order, compared exactly; paste and multi_paste copy pixels, compared exactly; bbox_rotate
computes in float32 and is compared with an absolute tolerance of 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest
from ops_cpu_helpers import as_np, raises

import ndd

F32 = np.float32


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# -- coord_flip -----------------------------------------------------------------------


def ref_coord_flip(pts: np.ndarray, layout: str, flips: dict, centers: dict) -> np.ndarray:
    """Point by point: coordinate c (found in ``layout``) becomes 2 * center - v."""
    pts = np.asarray(pts, F32)
    out = pts.copy()
    lay = layout or "xyz"[:pts.shape[1]]
    for p in range(len(pts)):
        for c in "xyz"[:pts.shape[1]]:
            if flips.get(c, 1 if c == "x" else 0):
                k = lay.index(c)
                out[p, k] = F32(2) * F32(centers.get(c, 0.5)) - pts[p, k]
    return out


@pytest.mark.parametrize("d", [1, 2, 3])
def test_coord_flip_defaults_flip_x_about_half(d):
    pts = _rng(d).uniform(-1, 2, (7, d)).astype(F32)
    out = as_np(ndd.coord_flip(pts))
    assert out.dtype == F32 and out.shape == pts.shape
    np.testing.assert_array_equal(out, ref_coord_flip(pts, "", {}, {}))
    np.testing.assert_array_equal(out[:, 0], F32(1) - pts[:, 0])  # hand formula: 1 - x
    np.testing.assert_array_equal(out[:, 1:], pts[:, 1:])


def test_coord_flip_layout_and_centers():
    pts = _rng(1).uniform(0, 1, (5, 3)).astype(F32)
    out = as_np(ndd.coord_flip(pts, layout="zxy", flip_x=0, flip_y=1, flip_z=1, center_y=0.25, center_z=0.0))
    np.testing.assert_array_equal(out[:, 0], -pts[:, 0])  # z in column 0, about 0
    np.testing.assert_array_equal(out[:, 1], pts[:, 1])  # x not flipped
    np.testing.assert_array_equal(out[:, 2], F32(0.5) - pts[:, 2])  # y about 0.25
    # a longer layout than the points is fine while x and y fall inside them
    two = pts[:, :2]
    np.testing.assert_array_equal(as_np(ndd.coord_flip(two, layout="xyz", flip_y=1)),
                                  ref_coord_flip(two, "xy", {"y": 1}, {}))


def test_coord_flip_ragged_batch_per_sample_args():
    rng = _rng(2)
    pts = [rng.uniform(-1, 2, (n, 2)).astype(F32) for n in (4, 0, 6)]
    fx = [np.int32(v) for v in (1, 0, 2)]
    cy = [F32(v) for v in (0.5, 0.1, -0.3)]
    out = as_np(ndd.coord_flip(ndd.batch(pts), flip_x=ndd.batch(fx), flip_y=1, center_y=ndd.batch(cy)))
    for i in range(3):
        np.testing.assert_array_equal(out[i], ref_coord_flip(pts[i], "", {"x": fx[i], "y": 1}, {"y": cy[i]}))
    assert out[1].shape == (0, 2)


def test_coord_flip_uniform_batch_matches_per_sample():
    rng = _rng(3)
    pts = rng.uniform(0, 1, (4, 5, 3)).astype(F32)
    fz = [np.int32(v) for v in (0, 1, 1, 0)]
    cz = [F32(v) for v in rng.uniform(0, 1, 4)]
    out = as_np(ndd.coord_flip(ndd.batch(list(pts)), flip_z=ndd.batch(fz), center_z=ndd.batch(cz), flip_x=0))
    for i in range(4):
        np.testing.assert_array_equal(out[i], ref_coord_flip(pts[i], "", {"x": 0, "z": fz[i]}, {"z": cz[i]}))


def test_coord_flip_errors():
    pts = np.zeros((3, 2), F32)
    with raises(ValueError, "coord_flip.*must be f32"):
        ndd.coord_flip(pts.astype(np.float64))
    with raises(ValueError, "coord_flip.*2-D"):
        ndd.coord_flip(pts.ravel())
    with raises(ValueError, "coord_flip.*1 to 3 coordinates"):
        ndd.coord_flip(np.zeros((3, 4), F32)).evaluate()
    with raises(ValueError, "coord_flip.*'layout'.*'y'"):
        ndd.coord_flip(pts, layout="x").evaluate()
    with raises(ValueError, "coord_flip.*'layout'.*'x'"):
        ndd.coord_flip(pts, layout="yzx").evaluate()


# -- paste ----------------------------------------------------------------------------


def ref_paste(img: np.ndarray, ratio: float, px: float, py: float, fill, min_canvas: float = 0.0) -> np.ndarray:
    """Canvas int(size * ratio) (at least int(min_canvas)), float32 as DALI; the image at
    int(paste * (canvas - size)); the rest fill (wrapped to uint8)."""
    h, w, c = img.shape
    r = F32(ratio)
    ch = max(int(F32(h) * r), int(F32(min_canvas)))
    cw = max(int(F32(w) * r), int(F32(min_canvas)))
    y0, x0 = int(F32(py) * F32(ch - h)), int(F32(px) * F32(cw - w))
    fill = [int(v) % 256 for v in fill]
    out = np.empty((ch, cw, c), np.uint8)
    for y in range(ch):
        for x in range(cw):
            inside = y0 <= y < y0 + h and x0 <= x < x0 + w
            out[y, x] = img[y - y0, x - x0] if inside else (fill if len(fill) > 1 else fill * c)
    return out


def test_paste_hand_case():
    img = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3) + 10
    out = as_np(ndd.paste(img, ratio=2.0, fill_value=(1, 2, 3), paste_x=0.0, paste_y=1.0))
    assert out.shape == (4, 4, 3)
    np.testing.assert_array_equal(out[2:, :2], img)  # bottom left
    np.testing.assert_array_equal(out[:2], np.broadcast_to(np.uint8([1, 2, 3]), (2, 4, 3)))
    np.testing.assert_array_equal(out[2:, 2:], np.broadcast_to(np.uint8([1, 2, 3]), (2, 2, 3)))


def test_paste_layout_and_dtype():
    img = np.zeros((3, 4, 3), np.uint8)
    out = ndd.paste(img, ratio=1.5, fill_value=(0,))
    assert out.layout == "HWC" and out.dtype == ndd.uint8 and out.shape == (4, 6, 3)


@pytest.mark.parametrize("seed", range(4))
def test_paste_random_against_reference(seed):
    rng = _rng(10 + seed)
    c = int(rng.choice([1, 3, 4]))
    for _ in range(10):
        img = rng.integers(0, 256, (int(rng.integers(0, 12)), int(rng.integers(0, 12)), c), dtype=np.uint8)
        ratio = float(rng.integers(3, 40)) / float(rng.integers(2, 4)) if rng.random() < 0.5 else rng.uniform(1, 3)
        px, py = rng.uniform(0, 1, 2)
        fill = [int(v) for v in rng.integers(-300, 300, int(rng.choice([1, c])))]
        mcs = float(rng.uniform(-0.9, 30)) if rng.random() < 0.3 else 0.0
        out = as_np(ndd.paste(img, ratio=ratio, fill_value=fill, paste_x=px, paste_y=py, n_channels=c,
                              min_canvas_size=mcs))
        np.testing.assert_array_equal(out, ref_paste(img, ratio, px, py, fill, mcs))


def test_paste_ragged_batch_per_sample_args():
    rng = _rng(5)
    imgs = [rng.integers(0, 256, s, dtype=np.uint8) for s in ((5, 7, 3), (2, 3, 3), (6, 1, 3))]
    ratio = [F32(v) for v in (1.0, 3.0, 2.5)]
    px = [F32(v) for v in (0.0, 1.0, 0.3)]
    mcs = [F32(v) for v in (0.0, 12.0, 0.0)]
    out = as_np(ndd.paste(ndd.batch(imgs), ratio=ndd.batch(ratio), paste_x=ndd.batch(px), paste_y=0.75,
                          min_canvas_size=ndd.batch(mcs), fill_value=(7, 8, 9)))
    for i in range(3):
        np.testing.assert_array_equal(out[i], ref_paste(imgs[i], ratio[i], px[i], 0.75, (7, 8, 9), mcs[i]))


def test_paste_errors():
    img = np.zeros((3, 4, 3), np.uint8)
    with raises(ValueError, "paste.*'ratio'.*at least 1.*sample 1"):
        ndd.paste(ndd.batch([img, img]), ratio=ndd.batch([F32(1), F32(0.5)]), fill_value=(0,)).evaluate()
    with raises(ValueError, "paste.*'paste_x'.*\\[0, 1\\]"):
        ndd.paste(img, ratio=2.0, fill_value=(0,), paste_x=1.5).evaluate()
    with raises(ValueError, "paste.*'min_canvas_size'"):
        ndd.paste(img, ratio=2.0, fill_value=(0,), min_canvas_size=-1.0).evaluate()
    with raises(ValueError, "paste.*'fill_value'.*n_channels"):
        ndd.paste(img, ratio=2.0, fill_value=(1, 2))
    with raises(ValueError, "paste.*4 channels.*'fill_value'"):
        ndd.paste(np.zeros((3, 4, 4), np.uint8), ratio=2.0, fill_value=(1, 2, 3)).evaluate()
    with raises(ValueError, "paste.*must be u8"):
        ndd.paste(img.astype(F32), ratio=2.0, fill_value=(0,))
    with raises(ValueError, "paste.*HWC"):
        ndd.paste(ndd.tensor(img, layout="CHW"), ratio=2.0, fill_value=(0,))
    with raises(TypeError, "paste.*'fill_value'"):
        ndd.paste(img, ratio=2.0)


# -- bbox_paste -----------------------------------------------------------------------


def ref_bbox_paste(boxes: np.ndarray, ratio: float, px: float, py: float, ltrb: bool) -> np.ndarray:
    """Box by box in float32: corners c * (1 / r) + p * ((r - 1) / r), sizes w * (1 / r)."""
    r = F32(ratio)
    inv, move = F32(1) / r, (r - F32(1)) / r
    sx, sy = F32(px) * move, F32(py) * move
    out = []
    for a, b, c, d in np.asarray(boxes, F32).reshape(-1, 4):
        if ltrb:
            out.append([a * inv + sx, b * inv + sy, c * inv + sx, d * inv + sy])
        else:
            out.append([a * inv + sx, b * inv + sy, c * inv, d * inv])
    return np.array(out, F32).reshape(np.shape(boxes))


def test_bbox_paste_hand_case():
    b = np.array([[0.0, 0.0, 1.0, 1.0]], F32)
    # the whole image pasted at the bottom right of a 4x canvas covers its last quarter
    np.testing.assert_allclose(as_np(ndd.bbox_paste(b, ratio=4.0, paste_x=1.0, paste_y=1.0, ltrb=True)),
                               [[0.75, 0.75, 1.0, 1.0]], atol=1e-7)
    np.testing.assert_allclose(as_np(ndd.bbox_paste(b, ratio=2.0)), [[0.25, 0.25, 0.5, 0.5]], atol=1e-7)


@pytest.mark.parametrize("ltrb", [False, True])
def test_bbox_paste_random_against_reference(ltrb):
    rng = _rng(20 + ltrb)
    for _ in range(20):
        boxes = rng.uniform(-0.2, 1.2, (int(rng.integers(0, 6)), 4)).astype(F32)
        r, px, py = F32(rng.uniform(1, 5)), F32(rng.uniform(0, 1)), F32(rng.uniform(0, 1))
        out = as_np(ndd.bbox_paste(boxes, ratio=r, paste_x=px, paste_y=py, ltrb=ltrb))
        assert out.dtype == F32 and out.shape == boxes.shape
        np.testing.assert_array_equal(out, ref_bbox_paste(boxes, r, px, py, ltrb))


def test_bbox_paste_batches_and_shapes():
    rng = _rng(22)
    boxes = [rng.uniform(0, 1, s).astype(F32) for s in ((3, 4), (0, 4), (2, 8))]
    ratio = [F32(v) for v in (1.0, 2.0, 3.5)]
    out = as_np(ndd.bbox_paste(ndd.batch(boxes), ratio=ndd.batch(ratio), paste_y=0.2))
    for i in range(3):
        assert out[i].shape == boxes[i].shape
        np.testing.assert_array_equal(out[i], ref_bbox_paste(boxes[i], ratio[i], 0.5, 0.2, False))
    dense = rng.uniform(0, 1, (3, 2, 4)).astype(F32)
    px = [F32(v) for v in (0.0, 0.5, 1.0)]
    out = as_np(ndd.bbox_paste(ndd.batch(list(dense)), ratio=2.0, paste_x=ndd.batch(px), ltrb=True))
    for i in range(3):
        np.testing.assert_array_equal(out[i], ref_bbox_paste(dense[i], 2.0, px[i], 0.5, True))


def test_bbox_paste_errors():
    with raises(ValueError, "bbox_paste.*multiple of 4"):
        ndd.bbox_paste(np.zeros((2, 3), F32), ratio=2.0).evaluate()
    with raises(ValueError, "bbox_paste.*'ratio'.*at least 1"):
        ndd.bbox_paste(np.zeros((2, 4), F32), ratio=0.5).evaluate()
    with raises(ValueError, "bbox_paste.*must be f32"):
        ndd.bbox_paste(np.zeros((2, 4)), ratio=2.0)
    with raises(TypeError, "bbox_paste.*'ratio'"):
        ndd.bbox_paste(np.zeros((2, 4), F32))


# -- bbox_rotate ----------------------------------------------------------------------


def ref_bbox_rotate(boxes, angle, h, w, oh, ow, mode="expand", thr=0.1, normalized=True, xywh=False):
    """Box by box with math: corners about the image centre, x' = x cos + y sin,
    y' = y cos - x sin (counter-clockwise on screen); the enclosing box (expand), the box's
    own size turned a quarter when the rotation is nearer one (fixed), or their mean
    (halfway); then clipped to the canvas, kept when that leaves >= thr of its area."""
    import math

    a = math.radians(angle)
    c, s = math.cos(a), math.sin(a)
    out, keep = [], []
    for x0, y0, x1, y1 in np.asarray(boxes, np.float64).reshape(-1, 4):
        if xywh:
            x1, y1 = x0 + x1, y0 + y1
        sx, sy = (w, h) if normalized else (1, 1)
        xs = [x * sx - w / 2 for x in (x0, x1, x1, x0)]
        ys = [y * sy - h / 2 for y in (y0, y0, y1, y1)]
        xr = [x * c + y * s for x, y in zip(xs, ys)]
        yr = [y * c - x * s for x, y in zip(xs, ys)]
        cx, cy = (min(xr) + max(xr)) / 2, (min(yr) + max(yr)) / 2
        ew, eh = max(xr) - min(xr), max(yr) - min(yr)
        bw, bh = (x1 - x0) * sx, (y1 - y0) * sy
        if abs(s) > abs(c) + 1e-6:
            bw, bh = bh, bw
        bw, bh = {"expand": (ew, eh), "fixed": (bw, bh), "halfway": ((ew + bw) / 2, (eh + bh) / 2)}[mode]
        box = [cx - bw / 2 + ow / 2, cy - bh / 2 + oh / 2, cx + bw / 2 + ow / 2, cy + bh / 2 + oh / 2]
        lim = (ow, oh)
        if normalized:
            box = [box[0] / ow, box[1] / oh, box[2] / ow, box[3] / oh]
            lim = (1, 1)
        area = (box[2] - box[0]) * (box[3] - box[1])
        box = [min(max(v, 0), lim[k % 2]) for k, v in enumerate(box)]
        inside = (box[2] - box[0]) * (box[3] - box[1])
        keep.append(area > 0 and inside / area >= thr)
        if xywh:
            box[2], box[3] = box[2] - box[0], box[3] - box[1]
        out.append(box)
    out = np.array(out, F32).reshape(-1, 4)
    return out[np.array(keep, bool)] if len(out) else out, np.array(keep, bool)


def test_bbox_rotate_quarter_turn_by_hand():
    # a 100 x 200 image turned 90 degrees counter-clockwise becomes 200 x 100: the box
    # x 20..60, y 20..50 (pixels) goes to x 20..50, y 140..180
    b = np.array([[0.1, 0.2, 0.3, 0.5]], F32)
    out = as_np(ndd.bbox_rotate(b, angle=90.0, input_shape=[100, 200]))
    np.testing.assert_allclose(out, [[20 / 100, 140 / 200, 50 / 100, 180 / 200]], atol=1e-6)
    px = as_np(ndd.bbox_rotate((b * [200, 100, 200, 100]).astype(F32), angle=90.0, input_shape=[100, 200],
                               bbox_normalized=False))
    np.testing.assert_allclose(px, [[20, 140, 50, 180]], atol=1e-4)


@pytest.mark.parametrize("mode", ["expand", "fixed", "halfway"])
def test_bbox_rotate_random_against_reference(mode):
    rng = _rng(30)
    for _ in range(15):
        h, w = (int(v) for v in rng.integers(10, 300, 2))
        p = rng.uniform(-0.1, 1.0, (int(rng.integers(0, 6)), 2))
        boxes = np.concatenate([p, p + rng.uniform(0.01, 0.5, p.shape)], 1).astype(F32)
        angle = float(rng.uniform(-360, 360))
        keep_size = bool(rng.random() < 0.5)
        if keep_size:
            oh, ow = h, w
        else:
            a = math_radians32(angle)
            oh, ow = rotated_canvas(h, w, a)
        thr = float(rng.uniform(0, 0.9))
        out = as_np(ndd.bbox_rotate(boxes, angle=angle, input_shape=[h, w], keep_size=keep_size, mode=mode,
                                    remove_threshold=thr))
        ref, _ = ref_bbox_rotate(boxes, angle, h, w, oh, ow, mode, thr)
        assert out.dtype == F32 and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, atol=1e-6)


def math_radians32(angle: float) -> float:
    return float(np.float32(np.radians(np.float64(angle))))


def rotated_canvas(h: int, w: int, a: float) -> tuple[int, int]:
    """rotate's canvas: the rotated image's bounding box, rounded up, with the parity of
    the input extent that dominates it."""
    import math

    c, s = abs(math.cos(a)), abs(math.sin(a))
    ow, oh = math.ceil(c * w + s * h - 1e-2), math.ceil(c * h + s * w - 1e-2)
    pw, ph = (w % 2, h % 2) if s <= c else (h % 2, w % 2)
    return oh + ((oh % 2) ^ ph), ow + ((ow % 2) ^ pw)


def test_bbox_rotate_labels_removed_with_their_boxes():
    b = np.array([[0.1, 0.2, 0.3, 0.5], [0.0, 0.0, 0.05, 0.05], [0.9, 0.4, 1.0, 0.6]], F32)
    lab = np.array([7, 8, 9], np.int32)
    ref, keep = ref_bbox_rotate(b, 30.0, 100, 200, 100, 200)
    assert keep.tolist() == [True, False, True]  # the corner box turns out of the image
    boxes, labels = ndd.bbox_rotate(b, lab, angle=30.0, input_shape=[100, 200], keep_size=True)
    np.testing.assert_allclose(as_np(boxes), ref, atol=1e-6)
    assert as_np(labels).tolist() == [7, 9] and labels.dtype == ndd.int32
    _, lab2 = ndd.bbox_rotate(b, lab[:, None], angle=30.0, input_shape=[100, 200], keep_size=True,
                              remove_threshold=0.0)
    assert as_np(lab2).tolist() == [[7], [8], [9]]


def test_bbox_rotate_batch_per_sample_and_options():
    rng = _rng(31)
    boxes = [rng.uniform(0, 0.5, (n, 4)).astype(F32) for n in (3, 0, 5)]
    for b in boxes:
        b[:, 2:] += b[:, :2]
    angles = [F32(v) for v in (30.0, -75.0, 200.0)]
    shapes = [np.array(v, np.int32) for v in ((40, 60), (50, 50), (120, 90))]
    out, labels = ndd.bbox_rotate(ndd.batch(boxes), ndd.batch([np.arange(len(b), dtype=np.int32) for b in boxes]),
                                  angle=ndd.batch(angles), input_shape=ndd.batch(shapes), size=(150.7, 90.2))
    for i in range(3):
        ref, keep = ref_bbox_rotate(boxes[i], float(angles[i]), *shapes[i], 150, 90)
        np.testing.assert_allclose(as_np(out)[i], ref, atol=1e-6)
        assert as_np(labels)[i].tolist() == np.flatnonzero(keep).tolist()
    # xyWH boxes in pixels, input_shape in WH order
    b = np.array([[10, 20, 30, 40]], F32)
    got = as_np(ndd.bbox_rotate(b, angle=20.0, input_shape=[80, 60], shape_layout="WH", bbox_layout="xyWH",
                                bbox_normalized=False, mode="halfway"))
    ref, _ = ref_bbox_rotate(b, 20.0, 60, 80, *rotated_canvas(60, 80, math_radians32(20.0)), mode="halfway",
                             normalized=False, xywh=True)
    np.testing.assert_allclose(got, ref, atol=1e-4)


def test_bbox_rotate_errors():
    b = np.zeros((2, 4), F32)
    with raises(ValueError, "bbox_rotate.*'keep_size' and 'size'"):
        ndd.bbox_rotate(b, angle=10.0, input_shape=[10, 10], keep_size=True, size=[5, 5])
    with raises(ValueError, "bbox_rotate.*'remove_threshold'.*\\[0, 1\\)"):
        ndd.bbox_rotate(b, angle=10.0, input_shape=[10, 10], remove_threshold=1.0)
    with raises(ValueError, "bbox_rotate.*'mode'"):
        ndd.bbox_rotate(b, angle=10.0, input_shape=[10, 10], mode="grow")
    with raises(ValueError, "bbox_rotate.*'bbox_layout'"):
        ndd.bbox_rotate(b, angle=10.0, input_shape=[10, 10], bbox_layout="XYxy")
    with raises(ValueError, "bbox_rotate.*'shape_layout'"):
        ndd.bbox_rotate(b, angle=10.0, input_shape=[10, 10], shape_layout="XY")
    with raises(ValueError, "bbox_rotate.*'input_shape'.*too few"):
        ndd.bbox_rotate(b, angle=10.0, input_shape=[10]).evaluate()
    with raises(ValueError, "bbox_rotate.*'size'.*2 values"):
        ndd.bbox_rotate(b, angle=10.0, input_shape=[10, 10], size=[5]).evaluate()
    with raises(ValueError, "bbox_rotate.*2 boxes but 3 labels"):
        ndd.bbox_rotate(b, np.zeros(3, np.int32), angle=10.0, input_shape=[10, 10])[0].evaluate()
    with raises(ValueError, "bbox_rotate.*'labels'.*int32|bbox_rotate.*must be i32"):
        ndd.bbox_rotate(b, np.zeros(2, np.int64), angle=10.0, input_shape=[10, 10])
    with raises(ValueError, "bbox_rotate.*\\(N, 4\\)"):
        ndd.bbox_rotate(np.zeros((2, 5), F32), angle=10.0, input_shape=[10, 10]).evaluate()
    with raises(TypeError, "bbox_rotate.*'angle'"):
        ndd.bbox_rotate(b, input_shape=[10, 10])


# -- multi_paste ----------------------------------------------------------------------


def ref_multi_paste(sources, size, in_anchors=None, shapes=None, out_anchors=None, dtype=None):
    """Zero canvas; each region copied pixel by pixel in order (later ones on top); values
    converted as DALI: rounded half away from zero, saturated."""
    dtype = np.dtype(dtype or sources[0].dtype)
    out = np.zeros((*size, sources[0].shape[2] if sources else 1), dtype)
    for k, src in enumerate(sources):
        y, x = in_anchors[k] if in_anchors is not None else (0, 0)
        h, w = shapes[k] if shapes is not None else (src.shape[0] - y, src.shape[1] - x)
        oy, ox = out_anchors[k] if out_anchors is not None else (0, 0)
        for r in range(h):
            for c in range(w):
                v = src[y + r, x + c].astype(np.float64)
                if dtype.kind in "iu":
                    info = np.iinfo(dtype)
                    v = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), info.min, info.max)
                out[oy + r, ox + c] = v
    return out


def _ints(*rows):
    return ndd.batch([np.array(r, np.int32).reshape(-1, 2) for r in rows])


def test_multi_paste_in_ids_regions():
    imgs = [np.arange(1, 21, dtype=np.uint8).reshape(4, 5, 1), np.arange(101, 121, dtype=np.uint8).reshape(4, 5, 1)]
    out = as_np(ndd.multi_paste(
        ndd.batch(imgs), in_ids=ndd.batch([np.array([0, 1], np.int32), np.array([1], np.int32)]), output_size=[6, 6],
        in_anchors=_ints([[1, 1], [0, 0]], [[1, 0]]), shapes=_ints([[2, 2], [2, 3]], [[3, 3]]),
        out_anchors=_ints([[0, 0], [2, 1]], [[1, 2]])))
    # by hand: sample 0 gets img0[1:3, 1:3] at (0, 0) and img1[0:2, 0:3] at (2, 1)
    want0 = np.zeros((6, 6, 1), np.uint8)
    want0[0:2, 0:2] = imgs[0][1:3, 1:3]
    want0[2:4, 1:4] = imgs[1][0:2, 0:3]
    np.testing.assert_array_equal(out[0], want0)
    np.testing.assert_array_equal(out[1], ref_multi_paste([imgs[1]], (6, 6), [[1, 0]], [[3, 3]], [[1, 2]]))


def test_multi_paste_several_inputs_default_canvas_and_overlap():
    rng = _rng(40)
    a = [rng.integers(0, 256, (5, 6, 3), dtype=np.uint8) for _ in range(2)]
    b = [rng.integers(0, 256, (5, 6, 3), dtype=np.uint8) for _ in range(2)]
    out = as_np(ndd.multi_paste(ndd.batch(a), ndd.batch(b), out_anchors=_ints([[0, 0], [2, 3]], [[1, 1], [0, 0]]),
                                shapes=_ints([[5, 6], [3, 3]], [[4, 5], [5, 6]])))
    for i in range(2):
        want = ref_multi_paste([a[i], b[i]], (5, 6), shapes=[[5, 6], [3, 3]] if i == 0 else [[4, 5], [5, 6]],
                               out_anchors=[[0, 0], [2, 3]] if i == 0 else [[1, 1], [0, 0]])
        np.testing.assert_array_equal(out[i], want)
    np.testing.assert_array_equal(out[1], b[1])  # the second region covers all of the first
    t = ndd.multi_paste(ndd.tensor(a[0]), in_ids=[0, 0], output_size=[7, 8], out_anchors=[[0, 0], [2, 2]])
    assert isinstance(t, ndd.Tensor) and t.layout == "HWC"
    np.testing.assert_array_equal(as_np(t), ref_multi_paste([a[0], a[0]], (7, 8), out_anchors=[[0, 0], [2, 2]]))


def test_multi_paste_relative_arguments_round_anchors_down_shapes_up():
    img = np.arange(1, 101, dtype=np.uint8).reshape(10, 10, 1)
    rel = lambda v: ndd.batch([np.array(v, F32).reshape(-1, 2)])  # noqa: E731
    out = as_np(ndd.multi_paste(ndd.batch([img]), in_ids=ndd.batch([np.array([0], np.int32)]), output_size=[20, 20],
                                in_anchors_rel=rel([0.18, 0.52]), shapes_rel=rel([0.38, 0.12]),
                                out_anchors_rel=rel([0.249, 0.5])))[0]
    # anchor floor(1.8, 5.2) = (1, 5); shape ceil(3.8, 1.2) = (4, 2); at floor(4.98, 10) = (4, 10)
    np.testing.assert_array_equal(out, ref_multi_paste([img], (20, 20), [[1, 5]], [[4, 2]], [[4, 10]]))


@pytest.mark.parametrize("dtype", [ndd.uint8, ndd.int16, ndd.int32, ndd.float32])
def test_multi_paste_dtype_conversion(dtype):
    img = np.array([[3.5, -1, 300, 2.5], [0.49, 255.5, -0.5, 1e10]], F32)[..., None]
    out = ndd.multi_paste(ndd.batch([img]), in_ids=ndd.batch([np.array([0], np.int32)]), dtype=dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(as_np(out)[0], ref_multi_paste([img], (2, 4), dtype=dtype.numpy_dtype))


def test_multi_paste_errors():
    imgs = ndd.batch([np.zeros((4, 5, 1), np.uint8), np.zeros((3, 4, 1), np.uint8)])
    ids = ndd.batch([np.array([0], np.int32), np.array([1], np.int32)])
    with raises(ValueError, "multi_paste.*same shape"):
        ndd.multi_paste(imgs, in_ids=ids).evaluate()
    with raises(ValueError, "multi_paste.*not within the output"):
        ndd.multi_paste(imgs, in_ids=ids, output_size=[3, 3]).evaluate()
    with raises(ValueError, "multi_paste.*not within its input"):
        ndd.multi_paste(imgs, in_ids=ids, output_size=[6, 6], in_anchors=_ints([[1, 1]], [[0, 0]]),
                        shapes=_ints([[4, 4]], [[1, 1]])).evaluate()
    with raises(ValueError, "multi_paste.*'in_ids'.*\\[0, 1\\]"):
        ndd.multi_paste(imgs, in_ids=ndd.batch([np.array([2], np.int32)] * 2), output_size=[6, 6]).evaluate()
    with raises(ValueError, "multi_paste.*'in_anchors' and 'in_anchors_rel'"):
        ndd.multi_paste(imgs, in_ids=ids, in_anchors=[[0, 0]], in_anchors_rel=[[0.5, 0.5]])
    with raises(ValueError, "multi_paste.*'shapes_rel'.*\\[0, 1\\]"):
        ndd.multi_paste(imgs, in_ids=ids, output_size=[6, 6], shapes_rel=[[1.5, 0.5]]).evaluate()
    with raises(ValueError, "multi_paste.*'out_anchors'.*\\(1, 2\\)"):
        ndd.multi_paste(imgs, in_ids=ids, output_size=[6, 6], out_anchors=_ints([[0, 0], [1, 1]], [[0, 0]])).evaluate()
    with raises(ValueError, "multi_paste.*exactly one input"):
        ndd.multi_paste(imgs, imgs, in_ids=ids)
    with raises(ValueError, "multi_paste.*same type"):
        ndd.multi_paste(imgs, ndd.batch([np.zeros((4, 5, 1), np.int16)] * 2), output_size=[6, 6])
    with raises(ValueError, "multi_paste.*supported"):
        ndd.multi_paste(ndd.batch([np.zeros((4, 5, 1), np.uint16)]), in_ids=[0])
    with raises(ValueError, "multi_paste.*'dtype'"):
        ndd.multi_paste(imgs, in_ids=ids, output_size=[6, 6], dtype=ndd.int8)
    with raises(ValueError, "multi_paste.*HWC"):
        ndd.multi_paste(ndd.batch([np.zeros((4, 5), np.uint8)]), in_ids=[0])
    with raises(ValueError, "multi_paste.*different numbers of channels"):
        ndd.multi_paste(ndd.batch([np.zeros((4, 5, 1), np.uint8), np.zeros((4, 5, 3), np.uint8)]),
                        in_ids=[0, 1]).evaluate()
