"""gaussian_blur against a direct NumPy convolution (np.pad "reflect" border, float64) and
facts observed from DALI 2.4 (kernel taps, border, window rules, a few pixels)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndd
import ndd.types as types


def _taps(sigma: float, win: int) -> np.ndarray:
    win = win or 2 * math.ceil(3 * sigma) + 1
    sigma = sigma or 0.3 * ((win - 1) * 0.5 - 1) + 0.8
    x = np.arange(win) - win // 2
    w = np.exp(-x * x / (2 * sigma * sigma))
    return w / w.sum()


def _reference(x: np.ndarray, axes: tuple[int, ...], taps: list[np.ndarray]) -> np.ndarray:
    """Direct convolution: every output the weighted sum over its whole window."""
    y = x.astype(np.float64)
    pads = [(0, 0)] * x.ndim
    for ax, w in zip(axes, taps):
        pads[ax] = (len(w) // 2, len(w) // 2)
    p = np.pad(y, pads, mode="reflect")  # dcb|abcd|cba
    out = np.zeros_like(y)
    grids = np.meshgrid(*[np.arange(len(w)) for w in taps], indexing="ij")
    for offs in zip(*(g.ravel() for g in grids)):
        weight = np.prod([w[o] for w, o in zip(taps, offs)])
        sl = [slice(None)] * x.ndim
        for ax, o in zip(axes, offs):
            sl[ax] = slice(o, o + x.shape[ax])
        out += weight * p[tuple(sl)]
    return out


RNG = np.random.default_rng(3)
CASES = [  # (shape, dtype, layout, blurred axes, sigma per axis, window per axis)
    ((9, 11, 3), np.uint8, "HWC", (0, 1), (1.3, 1.3), (0, 0)),
    ((9, 11, 3), np.uint8, "HWC", (0, 1), (0.7, 2.1), (0, 0)),
    ((9, 11, 3), np.uint8, "HWC", (0, 1), (0.0, 1.0), (3, 7)),
    ((6, 5, 2), np.float32, "HWC", (0, 1), (0.9, 0.9), (0, 0)),
    ((2, 40, 1), np.uint8, "HWC", (0, 1), (3.0, 3.0), (0, 0)),  # a window longer than the axis
    ((3, 7, 8), np.uint8, "CHW", (1, 2), (1.1, 1.1), (0, 0)),
    ((2, 7, 8, 3), np.uint8, "FHWC", (1, 2), (1.0, 1.0), (0, 0)),
    ((5, 6, 7, 1), np.float32, "DHWC", (0, 1, 2), (0.8, 0.8, 0.8), (0, 0, 0)),
    ((7, 8, 6), np.uint8, "HWC", (0, 1), (1.2, 1.2), (0, 0)),  # 6 channels: the NumPy path
    ((10, 12), np.uint16, "HW", (0, 1), (1.5, 1.5), (0, 0)),
    ((8, 9, 3), np.float64, "HWC", (0, 1), (1.1, 0.8), (0, 0)),  # computed in float32 (OpenCV refused it)
    ((8, 9), np.float64, "HW", (0, 1), (1.4, 1.4), (0, 0)),
]


@pytest.mark.parametrize("shape,dtype,layout,axes,sigma,win", CASES)
def test_against_direct_convolution(shape, dtype, layout, axes, sigma, win) -> None:
    hi = 1.0 if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max
    x = (RNG.random(shape) * hi).astype(dtype)
    ref = _reference(x, axes, [_taps(s, w) for s, w in zip(sigma, win)])
    kw = {"sigma": list(sigma)}
    if any(win):
        kw["window_size"] = list(win)
    got = np.asarray(ndd.gaussian_blur(ndd.as_tensor(x, layout=layout), **kw))
    assert got.dtype == dtype and got.shape == shape
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    else:  # rounded half away from zero from float32 sums: at most 1 off a float64 rounding
        assert np.abs(got.astype(np.int64) - np.round(ref)).max() <= 1
        assert np.mean(got.astype(np.int64) == np.floor(ref + 0.5)) > 0.98
    flt = np.asarray(ndd.gaussian_blur(ndd.as_tensor(x, layout=layout), dtype=ndd.float32, **kw))
    np.testing.assert_allclose(flt, ref, rtol=1e-5, atol=1e-5 * hi)


def test_kernel_and_border_as_dali() -> None:
    """Impulse responses DALI 2.4 gave (float32, 6 decimals)."""
    def impulse(shape, at, **kw):
        x = np.zeros(shape + (1,), np.float32)
        x[at] = 1
        return np.asarray(ndd.gaussian_blur(ndd.as_tensor(x, layout="HWC"), **kw))[..., 0]

    r = impulse((15, 15), (7, 7), sigma=1.0)
    np.testing.assert_allclose(r[7, 4:11], [0.001769, 0.021551, 0.096585, 0.159241, 0.096585, 0.021551, 0.001769],
                               atol=2e-6)
    assert np.count_nonzero(r[7]) == 7 and np.count_nonzero(r[:, 7]) == 7  # window 2 * ceil(3 sigma) + 1
    np.testing.assert_allclose(impulse((15, 15), (7, 7), window_size=5)[7, 5:10],
                               [0.026151, 0.090339, 0.136565, 0.090339, 0.026151], atol=2e-6)  # sigma 1.1
    np.testing.assert_allclose(impulse((15, 15), (7, 7), sigma=1.0, window_size=3)[7, 6:9],
                               [0.123841, 0.20418, 0.123841], atol=2e-6)
    r = impulse((15, 15), (7, 7), sigma=[1.0, 2.0])  # per axis in layout order: H, then W
    assert np.count_nonzero(r[7]) == 13 and np.count_nonzero(r[:, 7]) == 7
    np.testing.assert_allclose(impulse((1, 7), (0, 0), sigma=1.0)[0],
                               [0.39905, 0.242036, 0.054006, 0.004433, 0, 0, 0], atol=2e-6)
    np.testing.assert_allclose(impulse((1, 7), (0, 1), sigma=1.0)[0],
                               [0.484072, 0.453056, 0.246469, 0.054006, 0.004433, 0, 0], atol=2e-6)


def test_pixels_as_dali() -> None:
    x = np.random.default_rng(0).integers(0, 255, (9, 11, 3)).astype(np.uint8)
    got = np.asarray(ndd.gaussian_blur(ndd.as_tensor(x, layout="HWC"), sigma=1.0))
    np.testing.assert_array_equal(got[:2, :3, 0], [[118, 99, 88], [122, 107, 100]])  # DALI 2.4's values


def test_batches_layouts_and_per_sample_sigma() -> None:
    imgs = [RNG.integers(0, 255, (12, 10, 3)).astype(np.uint8) for _ in range(3)]
    sig = ndd.as_batch([np.float32(0.5), np.float32(1.0), np.float32(2.0)])
    out = ndd.gaussian_blur(ndd.as_batch(imgs, layout="HWC"), sigma=sig)
    assert out.layout == "HWC" and out.dtype == ndd.uint8
    for img, s, o in zip(imgs, (0.5, 1.0, 2.0), out.tensors):
        ref = _reference(img, (0, 1), [_taps(s, 0)] * 2)
        assert np.abs(np.asarray(o).astype(int) - np.round(ref)).max() <= 1
    ragged = ndd.gaussian_blur(ndd.as_batch([imgs[0], imgs[1][:5]], layout="HWC"), sigma=1.0)
    assert ragged.shape == [(12, 10, 3), (5, 10, 3)]
    no_layout = ndd.gaussian_blur(ndd.as_tensor(imgs[0][..., 0]), sigma=1.0)  # every axis blurred
    ref = _reference(imgs[0][..., 0], (0, 1), [_taps(1.0, 0)] * 2)
    assert no_layout.layout is None and np.abs(np.asarray(no_layout).astype(int) - np.round(ref)).max() <= 1


def test_errors_name_the_argument() -> None:
    x = ndd.as_tensor(np.zeros((8, 8, 3), np.uint8), layout="HWC")
    for kw, msg in [({"sigma": -1.0}, "'sigma' must be non-negative"),
                    ({"window_size": 4}, "'window_size' must be odd, got 4"),
                    ({"sigma": 0.0}, "'sigma' and 'window_size' cannot both be 0"),
                    ({}, "'sigma' and 'window_size' cannot both be 0"),
                    ({"sigma": [1.0, 2.0, 3.0]}, "'sigma' has 3 values for 2 blurred axes")]:
        with pytest.raises(Exception, match=msg):
            ndd.gaussian_blur(x, **kw).evaluate()
    out = ndd.gaussian_blur(x, sigma=0.0, window_size=3, dtype=types.FLOAT)  # sigma from the window
    assert out.dtype == ndd.float32


@pytest.mark.parametrize("shape,sigma", [((64, 28, 28, 1), 1.5), ((16, 20, 20, 3), [0.8, 2.0]), ((8, 9, 7), 1.0)])
def test_a_batch_of_small_images_in_one_call_equals_sample_by_sample(shape, sigma) -> None:
    imgs = RNG.integers(0, 255, shape).astype(np.uint8)
    layout = "HWC" if len(shape) == 4 else "HW"
    whole = ndd.gaussian_blur(ndd.as_batch(imgs, layout=layout), sigma=sigma)
    for img, got in zip(imgs, whole.tensors):
        one = ndd.gaussian_blur(ndd.as_tensor(img, layout=layout), sigma=sigma)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(one))
