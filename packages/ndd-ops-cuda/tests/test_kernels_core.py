"""GPU kernels of core's operators against the CPU ones: cast, arithmetic and ndd.math,
subscripts, transpose, the shape ops (pad, slice and one_hot in more detail in
test_kernels_pad_slice_one_hot.py) and the random ops (drawn on the host: the same values
for the same RNG state).

Tolerances: exact, except float math functions (1e-6 relative) and float division
(1 ulp-level, 1e-6 relative).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ndd

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, assert_equal, batch, rand_images, run_both, samples_of  # noqa: E402

RAGGED = [(4, 5), (3, 7), (6, 2)]
UNIFORM = [(4, 5)] * 3


def _ints(seed, shapes, dtype, lo=-50, hi=50):
    rng = np.random.default_rng(seed)
    return [rng.integers(lo, hi, s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
@pytest.mark.parametrize("src,dst", [(np.float32, ndd.int32), (np.float32, ndd.uint8), (np.uint8, ndd.float32),
                                     (np.int32, ndd.int16), (np.int16, ndd.float64), (np.float32, ndd.bool),
                                     (np.uint8, ndd.uint16), (np.float64, ndd.float16)])
def test_cast(shapes, src, dst):
    lo = 0 if np.dtype(src).kind == "u" or dst in (ndd.uint8, ndd.uint16) else -100
    b = batch([x + np.asarray(0.25, src) * (np.dtype(src).kind == "f") for x in _ints(1, shapes, src, lo, 100)])
    assert_equal(*run_both(lambda x: ndd.cast(x, dtype=dst), b)[:2])


def _saturated(a: np.ndarray, dst) -> np.ndarray:
    """Independent reference of DALI's ConvertSat: np.modf rounding (ties away from zero),
    NaN to 0, np.clip in float64 (exact for targets of up to 32 bits)."""
    info = np.iinfo(np.dtype(dst))
    if a.dtype.kind == "f":
        frac, whole = np.modf(a.astype(np.float64))
        r = whole + (frac >= 0.5) - (frac <= -0.5)
        return np.clip(np.where(np.isnan(r), 0, r), info.min, info.max).astype(dst)
    return np.clip(a.astype(np.float64), info.min, info.max).astype(dst)


def _out_of_range(seed: int, shapes, src, dst) -> list[np.ndarray]:
    """Values over twice the target's range, with ties, NaN and infinities sprinkled in."""
    info = np.iinfo(dst.numpy_dtype)
    rng = np.random.default_rng(seed)
    lo, hi = float(info.min), float(info.max)
    span = hi - lo
    out = []
    for s in shapes:
        if np.dtype(src).kind == "f":
            x = rng.uniform(lo - span / 2, hi + span / 2, s)
            flat = x.reshape(-1)
            flat[::5] = np.round(flat[::5]) + 0.5  # ties
            flat[1:4] = [np.nan, np.inf, -np.inf]
            flat[4:8] = [hi + 0.5, lo - 0.5, hi - 0.5, lo + 0.5]
        else:
            si = np.iinfo(src)
            x = rng.integers(max(si.min, int(lo - span)), min(si.max, int(hi + span)), s, endpoint=True)
        out.append(x.astype(src))
    return out


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
@pytest.mark.parametrize("src,dst", [(s, d) for s in (np.float32, np.float64)
                                     for d in (ndd.uint8, ndd.int8, ndd.int16, ndd.int32, ndd.uint16)]
                         + [(np.int32, ndd.uint8), (np.int32, ndd.int8), (np.int32, ndd.int16),
                            (np.int64, ndd.uint8), (np.int64, ndd.int8), (np.int64, ndd.int16),
                            (np.uint8, ndd.int8), (np.float16, ndd.int8), (np.uint16, ndd.int8),
                            (np.uint32, ndd.int16)])
def test_cast_saturates_like_the_cpu(shapes, src, dst):
    # DALI's Cast (ConvertSat): rounded, ties away from zero, clamped, NaN -> 0; the GPU
    # kernel gives the CPU kernel's values bit for bit
    xs = _out_of_range(11, shapes, src, dst)
    ref, got, _ = run_both(lambda x: ndd.cast(x, dtype=dst), batch(xs))
    assert_equal(ref, got)
    assert_equal([_saturated(x, dst.numpy_dtype) for x in xs], got)


def test_cast_like_on_the_gpu():
    xs = [np.array([300.7, -5.5, 2.5, np.nan], np.float32), np.array([-0.5, 255.5], np.float32)]
    like = batch([np.zeros(1, np.uint8)] * 2)
    ref, got, out = run_both(lambda x, y: ndd.cast_like(x, y), batch(xs), like)
    assert out.dtype == ndd.uint8
    assert_equal(ref, got)
    assert_equal([_saturated(x, np.uint8) for x in xs], got)
    # the cast runs where its input is; like's data (on another device) is not read
    on_cpu = ndd.cast_like(batch(xs), like.gpu())
    assert on_cpu.device == ndd.Device("cpu") and on_cpu.dtype == ndd.uint8
    assert_equal(ref, [np.asarray(t) for t in on_cpu.tensors])
    assert ndd.cast_like(batch(xs).gpu(), like).device == ndd.Device("gpu:0")


def test_constructors_convert_device_data_as_cast_does():
    """tensor/as_tensor/batch(dtype=) of device data round and saturate as on the host."""
    x = np.array([1.7, -2.7, 300.0, 2.5, np.nan], np.float32)
    on_gpu = ndd.as_tensor(x, device="gpu")
    for dt in (ndd.uint8, ndd.int32, ndd.int8):
        want = np.asarray(ndd.as_tensor(x, dtype=dt))
        assert want.tolist() == _saturated(x, dt.numpy_dtype).tolist()
        for got in (ndd.as_tensor(on_gpu, dtype=dt), ndd.tensor(on_gpu, dtype=dt)):
            assert got.device == ndd.Device("gpu:0")
            np.testing.assert_array_equal(np.asarray(got.cpu()), want)
    b = ndd.batch([on_gpu, on_gpu], dtype=ndd.uint8)
    np.testing.assert_array_equal(np.asarray(b.tensors[1].cpu()), np.asarray(ndd.as_tensor(x, dtype=ndd.uint8)))


@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("dst", [ndd.int32, ndd.uint32, ndd.int64, ndd.uint64])
def test_cast_saturates_wide_targets(src, dst):
    # dst's maximum is no src float (float32(2**31 - 1) == 2**31): clamped below, fixed up
    info = np.iinfo(dst.numpy_dtype)
    f = np.dtype(src).type
    with np.errstate(over="ignore"):
        top, bottom = f(info.max), f(info.min)
        vals = [top, np.nextafter(top, f(0)), np.nextafter(top, f(np.inf)), bottom,
                np.nextafter(bottom, f(-np.inf)), np.finfo(src).max, np.finfo(src).min,
                np.inf, -np.inf, np.nan, 2.5, -2.5, 0.49, 0.0]
        x = np.array([float(v) for v in vals], src)
    ref, got, _ = run_both(lambda b: ndd.cast(b, dtype=dst), batch([x, x[::-1].copy()]))
    assert_equal(ref, got)


def test_cast_saturates_unsigned_sources():
    # torch has no comparisons for uint16/32/64: the kernel clamps them as wider ints
    for src, dst in [(np.uint64, ndd.int64), (np.uint64, ndd.uint8), (np.uint64, ndd.uint32),
                     (np.uint32, ndd.int32), (np.uint16, ndd.int16), (np.int64, ndd.uint64),
                     (np.int32, ndd.uint16)]:
        si = np.iinfo(src)
        vals = [v for v in (0, 5, 200, 70000, 2**31, 2**32 - 1, 2**63, 2**64 - 1, -1, -70000)
                if si.min <= v <= si.max]
        x = np.array(vals, src)
        ref, got, _ = run_both(lambda b, dt=dst: ndd.cast(b, dtype=dt), batch([x, x[::-1].copy()]))
        assert_equal(ref, got)
        info = np.iinfo(dst.numpy_dtype)
        assert got[0].tolist() == [min(max(v, info.min), info.max) for v in vals]


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.float32, np.int64])
def test_binary_arithmetic(shapes, dtype):
    a = batch(_ints(2, shapes, dtype, 0 if np.dtype(dtype).kind == "u" else -20, 20))
    b = batch(_ints(3, shapes, dtype, 0 if np.dtype(dtype).kind == "u" else -5, 5))  # zeros included
    nonzero = batch([np.where(s == 0, 1, s).astype(dtype) for s in b])
    for fn in (lambda x, y: x // y, lambda x, y: x % y):  # (integer zeros: the CPU raises, as DALI)
        assert_equal(*run_both(fn, a, nonzero)[:2])
    if np.dtype(dtype).kind != "f":  # the GPU gives 0 for an integer zero divisor (no wait for the device)
        zeros = ndd.batch([np.zeros(s, dtype) for s in shapes]).gpu()
        assert_equal([np.zeros(s, dtype) for s in shapes] * 2,
                     [np.asarray(t) for t in (a.gpu() // zeros).cpu()] + [np.asarray(t) for t in (a.gpu() % zeros).cpu()])
    for fn in (lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y,
               lambda x, y: x == y, lambda x, y: x < y, lambda x, y: x >= y,
               lambda x, y: ndd.math.min(x, y), lambda x, y: ndd.math.max(x, y), lambda x, y: x + 3,
               lambda x, y: 2 * x - y, lambda x, y: x ** ndd.math.abs(y)):
        assert_equal(*run_both(fn, a, b)[:2])
    ref, got, _ = run_both(lambda x, y: x / (y + 0.5), a, b)
    assert_close(ref, got, rtol=1e-6)
    if np.dtype(dtype).kind != "f":
        for fn in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x):
            assert_equal(*run_both(fn, a, b)[:2])


def test_shifts_of_booleans():
    """torch shifts no bool (it raised): as 0/1 bytes, then back to bool, as the CPU gives."""
    a = batch([np.array([True, False, True, False]), np.array([False, True, True, True])])
    b = batch([np.array([True, True, False, False]), np.array([False, False, True, True])])
    for fn, dt in ((lambda x, y: x << y, ndd.bool), (lambda x, y: x >> y, ndd.bool), (lambda x, y: x << 1, ndd.int32)):
        ref, got, out = run_both(fn, a, b)
        assert out.dtype == dt
        assert_equal(ref, got)


def test_integer_power_with_negative_exponents():
    a = batch([np.array([-2, -1, 0, 1, 2, 3], np.int32)] * 2)
    e = batch([np.array([-1, -3, 2, -2, -1, 2], np.int32), np.array([0, -2, 1, 3, -5, 1], np.int32)])
    assert_equal(*run_both(lambda x, y: x ** y, a, e)[:2])


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
def test_math_functions(shapes):
    x = batch([np.abs(s) + 0.1 for s in rand_images(4, shapes, np.float32)])
    i = batch(_ints(5, shapes, np.int32, 1, 100))
    for fn in (ndd.math.sqrt, ndd.math.rsqrt, ndd.math.cbrt, ndd.math.exp, ndd.math.log, ndd.math.log2,
               ndd.math.log10, ndd.math.sin, ndd.math.cos, ndd.math.tan, ndd.math.atan, ndd.math.tanh,
               ndd.math.floor, ndd.math.ceil):
        for inp in (x, i):
            ref, got, _ = run_both(fn, inp)
            assert_close(ref, got, rtol=1e-6, atol=1e-7)
    ref, got, _ = run_both(lambda a, b: ndd.math.atan2(a, b), x, x)
    assert_close(ref, got, rtol=1e-6)
    ref, got, _ = run_both(lambda a: ndd.math.clamp(a, 0.3, 0.6), x)
    assert_equal(ref, got)


def test_mixed_types_and_tensor_broadcast():
    a = batch(_ints(6, UNIFORM, np.uint8, 0, 200))
    b = batch(_ints(7, UNIFORM, np.int8, -100, 100))
    assert_equal(*run_both(lambda x, y: x + y, a, b)[:2])
    t = ndd.as_tensor(np.array([1, 2, 3, 4, 5], np.int32))
    ref = a * t
    got = a.gpu() * t.gpu()
    assert_equal(samples_of(ref), samples_of(got.cpu()))


def test_unsigned_wide_types_run_on_the_host():
    a = batch(_ints(8, RAGGED, np.uint16, 0, 1000))
    assert_equal(*run_both(lambda x: x * 3 + x, a)[:2])


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
def test_subscript_and_transpose(shapes):
    b = batch(_ints(9, [s + (3,) for s in shapes], np.int16), layout="HWC")
    for fn in (lambda x: x.slice[1:3], lambda x: x.slice[::-1, ::2], lambda x: x.slice[..., 0],
               lambda x: x.slice[-1, :, None], lambda x: x.slice[1, ::-2, 2],
               lambda x: ndd.transpose(x, perm=(2, 0, 1)), lambda x: ndd.transpose(x)):
        assert_equal(*run_both(fn, b)[:2])
    t = ndd.as_tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    np.testing.assert_array_equal(np.asarray(t.gpu()[1:, ::-3].cpu()), np.asarray(t[1:, ::-3]))


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
def test_shape_ops(shapes):
    b = batch(_ints(10, [s + (1,) for s in shapes], np.float32), layout="HWC")
    for fn in (lambda x: ndd.squeeze(x, axes=[2]), lambda x: ndd.expand_dims(x, axes=[0]),
               lambda x: ndd.cat(x, x, axis=1), lambda x: ndd.stack(x, x, axis=0),
               lambda x: ndd.reshape(x, shape=[-1]), lambda x: ndd.zeros_like(x), lambda x: ndd.ones_like(x),
               lambda x: ndd.pad(x, fill_value=-1), lambda x: ndd.slice(x, start=(1, 1), shape=(2, 1), axes=(0, 1))):
        assert_equal(*run_both(fn, b)[:2])
    labels = batch([np.array(i % 4, np.int32) for i in range(len(shapes))])
    assert_equal(*run_both(lambda x: ndd.one_hot(x, num_classes=4), labels)[:2])


def test_reshaping_ops_make_views_on_the_device():
    """reshape, squeeze and expand_dims run core's kernel on the device tensors: no copy,
    no trip through the host."""
    b = ndd.as_batch(np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4, 1), layout="HWC").gpu()
    src = b.torch()
    for fn, shape in ((lambda x: ndd.squeeze(x, axes=[2]), (2, 3, 4)),
                      (lambda x: ndd.expand_dims(x, axes=[0, 3]), (2, 1, 3, 4, 1, 1)),
                      (lambda x: ndd.reshape(x, shape=[4, 3]), (2, 4, 3))):
        out = fn(b)
        assert out.device == b.device
        t = out.torch()
        assert tuple(t.shape) == shape and t.data_ptr() == src.data_ptr()


def test_reshape_refusal_reads_the_same_on_both_devices():
    from ndd._dispatch import OperatorError

    b = ndd.as_batch(np.zeros((2, 5, 7, 3), np.uint8), layout="HWC")
    msgs = []
    for x in (b, b.gpu()):
        with pytest.raises(OperatorError) as info:
            ndd.reshape(x, shape=[3, 3]).evaluate()
        e = info.value
        while e.__cause__ is not None:  # (an asynchronous call's error holds the kernel's as its cause)
            e = e.__cause__
        msgs.append(str(e))
    assert msgs[0] == msgs[1] and "a sample of shape (5, 7, 3) (105 elements) to [3, 3]" in msgs[0]


def test_reshaping_joining_and_filling_ops_stay_on_the_device(monkeypatch):
    """These operators run core's kernel on the device tensors: nothing is copied to the
    host (uint16 arithmetic, which still goes through the host, shows that the check bites)."""
    from ndd_ops_cuda.kernels import _common

    def no_host(x):
        raise AssertionError("copied to the host")

    monkeypatch.setattr(_common, "to_host", no_host)
    b = ndd.as_batch(np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4, 1), layout="HWC").gpu()
    ragged = batch([np.ones((2, 3), np.int32), np.ones((4, 1), np.int32)]).gpu()
    fill = ndd.as_batch(np.array([1.5, -2.0], np.float32)).gpu()
    for fn in (lambda: ndd.squeeze(b, axes=[2]), lambda: ndd.expand_dims(b, axes=[0]),
               lambda: ndd.reshape(b, shape=[12]), lambda: ndd.cat(b, b, axis=1),
               lambda: ndd.stack(b, b, axis=0), lambda: ndd.cat(ragged, ragged, axis=0),
               lambda: ndd.zeros_like(b), lambda: ndd.ones_like(ragged), lambda: ndd.full_like(b, fill),
               lambda: ndd.full(fill, shape=[2, 2]),
               lambda: ndd.zeros(shape=(3,), batch_size=2, device="gpu"),
               lambda: ndd.ones(shape=(1, 2), batch_size=2, device="gpu")):
        out = fn().evaluate()
        assert out.device == ndd.Device("gpu:0")
    with ndd.EvalMode.sync_cpu, pytest.raises(AssertionError, match="copied to the host"):
        ndd.cast(b, dtype=ndd.uint16) * 3


def test_constant_ops_on_the_gpu():
    z = ndd.zeros(shape=(3, 2), batch_size=4, device="gpu")
    assert z.device == ndd.Device("gpu:0")
    np.testing.assert_array_equal(np.stack(samples_of(z.cpu())), np.zeros((4, 3, 2), np.float32))


@pytest.mark.parametrize("op,kw", [("uniform", {"range": (-2, 3), "shape": (5,)}),
                                   ("normal", {"mean": 1.0, "stddev": 2.0, "shape": (2, 3)}),
                                   ("coin_flip", {"probability": 0.3, "shape": (7,)}),
                                   ("beta", {"alpha": 2.0, "beta": 3.0}),
                                   ("choice", {"shape": (4,)})])
def test_random_ops_match_the_cpu(op, kw):
    fn = getattr(ndd.random, op)
    args = (ndd.as_tensor(np.array([3, 5, 9], np.int32)),) if op == "choice" else ()
    ref = fn(*args, batch_size=6, rng=ndd.random.RNG(seed=11), **kw)
    gargs = tuple(a.gpu() for a in args)
    got = fn(*gargs, batch_size=6, rng=ndd.random.RNG(seed=11), device="gpu", **kw)
    assert got.device == ndd.Device("gpu:0")
    assert_equal(samples_of(ref), samples_of(got.cpu()))
