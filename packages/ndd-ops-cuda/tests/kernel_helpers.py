"""Helpers of the GPU kernel tests: run an op on CPU and GPU inputs and compare.

Every test calls the public op twice on the same data, once on the CPU batch and
once on its ``.gpu()`` copy, and compares the GPU result (brought back with
``.cpu()``) with the CPU one sample by sample.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

import ndd


def rand_images(seed: int, shapes: list[tuple[int, ...]], dtype=np.uint8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.uint8:
        return [rng.integers(0, 256, s, dtype=np.uint8) for s in shapes]
    return [rng.random(s, dtype=np.float32).astype(dtype) for s in shapes]


def smooth_images(seed: int, shapes: list[tuple[int, ...]], dtype=np.uint8) -> list[np.ndarray]:
    """Random images low-pass filtered (closer to photos than noise), uint8 or in [0, 1]."""
    out = []
    for x in rand_images(seed, shapes, np.float32):
        for ax in (0, 1):
            x = (x + np.roll(x, 1, ax) + np.roll(x, -1, ax)) / 3
        out.append((x * 255).round().astype(np.uint8) if np.dtype(dtype) == np.uint8 else x.astype(dtype))
    return out


def batch(samples: list[np.ndarray], layout: str | None = None) -> ndd.Batch:
    if layout is None:
        layout = {2: "HW", 3: "HWC"}.get(samples[0].ndim)
    return ndd.as_batch(samples, layout=layout)


def samples_of(b: ndd.Batch) -> list[np.ndarray]:
    return [np.asarray(t) for t in b]


def run_both(fn: Callable, *inputs: ndd.Batch) -> tuple[list[np.ndarray], list[np.ndarray], ndd.Batch]:
    """``fn`` on CPU inputs and on their GPU copies: (CPU samples, GPU samples, GPU result)."""
    ref = fn(*inputs)
    out = fn(*(x.gpu() for x in inputs))
    assert out.device == ndd.Device("gpu:0"), out.device
    assert isinstance(out._batch_data().sample(0), torch.Tensor)
    assert (out.dtype, out.layout, out.ndim) == (ref.dtype, ref.layout, ref.ndim)
    return samples_of(ref), samples_of(out.cpu()), out


def assert_close(ref: list[np.ndarray], got: list[np.ndarray], atol: float = 0.0, rtol: float = 0.0,
                 max_frac: float = 1.0) -> None:
    """Same shapes and dtypes; values within ``atol + rtol * |ref|``; with ``max_frac`` < 1,
    at most that fraction of the values may differ at all."""
    assert len(ref) == len(got)
    diff = 0
    total = 0
    for r, g in zip(ref, got):
        assert r.shape == g.shape and r.dtype == g.dtype, (r.shape, g.shape, r.dtype, g.dtype)
        rf, gf = r.astype(np.float64), g.astype(np.float64)
        np.testing.assert_allclose(gf, rf, atol=atol, rtol=rtol)
        diff += int(np.count_nonzero(rf != gf))
        total += r.size
    assert diff <= max_frac * max(total, 1), f"{diff} of {total} values differ"


def assert_equal(ref: list[np.ndarray], got: list[np.ndarray]) -> None:
    assert_close(ref, got)
