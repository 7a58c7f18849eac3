"""``ndd.readers.COCO(pixelwise_masks=True)``: polygons and RLE (list and compressed string)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ndd
from ndd_readers import _coco


def pnpoly(poly, h: int, w: int) -> np.ndarray:
    """Reference: a pixel is inside when its centre is (W. R. Franklin's crossing test)."""
    out = np.zeros((h, w), bool)
    n = len(poly)
    for y in range(h):
        for x in range(w):
            px, py, c = x + 0.5, y + 0.5, False
            for i in range(n):
                (xa, ya), (xb, yb) = poly[i], poly[(i + 1) % n]
                if (ya > py) != (yb > py) and px < xa + (py - ya) * (xb - xa) / (yb - ya):
                    c = not c
            out[y, x] = c
    return out


def rect(x0, y0, x1, y1) -> list[float]:
    return [x0, y0, x1, y0, x1, y1, x0, y1]


def rle_string(counts: list[int]) -> str:
    """Reference encoder of COCO's compressed RLE (the inverse of the reader's decoder)."""
    s = []
    for i, c in enumerate(counts):
        x = c - counts[i - 2] if i > 2 else c
        more = True
        while more:
            ch = x & 0x1F
            x >>= 5
            more = x != -1 if ch & 0x10 else x != 0
            s.append(chr((ch | 0x20 if more else ch) + 48))
    return "".join(s)


def mask_counts(m: np.ndarray) -> list[int]:
    """Uncompressed RLE of a boolean (H, W) mask: column-major runs, zeros first."""
    flat = m.T.reshape(-1).astype(np.int8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(bounds).tolist()
    return runs if flat[0] == 0 else [0, *runs]


def test_compressed_rle_hand_decoded():
    assert _coco.decode_rle_string("2340") == [2, 3, 4, 3]
    assert _coco.decode_rle_string("161N") == [1, 6, 1, 4]  # 'N': delta -2 to the count two back
    assert _coco.decode_rle_string("X1:") == [40, 10]  # 'X1': 40 over two characters
    rng = np.random.default_rng(0)
    for _ in range(50):
        m = rng.random((int(rng.integers(1, 30)), int(rng.integers(1, 30)))) < rng.random()
        counts = mask_counts(m)
        assert _coco.decode_rle_string(rle_string(counts)) == counts
        np.testing.assert_array_equal(_coco.rle_to_mask(np.array(counts), m.shape), m)


def test_fill_polygon_matches_point_in_polygon():
    rng = np.random.default_rng(1)
    for n in [3, 3, 4, 5, 7]:
        for _ in range(12):
            poly = rng.uniform(-3, 19, size=(n, 2))  # may be concave, self-crossing, partly outside
            got = np.zeros((14, 16), bool)
            _coco.fill_polygon(got, poly)
            np.testing.assert_array_equal(got, pnpoly(poly.tolist(), 14, 16), err_msg=str(poly))
    got = np.zeros((6, 8), bool)
    _coco.fill_polygon(got, np.array(rect(1, 2, 5, 4), float).reshape(-1, 2))
    want = np.zeros((6, 8), bool)
    want[2:4, 1:5] = True  # integer rectangle [1, 5) x [2, 4)
    np.testing.assert_array_equal(got, want)


@pytest.fixture
def masks_coco(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    for i in (1, 2, 3, 4):
        (root / f"{i}.jpg").write_bytes(bytes([i]) * 5)
    crowd = np.zeros((5, 6), bool)
    crowd[1:4, 2:5] = True
    crowd[0, 0] = True
    squiggle = np.zeros((5, 10), bool)
    squiggle[:, 8] = True  # "X1:" below: column-major, 40 zeros (columns 0-7), then 10 ones
    squiggle[:, 9] = True
    tri = [0.5, 0.5, 9.2, 1.3, 3.7, 7.6]
    data = {
        "images": [{"id": 1, "file_name": "1.jpg", "width": 10, "height": 8},
                   {"id": 2, "file_name": "2.jpg", "width": 6, "height": 5},
                   {"id": 3, "file_name": "3.jpg", "width": 10, "height": 5},
                   {"id": 4, "file_name": "4.jpg", "width": 3, "height": 2}],
        "categories": [{"id": 9}, {"id": 3}],
        "annotations": [
            {"image_id": 1, "bbox": [0, 0, 9, 8], "category_id": 9, "segmentation": [tri]},
            {"image_id": 1, "bbox": [1, 1, 4, 3], "category_id": 3,  # the higher label: over the triangle
             "segmentation": [rect(1, 1, 5, 4), rect(7, 6, 9, 8)]},
            {"image_id": 1, "bbox": [0, 0, 1, 1], "category_id": 9},  # no segmentation: no pixels
            {"image_id": 2, "bbox": [0, 0, 6, 5], "category_id": 3, "iscrowd": 1,
             "segmentation": {"size": [5, 6], "counts": mask_counts(crowd)}},
            {"image_id": 3, "bbox": [8, 0, 2, 5], "category_id": 9, "iscrowd": 1,
             "segmentation": {"size": [5, 10], "counts": "X1:"}},  # hand-encoded: 40 zeros, 10 ones
        ],
    }
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(data))
    return root, ann, data, {"tri": tri, "crowd": crowd, "squiggle": squiggle}


def test_pixelwise_masks(masks_coco):
    root, ann, _, ref = masks_coco
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, pixelwise_masks=True, image_ids=True)
    samples = list(r.next_epoch())
    assert [len(s) for s in samples] == [5] * 4
    masks = [np.asarray(s[3]) for s in samples]
    assert [m.shape for m in masks] == [(8, 10, 1), (5, 6, 1), (5, 10, 1), (2, 3, 1)]
    assert all(s[3].dtype == ndd.int32 and s[3].layout == "HWC" for s in samples)
    assert [int(np.asarray(s[4])[0]) for s in samples] == [1, 2, 3, 4]
    # image 1: triangle (category 9 -> label 1, the categories' list order), and two
    # rectangles of category 3 (label 2), which win where they overlap (the higher label)
    want = np.where(pnpoly(np.reshape(ref["tri"], (-1, 2)).tolist(), 8, 10), 1, 0)
    want[1:4, 1:5] = 2
    want[6:8, 7:9] = 2
    np.testing.assert_array_equal(masks[0][..., 0], want)
    assert (want == 1).sum() > 10 and np.asarray(samples[0][2]).tolist() == [1, 2, 1]
    np.testing.assert_array_equal(masks[1][..., 0], np.where(ref["crowd"], 2, 0))
    np.testing.assert_array_equal(masks[2][..., 0], np.where(ref["squiggle"], 1, 0))
    assert not masks[3].any()
    # original category ids with avoid_class_remapping; batches keep the layout
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, pixelwise_masks=True, avoid_class_remapping=True)
    _, _, _, mb = next(iter(r.next_epoch(batch_size=4)))
    assert mb.layout == "HWC" and mb.shape[0] == (8, 10, 1)
    first = np.asarray(mb.tensors[0] if hasattr(mb, "tensors") else list(mb)[0])[..., 0]
    tri = pnpoly(np.reshape(ref["tri"], (-1, 2)).tolist(), 8, 10)
    rects = np.zeros((8, 10), bool)
    rects[1:4, 1:5] = rects[6:8, 7:9] = True
    np.testing.assert_array_equal(first, np.maximum(9 * tri, 3 * rects))  # id 9 now the higher


def test_compressed_rle_round_trip_through_reader(tmp_path):
    rng = np.random.default_rng(3)
    (tmp_path / "a.jpg").write_bytes(b"x")
    m = rng.random((17, 23)) < 0.4
    data = {"images": [{"id": 1, "file_name": "a.jpg", "width": 23, "height": 17}],
            "categories": [{"id": 5}],
            "annotations": [{"image_id": 1, "bbox": [0, 0, 23, 17], "category_id": 5,
                             "segmentation": {"size": [17, 23], "counts": rle_string(mask_counts(m))}}]}
    (tmp_path / "a.json").write_text(json.dumps(data))
    (_, _, _, out), = ndd.readers.COCO(file_root=tmp_path, annotations_file=tmp_path / "a.json",
                                        pixelwise_masks=True).next_epoch()
    np.testing.assert_array_equal(np.asarray(out)[..., 0], m.astype(np.int32))


def test_legacy_masks_argument(masks_coco):
    root, ann, _, _ = masks_coco
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, masks=True)
    _, _, _, polys, verts = next(iter(r.next_epoch()))
    assert np.asarray(polys).tolist() == [[0, 0, 6], [1, 6, 14], [1, 14, 22]]  # coordinate indices
    assert np.asarray(verts).shape == (11, 2)


def test_mask_errors(masks_coco, tmp_path):
    root, ann, data, _ = masks_coco
    with pytest.raises(ValueError, match="`pixelwise_masks` and `polygon_masks` are mutually exclusive"):
        ndd.readers.COCO(file_root=root, annotations_file=ann, pixelwise_masks=True, polygon_masks=True)
    with pytest.raises(ValueError, match="`masks` and `pixelwise_masks` cannot be both true"):
        ndd.readers.COCO(file_root=root, annotations_file=ann, pixelwise_masks=True, masks=True)
    bad = tmp_path / "bad.json"

    def expect(seg, match):
        d = json.loads(json.dumps(data))
        d["annotations"][3]["segmentation"] = seg
        bad.write_text(json.dumps(d))
        with pytest.raises(ValueError, match=r"bad.json': annotation #3: " + match):
            ndd.readers.COCO(file_root=root, annotations_file=bad, pixelwise_masks=True)

    expect({"size": [4, 6], "counts": [24]}, r"RLE size \[4, 6\] differs from the image's \[height, width\] \[5, 6\]")
    expect({"size": [5, 6], "counts": [10, 5]}, "RLE `counts` must be non-negative and sum to height.width = 30")
    expect({"size": [5, 6], "counts": "2 3"}, "bad RLE `counts`: .*invalid character")
    expect({"size": [5, 6], "counts": "X"}, "bad RLE `counts`: the compressed RLE string ends inside a count")
    expect({"counts": [30]}, r"an RLE `segmentation` needs `size` \[h, w\] and `counts`")
    expect([[1, 2, 3, 4, 5]], "a polygon must hold finite x, y pairs, got 5 numbers")
    expect("nope", "`segmentation` must be a list of polygons or an RLE dict")


def test_pixelwise_overlap_keeps_the_higher_label(tmp_path):
    """Where two annotations overlap, the pixel holds the higher label whichever comes first
    (DALI 2.4 observed on these two images)."""
    (tmp_path / "a.jpg").write_bytes(b"x")
    (tmp_path / "b.jpg").write_bytes(b"x")
    big, shifted = rect(0, 0, 5, 4), rect(2, 1, 7, 5)
    data = {"images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 6},
                       {"id": 2, "file_name": "b.jpg", "width": 8, "height": 6}],
            "categories": [{"id": 1}, {"id": 2}],
            "annotations": [
                {"image_id": 1, "bbox": [0, 0, 5, 4], "category_id": 1, "segmentation": [big]},
                {"image_id": 1, "bbox": [2, 1, 5, 4], "category_id": 2, "segmentation": [shifted]},
                {"image_id": 2, "bbox": [0, 0, 5, 4], "category_id": 2, "segmentation": [big]},
                {"image_id": 2, "bbox": [2, 1, 5, 4], "category_id": 1, "segmentation": [shifted]}]}
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(data))
    r = ndd.readers.COCO(file_root=tmp_path, annotations_file=ann, pixelwise_masks=True)
    first, second = (np.asarray(s[3])[..., 0] for s in r.next_epoch())
    a = np.zeros((6, 8), int)
    a[0:4, 0:5] = 1
    b = np.zeros((6, 8), int)
    b[1:5, 2:7] = 1
    np.testing.assert_array_equal(first, np.maximum(a, 2 * b))
    np.testing.assert_array_equal(second, np.maximum(2 * a, b))
