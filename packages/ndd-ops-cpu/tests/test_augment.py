"""equalize, grid_mask, jpeg_compression_distortion, clahe and debayer on the CPU, against
references written here (NumPy / SciPy formulas, Pillow's JPEG codec) and hand-derived
cases; every error path.

Tolerances: equalize, jpeg_compression_distortion (vs Pillow, the same libjpeg-turbo
settings) and debayer's interior pixels are compared exactly; grid_mask exactly except the
pixels whose float64 grid coordinate lies within 1e-4 of a square's edge (DALI computes in
float32); clahe within 1 grey level on at most 10% of the pixels (the reference interpolates
in float64, OpenCV in float32).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from ops_cpu_helpers import as_np, raises
from PIL import Image
from scipy import ndimage

import ndd

# -- equalize ---------------------------------------------------------------------------


def equalize_ref(plane: np.ndarray) -> np.ndarray:
    """Histogram equalization of a uint8 plane: the lowest level present maps to 0, level v to
    255 * (count below or at v - count of the lowest) / (pixels - count of the lowest),
    rounded half to even in float32; an image of one level is unchanged."""
    hist = np.bincount(plane.ravel(), minlength=256)
    lo = int(np.flatnonzero(hist)[0])
    if hist[lo] == plane.size:
        return plane.copy()
    scale = np.float32(255.0) / np.float32(plane.size - hist[lo])
    lut = np.rint((np.cumsum(hist) - hist[lo]).astype(np.float32) * scale)
    lut[:lo] = 0
    return lut.astype(np.uint8)[plane]


def _planes_ref(x: np.ndarray, layout: str) -> np.ndarray:
    """equalize_ref on every (frame, channel) plane of ``x``."""
    c = layout.find("C")
    src = np.moveaxis(x, c, -3) if c >= 0 else x
    out = np.empty_like(src)
    for idx in np.ndindex(src.shape[:-2]):
        out[idx] = equalize_ref(src[idx])
    return np.moveaxis(out, -3, c) if c >= 0 else out


@pytest.mark.parametrize("layout, shape", [("HW", (23, 31)), ("HWC", (20, 17, 3)), ("CHW", (2, 9, 40)),
                                           ("FHW", (3, 12, 11)), ("FHWC", (2, 15, 9, 4)),
                                           ("FCHW", (2, 3, 8, 8))])
def test_equalize_layouts(rng, layout, shape) -> None:
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    x[..., :4] //= 7  # planes with different ranges
    y = ndd.equalize(ndd.as_tensor(x, layout=layout))
    assert y.layout == layout and y.dtype == ndd.uint8
    np.testing.assert_array_equal(np.asarray(y), _planes_ref(x, layout))


def test_equalize_photo_and_constant(gray_photo) -> None:
    low = (gray_photo // 4 + 60).astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(ndd.equalize(ndd.as_tensor(low))), equalize_ref(low))
    flat = np.full((4, 6), 7, np.uint8)
    np.testing.assert_array_equal(np.asarray(ndd.equalize(ndd.as_tensor(flat))), flat)
    two = np.array([[3, 3, 9, 9]], np.uint8)  # two levels: 0 and 255
    np.testing.assert_array_equal(np.asarray(ndd.equalize(ndd.as_tensor(two))), [[0, 0, 255, 255]])


def test_equalize_ragged_batch_guessed_layouts(rng) -> None:
    xs = [rng.integers(0, 256, s, dtype=np.uint8) for s in [(5, 6, 3), (9, 2, 1), (1, 1, 2)]]
    out = ndd.equalize(ndd.batch(xs))
    assert out.layout == "HWC"
    for x, y in zip(xs, as_np(out)):
        np.testing.assert_array_equal(y, _planes_ref(x, "HWC"))
    assert ndd.equalize(ndd.as_tensor(np.zeros((2, 4, 4, 3), np.uint8))).layout == "FHWC"


# -- grid_mask --------------------------------------------------------------------------


def grid_ref(h: int, w: int, tile: int, ratio: float, angle: float, sx: float, sy: float
             ) -> tuple[np.ndarray, np.ndarray]:
    """(kept pixels, pixels too close to an edge to decide) in float64: pixel (x, y) has grid
    coordinates R(angle) (x, y) - (sx, sy), in tiles; it is zeroed when both fractional parts
    are below ratio."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    c, s = np.cos(angle), np.sin(angle)
    fx = np.mod((c * x - s * y - sx) / tile, 1)
    fy = np.mod((s * x + c * y - sy) / tile, 1)
    keep = (fx >= ratio) | (fy >= ratio)

    def near(f: np.ndarray) -> np.ndarray:
        return (np.abs(f - ratio) < 1e-4) | (f < 1e-4) | (f > 1 - 1e-4)

    return keep, near(fx) | near(fy)


def test_grid_mask_hand_cases() -> None:
    x = np.full((8, 8, 1), 9, np.uint8)

    def mask(**kw) -> np.ndarray:
        return np.asarray(ndd.grid_mask(ndd.as_tensor(x), **kw))[..., 0] > 0

    cols = np.arange(8)
    # tile 4, ratio 0.5: 2x2 black squares at rows/columns 0-1 and 4-5
    black = (cols % 4 < 2)[:, None] & (cols % 4 < 2)[None, :]
    np.testing.assert_array_equal(mask(tile=4), ~black)
    # shifted one pixel right: columns 1-2 and 5-6
    black = (cols % 4 < 2)[:, None] & ((cols - 1) % 4 < 2)[None, :]
    np.testing.assert_array_equal(mask(tile=4, shift_x=1.0), ~black)
    # defaults: tile 100, ratio 0.5: the whole 8x8 corner is inside the first square
    assert not mask().any()
    assert ndd.grid_mask(ndd.as_tensor(x)).layout is None  # as DALI: no layout stays none
    assert ndd.grid_mask(ndd.as_tensor(x, layout="HWC")).layout == "HWC"
    assert mask(tile=4, ratio=0.0).all() and not mask(tile=4, ratio=1.0).any()


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.float32])
def test_grid_mask_against_reference(rng, dtype) -> None:
    undecided = total = 0
    for _ in range(6):
        h, w, c = (int(v) for v in rng.integers(1, 60, 3) % [60, 60, 4] + [0, 0, 1])
        tile, ratio = int(rng.integers(1, 30)), float(rng.uniform(0, 1))
        angle, sx, sy = (float(v) for v in rng.uniform(-20, 20, 3))
        x = (rng.standard_normal((h, w, c)) * 100).astype(dtype) + 1
        y = np.asarray(ndd.grid_mask(ndd.as_tensor(x), tile=tile, ratio=ratio, angle=angle,
                                     shift_x=sx, shift_y=sy))
        keep, near = grid_ref(h, w, tile, ratio, angle, sx, sy)
        expect = x * keep[..., None].astype(dtype)
        assert y.dtype == dtype
        np.testing.assert_array_equal(y[~near], expect[~near])
        assert np.all((y[near] == x[near]) | (y[near] == 0))
        undecided += near.sum()
        total += near.size
    assert undecided < total * 0.01


def test_grid_mask_batch_per_sample_args(rng) -> None:
    xs = [rng.integers(1, 256, (h, w, 3), dtype=np.uint8) for h, w in [(20, 30), (31, 7), (40, 40)]]
    tiles, angles = [5, 8, 13], [0.0, 0.3, -1.2]
    out = ndd.grid_mask(ndd.batch(xs, layout="HWC"), tile=ndd.batch(np.int32(tiles)[:, None]), ratio=0.4,
                        angle=ndd.batch(np.float32(angles)), shift_x=2.5)
    for x, y, t, a in zip(xs, as_np(out), tiles, angles):
        keep, near = grid_ref(*x.shape[:2], t, 0.4, float(np.float32(a)), 2.5, 0.0)
        np.testing.assert_array_equal(y[~near], (x * keep[..., None])[~near])
    dense = np.stack([xs[2]] * 2)  # uniform batch, shared arguments: the vectorised path
    one = np.asarray(ndd.grid_mask(ndd.as_tensor(xs[2]), tile=7, angle=0.5))
    for y in as_np(ndd.grid_mask(ndd.batch(dense), tile=7, angle=0.5)):
        np.testing.assert_array_equal(y, one)


def test_grid_mask_float_keeps_nan_as_a_product() -> None:
    x = np.full((2, 2, 1), np.nan, np.float32)
    x[0, 0, 0] = -2.0
    y = np.asarray(ndd.grid_mask(ndd.as_tensor(x), tile=4))  # every pixel is in the black square
    assert np.signbit(y[0, 0, 0]) and y[0, 0, 0] == 0 and np.isnan(y[1, 1, 0])


# -- jpeg_compression_distortion --------------------------------------------------------


def jpeg_ref(x: np.ndarray, quality: int) -> np.ndarray:
    """Pillow's JPEG round trip (libjpeg-turbo, 4:2:0, integer DCT)."""
    b = io.BytesIO()
    Image.fromarray(x).save(b, "JPEG", quality=quality)
    return np.asarray(Image.open(b).convert("RGB"))


def test_jpeg_against_pillow(rng, photos) -> None:
    for q in (1, 10, 50, 95, 100):
        x = photos[1][::3, ::3].copy()
        np.testing.assert_array_equal(np.asarray(ndd.jpeg_compression_distortion(ndd.as_tensor(x), quality=q)),
                                      jpeg_ref(x, q))
    x = rng.integers(0, 256, (13, 21, 3), dtype=np.uint8)
    np.testing.assert_array_equal(np.asarray(ndd.jpeg_compression_distortion(ndd.as_tensor(x))), jpeg_ref(x, 50))


def test_jpeg_quality_clamped_and_monotone(photos) -> None:
    x = photos[0][::4, ::4].copy()

    def run(q: int) -> np.ndarray:
        return np.asarray(ndd.jpeg_compression_distortion(ndd.as_tensor(x), quality=q))

    np.testing.assert_array_equal(run(-5), run(1))
    np.testing.assert_array_equal(run(250), run(100))
    errs = [np.abs(run(q).astype(int) - x).mean() for q in (5, 30, 90)]
    assert errs[0] > errs[1] > errs[2]


def test_jpeg_batch_sequences_per_sample_quality(rng) -> None:
    xs = [rng.integers(0, 256, s, dtype=np.uint8) for s in [(2, 16, 24, 3), (3, 9, 8, 3)]]
    out = ndd.jpeg_compression_distortion(ndd.batch(xs, layout="FHWC"), quality=ndd.batch(np.int32([20, 80])))
    assert out.layout == "FHWC"
    for x, y, q in zip(xs, as_np(out), [20, 80]):
        for f in range(len(x)):
            np.testing.assert_array_equal(y[f], jpeg_ref(x[f], q))


# -- clahe ------------------------------------------------------------------------------


def clahe_ref(img: np.ndarray, tx: int, ty: int, clip: float) -> np.ndarray:
    """CLAHE as OpenCV describes it: a 256-bin histogram per tile (the image extended by
    reflection when the tiles do not divide it), clipped at max(clip * area / 256, 1) with the
    excess spread evenly (remainder one by one, evenly spaced), a cumulative LUT per tile, and
    bilinear blending of the 4 nearest tiles' LUTs (at pixel / tile size - 1/2)."""
    h, w = img.shape
    ph, pw = (ty - h % ty, tx - w % tx) if (h % ty or w % tx) else (0, 0)
    src = np.pad(img, ((0, ph), (0, pw)), mode="reflect")
    th, tw = src.shape[0] // ty, src.shape[1] // tx
    area = th * tw
    limit = max(int(clip * area / 256), 1) if clip > 0 else 0
    luts = np.zeros((ty, tx, 256))
    for j in range(ty):
        for i in range(tx):
            hist = np.bincount(src[j * th:(j + 1) * th, i * tw:(i + 1) * tw].ravel(), minlength=256)
            if limit:
                excess = int(np.maximum(hist - limit, 0).sum())
                hist = np.minimum(hist, limit) + excess // 256
                rest = excess % 256
                if rest:
                    hist[::max(256 // rest, 1)][:rest] += 1
            luts[j, i] = np.rint(np.cumsum(hist).astype(np.float32) * np.float32(255.0 / area))

    def taps(n: int, tiles: int, size: int) -> tuple:
        f = np.arange(n) / size - 0.5
        lo = np.floor(f).astype(int)
        return np.clip(lo, 0, tiles - 1), np.clip(lo + 1, 0, tiles - 1), f - lo

    y1, y2, ya = taps(h, ty, th)
    x1, x2, xa = taps(w, tx, tw)
    y1, y2, ya = y1[:, None], y2[:, None], ya[:, None]
    top = luts[y1, x1, img] * (1 - xa) + luts[y1, x2, img] * xa
    bottom = luts[y2, x1, img] * (1 - xa) + luts[y2, x2, img] * xa
    return np.rint(top * (1 - ya) + bottom * ya)


def _assert_close_clahe(y: np.ndarray, ref: np.ndarray) -> None:
    d = np.abs(y.astype(np.float64) - ref)
    assert d.max() <= 1 and (d > 0).mean() <= 0.1, (d.max(), (d > 0).mean())


@pytest.mark.parametrize("h, w, tx, ty, clip", [(64, 48, 4, 4, 2.0), (50, 37, 3, 5, 1.5), (20, 90, 8, 2, 0.0),
                                                (31, 31, 1, 1, 4.0), (12, 10, 16, 16, 3.0)])
def test_clahe_gray_against_reference(rng, h, w, tx, ty, clip) -> None:
    x = (rng.integers(0, 256, (h, w), dtype=np.uint8) // 3 + 40).astype(np.uint8)
    y = ndd.clahe(ndd.as_tensor(x[..., None]), tiles_x=tx, tiles_y=ty, clip_limit=clip)
    assert y.layout == "HWC" and y.shape == (h, w, 1)
    _assert_close_clahe(np.asarray(y)[..., 0], clahe_ref(x, tx, ty, clip))


def test_clahe_one_tile_no_clip_is_a_cdf_lut(gray_photo) -> None:
    x = gray_photo[::4, ::4].copy()
    cdf = np.cumsum(np.bincount(x.ravel(), minlength=256))
    expect = np.rint(cdf * 255.0 / x.size)[x]
    y = np.asarray(ndd.clahe(ndd.as_tensor(x[..., None]), tiles_x=1, tiles_y=1, clip_limit=0.0))[..., 0]
    assert np.abs(y - expect).max() <= 1


def test_clahe_rgb_modes(photos) -> None:
    x = photos[2][::6, ::6].copy()
    kw = dict(tiles_x=4, tiles_y=3, clip_limit=2.5)
    per = np.asarray(ndd.clahe(ndd.as_tensor(x), luma_only=False, **kw))
    for k in range(3):
        gray = np.asarray(ndd.clahe(ndd.as_tensor(x[..., k:k + 1].copy()), **kw))[..., 0]
        np.testing.assert_array_equal(per[..., k], gray)
        _assert_close_clahe(per[..., k], clahe_ref(x[..., k], 4, 3, 2.5))
    luma = np.asarray(ndd.clahe(ndd.as_tensor(x), **kw))  # luma_only=True: hue kept, lightness changed
    assert not np.array_equal(luma, x) and not np.array_equal(luma, per)
    gray_in = np.repeat(x[..., :1], 3, -1)  # grey pixels stay grey (up to Lab rounding)
    g = np.asarray(ndd.clahe(ndd.as_tensor(gray_in), **kw)).astype(int)
    assert np.abs(g - g[..., :1]).max() <= 2


def test_clahe_ragged_batch_and_bins_ignored(rng) -> None:
    xs = [rng.integers(0, 256, (h, w, 1), dtype=np.uint8) for h, w in [(30, 40), (17, 9)]]
    out = as_np(ndd.clahe(ndd.batch(xs), tiles_x=2, tiles_y=2, clip_limit=2.0))
    for x, y in zip(xs, out):
        _assert_close_clahe(y[..., 0], clahe_ref(x[..., 0], 2, 2, 2.0))
    same = as_np(ndd.clahe(ndd.batch(xs), tiles_x=2, tiles_y=2, clip_limit=2.0, bins=64))
    for a, b in zip(out, same):
        np.testing.assert_array_equal(a, b)


# -- debayer ----------------------------------------------------------------------------


def mosaic(rgb: np.ndarray, blue_position: tuple[int, int]) -> np.ndarray:
    """The Bayer image a sensor with the blue site at ``blue_position`` (OpenCV's counting: the
    2x2 tile starting at row 1, column 1) records of ``rgb``."""
    by, bx = blue_position
    h, w = rgb.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    blue = (yy % 2 == (by + 1) % 2) & (xx % 2 == (bx + 1) % 2)
    red = (yy % 2 == by) & (xx % 2 == bx)
    return np.where(red, rgb[..., 0], np.where(blue, rgb[..., 2], rgb[..., 1]))


def bilinear_ref(raw: np.ndarray, blue_position: tuple[int, int]) -> np.ndarray:
    """Bilinear demosaicing: each missing value is the mean (rounded half up) of the 2 or 4
    nearest sensors of its colour."""
    by, bx = blue_position
    yy, xx = np.mgrid[0:raw.shape[0], 0:raw.shape[1]]
    blue = (yy % 2 == (by + 1) % 2) & (xx % 2 == (bx + 1) % 2)
    red = (yy % 2 == by) & (xx % 2 == bx)
    k_rb = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    k_g = np.array([[0, 1, 0], [1, 4, 1], [0, 1, 0]])
    planes = []
    for m, k in ((red, k_rb), (~(red | blue), k_g), (blue, k_rb)):
        num = ndimage.convolve(raw.astype(np.int64) * m, k, mode="mirror")
        den = ndimage.convolve(m.astype(np.int64), k, mode="mirror")
        planes.append((2 * num + den) // (2 * den))
    return np.stack(planes, -1)


@pytest.mark.parametrize("blue_position", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_debayer_bilinear_interior(rng, blue_position, dtype) -> None:
    raw = rng.integers(0, np.iinfo(dtype).max + 1, (12, 16), dtype=dtype)
    y = ndd.debayer(ndd.as_tensor(raw), blue_position=list(blue_position))
    assert y.layout == "HWC" and y.dtype == ndd.dtype(dtype) and y.shape == (12, 16, 3)
    np.testing.assert_array_equal(np.asarray(y)[1:-1, 1:-1], bilinear_ref(raw, blue_position)[1:-1, 1:-1])


@pytest.mark.parametrize("algorithm", ["bilinear_ocv", "edgeaware_ocv", "vng_ocv"])
def test_debayer_recovers_smooth_image(photos, algorithm) -> None:
    rgb = ndimage.uniform_filter(photos[1][:120, :160].astype(np.float64), (5, 5, 1)).round().astype(np.uint8)
    for bp in [(0, 0), (1, 1)]:
        y = np.asarray(ndd.debayer(ndd.as_tensor(mosaic(rgb, bp)), blue_position=list(bp), algorithm=algorithm))
        err = np.abs(y[4:-4, 4:-4].astype(int) - rgb[4:-4, 4:-4])
        assert err.mean() < 3, err.mean()


def test_debayer_gray_and_case() -> None:
    raw = np.random.default_rng(3).integers(0, 256, (8, 10), dtype=np.uint8)
    g = ndd.debayer(ndd.as_tensor(raw), blue_position=[1, 0], algorithm="gray_ocv")
    assert g.shape == (8, 10, 1) and g.layout == "HWC"
    rgb = bilinear_ref(raw, (1, 0))[2:-2, 2:-2]
    lum = rgb @ np.array([0.299, 0.587, 0.114])
    assert np.abs(np.asarray(g)[2:-2, 2:-2, 0] - lum).max() <= 1.5
    up = ndd.debayer(ndd.as_tensor(raw), blue_position=[1, 0], algorithm="BILINEAR_OCV")
    np.testing.assert_array_equal(np.asarray(up), np.asarray(ndd.debayer(ndd.as_tensor(raw), blue_position=[1, 0])))


def test_debayer_sequences_and_per_sample_positions(rng) -> None:
    vids = [rng.integers(0, 256, (2, 6, 8), dtype=np.uint8), rng.integers(0, 256, (3, 4, 4), dtype=np.uint8)]
    pos = [(0, 1), (1, 1)]
    out = ndd.debayer(ndd.batch(vids, layout="FHW"), blue_position=ndd.batch([np.int32(p) for p in pos]))
    assert out.layout == "FHWC"
    for v, y, p in zip(vids, as_np(out), pos):
        for f in range(len(v)):
            one = np.asarray(ndd.debayer(ndd.as_tensor(v[f][..., None], layout="HWC"), blue_position=list(p)))
            np.testing.assert_array_equal(y[f], one)
            np.testing.assert_array_equal(y[f][1:-1, 1:-1], bilinear_ref(v[f], p)[1:-1, 1:-1])


def test_debayer_per_frame_positions(rng) -> None:
    """A per-sample value shaped (frames, 2) gives each frame its own pattern (DALI: a tensor
    argument with an F layout); (1, 2) applies to every frame."""
    v = rng.integers(0, 256, (3, 6, 8), dtype=np.uint8)
    per_frame = np.int32([[0, 0], [1, 1], [0, 1]])
    y = as_np(ndd.debayer(ndd.batch([v, v], layout="FHW"), blue_position=ndd.batch([per_frame, per_frame[1:2]])))
    for f in range(3):
        np.testing.assert_array_equal(y[0][f][1:-1, 1:-1], bilinear_ref(v[f], tuple(per_frame[f]))[1:-1, 1:-1])
        np.testing.assert_array_equal(y[1][f][1:-1, 1:-1], bilinear_ref(v[f], (1, 1))[1:-1, 1:-1])
    with raises(ValueError, "2 per-frame values, but the input has 3 frame"):
        ndd.debayer(ndd.batch([v], layout="FHW"), blue_position=ndd.batch([per_frame[:2]])).evaluate()


# -- errors -----------------------------------------------------------------------------

U8 = np.zeros((4, 6, 3), np.uint8)


@pytest.mark.parametrize("op, x, layout, kwargs, exc, match", [
    ("equalize", U8.astype(np.uint16), None, {}, ValueError, "equalize.*uint8"),
    ("equalize", U8, "DHW", {}, ValueError, "layout 'DHW'"),
    ("equalize", np.zeros(5, np.uint8), None, {}, ValueError, "1-D input"),
    ("equalize", np.zeros((4, 4, 0), np.uint8), None, {}, ValueError, "1 to 128 channels.*has 0"),
    ("grid_mask", U8.astype(np.float16), None, {}, ValueError, "grid_mask.*float16"),
    ("grid_mask", U8[..., 0], None, {}, ValueError, "HWC.*2-D"),
    ("grid_mask", U8, "CHW", {}, ValueError, "layout 'CHW'"),
    ("grid_mask", U8, None, {"tile": 0}, ValueError, "'tile' must be positive, got 0"),
    ("grid_mask", U8, None, {"angle": float("nan")}, ValueError, "'angle' must be finite"),
    ("jpeg_compression_distortion", U8[..., :1], None, {}, ValueError, "3 channels.*shape"),
    ("jpeg_compression_distortion", U8, "CHW", {}, ValueError, "layout 'CHW'"),
    ("jpeg_compression_distortion", U8.astype(np.float32), None, {}, ValueError, "uint8"),
    ("jpeg_compression_distortion", np.zeros((0, 4, 3), np.uint8), None, {}, ValueError, "empty image"),
    ("clahe", U8, None, {"tiles_x": 2, "tiles_y": 2}, TypeError, "required argument 'clip_limit'"),
    ("clahe", U8, None, {"tiles_x": 0, "tiles_y": 2, "clip_limit": 2.0}, ValueError, "'tiles_x' must be positive"),
    ("clahe", U8[..., :2], None, {"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0}, ValueError, "1 or 3.*has 2"),
    ("clahe", U8[..., 0], "HW", {"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0}, ValueError, "layout 'HW'"),
    ("clahe", U8.astype(np.int8), None, {"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0}, ValueError, "uint8"),
    ("debayer", U8[..., 0], None, {}, TypeError, "required argument 'blue_position'"),
    ("debayer", U8, None, {"blue_position": [0, 0]}, ValueError, "single-channel.*3 channels"),
    ("debayer", U8[:3, :, 0], None, {"blue_position": [0, 0]}, ValueError, "even.*3x6"),
    ("debayer", U8[..., 0], None, {"blue_position": [0, 2]}, ValueError, "2x2 tile.*\\[0, 2\\]"),
    ("debayer", U8[..., 0], None, {"blue_position": [1]}, ValueError, "two values.*got 1"),
    ("debayer", U8[..., 0], None, {"blue_position": [0, 0], "algorithm": "default_npp"}, ValueError, "GPU-only"),
    ("debayer", U8[..., 0], None, {"blue_position": [0, 0], "algorithm": "nearest"}, ValueError, "'algorithm'"),
    ("debayer", U8[..., 0].astype(np.uint16), None, {"blue_position": [0, 0], "algorithm": "vng_ocv"}, ValueError,
     "vng_ocv.*uint8"),
    ("debayer", U8[..., 0].astype(np.int16), None, {"blue_position": [0, 0]}, ValueError, "uint8, uint16"),
])
def test_errors(op, x, layout, kwargs, exc, match) -> None:
    with raises(exc, match):
        getattr(ndd, op)(ndd.as_tensor(x, layout=layout), **kwargs).evaluate()


def test_per_sample_errors_name_the_sample() -> None:
    xs = ndd.batch([np.zeros((4, 4), np.uint8)] * 2)
    with raises(ValueError, "sample 1"):
        ndd.debayer(xs, blue_position=ndd.batch([np.int32([0, 0]), np.int32([2, 0])])).evaluate()
    with raises(ValueError, "'tile' must be positive.*sample 1"):
        ndd.grid_mask(ndd.batch([U8, U8]), tile=ndd.batch(np.int32([3, -1]))).evaluate()
    with raises(ValueError, "sample 1 is an empty image"):
        ndd.clahe(ndd.batch([U8, np.zeros((0, 3, 3), np.uint8)]), tiles_x=1, tiles_y=1, clip_limit=1.0).evaluate()
