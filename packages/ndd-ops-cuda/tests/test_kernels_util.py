"""The data-movement operators on the GPU (copy, per_frame, element_extract, sequence_rearrange,
reinterpret, permute_batch), coord_flip and grid_mask against their CPU kernels on the same
inputs: equal bytes, dtype, layout and shape (tolerance: exact), and the same errors."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("ndd_ops_cpu")

import ndd  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_equal, rand_images, run_both, samples_of  # noqa: E402

DENSE = [(4, 6, 5, 3)] * 3
RAGGED = [(4, 6, 5, 3), (2, 3, 7, 3), (5, 1, 2, 3)]


def sequences(shapes, dtype=np.uint8) -> ndd.Batch:
    return ndd.as_batch(rand_images(0, shapes, dtype), layout="FHWC")


@pytest.mark.parametrize("shapes", [DENSE, RAGGED])
def test_copy_and_per_frame(shapes) -> None:
    b = sequences(shapes, np.float32)
    ref, got, out = run_both(ndd.copy, b)
    assert_equal(ref, got)
    g = b.gpu()
    c = ndd.copy(g)
    assert c._batch_data().sample(0).data_ptr() != g._batch_data().sample(0).data_ptr()  # new buffers
    hw = ndd.as_batch(rand_images(1, [s[1:] for s in shapes]), layout="HWC")
    ref, got, out = run_both(lambda x: ndd.per_frame(x, replace=True), hw)
    assert_equal(ref, got)
    assert out.layout == "FWC"


@pytest.mark.parametrize("shapes", [DENSE, RAGGED])
def test_element_extract(shapes) -> None:
    b = sequences(shapes)
    emap = [1, 0] if shapes == RAGGED else [3, 0, 2]
    ref = ndd.element_extract(b, element_map=emap)
    got = ndd.element_extract(b.gpu(), element_map=emap)
    assert len(ref) == len(got) == len(emap)
    for r, g in zip(ref, got):
        assert g.device == ndd.Device("gpu:0") and (g.layout, g.dtype) == (r.layout, r.dtype) == ("HWC", ndd.uint8)
        assert_equal(samples_of(r), samples_of(g.cpu()))
    with pytest.raises(ValueError) as info:
        ndd.element_extract(b.gpu(), element_map=[4]).evaluate()
    assert "argument 'element_map' has index 4, out of range for sample" in f"{info.value} {info.value.__cause__}"


@pytest.mark.parametrize("shapes", [DENSE, RAGGED])
def test_sequence_rearrange(shapes) -> None:
    b = sequences(shapes, np.int16)
    ref, got, _ = run_both(lambda x: ndd.sequence_rearrange(x, new_order=[0, 1, 1, 0]), b)
    assert_equal(ref, got)
    last = 3 if shapes == DENSE else 4  # (the third sequence has 4 or 5 frames)
    orders = ndd.as_batch([np.array(o, np.int32) for o in ([3, 2, 1, 0, 0], [1], [last, last, 0])])
    ref, got, _ = run_both(lambda x: ndd.sequence_rearrange(x, new_order=orders), b)
    assert_equal(ref, got)
    with pytest.raises(ValueError) as info:
        ndd.sequence_rearrange(b.gpu(), new_order=[0, 9]).evaluate()
    assert "argument 'new_order' has index 9" in f"{info.value} {info.value.__cause__}"


@pytest.mark.parametrize("kw", [
    {"dtype": ndd.uint16},  # the innermost extent adapts
    {"dtype": ndd.float32, "shape": [-1]},
    {"shape": [2, -1], "layout": "AB"},
    {"rel_shape": [0.5, 2, 1]},
    {"src_dims": [1, 0, -1, 2]},
    {"dtype": ndd.int8},
])
def test_reinterpret(kw) -> None:
    b = ndd.as_batch(rand_images(2, [(4, 6, 2)] * 3), layout="HWC")
    ref, got, _ = run_both(lambda x: ndd.reinterpret(x, **kw), b)
    assert_equal(ref, got)


def test_reinterpret_ragged_shape_input_and_errors() -> None:
    b = ndd.as_batch(rand_images(3, [(4, 6, 4), (2, 3, 8), (1, 1, 8)]), layout="HWC")
    ref, got, _ = run_both(lambda x: ndd.reinterpret(x, dtype=ndd.uint32), b)
    assert_equal(ref, got)
    shapes = ndd.as_batch([np.array(s, np.int64) for s in ([24, 4], [6, 8], [2, 4])])
    ref = ndd.reinterpret(b, shapes, layout="XY")
    for shape_input in (shapes, shapes.gpu()):  # the shape input may stay on the host
        got = ndd.reinterpret(b.gpu(), shape_input, layout="XY")
        assert got.layout == "XY"
        assert_equal(samples_of(ref), samples_of(got.cpu()))
    with pytest.raises(ValueError) as info:
        ndd.reinterpret(b.gpu(), shape=[5, -1]).evaluate()
    assert "cannot take the shape [5, -1]" in f"{info.value} {info.value.__cause__}"
    empty = ndd.as_batch([np.zeros((0, 4), np.uint8)])
    ref, got, _ = run_both(lambda x: ndd.reinterpret(x, dtype=ndd.int32), empty)
    assert_equal(ref, got)


@pytest.mark.parametrize("dense", [True, False])
def test_permute_batch(dense) -> None:
    shapes = [(5, 4, 3)] * 4 if dense else [(5, 4, 3), (2, 7, 3), (1, 1, 3), (3, 3, 3)]
    b = ndd.as_batch(rand_images(4, shapes), layout="HWC")
    ref, got, _ = run_both(lambda x: ndd.permute_batch(x, indices=[3, 3, 0, 1]), b)
    assert_equal(ref, got)
    idx = ndd.as_batch([np.int32(i) for i in (1, 0, 2, 1)])
    ref, got, _ = run_both(lambda x: ndd.permute_batch(x, indices=idx), b)
    assert_equal(ref, got)
    with pytest.raises(ValueError) as info:
        ndd.permute_batch(b.gpu(), indices=[0, 1, 2, 4]).evaluate()
    assert "argument 'indices' has index 4 (for output sample 3)" in f"{info.value} {info.value.__cause__}"


@pytest.mark.parametrize("d,layout", [(1, ""), (2, ""), (2, "yx"), (3, ""), (3, "zxy")])
def test_coord_flip(d, layout) -> None:
    rng = np.random.default_rng(5)
    dense = ndd.as_batch([rng.random((6, d), dtype=np.float32) for _ in range(3)])
    ragged = ndd.as_batch([rng.random((k, d), dtype=np.float32) * 3 - 1 for k in (4, 0, 9)])
    flips = ndd.as_batch([np.int32(f) for f in (1, 0, 3)])
    centers = ndd.as_batch([np.float32(c) for c in (0.1, 0.7, 0.333)])
    for b in (dense, ragged):
        for kw in ({}, {"flip_x": 0, "flip_y": 1, "flip_z": 1, "center_y": 0.3, "center_z": 0.77},
                   {"flip_x": flips, "center_x": centers, "flip_y": 1, "center_y": centers}):
            ref, got, _ = run_both(lambda x, kw=kw: ndd.coord_flip(x, layout=layout, **kw), b)
            assert_equal(ref, got)
    with pytest.raises(ValueError) as info:
        ndd.coord_flip(dense.gpu(), layout="q" * d).evaluate()
    assert "argument 'layout' 'q" in f"{info.value} {info.value.__cause__}"


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.float32])
def test_grid_mask(dtype) -> None:
    rng = np.random.default_rng(6)
    dense = ndd.as_batch([(rng.random((30, 41, 3)) * 100).astype(dtype) for _ in range(2)], layout="HWC")
    ragged = ndd.as_batch([(rng.random(s) * 100).astype(dtype) for s in ((30, 41, 3), (7, 5, 1), (64, 20, 2))],
                          layout="HWC")
    for b in (dense, ragged):
        n = b.batch_size
        for kw in ({}, {"tile": 9, "ratio": 0.3, "angle": 0.7, "shift_x": 2.5, "shift_y": -4.0},
                   {"tile": ndd.as_batch([np.int32(t) for t in (5, 12, 3)][:n]),
                    "angle": ndd.as_batch([np.float32(a) for a in (0.1, -1.3, 2.0)][:n]), "ratio": 0.6}):
            ref, got, _ = run_both(lambda x, kw=kw: ndd.grid_mask(x, **kw), b)
            assert_equal(ref, got)
    with pytest.raises(ValueError) as info:
        ndd.grid_mask(ragged.gpu(), tile=ndd.as_batch([np.int32(t) for t in (5, 0, 3)])).evaluate()
    assert "argument 'tile' must be positive, got 0 (sample 1)" in f"{info.value} {info.value.__cause__}"


def test_grid_mask_keeps_nan() -> None:
    x = np.full((20, 20, 1), np.nan, np.float32)
    ref, got, _ = run_both(lambda b: ndd.grid_mask(b, tile=4), ndd.as_batch([x], layout="HWC"))
    assert np.isnan(got[0]).all()
    np.testing.assert_array_equal(ref[0], got[0])
