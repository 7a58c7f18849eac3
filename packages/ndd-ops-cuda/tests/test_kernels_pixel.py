"""color_space_conversion, lookup_table and erase on the GPU against the CPU kernels.

All three are exact on both devices: the colour conversions run the same float32
operations one at a time and the same rounding cast, tables and fill values come from
core, so every value must be equal (no tolerance)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("ndd_ops_cpu")

import ndd  # noqa: E402
from ndd.types import DALIImageType as T  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_equal, batch, rand_images, run_both  # noqa: E402

PAIRS = [(a, b) for a in (T.RGB, T.BGR, T.GRAY, T.YCbCr) for b in (T.RGB, T.BGR, T.GRAY, T.YCbCr) if a != b]


@pytest.mark.parametrize("src,dst", PAIRS)
def test_csc_uniform_and_ragged(src, dst) -> None:
    c = 1 if src == T.GRAY else 3
    for shapes in ([(12, 17, c)] * 3, [(9, 5, c), (4, 11, c), (1, 1, c)]):
        b = batch(rand_images(int(src) * 4 + int(dst), shapes))
        ref, got, _ = run_both(lambda x: ndd.color_space_conversion(x, image_type=src, output_type=dst), b)
        assert_equal(ref, got)


@pytest.mark.parametrize("src,dst", [(T.RGB, T.YCbCr), (T.YCbCr, T.RGB)])
def test_csc_float_paths_on_many_pixels(src, dst) -> None:
    """Every first and second channel value with every 4th third one (4M pixels) gives the
    CPU's values on the GPU (the float32 sums: no fused multiply-add, the same rounding)."""
    v = np.arange(1 << 22, dtype=np.uint32)
    full = np.stack([(v >> 14) & 255, (v >> 6) & 255, (v & 63) * 4 + 1], -1).astype(np.uint8).reshape(2048, 2048, 3)
    ref, got, _ = run_both(lambda x: ndd.color_space_conversion(x, image_type=src, output_type=dst), batch([full]))
    assert_equal(ref, got)


def test_csc_sequences_and_errors() -> None:
    b = ndd.as_batch(rand_images(5, [(2, 6, 7, 3)] * 2), layout="FHWC")
    ref, got, out = run_both(lambda x: ndd.color_space_conversion(x, image_type=T.BGR, output_type=T.GRAY), b)
    assert_equal(ref, got)
    assert out.layout == "FHWC"
    bad = batch(rand_images(6, [(4, 4, 3), (4, 4, 4)])).gpu()
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match="needs 3 channel.*sample 1 has 4"):
        ndd.color_space_conversion(bad, image_type=T.RGB, output_type=T.GRAY)


@pytest.mark.parametrize("in_dt", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64])
@pytest.mark.parametrize("out_dt", [ndd.float32, ndd.uint8, ndd.int16, ndd.uint32, ndd.uint64, ndd.float16, ndd.bool])
def test_lut(in_dt, out_dt) -> None:
    rng = np.random.default_rng(7)
    info = np.iinfo(in_dt)
    xs = [rng.integers(max(info.min, -50), min(info.max, 400), s, endpoint=True).astype(in_dt)
          for s in [(5, 6), (5, 6)]]
    if in_dt == np.uint64:
        xs[0][0, 0] = np.uint64(2 ** 64 - 1)  # reads negative through a signed view: not a key
    keys = [int(k) for k in rng.integers(0, 300, 40)]
    values = [float(v) for v in rng.normal(0, 100, 40)]
    values[0] = float("nan")
    kw = {"keys": keys, "values": values, "default_value": -7.5, "dtype": out_dt}
    for b in (ndd.as_batch(xs), ndd.as_batch([xs[0], xs[1][:2, :3].copy()])):  # dense, ragged
        ref, got, _ = run_both(lambda x: ndd.lookup_table(x, **kw), b)
        if out_dt in (ndd.float32, ndd.float16):  # NaN == NaN for the comparison
            ref, got = ([np.nan_to_num(a, nan=12345) for a in s] for s in (ref, got))
        assert_equal(ref, got)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint32, np.int32, np.uint64, np.float16, np.float32])
def test_erase_dense(dtype) -> None:
    xs = [np.full((6, 7, 2), 3, dtype) for _ in range(3)]
    kw = {"anchor": [1, 2, 4, 5, -1, -1], "shape": [2, 3, 9, 9, 2, 2], "fill_value": [-1.5, 300]}
    ref, got, _ = run_both(lambda x: ndd.erase(x, **kw), ndd.as_batch(xs, layout="HWC"))
    assert_equal(ref, got)


def test_erase_per_sample_args_ragged() -> None:
    b = batch(rand_images(9, [(8, 9, 3), (5, 4, 3), (7, 7, 3)]))
    anchor = ndd.as_batch([np.array(a, np.float32) for a in ([0.1, 0.2], [0.5, 0.5, 0.0, 0.0], [])])
    shape = ndd.as_batch([np.array(a, np.float32) for a in ([0.5, 0.3], [0.4, 0.9, 0.2, 0.2], [])])
    fill = ndd.as_batch([np.array(f, np.float32) for f in ([1, 2, 3], [4, 5, 6], [7, 8, 9])])
    kw = {"anchor": anchor, "shape": shape, "fill_value": fill, "normalized": True, "centered_anchor": True}
    ref, got, _ = run_both(lambda x: ndd.erase(x, **kw), b)
    assert_equal(ref, got)
    ref, got, _ = run_both(lambda x: ndd.erase(x, anchor=[1, 2], shape=[3, 9], axis_names="WC", fill_value=[9, 8, 7]), b)
    assert_equal(ref, got)
    for r, x in zip(ref, b):
        assert not np.array_equal(r, np.asarray(x))  # something was erased


def test_erase_sequence_and_errors() -> None:
    b = ndd.as_batch([np.arange(2 * 5 * 6, dtype=np.int32).reshape(2, 5, 6)] * 2, layout="FHW")
    ref, got, _ = run_both(lambda x: ndd.erase(x, anchor=[1, 2], shape=[2, 2], axis_names="HW", fill_value=-3), b)
    assert_equal(ref, got)
    bad = ndd.as_batch([np.zeros((3, 3, 2), np.uint8)], layout="HWC").gpu()
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match="'fill_value' has 3 values but the input has 2"):
        ndd.erase(bad, anchor=[0, 0], shape=[1, 1], fill_value=[1, 2, 3])
