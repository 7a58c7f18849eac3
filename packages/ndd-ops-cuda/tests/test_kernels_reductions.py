"""GPU kernels of ndd.reductions against the CPU ones (core's NumPy kernels): every op on
the same CPU batch and on its ``.gpu()`` copy, uniform (one dense tensor) and ragged
(per sample).

Tolerances: exact for integer outputs (the wrapped integer sums are the same in any order),
min/max, and float32 results of integer-valued data (sums of small integers are exact in
float32 in any order; the scaling, square root and conversions are the CPU's). Float32
sums of real-valued data are summed in another order: rtol 1e-5, atol 1e-5 * max|x|.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ndd

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, assert_equal, run_both, samples_of  # noqa: E402

R = ndd.reductions
UNIFORM = [(4, 3, 2)] * 3
RAGGED = [(4, 3, 2), (1, 5, 2), (3, 0, 2)]  # one sample is empty along W
AXES_KW = [{}, {"axes": 0}, {"axes": -1}, {"axes": [0, 2]}, {"axes": []}, {"axis_names": "HW"}]
OPS = ("sum", "mean", "mean_square", "rms", "min", "max")


def _ints(seed, shapes, dtype, lo=-100, hi=100):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
        return [rng.integers(lo, hi, s, endpoint=True, dtype=dtype) for s in shapes]
    return [rng.integers(lo, hi, s, endpoint=True).astype(dtype) for s in shapes]


def _batch(xs):
    return ndd.as_batch(xs, layout="HWC")


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int32, np.uint64, np.int64, np.float32])
@pytest.mark.parametrize("kw", AXES_KW)
@pytest.mark.parametrize("keep", [False, True])
def test_default_dtypes_match_the_cpu(shapes, dtype, kw, keep):
    b = _batch(_ints(1, shapes, dtype))
    for op in OPS:
        ref, got, out = run_both(lambda x, op=op: getattr(R, op)(x, keep_dims=keep, **kw), b)
        assert_equal(ref, got)


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
@pytest.mark.parametrize("src,out", [
    (np.uint8, ndd.uint8), (np.int8, ndd.int8), (np.uint16, ndd.uint16), (np.int16, ndd.int16),
    (np.uint32, ndd.uint32), (np.int32, ndd.int32), (np.uint64, ndd.uint64), (np.int64, ndd.int64),
])
def test_integer_outputs_wrap_and_truncate_as_on_the_cpu(shapes, src, out):
    info = np.iinfo(src)
    b = _batch(_ints(2, shapes, src, int(info.min), int(info.max)))  # sums and squares wrap
    for op in ("sum", "mean", "rms"):
        for kw in ({}, {"axes": 1}, {"axes": [0, 2], "keep_dims": True}):
            assert_equal(*run_both(lambda x, op=op, kw=kw: getattr(R, op)(x, dtype=out, **kw), b)[:2])
    wide = ndd.int64 if np.dtype(src).kind == "i" else ndd.uint64
    for op in ("sum", "mean_square"):
        assert_equal(*run_both(lambda x, op=op: getattr(R, op)(x, dtype=wide, axes=1), b)[:2])
    if info.bits < 64:  # float32 sums of large values: in another order, to rounding
        assert_close(*run_both(lambda x: R.sum(x, dtype=ndd.float32, axes=1), b)[:2], rtol=1e-6)


def test_out_of_range_and_nan_conversions_match_the_cpu():
    for src, out, vals in [(np.int32, ndd.int32, [2**31 - 1]), (np.uint32, ndd.uint32, [2**32 - 1]),
                           (np.int64, ndd.int64, [2**63 - 1]), (np.uint64, ndd.uint64, [2**64 - 1]),
                           (np.uint64, ndd.uint64, [2**63, 2**63, 6]), (np.int64, ndd.int64, [2**62] * 3)]:
        b = _batch([np.array(vals, src).reshape(-1, 1, 1)] * 2)
        ref, got, _ = run_both(lambda x, out=out: R.mean(x, dtype=out), b)
        assert_equal(ref, got)
    for src, out in [(np.uint8, ndd.uint8), (np.int16, ndd.int16), (np.uint32, ndd.uint32), (np.int32, ndd.int32),
                     (np.uint64, ndd.uint64), (np.int64, ndd.int64)]:
        empty = _batch([np.zeros((0, 2, 1), src)] * 2)  # NaN means
        for op in ("mean", "rms"):
            ref, got, _ = run_both(lambda x, op=op, out=out: getattr(R, op)(x, axes=0, dtype=out), empty)
            assert_equal(ref, got)
            assert got[0].tolist() == ref[0].tolist() and got[0].size == 2


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
def test_float_data_within_tolerance(shapes):
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    b = _batch(xs)
    for op in OPS:
        for kw in AXES_KW:
            ref, got, _ = run_both(lambda x, op=op, kw=kw: getattr(R, op)(x, **kw), b)
            assert_close(ref, got, rtol=1e-5, atol=1e-5)


def test_min_max_skip_nan_and_extremes_of_wide_unsigned_types():
    x = np.array([[1, np.nan, 3], [np.nan, np.nan, np.nan]], np.float32).reshape(2, 3, 1)
    for op in ("min", "max"):
        for kw in ({}, {"axes": 1}, {"axes": 0}, {"axes": []}):
            assert_equal(*run_both(lambda b, op=op, kw=kw: getattr(R, op)(b, **kw), _batch([x, x[::-1].copy()]))[:2])
    for src in (np.uint16, np.uint32, np.uint64, np.int64):
        info = np.iinfo(src)
        vals = np.array([0, 1, int(info.max), int(info.max) - 1, int(info.max) // 2 + 1, int(info.min)], src)
        b = _batch([vals.reshape(2, 3, 1), vals[::-1].reshape(3, 2, 1).copy()])
        for op in ("min", "max"):
            for kw in ({}, {"axes": 0}, {"axes": 1, "keep_dims": True}):
                assert_equal(*run_both(lambda x, op=op, kw=kw: getattr(R, op)(x, **kw), b)[:2])
        empty = _batch([np.zeros((0, 2, 1), src)])
        ref, got, _ = run_both(lambda x: R.min(x, axes=0), empty)
        assert_equal(ref, got)
        assert got[0].tolist() == [[int(info.max)]] * 2


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
@pytest.mark.parametrize("kw,axes", [({}, (0, 1, 2)), ({"axes": 0}, (0,)), ({"axes": [1, 2]}, (1, 2)),
                                     ({"axis_names": "C", "keep_dims": True}, (2,))])
@pytest.mark.parametrize("ddof", [0, 1])
def test_variance_and_std_dev_match_the_cpu(shapes, kw, axes, ddof):
    xs = _ints(4, shapes, np.int16)
    means = []
    for x in xs:
        n = max(int(np.prod([x.shape[a] for a in axes])), 1)
        means.append(np.asarray(np.round(x.sum(axis=axes) / n * 2) / 2, np.float32))  # halves: exact squares
    b, mb = _batch(xs), ndd.as_batch(means)
    for op in (R.variance, R.std_dev):
        ref, got, _ = run_both(lambda x, m, op=op: op(x, m, ddof=ddof, **kw), b, mb)
        assert_equal(ref, got)


def test_deviation_means_from_the_host_and_empty_axes():
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3, 1), np.ones((2, 3, 1), np.float32)]
    b = _batch(xs)
    ref = R.variance(b, 1.5)
    got = R.variance(b.gpu(), 1.5)  # a Python float mean: a CPU tensor, uploaded
    assert got.device == ndd.Device("gpu:0")
    assert_equal(samples_of(ref), samples_of(got.cpu()))
    m = ndd.as_tensor(np.array([1.0, 2.0], np.float32))
    ref = R.std_dev(b, m, axes=[1, 2])
    got = R.std_dev(b.gpu(), m, axes=[1, 2])  # a CPU Tensor mean for a GPU batch
    assert_equal(samples_of(ref), samples_of(got.cpu()))
    ref, got, out = run_both(lambda x, m: R.variance(x, m, axes=[]), b, ndd.as_batch([np.float32(3)] * 2))
    assert_equal(ref, got)
    assert got[0].tolist() == np.zeros((2, 3, 1)).tolist() and out.layout == "HWC"
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"input 'mean' has shape \(\), but the reduction gives 2"):
        R.variance(b.gpu(), 1.5, axes=[1, 2])


def test_tensors_on_the_gpu():
    x = ndd.as_tensor(np.arange(24, dtype=np.int32).reshape(2, 3, 4), layout="HWC", device="gpu")
    for op in OPS:
        got = getattr(R, op)(x, axis_names="WC")
        ref = getattr(R, op)(x.cpu(), axis_names="WC")
        assert got.device == ndd.Device("gpu:0") and (got.dtype, got.layout) == (ref.dtype, "H")
        np.testing.assert_array_equal(np.asarray(got.cpu()), np.asarray(ref))


@pytest.mark.parametrize("op", ["sum", "mean", "min", "max"])
def test_reducing_no_axis_gives_new_storage(op):
    x = ndd.as_batch(np.arange(6, dtype=np.int64).reshape(2, 3)).gpu()
    y = getattr(ndd.reductions, op)(x, axes=[])
    np.testing.assert_array_equal(np.asarray(y.cpu().torch()), np.asarray(x.cpu().torch()).astype(np.asarray(y.cpu().torch()).dtype))
    assert y.torch().data_ptr() != x.torch().data_ptr()
    y.torch()[0, 0] = 100  # writing into the result leaves the input alone
    assert int(x.cpu().torch()[0, 0]) == 0
