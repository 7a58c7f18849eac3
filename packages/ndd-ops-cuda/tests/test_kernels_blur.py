"""gaussian_blur on the GPU against the CPU kernel (same taps and border; float sums in
another order: float results to 1e-5, integer ones within 1 level, nearly all equal)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("ndd_ops_cpu")

import ndd  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, batch, rand_images, run_both  # noqa: E402


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_uniform_batch(dtype) -> None:
    b = batch(rand_images(0, [(20, 17, 3)] * 4, dtype))
    ref, got, _ = run_both(lambda x: ndd.gaussian_blur(x, sigma=[1.2, 2.3]), b)
    if dtype == np.uint8:
        assert_close(ref, got, atol=1, max_frac=0.01)
    else:
        assert_close(ref, got, atol=1e-5, rtol=1e-5)


def test_ragged_batch_per_sample_sigma_and_windows() -> None:
    b = batch(rand_images(1, [(9, 30), (40, 3), (1, 5)]))  # windows longer than some axes
    sig = ndd.as_batch([np.float32(0.7), np.float32(3.0), np.float32(1.5)])
    ref, got, _ = run_both(lambda x: ndd.gaussian_blur(x, sigma=sig, dtype=ndd.float32), b)
    assert_close(ref, got, atol=1e-4, rtol=1e-5)
    ref, got, _ = run_both(lambda x: ndd.gaussian_blur(x, window_size=[3, 9]), b)
    assert_close(ref, got, atol=1, max_frac=0.01)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("shape", [(20, 17, 3), (5, 40, 1)])  # (5, 40): windows longer than the height
def test_uniform_batch_with_taps_per_sample(dtype, shape) -> None:
    """A batch of one shape blurred with each sample's taps (a random sigma: windows of 3 to
    19 taps, padded to the longest with zeros), and with each sample's window size."""
    b = batch(rand_images(3, [shape] * 4, dtype))
    sig = ndd.as_batch([np.float32(s) for s in (0.4, 3.0, 1.5, 0.9)])
    wins = ndd.as_batch([np.int32(w) for w in (3, 7, 1, 5)])
    for fn in (lambda x: ndd.gaussian_blur(x, sigma=sig), lambda x: ndd.gaussian_blur(x, window_size=wins)):
        ref, got, _ = run_both(fn, b)
        if dtype == np.uint8:
            assert_close(ref, got, atol=1, max_frac=0.01)
        else:
            assert_close(ref, got, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout,shape", [("CHW", (3, 12, 14)), ("FHWC", (2, 10, 9, 3)), ("DHWC", (4, 6, 7, 2))])
def test_other_layouts(layout, shape) -> None:
    b = ndd.as_batch(rand_images(2, [shape] * 2, np.float32), layout=layout)
    ref, got, _ = run_both(lambda x: ndd.gaussian_blur(x, sigma=1.1), b)
    assert_close(ref, got, atol=1e-5, rtol=1e-5)
