"""Filter operators against independent references: ``laplacian`` against
scipy.ndimage.correlate (float64, border "mirror" = dcb|abcd|cba) with the full N-D kernel
built from the documented windows (binomial smoothing, [1, -2, 1] smoothed derivative)."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
from scipy import ndimage

import ndd

# -- laplacian ---------------------------------------------------------------------------


def _smooth(s: int) -> np.ndarray:
    return np.array([comb(s - 1, k) for k in range(s)], np.float64)


def _deriv(s: int) -> np.ndarray:
    return np.convolve([1.0, -2.0, 1.0], _smooth(s - 2))


def _laplacian_ref(x: np.ndarray, axes: tuple[int, ...], win: list[int], smooth: list[int] | None,
                   scale: list[float] | None, normalized: bool = False) -> np.ndarray:
    """Sum over derivative axes d of scale_d * correlate(x, outer product of the windows)."""
    n = len(axes)
    out = np.zeros(x.shape, np.float64)
    for d in range(n):
        sizes = [win[d] if j == d else (smooth[j] if smooth else win[d]) for j in range(n)]
        kern = np.ones([1] * x.ndim)
        for j, (ax, s) in enumerate(zip(axes, sizes)):
            w = _deriv(s) if j == d else _smooth(s)
            shape = [1] * x.ndim
            shape[ax] = s
            kern = kern * w.reshape(shape)
        f = 2.0 ** (n + 2 - sum(sizes)) if normalized else (scale[d] if scale else 1.0)
        out += f * ndimage.correlate(x.astype(np.float64), kern, mode="mirror")
    return out


def _round_sat(y: np.ndarray, dt: np.dtype) -> np.ndarray:
    info = np.iinfo(dt)
    return np.clip(np.sign(y) * np.floor(np.abs(y) + 0.5), info.min, info.max).astype(dt)


LAP_CASES = [  # shape, dtype, layout, spatial axes, window_size, smoothing_size, scale, normalized
    ((9, 11), np.float32, "HW", (0, 1), [3, 3], None, None, False),
    ((9, 11), np.float32, None, (0, 1), [5, 7], None, None, False),  # per-axis windows
    ((9, 11, 3), np.uint8, "HWC", (0, 1), [5, 5], [1, 3], None, False),
    ((3, 9, 11), np.int16, "CHW", (1, 2), [3, 7], [5, 1], [0.5, -2.0], False),
    ((2, 8, 7, 2), np.uint16, "FHWC", (1, 2), [7, 3], None, None, True),
    ((5, 6, 7), np.float32, "DHW", (0, 1, 2), [3, 5, 3], [3, 1, 5], [1.0, 0.25, 2.0], False),
    ((4, 5, 6, 2), np.float32, "DHWC", (0, 1, 2), [3, 3, 3], None, None, True),
    ((2, 30), np.float32, "HW", (0, 1), [9, 31], [5, 1], None, False),  # windows longer than the axes
    ((1, 6), np.float32, "HW", (0, 1), [5, 5], None, None, False),  # a single row
]


@pytest.mark.parametrize("shape,dtype,layout,axes,win,smooth,scale,norm", LAP_CASES)
def test_laplacian_against_correlate(shape, dtype, layout, axes, win, smooth, scale, norm) -> None:
    rng = np.random.default_rng(7)
    dt = np.dtype(dtype)
    x = (rng.normal(size=shape) * 20 if dt.kind == "f" else rng.integers(0, 200, shape)).astype(dt)
    kw = {"window_size": win, "normalized_kernel": norm}
    if smooth:
        kw["smoothing_size"] = smooth
    if scale:
        kw["scale"] = scale
    out = ndd.laplacian(ndd.tensor(x, layout=layout), **kw)
    assert out.dtype == ndd.dtype(dt) and (out.layout or None) == layout
    ref = _laplacian_ref(x, axes, win, smooth, scale, norm)
    got = np.asarray(out)
    if dt.kind == "f":  # float32 arithmetic: relative to the magnitude of the result
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * max(1.0, np.abs(ref).max()))
    else:  # rounded and saturated; a float32 sum may sit on the other side of .5
        assert np.abs(got.astype(np.int64) - _round_sat(ref, dt)).max() <= 1
    f32 = np.asarray(ndd.laplacian(ndd.tensor(x, layout=layout), dtype=ndd.float32, **kw))
    np.testing.assert_allclose(f32, ref, rtol=0, atol=1e-5 * max(1.0, np.abs(ref).max()))


def test_laplacian_hand_computed() -> None:
    # an impulse in the middle: 3x3 windows give the classic [[2, 0, 2], [0, -8, 0], [2, 0, 2]]
    x = np.zeros((5, 5), np.float32)
    x[2, 2] = 1
    got = np.asarray(ndd.laplacian(ndd.tensor(x)))
    np.testing.assert_array_equal(got[1:4, 1:4], [[2, 0, 2], [0, -8, 0], [2, 0, 2]])
    # no smoothing: the 5-point stencil; beside the corner the mirrored impulse (x[0, -1] is
    # x[0, 1]) is not repeated, so it counts once
    x = np.zeros((4, 4), np.float32)
    x[0, 0] = 1
    got = np.asarray(ndd.laplacian(ndd.tensor(x), smoothing_size=1))
    np.testing.assert_array_equal(got[:2, :2], [[-4, 1], [1, 0]])
    x[0, 0], x[0, 1] = 0, 1  # beside the edge: the mirror of x[0, 1] adds to x[0, 0]'s sum
    got = np.asarray(ndd.laplacian(ndd.tensor(x), smoothing_size=1))
    assert got[0, 0] == 2 and got[0, 1] == -4


def test_laplacian_batch_ragged_and_per_sample_args() -> None:
    rng = np.random.default_rng(1)
    xs = [rng.integers(0, 256, s).astype(np.uint8) for s in ((7, 9, 3), (12, 5, 3), (6, 6, 3))]
    wins = [3, 5, 7]
    scales = [np.array([1.0, 0.5], np.float32), np.array([2.0], np.float32), np.array([0.1, 0.3], np.float32)]
    out = ndd.laplacian(ndd.batch(xs, layout="HWC"), dtype=ndd.float32,
                        window_size=ndd.batch([np.array([w], np.int32) for w in wins]),
                        scale=ndd.batch(scales))
    assert isinstance(out, ndd.Batch) and out.layout == "HWC"
    for x, w, s, o in zip(xs, wins, scales, out):
        sc = list(map(float, s)) * (2 // len(s))
        ref = _laplacian_ref(x, (0, 1), [w, w], None, sc)
        np.testing.assert_allclose(np.asarray(o), ref, atol=1e-5 * np.abs(ref).max())
    # a uniform batch with shared arguments (one pass) equals sample by sample
    xs = [rng.normal(size=(6, 8)).astype(np.float32) for _ in range(3)]
    whole = ndd.laplacian(ndd.batch(xs), window_size=[3, 5])
    for x, o in zip(xs, whole):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(ndd.laplacian(ndd.tensor(x), window_size=[3, 5])))


@pytest.mark.parametrize("kw,layout,shape,match", [
    ({"window_size": 4}, "HW", (5, 5), "window_size"),
    ({"window_size": 1}, "HW", (5, 5), "window_size"),
    ({"window_size": 33}, "HW", (5, 5), "window_size"),
    ({"smoothing_size": 0}, "HW", (5, 5), "smoothing_size"),
    ({"window_size": [3, 3, 3]}, "HW", (5, 5), "window_size"),
    ({"scale": [1.0, 2.0, 3.0]}, "HW", (5, 5), "scale"),
    ({"scale": 1.0, "normalized_kernel": True}, "HW", (5, 5), "scale"),
    ({"dtype": ndd.int16}, "HW", (5, 5), "dtype"),
    ({}, "HCW", (5, 3, 5), "channel"),
    ({}, None, (2, 3, 4, 5), "layout"),
])
def test_laplacian_errors(kw, layout, shape, match) -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises((ValueError, RuntimeError), match=match):
        np.asarray(ndd.laplacian(ndd.tensor(np.zeros(shape, np.uint8), layout=layout), **kw))


def test_laplacian_unsupported_type() -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises((ValueError, RuntimeError), match="laplacian"):
        np.asarray(ndd.laplacian(ndd.tensor(np.zeros((4, 4), np.float64))))


# -- filter ------------------------------------------------------------------------------

_NP_PAD = {"reflect_101": "reflect", "reflect_1001": "symmetric", "wrap": "wrap", "clamp": "edge",
           "constant": "constant"}


def _filter_ref(x: np.ndarray, f: np.ndarray, anchor: tuple[int, int], border: str, fill: float = 0.0,
                valid: bool = False, hw: tuple[int, int] = (0, 1)) -> np.ndarray:
    """out[i, j] = sum f[p, q] * x[i + p - ay, j + q - ax], x padded with np.pad (float64)."""
    fh, fw = f.shape
    ay, ax = (0, 0) if valid else anchor
    pads = [(0, 0)] * x.ndim
    if not valid:
        pads[hw[0]], pads[hw[1]] = (ay, fh - 1 - ay), (ax, fw - 1 - ax)
    kw = {"constant_values": fill} if border == "constant" else {}
    p = np.pad(x.astype(np.float64), pads, mode=_NP_PAD[border], **kw)
    out_hw = (x.shape[hw[0]] - fh + 1, x.shape[hw[1]] - fw + 1) if valid else (x.shape[hw[0]], x.shape[hw[1]])
    shape = list(x.shape)
    shape[hw[0]], shape[hw[1]] = out_hw
    out = np.zeros(shape)
    for a in range(fh):
        for b in range(fw):
            sl = [slice(None)] * x.ndim
            sl[hw[0]], sl[hw[1]] = slice(a, a + out_hw[0]), slice(b, b + out_hw[1])
            out += f[a, b] * p[tuple(sl)]
    return out


FILTER_CASES = [  # shape, layout, spatial axes, dtype, filter shape, anchor, border, mode
    ((9, 11), "HW", (0, 1), np.float32, (3, 3), (-1, -1), "reflect_101", "same"),
    ((9, 11, 3), "HWC", (0, 1), np.uint8, (3, 5), (0, 4), "reflect_1001", "same"),
    ((3, 9, 11), "CHW", (1, 2), np.int16, (4, 2), (-1, -1), "wrap", "same"),
    ((2, 9, 11, 2), "FHWC", (1, 2), np.uint16, (5, 3), (4, 0), "clamp", "same"),
    ((2, 3, 7, 8), "FCHW", (2, 3), np.float32, (3, 3), (1, 2), "constant", "same"),
    ((9, 11), None, (0, 1), np.float32, (4, 6), (-1, -1), "reflect_101", "valid"),
    ((4, 5), "HW", (0, 1), np.float32, (9, 9), (-1, -1), "reflect_101", "same"),  # a filter bigger than the image
    ((3, 6, 5), "HWC", (0, 1), np.float32, (7, 3), (-1, -1), "wrap", "same"),
]


@pytest.mark.parametrize("shape,layout,hw,dtype,fshape,anchor,border,mode", FILTER_CASES)
def test_filter_against_direct_sum(shape, layout, hw, dtype, fshape, anchor, border, mode) -> None:
    rng = np.random.default_rng(11)
    dt = np.dtype(dtype)
    x = (rng.normal(size=shape) * 30 if dt.kind == "f" else rng.integers(0, 120, shape)).astype(dt)
    f = rng.normal(size=fshape).astype(np.float32) / 4
    kw = {"anchor": list(anchor), "border": border, "mode": mode}
    out = ndd.filter(ndd.tensor(x, layout=layout), ndd.tensor(f), **kw)
    assert out.dtype == ndd.dtype(dt) and (out.layout or None) == layout
    a = tuple(n // 2 if v < 0 else v for v, n in zip(anchor, fshape))
    ref = _filter_ref(x, f, a, border, valid=mode == "valid", hw=hw)
    got = np.asarray(out)
    assert got.shape == ref.shape
    if dt.kind == "f":
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * max(1.0, np.abs(ref).max()))
    else:  # rounded to nearest and saturated
        info = np.iinfo(dt)
        assert np.abs(got.astype(np.int64) - np.clip(np.round(ref), info.min, info.max)).max() <= 1
    f32 = np.asarray(ndd.filter(ndd.tensor(x, layout=layout), ndd.tensor(f), dtype=ndd.float32, **kw))
    np.testing.assert_allclose(f32, ref, rtol=0, atol=1e-4 * max(1.0, np.abs(ref).max()))


def test_filter_hand_computed_borders() -> None:
    x = np.arange(1, 8, dtype=np.float32)[None]  # one row: 1 .. 7
    f = np.zeros((1, 5), np.float32)
    f[0, 0] = 1  # picks the element two to the left
    expect = {"reflect_101": [3, 2], "reflect_1001": [2, 1], "wrap": [6, 7], "clamp": [1, 1], "constant": [0, 0]}
    for border, head in expect.items():
        got = np.asarray(ndd.filter(ndd.tensor(x), ndd.tensor(f), border=border))[0]
        np.testing.assert_array_equal(got, head + [1, 2, 3, 4, 5], err_msg=border)
    got = np.asarray(ndd.filter(ndd.tensor(x), ndd.tensor(f), ndd.tensor(np.float32(9)), border="constant"))
    np.testing.assert_array_equal(got[0], [9, 9, 1, 2, 3, 4, 5])
    # the fill value counts only with border="constant"
    got = np.asarray(ndd.filter(ndd.tensor(x), ndd.tensor(f), ndd.tensor(np.float32(9))))
    np.testing.assert_array_equal(got[0], [3, 2, 1, 2, 3, 4, 5])
    # an even filter: the anchor is its middle rounded down (1 of 0..1)
    got = np.asarray(ndd.filter(ndd.tensor(x), ndd.tensor(np.ones((1, 2), np.float32))))
    np.testing.assert_array_equal(got[0], [3, 3, 5, 7, 9, 11, 13])
    got = np.asarray(ndd.filter(ndd.tensor(x), ndd.tensor(np.ones((1, 2), np.float32)), mode="valid"))
    np.testing.assert_array_equal(got[0], [3, 5, 7, 9, 11, 13])


def test_filter_batch_per_sample_filters_fill_and_anchor() -> None:
    rng = np.random.default_rng(5)
    xs = [rng.integers(0, 256, s).astype(np.uint8) for s in ((7, 9, 3), (12, 5, 3), (6, 6, 3))]
    fs = [rng.random(s).astype(np.float32) / 4 for s in ((3, 3), (1, 5), (4, 2))]
    anchors = [np.array(a, np.int32) for a in ((0, 0), (-1, -1), (3, 1))]
    fills = [np.uint8(v) for v in (10, 0, 200)]
    out = ndd.filter(ndd.batch(xs, layout="HWC"), ndd.batch(fs), ndd.batch(fills), border="constant",
                     anchor=ndd.batch(anchors), dtype=ndd.float32)
    assert isinstance(out, ndd.Batch) and out.dtype == ndd.float32
    for x, f, a, v, o in zip(xs, fs, anchors, fills, out):
        a = tuple(n // 2 if k < 0 else int(k) for k, n in zip(a, f.shape))
        ref = _filter_ref(x, f, a, "constant", float(v))
        np.testing.assert_allclose(np.asarray(o), ref, atol=1e-3)
    # one filter (a Tensor) for the whole batch
    out = ndd.filter(ndd.batch(xs, layout="HWC"), ndd.tensor(fs[0]))
    for x, o in zip(xs, out):
        ref = np.clip(np.round(_filter_ref(x, fs[0], (1, 1), "reflect_101")), 0, 255)
        assert np.abs(np.asarray(o).astype(int) - ref).max() <= 1


@pytest.mark.parametrize("x,f,extra,kw,match", [
    (np.zeros((5, 5), np.float64), np.ones((3, 3), np.float32), (), {}, "input type"),
    (np.zeros((5, 5), np.uint8), np.ones((3, 3), np.float64), (), {}, "float32"),
    (np.zeros((5, 5), np.uint8), np.ones((3,), np.float32), (), {}, "dimensions"),
    (np.zeros((5, 5), np.uint8), np.ones((3, 3), np.float32), (), {"anchor": [3, 0]}, "anchor"),
    (np.zeros((5, 5), np.uint8), np.ones((3, 3), np.float32), (), {"anchor": [1, 1, 1]}, "anchor"),
    (np.zeros((5, 5), np.uint8), np.ones((6, 3), np.float32), (), {"mode": "valid"}, "valid"),
    (np.zeros((5, 5), np.uint8), np.ones((3, 3), np.float32), (), {"mode": "full"}, "mode"),
    (np.zeros((5, 5), np.uint8), np.ones((3, 3), np.float32), (), {"border": "mirror"}, "border"),
    (np.zeros((5, 5), np.uint8), np.ones((3, 3), np.float32), (np.int32(3),), {"border": "constant"}, "fill_value"),
    (np.zeros((5, 5), np.uint8), np.ones((3, 3), np.float32), (), {"dtype": ndd.int16}, "dtype"),
    (np.zeros((5, 5), np.int8), np.ones((3, 3), np.float32), (), {}, "CPU"),
    (np.zeros((4, 5, 5), np.uint8), np.ones((3, 3, 3), np.float32), (), {}, "2 spatial"),
    (np.zeros((0, 5), np.uint8), np.ones((3, 3), np.float32), (), {}, "empty"),
    (np.zeros((5, 5, 5), np.uint8), np.ones((3, 3), np.float32), (np.uint8(3),), {"border": "constant", "layout": "HWC"},
     "4 channels"),
])
def test_filter_errors(x, f, extra, kw, match) -> None:
    kw = dict(kw)
    layout = kw.pop("layout", None)
    with ndd.EvalMode.sync_cpu, pytest.raises((ValueError, RuntimeError, TypeError), match=match):
        np.asarray(ndd.filter(ndd.tensor(x, layout=layout), ndd.tensor(f), *map(ndd.tensor, extra), **kw))


# -- water and sphere --------------------------------------------------------------------

LINEAR, NN = ndd.types.DALIInterpType.INTERP_LINEAR, ndd.types.DALIInterpType.INTERP_NN


def _water_xy(h: int, w: int, ax: float, ay: float, fx: float, fy: float, px: float, py: float):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    return x + ax * np.sin(fx * y + px), y + ay * np.cos(fy * x + py)


def _sphere_xy(h: int, w: int):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    cx, cy = w / 2, h / 2
    tx, ty = x + 0.5 - cx, y + 0.5 - cy
    r = np.hypot(tx, ty) / int(max(cx, cy))
    return cx + r * tx, cy + r * ty


def _sample_ref(img: np.ndarray, sx: np.ndarray, sy: np.ndarray, linear: bool, fill: float) -> np.ndarray:
    """scipy.ndimage.map_coordinates with pixel centres at i + 0.5: bilinear (outside: fill) or
    the pixel under the point."""
    out = []
    for c in range(img.shape[2]):
        ch = img[..., c].astype(np.float64)
        if linear:
            out.append(ndimage.map_coordinates(ch, [sy - 0.5, sx - 0.5], order=1, mode="grid-constant", cval=fill))
        else:
            yi, xi = np.floor(sy).astype(int), np.floor(sx).astype(int)
            inside = (yi >= 0) & (yi < ch.shape[0]) & (xi >= 0) & (xi < ch.shape[1])
            out.append(np.where(inside, ch[np.clip(yi, 0, ch.shape[0] - 1), np.clip(xi, 0, ch.shape[1] - 1)], fill))
    return np.stack(out, -1)


def test_water_and_sphere_against_map_coordinates() -> None:
    rng = np.random.default_rng(2)
    img = (rng.random((40, 52, 3)) * 100).astype(np.float32)
    p = {"ampl_x": 3.5, "ampl_y": -6.0, "freq_x": 0.3, "freq_y": 0.11, "phase_x": 1.0, "phase_y": -2.0}
    xy = {"water": _water_xy(40, 52, *p.values()), "sphere": _sphere_xy(40, 52)}
    for op, kw in (("water", p), ("sphere", {})):
        for interp in (LINEAR, NN):
            got = np.asarray(getattr(ndd, op)(ndd.tensor(img, layout="HWC"), interp_type=interp, fill_value=-5.0,
                                              **kw))
            ref = _sample_ref(img, *xy[op], interp == LINEAR, -5.0)
            if interp == LINEAR:  # float32 coordinates and arithmetic
                np.testing.assert_allclose(got, ref, atol=2e-3, err_msg=op)
            else:  # a float32 coordinate within ~1e-6 of a pixel edge may fall on the other side
                assert np.mean(got == ref) > 0.999, op


def test_water_hand_computed() -> None:
    x = (np.arange(30).reshape(5, 6, 1) * 8).astype(np.uint8)
    # no wave: NN is the identity; LINEAR samples half a pixel up-left (the fill beyond the edge)
    same = np.asarray(ndd.water(ndd.tensor(x), ampl_x=0.0, ampl_y=0.0))
    np.testing.assert_array_equal(same, x)
    lin = np.asarray(ndd.water(ndd.tensor(x), ampl_x=0.0, ampl_y=0.0, interp_type=LINEAR))[..., 0]
    assert lin[1, 1] == (0 + 8 + 48 + 56) // 4 and lin[0, 1] == 2 and lin[0, 0] == 0
    # a shift by -0.3 px along x (sin(pi/2) = 1) moves NN one pixel right, the fill entering at x = 0
    sh = np.asarray(ndd.water(ndd.tensor(x.astype(np.float32)), ampl_x=-0.3, ampl_y=0.0, phase_x=np.pi / 2))
    np.testing.assert_array_equal(sh[:, 1:], x[:, :-1].astype(np.float32))
    assert (sh[:, 0] == 0).all()
    # defaults (amplitude 10 px) move every pixel of this small image outside: all fill; a uint8
    # fill is truncated and wrapped as DALI converts it (300 -> 44, -3.7 -> 253)
    for fill, expect in ((300.0, 44), (-3.7, 253), (17.9, 17)):
        assert (np.asarray(ndd.water(ndd.tensor(x), fill_value=fill)) == expect).all()


def test_sphere_hand_computed() -> None:
    # 4x4: centre (2, 2), d = 2; pixel (0, 0) has offset (-1.5, -1.5), radius 1.5 * sqrt(2) / 2,
    # so it samples (2 - 1.59, 2 - 1.59) = pixel (0, 0); pixel (1, 1) samples (1.82, 1.82)
    x = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    got = np.asarray(ndd.sphere(ndd.tensor(x)))[..., 0]
    assert got[0, 0] == 0 and got[1, 1] == 5 and got[0, 2] == x[0, 2, 0]


def test_water_sphere_batch_and_mask() -> None:
    rng = np.random.default_rng(4)
    xs = [rng.integers(0, 256, s).astype(np.uint8) for s in ((20, 30, 3), (33, 17, 3), (8, 9, 3))]
    mask = ndd.batch([np.int32(1), np.int32(0), np.int32(1)])
    for op in ("water", "sphere"):
        out = getattr(ndd, op)(ndd.batch(xs, layout="HWC"), mask=mask, interp_type=LINEAR)
        assert isinstance(out, ndd.Batch) and out.layout == "HWC" and out.dtype == ndd.uint8
        outs = [np.asarray(o) for o in out]
        np.testing.assert_array_equal(outs[1], xs[1])  # mask 0: unchanged
        for i in (0, 2):
            one = np.asarray(getattr(ndd, op)(ndd.tensor(xs[i], layout="HWC"), interp_type=LINEAR))
            np.testing.assert_array_equal(outs[i], one)
            assert not np.array_equal(outs[i], xs[i])


@pytest.mark.parametrize("op", ["water", "sphere"])
@pytest.mark.parametrize("x,layout,kw,match", [
    (np.zeros((5, 5, 3), np.int16), "HWC", {}, "uint8 or float32"),
    (np.zeros((3, 5, 5), np.uint8), "CHW", {}, "HWC"),
    (np.zeros((5, 5), np.uint8), None, {}, "HWC"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", {"interp_type": ndd.types.DALIInterpType.INTERP_CUBIC}, "interp_type"),
])
def test_water_sphere_errors(op, x, layout, kw, match) -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises((ValueError, RuntimeError), match=match):
        np.asarray(getattr(ndd, op)(ndd.tensor(x, layout=layout), **kw))


# -- experimental.warp_perspective -------------------------------------------------------

warp_perspective = ndd.experimental.warp_perspective


def _perspective_ref(img: np.ndarray, m: np.ndarray, out_hw: tuple[int, int], corner: bool, linear: bool,
                     fill: float) -> np.ndarray:
    """Output pixel (x, y) samples the input at m @ (x, y, 1) (pixel corners: at the pixel centre
    (x + 0.5, y + 0.5), the source's centres at i + 0.5), scipy map_coordinates, float64."""
    y, x = np.mgrid[0:out_hw[0], 0:out_hw[1]].astype(np.float64)
    off = 0.5 if corner else 0.0
    p = np.einsum("ij,jhw->ihw", m.astype(np.float64), np.stack([x + off, y + off, np.ones_like(x)]))
    sx, sy = p[0] / p[2] - off, p[1] / p[2] - off
    chans = img[..., None] if img.ndim == 2 else img
    out = [ndimage.map_coordinates(chans[..., c].astype(np.float64), [sy, sx], order=1 if linear else 0,
                                   mode="grid-constant", cval=fill) for c in range(chans.shape[-1])]
    return np.stack(out, -1).reshape(out_hw + img.shape[2:])


def _smooth_image(h: int, w: int, c: int | None, dtype) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    base = 100 + 60 * np.sin(x / 5.0) * np.cos(y / 7.0)
    img = np.stack([base + 10 * k for k in range(c or 1)], -1)
    return (img if c else img[..., 0]).astype(dtype)


def test_warp_perspective_translation_is_a_shift() -> None:
    x = np.arange(48, dtype=np.uint8).reshape(6, 8)
    m = np.array([[1, 0, 2], [0, 1, -1], [0, 0, 1]], np.float32)  # out(x, y) = in(x + 2, y - 1)
    for origin in ("corner", "center"):
        for interp in (NN, LINEAR):
            got = np.asarray(warp_perspective(ndd.tensor(x), matrix=m, interp_type=interp, fill_value=[200],
                                              pixel_origin=origin))
            np.testing.assert_array_equal(got[1:, :6], x[:5, 2:])
            assert (got[0] == 200).all() and (got[:, 6:] == 200).all()


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int16, np.uint16])
@pytest.mark.parametrize("origin", ["corner", "center"])
@pytest.mark.parametrize("interp", [NN, LINEAR])
def test_warp_perspective_against_map_coordinates(dtype, origin, interp) -> None:
    img = _smooth_image(30, 40, 3, dtype)
    m = np.array([[0.9, 0.1, 3.0], [-0.05, 1.1, -2.0], [0.001, 0.002, 1.0]], np.float32)
    got = np.asarray(warp_perspective(ndd.tensor(img, layout="HWC"), matrix=m, interp_type=interp, size=[25, 35],
                                      fill_value=[7.0], pixel_origin=origin))
    assert got.shape == (25, 35, 3) and got.dtype == np.dtype(dtype)
    ref = _perspective_ref(img, m, (25, 35), origin == "corner", interp == LINEAR, 7.0)
    diff = np.abs(got.astype(np.float64) - ref)
    if interp == LINEAR:  # OpenCV's bilinear weights are multiples of 1/32: up to ~100/64 off next to the fill
        assert diff.max() <= 3.5 and diff.mean() < 0.3
    else:  # a float32 coordinate next to a pixel edge may pick the neighbour
        assert np.mean(diff == 0) > 0.99


def test_warp_perspective_inverse_map_and_inputs() -> None:
    img = _smooth_image(20, 24, None, np.float32)
    m = np.array([[1.1, 0.05, -2.0], [0.0, 0.95, 1.0], [0.0005, 0.0, 1.0]], np.float32)
    inv = np.linalg.inv(m).astype(np.float32)
    a = np.asarray(warp_perspective(ndd.tensor(img), matrix=m))
    b = np.asarray(warp_perspective(ndd.tensor(img), matrix=inv, inverse_map=False))
    np.testing.assert_allclose(a, b, atol=0.05)
    c = np.asarray(warp_perspective(ndd.tensor(img), ndd.tensor(m)))  # the matrix as an input
    np.testing.assert_array_equal(a, c)
    d = np.asarray(warp_perspective(ndd.tensor(img), matrix=m.ravel().tolist()))  # 9 values, row-major
    np.testing.assert_array_equal(a, d)


def test_warp_perspective_batch_layouts_per_sample() -> None:
    rng = np.random.default_rng(8)
    mats = [np.array([[1, 0, t], [0, 1, -t], [0, 0, 1]], np.float32) + np.diag([0.1, -0.1, 0]).astype(np.float32) * k
            for k, t in enumerate((0.3, 2.2, -1.7))]
    xs = [rng.integers(0, 256, s).astype(np.uint8) for s in ((3, 10, 12), (3, 7, 9), (3, 16, 5))]  # CHW, ragged
    out = warp_perspective(ndd.batch(xs, layout="CHW"), ndd.batch(mats), size=[8, 11])
    assert out.layout == "CHW"
    for x, m, o in zip(xs, mats, out):
        o = np.asarray(o)
        assert o.shape == (3, 8, 11)
        for ch in range(3):  # each channel plane warped alone
            one = np.asarray(warp_perspective(ndd.tensor(np.ascontiguousarray(x[ch])), matrix=m, size=[8, 11]))
            np.testing.assert_array_equal(o[ch], one)
    # FHWC with a per-sample matrix argument: each frame warped with its sample's matrix
    vids = [rng.integers(0, 256, (2, 9, 10, 3)).astype(np.uint8) for _ in range(3)]
    out = warp_perspective(ndd.batch(vids, layout="FHWC"), matrix=ndd.batch(mats), interp_type=NN)
    for v, m, o in zip(vids, mats, out):
        for f in range(2):
            ref = _perspective_ref(v[f], m, (9, 10), True, False, 0.0)
            assert np.mean(np.asarray(o)[f] == ref) > 0.97


@pytest.mark.parametrize("x,layout,extra,kw,match", [
    (np.zeros((5, 5, 3), np.int8), "HWC", (), {"matrix": np.eye(3)}, "uint8, int16"),
    (np.zeros((5, 5, 5), np.uint8), "HWC", (), {"matrix": np.eye(3)}, "4 channels"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (), {}, "matrix"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (np.eye(3, dtype=np.float32),), {"matrix": np.eye(3)}, "both"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (np.eye(3),), {}, "float32"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (), {"matrix": np.eye(2)}, "3x3"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (), {"matrix": np.eye(3), "fill_value": [1, 2]}, "fill_value"),
    (np.zeros((3, 5, 5), np.uint8), "CHW", (), {"matrix": np.eye(3), "fill_value": [1, 2, 3]}, "fill_value"),
    (np.zeros((5, 5, 3), np.uint8), "HCW", (), {"matrix": np.eye(3)}, "layout"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (), {"matrix": np.eye(3), "border_mode": "mirror"}, "border_mode"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (), {"matrix": np.eye(3), "pixel_origin": "middle"}, "pixel_origin"),
    (np.zeros((5, 5, 3), np.uint8), "HWC", (), {"matrix": np.eye(3),
                                                "interp_type": ndd.types.DALIInterpType.INTERP_LANCZOS3}, "interp_type"),
])
def test_warp_perspective_errors(x, layout, extra, kw, match) -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises((ValueError, RuntimeError, TypeError), match=match):
        np.asarray(warp_perspective(ndd.tensor(x, layout=layout), *map(ndd.tensor, extra), **kw))


# -- resize_crop_mirror ------------------------------------------------------------------


def test_resize_crop_mirror_nn_upscale_by_two() -> None:
    # NN to twice the size: resized pixel (i, j) is input (i // 2, j // 2); the window and the
    # flips then follow crop's and flip's definitions
    x = np.arange(6 * 8, dtype=np.uint8).reshape(6, 8, 1)
    up = np.repeat(np.repeat(x, 2, 0), 2, 1)  # 12 x 16
    for mirror in range(4):
        got = np.asarray(ndd.resize_crop_mirror(ndd.tensor(x), size=[12, 16], crop=[5, 6], crop_pos_x=0.2,
                                                crop_pos_y=1.0, mirror=mirror, interp_type=NN))
        y0, x0 = 7, round(0.2 * 10)  # crop_pos * (extent - window), rounded
        ref = up[y0:y0 + 5, x0:x0 + 6]
        ref = ref[:, ::-1] if mirror & 1 else ref
        ref = ref[::-1] if mirror & 2 else ref
        np.testing.assert_array_equal(got, ref, err_msg=f"mirror={mirror}")


@pytest.mark.parametrize("interp", [LINEAR, ndd.types.DALIInterpType.INTERP_CUBIC,
                                    ndd.types.DALIInterpType.INTERP_LANCZOS3])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_crop_mirror_is_resize_crop_flip(interp, dtype) -> None:
    rng = np.random.default_rng(9)
    xs = [(rng.random(s) * 255).astype(dtype) for s in ((40, 50, 3), (31, 27, 3))]
    kw = {"resize_shorter": 24, "interp_type": interp}
    out = ndd.resize_crop_mirror(ndd.batch(xs, layout="HWC"), crop=[16, 20], crop_pos_x=0.3,
                                 mirror=ndd.batch([np.int32(1), np.int32(2)]), **kw)
    for x, o, m in zip(xs, out, (1, 2)):
        r = ndd.crop(ndd.resize(ndd.tensor(x, layout="HWC"), **kw), crop=[16, 20], crop_pos_x=0.3)
        r = np.asarray(ndd.flip(r, horizontal=m & 1, vertical=m >> 1))
        o = np.asarray(o)
        assert o.shape == (16, 20, 3) and o.dtype == np.dtype(dtype)
        # the window is resampled alone (its ROI in float32): within rounding of the whole resize
        tol = 1 if dtype == np.uint8 else 1e-3
        assert np.abs(o.astype(np.float64) - r).max() <= tol


def test_resize_crop_mirror_defaults_and_window_past_the_edge() -> None:
    x = np.arange(10 * 12, dtype=np.float32).reshape(10, 12)
    # no crop: the whole resized image (NN at half size reads the centres 1, 3, 5, ...); no mirror
    whole = np.asarray(ndd.resize_crop_mirror(ndd.tensor(x), size=[5, 6], interp_type=NN))
    np.testing.assert_array_equal(whole, x[1::2, 1::2])
    # a window taller than the resized image reads past its edge: centres 11 and 13 clamp to row 9
    tall = np.asarray(ndd.resize_crop_mirror(ndd.tensor(x), size=[5, 6], crop=[7, 6], crop_pos_y=0.0,
                                             interp_type=NN))
    assert tall.shape == (7, 6)
    np.testing.assert_array_equal(tall[:5], x[1::2, 1::2])
    np.testing.assert_array_equal(tall[5:], np.repeat(x[-1:, 1::2], 2, 0))


@pytest.mark.parametrize("kw,match", [
    ({"size": [5, 5], "crop_h": 3}, "crop_w"),
    ({"size": [5, 5], "crop": [3, 3], "crop_w": 2, "crop_h": 2}, "crop"),
    ({"crop": [3, 3]}, "size"),
    ({"size": [5, 5], "resize_z": 3}, "resize_z"),
    ({"size": [5, 5], "rounding": "floor"}, "rounding"),
])
def test_resize_crop_mirror_errors(kw, match) -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises((ValueError, RuntimeError), match=match):
        np.asarray(ndd.resize_crop_mirror(ndd.tensor(np.zeros((8, 8, 3), np.uint8)), **kw))
