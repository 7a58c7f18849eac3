"""An SSD-style detection pipeline across packages: COCO reader -> random_bbox_crop ->
decoders.image_slice -> resize -> flip/bb_flip -> box_encoder, eager and captured.

Checks that the pieces agree with each other: the sliced image is the crop window of the
decoded image, flipped boxes follow flipped pixels, the encoder's matched labels are the
kept boxes' labels, and capture mode gives eager mode's values.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")
pytest.importorskip("ndd_readers")
pytest.importorskip("ndd_ops_cpu")
pytest.importorskip("ndd_capture")

import ndd  # noqa: E402

B = 4
SIZE = 32  # network input side


@pytest.fixture(scope="module")
def coco(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    """8 images of 48x64 with 1-3 bright rectangles each, annotated as boxes (xywh, pixels)."""
    root = tmp_path_factory.mktemp("coco")
    rng = np.random.default_rng(0)
    images, anns = [], []
    for i in range(8):
        img = np.full((48, 64, 3), 20, np.uint8)
        for _ in range(int(rng.integers(1, 4))):
            x, y = int(rng.integers(0, 44)), int(rng.integers(0, 28))
            w, h = int(rng.integers(8, 20)), int(rng.integers(8, 20))
            img[y:y + h, x:x + w] = 230
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "bbox": [x, y, w, h],
                         "category_id": int(rng.integers(1, 4)), "iscrowd": 0, "area": w * h})
        ok, buf = cv2.imencode(".png", img)
        assert ok
        (root / f"{i}.png").write_bytes(buf.tobytes())
        images.append({"id": i + 1, "file_name": f"{i}.png", "width": 64, "height": 48})
    cats = [{"id": k, "name": f"c{k}"} for k in (1, 2, 3)]
    ann_file = root / "annotations.json"
    ann_file.write_text(json.dumps({"images": images, "annotations": anns, "categories": cats}))
    return root, ann_file


ANCHORS = [c for y in np.linspace(0.1, 0.9, 4) for x in np.linspace(0.1, 0.9, 4)
           for c in (x - 0.15, y - 0.15, x + 0.15, y + 0.15)]  # 16 ltrb anchors


def _step(images, boxes, labels, rng):
    anchor, shape, boxes, labels = ndd.random_bbox_crop(
        boxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0.1, 0.3], scaling=[0.3, 1.0],
        bbox_layout="xyXY", allow_no_crop=True, num_attempts=20, rng=rng)
    crops = ndd.decoders.image_slice(images, anchor, shape)
    resized = ndd.resize(crops, size=ndd.capture.invariant([SIZE, SIZE]))  # a global: marked constant
    mirror = ndd.random.coin_flip(batch_size=B, rng=rng)
    flipped = ndd.flip(resized, horizontal=mirror)
    fboxes = ndd.bb_flip(boxes, ltrb=True, horizontal=mirror)
    enc_boxes, enc_labels = ndd.box_encoder(fboxes, labels, anchors=ndd.capture.invariant(ANCHORS), criteria=0.3)
    return [np.stack([np.asarray(t) for t in x.tensors]) for x in (anchor, shape)], crops, flipped, fboxes, labels, enc_labels, enc_boxes


def _run(coco, capture: bool) -> list:
    root, ann = coco
    reader = ndd.readers.COCO(file_root=str(root), annotations_file=str(ann), ltrb=True, ratio=True,
                              random_shuffle=False)
    rng = ndd.random.RNG(seed=5)
    out = []
    for images, boxes, labels in reader.next_epoch(batch_size=B, capture=capture):
        (anchor, shape), crops, flipped, fboxes, kept_labels, enc_labels, enc_boxes = _step(images, boxes, labels, rng)
        out.append({
            "images": [np.asarray(t) for t in images.tensors], "anchor": anchor, "shape": shape,
            "crops": [np.asarray(t) for t in crops.tensors], "flipped": np.asarray(flipped.torch()),
            "fboxes": [np.asarray(t) for t in fboxes.tensors], "labels": [np.asarray(t) for t in kept_labels.tensors],
            "enc_labels": np.asarray(enc_labels.torch()), "enc_boxes": np.asarray(enc_boxes.torch()),
        })
    return out


def test_the_pieces_agree(coco) -> None:
    steps = _run(coco, capture=False)
    assert len(steps) == 2
    for st in steps:
        assert st["flipped"].shape == (B, SIZE, SIZE, 3) and st["enc_boxes"].shape == (B, 16, 4)
        for i in range(B):
            enc = ndd.decoders.image(ndd.as_tensor(st["images"][i]))
            full = np.asarray(enc)
            h, w = full.shape[:2]
            (ax, ay), (sw, sh) = st["anchor"][i], st["shape"][i]
            x0, y0 = int(round(ax * w)), int(round(ay * h))
            x1, y1 = int(round(ax * w + sw * w)), int(round(ay * h + sh * h))
            np.testing.assert_array_equal(st["crops"][i], full[y0:y1, x0:x1])  # the crop window's pixels
            boxes = st["fboxes"][i]
            assert boxes.ndim == 2 and boxes.shape[1] == 4 and np.all((boxes >= -1e-6) & (boxes <= 1 + 1e-6))
            # every kept box sits on bright pixels of the flipped, resized image
            img = st["flipped"][i].astype(int)
            for (left, top, right, bottom) in boxes:
                cx, cy = int((left + right) / 2 * SIZE), int((top + bottom) / 2 * SIZE)
                cx, cy = min(cx, SIZE - 1), min(cy, SIZE - 1)
                assert img[cy, cx].mean() > 120, (left, top, right, bottom)
            # the encoder only hands out labels of kept boxes (0 = background)
            kept = set(st["labels"][i].ravel().tolist())
            assert set(st["enc_labels"][i].ravel().tolist()) <= kept | {0}


def test_capture_gives_eager_values(coco) -> None:
    eager, captured = _run(coco, capture=False), _run(coco, capture=True)
    assert len(eager) == len(captured)
    for e, c in zip(eager, captured):
        for key in ("anchor", "shape", "flipped", "enc_labels", "enc_boxes"):
            np.testing.assert_array_equal(np.asarray(e[key]), np.asarray(c[key]), err_msg=key)
        for key in ("crops", "fboxes", "labels"):
            for a, b in zip(e[key], c[key]):
                np.testing.assert_array_equal(a, b, err_msg=key)
    report = ndd.capture.report()
    assert all(site.captured for site in report.sites) and len(report.sites) == 7, report.summary()
    assert not report.fallbacks, report.summary()


def test_random_bbox_crop_captured_over_two_epochs(tmp_path):
    """A COCO loop whose body crops boxes with rng=: captured values and the RNG's final state
    equal eager mode's, over two epochs."""
    root = tmp_path / "images"
    root.mkdir()
    images, annotations = [], []
    r = np.random.default_rng(0)
    for i in range(1, 13):
        (root / f"{i}.jpg").write_bytes(b"\xff\xd8" + bytes([i]) * 8)  # not decoded
        images.append({"id": i, "file_name": f"{i}.jpg", "width": 64, "height": 48})
        for _ in range(int(r.integers(1, 5))):
            x, y = r.uniform(0, 40), r.uniform(0, 30)
            annotations.append({"image_id": i, "bbox": [x, y, r.uniform(2, 64 - x), r.uniform(2, 48 - y)],
                                "category_id": int(r.integers(1, 4)), "iscrowd": 0})
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps({"images": images, "annotations": annotations,
                               "categories": [{"id": 1}, {"id": 2}, {"id": 3}]}))

    def run(capture: bool) -> tuple[list, str]:
        reader = ndd.readers.COCO(file_root=root, annotations_file=ann, ltrb=True, ratio=True)
        rng = ndd.random.RNG(5)
        out = []
        for _ in range(2):
            for _, boxes, labels in reader.next_epoch(batch_size=4, capture=capture):
                res = ndd.random_bbox_crop(boxes, labels, scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0],
                                           thresholds=[0.0, 0.1, 0.3, 0.5], num_attempts=10,
                                           output_bbox_indices=True, rng=rng)
                out.append([[np.asarray(t) for t in o.tensors] for o in res])
        return out, str(rng.get_state())

    eager, captured = run(False), run(True)
    assert eager[1] == captured[1] and len(eager[0]) == len(captured[0]) == 6
    for e, c in zip(eager[0], captured[0]):
        for x, y in zip(e, c):
            for u, v in zip(x, y):
                np.testing.assert_array_equal(u, v)
    assert any(s.op == "random_bbox_crop" and s.captured for s in ndd.capture.report().sites)
