"""bb_flip, box_encoder and coord_transform on the GPU against the CPU kernels.

Tolerances: bb_flip, coord_transform and box_encoder's labels and boxes without
``offset`` run the CPU's float32/float64 operations one at a time in its order, compared
exactly. box_encoder's offsets take a float64 log on both devices (CUDA's and the host's
may differ in the last bit of the double), rounded to float32: compared within one float32
ulp (relative 1.2e-7), which on the emulation is exact too.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

pytest.importorskip("ndd_ops_cpu")

import ndd  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, assert_equal, run_both, samples_of  # noqa: E402

F32 = np.float32
ULP = 1.2e-7


def rand_boxes(rng: np.random.Generator, k: int, ltrb: bool = True) -> np.ndarray:
    """``k`` relative boxes inside the unit square, ltrb (or xywh)."""
    lo = rng.random((k, 2), dtype=F32) * F32(0.7)
    size = rng.random((k, 2), dtype=F32) * F32(0.3) + F32(0.01)
    return np.concatenate([lo, lo + size if ltrb else size], 1).astype(F32)


def flags(values: list[int]) -> ndd.Batch:
    return ndd.as_batch([np.int32(v) for v in values])


# -- bb_flip -------------------------------------------------------------------------------


@pytest.mark.parametrize("ltrb", [True, False])
@pytest.mark.parametrize("h,v", [(1, 0), (0, 1), (1, 1), (0, 0), ([1, 0, 1, 0], [0, 0, 1, 1])])
def test_bb_flip_dense_and_ragged(ltrb, h, v) -> None:
    rng = np.random.default_rng(1)
    hk = flags(h) if isinstance(h, list) else h
    vk = flags(v) if isinstance(v, list) else v
    dense = ndd.as_batch(np.stack([rand_boxes(rng, 6, ltrb) for _ in range(4)]))
    ragged = ndd.as_batch([rand_boxes(rng, k, ltrb) for k in (3, 0, 7, 1)])
    for b in (dense, ragged):
        ref, got, out = run_both(lambda x: ndd.bb_flip(x, ltrb=ltrb, horizontal=hk, vertical=vk), b)
        assert_equal(ref, got)
        assert out.dtype == ndd.float32


def test_bb_flip_flat_samples_and_a_tensor() -> None:
    rng = np.random.default_rng(2)
    flat = ndd.as_batch([rand_boxes(rng, 2).ravel(), rand_boxes(rng, 3).ravel()])  # (4k,) samples
    ref, got, _ = run_both(lambda x: ndd.bb_flip(x, horizontal=flags([1, 0]), vertical=1), flat)
    assert_equal(ref, got)
    for empty in (np.zeros((0, 3, 4), F32), np.zeros((2, 0, 4), F32)):  # no samples; samples without boxes
        out = ndd.bb_flip(ndd.as_batch(empty).gpu())
        assert out.device == ndd.Device("gpu:0") and out.shape == [(0, 4)] * len(empty)
        assert_equal(samples_of(ndd.bb_flip(ndd.as_batch(empty))), samples_of(out.cpu()))
    t = rand_boxes(rng, 5)
    cpu = np.asarray(ndd.bb_flip(ndd.as_tensor(t), ltrb=True))
    gpu = ndd.bb_flip(ndd.as_tensor(t).gpu(), ltrb=True)
    assert gpu.device == ndd.Device("gpu:0")
    np.testing.assert_array_equal(np.asarray(gpu.cpu()), cpu)


def test_bb_flip_bad_shapes_name_the_sample_on_the_gpu() -> None:
    bad = ndd.as_batch([np.zeros((1, 4), F32), np.zeros((2, 5), F32)]).gpu()
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"`bb_flip`: sample 1 must hold boxes of 4 values"):
        ndd.bb_flip(bad)
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match="argument 'horizontal' takes one value per sample"):
        ndd.bb_flip(ndd.as_batch([np.zeros((1, 4), F32)] * 2).gpu(),
                    horizontal=ndd.as_batch([np.int32([1]), np.int32([1, 0])]))


# -- box_encoder ---------------------------------------------------------------------------

NORM = {"means": [0.1, 0.2, 0.3, 0.4], "stds": [0.1, 0.1, 0.2, 0.2], "scale": 2.0}


def encode_both(boxes: list[np.ndarray], labels: list[np.ndarray], **kw) -> None:
    """box_encoder on the CPU and on the GPU: labels equal, boxes equal (offsets within 1 ulp)."""
    ref = ndd.box_encoder(ndd.as_batch(boxes), ndd.as_batch(labels), **kw)
    out = ndd.box_encoder(ndd.as_batch(boxes).gpu(), ndd.as_batch(labels).gpu(), **kw)
    assert [o.device for o in out] == [ndd.Device("gpu:0")] * 2
    assert [(o.dtype, o.ndim) for o in out] == [(r.dtype, r.ndim) for r in ref]
    assert_equal(samples_of(ref[1]), samples_of(out[1].cpu()))
    if kw.get("offset"):
        assert_close(samples_of(ref[0]), samples_of(out[0].cpu()), rtol=ULP)
    else:
        assert_equal(samples_of(ref[0]), samples_of(out[0].cpu()))


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("counts", [(3, 0, 5, 1), (4, 4, 4), (0, 0), (12,)])
def test_box_encoder_matches_the_cpu(offset, counts) -> None:
    rng = np.random.default_rng(sum(counts) + offset)
    anchors = rand_boxes(rng, 40).ravel().tolist()
    boxes = [rand_boxes(rng, k) for k in counts]
    labels = [rng.integers(1, 9, k).astype(np.int32) for k in counts]
    encode_both(boxes, labels, anchors=anchors, criteria=0.3, offset=offset, **(NORM if offset else {}))


def test_box_encoder_ties_go_to_the_last_box_and_anchor() -> None:
    """Equal boxes and equal anchors: the CPU's tie rules (the last one wins) on the GPU."""
    a = [0.1, 0.1, 0.5, 0.5]
    anchors = a * 3 + [0.5, 0.5, 0.9, 0.9] * 2
    box = np.array([[0.1, 0.1, 0.5, 0.5]] * 3 + [[0.55, 0.5, 0.9, 0.9]] * 2, F32)
    labels = np.int32([1, 2, 3, 4, 5])
    for criteria, want in ((0.5, [3, 3, 3, 5, 5]), (0.95, [3, 3, 3, 0, 5])):
        encode_both([box, box[::-1].copy()], [labels, labels[::-1].copy()], anchors=anchors, criteria=criteria)
        _, lab = ndd.box_encoder(ndd.as_batch([box]).gpu(), ndd.as_batch([labels]).gpu(), anchors=anchors,
                                 criteria=criteria)
        # anchors 0-2 take the last of boxes 0-2; anchors 3-4 (IoU 0.875 with boxes 3-4) take box 4,
        # above the criteria as the best box, below it as the box whose best anchor is the last
        assert samples_of(lab.cpu())[0].tolist() == want


def test_box_encoder_many_anchors_in_chunks(monkeypatch) -> None:
    """SSD-sized anchors, a batch matched in several parts (a small limit forces it)."""
    from ndd_ops_cuda.kernels import _bbox

    rng = np.random.default_rng(3)
    anchors = rand_boxes(rng, 1000).ravel().tolist()
    counts = (9, 2, 0, 15, 6)
    boxes = [rand_boxes(rng, k) for k in counts]
    labels = [rng.integers(1, 80, (k, 1)).astype(np.int32) for k in counts]  # labels (N, 1)
    encode_both(boxes, labels, anchors=anchors, criteria=0.5, offset=True, **NORM)
    monkeypatch.setattr(_bbox, "_MATCH_VALUES", 1000 * 15 * 2)  # two samples at a time
    encode_both(boxes, labels, anchors=anchors, criteria=0.5, offset=True, **NORM)
    encode_both(boxes, labels, anchors=anchors, criteria=0.2)


def test_box_encoder_one_tensor_of_boxes_for_a_batch_of_labels() -> None:
    rng = np.random.default_rng(4)
    anchors = rand_boxes(rng, 10).ravel().tolist()
    boxes = rand_boxes(rng, 3)
    labels = ndd.as_batch([np.int32([3, 7, 1]), np.int32([1, 2, 9])])
    ref = ndd.box_encoder(ndd.as_tensor(boxes), labels, anchors=anchors, criteria=0.1)
    out = ndd.box_encoder(ndd.as_tensor(boxes).gpu(), labels.gpu(), anchors=anchors, criteria=0.1)
    for r, o in zip(ref, out):
        assert_equal(samples_of(r), samples_of(o.cpu()))


def test_box_encoder_bad_shapes_on_the_gpu() -> None:
    anchors = [0.0, 0.0, 0.5, 0.5]
    boxes = ndd.as_batch([np.zeros((2, 4), F32), np.zeros((2, 4), F32)]).gpu()
    labels = ndd.as_batch([np.int32([1, 2]), np.int32([1])]).gpu()
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"labels of sample 1 must have shape \(2,\) or \(2, 1\)"):
        ndd.box_encoder(boxes, labels, anchors=anchors)
    bad = ndd.as_batch([np.zeros((2, 3), F32)]).gpu()
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"bboxes of sample 0 must have shape \(N, 4\)"):
        ndd.box_encoder(bad, ndd.as_batch([np.int32([1, 2])]).gpu(), anchors=anchors)


# -- coord_transform -----------------------------------------------------------------------


def test_coord_transform_per_sample_matrices_in_one_pass() -> None:
    rng = np.random.default_rng(5)
    pts = ndd.as_batch(rng.normal(0, 50, (4, 2, 7, 3)).astype(F32))  # dense, points (2, 7, 3)
    mt = ndd.as_batch([rng.normal(0, 2, (3, 4)).astype(F32) for _ in range(4)])
    ref, got, out = run_both(lambda x: ndd.coord_transform(x, MT=mt), pts)
    assert_equal(ref, got)
    assert out.dtype == ndd.float32
    for kw in ({"M": [2.5]}, {"T": [1.0, -2.0, 0.5]}, {"M": [0, 1, 0, 1, 0, 0], "T": [3, 4]}, {}):
        ref, got, _ = run_both(lambda x: ndd.coord_transform(x, **kw), pts)  # noqa: B023
        assert_equal(ref, got)


def test_coord_transform_ragged_points_and_output_sizes() -> None:
    rng = np.random.default_rng(6)
    pts = ndd.as_batch([rng.random((k, 2), dtype=F32) for k in (4, 1, 9)])
    ref, got, _ = run_both(lambda x: ndd.coord_transform(x, M=[0, 1, 1, 0], T=[0.5, -0.5]), pts)
    assert_equal(ref, got)
    dense = ndd.as_batch(rng.random((2, 5, 2), dtype=F32))
    m = ndd.as_batch([np.eye(2, dtype=F32).ravel(), np.ones((3, 2), F32).ravel()])  # 2 and 3 outputs
    ref, got, out = run_both(lambda x: ndd.coord_transform(x, M=m), dense)
    assert_equal(ref, got)
    assert [tuple(s.shape) for s in got] == [(5, 2), (5, 3)]


@pytest.mark.parametrize("dtype", [ndd.uint8, ndd.int16, ndd.int32])
def test_coord_transform_integer_outputs_round_and_saturate(dtype) -> None:
    rng = np.random.default_rng(7)
    pts = ndd.as_batch(rng.integers(-300, 300, (3, 40, 2)).astype(np.int32))
    if dtype != ndd.int32:
        pts = ndd.as_batch(rng.integers(0, 255, (3, 40, 2)).astype(dtype.numpy_dtype))
    ref, got, out = run_both(lambda x: ndd.coord_transform(x, M=[1.5, 0.25, -0.5, 2.0], T=[0.5, -100], dtype=dtype),
                             pts)
    assert_equal(ref, got)
    assert out.dtype == dtype


def test_coord_transform_bad_points_on_the_gpu() -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"sample 1 has shape \(4, 0\); expected points"):
        ndd.coord_transform(ndd.as_batch([np.zeros((4, 2), F32), np.zeros((4, 0), F32)]).gpu())


# -- in a captured loop ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple:
    """12 unreadable images (never decoded) with 1-4 boxes each."""
    root = tmp_path_factory.mktemp("coco_gpu")
    images, annotations = [], []
    r = np.random.default_rng(0)
    for i in range(1, 13):
        (root / f"{i}.jpg").write_bytes(b"\xff\xd8" + bytes([i]) * 8)
        images.append({"id": i, "file_name": f"{i}.jpg", "width": 64, "height": 48})
        for _ in range(int(r.integers(1, 5))):
            x, y = r.uniform(0, 40), r.uniform(0, 30)
            annotations.append({"image_id": i, "bbox": [x, y, r.uniform(2, 64 - x), r.uniform(2, 48 - y)],
                                "category_id": int(r.integers(1, 4)), "iscrowd": 0})
    ann = root / "ann.json"
    ann.write_text(json.dumps({"images": images, "annotations": annotations,
                               "categories": [{"id": 1}, {"id": 2}, {"id": 3}]}))
    return root, ann


PIXELS = (64, 0, 0, 0, 0, 48, 0, 0, 0, 0, 64, 0, 0, 0, 0, 48)  # relative ltrb to pixels, 4x4
ANCHORS = (0.0, 0.0, 0.55, 0.55, 0.45, 0.0, 1.0, 0.55, 0.0, 0.45, 0.55, 1.0, 0.45, 0.45, 1.0, 1.0)


def test_a_detection_tail_on_the_gpu_is_captured_with_eager_values(coco) -> None:
    """bb_flip -> box_encoder -> coord_transform on GPU boxes in a captured loop: every call
    captured, values equal to eager mode on the GPU and to the CPU's."""
    pytest.importorskip("ndd_readers")
    pytest.importorskip("ndd_capture")
    root, ann = coco

    def run(device: str, capture: bool) -> list:
        reader = ndd.readers.COCO(file_root=root, annotations_file=ann, ltrb=True, ratio=True)
        rng = ndd.random.RNG(3)
        out = []
        for _, boxes, labels in reader.next_epoch(batch_size=4, capture=capture):
            if device == "gpu":
                boxes, labels = boxes.gpu(), labels.gpu()
            mirror = ndd.random.coin_flip(batch_size=4, rng=rng)
            boxes = ndd.bb_flip(boxes, ltrb=True, horizontal=mirror)
            loc, cls = ndd.box_encoder(boxes, labels, anchors=ndd.capture.invariant(ANCHORS), criteria=0.4, offset=True,
                                       means=(0.1, 0.2, 0.3, 0.4), stds=(0.1, 0.1, 0.2, 0.2), scale=2.0)
            pixels = ndd.coord_transform(boxes, M=ndd.capture.invariant(PIXELS))
            out.append([np.asarray(loc.cpu().torch()), np.asarray(cls.cpu().torch()),
                        [np.asarray(t) for t in boxes.cpu()], [np.asarray(t) for t in pixels.cpu()]])
        return out

    cpu = run("cpu", False)
    eager, captured = run("gpu", False), run("gpu", True)
    report = ndd.capture.report()
    assert len(report.sites) == 6 and all(s.captured for s in report.sites), str(report)
    assert not report.fallbacks, report.summary()
    assert len(cpu) == len(eager) == len(captured) == 3
    for c, e, k in zip(cpu, eager, captured):
        np.testing.assert_array_equal(e[0], k[0])
        np.testing.assert_array_equal(e[1], k[1])
        np.testing.assert_allclose(e[0], c[0], rtol=ULP, atol=0)
        np.testing.assert_array_equal(e[1], c[1])
        for key in (2, 3):
            for a, b, d in zip(c[key], e[key], k[key]):
                np.testing.assert_array_equal(a, b)
                np.testing.assert_array_equal(b, d)
