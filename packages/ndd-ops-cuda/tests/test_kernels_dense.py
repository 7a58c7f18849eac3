"""GPU kernels on a batch stored dense (one tensor) read shapes, not samples.

``BatchData.samples`` of a dense batch makes one view per sample (64 views of a CUDA
tensor cost ~200 µs in Python); the kernels' uniform paths use ``shapes()``,
``sample(0)`` and the dense tensor instead. Each case checks that the input's per-sample
list was never made, and that the result still matches the CPU op.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ndd
from ndd.types import DALIInterpType

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, assert_equal, samples_of, smooth_images  # noqa: E402

N = 8
RGB = [(24, 30, 3)] * N
GRAY = [(28, 28)] * N

_MEAN, _STD = [0.4 * 255] * 3, [0.2 * 255] * 3
_MIRROR = [np.int32(i % 2) for i in range(N)]

CASES = {
    "rotate": (RGB, lambda x: ndd.rotate(x, angle=30.0, fill_value=0.0),
               lambda r, g: assert_close(r, g, atol=1, max_frac=0.02)),
    "rotate_gray": (GRAY, lambda x: ndd.rotate(x, angle=-15.0),
                    lambda r, g: assert_close(r, g, atol=1, max_frac=0.02)),
    "warp_affine": (RGB, lambda x: ndd.warp_affine(x, matrix=[1.0, 0.2, 1.0, 0.1, 0.9, -2.0]),
                    lambda r, g: assert_close(r, g, atol=1, max_frac=0.02)),
    "crop_mirror_normalize": (RGB, lambda x: ndd.crop_mirror_normalize(
        x, mean=_MEAN, std=_STD, crop=(16, 16), mirror=ndd.as_batch(_MIRROR), output_layout="CHW"),
        lambda r, g: assert_close(r, g, rtol=1e-6, atol=1e-6)),
    "crop": (RGB, lambda x: ndd.crop(x, crop=(10, 12), crop_pos_x=0.3, crop_pos_y=0.8), assert_equal),
    "crop_pad": (RGB, lambda x: ndd.crop(x, crop=(40, 12), out_of_bounds_policy="pad", fill_values=(7, 8, 9)),
                 assert_equal),
    "flip": (RGB, lambda x: ndd.flip(x, horizontal=ndd.as_batch(_MIRROR), vertical=1), assert_equal),
    "resize": (RGB, lambda x: ndd.resize(x, size=(16, 20)), lambda r, g: assert_close(r, g, atol=1)),
    "resize_gray_cubic": (GRAY, lambda x: ndd.resize(x, size=(40, 36), interp_type=DALIInterpType.INTERP_CUBIC),
                          lambda r, g: assert_close(r, g, atol=1)),
    "random_resized_crop": (RGB, lambda x: ndd.random_resized_crop(x, size=(16, 20), rng=ndd.random.RNG(seed=5)),
                            # 2 levels: one pixel here, the same before the dense paths (HEAD's kernel)
                            lambda r, g: assert_close(r, g, atol=2)),
    "normalize": (RGB, lambda x: ndd.normalize(x, axes=(0, 1), dtype=ndd.float32),
                  lambda r, g: assert_close(r, g, rtol=1e-5, atol=1e-5)),
    "normalize_given": (RGB, lambda x: ndd.normalize(x, mean=100.0, stddev=40.0, dtype=ndd.float32),
                        lambda r, g: assert_close(r, g, rtol=1e-5, atol=1e-5)),
    "brightness_contrast": (RGB, lambda x: ndd.brightness_contrast(x, brightness=1.2, contrast=0.8),
                            assert_equal),
    "hsv": (RGB, lambda x: ndd.hsv(x, hue=20.0, saturation=0.7), lambda r, g: assert_close(r, g, atol=1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_dense_input_samples_are_not_materialised(name):
    shapes, fn, check = CASES[name]
    b = ndd.as_batch(np.stack(smooth_images(11, shapes)), layout="HWC" if len(shapes[0]) == 3 else "HW")
    g = b.gpu().evaluate()
    bd = g._batch_data()
    assert bd.dense is not None and bd._samples is None  # stored dense
    out = fn(g).evaluate()
    assert bd._samples is None, f"{name}: the kernel made the input's per-sample views"
    check(samples_of(fn(b)), samples_of(out.cpu()))
