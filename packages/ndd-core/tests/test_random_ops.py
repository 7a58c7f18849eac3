"""Random operators: values against the documented Philox recipe, draw counts, seeding."""

import threading

import numpy as np
import pytest

import ndd
from ndd.random import _philox


def sub_words(seed, n):
    """Reference: the 7 words an op draws from RNG(seed), then n words of its sub-stream."""
    w = ndd.random.RNG(seed).draw_words(7)
    key = int(w[0]) | int(w[1]) << 32
    counter = int(w[2]) | int(w[3]) << 32 | int(w[4]) << 64 | int(w[5]) << 96
    return _philox.stream_words(key, counter, int(w[6]) & 3, n)


def as_np(b):
    return [np.asarray(t) for t in b]


def test_uniform_against_reference():
    out = ndd.random.uniform(batch_size=5, range=[-7.5, 7.5], shape=[3], rng=ndd.random.RNG(11))
    words = sub_words(11, 15).astype(np.uint64)
    ref = (-7.5 + 15.0 * ((words >> 8).astype(np.float64) * 2.0**-24)).reshape(5, 3)
    np.testing.assert_allclose(np.stack(as_np(out)), ref, rtol=0, atol=2e-6)
    assert out.dtype == ndd.float32 and out.batch_size == 5


def test_uniform_values_discrete():
    vals = [2.0, 4.0, 8.0]
    out = ndd.random.uniform(batch_size=200, values=vals, rng=ndd.random.RNG(3))
    got = np.array([t.item() for t in out])
    idx = (sub_words(3, 200).astype(np.uint64) * 3) >> 32
    np.testing.assert_array_equal(got, np.array(vals)[idx])
    assert set(got) == set(vals)


def test_normal_statistics_and_reference():
    out = ndd.random.normal(shape=[20000], mean=3.0, stddev=2.0, rng=ndd.random.RNG(5))
    a = np.asarray(out)
    assert abs(a.mean() - 3.0) < 0.05 and abs(a.std() - 2.0) < 0.05
    w = sub_words(5, 40000).astype(np.float64)
    u1 = (w[0::2] + 1) * 2.0**-32
    u2 = w[1::2] * 2.0**-32
    ref = 3.0 + 2.0 * (np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2))
    np.testing.assert_allclose(a, ref, rtol=1e-5, atol=1e-5)


def test_coin_flip():
    out = ndd.random.coin_flip(shape=[10000], probability=0.3, rng=ndd.random.RNG(9))
    a = np.asarray(out)
    assert out.dtype == ndd.int32 and set(np.unique(a)) <= {0, 1} and abs(a.mean() - 0.3) < 0.02
    ref = ((sub_words(9, 10000) >> 8).astype(np.float64) * 2.0**-24 < 0.3).astype(np.int32)
    np.testing.assert_array_equal(a, ref)


def test_choice():
    out = ndd.random.choice(ndd.tensor([10, 20, 30]), shape=[3000], p=[0.5, 0.25, 0.25], rng=ndd.random.RNG(1))
    a = np.asarray(out)
    assert abs((a == 10).mean() - 0.5) < 0.03 and set(np.unique(a)) == {10, 20, 30}
    assert np.asarray(ndd.random.choice(4, shape=[100], rng=ndd.random.RNG(2))).max() < 4
    with pytest.raises(ValueError) as info:
        ndd.random.choice(ndd.tensor([1, 2, 3]), p=[0.5, 0.6, 0.1]).evaluate()
    assert "'p' must be 3 non-negative probabilities" in str(info.value.__cause__)


def test_integer_outputs_round_and_saturate_as_dali():
    """An integer dtype converts the float draw as DALI's ConvertSat does: rounded half away
    from zero and clamped (DALI 2.4: uniform(range=[0, 10], dtype=int32) gives 10 about one
    time in 20; normal(mean=300, dtype=int8) gives 127; mean 0.7 with a tiny stddev gives 1)."""
    words = sub_words(4, 20000).astype(np.uint64)
    f = (10.0 * ((words >> 8).astype(np.float64) * 2.0**-24)).astype(np.float32)
    ref = np.floor(f + 0.5).astype(np.int32)
    got = np.asarray(ndd.random.uniform(shape=[20000], range=[0, 10], dtype=ndd.int32, rng=ndd.random.RNG(4)))
    np.testing.assert_array_equal(got, ref)
    assert got.max() == 10 and 0.03 < (got == 10).mean() < 0.07
    assert set(np.unique(np.asarray(ndd.random.normal(shape=[50], mean=300, dtype=ndd.int8)))) == {127}
    assert set(np.unique(np.asarray(ndd.random.normal(shape=[50], mean=0.7, stddev=0.01, dtype=ndd.int32)))) == {1}
    low = np.asarray(ndd.random.normal(shape=[5000], mean=5, stddev=10, dtype=ndd.uint8))
    assert low.min() == 0 and low.max() < 80  # negative draws clamp to 0 instead of wrapping to 2xx


def test_choice_from_a_matrix_picks_rows():
    """A tensor with more than one dimension is chosen from along its first axis (as DALI)."""
    m = ndd.tensor(np.array([[1, 2], [3, 4], [5, 6]], np.int32))
    out = ndd.random.choice(m, shape=[7], rng=ndd.random.RNG(8))
    a = np.asarray(out)
    assert a.shape == (7, 2) and out.ndim == 2
    idx = (sub_words(8, 7).astype(np.uint64) * 3) >> 32
    np.testing.assert_array_equal(a, np.asarray(m)[idx])
    b = ndd.random.choice(ndd.batch([np.asarray(m)] * 2), shape=[4], p=[0, 0, 1.0])
    assert b.shape == [(4, 2), (4, 2)] and all((np.asarray(t) == [5, 6]).all() for t in b.tensors)


def test_beta():
    a = np.asarray(ndd.random.beta(shape=[20000], alpha=2.0, beta=5.0, rng=ndd.random.RNG(4)))
    assert ((a > 0) & (a < 1)).all() and abs(a.mean() - 2 / 7) < 0.01
    b = np.asarray(ndd.random.beta(shape=[20000], alpha=2.0, beta=5.0, rng=ndd.random.RNG(4)))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("call", [
    lambda r: ndd.random.uniform(batch_size=64, rng=r),
    lambda r: ndd.random.uniform(rng=r),
    lambda r: ndd.random.normal(batch_size=3, shape=[100], rng=r),
    lambda r: ndd.random.coin_flip(batch_size=64, rng=r),
    lambda r: ndd.random.choice(ndd.tensor([1, 2]), batch_size=8, rng=r),
    lambda r: ndd.random.beta(batch_size=2, rng=r),
])
def test_each_call_draws_exactly_seven_words(call):
    r = ndd.random.RNG(0)
    before = r._draws
    call(r).evaluate()
    assert r._draws - before == 7


def test_default_rng_draws_too():
    r = ndd.random.get_default_rng()
    before = r._draws
    ndd.random.uniform(batch_size=4)
    assert r._draws - before == 7


def test_same_seed_same_values_both_ways():
    ndd.random.set_seed(1234)
    a = as_np(ndd.random.uniform(batch_size=6, range=[0, 10]))
    b = as_np(ndd.random.uniform(batch_size=6, range=[0, 10], rng=ndd.random.RNG(1234)))
    np.testing.assert_array_equal(a, b)
    r = ndd.random.RNG(77)
    s = r.get_state()
    first = as_np(ndd.random.normal(batch_size=4, rng=r))
    r.set_state(s)
    np.testing.assert_array_equal(first, as_np(ndd.random.normal(batch_size=4, rng=r)))


def test_per_sample_arguments():
    lo_hi = ndd.batch([np.array([0, 1], np.float32), np.array([100, 101], np.float32)])
    out = [t.item() for t in ndd.random.uniform(range=lo_hi, rng=ndd.random.RNG(0))]
    assert 0 <= out[0] < 1 and 100 <= out[1] < 101
    p = ndd.batch([np.float32(0.0), np.float32(1.0)])
    assert [t.item() for t in ndd.random.coin_flip(probability=p)] == [0, 1]


def test_sample_mode_and_shape_like():
    t = ndd.random.uniform()
    assert isinstance(t, ndd.Tensor) and t.shape == ()
    like = ndd.batch([np.zeros((2, 3)), np.zeros((4, 1))])
    out = ndd.random.normal(like)
    assert out.shape == [(2, 3), (4, 1)] and out.ndim == 2


def test_errors():
    with pytest.raises(ValueError, match="rng must be an ndd.random.RNG"):
        ndd.random.uniform(rng=np.random.default_rng())
    with pytest.raises(ValueError, match="'range' must be \\[lo, hi\\]"):
        ndd.random.uniform(range=[1, 0])
    with pytest.raises(ValueError, match="'probability' must be in \\[0, 1\\]"):
        ndd.random.coin_flip(probability=1.5)
    with pytest.raises(ValueError, match="'shape' must be non-negative"):
        ndd.random.uniform(shape=[-1])
    with pytest.raises(ValueError) as info:  # per-sample values are checked when the op runs
        ndd.random.coin_flip(probability=ndd.batch([np.float32(2.0)])).evaluate()
    assert "sample 0" in str(info.value.__cause__)


def test_default_rng_is_per_thread():
    results = {}

    def work(name):
        ndd.random.set_seed(42)
        results[name] = [t.item() for t in ndd.random.uniform(batch_size=50)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ref = [t.item() for t in ndd.random.uniform(batch_size=50, rng=ndd.random.RNG(42))]
    assert all(v == ref for v in results.values())


@pytest.mark.parametrize("op,arg,value", [
    (ndd.random.uniform, "range", [-2.0, 3.0]),
    (ndd.random.normal, "stddev", 2.5),
    (ndd.random.coin_flip, "probability", 0.3),
])
def test_dense_and_per_sample_paths_agree(op, arg, value):
    dense = op(batch_size=6, shape=[5], rng=ndd.random.RNG(8), **{arg: value})
    per_sample_value = ndd.batch([np.asarray(value, np.float32)] * 6)
    ragged = op(batch_size=6, shape=[5], rng=ndd.random.RNG(8), **{arg: per_sample_value})
    assert dense._batch_data().dense is not None
    np.testing.assert_array_equal(np.stack(as_np(dense)), np.stack(as_np(ragged)))


def test_per_sample_values_a_and_p_are_each_sample_s():
    """Per-sample ``values`` (uniform), ``a`` and ``p`` (choice) hold for their own sample
    (the whole-batch shortcut took sample 0's for every sample)."""
    u = ndd.random.uniform(values=ndd.batch([np.array([1, 2], np.float32), np.array([7, 8], np.float32)]),
                           shape=[200], rng=ndd.random.RNG(3))
    assert set(np.asarray(u.tensors[0]).tolist()) == {1, 2} and set(np.asarray(u.tensors[1]).tolist()) == {7, 8}
    c = ndd.random.choice(ndd.batch([np.int32(2), np.int32(100)]), shape=[1000], rng=ndd.random.RNG(2))
    assert np.asarray(c.tensors[0]).max() == 1 and np.asarray(c.tensors[1]).max() > 90
    p = ndd.batch([np.array([1, 0, 0], np.float32), np.array([0, 0, 1], np.float32)])
    c = ndd.random.choice(ndd.batch([np.int32(3), np.int32(3)]), p=p, shape=[50], rng=ndd.random.RNG(2))
    assert set(np.asarray(c.tensors[0]).tolist()) == {0} and set(np.asarray(c.tensors[1]).tolist()) == {2}


def test_uniform_integer_conversions_as_dali():
    """As DALI 2.4: ``values`` convert rounded and saturated (1.6 -> 2, 300 -> 255 in uint8);
    a ``range`` is first truncated to the integer type ([0.7, 2.7] is [0, 2]: 0, 1, 2 a
    quarter, a half, a quarter); a float range never gives its upper end, however narrow."""
    v = np.asarray(ndd.random.uniform(values=[1.6, 300, -3], dtype=ndd.uint8, shape=[200], rng=ndd.random.RNG(1)))
    assert set(v.tolist()) == {2, 255, 0}
    x = np.asarray(ndd.random.uniform(range=[0.7, 2.7], dtype=ndd.int32, shape=[100_000], rng=ndd.random.RNG(1)))
    freq = [np.mean(x == k) for k in (0, 1, 2)]
    np.testing.assert_allclose(freq, [0.25, 0.5, 0.25], atol=0.01)  # SE 0.0016
    hi = np.nextafter(np.float32(100), np.float32(200))
    f = np.asarray(ndd.random.uniform(range=[100.0, float(hi)], shape=[10_000], rng=ndd.random.RNG(2)))
    assert f.max() < hi and f.min() == 100.0


def test_choice_of_a_large_count_and_p_tolerance():
    """``a`` up to 2**32 draws without listing the values (it raised MemoryError for 2**32);
    ``p`` may miss a sum of 1 by less than 1e-4 (DALI's tolerance)."""
    big = np.asarray(ndd.random.choice(ndd.tensor(np.int64(2**32)), shape=[1000], rng=ndd.random.RNG(1)))
    assert big.dtype == np.int64 and big.min() >= 0 and big.max() < 2**32 and big.max() > 2**31
    few = np.asarray(ndd.random.choice(3, p=[0.5, 0.25, 0.25005], shape=[2000], rng=ndd.random.RNG(2)))
    assert set(few.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError) as info:
        np.asarray(ndd.random.choice(3, p=[0.5, 0.25, 0.2502], shape=[2], rng=ndd.random.RNG(2)))
    assert "'p' must be 3 non-negative probabilities" in str(info.value.__cause__ or info.value)
