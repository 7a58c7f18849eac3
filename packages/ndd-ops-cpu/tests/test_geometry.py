"""resize, random_resized_crop, rotate, warp_affine, flip, crop against NumPy references.

Tolerances: uint8 outputs within 1 of the float reference rounded (OpenCV and
Pillow use fixed-point weights), 2 where Pillow rounds between its two passes;
float32 outputs within 1e-3 (OpenCV) of the reference. Antialiased filters are
compared away from the border (Pillow renormalises at edges, DALI clamps).
"""

from __future__ import annotations

import math

import numpy as np
import ops_cpu_refs as refs
import pytest
from ops_cpu_helpers import as_np, raises, rand_image, smooth_image

import ndd
from ndd import types


def _maxdiff(a, b) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


# -- resize: output size rules ---------------------------------------------------------

@pytest.mark.parametrize("hw,kwargs,expected", [
    ((720, 1280), {"size": (480, 640), "mode": "not_larger"}, (360, 640)),
    ((480, 640), {"size": (1080, 1920), "mode": "not_smaller"}, (1440, 1920)),
    ((600, 1200), {"size": 800, "mode": "not_smaller", "max_size": 1400}, (700, 1400)),
    ((480, 640), {"size": (100, 100), "mode": "stretch"}, (100, 100)),
    ((480, 640), {"size": (0, 320)}, (240, 320)),
    ((480, 640), {"size": (0, 320), "mode": "stretch"}, (480, 320)),
    ((480, 640), {"resize_x": 320}, (240, 320)),
    ((480, 640), {"resize_y": 100, "resize_x": 50}, (100, 50)),
    ((375, 500), {"resize_shorter": 256}, (256, 341)),
    ((375, 500), {"resize_longer": 256}, (192, 256)),
    ((100, 1000), {"resize_shorter": 50, "max_size": 300}, (30, 300)),
    ((480, 640), {"size": (0, 1280), "max_size": (500, 2000)}, (500, 1280)),
    # an explicit 0 counts as given, as in DALI 2.4: the input's size (it raised before)
    ((13, 17), {"resize_shorter": 0}, (13, 17)),
    ((13, 17), {"resize_x": 0, "resize_y": 0}, (13, 17)),
    ((13, 17), {"resize_x": 0, "resize_y": 5}, (5, 7)),
])
def test_resize_output_size(hw, kwargs, expected):
    x = np.zeros(hw + (1,), np.uint8)
    assert ndd.resize(x, interp_type=types.INTERP_NN, **kwargs).shape == expected + (1,)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_linear_upscale(rng, dtype):
    img = rand_image(rng, 20, 30, 3, dtype)
    out = as_np(ndd.resize(img, size=(50, 45), antialias=False))
    assert out.dtype == dtype and out.shape == (50, 45, 3)
    ref = refs.resample(img, (50, 45), "linear")
    assert _maxdiff(out, ref) <= (1.0 if dtype == np.uint8 else 1e-3)


def test_resize_nn_exact(rng):
    img = rand_image(rng, 17, 23, 3)
    for size in [(40, 50), (9, 7)]:
        out = as_np(ndd.resize(img, size=size, interp_type=types.INTERP_NN))
        np.testing.assert_array_equal(out, refs.resample(img, size, "nn"))
    # centres (almost) exactly on pixel edges: the rows and columns DALI 2.4 reads (observed
    # on an image whose pixels hold their own coordinates), uint8 and float, sample and batch
    observed = {(64, 48, 50, 23): ([0, 1, 3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 15, 17, 18, 19, 21, 22, 23, 24, 26,
                                    27, 28, 30, 31, 32, 33, 35, 36, 37, 39, 40, 41, 42, 44, 45, 46, 47, 49, 50,
                                    51, 53, 54, 55, 56, 58, 59, 60, 62, 63],
                                   [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 24, 26, 28, 30, 32, 34, 36, 38, 40,
                                    42, 44, 46]),
                (64, 48, 30, 40): ([1, 3, 5, 7, 9, 11, 13, 16, 18, 20, 22, 24, 26, 28, 30, 33, 35, 37, 39, 41, 43,
                                    45, 48, 50, 52, 54, 56, 58, 60, 62],
                                   [0, 1, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 21, 22, 23, 24,
                                    25, 27, 28, 29, 30, 31, 33, 34, 35, 36, 37, 39, 40, 41, 42, 43, 45, 46, 47]),
                (100, 90, 37, 41): ([1, 4, 6, 9, 12, 14, 17, 20, 22, 25, 28, 31, 33, 36, 39, 41, 44, 47, 49, 52,
                                     55, 58, 60, 63, 66, 68, 71, 74, 77, 79, 82, 85, 87, 90, 93, 95, 98],
                                    [1, 3, 5, 7, 9, 12, 14, 16, 18, 20, 23, 25, 27, 29, 31, 34, 36, 38, 40, 42,
                                     45, 47, 49, 51, 53, 55, 58, 60, 62, 64, 66, 69, 71, 73, 75, 77, 80, 82, 84,
                                     86, 88])}
    for (h, w, oh, ow), (rows, cols) in observed.items():
        for dtype in (np.uint8, np.float32):
            img = rand_image(rng, h, w, 3, dtype)
            ref = img[rows][:, cols]
            out = as_np(ndd.resize(img, resize_x=ow, resize_y=oh, interp_type=types.INTERP_NN))
            np.testing.assert_array_equal(out, ref)
            both = as_np(ndd.resize(ndd.batch([img, img]), size=(oh, ow), interp_type=types.INTERP_NN))
            np.testing.assert_array_equal(both[1], ref)


@pytest.mark.parametrize("kind,interp", [("linear", types.INTERP_LINEAR), ("cubic", types.INTERP_CUBIC),
                                         ("lanczos3", types.INTERP_LANCZOS3)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_antialiased_downscale(rng, kind, interp, dtype):
    img = smooth_image(rng, 120, 90, 3, dtype)
    out = as_np(ndd.resize(img, size=(41, 33), interp_type=interp))
    ref = refs.resample(img, (41, 33), kind, antialias=True)
    # uint8: Pillow clips cubic/Lanczos overshoot to 0..255 between its two passes.
    tol = (2 if kind == "linear" else 8) if dtype == np.uint8 else 1e-4
    assert _maxdiff(out, ref) <= tol  # the edges too: DALI repeats the edge pixel
    noise = rand_image(rng, 64, 48, 3, np.float32)  # edges matter most on noise
    out = as_np(ndd.resize(noise, size=(30, 40), interp_type=interp))
    assert _maxdiff(out, refs.resample(noise, (30, 40), kind, antialias=True)) <= 1e-3


@pytest.mark.parametrize("kind,interp", [("cubic", types.INTERP_CUBIC), ("lanczos3", types.INTERP_LANCZOS3)])
def test_resize_upscale_cubic_lanczos_float(rng, kind, interp):
    img = smooth_image(rng, 16, 12, 3, np.float32)
    out = as_np(ndd.resize(img, size=(40, 30), interp_type=interp))
    ref = refs.resample(img, (40, 30), kind)
    assert _maxdiff(out, ref) <= 2e-3


def test_resize_no_antialias_downscale_cubic_and_gaussian(rng):
    img = smooth_image(rng, 64, 64, 3, np.float32)
    out = as_np(ndd.resize(img, size=(20, 20), interp_type=types.INTERP_CUBIC, antialias=False))
    assert _maxdiff(out, refs.resample(img, (20, 20), "cubic", antialias=False)) <= 1e-4
    g = as_np(ndd.resize(img, size=(20, 20), interp_type=types.INTERP_GAUSSIAN))
    assert g.shape == (20, 20, 3) and np.isfinite(g).all()
    # A Gaussian is a low-pass filter: smoother than NN of the same image.
    nn = as_np(ndd.resize(img, size=(20, 20), interp_type=types.INTERP_NN))
    assert np.abs(np.diff(g, axis=1)).mean() < np.abs(np.diff(nn, axis=1)).mean()


# Weights of GAUSSIAN resizing observed with DALI 2.4 (impulse responses, rows: outputs):
# its tabulated filter reads ceil(support) taps from the support's left end, so the weights
# are not quite symmetric.
_DALI_GAUSSIAN_WEIGHTS = [
    (3, 1, False, [[0, 0.982014, 0.017986]]),
    (3, 1, True, [[0.307086, 0.378888, 0.314026]]),
    (9, 3, True, [[0.307086, 0.378888, 0.242908, 0.064178, 0.00694, 0, 0, 0, 0],
                  [0, 0, 0.064178, 0.242908, 0.378888, 0.242908, 0.064178, 0.00694, 0],
                  [0, 0, 0, 0, 0.00694, 0.064179, 0.242908, 0.378888, 0.307086]]),
    (2, 5, True, [[1, 0], [0.96068, 0.03932], [0.5, 0.5], [0.03932, 0.96068], [0, 1]]),
    (4, 8, False, [[1, 0, 0, 0], [0.880797, 0.119203, 0, 0], [0.119203, 0.880797, 0, 0],
                   [0, 0.880797, 0.119203, 0], [0, 0.119203, 0.880797, 0], [0, 0, 0.880797, 0.119203],
                   [0, 0, 0.119203, 0.880797], [0, 0, 0, 1]]),
]


@pytest.mark.parametrize(("n_in", "n_out", "antialias", "want"), _DALI_GAUSSIAN_WEIGHTS)
def test_resize_gaussian_weights_are_dalis(n_in, n_out, antialias, want):
    got = np.zeros((n_out, n_in))
    for j in range(n_in):  # one impulse per input pixel, down the rows and across the columns
        impulse = np.zeros((n_in, 1, 1), np.float32)
        impulse[j] = 1
        for rows in (True, False):
            img = impulse if rows else impulse.reshape(1, n_in, 1)
            size = (n_out, 1) if rows else (1, n_out)
            out = as_np(ndd.resize(img, size=size, interp_type=types.INTERP_GAUSSIAN, antialias=antialias))
            got[:, j] = out.ravel()
    np.testing.assert_allclose(got, want, atol=2e-6)


@pytest.mark.parametrize("kind,interp", [("linear", types.INTERP_LINEAR), ("cubic", types.INTERP_CUBIC),
                                         ("lanczos3", types.INTERP_LANCZOS3)])
def test_resize_roi_past_the_image_repeats_the_edge(rng, kind, interp):
    """An ROI reaching past the image (as subpixel_scale often makes it, by a fraction of a
    pixel) reads copies of the edge pixels, antialiased or not, uint8 and float."""
    for dtype, tol in ((np.float32, 1e-3), (np.uint8, 8)):
        img = smooth_image(rng, 64, 48, 3, dtype)
        for lo, hi, size in (((-3.5, -2.0), (67.0, 50.0), (30, 40)), ((0.0, -0.4), (64.0, 48.4), (20, 20))):
            out = as_np(ndd.resize(img, size=size, roi_start=lo, roi_end=hi, interp_type=interp,
                                   subpixel_scale=False))
            ref = refs.resample(img, size, kind, antialias=True, lo=lo, hi=hi)
            assert _maxdiff(out, ref) <= tol, (dtype, lo, hi)


def test_pil_vertical_first_is_the_installed_pillows_order_of_passes():
    """``ndd.plugins.pil_vertical_first`` (which the GPU kernel follows to match this
    package's Pillow results) predicts the order of the installed Pillow's two passes: its
    result on uint8 noise equals the one-axis resizes chained in that order, and differs
    from the other order where the two differ."""
    import importlib.metadata

    from PIL import Image

    from ndd.plugins import pil_vertical_first

    version = tuple(int(p) for p in importlib.metadata.version("pillow").split(".")[:2])
    gen = np.random.default_rng(7)
    told_apart = 0
    for _ in range(200):
        h, w, oh, ow = (int(v) for v in gen.integers(4, 48, 4))
        if h == oh or w == ow:
            continue
        im = Image.fromarray(gen.integers(0, 256, (h, w), dtype=np.uint8), "L")
        lanczos = Image.Resampling.LANCZOS
        both = np.asarray(im.resize((ow, oh), lanczos))
        cols_first = np.asarray(im.resize((ow, h), lanczos).resize((ow, oh), lanczos))
        rows_first = np.asarray(im.resize((w, oh), lanczos).resize((ow, oh), lanczos))
        if np.array_equal(cols_first, rows_first):
            continue
        told_apart += 1
        expected = rows_first if pil_vertical_first((h, w), (oh, ow), version) else cols_first
        assert np.array_equal(both, expected), ((h, w), (oh, ow), version)
    assert told_apart > 100
    assert not pil_vertical_first((34, 14), (13, 23), (12, 1))  # before Pillow 13: columns first
    assert pil_vertical_first((34, 14), (13, 23), (13, 0))
    assert not pil_vertical_first((40, 40), (30, 12), (13, 0))  # the width shrinks more


def test_resize_roi_and_flip(rng):
    img = rand_image(rng, 40, 60, 3)
    crop = img[10:30, 5:45]
    a = as_np(ndd.resize(img, size=(40, 80), roi_start=(10, 5), roi_end=(30, 45), antialias=False))
    b = as_np(ndd.resize(crop, size=(40, 80), antialias=False))
    # The filter reads pixels just outside the ROI (as DALI); the cropped input clamps instead.
    assert _maxdiff(a[1:-1, 1:-1], b[1:-1, 1:-1]) <= 1
    a = a[1:-1, 1:-1]
    rel = as_np(ndd.resize(img, size=(40, 80), roi_start=(0.25, 5 / 60), roi_end=(0.75, 0.75),
                           roi_relative=True, antialias=False))
    assert _maxdiff(rel[1:-1, 1:-1], a) <= 1
    flipped = as_np(ndd.resize(img, size=(40, 80), roi_start=(10, 45), roi_end=(30, 5), antialias=False))
    assert _maxdiff(flipped[1:-1, 1:-1], a[:, ::-1]) <= 1
    neg = as_np(ndd.resize(crop, resize_x=-80, resize_y=40, antialias=False))
    assert _maxdiff(neg, b[:, ::-1]) <= 1


def test_resize_fractional_scale_keeps_subpixel(rng):
    img = smooth_image(rng, 30, 41, 3, np.float32)
    out = as_np(ndd.resize(img, resize_shorter=20, antialias=False))
    # 41 * 20 / 30 = 27.33 -> 27 columns; the ROI shrinks so the scale stays 1.5.
    assert out.shape == (20, 27, 3)
    w = 27 * 1.5
    ref = refs.resample(img, (20, 27), "linear", lo=(0, (41 - w) / 2), hi=(30, (41 + w) / 2))
    assert _maxdiff(out, ref) <= 0.02  # OpenCV's warpAffine interpolates at 1/32 pixel


def test_resize_batch_per_sample_size_ragged_and_save_attrs(rng):
    imgs = [rand_image(rng, 30, 40), rand_image(rng, 50, 20), rand_image(rng, 31, 31)]
    sizes = ndd.batch([np.array([10, 20], np.float32), np.array([25, 5], np.float32),
                       np.array([31, 31], np.float32)])
    out, attrs = ndd.resize(ndd.batch(imgs), size=sizes, save_attrs=True)
    got = as_np(out)
    assert [o.shape[:2] for o in got] == [(10, 20), (25, 5), (31, 31)]
    assert [tuple(a) for a in as_np(attrs)] == [(30, 40), (50, 20), (31, 31)]  # the inputs' (H, W), as DALI
    for img, o in zip(imgs, got):
        np.testing.assert_array_equal(o, as_np(ndd.resize(img, size=o.shape[:2])))
    np.testing.assert_array_equal(got[2], imgs[2])


def test_resize_negative_size_flips(rng):
    """A negative extent in ``size`` flips that axis, as resize_x / resize_y do (and DALI)."""
    img = rand_image(rng, 17, 23, 3)
    up = as_np(ndd.resize(img, size=(30, 40)))
    np.testing.assert_array_equal(as_np(ndd.resize(img, size=(-30, 40))), up[::-1])
    np.testing.assert_array_equal(as_np(ndd.resize(img, size=(30, -40))), up[:, ::-1])
    np.testing.assert_array_equal(as_np(ndd.resize(img, resize_y=-30, resize_x=40)), up[::-1])


def test_resize_dtype_float(rng):
    img = rand_image(rng, 20, 20)
    out = ndd.resize(img, size=(10, 10), dtype=ndd.float32)
    assert out.dtype == ndd.float32
    ref = as_np(ndd.resize(img.astype(np.float32), size=(10, 10)))
    assert _maxdiff(as_np(out), ref) <= 1e-4  # not rounded to whole numbers on the way
    assert (np.abs(as_np(out) - np.round(as_np(out))) > 1e-3).mean() > 0.5
    for interp in (types.INTERP_LINEAR, types.INTERP_CUBIC):  # OpenCV and Pillow engines
        up = as_np(ndd.resize(img, size=(33, 27), interp_type=interp, antialias=False, dtype=ndd.float32))
        ref = refs.resample(img, (33, 27), "linear" if interp == types.INTERP_LINEAR else "cubic", False)
        assert _maxdiff(up, ref) <= 1e-3


@pytest.mark.parametrize("kwargs,match", [
    ({"resize_shorter": -1}, "'resize_shorter' must be non-negative"),
    ({"size": (10, 10), "interp_type": 17}, "'interp_type'"),
    ({"size": (10, 10), "mode": "bogus"}, "'mode' must be one of"),
    ({"resize_shorter": 10, "resize_longer": 10}, "mutually exclusive"),
    ({"size": (10, 10), "resize_x": 5}, "exactly one way"),
    ({}, "exactly one way"),
    ({"size": (10, 10), "dtype": ndd.int16}, "'dtype'"),
])
def test_resize_bad_arguments(kwargs, match):
    with raises(ValueError, r"Operator `resize`.*" + match):
        as_np(ndd.resize(np.zeros((8, 8, 3), np.uint8), **kwargs))


def test_resize_wrong_layout():
    x = ndd.as_tensor(np.zeros((3, 8, 8), np.uint8), layout="CHW")
    with raises(ValueError, r"resize.*layout"):
        ndd.resize(x, size=(4, 4))


# -- random_resized_crop ---------------------------------------------------------------

def test_random_resized_crop(photos):
    b = ndd.batch(photos)
    rng = ndd.random.RNG(seed=7)
    a = ndd.random_resized_crop(b, size=(64, 48), rng=rng)
    assert rng._draws == 7
    c = ndd.random_resized_crop(b, size=(64, 48), rng=ndd.random.RNG(seed=7))
    for x, y in zip(as_np(a), as_np(c)):
        assert x.shape == (64, 48, 3)
        np.testing.assert_array_equal(x, y)
    # The full-area window of the right aspect ratio is the whole image: same as resize.
    img = photos[0]
    whole = as_np(ndd.random_resized_crop(img, size=(64, 64), random_area=(1.0, 1.0), random_aspect_ratio=(1, 1)))
    np.testing.assert_array_equal(whole, as_np(ndd.resize(img, size=(64, 64))))


def test_random_resized_crop_bad_args():
    with raises(ValueError, r"random_resized_crop.*'random_area'"):
        ndd.random_resized_crop(np.zeros((8, 8, 3), np.uint8), size=(4, 4), random_area=(0.5, 0.1))


# -- rotate ----------------------------------------------------------------------------

def _rotate_ref(img, angle, out_hw, fill):
    h, w = img.shape[:2]
    a = math.radians(angle)
    ys, xs = np.mgrid[0:out_hw[0], 0:out_hw[1]] + 0.5
    dx, dy = xs - out_hw[1] / 2, ys - out_hw[0] / 2
    sx = w / 2 + math.cos(a) * dx - math.sin(a) * dy
    sy = h / 2 + math.sin(a) * dx + math.cos(a) * dy
    return refs.bilinear_sample(img, sx, sy, fill)


def test_rotate_right_angles_exact(rng):
    img = rand_image(rng, 10, 20, 3)
    np.testing.assert_array_equal(as_np(ndd.rotate(img, angle=0)), img)
    r90 = as_np(ndd.rotate(img, angle=90))
    assert r90.shape == (20, 10, 3)
    np.testing.assert_array_equal(r90, np.rot90(img, 1))
    np.testing.assert_array_equal(as_np(ndd.rotate(img, angle=180)), np.rot90(img, 2))
    np.testing.assert_array_equal(as_np(ndd.rotate(img, angle=-90)), np.rot90(img, 3))


@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_NN])
@pytest.mark.parametrize("angle", [90, -90, 180, 270, -450])
def test_right_angles_read_pixels_exactly_whatever_their_neighbours(angle, interp):
    """At multiples of 90 degrees every output pixel is one input pixel (np.rot90), for
    integer types too, and a NaN fill or NaN / huge neighbours do not leak through the
    zero-weight taps of the interpolation (they used to: OpenCV multiplies them by 0)."""
    x = np.array([[2.0, np.nan, 1e30], [3.0, 1.0, -7.5]], np.float32)
    k = (angle // 90) % 4
    for fill in (None, float("nan")):
        got = as_np(ndd.rotate(x, angle=angle, interp_type=interp, fill_value=fill))
        np.testing.assert_array_equal(got, np.rot90(x, k))
    line = np.arange(9, dtype=np.int16).reshape(1, 9) * 10
    got = as_np(ndd.rotate(line, angle=angle, keep_size=True, interp_type=interp, fill_value=-1))
    want = np.full((1, 9), -1, np.int16)
    want[0, 4] = 40  # only the centre pixel stays inside a 1x9 canvas turned by 90 degrees
    np.testing.assert_array_equal(got, want if k % 2 else np.rot90(line, k))
    square = np.arange(16, dtype=np.uint8).reshape(4, 4)
    for b, fill in ((ndd.as_batch([square] * 3), 0.0), (ndd.as_batch([x] * 3), float("nan"))):  # batched
        for o, src in zip(ndd.rotate(b, angle=angle, interp_type=interp, fill_value=fill).tensors, b.tensors):
            np.testing.assert_array_equal(as_np(o), np.rot90(as_np(src), k))


def test_rotate_of_an_empty_batch_with_size():
    out = ndd.rotate(ndd.as_batch(np.zeros((0, 4, 4), np.uint8)), angle=10.0, size=(5, 6))
    assert out.batch_size == 0


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("angle", [17.0, -40.0, 123.0])
def test_rotate_matches_reference(rng, dtype, angle):
    img = smooth_image(rng, 31, 46, 3, dtype)
    out = as_np(ndd.rotate(img, angle=angle, fill_value=0))
    ref = _rotate_ref(img, angle, out.shape[:2], 0.0)
    tol = 1.0 if dtype == np.uint8 else 0.02  # OpenCV interpolates at 1/32 pixel
    assert out.dtype == dtype
    assert np.quantile(np.abs(out - ref), 0.99) <= tol


def test_rotate_two_channels_matches_reference(rng):
    """Two-channel uint8 images are as close to the float reference as 1, 3 or 4 channels
    (OpenCV's own 2-channel warp interpolates on a coarser grid: up to 5 levels off)."""
    img = rand_image(rng, 40, 50, 2)  # noise: where a coarse interpolation shows most
    out = as_np(ndd.rotate(img, angle=30.0, fill_value=0))
    ref = _rotate_ref(img, 30.0, out.shape[:2], 0.0)
    assert out.shape[2] == 2 and np.quantile(np.abs(out - ref), 0.99) <= 1.0
    assert np.abs(out - ref).max() <= 2.0


def test_nearest_ties_read_the_pixel_whose_area_holds_the_point(rng):
    """NN on exact half-pixel ties reads the pixel whose area holds the point (DALI's floor),
    on the per-sample path (one image) as on the batched one (several small ones), whatever
    OpenCV's version (its warpAffine rounds ties half to even up to 5.0, half up from 5.1):
    4 rows out of 5 centred read rows 1 to 4; a point on the far edge is outside."""
    img = np.arange(5 * 6, dtype=np.uint8).reshape(5, 6, 1)
    for n in (1, 2):
        out = as_np(ndd.rotate(ndd.batch([img] * n), angle=0.0, size=(4, 6), interp_type=types.INTERP_NN))
        np.testing.assert_array_equal(out[0], img[1:5])
        out = as_np(ndd.warp_affine(ndd.batch([img] * n), matrix=[1, 0, 0.5, 0, 1, 0], fill_value=99,
                                    interp_type=types.INTERP_NN))
        np.testing.assert_array_equal(out[0][:, :5], img[:, 1:6])  # x + 0.5 + 0.5: the next pixel
        assert (out[0][:, 5] == 99).all()  # the point 6.0 is on the far edge: outside


@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_warp_of_an_empty_image_is_refused_by_name(interp):
    """An image with no rows or columns has nothing to sample (OpenCV failed an assertion)."""
    b = ndd.batch([np.zeros((4, 5, 3), np.uint8), np.zeros((0, 5, 3), np.uint8)])
    with raises(ValueError, r"Operator `warp_affine`: sample 1 is an empty image \(0x5 pixels\)"):
        ndd.warp_affine(b, matrix=[1, 0, 0, 0, 1, 0], size=(3, 4), interp_type=interp).evaluate()
    with raises(ValueError, r"Operator `rotate`: sample 1 is an empty image"):
        ndd.rotate(b, angle=10.0, interp_type=interp).evaluate()


def test_warp_to_an_empty_size(rng):
    """A zero output extent gives an empty image (OpenCV would take an empty size for the
    input's)."""
    img = rand_image(rng, 5, 7, 3)
    assert as_np(ndd.rotate(img, angle=3.0, size=(0, 3))).shape == (0, 3, 3)
    assert as_np(ndd.warp_affine(img, matrix=[1, 0, 0, 0, 1, 0], size=(4, 0))).shape == (4, 0, 3)


@pytest.mark.parametrize("fill, value", [(1e10, 255), (-1e10, 0), (300.0, 255), (float("nan"), 0)])
def test_warp_uint8_fill_saturates_on_every_path(rng, fill, value):
    """A uint8 fill value out of range saturates (NaN: 0) for one image (warpAffine, which
    would wrap a huge value through int) as for a batch of small ones (the remap mosaic)."""
    img = np.full((4, 5, 1), 100, np.uint8)
    for n in (1, 2):
        out = as_np(ndd.warp_affine(ndd.batch([img] * n), matrix=[1, 0, 2, 0, 1, 0], fill_value=fill))
        assert (out[0][:, -2:] == value).all() and (out[0][:, :3] == 100).all()


def test_rotate_canvas_size_and_keep_size(rng):
    img = rand_image(rng, 28, 28, 1)
    assert as_np(ndd.rotate(img, angle=30)).shape == (40, 40, 1)  # ceil(38.25) = 39 -> even like 28
    img = smooth_image(rng, 20, 36, 3)
    k = as_np(ndd.rotate(img, angle=90, keep_size=True, fill_value=0))
    assert k.shape == (20, 36, 3)
    ref = _rotate_ref(img, 90, (20, 36), 0.0)
    assert _maxdiff(k, ref) <= 1
    s = as_np(ndd.rotate(img, angle=45, size=(11, 13)))
    assert s.shape == (11, 13, 3)


@pytest.mark.parametrize(("hw", "angle", "want"), [
    ((3, 2), 45, (4, 5)), ((3, 2), 135, (5, 4)), ((2, 3), 45, (5, 4)), ((6, 7), 45, (11, 10)),
    ((20, 9), 45, (21, 22)), ((3, 18), 45, (16, 15)), ((3, 2), 225, (5, 4)), ((3, 2), 315, (4, 5)),
    ((3, 2), 44.9999, (5, 4)), ((3, 2), 45.0001, (4, 5)), ((7, 7), 45, (11, 11)),
])
def test_rotate_canvas_at_odd_multiples_of_45_degrees(hw, angle, want):
    """Which extent's parity the canvas keeps where |sin| and |cos| tie: DALI 2.4's shapes
    (it works with the angle as a float32 in radians)."""
    out = ndd.rotate(np.zeros((*hw, 1), np.uint8), angle=angle)
    assert as_np(out).shape == (*want, 1)


def test_rotate_batch_per_sample_angles(rng):
    digits = rng.integers(0, 256, (64, 28, 28, 1), dtype=np.uint8)
    angles = rng.uniform(-30, 30, 64).astype(np.float32)
    out = as_np(ndd.rotate(ndd.batch(list(digits)), angle=ndd.batch(list(angles)), keep_size=True))
    for i in (0, 17, 63):
        np.testing.assert_array_equal(out[i], as_np(ndd.rotate(digits[i], angle=float(angles[i]), keep_size=True)))
    ragged = [rand_image(rng, 10, 20), rand_image(rng, 7, 5)]
    r = as_np(ndd.rotate(ndd.batch(ragged), angle=ndd.batch([np.float32(90), np.float32(180)])))
    np.testing.assert_array_equal(r[0], np.rot90(ragged[0]))
    np.testing.assert_array_equal(r[1], np.rot90(ragged[1], 2))


def test_rotate_border_clamp_without_fill(rng):
    img = np.full((10, 10, 1), 200, np.uint8)
    out = as_np(ndd.rotate(img, angle=45))
    assert (out == 200).all()  # border replicated, no black corners
    out = as_np(ndd.rotate(img, angle=45, fill_value=7))
    assert out[0, 0, 0] == 7


def test_rotate_bad_arguments():
    x = np.zeros((8, 8, 3), np.uint8)
    with raises(ValueError, r"rotate.*'interp_type'"):
        ndd.rotate(x, angle=10, interp_type=types.INTERP_LANCZOS3)
    with raises(ValueError, r"rotate.*'size'"):
        ndd.rotate(x, angle=10, size=(-1, 4))
    with raises(TypeError, "angle"):
        ndd.rotate(x)


# -- warp_affine -----------------------------------------------------------------------

def test_warp_affine(rng):
    img = smooth_image(rng, 30, 40, 3, np.float32)
    np.testing.assert_allclose(as_np(ndd.warp_affine(img, matrix=[1, 0, 0, 0, 1, 0])), img, atol=1e-6)
    m = np.array([[0.9, 0.2, 3.0], [-0.1, 1.1, -2.0]])
    out = as_np(ndd.warp_affine(img, matrix=m.ravel().tolist(), fill_value=0.0, size=(25, 35)))
    ys, xs = np.mgrid[0:25, 0:35] + 0.5
    ref = refs.bilinear_sample(img, m[0, 0] * xs + m[0, 1] * ys + m[0, 2], m[1, 0] * xs + m[1, 1] * ys + m[1, 2], 0.0)
    assert np.quantile(np.abs(out - ref), 0.99) <= 0.02
    inv = np.linalg.inv(np.vstack([m, [0, 0, 1]]))[:2]
    fwd = as_np(ndd.warp_affine(img, matrix=inv.ravel().tolist(), inverse_map=False, fill_value=0.0, size=(25, 35)))
    assert _maxdiff(fwd, out) <= 1e-3
    via_input = as_np(ndd.warp_affine(img, m.astype(np.float32), fill_value=0.0, size=(25, 35)))
    assert _maxdiff(via_input, out) <= 1e-3


def test_warp_affine_translate_nn_per_sample(rng):
    imgs = [rand_image(rng, 12, 12), rand_image(rng, 12, 12)]
    mats = ndd.batch([np.array([1, 0, 2, 0, 1, 0], np.float32), np.array([1, 0, 0, 0, 1, 3], np.float32)])
    out = as_np(ndd.warp_affine(ndd.batch(imgs), matrix=mats, interp_type=types.INTERP_NN, fill_value=0))
    np.testing.assert_array_equal(out[0][:, :10], imgs[0][:, 2:])
    np.testing.assert_array_equal(out[1][:9], imgs[1][3:])
    assert (out[1][9:] == 0).all()


def test_warp_affine_takes_transforms_matrices(rng):
    # transforms.* give (2, 3) float32 matrices, as a tensor argument or an input, per sample too
    imgs = ndd.batch([smooth_image(rng, 30, 40, 3, np.float32) for _ in range(2)])
    mats = ndd.transforms.rotation(angle=ndd.batch([np.float32(15), np.float32(-40)]), center=[20, 15])
    shifted = ndd.transforms.translation(mats, offset=[2, -1])
    got = as_np(ndd.warp_affine(imgs, matrix=shifted, fill_value=0.0))
    for k, a in enumerate((15, -40)):
        c, s = math.cos(math.radians(a)), math.sin(math.radians(a))
        m = np.array([[c, -s, 20 - 20 * c + 15 * s + 2], [s, c, 15 - 20 * s - 15 * c - 1]], np.float32)
        ref = as_np(ndd.warp_affine(imgs.tensors[k], matrix=m.ravel().tolist(), fill_value=0.0))
        assert _maxdiff(got[k], ref) <= 1e-3
        via_input = as_np(ndd.warp_affine(imgs.tensors[k], shifted.tensors[k], fill_value=0.0))
        assert _maxdiff(via_input, ref) <= 1e-3


def test_warp_affine_bad_matrix():
    with raises(ValueError, r"warp_affine.*'matrix'"):
        ndd.warp_affine(np.zeros((4, 4, 1), np.uint8), matrix=[1, 0, 0])


# -- flip ------------------------------------------------------------------------------

def test_flip_per_sample_and_layouts(rng):
    imgs = [rand_image(rng, 6, 9) for _ in range(4)]
    h = ndd.batch([np.int32(v) for v in (1, 0, 1, 0)])
    v = ndd.batch([np.int32(v) for v in (0, 0, 1, 1)])
    out = as_np(ndd.flip(ndd.batch(imgs), horizontal=h, vertical=v))
    for img, o, hh, vv in zip(imgs, out, (1, 0, 1, 0), (0, 0, 1, 1)):
        ref = img[:, ::-1] if hh else img
        ref = ref[::-1] if vv else ref
        np.testing.assert_array_equal(o, ref)
    np.testing.assert_array_equal(as_np(ndd.flip(imgs[0])), imgs[0][:, ::-1])
    ragged = [rand_image(rng, 3, 4), rand_image(rng, 5, 2)]
    r = as_np(ndd.flip(ndd.batch(ragged), vertical=1, horizontal=0))
    np.testing.assert_array_equal(r[1], ragged[1][::-1])
    chw = ndd.as_tensor(np.ascontiguousarray(imgs[0].transpose(2, 0, 1)), layout="CHW")
    np.testing.assert_array_equal(as_np(ndd.flip(chw)), imgs[0].transpose(2, 0, 1)[:, :, ::-1])


def test_flip_without_a_layout_needs_2d_or_3d_images():
    for x in (ndd.tensor(np.uint8(3)), ndd.tensor(np.arange(4, dtype=np.uint8)),
              ndd.batch([np.arange(4, dtype=np.uint8)] * 2), ndd.tensor(np.zeros((2, 3, 4, 3), np.uint8))):
        with raises(ValueError, rf"Operator `flip`: expects images \(HWC or HW\), got a {x.ndim}-D input without"):
            as_np(ndd.flip(x))
    w = ndd.as_tensor(np.arange(4, dtype=np.uint8), layout="W")  # a layout naming W is enough
    assert as_np(ndd.flip(w)).tolist() == [3, 2, 1, 0]
    with raises(ValueError, r"flip.*'vertical'.*no H dimension"):
        as_np(ndd.flip(w, vertical=1))


# -- crop ------------------------------------------------------------------------------

def test_crop_in_bounds_and_anchor(rng):
    img = rand_image(rng, 40, 50)
    # an explicit 0 is given, as in DALI 2.4: the whole extent (it raised as "only crop_w")
    np.testing.assert_array_equal(as_np(ndd.crop(img, crop_h=0, crop_w=4)), img[:, 23:27])
    with raises(ValueError, r"'crop_w' and 'crop_h' must be given together"):
        ndd.crop(img, crop_w=4)
    with raises(ValueError, r"'resize_shorter' and 'resize_longer' are mutually exclusive"):
        ndd.resize(img, resize_shorter=0, resize_longer=0)
    np.testing.assert_array_equal(as_np(ndd.crop(img, crop=(20, 30))), img[10:30, 10:40])
    np.testing.assert_array_equal(as_np(ndd.crop(img, crop_h=10, crop_w=8, crop_pos_x=0, crop_pos_y=1)),
                                  img[30:40, 0:8])
    out = as_np(ndd.crop(img, crop_w=21, crop_h=21, crop_pos_x=0.5, crop_pos_y=0.5, rounding="truncate"))
    np.testing.assert_array_equal(out, img[9:30, 14:35])
    # crop_pos is float32, multiplied in double (DALI 2.4: 0.35 of 40 - 30 is 3.4999999, row 3;
    # in double it would be 3.5, row 4)
    np.testing.assert_array_equal(as_np(ndd.crop(img, crop=(30, 40), crop_pos_x=0.35, crop_pos_y=0.35)),
                                  img[3:33, 3:43])
    batch = as_np(ndd.crop(ndd.batch([img, img]), crop=(4, 4),
                           crop_pos_x=ndd.batch([np.float32(0), np.float32(1)])))
    np.testing.assert_array_equal(batch[0], img[18:22, :4])
    np.testing.assert_array_equal(batch[1], img[18:22, 46:])
    f = ndd.crop(img, crop=(4, 4), dtype=ndd.float32)
    assert f.dtype == ndd.float32


def test_crop_fractional_window_drops_the_fraction(rng):
    """crop=[10.6, 12.5] is a 10x12 window, as in DALI 2.4 (crop and crop_mirror_normalize)."""
    img = rand_image(rng, 17, 23, 3)
    for crop in ([10.6, 12.4], [10.5, 12.5], [10.4, 12.9]):
        out = as_np(ndd.crop(img, crop=crop))
        np.testing.assert_array_equal(out, img[4:14, 6:18])  # anchor round(0.5 * (17-10)) = 4, 0.5 * 11 -> 6
        assert ndd.crop_mirror_normalize(img, crop=crop).shape == (3, 10, 12)


def test_crop_dtype_truncates_and_saturates_as_dali():
    """crop with a dtype converts as DALI's: floats truncated, then saturated."""
    f = np.array([[-7.5, 0.5, 1.5, 2.7, 300.0]], np.float32)[..., None].repeat(3, axis=2)
    got = as_np(ndd.crop(ndd.tensor(f, layout="HWC"), crop=(1, 5), dtype=ndd.uint8))
    assert got[..., 0].tolist() == [[0, 0, 1, 2, 255]]
    i = np.array([[-300, 128, 1000]], np.int16)[..., None].repeat(3, axis=2)
    got = as_np(ndd.crop(ndd.tensor(i, layout="HWC"), crop=(1, 3), dtype=ndd.uint8))
    assert got[..., 0].tolist() == [[0, 128, 255]]


def test_crop_out_of_bounds_policies(rng):
    img = rand_image(rng, 10, 12)
    with raises(ValueError, r"crop.*outside.*out_of_bounds_policy"):
        as_np(ndd.crop(img, crop=(14, 8)))
    pad = as_np(ndd.crop(img, crop=(14, 8), crop_pos_y=0.5, out_of_bounds_policy="pad", fill_values=(1, 2, 3)))
    assert pad.shape == (14, 8, 3)
    np.testing.assert_array_equal(pad[2:12], img[:, 2:10])
    np.testing.assert_array_equal(pad[0, 0], [1, 2, 3])
    np.testing.assert_array_equal(pad[13, 7], [1, 2, 3])
    trim = as_np(ndd.crop(img, crop=(14, 8), out_of_bounds_policy="trim_to_shape"))
    np.testing.assert_array_equal(trim, img[:, 2:10])
    far = as_np(ndd.crop(img, crop=(4, 4), crop_pos_x=2.0, out_of_bounds_policy="pad"))
    assert (far == 0).all()


def test_crop_fill_values_convert_as_the_crop_does_and_are_checked_only_when_padding(rng):
    """The fill values become the image's type as crop converts (truncated, saturated; they
    used to wrap, or raise OverflowError without channels), and a fill_values count that does
    not match the channels is an error only for a sample that is padded (as on the GPU)."""
    gray = np.arange(12, dtype=np.int16).reshape(3, 4)
    pad = as_np(ndd.crop(ndd.as_tensor(gray, layout="HW"), crop=(5, 4), crop_pos_y=0.5,
                         out_of_bounds_policy="pad", fill_values=(1e6,)))
    np.testing.assert_array_equal(pad[0], [32767] * 4)
    np.testing.assert_array_equal(pad[1:4], gray)
    img = rand_image(rng, 6, 6)
    neg = as_np(ndd.crop(img, crop=(8, 6), crop_pos_y=0.5, out_of_bounds_policy="pad", fill_values=(-3, 2.9, 300)))
    np.testing.assert_array_equal(neg[0, 0], [0, 2, 255])
    ragged = ndd.as_batch([rand_image(rng, 6, 6), rand_image(rng, 6, 6, 1)])
    out = ndd.crop(ragged, crop=(4, 4), fill_values=(1, 2, 3))  # inside both: no fill used
    np.testing.assert_array_equal(as_np(out.tensors[1]), as_np(ragged.tensors[1])[1:5, 1:5])
    with raises(ValueError, r"crop.*'fill_values' has 3 values but the image has 1 channels"):
        as_np(ndd.crop(ragged, crop=(8, 4), out_of_bounds_policy="pad", fill_values=(1, 2, 3)).tensors[1])


def test_crop_chw_and_bad_args(rng):
    img = rand_image(rng, 10, 12)
    chw = ndd.as_tensor(np.ascontiguousarray(img.transpose(2, 0, 1)), layout="CHW")
    np.testing.assert_array_equal(as_np(ndd.crop(chw, crop=(4, 6))), img[3:7, 3:9].transpose(2, 0, 1))
    with raises(ValueError, r"crop.*'crop'"):
        ndd.crop(img, crop=(4, 4), crop_w=3)
    with raises(ValueError, r"crop.*'crop' must be non-negative"):
        ndd.crop(img, crop=(-4, 4))
    for op in (ndd.crop, ndd.crop_mirror_normalize, ndd.decoders.image_crop):
        with raises(ValueError, r"'crop_w' and 'crop_h' must be given together"):  # as DALI
            op(img if op is not ndd.decoders.image_crop else np.zeros(10, np.uint8), crop_w=5)
    # one of crop_w/crop_h per sample (a Batch), the other a constant: as DALI 2.4
    imgs = ndd.as_batch([img, rand_image(rng, 8, 9)])
    heights = ndd.batch([np.float32(1), np.float32(2)])
    for op in (ndd.crop, ndd.crop_mirror_normalize):
        out = op(imgs, crop_w=2.0, crop_h=heights, crop_pos_x=0, crop_pos_y=0)
        want = [(1, 2), (2, 2)] if op is ndd.crop else [(3, 1, 2), (3, 2, 2)]
        assert [tuple(s[:2]) if op is ndd.crop else tuple(s) for s in out.shape] == want
        with raises(ValueError, r"'crop_w' and 'crop_h' must be given together \(as in DALI\), got only 'crop_h'"):
            op(imgs, crop_h=heights)
        with raises(ValueError, r"argument 'crop' cannot be combined with crop_w/crop_h"):
            op(imgs, crop=ndd.batch([np.float32([2, 2])] * 2), crop_w=3, crop_h=3)
    np.testing.assert_array_equal(as_np(ndd.crop(imgs, crop_w=ndd.batch([np.float32(3)] * 2), crop_h=4.0,
                                                 crop_pos_x=0, crop_pos_y=0).tensors[0]), img[:4, :3])
    with raises(ValueError, r"crop.*'out_of_bounds_policy'"):
        ndd.crop(img, crop=(4, 4), out_of_bounds_policy="wrap")
    with raises(ValueError, r"crop.*'fill_values'"):
        as_np(ndd.crop(img, crop=(20, 4), out_of_bounds_policy="pad", fill_values=(1, 2)))


@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_resize_uniform_small_batch_matches_sample_mode(rng, interp):
    digits = [rand_image(rng, 28, 28, 1) for _ in range(64)]
    out = as_np(ndd.resize(ndd.batch(digits), size=(56, 40), interp_type=interp))
    for i in (0, 31, 63):
        np.testing.assert_array_equal(out[i], as_np(ndd.resize(digits[i], size=(56, 40), interp_type=interp)))


def test_resize_mixed_axes_antialias(rng):
    # Height shrinks (TRIANGULAR), width grows (LINEAR).
    img = smooth_image(rng, 60, 20, 3)
    out = as_np(ndd.resize(img, size=(25, 47)))
    ref = refs.resample(img, (25, 47), "linear", antialias=True)
    assert _maxdiff(out[3:-3, 3:-3], ref[3:-3, 3:-3]) <= 2


@pytest.mark.parametrize("mag", ["cubic", "lanczos3", "nn"])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_filter_per_axis(rng, mag, antialias):
    """Height shrinks with min_filter (LINEAR), width grows with mag_filter: each axis keeps its
    own filter (the grown axis was resampled with the shrinking axis's tent under antialias)."""
    interp = {"cubic": types.INTERP_CUBIC, "lanczos3": types.INTERP_LANCZOS3, "nn": types.INTERP_NN}[mag]
    img = smooth_image(rng, 60, 20, 3).astype(np.float32)
    out = as_np(ndd.resize(img, size=(25, 50), mag_filter=interp, antialias=antialias))
    ref = refs.resample(img, (25, 50), ("linear", mag), antialias=antialias)
    np.testing.assert_allclose(out, ref, atol=1e-3 * 255)
    # DALI 2.4's row 0 for a 4x3 ramp resized to 2x5 with mag_filter=CUBIC (antialias on / off)
    ramp = (np.arange(4, dtype=np.float32) * 10)[:, None, None] + np.float32([0, 1, 3])[None, :, None]
    if mag == "cubic":
        want = [6.186, 6.53, 7.25, 8.546, 9.378] if antialias else [4.936, 5.28, 6.0, 7.296, 8.128]
        got = as_np(ndd.resize(ramp, size=(2, 5), mag_filter=interp, antialias=antialias))[0, :, 0]
        np.testing.assert_allclose(got, want, atol=1e-3)


def test_dalis_own_interp_enum_and_a_2x3_matrix():
    """DALI's own enum objects (nvidia.dali.types, pybind11: a class of that name with .name)
    are taken by name; warp_affine takes its matrix flat or as 2x3 rows, as DALI does."""
    foreign = type("DALIInterpType", (), {})()
    foreign.name = "INTERP_NN"
    img = np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3)
    np.testing.assert_array_equal(as_np(ndd.resize(img, size=(2, 2), interp_type=foreign)),
                                  as_np(ndd.resize(img, size=(2, 2), interp_type=types.INTERP_NN)))
    foreign.name = "NO_SUCH"
    with pytest.raises(TypeError, match="interp_type"):
        ndd.resize(img, size=(2, 2), interp_type=foreign)
    flat = as_np(ndd.warp_affine(img, matrix=[0.5, 0, 1, 0, 0.5, 0.25]))
    for m in ([[0.5, 0, 1], [0, 0.5, 0.25]], np.array([[0.5, 0, 1], [0, 0.5, 0.25]], np.float32)):
        np.testing.assert_array_equal(as_np(ndd.warp_affine(img, matrix=m)), flat)


def test_resize_four_channels_keeps_colour_under_alpha(rng):
    """A 4-channel uint8 image is resampled channel by channel: Pillow's RGBA mode would
    premultiply the colour by alpha and change it wherever alpha < 255."""
    x = rand_image(rng, 20, 30, 4)
    x[..., 3] = 10
    for interp in (types.INTERP_CUBIC, types.INTERP_LANCZOS3, types.INTERP_LINEAR):
        four = as_np(ndd.resize(x, size=(10, 15), interp_type=interp))
        rgb = as_np(ndd.resize(np.ascontiguousarray(x[..., :3]), size=(10, 15), interp_type=interp))
        np.testing.assert_array_equal(four[..., :3], rgb)
        assert (four[..., 3] == 10).all()


def test_rotate_and_warp_to_float_are_not_rounded(rng):
    """uint8 in, a float dtype out: computed from float input (as DALI), so the result is the
    float warp of the image, not a rounded uint8 one (sample and mosaic paths)."""
    img = rand_image(rng, 17, 23, 3)
    for imgs in ([img], [img, img]):
        got = as_np(ndd.rotate(ndd.batch(imgs), angle=30.0, dtype=ndd.float32))
        ref = as_np(ndd.rotate(ndd.batch([i.astype(np.float32) for i in imgs]), angle=30.0))
        np.testing.assert_allclose(got[0], ref[0], atol=1e-4)
        got = as_np(ndd.warp_affine(ndd.batch(imgs), matrix=[0.9, 0.1, 1.3, -0.2, 1.1, 0.7], dtype=ndd.float32))
        ref = as_np(ndd.warp_affine(ndd.batch([i.astype(np.float32) for i in imgs]),
                                    matrix=[0.9, 0.1, 1.3, -0.2, 1.1, 0.7]))
        np.testing.assert_allclose(got[0], ref[0], atol=1e-4)
        assert (np.abs(got[0] - np.round(got[0])) > 0.05).mean() > 0.3


def test_warp_affine_nearest_ties_go_to_the_pixel_holding_the_point(rng):
    """A source point exactly on a pixel edge reads the pixel it starts (DALI: floor), for
    the common exact matrices: halving maps output centre x + 0.5 to source 2x + 1 exactly,
    which DALI reads as pixel 2x + 1 (OpenCV's rounding alone gave 2x)."""
    img = rand_image(rng, 9, 11, 3)
    for imgs in ([img], [img, img]):  # per-sample warpAffine and the mosaic remap
        out = as_np(ndd.warp_affine(ndd.batch(imgs), matrix=[2, 0, 0, 0, 2, 0], size=(4, 5),
                                    interp_type=types.INTERP_NN))
        np.testing.assert_array_equal(out[0], img[1::2, 1::2][:4, :5])


@pytest.mark.parametrize("empty", [(0, 5, 3), (4, 0, 3)])
def test_images_without_pixels(empty):
    """A batch holding an image with no rows or no columns: per-pixel and filtering operators
    give it back empty (they raised NumPy/OpenCV errors), padding crops fill the whole window,
    and operators that must sample it say so, naming the sample."""
    b = ndd.as_batch([np.zeros(empty, np.uint8), np.full((4, 5, 3), 9, np.uint8)], layout="HWC")
    for op in (lambda x: ndd.color_twist(x, hue=10.0), lambda x: ndd.hsv(x, hue=10.0),
               lambda x: ndd.gaussian_blur(x, sigma=1.0), lambda x: ndd.flip(x, horizontal=1)):
        out = op(b)
        assert as_np(out.tensors[0]).shape == empty and as_np(out.tensors[1]).shape == (4, 5, 3)
    pad = ndd.crop(b, crop=(2, 2), out_of_bounds_policy="pad", fill_values=(1, 2, 3))
    np.testing.assert_array_equal(as_np(pad.tensors[0]), np.broadcast_to([1, 2, 3], (2, 2, 3)))
    for op in (lambda x: ndd.resize(x, size=[4, 4]), lambda x: ndd.random_resized_crop(x, size=[4, 4])):
        with raises(ValueError, r"sample 0 is an empty image .*nothing to sample"):
            as_np(op(b).tensors[1])


def test_a_per_sample_scalar_argument_with_several_values_is_named():
    """``angle`` takes one value per sample: a batch of 2-element samples is refused with the
    argument and the sample (it was a NumPy reshape error); shape (1,) samples are fine."""
    b = ndd.as_batch([np.zeros((4, 4), np.uint8)] * 2, layout="HW")
    with raises(ValueError, r"`rotate`: argument 'angle' takes one value per sample, but sample 1 .* shape \(2,\)"):
        ndd.rotate(b, angle=ndd.as_batch([np.ones(1, np.float32), np.ones(2, np.float32)])).evaluate()
    one = ndd.rotate(b, angle=ndd.as_batch([np.full(1, 90, np.float32)] * 2))
    np.testing.assert_array_equal(as_np(one.tensors[0]), np.zeros((4, 4), np.uint8))


def test_image_ops_give_3d_data_without_a_layout_hwc():
    """DALI 2.4: an image operator's output on 3-D data without a layout is HWC, so that
    ``axis_names`` work downstream; 2-D data keeps no layout, a given layout is kept."""
    x = ndd.batch([np.full((8, 10, 3), 7, np.uint8)] * 2)
    ops = [lambda a: ndd.resize(a, size=[4, 4]), ndd.flip, lambda a: ndd.crop(a, crop=[2, 2]),
           lambda a: ndd.rotate(a, angle=10.0), lambda a: ndd.warp_affine(a, matrix=[1, 0, 0, 0, 1, 0]),
           lambda a: ndd.color_twist(a, brightness=1.1), lambda a: ndd.hsv(a, saturation=1.1), ndd.hue,
           lambda a: ndd.brightness_contrast(a, brightness=1.1), ndd.contrast,
           lambda a: ndd.random_resized_crop(a, size=[4, 4])]
    for op in ops:
        assert op(x).layout == "HWC"
        assert op(ndd.tensor(np.zeros((8, 10, 3), np.uint8))).layout == "HWC"
    assert ndd.flip(ndd.batch([np.zeros((8, 10), np.uint8)])).layout is None
    assert ndd.flip(ndd.batch([np.zeros((3, 8, 10), np.uint8)], layout="CHW")).layout == "CHW"
    mean = ndd.reductions.mean(ndd.cast(ndd.resize(x, size=[4, 4]), dtype=ndd.float32), axis_names="HW")
    np.testing.assert_allclose(as_np(mean.tensors[0]), [7, 7, 7])


def test_volume_arguments_on_images_are_ignored_and_size_beats_keep_size(rng):
    """DALI 2.4: flip's depthwise and rotate's axis are ignored for images (no D axis), and
    rotate's size wins over keep_size; they raised."""
    img = rand_image(rng, 13, 17)
    np.testing.assert_array_equal(as_np(ndd.flip(img, depthwise=1)), img[:, ::-1])
    np.testing.assert_array_equal(as_np(ndd.flip(img, horizontal=0, depthwise=1)), img)
    plain = as_np(ndd.rotate(img, angle=30.0))
    np.testing.assert_array_equal(as_np(ndd.rotate(img, angle=30.0, axis=[0, 0, 1])), plain)
    assert ndd.rotate(img, angle=30.0, keep_size=True, size=[27, 28]).shape == (27, 28, 3)
    np.testing.assert_array_equal(as_np(ndd.rotate(img, angle=30.0, keep_size=True, size=[27, 28])),
                                  as_np(ndd.rotate(img, angle=30.0, size=[27, 28])))


@pytest.mark.parametrize("hw, kwargs", [
    ((20, 25), {"size": [46, 0]}),        # 25 * float32(46 / 20) is 57.5: 58 (57.4999... in double)
    ((54, 48), {"resize_shorter": 100}),  # 54 * float32(100 / 48) is 112.49999: 112 (112.5000... in double)
    ((7, 9), {"resize_x": 15}),
    ((33, 61), {"size": [40, 50], "mode": "not_larger"}),
])
def test_resize_derived_extents_use_float32_scales(hw, kwargs):
    f32 = np.float32
    h, w = hw
    if "size" in kwargs and kwargs.get("mode") is None:
        scale = f32(kwargs["size"][0]) / f32(h)
        want = (kwargs["size"][0], int(np.floor(f32(w) * scale + f32(0.5))))
    elif "resize_shorter" in kwargs:
        scale = f32(kwargs["resize_shorter"]) / f32(min(h, w))
        want = tuple(kwargs["resize_shorter"] if s == min(h, w) else int(np.floor(f32(s) * scale + f32(0.5)))
                     for s in (h, w))
    elif "resize_x" in kwargs:
        scale = f32(kwargs["resize_x"]) / f32(w)
        want = (int(np.floor(f32(h) * scale + f32(0.5))), kwargs["resize_x"])
    else:
        scale = min(f32(40) / f32(h), f32(50) / f32(w))
        want = tuple(int(np.floor(f32(s) * scale + f32(0.5))) if f32(t) / f32(s) != scale else t
                     for s, t in ((h, 40), (w, 50)))
    x = ndd.as_tensor(np.zeros((h, w, 3), np.uint8), layout="HWC")
    assert ndd.resize(x, **kwargs).shape == (*want, 3)
    b = ndd.as_batch([np.zeros((h, w, 3), np.uint8), np.zeros((27, 64, 3), np.uint8)], layout="HWC")
    assert ndd.resize(b, **kwargs).shape[0] == (*want, 3)
