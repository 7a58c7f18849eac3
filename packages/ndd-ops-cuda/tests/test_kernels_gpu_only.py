"""The operators DALI runs only on the GPU (jitter, experimental.median_blur / dilate / erode /
remap / resize) against independent references: OpenCV's medianBlur, dilate, erode and remap
(which CV-CUDA's and NPP's kernels follow) and NumPy re-derivations for what OpenCV lacks
(rectangular median windows, other types and border modes).

Tolerances: median blur, dilation, erosion and nearest-neighbour remap exact; bilinear remap
within 1e-5 of OpenCV for float32 and 1 level for uint8 (OpenCV rounds its fixed-point
weights; the maps are multiples of 1/32 so that OpenCV's 1/32-pixel grid does not matter);
experimental.resize equal to resize.
"""

from __future__ import annotations

import os
import sys

import cv2
import numpy as np
import pytest

pytest.importorskip("ndd_ops_cpu")

import ndd  # noqa: E402
from ndd import types  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from capture_helpers import assert_same, eager_run, graphed_run, noisy_digits_lmdb  # noqa: E402
from kernel_helpers import batch, rand_images, samples_of  # noqa: E402

FLT_MIN = np.finfo(np.float32).tiny


def gpu_samples(b: ndd.Batch) -> list[np.ndarray]:
    assert b.device == ndd.Device("gpu:0")
    return samples_of(b.cpu())


def numpy_filter(x: np.ndarray, kw: int, kh: int, ax: int, ay: int, mode: str, reduce, fill=None) -> np.ndarray:
    """``reduce`` over the window [y - ay, y - ay + kh) x [x - ax, x - ax + kw) of a 2-D plane,
    the plane extended with np.pad's ``mode`` (or a constant ``fill``)."""
    pads = ((ay, kh - 1 - ay), (ax, kw - 1 - ax))
    ext = np.pad(x, pads, mode="constant", constant_values=fill) if fill is not None else np.pad(x, pads, mode=mode)
    win = np.lib.stride_tricks.sliding_window_view(ext, (kh, kw))
    return reduce(win.reshape(win.shape[:2] + (-1,)), axis=-1).astype(x.dtype)


def each_plane(x: np.ndarray, fn) -> np.ndarray:
    """``fn`` on each (H, W) plane of an HWC image."""
    return np.stack([fn(x[..., c]) for c in range(x.shape[-1])], axis=-1)


# -- device rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda x: ndd.experimental.median_blur(x),
    lambda x: ndd.experimental.dilate(x),
    lambda x: ndd.experimental.erode(x),
    lambda x: ndd.jitter(x),
    lambda x: ndd.experimental.resize(x, size=[4, 4]),
    lambda x: ndd.experimental.remap(x, np.zeros((6, 5), np.float32), np.zeros((6, 5), np.float32)),
])
def test_cpu_inputs_need_the_gpu(call) -> None:
    x = ndd.as_tensor(np.zeros((6, 5, 3), np.uint8), layout="HWC")
    with pytest.raises(ValueError, match=r"runs only on the GPU, but its inputs are on the CPU; move them with "
                                         r"\.gpu\(\) first"):
        call(x)


def test_device_gpu_moves_cpu_inputs() -> None:
    x = rand_images(0, [(9, 7, 3)])[0]
    out = ndd.experimental.median_blur(ndd.as_tensor(x, layout="HWC"), device="gpu")
    assert out.device == ndd.Device("gpu:0")
    np.testing.assert_array_equal(np.asarray(out.cpu()), cv2.medianBlur(x, 3))


# -- median blur -----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [3, 5, 7])
def test_median_blur_matches_opencv(k) -> None:
    imgs = rand_images(1, [(20, 17, 3), (8, 30, 3), (1, 1, 3), (3, 4, 3)])  # ragged, windows past the edges
    got = gpu_samples(ndd.experimental.median_blur(batch(imgs).gpu(), window_size=k))
    for x, g in zip(imgs, got):
        np.testing.assert_array_equal(g, cv2.medianBlur(x, k))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.int32, np.float32])
def test_median_blur_rectangular_windows_and_types(dtype) -> None:
    rng = np.random.default_rng(2)
    imgs = [(rng.random(s) * 1000 - (0 if np.dtype(dtype).kind == "u" else 500)).astype(dtype)
            for s in [(11, 13, 2), (6, 9, 1)]]
    got = gpu_samples(ndd.experimental.median_blur(batch(imgs).gpu(), window_size=[5, 3]))  # width 5, height 3
    for x, g in zip(imgs, got):
        assert g.dtype == x.dtype
        ref = each_plane(x, lambda p: numpy_filter(p, 5, 3, 2, 1, "edge", np.median))
        np.testing.assert_array_equal(g, ref)


@pytest.mark.parametrize("layout,shape", [("HW", (12, 10)), ("CHW", (2, 12, 10)), ("FHWC", (3, 12, 10, 2)),
                                          ("FCHW", (2, 3, 12, 10))])
def test_median_blur_layouts(layout, shape) -> None:
    x = rand_images(3, [shape])[0]
    got = np.asarray(ndd.experimental.median_blur(ndd.as_tensor(x, layout=layout).gpu(), window_size=5).cpu())
    h, w = layout.index("H"), layout.index("W")
    planes = np.moveaxis(x, (h, w), (-2, -1))
    ref = np.stack([cv2.medianBlur(p, 5) for p in planes.reshape((-1,) + planes.shape[-2:])])
    ref = np.moveaxis(ref.reshape(planes.shape), (-2, -1), (h, w))
    np.testing.assert_array_equal(got, ref)


def test_median_blur_per_sample_windows_and_errors() -> None:
    imgs = rand_images(4, [(15, 12, 3)] * 3)
    wins = ndd.as_batch([np.array(w, np.int32) for w in ([3, 3], [5, 5], [1, 1])])
    got = gpu_samples(ndd.experimental.median_blur(batch(imgs).gpu(), window_size=wins))
    for x, g, k in zip(imgs, got, (3, 5, 1)):
        np.testing.assert_array_equal(g, cv2.medianBlur(x, k) if k > 1 else x)
    dense = gpu_samples(ndd.experimental.median_blur(batch(imgs).gpu(), window_size=[5, 3]))  # one call for all
    for x, g in zip(imgs, dense):
        np.testing.assert_array_equal(g, each_plane(x, lambda p: numpy_filter(p, 5, 3, 2, 1, "edge", np.median)))
    g = batch(imgs).gpu()
    with pytest.raises(ValueError, match=r"experimental.median_blur.*'window_size'.*odd.*\[4, 3\]"):
        ndd.experimental.median_blur(g, window_size=[4, 3])
    bad = ndd.as_batch([np.array(w, np.int32) for w in ([3, 3], [2, 2], [3, 3])])
    with pytest.raises(ValueError) as info:
        ndd.experimental.median_blur(g, window_size=bad).evaluate()
    assert "'window_size' takes two positive odd sizes (width, height), got [2, 2] (sample 1)" in str(
        info.value.__cause__)
    with pytest.raises(TypeError, match=r"experimental.median_blur.*input type f64 is not supported"):
        ndd.experimental.median_blur(ndd.as_tensor(np.zeros((4, 4, 1)), layout="HWC").gpu())
    with pytest.raises(ValueError, match=r"experimental.median_blur.*layout"):
        ndd.experimental.median_blur(ndd.as_tensor(np.zeros((4, 4, 4, 4, 1), np.uint8)).gpu())


# -- dilate and erode --------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["dilate", "erode"])
@pytest.mark.parametrize("border", ["constant", "replicate"])
def test_morphology_matches_opencv(op, border) -> None:
    imgs = rand_images(5, [(17, 14, 3), (9, 21, 1), (2, 3, 4)])
    cv_border = cv2.BORDER_CONSTANT if border == "constant" else cv2.BORDER_REPLICATE
    fn = getattr(ndd.experimental, op)
    for size, anchor, it in (([3, 3], [-1, -1], 1), ([5, 3], [1, 0], 1), ([3, 5], [-1, -1], 2),
                             ([4, 2], [3, 1], 3), ([1, 1], [-1, -1], 1)):
        got = gpu_samples(fn(batch(imgs).gpu(), mask_size=size, anchor=anchor, iterations=it, border_mode=border))
        kernel = np.ones((size[1], size[0]), np.uint8)
        cv_anchor = tuple(s // 2 if a == -1 else a for a, s in zip(anchor, size))
        for x, g in zip(imgs, got):
            ref = getattr(cv2, op)(x, kernel, anchor=cv_anchor, iterations=it, borderType=cv_border)
            np.testing.assert_array_equal(g, ref.reshape(x.shape), err_msg=f"{size} {anchor} {it}")


@pytest.mark.parametrize("op", ["dilate", "erode"])
@pytest.mark.parametrize("border,np_mode", [("replicate", "edge"), ("reflect", "symmetric"),
                                            ("reflect_101", "reflect"), ("wrap", "wrap")])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_morphology_border_modes_and_types(op, border, np_mode, dtype) -> None:
    rng = np.random.default_rng(6)
    imgs = [(rng.random(s) * 60000).astype(dtype) for s in [(10, 12, 1), (7, 5, 3)]]
    got = gpu_samples(getattr(ndd.experimental, op)(batch(imgs).gpu(), mask_size=[5, 3], anchor=[3, 1],
                                                    border_mode=border))
    reduce = np.max if op == "dilate" else np.min
    for x, g in zip(imgs, got):
        np.testing.assert_array_equal(g, each_plane(x, lambda p: numpy_filter(p, 5, 3, 3, 1, np_mode, reduce)))


def test_float_morphology_starts_from_cv_cudas_identity_values() -> None:
    """CV-CUDA's float32 dilation starts from numeric_limits<float>::min(), the smallest positive
    float, which also fills a constant border: negative results become it. Its erosion starts
    from the largest finite float: +inf becomes it."""
    x = np.full((5, 6, 1), -3.0, np.float32)
    x[2, 3] = 7.0
    x[0, 0] = np.inf
    d = np.asarray(ndd.experimental.dilate(ndd.as_tensor(x, layout="HWC").gpu()).cpu())
    ref = numpy_filter(x[..., 0], 3, 3, 1, 1, "", np.max, fill=FLT_MIN)
    np.testing.assert_array_equal(d[..., 0], np.maximum(ref, FLT_MIN))
    assert d[4, 0, 0] == FLT_MIN and d[2, 3, 0] == 7.0
    e = np.asarray(ndd.experimental.erode(ndd.as_tensor(-x, layout="HWC").gpu()).cpu())
    np.testing.assert_array_equal(e[..., 0], numpy_filter(-x[..., 0], 3, 3, 1, 1, "", np.min, fill=np.inf))
    inf = np.full((4, 5, 2), np.inf, np.float32)
    e = np.asarray(ndd.experimental.erode(ndd.as_tensor(inf, layout="HWC").gpu(), border_mode="replicate").cpu())
    assert (e == np.finfo(np.float32).max).all()


def test_morphology_per_sample_arguments_and_errors() -> None:
    imgs = rand_images(7, [(12, 11, 3)] * 2)
    sizes = ndd.as_batch([np.array(s, np.int32) for s in ([3, 3], [5, 1])])
    anchors = ndd.as_batch([np.array(a, np.int32) for a in ([0, 0], [-1, -1])])
    got = gpu_samples(ndd.experimental.erode(batch(imgs).gpu(), mask_size=sizes, anchor=anchors))
    np.testing.assert_array_equal(got[0], cv2.erode(imgs[0], np.ones((3, 3), np.uint8), anchor=(0, 0)))
    np.testing.assert_array_equal(got[1], cv2.erode(imgs[1], np.ones((1, 5), np.uint8)))
    dense = gpu_samples(ndd.experimental.dilate(batch(imgs).gpu(), mask_size=[2, 4], iterations=2))  # one call
    for x, g in zip(imgs, dense):
        np.testing.assert_array_equal(g, cv2.dilate(x, np.ones((4, 2), np.uint8), iterations=2))
    zero = gpu_samples(ndd.experimental.dilate(batch(imgs).gpu(), iterations=0))  # a copy, as CV-CUDA
    np.testing.assert_array_equal(zero[0], imgs[0])
    g = batch(imgs).gpu()
    with pytest.raises(ValueError, match=r"experimental.dilate.*'anchor'.*\[3, 0\]"):
        ndd.experimental.dilate(g, anchor=[3, 0])
    bad = ndd.as_batch([np.array(a, np.int32) for a in ([0, 0], [0, 5])])
    with pytest.raises(ValueError) as info:
        ndd.experimental.dilate(g, anchor=bad).evaluate()
    assert "'anchor' must be (x, y) inside the mask of size [3, 3]" in str(info.value.__cause__)
    with pytest.raises(ValueError, match=r"experimental.erode.*'mask_size'"):
        ndd.experimental.erode(g, mask_size=[0, 3])
    with pytest.raises(ValueError, match=r"'iterations'"):
        ndd.experimental.erode(g, iterations=-1)
    with pytest.raises(ValueError, match=r"'border_mode'.*'reflect_101'"):
        ndd.experimental.erode(g, border_mode="mirror")
    with pytest.raises(TypeError, match=r"experimental.erode.*i16"):
        ndd.experimental.erode(ndd.as_tensor(np.zeros((4, 4, 1), np.int16), layout="HWC").gpu())


# -- remap -------------------------------------------------------------------------------------------


def random_maps(seed: int, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Maps reaching past every edge, on a 1/32-pixel grid, never on a half pixel (where
    rounding to the nearest pixel is a tie)."""
    rng = np.random.default_rng(seed)
    mx, my = rng.uniform(-2, w + 1, (h, w)), rng.uniform(-2, h + 1, (h, w))
    mx, my = (np.round(m * 32) / 32 for m in (mx, my))
    mx[np.mod(mx, 0.5) == 0] += 1 / 32
    my[np.mod(my, 0.5) == 0] += 1 / 32
    return mx.astype(np.float32), my.astype(np.float32)


@pytest.mark.parametrize("origin", ["center", "corner"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.float32])
def test_remap_matches_opencv(origin, dtype) -> None:
    rng = np.random.default_rng(8)
    shapes = [(13, 17, 3), (6, 4, 1)]
    imgs = [(rng.random(s) * 1000 - (0 if np.dtype(dtype).kind == "u" else 300)).astype(dtype) for s in shapes]
    maps = [random_maps(i, *s[:2]) for i, s in enumerate(shapes)]
    shift = 0.5 if origin == "corner" else 0.0  # corner: map coordinate x is the left edge of pixel x
    mapx, mapy = (ndd.as_batch([m[k] for m in maps]).gpu() for k in (0, 1))
    for interp, cv_interp in ((types.INTERP_NN, cv2.INTER_NEAREST), (types.INTERP_LINEAR, cv2.INTER_LINEAR)):
        got = gpu_samples(ndd.experimental.remap(batch(imgs).gpu(), mapx, mapy, interp=interp, pixel_origin=origin))
        for x, (mx, my), g in zip(imgs, maps, got):
            ref = cv2.remap(x, mx - shift, my - shift, cv_interp, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            ref = ref.reshape(x.shape)
            assert g.dtype == x.dtype
            if interp == types.INTERP_NN:
                np.testing.assert_array_equal(g, ref)
            elif dtype == np.float32:
                np.testing.assert_allclose(g, ref, atol=1e-4, rtol=1e-5)
            else:
                np.testing.assert_allclose(g.astype(np.int64), ref.astype(np.int64), atol=1)


def test_remap_default_is_linear_corner_and_maps_with_a_channel() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4, 1)
    ys, xs = np.mgrid[0:3, 0:4].astype(np.float32)
    same = ndd.experimental.remap(ndd.as_tensor(x, layout="HWC").gpu(), ndd.as_tensor((xs + 0.5)[..., None]).gpu(),
                                  ndd.as_tensor((ys + 0.5)[..., None]).gpu())  # pixel centres, corner origin
    np.testing.assert_array_equal(np.asarray(same.cpu()), x)
    half = ndd.experimental.remap(ndd.as_tensor(x, layout="HWC").gpu(), ndd.as_tensor(xs + 1).gpu(),
                                  ndd.as_tensor(ys + 0.5).gpu())
    np.testing.assert_allclose(np.asarray(half.cpu())[:, :3, 0], (x[:, :3, 0] + x[:, 1:, 0]) / 2)
    assert np.all(np.asarray(half.cpu())[:, 3, 0] == x[:, 3, 0] / 2)  # half of it reads the zero border


def test_remap_sequences_and_errors() -> None:
    frames = rand_images(9, [(3, 8, 6, 3)])[0]
    mx, my = random_maps(3, 8, 6)
    got = np.asarray(ndd.experimental.remap(ndd.as_tensor(frames, layout="FHWC").gpu(), ndd.as_tensor(mx).gpu(),
                                            ndd.as_tensor(my).gpu(), pixel_origin="center",
                                            interp=types.INTERP_NN).cpu())
    for f in range(3):
        np.testing.assert_array_equal(got[f], cv2.remap(frames[f], mx, my, cv2.INTER_NEAREST))
    x = ndd.as_batch([np.zeros((8, 6, 3), np.uint8)], layout="HWC").gpu()
    with pytest.raises(ValueError) as info:
        ndd.experimental.remap(x, ndd.as_batch([mx.T.copy()]).gpu(), ndd.as_batch([my]).gpu()).evaluate()
    assert "`experimental.remap`: input 'mapx' of sample 0 has shape (6, 8)" in str(info.value.__cause__)
    with pytest.raises(TypeError, match=r"'mapy' must be float32"):
        ndd.experimental.remap(x, ndd.as_batch([mx]).gpu(), ndd.as_batch([my.astype(np.float64)]).gpu())
    with pytest.raises(ValueError, match=r"'interp' must be INTERP_NN or INTERP_LINEAR"):
        ndd.experimental.remap(x, ndd.as_batch([mx]).gpu(), ndd.as_batch([my]).gpu(), interp=types.INTERP_CUBIC)
    with pytest.raises(ValueError, match=r"input 1 is on the CPU"):
        ndd.experimental.remap(x, ndd.as_batch([mx]), ndd.as_batch([my]).gpu())


# -- jitter ------------------------------------------------------------------------------------------


def coded_image(h: int, w: int) -> np.ndarray:
    """float32 HWC whose pixel (y, x) holds (y, x, y * w + x): where each output pixel came from."""
    ys, xs = np.mgrid[0:h, 0:w]
    return np.stack([ys, xs, ys * w + xs], axis=-1).astype(np.float32)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_jitter_moves_whole_pixels_within_the_range(n) -> None:
    h, w = 40, 50
    out = np.asarray(ndd.jitter(ndd.as_tensor(coded_image(h, w), layout="HWC").gpu(), nDegree=n,
                                rng=ndd.random.RNG(1)).cpu())
    ys, xs = np.mgrid[0:h, 0:w]
    sy, sx = out[..., 0].astype(int), out[..., 1].astype(int)
    np.testing.assert_array_equal(out[..., 2], sy * w + sx)  # all channels of a pixel move together
    dy, dx = sy - ys, sx - xs
    inner = (ys >= n) & (ys < h - n) & (xs >= n) & (xs < w - n)  # away from the clamped edges
    lo, hi = -(n // 2), n - n // 2
    for d in (dy[inner], dx[inner]):
        counts = np.bincount(d - lo, minlength=hi - lo + 1)
        assert d.min() >= lo and d.max() <= hi and len(counts) == hi - lo + 1
        assert counts.min() > 0.6 * counts.mean()  # every offset comes up, about equally often
    assert (sy >= 0).all() and (sy < h).all() and (sx >= 0).all() and (sx < w).all()


def test_jitter_is_reproducible_and_respects_the_mask() -> None:
    imgs = rand_images(10, [(20, 16, 3), (9, 11, 3), (5, 5, 3)])
    mask = ndd.as_batch([np.int32(m) for m in (1, 0, 1)])
    a = gpu_samples(ndd.jitter(batch(imgs).gpu(), nDegree=4, mask=mask, rng=ndd.random.RNG(7)))
    b = gpu_samples(ndd.jitter(batch(imgs).gpu(), nDegree=4, mask=mask, rng=ndd.random.RNG(7)))
    c = gpu_samples(ndd.jitter(batch(imgs).gpu(), nDegree=4, mask=mask, rng=ndd.random.RNG(8)))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    np.testing.assert_array_equal(a[1], imgs[1])  # mask 0: unchanged
    assert not np.array_equal(a[0], imgs[0])
    with pytest.raises(ValueError, match=r"jitter.*'nDegree'"):
        ndd.jitter(batch(imgs).gpu(), nDegree=-1)
    with pytest.raises(ValueError, match=r"jitter.*'interp_type'"):
        ndd.jitter(batch(imgs).gpu(), interp_type=types.INTERP_CUBIC)
    with pytest.raises(TypeError, match=r"jitter.*i16"):
        ndd.jitter(ndd.as_tensor(np.zeros((4, 4, 3), np.int16), layout="HWC").gpu())
    with pytest.raises(ValueError, match=r"jitter.*HWC"):
        ndd.jitter(ndd.as_tensor(np.zeros((3, 4, 4), np.uint8), layout="CHW").gpu())


def test_jitter_and_filters_replay_in_capture_mode(tmp_path) -> None:
    """A captured loop gives the eager loop's results, the jitter's random offsets included."""
    path = noisy_digits_lmdb(tmp_path / "digits")

    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        images = ndd.jitter(images, nDegree=3, rng=rng)
        return (ndd.experimental.median_blur(images).torch(), ndd.experimental.dilate(images).torch(),
                ndd.experimental.resize(images, size=[20, 24]).torch())

    assert_same(eager_run(path, body, epochs=1), graphed_run(path, body, epochs=1, processes=0)[:2])


# -- experimental.resize -------------------------------------------------------------------------------


def test_experimental_resize_is_resize() -> None:
    imgs = rand_images(11, [(20, 30, 3), (7, 9, 3)])
    for kw in ({"size": [10, 12]}, {"resize_shorter": 15, "interp_type": types.INTERP_CUBIC},
               {"resize_x": 40, "dtype": ndd.float32, "antialias": False}):
        ref = samples_of(ndd.resize(batch(imgs), **kw))
        got = gpu_samples(ndd.experimental.resize(batch(imgs).gpu(), **kw))
        for r, g in zip(ref, got):
            assert r.shape == g.shape and r.dtype == g.dtype
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), atol=1)
