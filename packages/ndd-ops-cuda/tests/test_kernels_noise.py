"""GPU kernels of the noise operators against the CPU ones (core's): noise.gaussian,
noise.salt_and_pepper and noise.shot give identical values for the same RNG state.

Tolerance: exact everywhere (the random values are made on the host by core's code and the
device applies them with correctly rounded operations; see ndd_ops_cuda.kernels._noise).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

import ndd
from ndd import _noise

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_equal, batch, run_both  # noqa: E402

from ndd_ops_cuda.kernels import _noise as gpu_noise  # noqa: E402

UNIFORM = [(12, 10, 3)] * 3
RAGGED = [(12, 10, 3), (5, 7, 3), (1, 1, 3)]
TYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32,
         np.uint16, np.uint32, np.uint64]  # (the last three run the CPU kernel on host copies)
KW = {"gaussian": {"mean": 0.5, "stddev": 40.0}, "salt_and_pepper": {"prob": 0.3, "salt_vs_pepper": 0.4},
      "shot": {"factor": 0.8}}


def _samples(seed: int, shapes, dt) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dt).kind == "f":
        return [(rng.random(s, dtype=np.float32) * 300 - 20).astype(dt) for s in shapes]
    info = np.iinfo(dt)
    lo, hi = max(info.min, -300), min(info.max, 300)
    out = []
    for s in shapes:
        x = rng.integers(lo, hi, s, endpoint=True).astype(dt)
        x.ravel()[:2] = [info.min, info.max]  # saturation at both ends
        out.append(x)
    return out


def _op(name: str, seed: int = 5, **kw):
    return lambda x: getattr(ndd.noise, name)(x, rng=ndd.random.RNG(seed), **kw)


@pytest.mark.parametrize("shapes", [UNIFORM, RAGGED])
@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("name", ["gaussian", "salt_and_pepper", "shot"])
def test_noise_matches_the_cpu(name, dt, shapes):
    b = batch(_samples(1, shapes, dt))
    ref, got, out = run_both(_op(name, **KW[name]), b)
    assert_equal(ref, got)
    assert out.dtype == ndd.dtype(dt) and out.layout == "HWC"


@pytest.mark.parametrize("layout,shape", [("CHW", (3, 8, 9)), ("HWC", (8, 9, 3)), (None, (8, 9)), ("HW", (8, 9))])
@pytest.mark.parametrize("per_channel", [False, True])
def test_salt_and_pepper_layouts(layout, shape, per_channel):
    b = ndd.as_batch(_samples(2, [shape] * 2, np.uint8), layout=layout)
    if layout == "HW" and not per_channel:  # no channel axis to share: an error on both devices
        for x in (b, b.gpu()):
            with pytest.raises(ValueError, match="'C' as its first or last axis"):
                ndd.noise.salt_and_pepper(x)
        return
    assert_equal(*run_both(_op("salt_and_pepper", prob=0.5, per_channel=per_channel), b)[:2])


def test_per_sample_arguments():
    b = batch(_samples(3, RAGGED, np.float32))
    f = lambda *v: ndd.as_batch([np.float32(x) for x in v])  # noqa: E731
    assert_equal(*run_both(_op("gaussian", mean=f(1, -2, 3), stddev=f(0, 5, 50)), b)[:2])
    assert_equal(*run_both(_op("salt_and_pepper", prob=f(0, 0.5, 1), salt_vs_pepper=f(1, 0.3, 0),
                               salt_val=f(7, 8, 9), pepper_val=f(-1, -2, -3)), b)[:2])
    assert_equal(*run_both(_op("shot", factor=f(0.1, 3, 50)), b)[:2])
    u8 = batch(_samples(3, RAGGED, np.uint8))
    assert_equal(*run_both(_op("salt_and_pepper", prob=f(0.2, 0.5, 1), salt_val=f(200, 201, 202)), u8)[:2])


def test_shot_rates_across_both_methods():
    """Rates around the switch from inversion to the normal approximation (16), tiny and huge
    rates, and the inputs that give 0 (negative, NaN, infinite)."""
    lam = np.concatenate([np.linspace(0, 40, 4001), [15.999999, 16.0, 16.000002, 1e-30, 1e4, 1e9, 3e38],
                          [-1.0, np.nan, np.inf, -np.inf]]).astype(np.float32)
    b = ndd.as_batch([lam, lam[::-1].copy()])
    for factor in (1.0, 0.37, 7.0):
        assert_equal(*run_both(_op("shot", seed=int(factor * 100), factor=factor), b)[:2])


def test_sample_mode_scalars_and_empty_samples():
    t = ndd.as_tensor(_samples(4, [(6, 5, 3)], np.uint8)[0], layout="HWC")
    for name in ("gaussian", "salt_and_pepper", "shot"):
        ref = getattr(ndd.noise, name)(t, rng=ndd.random.RNG(1), **KW[name])
        got = getattr(ndd.noise, name)(t.gpu(), rng=ndd.random.RNG(1), **KW[name])
        assert isinstance(got, ndd.Tensor) and got.device == ndd.Device("gpu:0")
        np.testing.assert_array_equal(np.asarray(got.cpu()), np.asarray(ref))
        odd = ndd.as_batch([np.float32(3.0), np.float32(-1.0)])
        assert_equal(*run_both(_op(name, **KW[name]), odd)[:2])
        empty = ndd.as_batch([np.zeros((0, 3), np.uint8), np.zeros((2, 3), np.uint8)])
        assert_equal(*run_both(_op(name, **KW[name]), empty)[:2])


@pytest.mark.parametrize("name", ["gaussian", "salt_and_pepper", "shot"])
def test_seven_words_per_call_on_the_gpu(name):
    rng = ndd.random.RNG(0)
    b = batch(_samples(5, RAGGED, np.uint8)).gpu()
    getattr(ndd.noise, name)(b, rng=rng, **KW[name]).evaluate()
    assert rng._draws == 7


def test_per_sample_errors_on_the_gpu():
    b = batch(_samples(6, UNIFORM, np.uint8)).gpu()
    with pytest.raises(ValueError) as info:
        ndd.noise.shot(b, factor=ndd.as_batch([np.float32(1), np.float32(-1), np.float32(2)])).evaluate()
    assert "'factor' must be > 0, got -1.0 (sample 1)" in f"{info.value} {info.value.__cause__}"
    with pytest.raises(ValueError) as info:
        ndd.noise.salt_and_pepper(b, salt_val=300.0).evaluate()
    assert "out of the range of uint8" in f"{info.value} {info.value.__cause__}"


def test_device_arithmetic_is_the_host_arithmetic():
    """The torch Poisson steps give the very bits of core's NumPy ones (exp(-lam), which the GPU
    kernel runs on torch tensors, included), on the GPU when there is one."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    rng = np.random.default_rng(0)
    lam = np.concatenate([np.linspace(0, 16, 20001), rng.uniform(0, 60, 20000), [16.0, 1e6]])
    on = lambda a: torch.from_numpy(a).to(dev)  # noqa: E731
    np.testing.assert_array_equal(_noise.exp_neg(on(lam[lam < 16])).cpu().numpy(),
                                  _noise.exp_neg(lam[lam < 16]))
    u = rng.random(lam.size)
    z = rng.standard_normal(lam.size).astype(np.float32)
    got = gpu_noise._poisson(on(lam), on(u), on(z)).cpu().numpy()
    np.testing.assert_array_equal(got, _noise.poisson(lam, u, z))
