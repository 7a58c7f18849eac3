"""GPU crop_mirror_normalize, normalize, brightness_contrast, hsv and color_twist against
the CPU ops.

Tolerances: crop_mirror_normalize to float within 1e-6 relative (the same float32
multiply-add), to integer types exact but for 1 unit where the float32 value sits on a
rounding boundary; normalize within 1e-5 relative (+1e-5 absolute); brightness_contrast
uint8 -> uint8 exact (the CPU's lookup tables), colour matrices uint8 within 1 level,
float32 within 1e-5.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ndd

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, assert_equal, batch, rand_images, run_both  # noqa: E402

UNIFORM_RGB = [(24, 30, 3)] * 5
RAGGED_RGB = [(24, 30, 3), (17, 40, 3), (33, 21, 3)]
GRAY = [(28, 28)] * 6
MNIST = [(28, 28, 1)] * 64


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB, GRAY, MNIST])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_cmn_layouts_and_mirror(shapes, dtype):
    b = batch(rand_images(1, shapes, dtype))
    n = len(shapes)
    c = shapes[0][2] if len(shapes[0]) == 3 else 1
    mean, std = [0.4 * 255] * c, [0.2 * 255] * c
    mirror = ndd.as_batch([np.int32(i % 2) for i in range(n)])
    gray = len(shapes[0]) == 2
    lay = "HW" if gray else "CHW"
    for kw in ({}, {"mirror": 1}, {"mirror": mirror, "crop": (15, 16), "crop_pos_x": 0.2},
               {"output_layout": "HW" if gray else "HWC", "pad_output": not gray, "scale": 2.0, "shift": 0.5},
               {"crop": (16, 16), "dtype": ndd.float16}):
        kw = {"output_layout": lay, **kw}
        ref, got, _ = run_both(lambda x: ndd.crop_mirror_normalize(x, mean=mean, std=std, **kw), b)  # noqa: B023
        assert_close(ref, got, rtol=1e-6, atol=1e-6 if kw.get("dtype") is None else 1e-3)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_cmn_mirrors_wide_unsigned_images(dtype, channels):
    """torch flips no uint16/32/64 tensor: mirrored through their signed twins."""
    b = batch([(np.arange(5 * 6 * channels).reshape(5, 6, channels) + i).astype(dtype) for i in range(4)])
    mirror = ndd.as_batch([np.int32(i % 2) for i in range(4)])
    for kw in ({"mirror": 1}, {"mirror": mirror}, {"mirror": mirror, "crop": (4, 4), "crop_pos_x": 0.3}):
        kw = {"dtype": ndd.dtype(dtype), **kw}  # (the input type out: flipped before any cast)
        ref, got, _ = run_both(lambda x: ndd.crop_mirror_normalize(x, **kw), b)  # noqa: B023
        assert_close(ref, got, rtol=1e-6, atol=1e-6)


def test_cmn_integer_output_and_per_sample_arguments():
    b = batch(rand_images(2, UNIFORM_RGB))
    ref, got, _ = run_both(lambda x: ndd.crop_mirror_normalize(x, mean=[100.0], std=[0.5], dtype=ndd.int8), b)
    assert_close(ref, got, atol=1, max_frac=0.001)
    means = ndd.as_batch([np.array([10.0 * i, 20.0, 30.0], np.float32) for i in range(5)])
    pos = ndd.as_batch([np.float32(v) for v in np.linspace(0, 1, 5)])
    fn = lambda x: ndd.crop_mirror_normalize(x, mean=means, std=[50.0], crop=(10, 10), crop_pos_y=pos)  # noqa: E731
    assert_close(*run_both(fn, b)[:2], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB])
def test_cmn_padding_window(shapes):
    b = batch(rand_images(3, shapes))
    fn = lambda x: ndd.crop_mirror_normalize(  # noqa: E731
        x, crop=(36, 20), crop_pos_x=0.9, mirror=1, out_of_bounds_policy="pad", fill_values=(1.0, 2.0, 3.0),
        mean=[128.0], std=[64.0])
    assert_close(*run_both(fn, b)[:2], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB, GRAY])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_normalize(shapes, dtype):
    b = batch(rand_images(4, shapes, dtype))
    for kw in ({}, {"axis_names": "HW"}, {"axes": (0, 1), "batch": True}, {"batch": True},
               {"mean": 100.0, "stddev": 20.0, "scale": 64.0, "shift": 128.0, "dtype": ndd.uint8},
               {"axes": (0,), "ddof": 1, "epsilon": 1e-3}, {"axes": (0, 1), "ddof": 10**5, "epsilon": 0.25},
               {"axes": (0, 1), "batch": True, "ddof": 10**6, "epsilon": 0.25}):
        ref, got, _ = run_both(lambda x: ndd.normalize(x, **kw), b)  # noqa: B023
        if kw.get("dtype") == ndd.uint8:
            assert_close(ref, got, atol=1, max_frac=0.001)
        else:
            assert_close(ref, got, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB])
def test_normalize_over_no_axes(shapes):
    """``axes=()`` reduces over nothing: each value is its own mean (torch's ``sum(dim=[])``
    would reduce over everything)."""
    b = batch(rand_images(14, shapes, np.float32))
    cases = [{"axes": ()}, {"axes": (), "stddev": 2.0, "shift": 3.0}]
    if shapes == UNIFORM_RGB:
        cases.append({"axes": (), "batch": True})  # over the samples alone
    for kw in cases:
        ref, got, _ = run_both(lambda x: ndd.normalize(x, **kw), b)  # noqa: B023
        assert_close(ref, got, rtol=1e-5, atol=1e-5)
        if kw == {"axes": ()}:
            assert all((g == 0).all() for g in got)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB, GRAY])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_brightness_contrast(shapes, dtype):
    b = batch(rand_images(5, shapes, dtype))
    n = len(shapes)
    br = ndd.as_batch([np.float32(0.6 + 0.2 * i) for i in range(n)])
    for kw in ({"brightness": 1.3, "contrast": 0.6}, {"brightness": br, "brightness_shift": 0.1},
               {"contrast": 1.5, "contrast_center": 100.0, "dtype": ndd.float32}):
        ref, got, _ = run_both(lambda x: ndd.brightness_contrast(x, **kw), b)  # noqa: B023
        if ref[0].dtype == np.uint8:
            assert_equal(ref, got)
        else:
            assert_close(ref, got, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_hsv_and_color_twist(shapes, dtype):
    b = batch(rand_images(6, shapes, dtype))
    hue = ndd.as_batch([np.float32(20.0 * i) for i in range(len(shapes))])
    tol = {"atol": 1} if np.dtype(dtype) == np.uint8 else {"atol": 1e-5, "rtol": 1e-5}
    for fn in (lambda x: ndd.hsv(x, hue=35.0, saturation=0.7, value=1.1),
               lambda x: ndd.hsv(x, hue=hue, dtype=ndd.float32),
               lambda x: ndd.color_twist(x, brightness=1.1, contrast=0.8, hue=hue, saturation=1.2),
               lambda x: ndd.color_twist(x, hue=10.0, image_type=ndd.types.DALIImageType.BGR)):
        ref, got, _ = run_both(fn, b)
        assert_close(ref, got, **(tol if ref[0].dtype == np.dtype(dtype) else {"atol": 1e-3, "rtol": 1e-5}))
