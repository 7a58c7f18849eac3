"""The whole-batch kernels against their per-sample paths.

* rotate / warp_affine: one ``cv2.remap`` over a mosaic of the batch (``_warp._mosaic_warp``)
  against one ``cv2.warpAffine`` per sample. Documented difference (``_warp`` docstring): the
  mosaic coordinate carries the tile offset, so it is rounded to float32 at a coarser step;
  uint8 LINEAR results differ by at most 1 grey level (in ~1 pixel in 2000), float32 by
  ~1e-5 relative; NN picks the same pixel except, in ~1 pixel in a million, when the source
  coordinate lies within float32 rounding of a half pixel.
* crop_mirror_normalize: one multiply-add over the dense batch against the per-sample loop,
  bit for bit.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import ndd
from ndd import types
from ndd_ops_cpu import _normalize, _warp


def _run(fn, *args, **kw):
    with ndd.EvalMode.sync_cpu:
        return [np.asarray(t) for t in fn(*args, **kw)]


def _spy(monkeypatch, mod, name):
    calls = []
    orig = getattr(mod, name)

    def spy(*a, **k):
        out = orig(*a, **k)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(mod, name, spy)
    return calls


def _compare(out, ref, dtype, interp):
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == r.dtype
    o = np.concatenate([x.ravel() for x in out]).astype(np.float64)
    r = np.concatenate([x.ravel() for x in ref]).astype(np.float64)
    d = np.abs(o - r)
    if interp == types.INTERP_NN:
        assert (d > 0).mean() <= 1e-4  # only coordinates within float32 rounding of a half pixel
    elif dtype == np.uint8:
        assert d.max() <= 1  # the documented +-1 (float32 coordinate rounding)
        assert (d > 0).mean() < 0.01
    else:
        assert d.max() <= 0.02  # values 0..255: ~1e-4 relative


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_NN])
@pytest.mark.parametrize("fill", [0.0, 7.6, 300.0, None])
@pytest.mark.parametrize("keep_size", [True, False])
@pytest.mark.parametrize("shape", [(64, 28, 28, 1), (9, 31, 23, 3), (5, 17, 9, None), (3, 20, 12, 4)])
def test_rotate_mosaic_matches_per_sample(monkeypatch, rng, dtype, interp, fill, keep_size, shape):
    n, h, w, c = shape
    imgs = rng.integers(0, 256, (n, h, w) + ((c,) if c else ())).astype(dtype)
    angles = rng.uniform(-180, 180, n).astype(np.float32)
    angles[:3] = [0, 90, 180]
    kw = dict(keep_size=keep_size, interp_type=interp)
    if fill is not None:
        kw["fill_value"] = fill
    batch, ang = ndd.batch(list(imgs)), ndd.batch(list(angles))
    used = _spy(monkeypatch, _warp, "_batch_warp")
    out = _run(ndd.rotate, batch, angle=ang, **kw)
    assert used == [True]  # the one-remap path ran
    monkeypatch.setattr(_warp, "_MOSAIC_MAX_PIXELS", 0)
    ref = _run(ndd.rotate, batch, angle=ang, **kw)
    assert used == [True, False]
    _compare(out, ref, dtype, interp)


def test_rotate_mosaic_right_angles_exact(rng):
    imgs = rng.integers(0, 256, (6, 10, 20, 3), dtype=np.uint8)
    angles = np.array([0, 90, 180, -90, 270, 0], np.float32)
    out = _run(ndd.rotate, ndd.batch(list(imgs)), angle=ndd.batch(list(angles)))
    for img, a, o in zip(imgs, angles, out):
        np.testing.assert_array_equal(o, np.rot90(img, int(a) // 90))


def test_rotate_mnist_loop_dense_input(monkeypatch, rng):
    """The benchmark's call: a dense uint8 (64, 28, 28, 1) batch, small angles, fill 0."""
    imgs = rng.integers(0, 256, (64, 28, 28, 1), dtype=np.uint8)
    angles = rng.uniform(-7.5, 7.5, 64).astype(np.float32)
    batch = ndd.as_batch(imgs, layout="HWC")
    out = _run(ndd.rotate, batch, angle=ndd.batch(list(angles)), keep_size=True, fill_value=0)
    monkeypatch.setattr(_warp, "_MOSAIC_MAX_PIXELS", 0)
    ref = _run(ndd.rotate, batch, angle=ndd.batch(list(angles)), keep_size=True, fill_value=0)
    _compare(out, ref, np.uint8, types.INTERP_LINEAR)


@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_NN])
@pytest.mark.parametrize("fill", [0.0, None])
def test_warp_affine_mosaic_matches_per_sample(monkeypatch, rng, interp, fill):
    n = 12
    imgs = rng.integers(0, 256, (n, 24, 30, 3), dtype=np.uint8)  # under _MOSAIC_MAX_PIXELS
    mats = []
    for i in range(n):  # rotations, shears, 3x zooms out (coordinates far outside: clamped)
        s = 3.0 if i % 3 == 0 else 1.0
        m = rng.normal(0, 0.3, (2, 3)) + [[s, 0, 0], [0, s, 0]]
        m[:, 2] = rng.uniform(-8, 8, 2)
        mats.append(m.astype(np.float32).ravel())
    kw = dict(interp_type=interp, size=(26, 22))
    if fill is not None:
        kw["fill_value"] = fill
    batch, mb = ndd.batch(list(imgs)), ndd.batch(mats)
    used = _spy(monkeypatch, _warp, "_batch_warp")
    out = _run(ndd.warp_affine, batch, matrix=mb, **kw)
    monkeypatch.setattr(_warp, "_MOSAIC_MAX_PIXELS", 0)
    ref = _run(ndd.warp_affine, batch, matrix=mb, **kw)
    assert used == [True, False]
    _compare(out, ref, np.uint8, interp)


def test_rotate_large_and_ragged_batches_take_per_sample_path(monkeypatch, rng):
    used = _spy(monkeypatch, _warp, "_batch_warp")
    big = rng.integers(0, 256, (2, 64, 64, 1), dtype=np.uint8)
    _run(ndd.rotate, ndd.as_batch(big, layout="HWC"), angle=10.0)
    assert used == [False]
    used.clear()
    imgs = [rng.integers(0, 256, (10, 20, 3), dtype=np.uint8), rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)]
    out = _run(ndd.rotate, ndd.batch(imgs), angle=ndd.batch([np.float32(90), np.float32(180)]))
    assert used == [False]
    np.testing.assert_array_equal(out[0], np.rot90(imgs[0]))
    np.testing.assert_array_equal(out[1], np.rot90(imgs[1], 2))


# -- crop_mirror_normalize --------------------------------------------------------------

@pytest.mark.parametrize("layout,out_layout,pad_output", [
    (lay, out, pad) for lay, out in [("HWC", "CHW"), ("HWC", "HWC"), ("CHW", "HWC"), ("HW", "HW")]
    for pad in ([False, True] if "C" in lay else [False])  # pad_output needs a channel dimension
])
@pytest.mark.parametrize("mirror", ["none", "all", "mixed"])
@pytest.mark.parametrize("dtype", [ndd.float32, ndd.float16, ndd.uint8])
@pytest.mark.parametrize("crop", [None, (20, 16)])
def test_cmn_dense_is_bit_identical(monkeypatch, rng, layout, out_layout, mirror, pad_output, dtype, crop):
    n = 10
    c = 3 if "C" in layout else None
    imgs = rng.integers(0, 256, (n, 28, 24) + ((c,) if c else ()), dtype=np.uint8)
    if layout == "CHW":
        imgs = np.ascontiguousarray(imgs.transpose(0, 3, 1, 2))
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255] if c else [0.1307 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255] if c else [0.3081 * 255]
    mir = {"none": 0, "all": 1, "mixed": ndd.batch([np.int32(i % 3 == 0) for i in range(n)])}[mirror]
    kw = dict(dtype=dtype, output_layout=out_layout, mean=mean, std=std, mirror=mir, pad_output=pad_output,
              scale=1.5, shift=0.25)
    if crop:
        kw.update(crop=crop, crop_pos_x=0.3, crop_pos_y=0.7)
    batch = ndd.as_batch(imgs, layout=layout)
    used = _spy(monkeypatch, _normalize, "_cmn_dense")
    out = _run(ndd.crop_mirror_normalize, batch, **kw)
    monkeypatch.setattr(_normalize, "_cmn_dense", lambda *a, **k: None)
    ref = _run(ndd.crop_mirror_normalize, batch, **kw)
    assert used == [True]
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        np.testing.assert_array_equal(o, r)


def test_cmn_per_sample_mean_and_out_of_bounds_fall_back(monkeypatch, rng):
    imgs = rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8)
    used = _spy(monkeypatch, _normalize, "_cmn_dense")
    means = ndd.batch([np.full(3, float(i), np.float32) for i in range(4)])
    out = _run(ndd.crop_mirror_normalize, ndd.as_batch(imgs, layout="HWC"), mean=means, std=[2.0])
    np.testing.assert_allclose(out[2], ((imgs[2] - 2.0) / 2.0).transpose(2, 0, 1), rtol=1e-6)
    _run(ndd.crop_mirror_normalize, ndd.as_batch(imgs, layout="HWC"), crop=(20, 20),
         out_of_bounds_policy="pad")
    assert used == [False, False]


@pytest.mark.parametrize("n,c", [(42, 3), (43, 3), (64, 3), (128, 1), (129, 1), (64, 1)])
def test_resize_stacked_path_channel_limit(rng, n, c):
    imgs = rng.integers(0, 256, (n, 28, 28, c), dtype=np.uint8)
    out = ndd.resize(ndd.as_batch(imgs, layout="HWC"), size=[14, 14], interp_type=ndd.types.INTERP_LINEAR,
                     antialias=False)
    got = np.stack([np.asarray(t) for t in out])
    ref = np.stack([cv2.resize(im, (14, 14), interpolation=cv2.INTER_LINEAR).reshape(14, 14, c) for im in imgs])
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 1
