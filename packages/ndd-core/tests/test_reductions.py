"""ndd.reductions (sum, mean, mean_square, rms, min, max, std_dev, variance) against NumPy
on random ragged batches, and against values, dtypes and layouts observed from DALI 2.4
(nvidia.dali.experimental.dynamic.reductions, CPU).

Tolerances: integer results and min/max are exact. float32 results are compared with a
float64 NumPy reference within rtol 1e-5 plus atol 1e-5 * max|x| (float32 accumulation of
at most a few hundred values; the atol covers means near zero of signed data).
"""

import math

import numpy as np
import pytest

import ndd

A = np.asarray
R = ndd.reductions
T = ndd.as_tensor
F32_MAX = float(np.finfo(np.float32).max)


def samples(b):
    return [A(t) for t in b]


def value(t):
    return A(t).tolist()


# -- values observed from DALI 2.4 --------------------------------------------------------

U8 = np.array([[200, 100, 50], [255, 1, 2]], np.uint8)


@pytest.mark.parametrize("op,dtype,full,axis0,names_w", [
    # observed from DALI 2.4: input U8 with layout "HW"; default axes, axes=0, axis_names="W"
    ("sum", ndd.uint64, 608, [455, 101, 52], [350, 258]),
    ("mean", ndd.float32, 101.33333587646484, [227.5, 50.5, 26.0], [116.66667175292969, 86.0]),
    ("mean_square", ndd.float32, 19588.333984375, [52512.5, 5000.5, 1252.0], [17500.0, 21676.66796875]),
    ("rms", ndd.float32, 139.9583282470703, [229.15606689453125, 70.7142105102539, 35.38361358642578],
     [132.28756713867188, 147.22998046875]),
    ("min", ndd.uint8, 1, [200, 1, 2], [50, 1]),
    ("max", ndd.uint8, 255, [255, 100, 50], [200, 255]),
])
def test_values_dtypes_and_layouts_observed_from_dali(op, dtype, full, axis0, names_w):
    x = T(U8, layout="HW")
    fn = getattr(R, op)
    out = fn(x)
    assert (out.dtype, out.ndim, out.layout, value(out)) == (dtype, 0, None, full)
    out = fn(x, axes=0)
    assert (out.dtype, out.layout, value(out)) == (dtype, "W", axis0)
    out = fn(x, axis_names="W")
    assert (out.layout, value(out)) == ("H", names_w)
    out = fn(x, keep_dims=True)
    assert (out.shape, out.layout, value(out)) == ((1, 1), "HW", [[full]])
    out = fn(x, axes=1, keep_dims=True)
    assert (out.shape, out.layout, value(out)) == ((2, 1), "HW", [[v] for v in names_w])
    out = fn(x, axes=[])  # no axis reduced: the values, in the output type (sum: u64)
    assert (out.dtype, out.layout) == (dtype, "HW")
    want = U8.astype(dtype.numpy_dtype)
    np.testing.assert_array_equal(A(out), want * want if op == "mean_square" else want)
    assert fn(x, axes=[0, 1]).layout is None and fn(x, axes=[1, 0]).shape == ()
    assert value(fn(x, axis_names="WH")) == full


_ALL_IN = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32]
_U, _S, _F = ndd.uint64, ndd.int64, ndd.float32


@pytest.mark.parametrize("src", _ALL_IN)
def test_default_output_dtypes_observed_from_dali(src):
    # observed from DALI 2.4: sum widens integers to 64 bits of their signedness; mean,
    # mean_square and rms give float32; min and max keep the input type
    x = T(np.array([[1, 0, 1], [1, 1, 0]], src))
    kind = np.dtype(src).kind
    assert R.sum(x).dtype == {"u": _U, "i": _S, "f": _F}[kind]
    for op in (R.mean, R.mean_square, R.rms):
        assert op(x, axes=1).dtype == ndd.float32
    for op in (R.min, R.max):
        assert op(x).dtype == ndd.dtype(src)
    assert R.variance(x, T(np.zeros(2, np.float32)), axes=1).dtype == ndd.float32


_OUTS = [ndd.bool, ndd.uint8, ndd.int8, ndd.uint16, ndd.int16, ndd.uint32, ndd.int32, ndd.uint64, ndd.int64,
         ndd.float16, ndd.float32, ndd.float64]


def _dtype_allowed(op, src):
    """The dtype= values DALI 2.4 accepts (observed for every pair of input and output)."""
    t = ndd.dtype(src)
    wide = {"u": _U, "i": _S, "f": _F}[np.dtype(src).kind]
    if op == "sum":
        return {t, wide} | ({_F} if t.bits < 64 else set())
    if op == "mean_square":
        return {wide, _F}
    return {t, _F}  # mean, rms


@pytest.mark.parametrize("op", ["sum", "mean", "mean_square", "rms"])
@pytest.mark.parametrize("src", _ALL_IN)
def test_dtype_argument_accepts_what_dali_accepts(op, src):
    x = T(np.array([[100, 50, 120], [127, 1, 0]], src))
    allowed = _dtype_allowed(op, src)
    for out in _OUTS:
        if out in allowed:
            assert getattr(R, op)(x, dtype=out).dtype == out
        else:
            with pytest.raises(ValueError, match=f"`reductions.{op}`: argument 'dtype' must be one of"):
                getattr(R, op)(x, dtype=out)


@pytest.mark.parametrize("src,out,sum_,mean,ms,rms", [
    # observed from DALI 2.4 on [[100, 50, 120], [127, 1, 0]] with dtype=out; integer outputs
    # accumulate in the output type (wrapping), then mean/rms truncate
    (np.uint8, ndd.uint8, 142, 23, None, 1),
    (np.int8, ndd.int8, -114, -19, None, 1),
    (np.uint16, ndd.uint16, 398, 66, None, 84),
    (np.int16, ndd.int16, 398, 66, None, 0),  # the squares' sum wraps negative: sqrt(NaN) -> 0
    (np.uint32, ndd.uint32, 398, 66, None, 84),
    (np.int32, ndd.int32, 398, 66, None, 84),
    (np.uint8, ndd.uint64, 398, None, 7171, None),
    (np.int8, ndd.int64, 398, None, 7171, None),
    (np.int64, ndd.int64, 398, 66, 7171, 84),
    (np.uint8, ndd.float32, 398.0, 66.33333587646484, 7171.6669921875, 84.6856918334961),
])
def test_values_with_dtype_observed_from_dali(src, out, sum_, mean, ms, rms):
    x = T(np.array([[100, 50, 120], [127, 1, 0]], src))
    for op, want in (("sum", sum_), ("mean", mean), ("mean_square", ms), ("rms", rms)):
        if want is not None:
            r = getattr(R, op)(x, dtype=out)
            assert (r.dtype, value(r)) == (out, want), op


@pytest.mark.parametrize("data,want", [
    # observed from DALI 2.4: mean with dtype=int32 is float32(sum) * float32(1/n), truncated
    ([-5, 0], -2), ([-5, -6, 0], -3), ([5, 0], 2), ([9] + [0] * 9, 0),
    ([1] * 41, 0), ([7] * 41, 6), ([3] * 61, 2), ([1] * 49, 1), ([7] * 12345, 7),
    ([2**31 - 1, 2**31 - 1], -1),  # the int32 sum wraps to -2
    ([2**31 - 1], -(2**31)),  # float32(2**31 - 1) is 2**31: out of range
])
def test_integer_mean_truncates_the_float32_product(data, want):
    assert value(R.mean(T(np.array(data, np.int32)), dtype=ndd.int32)) == want


def test_integer_rms_and_mean_square_observed_from_dali():
    i32 = np.int32
    assert value(R.rms(T(np.array([3, 4], i32)), dtype=ndd.int32)) == 3
    assert value(R.rms(T(np.array([2, 3], i32)), dtype=ndd.int32)) == 2
    assert value(R.rms(T(np.array([99, 99, 99, 100], i32)), dtype=ndd.int32)) == 99
    assert value(R.rms(T(np.array([50000, 50000], i32)), dtype=ndd.int32)) == 18775  # squares wrap
    assert value(R.rms(T(np.array([50000, 40000], i32)), dtype=ndd.int32)) == -(2**31)  # sqrt < 0
    assert value(R.rms(T(np.array([12, 0], np.int8)), dtype=ndd.int8)) == 0
    assert value(R.rms(T(np.array([12, 0], np.uint8)), dtype=ndd.uint8)) == 8
    assert value(R.mean_square(T(np.array([2, 3], i32)), dtype=ndd.int64)) == 6
    assert value(R.mean_square(T(np.array([-2, -3], i32)), dtype=ndd.int64)) == 6
    assert value(R.mean_square(T(np.array([2**31 - 1] * 2, i32)), dtype=ndd.int64)) == 2**62
    assert value(R.rms(T(np.array([-3, 5], i32)), axes=[], dtype=ndd.int32)) == [3, 5]
    assert value(R.mean_square(T(np.array([-3, 5], np.int8)), axes=[])) == [9.0, 25.0]


def test_64_bit_and_float32_accumulation_observed_from_dali():
    assert value(R.sum(T(np.array([2**31 - 1, 5], np.int32)), dtype=ndd.int32)) == -2147483644
    assert value(R.sum(T(np.array([2**31 - 1, 5], np.int32)))) == 2147483652
    assert value(R.sum(T(np.array([2**31 - 1] * 4, np.int32)))) == 8589934588
    assert value(R.sum(T(np.array([2**64 - 1, 5], np.uint64)))) == 4
    assert value(R.mean(T(np.array([2**64 - 1] * 2, np.uint64)))) == 1.8446744073709552e19  # float32 sum
    assert value(R.mean(T(np.array([2**63, 2**63, 6], np.uint64)), dtype=ndd.uint64)) == 2
    assert value(R.mean(T(np.array([2**62, 2**62, 2**62 + 1], np.int64)), dtype=ndd.int64)) == -1537228718622113792
    assert value(R.mean(T(np.array([2**62, 2**62, 2**62 + 1], np.int64)))) == 4.611686018427388e18
    assert value(R.sum(T(np.array([2**24, 1, 1, 1, 1], np.uint32)), dtype=ndd.float32)) == 16777216.0
    assert value(R.mean(T(np.array([2**24, 1, 1, 1, 1], np.uint32)))) == 3355443.25
    assert value(R.mean(T(np.array([2**24, 1, 1, 1, 1], np.uint32)), dtype=ndd.uint32)) == 3355444
    assert value(R.mean(T(np.array([0.1, 0.1, 0.1], np.float32)))) == 0.10000000894069672
    assert value(R.rms(T(np.array([3, 4], np.float32)))) == 3.535533905029297
    assert value(R.sum(T(np.array([np.inf, 1, 0], np.float32)))) == math.inf
    s = R.sum([1, 2, 3])
    assert (s.dtype, value(s)) == (ndd.int64, 6)
    assert value(R.sum([1.5, 2, 3])) == 6.5


_INT_OUTS = [(np.uint8, ndd.uint8), (np.int8, ndd.int8), (np.uint16, ndd.uint16), (np.int16, ndd.int16),
             (np.uint32, ndd.uint32), (np.int32, ndd.int32), (np.uint64, ndd.uint64), (np.int64, ndd.int64)]
# observed from DALI 2.4: mean/rms of an empty reduction is NaN, which C++ converts to the
# lowest int32 / int64 (the narrower types keep its low bits: 0; uint32 the int64's: 0)
_EMPTY_MEAN = {ndd.uint8: 0, ndd.int8: 0, ndd.uint16: 0, ndd.int16: 0, ndd.uint32: 0, ndd.int32: -(2**31),
               ndd.uint64: 2**63, ndd.int64: -(2**63)}


@pytest.mark.parametrize("src,out", _INT_OUTS)
def test_empty_reductions_observed_from_dali(src, out):
    x = T(np.zeros((0, 2), src))
    want = _EMPTY_MEAN[out]
    assert value(R.mean(x, axes=0, dtype=out)) == [want, want]
    assert value(R.rms(x, axes=0, dtype=out)) == [want, want]
    info = np.iinfo(src)
    assert value(R.min(x, axes=0)) == [int(info.max)] * 2
    assert value(R.max(x, axes=0)) == [int(info.min)] * 2
    if out in (ndd.uint64, ndd.int64):
        assert value(R.mean_square(x, axes=0, dtype=out)) == [want, want]


def test_empty_float_reductions_observed_from_dali():
    e = T(np.zeros((0, 3), np.float32))
    assert value(R.sum(e)) == 0.0
    assert value(R.sum(e, axes=0)) == [0.0] * 3
    assert R.sum(e, axes=1).shape == (0,)
    for op in (R.mean, R.mean_square, R.rms):
        assert np.isnan(A(op(e, axes=0))).all()
    assert value(R.min(e, axes=0)) == [F32_MAX] * 3
    assert value(R.max(e, axes=0)) == [-F32_MAX] * 3


def test_single_values_out_of_range_observed_from_dali():
    # float32(x) rounds up past the type's maximum: converted as C++ does on x86-64
    assert value(R.mean(T(np.array([2**32 - 1], np.uint32)), dtype=ndd.uint32)) == 0
    assert value(R.mean(T(np.array([2**63 - 1], np.int64)), dtype=ndd.int64)) == -(2**63)
    assert value(R.mean(T(np.array([2**64 - 1], np.uint64)), dtype=ndd.uint64)) == 0
    assert value(R.mean(T(np.array([2**31 - 1, 5], np.int32)), axes=[], dtype=ndd.int32)) == [-(2**31), 5]
    assert value(R.mean(T(np.int32(2**31 - 1)), dtype=ndd.int32)) == -(2**31)
    assert value(R.mean(T(np.array([100, 100], np.int8)), dtype=ndd.int8)) == -28


@pytest.mark.parametrize("data,lo,hi", [
    # observed from DALI 2.4: NaN is skipped; all NaN gives the identity
    ([np.nan, 1], 1.0, 1.0), ([1, np.nan], 1.0, 1.0), ([np.nan, np.nan], F32_MAX, -F32_MAX),
    ([np.nan, 1, 2], 1.0, 2.0), ([2, 1, np.nan], 1.0, 2.0),
    ([1, 2, 3, np.nan, 0, 5, 6, 7, np.nan, -1], -1.0, 7.0),
])
def test_min_max_skip_nan_observed_from_dali(data, lo, hi):
    x = T(np.array(data, np.float32))
    assert (value(R.min(x)), value(R.max(x))) == (lo, hi)


def test_min_max_without_reduced_axes_copy_observed_from_dali():
    x = T(np.array([1, np.nan], np.float32))
    for op in (R.min, R.max, R.sum, R.mean, R.rms):
        r = A(op(x, axes=[]))
        assert r[0] == 1.0 and np.isnan(r[1])
        assert np.isnan(A(op(T(np.float32(np.nan)))))
    col = T(np.array([[np.nan], [2]], np.float32))
    assert value(R.min(col, axes=1)) == [F32_MAX, 2.0]
    assert value(R.max(col, axes=1)) == [-F32_MAX, 2.0]
    assert np.isnan(A(R.sum(col, axes=1))[0])


X = np.array([[1, 2, 3], [4, 6, 8]], np.float32)


def test_variance_and_std_dev_observed_from_dali():
    x = T(X, layout="HW")
    m = T(np.float32(X.mean()))
    v = R.variance(x, m)
    assert (v.dtype, v.layout, value(v)) == (ndd.float32, None, 5.6666669845581055)
    assert value(R.std_dev(x, m)) == 2.380476236343384
    assert value(R.variance(x, 4.0)) == 5.6666669845581055  # a Python float mean
    assert value(R.variance(x, T(np.float32(0)))) == 21.666667938232422
    v = R.variance(x, T(X.mean(1)), axes=1)
    assert (v.layout, value(v)) == ("H", [0.6666666865348816, 2.6666667461395264])
    assert value(R.variance(x, T(X.mean(1, keepdims=True)), axes=1)) == [0.6666666865348816, 2.6666667461395264]
    assert value(R.variance(x, T(X.mean(1)[None]), axes=1)) == [0.6666666865348816, 2.6666667461395264]
    v = R.variance(x, T(X.mean(1)), axes=1, keep_dims=True)
    assert (v.layout, value(v)) == ("HW", [[0.6666666865348816], [2.6666667461395264]])
    assert value(R.variance(x, T(X.mean(1)), axis_names="W")) == [0.6666666865348816, 2.6666667461395264]
    assert value(R.variance(x, m, ddof=1)) == 6.800000190734863
    assert value(R.variance(x, m, ddof=6)) == math.inf
    assert value(R.variance(x, m, ddof=7)) == -34.0
    assert value(R.variance(x, m, ddof=-1)) == 4.857142925262451
    assert value(R.std_dev(x, m, ddof=6)) == math.inf
    assert np.isnan(A(R.std_dev(x, m, ddof=7)))
    assert value(R.variance(T(X.astype(np.uint8)), m)) == 5.6666669845581055
    assert value(R.variance(T(X.astype(np.int32)), m)) == 5.6666669845581055


def test_variance_edge_cases_observed_from_dali():
    f = np.float32
    two, zeros = T(np.array([1, 2], f)), T(np.zeros(2, f))
    # an explicitly empty set of axes gives zeros, whatever the mean and ddof
    assert value(R.variance(two, zeros, axes=[])) == [0.0, 0.0]
    assert value(R.std_dev(two, zeros, axes=[], ddof=5)) == [0.0, 0.0]
    assert value(R.variance(two, T(np.zeros(3, f)), axes=[])) == [0.0, 0.0]
    v = R.variance(T(np.array([1, 2], f), layout="X"), zeros, axis_names="")
    assert (v.layout, value(v)) == ("X", [0.0, 0.0])
    assert value(R.variance(T(f(3)), T(f(1)), axes=[])) == 0.0
    # ... but a 0-d sample with the default axes is reduced (one element)
    assert value(R.std_dev(T(f(3)), T(f(1)))) == 2.0
    assert value(R.variance(T(f(3)), T(f(1)), ddof=1)) == math.inf
    assert value(R.variance(T(np.array([[1], [2]], f)), zeros, axes=1)) == [1.0, 4.0]
    assert value(R.variance(T(np.array([[1], [2]], f)), zeros, axes=1, ddof=1)) == [math.inf] * 2
    assert value(R.variance(T(np.array([5], f)), T(f(1)))) == 16.0
    assert np.isnan(A(R.variance(T(np.ones((0, 3), f)), T(np.zeros(3, f)), axes=0))).all()
    assert R.variance(T(np.ones((0, 3), f)), T(np.zeros(0, f)), axes=1).shape == (0,)
    assert np.isnan(A(R.variance(T(np.array([5, 3], f)), T(f(np.nan)))))


def test_batches_observed_from_dali():
    y = np.ascontiguousarray(X[:, :2])
    b = ndd.as_batch([X, y], layout="HW")
    v = R.variance(b, ndd.as_batch([X.mean(1), y.mean(1)]), axes=1)
    assert v.layout == "H" and [s.tolist() for s in samples(v)] == [[0.6666666865348816, 2.6666667461395264],
                                                                     [0.25, 1.0]]
    v = R.variance(b, T(X.mean(1)), axes=1)  # one mean for every sample
    assert [s.tolist() for s in samples(v)] == [[0.6666666865348816, 2.6666667461395264], [0.5, 2.0]]
    v = R.variance(b, 1.0)
    assert v.layout is None and [s.tolist() for s in samples(v)] == [14.666666984558105, 8.75]
    v = R.variance(b, ndd.as_batch([X.mean(0), y.mean(0)]), axes=0)
    assert v.layout == "W" and [s.tolist() for s in samples(v)] == [[2.25, 4.0, 6.25], [2.25, 4.0]]
    v = R.variance(T(X), ndd.as_batch([X.mean(1), X.mean(1)]), axes=1)  # a Tensor with a Batch mean
    assert isinstance(v, ndd.Batch) and samples(v)[1].tolist() == [0.6666666865348816, 2.6666667461395264]
    assert [s.tolist() for s in samples(R.sum(b))] == [24.0, 13.0]
    s = R.sum(b, axes=0, keep_dims=True)
    assert s.layout == "HW" and s.shape == [(1, 3), (1, 2)]
    assert [s.tolist() for s in samples(R.max(b, axis_names="W"))] == [[3.0, 8.0], [2.0, 6.0]]
    s = R.sum(ndd.as_batch([X, np.zeros((0, 3), np.float32)]), axes=1)
    assert [a.tolist() for a in samples(s)] == [[6.0, 18.0], []]
    m = samples(R.mean(ndd.as_batch([X, np.zeros((0, 3), np.float32)]), axes=0))
    assert m[0].tolist() == [2.5, 4.0, 5.5] and np.isnan(m[1]).all()


def test_scalar_input():
    s = T(np.float32(3))
    for op in (R.sum, R.mean, R.min, R.max, R.rms):
        for kw in ({}, {"axes": []}, {"keep_dims": True}):
            r = op(s, **kw)
            assert (r.shape, value(r)) == ((), 3.0)
    with pytest.raises(ValueError, match="argument 'axes' has axis 0, out of range for 0 dimension"):
        R.sum(s, axes=0)


def test_empty_batch():
    b = ndd.as_batch([], dtype=ndd.float32)
    assert samples(R.sum(b)) == [] and samples(R.variance(b, 1.0)) == []


# -- random data against NumPy --------------------------------------------------------

SHAPES = [(3, 4, 2), (5, 1, 2), (2, 6, 2)]
AXES_KW = [{}, {"axes": 0}, {"axes": -1}, {"axes": [0, 2]}, {"axes": [2, 0]}, {"axes": []},
           {"axis_names": "HW"}, {"axis_names": "C"}]


def _data(dtype, seed, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [rng.uniform(-100, 100, s).astype(dtype) for s in shapes]
    info = np.iinfo(dtype)
    return [rng.integers(max(info.min, -1000), min(info.max, 1000), s, endpoint=True).astype(dtype) for s in shapes]


def _ref_axes(kw, ndim):
    if "axis_names" in kw:
        return tuple(sorted("HWC".index(c) for c in kw["axis_names"]))
    if "axes" in kw:
        a = kw["axes"]
        return tuple(sorted(x % ndim for x in ([a] if isinstance(a, int) else a)))
    return tuple(range(ndim))


def _check_float(got, ref, x):
    assert got.dtype == np.float32 and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(x).max(initial=1)))


@pytest.mark.parametrize("kw", AXES_KW)
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.uint64, np.float32])
def test_random_ragged_batches_against_numpy(kw, keep, dtype):
    xs = _data(dtype, 7)
    b = ndd.as_batch(xs, layout="HWC")
    out = {op: samples(getattr(R, op)(b, keep_dims=keep, **kw))
           for op in ("sum", "mean", "mean_square", "rms", "min", "max")}
    for i, x in enumerate(xs):
        ax = _ref_axes(kw, x.ndim)
        x64 = x.astype(np.float64)
        if dtype == np.float32:
            _check_float(out["sum"][i], np.sum(x64, axis=ax, keepdims=keep), x)
        else:
            s = out["sum"][i]
            assert s.dtype == (np.int64 if np.dtype(dtype).kind == "i" else np.uint64)
            np.testing.assert_array_equal(s, A(np.sum(x.astype(object), axis=ax, keepdims=keep)).astype(s.dtype))
        _check_float(out["mean"][i], np.mean(x64, axis=ax, keepdims=keep), x)
        _check_float(out["mean_square"][i], np.mean(x64 ** 2, axis=ax, keepdims=keep), x ** 2)
        _check_float(out["rms"][i], np.sqrt(np.mean(x64 ** 2, axis=ax, keepdims=keep)), x)
        for op, fn in (("min", np.min), ("max", np.max)):
            assert out[op][i].dtype == dtype
            np.testing.assert_array_equal(out[op][i], fn(x, axis=ax, keepdims=keep) if ax else x)


# NaN converted as C++ does on x86-64 (observed from DALI 2.4 as the mean of empty reductions)
_NAN_AS = {"int8": 0, "int16": 0, "int32": -(2**31), "int64": -(2**63)}


def _wrap(v: int, dt: np.dtype) -> int:
    bits = 8 * dt.itemsize
    v %= 1 << bits
    return v - (1 << bits) if dt.kind == "i" and v >= 1 << (bits - 1) else v


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("kw", [{}, {"axes": 1}, {"axes": [0, 2]}])
def test_random_integer_outputs_wrap_then_truncate(dtype, kw):
    """dtype = the input type: the sum wraps in it; mean and rms are the float32 product of
    the wrapped sum with float32(1/n), truncated (Python integers as the reference)."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(3)
    info = np.iinfo(dt)
    xs = [rng.integers(info.min // 2, info.max // 2, s, endpoint=True, dtype=dt) for s in SHAPES]
    b = ndd.as_batch(xs, layout="HWC")
    out = ndd.dtype(dtype)
    got = {op: samples(getattr(R, op)(b, dtype=out, **kw)) for op in ("sum", "mean", "rms")}
    for i, x in enumerate(xs):
        ax = _ref_axes(kw, 3)
        n = int(np.prod([x.shape[a] for a in ax]))
        py = x.astype(object)
        sums = np.sum(py, axis=ax)
        sq = np.sum(py * py, axis=ax)
        for j, (s, q) in enumerate(zip(np.ravel(sums), np.ravel(sq))):
            ws, wq = _wrap(int(s), dt), _wrap(int(q), dt)
            assert got["sum"][i].ravel()[j] == ws
            m = np.float32(ws) * (np.float32(1) / np.float32(n))
            assert got["mean"][i].ravel()[j] == math.trunc(float(m))
            with np.errstate(invalid="ignore"):
                r = np.sqrt(np.float32(wq) * (np.float32(1) / np.float32(n)))
            want = math.trunc(float(r)) if not np.isnan(r) else _NAN_AS[dt.name]  # a wrapped negative sum
            assert got["rms"][i].ravel()[j] == want


@pytest.mark.parametrize("kw", [{}, {"axes": 0}, {"axes": [1, 2]}, {"axis_names": "C"}])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float32])
def test_random_variance_and_std_dev_against_numpy(kw, keep, ddof, dtype):
    xs = _data(dtype, 11)
    b = ndd.as_batch(xs, layout="HWC")
    means = [np.mean(x.astype(np.float64), axis=_ref_axes(kw, 3)).astype(np.float32) for x in xs]
    mb = ndd.as_batch(means)
    var = samples(R.variance(b, mb, ddof=ddof, keep_dims=keep, **kw))
    std = samples(R.std_dev(b, mb, ddof=ddof, keep_dims=keep, **kw))
    for x, v, s in zip(xs, var, std):
        ax = _ref_axes(kw, 3)
        want = np.var(x.astype(np.float64), axis=ax, ddof=ddof, keepdims=keep)
        np.testing.assert_allclose(v, want, rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(s, np.sqrt(want), rtol=1e-5, atol=1e-3)
        assert v.dtype == s.dtype == np.float32


def test_dense_and_ragged_paths_agree():
    xs = _data(np.int16, 5, [(4, 3, 2)] * 3)
    dense = ndd.as_batch(np.stack(xs), layout="HWC")
    listed = ndd.as_batch(xs, layout="HWC")
    assert dense._batch_data().dense is not None
    for op in ("sum", "mean", "rms", "min", "max"):
        for kw in ({}, {"axes": 1, "keep_dims": True}, {"axis_names": "WC"}):
            a, c = samples(getattr(R, op)(dense, **kw)), samples(getattr(R, op)(listed, **kw))
            for u, w in zip(a, c):
                np.testing.assert_array_equal(u, w)
    m = [x.astype(np.float32).mean(axis=1) for x in xs]
    a = samples(R.std_dev(dense, ndd.as_batch(np.stack(m)), axes=1))
    c = samples(R.std_dev(listed, ndd.as_batch(m), axes=1))
    for u, w in zip(a, c):
        np.testing.assert_array_equal(u, w)


def test_tensor_results_equal_batch_samples():
    xs = _data(np.float32, 9)
    b = samples(R.rms(ndd.as_batch(xs, layout="HWC"), axes=[0, 1]))
    for x, s in zip(xs, b):
        t = R.rms(T(x, layout="HWC"), axes=[0, 1])
        assert isinstance(t, ndd.Tensor) and t.layout == "C"
        np.testing.assert_array_equal(A(t), s)


# -- errors ---------------------------------------------------------------------------


def test_axis_errors():
    x = T(X, layout="HW")
    for bad in (2, -3, [0, 5]):
        with pytest.raises(ValueError, match="`reductions.sum`: argument 'axes' has axis .*, out of range for 2"):
            R.sum(x, axes=bad)
    for dup in ([0, 0], [1, -1]):
        with pytest.raises(ValueError, match="argument 'axes' names axis . more than once"):
            R.mean(x, axes=dup)
    with pytest.raises(ValueError, match="`reductions.max`: argument 'axis_names' names axis 0 more than once"):
        R.max(x, axis_names="HH")
    with pytest.raises(ValueError, match="argument 'axis_names' names axis 'C', which is not in the layout 'HW'"):
        R.min(x, axis_names="C")
    with pytest.raises(ValueError, match="argument 'axis_names' 'H' needs an input with a layout"):
        R.sum(T(X), axis_names="H")
    for axes in (0, []):
        with pytest.raises(ValueError, match="`reductions.rms`: arguments 'axes' and 'axis_names' are mutually"):
            R.rms(x, axes=axes, axis_names="H")
    with pytest.raises(ValueError, match="`reductions.variance`: arguments 'axes' and 'axis_names'"):
        R.variance(x, 1.0, axes=0, axis_names="W")
    with pytest.raises(ValueError, match="`reductions.std_dev`: argument 'axes' has axis 3"):
        R.std_dev(x, 1.0, axes=3)
    with pytest.raises(TypeError, match="argument 'axes' expects an int"):
        R.sum(x, axes=0.5)


@pytest.mark.parametrize("src", [np.bool_, np.float16, np.float64])
def test_unsupported_input_types(src):
    x = T(np.zeros((2, 2), src))
    for op in ("sum", "mean", "mean_square", "rms", "min", "max"):
        with pytest.raises(ValueError, match=f"`reductions.{op}`: input 'input' has dtype .*, which is not supported"):
            getattr(R, op)(x)
    with pytest.raises(ValueError, match="`reductions.variance`: input 'data' has dtype"):
        R.variance(x, 0.5)


def test_argument_errors():
    x = T(X)
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        R.min(x, dtype=ndd.float32)
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        R.variance(x, 1.0, dtype=ndd.float32)
    with pytest.raises(TypeError, match="unexpected keyword argument 'ddof'"):
        R.sum(x, ddof=1)
    with pytest.raises(TypeError, match="argument 'keep_dims' expects a bool"):
        R.sum(x, keep_dims="yes")
    with pytest.raises(ValueError, match="argument 'dtype' must be one of f32 for an input of f32, got f64"):
        R.sum(x, dtype=ndd.float64)
    with pytest.raises(ValueError, match=r"argument 'dtype' must be one of f32, u64 for an input of u8, got u8"):
        R.mean_square(T(U8), dtype=ndd.uint8)
    with pytest.raises(TypeError, match="takes 2 positional input"):
        R.variance(x)


def test_mean_input_errors():
    x = T(X)
    for m in (T(np.int32(1)), T(np.float64(1)), 1):
        with pytest.raises(ValueError, match="`reductions.variance`: input 'mean' must be float32"):
            R.variance(x, m)
    with pytest.raises(ValueError, match=r"input 'mean' has shape \(\), but the reduction gives 2 value\(s\) "
                                         r"\(shape \(2,\)\)"):
        A(R.variance(x, T(np.float32(1)), axes=1))
    with pytest.raises(ValueError, match=r"input 'mean' has shape \(3,\), but the reduction gives 2"):
        A(R.std_dev(x, T(np.zeros(3, np.float32)), axes=1))
    b = ndd.as_batch([X, np.ones((3, 3), np.float32)])
    with pytest.raises(ValueError, match=r"input 'mean' of sample 1 has shape \(2,\), but the reduction gives 3"):
        R.variance(b, T(np.zeros(2, np.float32)), axes=1).evaluate()
