"""crop_mirror_normalize, normalize, brightness_contrast, hsv, color_twist against NumPy/OpenCV.

Tolerances: float32 outputs within 1e-4 (relative 1e-5) of a float64 NumPy
reference; uint8 outputs within 1 (rounding).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from ops_cpu_helpers import as_np, raises, rand_image

import ndd
from ndd import types

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def _cmn_ref(img, y0, x0, h, w, mirror, mean, std, scale=1.0, shift=0.0):
    x = img[y0:y0 + h, x0:x0 + w].astype(np.float64)
    if mirror:
        x = x[:, ::-1]
    return (x - mean) / std * scale + shift


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_cmn_batch_mirror_per_sample_chw(rng, dtype):
    imgs = [rand_image(rng, 40, 50, 3, dtype) for _ in range(4)]
    mirror = [0, 1, 1, 0]
    out = ndd.crop_mirror_normalize(ndd.batch(imgs), crop=(20, 30), mean=MEAN.tolist(), std=STD.tolist(),
                                    mirror=ndd.batch([np.int32(m) for m in mirror]))
    assert out.layout == "CHW" and out.dtype == ndd.float32
    for img, o, m in zip(imgs, as_np(out), mirror):
        ref = _cmn_ref(img, 10, 10, 20, 30, m, MEAN, STD).transpose(2, 0, 1)
        np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-4)


def test_cmn_hwc_scale_shift_fp16_uint8(rng):
    img = rand_image(rng, 32, 32)
    out = as_np(ndd.crop_mirror_normalize(img, mean=[128.0], std=[64.0], scale=2.0, shift=0.5, output_layout="HWC"))
    np.testing.assert_allclose(out, _cmn_ref(img, 0, 0, 32, 32, 0, 128.0, 64.0, 2.0, 0.5), rtol=1e-5, atol=1e-4)
    half = ndd.crop_mirror_normalize(img, mean=[128.0], std=[64.0], dtype=ndd.float16)
    assert as_np(half).dtype == np.float16
    u8 = as_np(ndd.crop_mirror_normalize(img, mean=[0.0], std=[2.0], dtype=ndd.uint8, output_layout="HWC"))
    assert np.abs(u8.astype(int) - img / 2).max() <= 0.5


def test_cmn_ragged_per_sample_mean_pad_output(rng):
    imgs = [rand_image(rng, 30, 40), rand_image(rng, 25, 25)]
    means = ndd.batch([np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)])
    out = as_np(ndd.crop_mirror_normalize(ndd.batch(imgs), crop=(10, 12), mean=means, std=[2.0],
                                          pad_output=True, mirror=1))
    for img, o, m in zip(imgs, out, ([1, 2, 3], [10, 20, 30])):
        h, w = img.shape[:2]
        y0, x0 = int(0.5 * (h - 10) + 0.5), int(0.5 * (w - 12) + 0.5)  # DALI rounds halves up
        assert o.shape == (4, 10, 12)
        np.testing.assert_allclose(o[:3], _cmn_ref(img, y0, x0, 10, 12, 1, np.array(m), 2.0).transpose(2, 0, 1),
                                   rtol=1e-5, atol=1e-4)
        assert (o[3] == 0).all()
    dense = as_np(ndd.crop_mirror_normalize(ndd.batch([imgs[1], imgs[1]]), pad_output=True, output_layout="HWC"))
    assert dense[0].shape == (25, 25, 4) and (dense[0][..., 3] == 0).all()
    # one channel stays one (DALI 2.4: (9, 11, 1) -> (9, 11, 1)); sample and dense paths
    gray = rand_image(rng, 9, 11, 1)
    assert as_np(ndd.crop_mirror_normalize(gray, pad_output=True, output_layout="HWC")).shape == (9, 11, 1)
    both = as_np(ndd.crop_mirror_normalize(ndd.batch([gray, gray]), pad_output=True))
    assert both[0].shape == (1, 9, 11)


def test_cmn_out_of_bounds_pad(rng):
    img = rand_image(rng, 10, 10)
    with raises(ValueError, "crop_mirror_normalize.*outside"):
        as_np(ndd.crop_mirror_normalize(img, crop=(12, 12)))
    out = as_np(ndd.crop_mirror_normalize(img, crop=(12, 12), out_of_bounds_policy="pad", fill_values=[-1.0],
                                          output_layout="HWC", mean=[100.0]))
    assert out.shape == (12, 12, 3)
    assert (out[0] == -1).all() and (out[:, 0] == -1).all()
    np.testing.assert_allclose(out[1:11, 1:11], img - 100.0)


def test_cmn_bad_arguments(rng):
    img = rand_image(rng, 10, 10)
    with raises(ValueError, r"crop_mirror_normalize.*'mean'.*2 values.*3 channel"):
        as_np(ndd.crop_mirror_normalize(img, mean=[1.0, 2.0]))
    with raises(ValueError, r"crop_mirror_normalize.*'mean' and 'std'"):
        ndd.crop_mirror_normalize(img, mean=[1.0, 2.0], std=[1.0, 2.0, 3.0])
    with raises(ValueError, r"crop_mirror_normalize.*'output_layout'"):
        ndd.crop_mirror_normalize(img, output_layout="NCHW")
    with raises(ValueError, r"crop_mirror_normalize.*'std'"):
        ndd.crop_mirror_normalize(img, std=[0.0])


def test_normalize(rng):
    x = rng.random((8, 10, 3), dtype=np.float32) * 5
    out = as_np(ndd.normalize(x))
    np.testing.assert_allclose(out, (x - x.mean()) / x.std(), rtol=1e-4, atol=1e-4)
    out = as_np(ndd.normalize(x, axes=[0, 1], scale=2.0, shift=1.0, ddof=1, epsilon=0.5))
    m = x.mean(axis=(0, 1), keepdims=True)
    v = x.var(axis=(0, 1), keepdims=True, ddof=1)
    np.testing.assert_allclose(out, 2 * (x - m) / np.sqrt(v + 0.5) + 1, rtol=1e-4, atol=1e-4)
    # ddof at least the count leaves no degrees of freedom: the variance is 0 (DALI 2.4 gives
    # [0, 0] for [1, 3] with ddof=2, and (x - mean) / sqrt(epsilon) with an epsilon)
    two = np.array([1.0, 3.0], np.float32)
    np.testing.assert_array_equal(as_np(ndd.normalize(two, ddof=2)), [0, 0])
    np.testing.assert_array_equal(as_np(ndd.normalize(two, ddof=3, epsilon=0.25)), [-2, 2])
    got = ndd.normalize(ndd.as_batch([two, two]), batch=True, ddof=4, epsilon=0.25)
    np.testing.assert_array_equal(as_np(got.tensors[1]), [-2, 2])
    t = ndd.as_tensor(x, layout="HWC")
    np.testing.assert_allclose(as_np(ndd.normalize(t, axis_names="HW")), (x - m) / x.std(axis=(0, 1), keepdims=True),
                               rtol=1e-4, atol=1e-4)
    given = as_np(ndd.normalize(x, mean=[1.0], stddev=[2.0]))
    np.testing.assert_allclose(given, (x - 1) / 2, rtol=1e-5, atol=1e-5)
    u8 = rand_image(rng, 6, 6)
    assert ndd.normalize(u8).dtype == ndd.float32


def test_normalize_per_channel_parameters_in_the_reduced_shape(rng):
    """DALI takes mean/stddev shaped as the reduced shape, (1, 1, 3) for axes (0, 1), as an
    array or a tensor; a flat list of 3 gives the same."""
    img = rng.random((17, 23, 3), dtype=np.float32) * 255
    mean, std = np.array([100.0, 110.0, 120.0]), np.array([50.0, 60.0, 70.0])
    ref = (img - mean) / std
    for m, sd in ((mean.reshape(1, 1, 3), std.reshape(1, 1, 3)),
                  (ndd.tensor(mean.reshape(1, 1, 3).astype(np.float32)), ndd.tensor(std.reshape(1, 1, 3).astype(np.float32))),
                  (mean.tolist(), std.tolist())):
        out = as_np(ndd.normalize(img, axes=[0, 1], mean=m, stddev=sd))
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


def test_normalize_batch_mode(rng):
    xs = [rng.random((4, 5), dtype=np.float32), rng.random((7, 5), dtype=np.float32)]
    out = as_np(ndd.normalize(ndd.batch(xs), axes=[0], batch=True))
    allx = np.concatenate(xs)
    m, s = allx.mean(axis=0), allx.std(axis=0)
    for x, o in zip(xs, out):
        np.testing.assert_allclose(o, (x - m) / s, rtol=1e-4, atol=1e-4)
    per = as_np(ndd.normalize(ndd.batch(xs), axes=[0]))
    np.testing.assert_allclose(per[1], (xs[1] - xs[1].mean(0)) / xs[1].std(0), rtol=1e-4, atol=1e-4)
    with raises(ValueError, r"normalize.*'axes'"):
        ndd.normalize(xs[0], axes=[5])
    with raises(ValueError, r"normalize.*'ddof'"):
        ndd.normalize(xs[0], ddof=-1)


def test_normalize_axes_are_checked_by_name():
    """Axes out of range, named twice or missing from the layout are refused by name (an
    axis named twice used to reach NumPy or torch, whose messages differ)."""
    img = np.zeros((4, 5, 3), np.float32)
    b = ndd.batch([img], layout="HWC")
    with raises(ValueError, r"argument 'axes' has an axis out of range for a 3-D input: \[0, 3\]"):
        ndd.normalize(b, axes=(0, 3)).evaluate()
    with raises(ValueError, r"argument 'axes' names an axis twice: \[1, -2\]"):
        ndd.normalize(b, axes=(1, -2)).evaluate()
    with raises(ValueError, r"argument 'axis_names' names an axis twice: 'HH'"):
        ndd.normalize(b, axis_names="HH").evaluate()
    with raises(ValueError, r"argument 'axis_names' names 'X', not in the input layout 'HWC'"):
        ndd.normalize(b, axis_names="HX").evaluate()
    assert np.array_equal(as_np(ndd.normalize(b, axes=(-1,)))[0], as_np(ndd.normalize(b, axes=(2,)))[0])


def test_normalize_over_no_axes_gives_the_shift_without_warnings():
    """No axes: every value is its own mean, the variance 0, the result ``shift``; the
    division by zero that gives it raises no NumPy warning."""
    import warnings

    b = ndd.batch([np.arange(6, dtype=np.float32).reshape(2, 3)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = as_np(ndd.normalize(b, axes=(), shift=1.5))[0]
    assert out.shape == (2, 3) and (out == 1.5).all()


def test_normalize_keeps_0d_samples_0d():
    out = ndd.normalize(ndd.batch([np.float32(3), np.float32(5)]), batch=True)
    assert out.shape == [(), ()] and [v.tolist() for v in as_np(out)] == [-1.0, 1.0]
    t = ndd.normalize(ndd.tensor(np.float32(3)), mean=[1.0], stddev=[2.0], dtype=ndd.uint8, shift=10.0)
    assert t.shape == () and as_np(t).tolist() == 11


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_brightness_contrast(rng, dtype):
    img = rand_image(rng, 16, 16, 3, dtype)
    half, rng_max = (128.0, 255.0) if dtype == np.uint8 else (0.5, 1.0)
    out = as_np(ndd.brightness_contrast(img, brightness=1.2, contrast=0.7, brightness_shift=0.1))
    ref = 0.1 * rng_max + 1.2 * (half + 0.7 * (img.astype(np.float64) - half))
    if dtype == np.uint8:
        assert np.abs(out - np.clip(ref, 0, 255)).max() <= 0.5 + 1e-9
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    if dtype == np.uint8:  # exact halves round as DALI's float32 gain and offset do (DALI 2.4: 203 gives 234)
        levels = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
        got = as_np(ndd.brightness_contrast(levels, contrast=1.42))
        assert got[12, 11, 0] == 234  # (203 - 128) * 1.42 + 128 = 234.5 in decimals
        f32 = np.float32
        g, o = f32(1.42), f32(128) - f32(1.42) * f32(128)
        ref = np.floor((levels.astype(f32) * g + o).astype(np.float64) + 0.5)
        np.testing.assert_array_equal(got, np.clip(ref, 0, 255))
    imgs = [img, img]
    per = as_np(ndd.brightness_contrast(ndd.batch(imgs), contrast_center=ndd.batch([np.float32(0), np.float32(50)]),
                                        contrast=2.0))
    ref0 = np.clip(2.0 * img, 0, 255) if dtype == np.uint8 else 2.0 * img  # floats are not clamped
    assert np.abs(per[0].astype(float) - ref0).max() <= 0.5 + 1e-6
    # another output type keeps the values' scale (DALI: uint8 172 gives float 172.0); the
    # contrast centre stays the input type's, the shift is in the output type's range
    u8 = rand_image(rng, 4, 4)
    f = ndd.brightness_contrast(u8, dtype=ndd.float32)
    assert f.dtype == ndd.float32
    np.testing.assert_array_equal(as_np(f), u8.astype(np.float32))
    f = as_np(ndd.brightness_contrast(u8, contrast=1.5, brightness_shift=0.25, dtype=ndd.float32))
    np.testing.assert_allclose(f, 128 + 1.5 * (u8.astype(np.float64) - 128) + 0.25, rtol=1e-6, atol=1e-4)
    back = as_np(ndd.brightness_contrast(u8.astype(np.float32), dtype=ndd.uint8))
    np.testing.assert_array_equal(back, u8)


def test_hsv_identity_and_gray(photos):
    img = photos[1][:64, :64]
    np.testing.assert_array_equal(as_np(ndd.hsv(img)), img)
    assert np.abs(as_np(ndd.hsv(img, hue=360.0)).astype(int) - img).max() <= 1
    gray = as_np(ndd.hsv(img, saturation=0.0))
    ref = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
    for c in range(3):
        assert np.abs(gray[..., c].astype(int) - ref).max() <= 1
    darker = as_np(ndd.hsv(img.astype(np.float32) / 255, value=0.5))
    np.testing.assert_allclose(darker, img / 255 * 0.5, atol=1e-5)


def test_hsv_hue_rotation_matches_yiq_formula(rng):
    img = rng.random((8, 8, 3), dtype=np.float32)
    out = as_np(ndd.hsv(img, hue=90.0, saturation=1.5))
    yiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])  # DALI's
    q = img.astype(np.float64) @ yiq.T
    i2 = 1.5 * q[..., 2]  # +90 degrees: (I, Q) -> (Q, -I), the way DALI turns the hue
    q2 = -1.5 * q[..., 1]
    ref = np.stack([q[..., 0], i2, q2], -1) @ np.linalg.inv(yiq).T
    np.testing.assert_allclose(out, ref, atol=1e-5)


@pytest.mark.parametrize("op", ["hsv", "hue", "color_twist"])
def test_positive_hue_turns_colours_as_hsv_hue_grows(op):
    """Independent check of the direction (OpenCV's HSV): +30 degrees turns red towards
    yellow, green towards cyan, blue towards magenta, each by roughly 30 degrees; and DALI
    2.4's values (observed: uint8 [171, 73, 0], [26, 188, 136], [82, 19, 197]; float the
    YIQ matrices with DALI's constants, whose products are below)."""
    x = np.array([[[200, 40, 40], [40, 200, 40], [40, 40, 200]]], np.uint8)
    y = as_np(getattr(ndd, op)(ndd.tensor(x, layout="HWC"), hue=30.0))
    dali = np.array([[[171, 73, 0], [26, 188, 136], [82, 19, 197]]])  # exactly 171.48: OpenCV's
    assert np.abs(y.astype(int) - dali).max() <= 1                       # fixed point rounds to +-1
    f = as_np(getattr(ndd, op)(ndd.tensor(x.astype(np.float32), layout="HWC"), hue=30.0))
    np.testing.assert_allclose(f, [[[171.48164, 72.69781, -53.566868], [26.132927, 188.35846, 136.31439],
                                    [82.152, 19.058426, 197.27417]]], rtol=1e-5)  # DALI's float results
    h0 = cv2.cvtColor(x, cv2.COLOR_RGB2HSV_FULL)[..., 0].astype(float) * 360 / 256
    h1 = cv2.cvtColor(y, cv2.COLOR_RGB2HSV_FULL)[..., 0].astype(float) * 360 / 256
    turned = (h1 - h0) % 360
    assert ((turned > 15) & (turned < 45)).all(), turned


def test_color_twist(photos, rng):
    img = photos[0][:32, :32]
    np.testing.assert_array_equal(as_np(ndd.color_twist(img)), img)
    out = as_np(ndd.color_twist(img, brightness=1.1, contrast=0.8))
    ref = 1.1 * (0.8 * (img.astype(float) - 128) + 128)
    assert np.abs(out - np.clip(ref, 0, 255)).max() <= 0.5 + 1e-6
    rgb = as_np(ndd.color_twist(img, hue=40.0, saturation=0.6))
    bgr = as_np(ndd.color_twist(np.ascontiguousarray(img[..., ::-1]), hue=40.0, saturation=0.6,
                                image_type=types.BGR))
    assert np.abs(rgb.astype(int) - bgr[..., ::-1]).max() <= 1
    batch = as_np(ndd.color_twist(ndd.batch([img, img]), saturation=ndd.batch([np.float32(1), np.float32(0)])))
    np.testing.assert_array_equal(batch[0], img)
    assert np.abs(batch[1].astype(int) - cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)[..., None]).max() <= 1
    # uint8 ties round half away from zero, as DALI (OpenCV's uint8 transform rounds them to even)
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 3, axis=2)
    got = as_np(ndd.color_twist(ramp, contrast=0.5))[0, :, 0].astype(int)
    np.testing.assert_array_equal(got, np.floor(0.5 * np.arange(256) + 64 + 0.5).astype(int))
    # contrast about 128 for every integer type (DALI 2.4 gave int16 [221, 118, 55] -> [175, 123, 92])
    for dt in (np.int16, np.int32):
        wide = np.array([[[221, 118, 55], [0, 10, 100]]], dt)
        want = np.floor(0.5 * (wide.astype(float) - 128) + 128 + 0.5).astype(dt)
        np.testing.assert_array_equal(as_np(ndd.color_twist(wide, contrast=0.5)), want)
    flt = np.array([[[0.9, 0.2, 0.0]]], np.float32)
    np.testing.assert_allclose(as_np(ndd.color_twist(flt, contrast=0.5)), 0.5 * (flt - 0.5) + 0.5, atol=1e-6)
    with raises(ValueError, r"color_twist.*'image_type'"):
        ndd.color_twist(img, image_type=types.GRAY)
    with raises(ValueError, r"color_twist.*'brightness'"):
        ndd.color_twist(img, brightness=-1.0)


def test_cmn_uniform_batch_matches_sample_mode(rng):
    imgs = [rand_image(rng, 28, 28, 1) for _ in range(16)]
    out = ndd.crop_mirror_normalize(ndd.batch(imgs), crop=(24, 24), mean=[33.0], std=[78.0],
                                    mirror=ndd.batch([np.int32(i % 2) for i in range(16)]))
    for i, o in enumerate(as_np(out)):
        np.testing.assert_array_equal(o, as_np(ndd.crop_mirror_normalize(imgs[i], crop=(24, 24), mean=[33.0],
                                                                        std=[78.0], mirror=i % 2)))


def test_brightness_contrast_hue_saturation_ops(photos):
    """DALI's one-adjustment operators: a NumPy reference for brightness and contrast, and the
    same values as color_twist for hue and saturation; other arguments are refused."""
    img = photos[0][:24, :24]
    b = as_np(ndd.brightness(img, brightness=1.3, brightness_shift=0.1))
    assert np.abs(b - np.clip(1.3 * img.astype(float) + 25.5, 0, 255)).max() <= 0.5 + 1e-6
    c = as_np(ndd.contrast(img, contrast=0.5, contrast_center=100.0))
    assert np.abs(c - np.clip(100 + 0.5 * (img.astype(float) - 100), 0, 255)).max() <= 0.5 + 1e-6
    np.testing.assert_array_equal(as_np(ndd.hue(img, hue=35.0)), as_np(ndd.color_twist(img, hue=35.0)))
    sat = ndd.saturation(ndd.batch([img, img]), saturation=ndd.batch([np.float32(1), np.float32(0)]))
    np.testing.assert_array_equal(as_np(sat)[0], img)
    assert np.abs(as_np(sat)[1].astype(int) - cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)[..., None]).max() <= 1
    assert ndd.brightness(img, dtype=ndd.float32).dtype == ndd.float32
    for fn, other in ((ndd.brightness, "contrast"), (ndd.contrast, "brightness"), (ndd.hue, "saturation"),
                      (ndd.saturation, "hue")):
        with pytest.raises(TypeError, match=f"`{fn.__name__}` got an unexpected keyword argument '{other}'"):
            fn(img, **{other: 1.0})


def test_integer_outputs_round_half_away_from_zero_as_dali():
    """Operators convert to integer types as DALI's ConvertSat: halves away from zero, then
    saturated (DALI 2.4: x = 0..7, mean 0.5, std 1 to int8 gives [-1, 1, 2, 3, ...])."""
    x = np.arange(8, dtype=np.float32).reshape(1, 8, 1)
    want = [-1, 1, 2, 3, 4, 5, 6, 7]
    out = as_np(ndd.normalize(ndd.tensor(x, layout="HWC"), mean=0.5, stddev=1.0, dtype=ndd.int8))
    assert out.ravel().tolist() == want
    out = as_np(ndd.crop_mirror_normalize(ndd.tensor(x, layout="HWC"), mean=[0.5], std=[1.0], dtype=ndd.int8,
                                          output_layout="HWC"))
    assert out.ravel().tolist() == want
    u8 = as_np(ndd.brightness_contrast(ndd.tensor(np.array([[[1], [3]]], np.uint8), layout="HWC"),
                                       brightness=0.5))
    assert u8.ravel().tolist() == [1, 2]  # 0.5 -> 1, 1.5 -> 2 (half to even would give 0, 2)
