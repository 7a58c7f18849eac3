"""``ndd.cast`` saturates as DALI's Cast (ConvertSat) does, checked against an independent
NumPy reference: floats going to integers are rounded to nearest, ties away from zero
(DALI's CPU rule, std::round), clamped to the target's range, NaN gives 0; integers are
clamped. Casts the target can hold (same type, widening, to float, to or from bool) are
plain conversions, as before."""

from fractions import Fraction
from math import floor

import numpy as np
import pytest

import ndd
from ndd._saturate import cast_plan

NDD = {np.dtype(d): getattr(ndd, np.dtype(d).name) for d in
       (np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
        np.float16, np.float32, np.float64, np.bool_)}
NDD[np.dtype(np.bool_)] = ndd.bool


def ref_cast(a: np.ndarray, dst) -> np.ndarray:
    """The reference: rounding through np.modf (exact), NaN to 0, np.clip in float64
    (exact for targets of up to 32 bits), or np.clip on int64 for integer sources."""
    dst = np.dtype(dst)
    info = np.iinfo(dst)
    if a.dtype.kind == "f":
        frac, whole = np.modf(a)
        r = whole + (frac >= 0.5) - (frac <= -0.5)
        r = np.where(np.isnan(r), 0, r).astype(np.float64)
        return np.clip(r, info.min, info.max).astype(dst)
    return np.clip(a.astype(np.int64), info.min, info.max).astype(dst)


def exact_cast(v: float | int, dst) -> int:
    """One value, exactly (Python ints and fractions): for any target, 64-bit ones too."""
    info = np.iinfo(np.dtype(dst))
    if isinstance(v, float):
        if v != v:
            return 0
        if abs(v) == float("inf"):
            return info.max if v > 0 else info.min
        f = Fraction(v)
        n = floor(abs(f) + Fraction(1, 2))
        v = n if f >= 0 else -n
    return min(max(int(v), info.min), info.max)


def float_data(src, dst, seed=0, n=400) -> np.ndarray:
    """Random values over twice the target's range, ties, values just off the ties and the
    bounds, the bounds +- 0.5, NaN and infinities."""
    info = np.iinfo(np.dtype(dst))
    f = np.dtype(src).type
    rng = np.random.default_rng(seed)
    lo, hi = float(info.min), float(info.max)
    span = max(hi - lo, 4.0)
    vals = list(rng.uniform(lo - span / 2, hi + span / 2, n))
    ties = [k + 0.5 for k in range(-6, 6)] + [hi - 0.5, hi + 0.5, lo - 0.5, lo + 0.5]
    vals += ties + [float(np.nextafter(f(t), f(0))) for t in ties] + [float(np.nextafter(f(t), f(t * 2))) for t in ties]
    vals += [0.0, -0.0, hi, lo, hi + 1, lo - 1, 1e10, -1e10, 300.7, -5.5, 2.7, 255.4,
             float(np.nextafter(f(0.5), f(0))), float("nan"), float("inf"), float("-inf")]
    return np.array(vals, dtype=src)


FLOAT_PAIRS = [(s, d) for s in (np.float32, np.float64)
               for d in (np.uint8, np.int8, np.int16, np.int32, np.uint16)]
INT_PAIRS = [(np.int32, np.uint8), (np.int32, np.int8), (np.int32, np.int16),
             (np.int64, np.uint8), (np.int64, np.int8), (np.int64, np.int16), (np.uint8, np.int8)]


def int_data(src, seed=0, n=400) -> np.ndarray:
    s = np.iinfo(np.dtype(src))
    rng = np.random.default_rng(seed)
    lo, hi = max(s.min, -100_000), min(s.max, 100_000)
    edges = [v for v in (0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769,
                         70000, s.min, s.max) if s.min <= v <= s.max]
    return np.concatenate([rng.integers(lo, hi, n, endpoint=True), edges]).astype(src)


def check_all_forms(a: np.ndarray, dst) -> None:
    """Tensor, dense Batch and ragged Batch against the reference."""
    want = ref_cast(a, dst)
    dt = NDD[np.dtype(dst)]
    with ndd.EvalMode.sync_cpu:
        t = ndd.cast(ndd.tensor(a), dtype=dt)
        assert isinstance(t, ndd.Tensor) and t.dtype == dt
        np.testing.assert_array_equal(np.asarray(t), want)
        m = (a.size // 8) * 8  # dense: 4 samples of the same shape
        dense = ndd.cast(ndd.as_batch(a[:m].reshape(4, -1, 2)), dtype=dt)
        assert isinstance(dense, ndd.Batch) and dense.dtype == dt
        np.testing.assert_array_equal(np.stack([np.asarray(s) for s in dense.tensors]),
                                      want[:m].reshape(4, -1, 2))
        cuts = [0, 7, 7, 60, a.size]  # ragged, an empty sample included
        ragged = ndd.cast(ndd.batch([a[i:j] for i, j in zip(cuts, cuts[1:])]), dtype=dt)
        assert ragged.dtype == dt and ragged.shape == [(j - i,) for i, j in zip(cuts, cuts[1:])]
        for s, i, j in zip(ragged.tensors, cuts, cuts[1:]):
            np.testing.assert_array_equal(np.asarray(s), want[i:j])


@pytest.mark.parametrize("src,dst", FLOAT_PAIRS)
def test_float_to_int_rounds_and_saturates(src, dst):
    a = float_data(src, dst)
    check_all_forms(a, dst)
    # the reference itself against the exact one, value by value
    assert ref_cast(a, dst).tolist() == [exact_cast(float(v), dst) for v in a]


@pytest.mark.parametrize("src,dst", INT_PAIRS)
def test_int_to_narrower_int_saturates(src, dst):
    a = int_data(src)
    check_all_forms(a, dst)
    assert ref_cast(a, dst).tolist() == [exact_cast(int(v), dst) for v in a]


def test_the_reported_values():
    x = ndd.batch([np.array([300.7, -5.5, 2.7, 1e10, np.nan, 255.4], np.float32)])
    y = ndd.batch([np.array([70000, -1, 256], np.int32)])
    with ndd.EvalMode.sync_cpu:
        assert np.asarray(ndd.cast(x, dtype=ndd.uint8).tensors[0]).tolist() == [255, 0, 3, 255, 0, 255]
        assert np.asarray(ndd.cast(x, dtype=ndd.int8).tensors[0]).tolist() == [127, -6, 3, 127, 0, 127]
        assert np.asarray(ndd.cast(y, dtype=ndd.uint8).tensors[0]).tolist() == [255, 0, 255]
        assert np.asarray(ndd.cast(y, dtype=ndd.int16).tensors[0]).tolist() == [32767, -1, 256]


def test_ties_go_away_from_zero():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997], np.float32)
    out = np.asarray(ndd.cast(ndd.tensor(a), dtype=ndd.int16))
    assert out.tolist() == [1, 2, 3, -1, -2, -3, 0, 0]


@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("dst", [np.int32, np.uint32, np.int64, np.uint64, np.int16])
def test_wide_targets_whose_maximum_is_not_a_float(src, dst):
    # e.g. float32 -> int32: INT32_MAX rounds up to 2**31 as a float32
    info = np.iinfo(np.dtype(dst))
    f = np.dtype(src).type
    with np.errstate(over="ignore"):  # float16: the bounds are infinities
        top, bottom = f(info.max), f(info.min)
        vals = [top, np.nextafter(top, f(0)), np.nextafter(top, f(np.inf)), bottom,
                np.nextafter(bottom, f(-np.inf)), np.nextafter(bottom, f(0)), np.finfo(src).max,
                np.finfo(src).min, np.inf, -np.inf, np.nan, 2.5, -2.5, 0.0, 65504.0, -65504.0]
        a = np.array([float(v) for v in vals], src)
    out = np.asarray(ndd.cast(ndd.tensor(a), dtype=NDD[np.dtype(dst)]))
    assert out.dtype == dst
    assert out.tolist() == [exact_cast(float(v), dst) for v in a]


@pytest.mark.parametrize("src,dst", [(np.uint64, np.int64), (np.uint64, np.uint8), (np.uint64, np.int32),
                                     (np.int64, np.uint64), (np.int64, np.uint32), (np.uint32, np.int32),
                                     (np.uint16, np.int8), (np.int8, np.uint16), (np.uint32, np.int16)])
def test_other_integer_clamps(src, dst):
    s = np.iinfo(np.dtype(src))
    vals = [v for v in (0, 1, 5, 127, 200, 70000, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1, -1, -200, -2**40)
            if s.min <= v <= s.max]
    a = np.array(vals, src)
    out = np.asarray(ndd.cast(ndd.tensor(a), dtype=NDD[np.dtype(dst)]))
    assert out.dtype == dst and out.tolist() == [exact_cast(v, dst) for v in vals]


@pytest.mark.parametrize("src,dst", [(np.float32, np.float64), (np.float64, np.float32), (np.float64, np.float16),
                                     (np.int32, np.float32), (np.int64, np.float16), (np.uint8, np.int16),
                                     (np.int8, np.int64), (np.uint16, np.uint32), (np.int16, np.int16),
                                     (np.float32, np.float32), (np.bool_, np.uint8), (np.bool_, np.int8),
                                     (np.int32, np.bool_), (np.uint8, np.uint8)])
def test_casts_the_target_can_hold_are_plain(src, dst):
    assert cast_plan(np.dtype(src), np.dtype(dst)) == ("plain",)
    rng = np.random.default_rng(3)
    a = rng.uniform(-6e4, 6e4, 64)  # float16 holds these
    a = np.append(a, [np.nan, np.inf]) if np.dtype(src).kind == "f" else a
    with np.errstate(all="ignore"):
        a = (a > 0) if src is np.bool_ else a.astype(src) if np.dtype(src).kind == "f" else \
            np.clip(a, np.iinfo(src).min, np.iinfo(src).max).astype(src)
        want = a.astype(dst)
    dt = NDD[np.dtype(dst)]
    t = ndd.tensor(a)
    out = ndd.cast(t, dtype=dt)
    np.testing.assert_array_equal(np.asarray(out), want)
    assert np.asarray(out).dtype == dst
    b = ndd.batch([a[:10], a[10:]])
    for s, w in zip(ndd.cast(b, dtype=dt).tensors, (want[:10], want[10:])):
        np.testing.assert_array_equal(np.asarray(s), w)


def test_plans_clamp_only_when_needed():
    assert cast_plan(np.int32, np.uint8) == ("clip", 0, 255)
    assert cast_plan(np.uint8, np.int8) == ("clip", 0, 127)
    assert cast_plan(np.int64, np.uint64) == ("clip", 0, 2**63 - 1)
    assert cast_plan(np.uint64, np.int64) == ("clip", 0, 2**63 - 1)
    assert cast_plan(np.float32, np.uint8)[0] == "round"
    assert cast_plan(np.float32, np.uint8)[5] is None  # 255 is a float32: no fix-up
    assert cast_plan(np.float32, np.int32)[5] == 2.0**31  # 2**31 - 1 is not
    assert cast_plan(np.float16, np.int8)[1] == np.float32  # float16 is rounded as float32


def test_zero_d_and_non_contiguous_samples():
    assert np.asarray(ndd.cast(ndd.tensor(np.float32(300.5)), dtype=ndd.uint8)).tolist() == 255
    assert np.asarray(ndd.cast(ndd.tensor(np.float32(np.nan)), dtype=ndd.int8)).tolist() == 0
    a = np.arange(-300, 300, dtype=np.float32).reshape(20, 30) + 0.5
    out = np.asarray(ndd.cast(ndd.as_tensor(a.T), dtype=ndd.int8))
    np.testing.assert_array_equal(out, ref_cast(a.T, np.int8))


def test_cast_like_takes_the_type_of_like():
    x = np.array([300.7, -5.5, 2.5, np.nan], np.float32)
    like_t = ndd.tensor(np.zeros(3, np.uint8))
    out = ndd.cast_like(ndd.tensor(x), like_t)
    assert out.dtype == ndd.uint8
    np.testing.assert_array_equal(np.asarray(out), np.asarray(ndd.cast(ndd.tensor(x), dtype=ndd.uint8)))
    b = ndd.cast_like(ndd.batch([x, x[:2]]), ndd.batch([np.zeros(1, np.int16)] * 2))
    assert b.dtype == ndd.int16 and [np.array(t).tolist() for t in b.tensors] == [[301, -6, 3, 0], [301, -6]]
    with pytest.raises(TypeError):
        ndd.cast_like(ndd.tensor(x))


def test_constructors_with_dtype_convert_as_cast_does():
    """tensor/as_tensor/batch(..., dtype=) round and saturate like ``cast`` (DALI converts
    with its Cast; observed: [1.7, -2.7] -> [2, -3], int32 [300, -1] -> uint8 [255, 0])."""
    f = np.array([1.7, -2.7, 0.5, 1.5, 2.5], np.float64)
    want = np.array([2, -3, 1, 2, 3], np.int32)  # half away from zero
    np.testing.assert_array_equal(np.asarray(ndd.tensor(f, dtype=ndd.int32)), want)
    np.testing.assert_array_equal(np.asarray(ndd.as_tensor(f, dtype=ndd.int32)), want)
    np.testing.assert_array_equal(np.asarray(ndd.tensor(np.array([300, -1], np.int32), dtype=ndd.uint8)), [255, 0])
    b = ndd.batch([np.array([1.7]), np.array([-400.0])], dtype=ndd.int8)
    assert [np.asarray(t).tolist() for t in b.tensors] == [[2], [-128]]
    t = ndd.tensor(np.array([np.nan, 1e10], np.float32))
    np.testing.assert_array_equal(np.asarray(ndd.tensor(t, dtype=ndd.uint8)), np.asarray(ndd.cast(t, dtype=ndd.uint8)))


def test_python_numbers_with_a_dtype_convert_as_numpy_does():
    """As DALI 2.4 (which converts Python data through NumPy): floats truncate, an int the
    type cannot hold or a NaN for an int type raises; NumPy arrays cast with saturation."""
    assert np.asarray(ndd.tensor(1.5, dtype=ndd.int8)).item() == 1
    assert np.asarray(ndd.tensor([1, 2.5, -2.7], dtype=ndd.int16)).tolist() == [1, 2, -2]
    for value, dt in ((-1, ndd.uint8), (300, ndd.uint8), (2**31, ndd.int32)):
        with pytest.raises(OverflowError, match=f"Python integer {value} out of bounds"):
            ndd.tensor(value, dtype=dt)
    with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
        ndd.tensor(float("nan"), dtype=ndd.int32)
    assert np.asarray(ndd.tensor(2**32, dtype=ndd.int64)).item() == 2**32  # no int32 detour
    assert np.asarray(ndd.tensor([-1, 2**31], dtype=ndd.int64)).tolist() == [-1, 2**31]
    assert np.asarray(ndd.tensor(np.array([300, -1]), dtype=ndd.uint8)).tolist() == [255, 0]  # arrays saturate
    assert ndd.tensor([2**31, 1]).dtype == ndd.uint32  # no negative: uint32
    with pytest.raises(OverflowError, match="Python integer 2147483648 out of range for int32"):
        ndd.tensor([-1, 2**31])  # no 32-bit type holds both (was uint32, -1 wrapped)


@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64])
def test_floats_to_bool_are_rounded_first(src):
    """DALI 2.4 rounds before testing for zero: 0.3 and -0.4 are False, 0.5, NaN and inf True."""
    x = np.array([0.3, -0.4, 0.5, -0.5, 0.49999997, 1e-40, 0.0, -0.0, np.nan, np.inf, -np.inf, 2.5], src)
    with np.errstate(over="ignore"):
        want = [False, False, True, True, src == np.float16, False, False, False, True, True, True, True]
    assert np.asarray(ndd.cast(ndd.tensor(x), dtype=ndd.bool)).tolist() == want
    assert np.asarray(ndd.tensor(x, dtype=ndd.bool)).tolist() == want  # constructors convert alike
