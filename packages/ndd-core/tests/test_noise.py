"""noise.gaussian, noise.salt_and_pepper, noise.shot: statistics, the documented draw pattern,
DALI's types, defaults, rounding and layouts, and every argument error.

Facts marked "DALI 2.4" were observed by running DALI 2.4's dynamic mode on the CPU.
Statistical tolerances are stated where used (at least 5 standard errors).
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import ndd
from ndd import _noise

INT_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64]
OPS = ["gaussian", "salt_and_pepper", "shot"]


def sub_gen(seed: int) -> np.random.Generator:
    """Reference: NumPy's Philox generator keyed by the 7 words a call draws from RNG(seed)."""
    w = [int(x) for x in ndd.random.RNG(seed).draw_words(7)]
    return np.random.Generator(np.random.Philox(key=[w[0] | w[1] << 32, w[2] | w[3] << 32],
                                                counter=[w[4], w[5], w[6], 0]))


def as_np(x) -> list[np.ndarray] | np.ndarray:
    if isinstance(x, ndd.Batch):
        return [np.asarray(t) for t in x]
    return np.asarray(x)


def op(name: str):
    return getattr(ndd.noise, name)


def run_error(fn) -> str:
    """The messages of the ValueError an evaluated call raises (the error and its cause)."""
    with pytest.raises(ValueError) as info:
        fn().evaluate()
    return f"{info.value} | {info.value.__cause__}"


def round_sat(s: np.ndarray, dt) -> np.ndarray:
    """Independent reference of ConvertSat from float64: half away from zero, then clipped."""
    info = np.iinfo(dt)
    r = np.where(s >= 0, np.floor(s + 0.5), np.ceil(s - 0.5))
    return np.clip(r, info.min, info.max).astype(dt)


# -- DALI's signatures, types and defaults -----------------------------------------------


def test_signatures_match_dali():
    """DALI 2.4's dynamic functions take these keywords (and ``rng``, not ``seed``)."""
    names = {o: list(inspect.signature(op(o)).parameters) for o in OPS}
    assert names["gaussian"] == ["input", "batch_size", "device", "mean", "stddev", "rng"]
    assert sorted(names["salt_and_pepper"]) == sorted(
        ["input", "batch_size", "device", "prob", "salt_vs_pepper", "salt_val", "pepper_val", "per_channel", "rng"])
    assert names["shot"] == ["input", "batch_size", "device", "factor", "rng"]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dt", INT_TYPES + [np.float32])
def test_output_type_shape_and_layout_are_the_inputs(name, dt):
    x = ndd.as_tensor(np.full((4, 5, 3), 7, dt), layout="HWC")
    out = op(name)(x)
    a = np.asarray(out)
    assert out.dtype == ndd.dtype(dt) and a.dtype == dt and a.shape == (4, 5, 3) and out.layout == "HWC"


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dt", [np.float16, np.float64, np.bool_])
def test_types_dali_rejects(name, dt):
    """DALI 2.4: "Data type float16 is currently not supported" (also double and bool)."""
    with pytest.raises(ValueError, match="not supported"):
        op(name)(ndd.as_tensor(np.zeros((2, 2), dt)))


# DALI 2.4: salt_and_pepper(prob=1) gives these values with salt_vs_pepper 1 (salt) and 0 (pepper).
DEFAULT_SALT_PEPPER = {
    np.uint8: (255, 0), np.int8: (127, -128), np.uint16: (65535, 0), np.int16: (32767, -32768),
    np.uint32: (4294967295, 0), np.int32: (2147483647, -2147483648),
    np.uint64: (18446744073709551615, 0), np.int64: (9223372036854775807, -9223372036854775808),
    np.float32: (1.0, -1.0),
}


@pytest.mark.parametrize("dt", list(DEFAULT_SALT_PEPPER))
def test_default_salt_and_pepper_values(dt):
    x = ndd.as_tensor(np.full((6, 3), 5, dt), layout="WC")
    salt = np.asarray(ndd.noise.salt_and_pepper(x, prob=1.0, salt_vs_pepper=1.0))
    pepper = np.asarray(ndd.noise.salt_and_pepper(x, prob=1.0, salt_vs_pepper=0.0))
    assert salt.dtype == dt and set(salt.ravel().tolist()) == {DEFAULT_SALT_PEPPER[dt][0]}
    assert pepper.dtype == dt and set(pepper.ravel().tolist()) == {DEFAULT_SALT_PEPPER[dt][1]}


def test_default_arguments():
    """DALI's defaults: gaussian mean 0 and stddev 1, prob 0.05 with salt_vs_pepper 0.5, and
    shot noise's factor 12 (DALI 2.4's operator gives multiples of 12 and a variance of 6.06
    at 0.5; its documentation says 20)."""
    g = np.asarray(ndd.noise.gaussian(ndd.as_tensor(np.zeros(100_000, np.float32)), rng=ndd.random.RNG(1)))
    assert abs(g.mean()) < 0.02 and abs(g.std() - 1.0) < 0.02  # SE 0.003 and 0.0022
    x = np.full((200_000, 1), 100, np.uint8)
    s = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x), rng=ndd.random.RNG(2)))
    assert abs((s == 255).mean() - 0.025) < 0.002 and abs((s == 0).mean() - 0.025) < 0.002  # SE 3.5e-4
    sh = np.asarray(ndd.noise.shot(ndd.as_tensor(np.full(100_000, 100.0, np.float32)), rng=ndd.random.RNG(3)))
    assert set(np.unique(sh / 12.0) % 1) == {0.0} and set(np.unique(sh / 24.0) % 1) == {0.0, 0.5}  # multiples of 12
    assert abs(sh.mean() - 100) < 1.0 and abs(sh.var() / 1200 - 1) < 0.03  # SE 0.11 and 0.0045


# -- gaussian ----------------------------------------------------------------------------


def test_gaussian_statistics():
    out = np.asarray(ndd.noise.gaussian(ndd.as_tensor(np.full(200_000, 10.0, np.float32)),
                                        mean=3.0, stddev=2.0, rng=ndd.random.RNG(5)))
    # standard errors: mean 0.0045, std 0.0032
    assert abs(out.mean() - 13.0) < 0.03 and abs(out.std() - 2.0) < 0.02


def test_gaussian_against_the_documented_recipe():
    """Samples in order, elements in C order: z = standard_normal (float32) of the call's
    generator, noise = float32(mean) + float32(stddev) * z in float32."""
    b = ndd.as_batch([np.zeros((3, 4), np.float32), np.zeros((5, 4), np.float32)])
    out = as_np(ndd.noise.gaussian(b, mean=0.25, stddev=1.5, rng=ndd.random.RNG(8)))
    gen = sub_gen(8)
    z = np.concatenate([gen.standard_normal(12, dtype=np.float32), gen.standard_normal(20, dtype=np.float32)])
    ref = np.float32(0.25) + np.float32(1.5) * z
    np.testing.assert_array_equal(np.concatenate([o.ravel() for o in out]), ref)


@pytest.mark.parametrize("dt", INT_TYPES)
def test_gaussian_integers_round_and_saturate(dt):
    """The integer output is the input plus the same noise as a float32 input of zeros gets
    (the same RNG state), rounded half away from zero and saturated."""
    info = np.iinfo(dt)
    rng = np.random.default_rng(0)
    x = rng.integers(max(info.min, -1000), min(info.max, 1000), (40, 50), endpoint=True).astype(dt)
    if info.bits <= 32:  # (the extremes of 64-bit types are no float64 values: checked below)
        x.ravel()[:200:2], x.ravel()[1:200:2] = info.min, info.max
    kw = {"mean": 0.5, "stddev": 400.0 if info.bits > 8 else 80.0}
    noise = np.asarray(ndd.noise.gaussian(ndd.as_tensor(np.zeros(x.shape, np.float32)), rng=ndd.random.RNG(4), **kw))
    got = np.asarray(ndd.noise.gaussian(ndd.as_tensor(x), rng=ndd.random.RNG(4), **kw))
    assert got.dtype == dt
    np.testing.assert_array_equal(got, round_sat(x.astype(np.float64) + noise.astype(np.float64), dt))
    if info.bits <= 32:
        assert (got == info.max).any() and (got == info.min).any()  # saturated at both ends
    else:
        zero = ndd.as_tensor(np.zeros(3, dt))
        assert np.asarray(ndd.noise.gaussian(zero, mean=1e20, stddev=0.0)).tolist() == [int(info.max)] * 3
        assert np.asarray(ndd.noise.gaussian(zero, mean=-1e20, stddev=0.0)).tolist() == [int(info.min)] * 3


def test_gaussian_rounding_facts_observed_from_dali():
    """DALI 2.4 with stddev=0: uint8 100 + 0.5 -> 101; int8 0 - 0.5 -> -1, + 1.5 -> 2, + 2.5 -> 3,
    + 0.49 -> 0; uint8 100 + 300 -> 255, - 300 -> 0; a float32 input is unchanged."""
    def g(x, dt, mean):
        return np.asarray(ndd.noise.gaussian(ndd.as_tensor(np.full(5, x, dt)), mean=mean, stddev=0.0)).tolist()

    assert g(100, np.uint8, 0.5) == [101] * 5
    assert g(0, np.int8, -0.5) == [-1] * 5
    assert g(0, np.int8, 1.5) == [2] * 5
    assert g(0, np.int8, 2.5) == [3] * 5
    assert g(0, np.int8, 0.49) == [0] * 5
    assert g(100, np.uint8, 300.0) == [255] * 5
    assert g(100, np.uint8, -300.0) == [0] * 5
    x = np.arange(5, dtype=np.float32) * 1.7
    np.testing.assert_array_equal(np.asarray(ndd.noise.gaussian(ndd.as_tensor(x), stddev=0.0)), x)


def test_gaussian_wide_integers_keep_their_precision_as_in_dali():
    """DALI 2.4, stddev=0: int32 16777217 and 2**30 + 1 stay (no float32 sum); int64 2**40 + 1
    stays, 2**62 + 1 gives 2**62 and 2**63 - 1 stays (a float64 sum, saturated)."""
    i32 = np.array([16777217, 2**30 + 1, 2**31 - 1], np.int32)
    assert np.asarray(ndd.noise.gaussian(ndd.as_tensor(i32), stddev=0.0)).tolist() == i32.tolist()
    i64 = np.array([2**40 + 1, 2**62 + 1, 2**63 - 1], np.int64)
    assert np.asarray(ndd.noise.gaussian(ndd.as_tensor(i64), stddev=0.0)).tolist() == [2**40 + 1, 2**62, 2**63 - 1]
    u32 = np.array([2**32 - 1, 16777217], np.uint32)
    assert np.asarray(ndd.noise.gaussian(ndd.as_tensor(u32), stddev=0.0)).tolist() == u32.tolist()


# -- salt and pepper ----------------------------------------------------------------------


def test_salt_and_pepper_fractions_per_pixel():
    x = np.full((300, 300, 3), 100, np.uint8)
    out = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x, layout="HWC"), prob=0.2, salt_vs_pepper=0.3,
                                               rng=ndd.random.RNG(6)))
    assert set(np.unique(out).tolist()) == {0, 100, 255}
    assert (out == out[..., :1]).all()  # one decision per pixel, shared by its channels
    px = out[..., 0]
    # 90000 pixels: standard errors 8e-4 (salt 0.06) and 1.2e-3 (pepper 0.14)
    assert abs((px == 255).mean() - 0.06) < 0.005 and abs((px == 0).mean() - 0.14) < 0.007


def test_salt_and_pepper_fractions_per_channel():
    x = np.full((300, 300, 3), 100, np.uint8)
    out = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x, layout="HWC"), prob=0.2, salt_vs_pepper=0.3,
                                               per_channel=True, rng=ndd.random.RNG(6)))
    # 270000 values: standard errors 4.6e-4 and 6.7e-4
    assert abs((out == 255).mean() - 0.06) < 0.003 and abs((out == 0).mean() - 0.14) < 0.004
    same = (out == out[..., :1]).all(axis=-1).mean()
    expected = 0.8**3 + 0.06**3 + 0.14**3  # all three kept, salted or peppered alike
    assert abs(same - expected) < 0.01  # SE 1.7e-3


def test_salt_and_pepper_against_the_documented_recipe():
    """One float32 uniform per pixel: salt when u < prob * salt_vs_pepper, pepper when u < prob."""
    x = np.full((30, 20, 3), 50, np.float32)
    out = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x, layout="HWC"), prob=0.5, salt_vs_pepper=0.25,
                                               rng=ndd.random.RNG(12)))
    u = sub_gen(12).random(600, dtype=np.float32).astype(np.float64).reshape(30, 20)
    ref = np.where(u < 0.125, 1.0, np.where(u < 0.5, -1.0, 50.0)).astype(np.float32)
    np.testing.assert_array_equal(out, np.repeat(ref[..., None], 3, axis=2))


@pytest.mark.parametrize("dt", INT_TYPES)
def test_salt_and_pepper_positions_do_not_depend_on_the_type(dt):
    x = np.full((40, 40, 3), 9, dt)
    a = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x), prob=0.3, rng=ndd.random.RNG(3)))
    f = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x.astype(np.float32)), prob=0.3, rng=ndd.random.RNG(3)))
    info = np.iinfo(dt)
    np.testing.assert_array_equal(a, np.where(f == 1, dt(info.max), np.where(f == -1, dt(info.min), dt(9))))


@pytest.mark.parametrize("shape,layout,shared_axis", [
    ((20, 30, 3), "HWC", 2), ((3, 20, 30), "CHW", 0), ((4, 10, 10, 3), "FHWC", 3), ((4, 10, 10, 3), "DHWC", 3),
    ((50, 3), "WC", 1), ((20, 30, 3), None, 2), ((20, 30), None, 1)])
def test_per_channel_false_shares_the_channel_axis(shape, layout, shared_axis):
    """DALI 2.4: with per_channel=False the axis 'C' (first or last) shares one decision; an
    empty layout means channels last (a 2-D input without a layout shares whole rows)."""
    x = ndd.as_tensor(np.full(shape, 100, np.uint8), layout=layout)
    out = np.asarray(ndd.noise.salt_and_pepper(x, prob=0.4, rng=ndd.random.RNG(1)))
    assert (out == out.take([0], axis=shared_axis)).all()
    assert 0.25 < (out != 100).mean() < 0.55
    per = np.asarray(ndd.noise.salt_and_pepper(x, prob=0.4, per_channel=True, rng=ndd.random.RNG(1)))
    assert not (per == per.take([0], axis=shared_axis)).all()


def test_per_channel_layout_rules_as_in_dali():
    """DALI 2.4: "'C' should be the first or the last dimension in the layout, except for empty
    layouts" (HW, FCHW and HCW fail with per_channel=False, work with per_channel=True)."""
    for shape, layout in (((20, 30), "HW"), ((2, 3, 4, 5), "FCHW"), ((4, 3, 5), "HCW")):
        x = ndd.as_tensor(np.zeros(shape, np.uint8), layout=layout)
        with pytest.raises(ValueError, match="'C' as its first or last axis"):
            ndd.noise.salt_and_pepper(x)
        assert np.asarray(ndd.noise.salt_and_pepper(x, per_channel=True)).shape == shape


def test_one_dimensional_and_scalar_inputs():
    """A 1-D input without a layout is one pixel of channels (DALI 2.4: all values kept or all
    replaced); a 0-d input is one value (DALI 2.4 crashes there)."""
    x = ndd.as_batch([np.full(50, 7, np.uint8)] * 200)
    fracs = [float((a != 7).mean()) for a in as_np(ndd.noise.salt_and_pepper(x, prob=0.5, rng=ndd.random.RNG(2)))]
    assert set(fracs) == {0.0, 1.0}
    s = ndd.noise.salt_and_pepper(ndd.as_tensor(np.float32(3.0)), prob=1.0, salt_vs_pepper=1.0)
    assert np.asarray(s).shape == () and float(np.asarray(s)) == 1.0


def test_prob_zero_and_one():
    x = np.arange(60, dtype=np.uint8).reshape(4, 5, 3)
    np.testing.assert_array_equal(np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x), prob=0.0)), x)
    out = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(x), prob=1.0, per_channel=True))
    assert set(np.unique(out).tolist()) <= {0, 255}


def test_salt_and_pepper_values_are_truncated_as_in_dali():
    """DALI 2.4 converts salt_val and pepper_val with a C++ cast: uint8 127.5 -> 127, 126.6 -> 126,
    int8 -2.5 -> -2, float32 0.3 -> 0.3."""
    u8 = ndd.as_tensor(np.full(8, 100, np.uint8))
    assert set(np.asarray(ndd.noise.salt_and_pepper(u8, prob=1.0, salt_vs_pepper=1.0, salt_val=127.5)).tolist()) == {127}
    assert set(np.asarray(ndd.noise.salt_and_pepper(u8, prob=1.0, salt_vs_pepper=1.0, salt_val=126.6)).tolist()) == {126}
    i8 = ndd.as_tensor(np.zeros(8, np.int8))
    assert set(np.asarray(ndd.noise.salt_and_pepper(i8, prob=1.0, salt_vs_pepper=0.0, pepper_val=-2.5)).tolist()) == {-2}
    f = np.asarray(ndd.noise.salt_and_pepper(ndd.as_tensor(np.zeros(8, np.float32)), prob=1.0, salt_vs_pepper=1.0,
                                             salt_val=0.3))
    assert f.dtype == np.float32 and set(f.tolist()) == {np.float32(0.3)}


def test_salt_and_pepper_values_out_of_range_are_errors():
    """DALI 2.4 wraps them (uint8 salt_val=300 gives 44, pepper_val=-5 gives 251); ndd refuses."""
    u8 = ndd.as_tensor(np.full(8, 100, np.uint8))
    assert "'salt_val' = 300.0 is out of the range of uint8" in run_error(
        lambda: ndd.noise.salt_and_pepper(u8, salt_val=300.0))
    assert "'pepper_val' = -5.0 is out of the range" in run_error(lambda: ndd.noise.salt_and_pepper(u8, pepper_val=-5.0))
    i8 = ndd.as_tensor(np.zeros(8, np.int8))
    assert "out of the range of int8" in run_error(lambda: ndd.noise.salt_and_pepper(i8, pepper_val=-129.0))
    # -0.9 truncates to 0, within uint8's range
    assert np.asarray(ndd.noise.salt_and_pepper(u8, prob=1.0, salt_vs_pepper=0.0, pepper_val=-0.9)).tolist() == [0] * 8


# -- shot -------------------------------------------------------------------------------------


@pytest.mark.parametrize("factor", [100.0, 20.0, 4.0, 3.0, 0.5])
def test_shot_mean_and_variance(factor):
    """Rates 0.5, 2.5, 12.5 (inversion), 16.7 and 100 (normal approximation): mean x, variance
    x * factor. N = 200000: the mean's relative standard error is at most 0.0032, the
    variance's at most 0.0045 (rate 0.5, excess kurtosis 2)."""
    x = 50.0
    out = np.asarray(ndd.noise.shot(ndd.as_tensor(np.full(200_000, x, np.float32)), factor=factor,
                                    rng=ndd.random.RNG(int(factor * 10))))
    k = out / np.float32(factor)
    np.testing.assert_allclose(k, np.round(k), atol=1e-3)  # multiples of the factor
    assert abs(out.mean() / x - 1) < 0.016
    assert abs(out.var() / (x * factor) - 1) < 0.025


@pytest.mark.parametrize("lam", [0.3, 2.5, 9.0, 15.5, 16.0, 40.0, 300.0])
def test_poisson_counts_follow_the_poisson_distribution(lam):
    """Empirical frequencies against the Poisson pmf, N = 200000: their total variation
    distance may exceed the one sampling alone gives on average (``expected``; 0.008 at rate
    300) by 0.004 (the method's own bias is 1.3e-3 at rate 16; the fluctuation's standard
    deviation about 7e-4)."""
    n_draws = 200_000
    out = np.asarray(ndd.noise.shot(ndd.as_tensor(np.full(n_draws, lam, np.float32)), factor=1.0,
                                    rng=ndd.random.RNG(77)))
    k = out.astype(np.int64)
    n = int(lam + 12 * math.sqrt(lam) + 12)
    pmf = np.array([math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1)) for j in range(n)])
    freq = np.bincount(k, minlength=n)[:n] / n_draws
    tv = 0.5 * np.abs(freq - pmf).sum()
    expected = 0.5 * np.sqrt(2 * pmf * (1 - pmf) / (np.pi * n_draws)).sum()
    assert k.max() < n and tv < expected + 0.004
    assert abs(k.mean() - lam) < 5 * math.sqrt(lam / n_draws) and abs(k.var() / lam - 1) < 0.025


def test_shot_dense_batch_draws_sample_by_sample():
    """A dense batch draws u then z for each sample in turn, as its samples alone would."""
    lam = np.array([[0.5, 3.0, 20.0], [7.0, 40.0, 1.0]], np.float32)
    out = [np.asarray(t) for t in ndd.noise.shot(ndd.as_batch(lam), factor=1.0, rng=ndd.random.RNG(4)).tensors]
    gen = sub_gen(4)
    for row, got in zip(lam, out):
        u, z = gen.random(3), gen.standard_normal(3, dtype=np.float32)
        ref = _noise.poisson(row.astype(np.float64), u, z)
        np.testing.assert_array_equal(got, ref.astype(np.float32))


def test_shot_against_the_documented_recipe():
    """u (float64) for every element, then z (float32 normal): below rate 16, inversion of the
    CDF with u; from 16 on, floor(lam + sqrt(lam - 5/36) z + (z*z - 1) / 6 + 1/2)."""
    lam = np.array([0.0, 0.5, 3.0, 7.5, 15.9, 16.0, 30.0, 1000.0] * 250, np.float32)
    out = np.asarray(ndd.noise.shot(ndd.as_tensor(lam), factor=1.0, rng=ndd.random.RNG(21)))
    gen = sub_gen(21)
    u = gen.random(lam.size)
    z = gen.standard_normal(lam.size, dtype=np.float32).astype(np.float64)
    ref = np.empty(lam.size)
    for i, (r, ui, zi) in enumerate(zip(lam.astype(np.float64), u, z)):
        if r < 16:
            cdf = np.cumsum([math.exp(-r + j * math.log(r) - math.lgamma(j + 1)) if r > 0 else float(j == 0)
                             for j in range(80)])
            ref[i] = np.searchsorted(cdf, ui, side="right")
        else:
            ref[i] = max(0.0, math.floor(r + math.sqrt(r - 5 / 36) * zi + (zi * zi - 1) / 6 + 0.5))
    np.testing.assert_array_equal(out, ref.astype(np.float32))


@pytest.mark.parametrize("dt", INT_TYPES)
def test_shot_integers_round_and_saturate(dt):
    """An integer input gives the float32 result of the same values (same RNG state), rounded
    half away from zero and saturated (DALI 2.4 rounds: uint8 1 with factor 0.7 gives 0 about
    24% of the time, truncation would give 58%)."""
    info = np.iinfo(dt)
    rng = np.random.default_rng(1)
    x = rng.integers(max(info.min, -50), min(info.max, 250), (60, 70), endpoint=True).astype(dt)
    for factor in (0.7, 2.5, 90.0):
        f = np.asarray(ndd.noise.shot(ndd.as_tensor(x.astype(np.float32)), factor=factor, rng=ndd.random.RNG(9)))
        got = np.asarray(ndd.noise.shot(ndd.as_tensor(x), factor=factor, rng=ndd.random.RNG(9)))
        assert got.dtype == dt
        np.testing.assert_array_equal(got, round_sat(f.astype(np.float64), dt))
    ones = np.asarray(ndd.noise.shot(ndd.as_tensor(np.ones(100_000, np.uint8)), factor=0.7, rng=ndd.random.RNG(4)))
    assert abs((ones == 0).mean() - math.exp(-1 / 0.7)) < 0.007  # 0.2397; SE 1.4e-3


def test_shot_facts_observed_from_dali():
    """DALI 2.4: a negative, NaN or infinite input gives 0; uint8 200 with factor 100 saturates
    at 255; int32 2**31 - 1 with factor 1 gives values rounded to float32 (multiples of 128)
    or the saturated maximum."""
    bad = np.array([-100.0, -0.5, np.nan, np.inf, -np.inf], np.float32)
    assert np.asarray(ndd.noise.shot(ndd.as_tensor(bad), factor=1.0)).tolist() == [0.0] * 5
    assert np.asarray(ndd.noise.shot(ndd.as_tensor(np.full(10, -100, np.int8)), factor=1.0)).tolist() == [0] * 10
    u8 = np.asarray(ndd.noise.shot(ndd.as_tensor(np.full(2000, 200, np.uint8)), factor=100.0, rng=ndd.random.RNG(1)))
    assert set(np.unique(u8).tolist()) <= {0, 100, 200, 255} and (u8 == 255).any()
    i32 = np.asarray(ndd.noise.shot(ndd.as_tensor(np.full(200, 2**31 - 1, np.int32)), factor=1.0, rng=ndd.random.RNG(2)))
    assert all(v == 2**31 - 1 or v % 128 == 0 for v in i32.tolist()) and (i32 < 2**31 - 1).any()
    huge = np.asarray(ndd.noise.shot(ndd.as_tensor(np.array([1e30, 3e9], np.float32)), factor=1.0))
    assert np.all(np.abs(huge / np.array([1e30, 3e9]) - 1) < 1e-3)


def test_exp_neg_accuracy():
    lam = np.linspace(0.0, 16.0, 100_001)
    np.testing.assert_allclose(_noise.exp_neg(lam), np.exp(-lam), rtol=2e-14, atol=0)


# -- RNG use, determinism, batches ------------------------------------------------------------


KW = {"gaussian": {"stddev": 3.0}, "salt_and_pepper": {"prob": 0.3}, "shot": {"factor": 2.0}}


@pytest.mark.parametrize("name", OPS)
def test_seven_words_per_call(name):
    rng = ndd.random.RNG(0)
    img = np.full((64, 48, 3), 30, np.uint8)
    op(name)(ndd.as_tensor(img), rng=rng, **KW[name]).evaluate()
    assert rng._draws == 7
    op(name)(ndd.as_batch([img] * 5), rng=rng, **KW[name]).evaluate()
    assert rng._draws == 14
    op(name)(ndd.as_batch([img[:10], img[:3, :7]]), rng=rng, **KW[name]).evaluate()
    assert rng._draws == 21
    default = ndd.random.get_default_rng()
    before = default._draws
    op(name)(ndd.as_batch([img] * 3), **KW[name]).evaluate()
    assert default._draws == before + 7


@pytest.mark.parametrize("name", OPS)
def test_same_state_same_values(name):
    b = ndd.as_batch([np.full((30, 20, 3), 40, np.uint8), np.full((10, 5, 3), 80, np.uint8)], layout="HWC")
    rng = ndd.random.RNG(123)
    state = rng.get_state()
    first = as_np(op(name)(b, rng=rng, **KW[name]))
    again = as_np(op(name)(b, rng=ndd.random.RNG(state=state), **KW[name]))
    other = as_np(op(name)(b, rng=ndd.random.RNG(124), **KW[name]))
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, y) for x, y in zip(first, other))
    nxt = as_np(op(name)(b, rng=rng, **KW[name]))  # the next call draws new values
    assert not all(np.array_equal(x, y) for x, y in zip(first, nxt))


@pytest.mark.parametrize("name", OPS)
def test_dense_and_ragged_batches_use_the_words_in_sample_order(name):
    """A batch of equal shapes (processed at once) gives the same values as the same samples
    followed by a sample of another shape (processed one by one)."""
    s = [np.full((6, 7, 3), v, np.uint8) for v in (40, 90)]
    dense = as_np(op(name)(ndd.as_batch(s, layout="HWC"), rng=ndd.random.RNG(5), **KW[name]))
    ragged = as_np(op(name)(ndd.as_batch(s + [s[0][:2]], layout="HWC"), rng=ndd.random.RNG(5), **KW[name]))
    for x, y in zip(dense, ragged[:2]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", OPS)
def test_sample_and_batch_mode(name):
    t = ndd.as_tensor(np.full((8, 9, 3), 50, np.uint8), layout="HWC")
    out = op(name)(t, **KW[name])
    assert isinstance(out, ndd.Tensor) and out.layout == "HWC" and np.asarray(out).shape == (8, 9, 3)
    b = op(name)(t, batch_size=4, rng=ndd.random.RNG(3), **KW[name])  # a Tensor broadcast to a batch
    assert isinstance(b, ndd.Batch) and b.batch_size == 4 and b.layout == "HWC"
    arrs = as_np(b)
    assert not all(np.array_equal(arrs[0], a) for a in arrs[1:])  # each sample its own noise
    ragged = op(name)(ndd.as_batch([np.zeros((2, 3, 3), np.float32), np.zeros((4, 1, 3), np.float32)]), **KW[name])
    assert [a.shape for a in as_np(ragged)] == [(2, 3, 3), (4, 1, 3)]
    empty = op(name)(ndd.as_batch([np.zeros((0, 3), np.uint8)]), **KW[name])
    assert as_np(empty)[0].shape == (0, 3)
    scalars = as_np(op(name)(ndd.as_batch([np.float32(3.0), np.float32(-1.0)]), **KW[name]))
    assert [(a.shape, a.dtype) for a in scalars] == [((), np.float32)] * 2


def f32(*v: float) -> ndd.Batch:
    return ndd.as_batch([np.float32(x) for x in v])


def test_per_sample_gaussian_arguments():
    b = ndd.as_batch([np.zeros(50_000, np.float32)] * 3)
    out = as_np(ndd.noise.gaussian(b, mean=f32(1.0, 10.0, -5.0), stddev=f32(0.0, 1.0, 4.0), rng=ndd.random.RNG(3)))
    np.testing.assert_array_equal(out[0], np.ones(50_000, np.float32))
    for a, m, s in zip(out[1:], (10.0, -5.0), (1.0, 4.0)):  # SE of the mean <= 0.018, of the std <= 0.013
        assert abs(a.mean() - m) < 0.1 and abs(a.std() / s - 1) < 0.02


def test_per_sample_salt_and_pepper_arguments():
    b = ndd.as_batch([np.full((100, 100, 3), 100, np.uint8)] * 3, layout="HWC")
    out = as_np(ndd.noise.salt_and_pepper(b, prob=f32(0.0, 0.5, 1.0), salt_vs_pepper=f32(0.5, 1.0, 0.0),
                                          salt_val=f32(7, 8, 9), pepper_val=f32(1, 2, 3), rng=ndd.random.RNG(3)))
    assert (out[0] == 100).all()
    assert set(np.unique(out[1]).tolist()) == {8, 100} and abs((out[1] == 8).mean() - 0.5) < 0.03  # SE 0.005
    assert (out[2] == 3).all()


def test_per_sample_shot_factor():
    b = ndd.as_batch([np.full(100_000, 60.0, np.float32)] * 3)
    out = as_np(ndd.noise.shot(b, factor=f32(0.5, 6.0, 60.0), rng=ndd.random.RNG(3)))
    for a, f in zip(out, (0.5, 6.0, 60.0)):  # variance SE <= 0.0077 relative
        assert abs(a.mean() / 60 - 1) < 0.02 and abs(a.var() / (60 * f) - 1) < 0.04


# -- errors -----------------------------------------------------------------------------------


def test_argument_errors_at_the_call():
    x = ndd.as_tensor(np.zeros((4, 4, 3), np.uint8))
    # DALI 2.4 accepts a negative stddev (same distribution); ndd refuses it
    with pytest.raises(ValueError, match="'stddev' must be >= 0, got -1.0"):
        ndd.noise.gaussian(x, stddev=-1.0)
    # DALI 2.4: "Noise probability should be a value within [0.0, 1.0]. Got: 1.5" (and for -0.1)
    for v in (1.5, -0.1):
        with pytest.raises(ValueError, match="'prob' must be in \\[0, 1\\]"):
            ndd.noise.salt_and_pepper(x, prob=v)
    # DALI 2.4: "Salt-vs-pepper probability should be a value within [0.0, 1.0]. Got: 1.5"
    for v in (1.5, -0.5):
        with pytest.raises(ValueError, match="'salt_vs_pepper' must be in \\[0, 1\\]"):
            ndd.noise.salt_and_pepper(x, salt_vs_pepper=v)
    # DALI 2.4 gives zeros for factor 0 (its documentation says: the input unchanged) and -0.0
    # for negative factors; ndd refuses both
    for v in (0.0, -1.0):
        with pytest.raises(ValueError, match="'factor' must be > 0"):
            ndd.noise.shot(x, factor=v)
    for name, kw in (("gaussian", {"mean": float("nan")}), ("gaussian", {"stddev": float("inf")}),
                     ("shot", {"factor": float("nan")}), ("salt_and_pepper", {"salt_val": float("nan")})):
        with pytest.raises(ValueError, match="must be finite"):
            op(name)(x, **kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'seed'"):
        ndd.noise.gaussian(x, seed=3)
    with pytest.raises(ValueError, match="rng must be an ndd.random.RNG"):
        ndd.noise.shot(x, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="'per_channel' expects a bool"):
        ndd.noise.salt_and_pepper(x, per_channel="yes")


def test_per_sample_argument_errors_when_the_op_runs():
    b = ndd.as_batch([np.zeros((4, 4, 3), np.uint8)] * 2)
    assert "'stddev' must be >= 0, got -2.0 (sample 1)" in run_error(
        lambda: ndd.noise.gaussian(b, stddev=f32(1.0, -2.0)))
    assert "'prob' must be in [0, 1], got 1.5 (sample 0)" in run_error(
        lambda: ndd.noise.salt_and_pepper(b, prob=f32(1.5, 0.1)))
    assert "'salt_vs_pepper' must be in [0, 1]" in run_error(
        lambda: ndd.noise.salt_and_pepper(b, salt_vs_pepper=f32(0.5, -0.1)))
    assert "'factor' must be > 0, got 0.0 (sample 1)" in run_error(lambda: ndd.noise.shot(b, factor=f32(1.0, 0.0)))
    assert "'salt_val' = 256.0 is out of the range of uint8" in run_error(
        lambda: ndd.noise.salt_and_pepper(b, salt_val=f32(255.0, 256.0)))
    vec = ndd.as_batch([np.array([1.0, 2.0], np.float32)] * 2)
    assert "'mean' takes one value per sample, but sample 0 of its batch has shape (2,)" in run_error(
        lambda: ndd.noise.gaussian(b, mean=vec))
