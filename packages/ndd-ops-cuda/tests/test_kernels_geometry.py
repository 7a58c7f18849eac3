"""GPU crop, flip, rotate, warp_affine, resize and random_resized_crop against the CPU ops.

Tolerances: crop and flip exact. rotate / warp_affine (grid_sample in float32 against
OpenCV): uint8 within 1 level in at most 2 % of the pixels, float32 within 1e-4.
resize / random_resized_crop (the CPU's filter taps, Pillow's for its antialiased
filters): uint8 within 1 level, float32 within 1e-4.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ndd
from ndd.types import DALIInterpType

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, assert_equal, batch, rand_images, run_both, smooth_images  # noqa: E402

UNIFORM_RGB = [(24, 30, 3)] * 5
RAGGED_RGB = [(24, 30, 3), (17, 40, 3), (33, 21, 3)]
GRAY = [(28, 28)] * 6


# -- crop and flip ------------------------------------------------------------------------


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB, GRAY])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_crop(shapes, dtype):
    b = batch(rand_images(1, shapes, dtype))
    assert_equal(*run_both(lambda x: ndd.crop(x, crop=(10, 12), crop_pos_x=0.3, crop_pos_y=0.8), b)[:2])


def test_crop_per_sample_window_and_padding():
    b = batch(rand_images(2, UNIFORM_RGB))
    pos = ndd.as_batch([np.float32(v) for v in (0.0, 0.25, 0.5, 0.75, 1.0)])
    assert_equal(*run_both(lambda x: ndd.crop(x, crop=(10, 12), crop_pos_x=pos), b)[:2])
    for policy in ("pad", "trim_to_shape"):
        fn = lambda x, p=policy: ndd.crop(x, crop=(40, 12), crop_pos_y=0.2, out_of_bounds_policy=p,  # noqa: E731
                                          fill_values=(7, 8, 9))
        assert_equal(*run_both(fn, b)[:2])
    g = batch(rand_images(3, RAGGED_RGB, np.float32))
    assert_equal(*run_both(lambda x: ndd.crop(x, crop=(30, 30), out_of_bounds_policy="pad",
                                              fill_values=(0.5,), dtype=ndd.float32), g)[:2])


def test_crop_cast_to_uint8_saturates():
    b = batch([x * 600 - 100 for x in rand_images(4, UNIFORM_RGB, np.float32)])
    assert_equal(*run_both(lambda x: ndd.crop(x, crop=(10, 10), dtype=ndd.uint8), b)[:2])


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB, GRAY])
def test_flip(shapes):
    b = batch(rand_images(5, shapes))
    n = len(shapes)
    hor = ndd.as_batch([np.int32(i % 2) for i in range(n)])
    ver = ndd.as_batch([np.int32(i % 3 == 0) for i in range(n)])
    assert_equal(*run_both(lambda x: ndd.flip(x), b)[:2])
    assert_equal(*run_both(lambda x: ndd.flip(x, horizontal=hor, vertical=ver), b)[:2])
    assert_equal(*run_both(lambda x: ndd.flip(x, horizontal=0, vertical=1), b)[:2])


@pytest.mark.parametrize("shapes", [GRAY, [(9, 12), (14, 5)], UNIFORM_RGB])
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_flip_of_unsigned_types_torch_cannot_flip(shapes, dtype):
    """torch flips no uint16/32/64 along their last dimension (it raised: the horizontal flip
    of an HW image); they flip as the signed type of their width."""
    b = batch([(x.astype(np.uint64) * 2**40 + 65000).astype(dtype) for x in rand_images(6, shapes)])
    hor = ndd.as_batch([np.int32(i % 2) for i in range(len(shapes))])
    assert_equal(*run_both(lambda x: ndd.flip(x, horizontal=hor, vertical=1), b)[:2])


@pytest.mark.parametrize("angle", [90, 180, -90])
def test_right_angles_read_whole_pixels_as_on_the_cpu(angle):
    """At multiples of 90 degrees a bilinear warp reads each pixel as it is (NN): a NaN or
    huge pixel does not leak into its neighbours through zero weights (it did, with the
    border repeated), and the result is np.rot90 on both devices."""
    x = np.array([[2.0, np.nan, 1e30], [3.0, 1.0, -7.5]], np.float32)
    for fill in (None, float("nan"), 0.0):
        ref, got, _ = run_both(lambda b, f=fill: ndd.rotate(b, angle=angle, fill_value=f), batch([x, x]))
        for r, g in zip(ref, got):
            np.testing.assert_array_equal(g, np.rot90(x, (angle // 90) % 4))
            np.testing.assert_array_equal(r, g)


@pytest.mark.parametrize("empty", [(0, 5, 3), (4, 0, 3)])
def test_images_without_pixels_as_on_the_cpu(empty):
    """An image with no rows or columns: the padding crops fill the whole window (the GPU
    gather raised IndexError), per-pixel and filtering operators give it back empty (the GPU
    blur raised), as the CPU does."""
    b = batch([np.zeros(empty, np.uint8), np.full((4, 5, 3), 9, np.uint8)])
    for fn in (lambda x: ndd.crop(x, crop=(2, 2), out_of_bounds_policy="pad", fill_values=(1, 2, 3)),
               lambda x: ndd.crop_mirror_normalize(x, crop=(2, 2), out_of_bounds_policy="pad",
                                                   dtype=ndd.float32, fill_values=(1, 2, 3), mirror=1),
               lambda x: ndd.gaussian_blur(x, sigma=1.0), lambda x: ndd.color_twist(x, hue=10.0),
               lambda x: ndd.hsv(x, saturation=0.5), lambda x: ndd.flip(x, horizontal=1)):
        assert_equal(*run_both(fn, b)[:2])


# -- rotate and warp_affine ------------------------------------------------------------------


def _warp_close(ref, got, dtype):
    if np.dtype(dtype) == np.uint8:
        assert_close(ref, got, atol=1, max_frac=0.02)
    else:
        assert_close(ref, got, atol=1e-4)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, GRAY, RAGGED_RGB, [(28, 28, 1)] * 64])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("fill", [None, 0.0, 0.3])
def test_rotate_linear(shapes, dtype, fill):
    b = batch(smooth_images(6, shapes, dtype))
    angles = ndd.as_batch([np.float32(a) for a in np.linspace(-40, 95, len(shapes))])
    if fill is not None and np.dtype(dtype) == np.uint8:
        fill = fill * 255
    ref, got, _ = run_both(lambda x: ndd.rotate(x, angle=angles, fill_value=fill), b)
    _warp_close(ref, got, dtype)
    ref, got, _ = run_both(lambda x: ndd.rotate(x, angle=17.5, keep_size=True, fill_value=fill), b)
    _warp_close(ref, got, dtype)


def test_rotate_nearest_size_and_dtype():
    b = batch(smooth_images(7, UNIFORM_RGB))
    fn = lambda x: ndd.rotate(x, angle=90.0, interp_type=DALIInterpType.INTERP_NN)  # noqa: E731
    assert_equal(*run_both(fn, b)[:2])
    fn = lambda x: ndd.rotate(x, angle=30.0, size=(20, 26), dtype=ndd.float32)  # noqa: E731
    ref, got, _ = run_both(fn, b)  # uint8 in, float out: computed in float on both (not rounded)
    assert_close(ref, got, atol=0.02)
    assert any((np.abs(r - np.round(r)) > 0.05).any() for r in ref)


NN = DALIInterpType.INTERP_NN


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("kwargs", [
    {"angle": 0.0, "size": (4, 6)},  # an odd difference of sizes: every source row on a half pixel
    {"angle": 90.0, "keep_size": True},  # a non-square image: half pixels on both axes
    {"angle": 270.0, "keep_size": True, "fill_value": 7.0},
    {"angle": 180.0, "size": (8, 7), "fill_value": 3.0},
])
def test_warp_nearest_takes_opencvs_pixel_on_half_pixels(dtype, kwargs):
    """NN picks the pixel OpenCV picks (its float32 coordinate rounded half to even), also
    where the source coordinate is exactly on a half pixel: exact equality. (Not at angles
    such as 30 degrees, whose ties come out of rounded sines: there OpenCV's warpAffine rounds
    one lane of its vector loop otherwise, and the CPU kernel's two paths differ too.)"""
    b = batch(rand_images(31, [(5, 6, 1), (7, 4, 3), (6, 9, 3)] if "size" in kwargs else [(5, 8, 3)] * 3, dtype))
    assert_equal(*run_both(lambda x: ndd.rotate(x, interp_type=NN, **kwargs), b)[:2])
    m = (1.0, 0.0, 0.5, 0.0, 1.0, -1.5)
    assert_equal(*run_both(lambda x: ndd.warp_affine(x, matrix=m, interp_type=NN), b)[:2])


@pytest.mark.parametrize("interp", [NN, DALIInterpType.INTERP_LINEAR])
def test_warp_nan_fill_stays_outside_the_image(interp):
    """A NaN fill value: float pixels outside the image are NaN and those inside are not, as on
    the CPU; uint8 images store it as 0 (the CPU's fill), not an error."""
    fn = lambda x: ndd.rotate(x, angle=30.0, fill_value=float("nan"), interp_type=interp)  # noqa: E731
    ref, got, _ = run_both(fn, batch([np.full((6, 8, 1), 0.5, np.float32)] * 2))
    assert all(np.array_equal(np.isnan(r), np.isnan(g)) for r, g in zip(ref, got))
    assert 0 < sum(int(np.isnan(r).sum()) for r in ref) < sum(r.size for r in ref)
    assert_close([np.nan_to_num(r) for r in ref], [np.nan_to_num(g) for g in got], atol=1e-4)
    _warp_close(*run_both(fn, batch(smooth_images(32, [(6, 8, 1)] * 2)))[:2], np.uint8)


@pytest.mark.parametrize("fill, n", [(1e10, 1), (1e10, 2), (-1e10, 1), (300.0, 1)])
def test_warp_uint8_fill_beyond_the_range_saturates(fill, n):
    """A uint8 fill value out of range is saturated on both devices and on both CPU paths
    (one sample: OpenCV's warpAffine; several small ones: the remap mosaic)."""
    b = batch([np.full((4, 5, 1), 100, np.uint8)] * n)
    ref, got, _ = run_both(lambda x: ndd.warp_affine(x, matrix=(1, 0, 2, 0, 1, 0), fill_value=fill), b)
    assert_equal(ref, got)
    assert (ref[0][:, -2:] == (255 if fill > 0 else 0)).all()


@pytest.mark.parametrize("size", [(0, 3), (4, 0), (0, 0)])
def test_warp_to_an_empty_size(size):
    b = batch(rand_images(33, [(5, 7, 3)] * 2))
    for fn in (lambda x: ndd.rotate(x, angle=3.0, size=size),  # noqa: B023
               lambda x: ndd.warp_affine(x, matrix=(1, 0, 0, 0, 1, 0), size=size)):  # noqa: B023
        ref, got, _ = run_both(fn, b)
        assert [r.shape for r in ref] == [g.shape for g in got] == [size + (3,)] * 2


@pytest.mark.parametrize("interp", [NN, DALIInterpType.INTERP_LINEAR])
def test_warp_of_an_empty_image_is_refused_by_name(interp):
    b = batch([np.zeros((4, 5, 3), np.uint8), np.zeros((0, 5, 3), np.uint8)]).gpu()
    with pytest.raises(ValueError) as info:
        ndd.warp_affine(b, matrix=(1, 0, 0, 0, 1, 0), size=(3, 4), interp_type=interp).evaluate()
    assert "sample 1 is an empty image (0x5 pixels)" in f"{info.value} | {info.value.__cause__}"


def test_rotate_two_channels_like_one():
    """Two-channel uint8 images warp as their channels do one by one (OpenCV's own 2-channel
    path interpolates on a coarser grid, up to 5 levels off)."""
    b = batch(rand_images(34, [(40, 50, 2)] * 2))
    fn = lambda x: ndd.rotate(x, angle=30.0, fill_value=0)  # noqa: E731
    ref, got, _ = run_both(fn, b)
    _warp_close(ref, got, np.uint8)
    one = [ndd.rotate(batch([np.ascontiguousarray(x[..., k:k + 1]) for x in rand_images(34, [(40, 50, 2)] * 2)]),
                      angle=30.0, fill_value=0) for k in (0, 1)]
    per_channel = [np.concatenate([np.asarray(one[0].tensors[i]), np.asarray(one[1].tensors[i])], axis=2)
                   for i in range(2)]
    assert_equal(ref, per_channel)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, GRAY, RAGGED_RGB])
def test_warp_affine(shapes):
    b = batch(smooth_images(8, shapes))
    m = (0.9, 0.2, 1.5, -0.1, 1.1, -2.0)
    _warp_close(*run_both(lambda x: ndd.warp_affine(x, matrix=m), b)[:2], np.uint8)
    _warp_close(*run_both(lambda x: ndd.warp_affine(x, matrix=m, inverse_map=False, fill_value=9,
                                                    size=(20, 35)), b)[:2], np.uint8)
    mats = ndd.as_batch([np.array(m, np.float32) * (1 + 0.05 * i) for i in range(len(shapes))])
    _warp_close(*run_both(lambda x: ndd.warp_affine(x, matrix=mats), b)[:2], np.uint8)
    mtx = ndd.as_batch([np.array(m, np.float32).reshape(2, 3)] * len(shapes))
    ref = ndd.warp_affine(b, mtx)
    got = ndd.warp_affine(b.gpu(), mtx.gpu())
    _warp_close([np.asarray(t) for t in ref], [np.asarray(t) for t in got.cpu()], np.uint8)
    got = ndd.warp_affine(b.gpu(), mtx)  # matrices on the CPU, images on the GPU
    _warp_close([np.asarray(t) for t in ref], [np.asarray(t) for t in got.cpu()], np.uint8)


@pytest.mark.parametrize("n, oh, ow", [(4, 28, 28), (3, 17, 40), (2, 1, 9), (1, 6, 1)])
def test_affine_grid_with_the_cached_base_grid_is_torchs(n, oh, ow):
    """rotate / warp_affine build affine_grid's grid from a cached base grid: bit for bit torch's."""
    import torch
    import torch.nn.functional as F

    from ndd_ops_cuda.kernels._geometry import _affine_grid

    dev = torch.device("cuda" if torch.cuda.is_available() and os.environ.get("NDD_CUDA_EMULATE") != "cpu"
                       else "cpu")
    theta = torch.from_numpy(np.random.default_rng(n * oh + ow).normal(size=(n, 2, 3)).astype(np.float32)).to(dev)
    want = F.affine_grid(theta, [n, 1, oh, ow], align_corners=False)
    for _ in range(2):  # made, then from the cache
        assert torch.equal(_affine_grid(theta, n, oh, ow, None), want)


# -- resize and random_resized_crop ---------------------------------------------------------

FILTERS = [DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC,
           DALIInterpType.INTERP_LANCZOS3, DALIInterpType.INTERP_TRIANGULAR, DALIInterpType.INTERP_GAUSSIAN]


def _resize_close(ref, got, dtype):
    assert_close(ref, got, atol=1 if np.dtype(dtype) == np.uint8 else 1e-4)


@pytest.mark.parametrize("interp", FILTERS)
@pytest.mark.parametrize("size", [(40, 17), (12, 9), (50, 60)])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_filters(interp, size, antialias):
    b = batch(smooth_images(9, UNIFORM_RGB))
    fn = lambda x: ndd.resize(x, size=size, interp_type=interp, antialias=antialias)  # noqa: E731
    _resize_close(*run_both(fn, b)[:2], np.uint8)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint16, np.uint32, np.int64])
def test_nearest_neighbour_resize_copies_pixels_exactly(dtype):
    """No pass through float32: values float32 cannot hold come out unchanged."""
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    make = (lambda s: rng.integers(info.min, info.max, s, dtype=dtype)) if info else (lambda s: rng.random(s))
    b = batch([make(s).astype(dtype) for s in [(7, 9, 3), (7, 9, 3), (5, 4, 3)]])
    nn = DALIInterpType.INTERP_NN
    for fn in (lambda x: ndd.resize(x, size=(11, 6), interp_type=nn),
               lambda x: ndd.random_resized_crop(x, size=(4, 4), interp_type=nn, rng=ndd.random.RNG(seed=1))):
        ref, got, _ = run_both(fn, b)
        assert_equal(ref, got)


@pytest.mark.parametrize("mag", [DALIInterpType.INTERP_CUBIC, DALIInterpType.INTERP_NN])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_filter_per_axis(mag, antialias):
    """One axis shrinks (min_filter LINEAR), the other grows with its own mag_filter."""
    b = batch(smooth_images(13, RAGGED_RGB, np.float32))
    fn = lambda x: ndd.resize(x, size=(12, 70), mag_filter=mag, antialias=antialias)  # noqa: E731
    _resize_close(*run_both(fn, b)[:2], np.float32)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB, GRAY])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_size_arguments(shapes, dtype):
    b = batch(smooth_images(10, shapes, dtype))
    for kw in ({"resize_shorter": 20}, {"resize_longer": 50}, {"resize_x": 33},
               {"size": (30, 20), "dtype": ndd.float32}, {"size": (16, 16), "mode": "not_larger"},
               {"size": (25, 18), "roi_start": (2.5, 30), "roi_end": (20, 3.0)},
               {"size": (14, 14), "roi_start": (0.1, 0.2), "roi_end": (0.7, 0.9), "roi_relative": True}):
        ref, got, _ = run_both(lambda x: ndd.resize(x, **kw), b)  # noqa: B023
        _resize_close(ref, got, dtype)


def test_resize_per_sample_sizes_and_attrs():
    b = batch(smooth_images(11, RAGGED_RGB))
    sizes = ndd.as_batch([np.array(s, np.float32) for s in ((20, 20), (10, 31), (20, 20))])
    _resize_close(*run_both(lambda x: ndd.resize(x, size=sizes), b)[:2], np.uint8)
    ref_img, ref_attrs = ndd.resize(b, size=(18, 22), save_attrs=True)
    img, attrs = ndd.resize(b.gpu(), size=(18, 22), save_attrs=True)
    assert attrs.device == ndd.Device("gpu:0")
    _resize_close([np.asarray(t) for t in ref_img], [np.asarray(t) for t in img.cpu()], np.uint8)
    assert_equal([np.asarray(t) for t in ref_attrs], [np.asarray(t) for t in attrs.cpu()])


# Sizes where Pillow 13+ goes rows first (the height shrinks by more than twice the width's
# rows) and others where it goes columns first: on uint8 noise, rounded between the passes,
# the two orders differ by up to tens of levels, so the GPU must take Pillow's.
PASS_ORDER_CASES = [((34, 14, 1), (13, 23)), ((30, 30, 3), (10, 60)), ((60, 20, 3), (20, 12)),
                    ((23, 15, 1), (8, 32)), ((40, 40, 3), (30, 12)), ((20, 50, 3), (35, 22))]


@pytest.mark.parametrize("shape, size", PASS_ORDER_CASES)
@pytest.mark.parametrize("interp, antialias", [(DALIInterpType.INTERP_LANCZOS3, True),
                                               (DALIInterpType.INTERP_CUBIC, False),
                                               (DALIInterpType.INTERP_LINEAR, True)])
def test_resize_uint8_noise_takes_pillows_order_of_passes(shape, size, interp, antialias):
    b = batch(rand_images(21, [shape, shape]))
    fn = lambda x: ndd.resize(x, size=size, interp_type=interp, antialias=antialias)  # noqa: E731
    _resize_close(*run_both(fn, b)[:2], np.uint8)


def test_random_resized_crop_uint8_noise_takes_pillows_order_of_passes():
    b = batch(rand_images(22, [(60, 24, 3)] * 6 + [(30, 70, 3)] * 2))
    for seed in range(4):
        kw = {"size": (12, 20), "random_area": [0.3, 1.0], "interp_type": DALIInterpType.INTERP_CUBIC}
        ref = ndd.random_resized_crop(b, rng=ndd.random.RNG(seed=seed), **kw)
        got = ndd.random_resized_crop(b.gpu(), rng=ndd.random.RNG(seed=seed), **kw)
        _resize_close([np.asarray(t) for t in ref], [np.asarray(t) for t in got.cpu()], np.uint8)


@pytest.mark.parametrize("shapes", [UNIFORM_RGB, RAGGED_RGB])
def test_random_resized_crop_same_windows(shapes):
    b = batch(smooth_images(12, shapes))
    ref = ndd.random_resized_crop(b, size=(16, 20), rng=ndd.random.RNG(seed=5))
    got = ndd.random_resized_crop(b.gpu(), size=(16, 20), rng=ndd.random.RNG(seed=5))
    _resize_close([np.asarray(t) for t in ref], [np.asarray(t) for t in got.cpu()], np.uint8)
