"""decoders.image / image_crop / image_random_crop and imread against Pillow and OpenCV."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
import simplejpeg
from ops_cpu_helpers import as_np, encode, pil_decode, raises
from PIL import Image, ImageOps

import ndd
from ndd import types


def _diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(int) - b.astype(int)).max())


def test_jpeg_rgb_matches_pillow(photos):
    # Both use libjpeg-turbo with the accurate IDCT and smooth upsampling: tolerance 1.
    for p in photos:
        data = encode(p, "JPEG", quality=90)
        out = as_np(ndd.decoders.image(data))
        assert out.dtype == np.uint8 and out.shape == p.shape
        assert _diff(out, pil_decode(data)) <= 1


def test_sample_and_batch_mode_ragged(photos):
    datas = [encode(p, "JPEG", quality=85) for p in photos]
    batch = ndd.decoders.image(ndd.batch(datas))
    assert isinstance(batch, ndd.Batch) and batch.layout == "HWC"
    outs = as_np(batch)
    assert [o.shape for o in outs] == [p.shape for p in photos]
    for d, o in zip(datas, outs):
        np.testing.assert_array_equal(o, as_np(ndd.decoders.image(d)))


def test_gray_output_from_color_jpeg(photos):
    data = encode(photos[0], "JPEG", quality=95)
    out = as_np(ndd.decoders.image(data, output_type=types.GRAY))
    assert out.shape == photos[0].shape[:2] + (1,)
    # libjpeg takes the Y plane; Pillow computes BT.601 luma from RGB: rounding differs slightly.
    ref = pil_decode(data, "L")
    d = np.abs(out[..., 0].astype(int) - ref)
    assert np.quantile(d, 0.999) <= 3 and d.mean() < 0.7


def test_grayscale_jpeg(gray_photo):
    data = encode(gray_photo, "JPEG", quality=90)
    gray = as_np(ndd.decoders.image(data, output_type=types.GRAY))
    assert _diff(gray[..., 0], pil_decode(data, "L")) == 0
    rgb = as_np(ndd.decoders.image(data))
    assert rgb.shape == gray_photo.shape + (3,)
    np.testing.assert_array_equal(rgb, np.repeat(gray, 3, axis=2))
    anyd = as_np(ndd.decoders.image(data, output_type=types.ANY_DATA))
    assert anyd.shape == gray_photo.shape + (1,)


def test_progressive_jpeg(photos):
    data = encode(photos[1], "JPEG", quality=90, progressive=True)
    assert _diff(as_np(ndd.decoders.image(data)), pil_decode(data)) <= 1


def test_cmyk_jpeg(photos):
    cmyk = Image.fromarray(photos[2]).convert("CMYK")
    data = encode(cmyk, "JPEG", quality=95)
    out = as_np(ndd.decoders.image(data))
    ref = pil_decode(data, "RGB")
    assert out.shape == ref.shape
    assert _diff(out, ref) <= 2
    # DALI 2.4, bit for bit: R = C * K / 255 truncated (Pillow's Adobe CMYK is stored inverted),
    # and GRAY the sum of the float32 BT.601 weights, truncated
    raw = simplejpeg.decode_jpeg(data.tobytes(), colorspace="CMYK").astype(np.uint16)
    rgb = raw[..., :3] * raw[..., 3:4] // 255
    np.testing.assert_array_equal(out, rgb)
    gray = np.floor(rgb @ np.float32([0.299, 0.587, 0.114]).astype(np.float64)).astype(np.uint8)
    np.testing.assert_array_equal(as_np(ndd.decoders.image(data, output_type=types.GRAY))[..., 0], gray)


def test_png_with_alpha(photos, rng):
    rgba = np.dstack([photos[0][:200, :300], rng.integers(0, 256, (200, 300), dtype=np.uint8)])
    data = encode(rgba, "PNG")
    np.testing.assert_array_equal(as_np(ndd.decoders.image(data, output_type=types.ANY_DATA)), rgba)
    np.testing.assert_array_equal(as_np(ndd.decoders.image(data)), rgba[..., :3])
    np.testing.assert_array_equal(as_np(ndd.decoders.image(data, output_type=types.BGR)), rgba[..., 2::-1])


@pytest.mark.parametrize("fmt,kw", [("PNG", {}), ("BMP", {}), ("TIFF", {}), ("WEBP", {"lossless": True})])
def test_lossless_formats(photos, fmt, kw):
    p = photos[1]
    np.testing.assert_array_equal(as_np(ndd.decoders.image(encode(p, fmt, **kw))), p)


@pytest.mark.parametrize("orientation", [1, 2, 3, 4, 5, 6, 7, 8])
def test_exif_orientation(photos, orientation):
    img = Image.fromarray(photos[1])
    exif = Image.Exif()
    exif[274] = orientation
    data = encode(img, "JPEG", quality=95, exif=exif.tobytes())
    ref = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data.tobytes()))).convert("RGB"))
    out = as_np(ndd.decoders.image(data))
    assert out.shape == ref.shape
    assert _diff(out, ref) <= 1
    raw = as_np(ndd.decoders.image(data, adjust_orientation=False))
    assert raw.shape == photos[1].shape


def test_bgr_ycbcr_float(photos):
    data = encode(photos[0], "JPEG", quality=90)
    rgb = as_np(ndd.decoders.image(data)).astype(np.float64)
    bgr = as_np(ndd.decoders.image(data, output_type=types.BGR))
    assert _diff(bgr, rgb[..., ::-1]) <= 1
    ycc = as_np(ndd.decoders.image(data, output_type=types.YCbCr)).astype(np.float64)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    # BT.601 studio swing with the standard's coefficients, rounded to nearest (DALI 2.4's
    # output bit for bit): exactly, apart from values within float32 rounding of a half
    ref = np.stack([16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255,
                    128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255,
                    128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255], axis=2)
    near_half = np.abs(ref - np.floor(ref) - 0.5) < 1e-4
    np.testing.assert_array_equal(ycc[~near_half], np.clip(np.rint(ref), 0, 255)[~near_half])
    f = ndd.decoders.image(data, dtype=ndd.float32)
    assert f.dtype == ndd.float32
    np.testing.assert_allclose(as_np(f), rgb / 255, atol=1e-6)


def test_ycbcr_of_other_types_uses_full_precision(rng):
    """YCbCr as float32 is computed from the RGB values, not from 8-bit YCbCr: Y from 16/256,
    Cb and Cr about 1/2 (DALI 2.4's offsets, fitted from its output, which this matches to
    6e-7); from a 16-bit image, uint8 YCbCr is that rounded once (DALI's values exactly)."""
    m = np.array([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]]) / 255
    for bits in (8, 16):
        rgb = rng.integers(0, 2**bits, (9, 11, 3)).astype(np.uint8 if bits == 8 else np.uint16)
        ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
        data = np.frombuffer(buf.tobytes(), np.uint8)
        unit = rgb / (2**bits - 1) @ m.T + [16 / 256, 0.5, 0.5]
        got = as_np(ndd.decoders.image(data, output_type=types.YCbCr, dtype=ndd.float32))
        np.testing.assert_allclose(got, unit, atol=1e-6)
        u8 = as_np(ndd.decoders.image(data, output_type=types.YCbCr))
        y8 = rgb * (255 / (2**bits - 1)) @ m.T + [16, 128, 128]
        near_half = np.abs(y8 - np.floor(y8) - 0.5) < 1e-4
        np.testing.assert_array_equal(u8[~near_half], np.clip(np.floor(y8 + 0.5), 0, 255)[~near_half])


def test_png_any_data_keeps_its_own_channels(rng):
    """ANY_DATA of a palette PNG with transparency gives its RGB colours (DALI 2.4 leaves the
    alpha out), of a grey PNG with alpha the grey and alpha channels; peek_image_shape says
    the same."""
    la = rng.integers(0, 256, (9, 11, 2), dtype=np.uint8)
    pal = Image.fromarray(rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)).quantize(16)
    pal.info["transparency"] = 0
    for img, want in ((Image.fromarray(la, "LA"), la), (pal, np.asarray(pal.convert("RGB")))):
        buf = io.BytesIO()
        img.save(buf, "PNG", **({"transparency": 0} if img.mode == "P" else {}))
        data = np.frombuffer(buf.getvalue(), np.uint8)
        got = as_np(ndd.decoders.image(data, output_type=types.ANY_DATA))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(as_np(ndd.peek_image_shape(data, image_type=types.ANY_DATA)), want.shape)


def test_corrupt_and_truncated_name_the_sample(photos):
    good = encode(photos[0], "JPEG")
    truncated = good[: good.size // 2]
    with raises(ValueError, r"decoders.image.*sample 1.*(corrupt|truncated)"):
        as_np(ndd.decoders.image(ndd.batch([good, truncated])))
    png = encode(photos[0], "PNG")
    with raises(ValueError, r"sample 2"):
        as_np(ndd.decoders.image(ndd.batch([good, good, png[: png.size // 2]])))
    with raises(ValueError, r"sample 0"):
        as_np(ndd.decoders.image(np.frombuffer(b"not an image at all", np.uint8)))


def test_recoverable_corrupt_jpeg_decodes_with_a_warning(photos):
    """Bad bytes in a scan, or a scan cut short before the end marker: libjpeg decodes what it
    can and DALI 2.4 returns that; ndd too (the same pixels), warning with the sample's name.
    A file that ends early still raises."""
    good = encode(photos[1][:64, :48], "JPEG", quality=90)
    cut = np.concatenate([good[: good.size * 6 // 10], np.array([0xFF, 0xD9], np.uint8)])
    for batch in ([good, cut], [good, cut, photos[0]]):  # one size (the dense path) and ragged
        samples = [b if b.ndim == 1 else encode(b, "JPEG") for b in batch]
        with pytest.warns(RuntimeWarning, match=r"sample 1 .*decoders.image.*Corrupt JPEG data"):
            out = as_np(ndd.decoders.image(ndd.batch(samples)))
        ref = simplejpeg.decode_jpeg(cut.tobytes(), strict=False)
        np.testing.assert_array_equal(out[1], ref)
    with raises(ValueError, r"sample 0.*(corrupt|truncated)"):
        as_np(ndd.decoders.image(ndd.batch([good[: good.size * 6 // 10]])))


def test_float_tiff_is_scaled_to_uint8():
    """A float TIFF's samples in [0, 1] come out times 255 (DALI 2.4, exact); OpenCV reads a
    one-channel float TIFF only unchanged, so RGB needed a second read."""
    f = np.random.default_rng(2).uniform(0, 1, (9, 11)).astype(np.float32)
    ok, buf = cv2.imencode(".tif", f)
    assert ok
    data = np.frombuffer(buf.tobytes(), np.uint8)
    ref = np.floor(f * np.float32(255) + np.float32(0.5)).astype(np.uint8)
    for ot, want in ((types.GRAY, ref[..., None]), (types.ANY_DATA, ref[..., None]), (types.RGB, np.dstack([ref] * 3))):
        np.testing.assert_array_equal(as_np(ndd.decoders.image(data, output_type=ot)), want)


def test_bad_dtype_argument(photos):
    with raises(ValueError, r"decoders.image.*'dtype'"):
        ndd.decoders.image(encode(photos[0], "PNG"), dtype=ndd.int64)


def test_integer_dtypes_scale_to_the_type_maximum():
    """dtype int8/int16/int32/uint32 scale 0..255 to 0..max (float32 products, rounded):
    values observed from DALI 2.4 for the levels 0, 1, 2, 3 and 255."""
    levels = np.array([[0, 1, 2, 3, 255]], np.uint8)
    data = encode(levels, "PNG")
    want = {ndd.int8: [0, 0, 1, 1, 127], ndd.int16: [0, 128, 257, 385, 32767],
            ndd.int32: [0, 8421505, 16843010, 25264516, 2147483647],
            ndd.uint32: [0, 16843010, 33686020, 50529032, 4294967295]}
    for dt, values in want.items():
        out = ndd.decoders.image(data, output_type=types.GRAY, dtype=dt)
        assert out.dtype == dt
        np.testing.assert_array_equal(as_np(out)[0, :, 0], values)


def test_image_crop(photos):
    data = encode(photos[0], "PNG")
    out = as_np(ndd.decoders.image_crop(data, crop=(100, 200), crop_pos_x=0.25, crop_pos_y=1.0))
    y0, x0 = 512 - 100, round(0.25 * (512 - 200))
    np.testing.assert_array_equal(out, photos[0][y0:y0 + 100, x0:x0 + 200])
    with raises(ValueError, "outside the input of shape 512x512") as info:
        as_np(ndd.decoders.image_crop(data, crop=(600, 200)))
    assert "out_of_bounds_policy" not in str(info.value)  # image_crop has no such argument


def test_image_random_crop_deterministic_and_seven_words(photos):
    datas = ndd.batch([encode(p, "PNG") for p in photos])
    rng = ndd.random.RNG(seed=42)
    before = rng._draws
    a = as_np(ndd.decoders.image_random_crop(datas, rng=rng))
    assert rng._draws - before == 7
    b = as_np(ndd.decoders.image_random_crop(datas, rng=ndd.random.RNG(seed=42)))
    for x, y, p in zip(a, b, photos):
        np.testing.assert_array_equal(x, y)
        assert x.shape[0] <= p.shape[0] and x.shape[1] <= p.shape[1]
        assert 0.08 * p.shape[0] * p.shape[1] * 0.9 <= x.shape[0] * x.shape[1]
    c = as_np(ndd.decoders.image_random_crop(datas, rng=rng))
    assert any(x.shape != y.shape for x, y in zip(a, c))


def test_imread(tmp_path, photos):
    from ndd._imread import imread

    paths = []
    for i, p in enumerate(photos):
        path = tmp_path / f"img{i}.png"
        Image.fromarray(p).save(path)
        paths.append(path)
    np.testing.assert_array_equal(as_np(imread(str(paths[0]))), photos[0])
    batch = imread(paths)
    assert isinstance(batch, ndd.Batch)
    for o, p in zip(as_np(batch), photos):
        np.testing.assert_array_equal(o, p)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 definitely not a jpeg")
    with raises(ValueError, "bad.jpg"):
        imread([paths[0], bad])


def test_random_crop_fallback_window_as_dali():
    """When no attempt fits, the window is the image cut to the nearest allowed aspect ratio,
    its size truncated, at a uniformly random place, as DALI 2.4 (37x53 at ratio 3..4: 17
    rows; 120x160 at ratio 1: 120x120 with its left column anywhere in 0..40)."""
    img = np.repeat(np.arange(37, dtype=np.uint8)[:, None, None] * 6, 53, axis=1).repeat(3, axis=2)
    data = encode(img, "PNG")
    out = as_np(ndd.decoders.image_random_crop(data, random_area=[0.9, 1.0], random_aspect_ratio=[3.0, 4.0],
                                               num_attempts=1, rng=ndd.random.RNG(0)))
    assert out.shape == (17, 53, 3)
    y0 = int(out[0, 0, 0]) // 6
    np.testing.assert_array_equal(out, img[y0:y0 + 17])
    cols = np.zeros((120, 160, 3), np.uint8)
    cols[..., 1] = np.arange(160)
    out = ndd.decoders.image_random_crop(ndd.batch([encode(cols, "PNG")] * 200), random_area=[1.0, 1.0],
                                         random_aspect_ratio=[1.0, 1.0], num_attempts=1, rng=ndd.random.RNG(3))
    assert out.shape == [(120, 120, 3)] * 200
    left = {int(as_np(t)[0, 0, 1]) for t in out.tensors}
    assert min(left) == 0 and max(left) == 40 and len(left) > 30


def test_random_crop_windows_keep_their_aspect_ratio_after_rounding():
    """A window whose rounded sides leave the aspect range is a failed attempt (DALI 2.4's
    never leave it; about 1% did here)."""
    pos = np.zeros((37, 53, 3), np.uint8)
    pos[..., 0], pos[..., 1] = np.arange(37)[:, None], np.arange(53)
    out = ndd.decoders.image_random_crop(ndd.batch([encode(pos, "PNG")] * 2000), rng=ndd.random.RNG(4))
    ratios = np.array([t.shape[1] / t.shape[0] for t in out.tensors])
    assert ratios.min() >= 0.75 and ratios.max() <= 4 / 3


@pytest.mark.parametrize("ext", [".png", ".tiff"])
def test_16_bit_images_keep_their_precision(rng, ext):
    """A 16-bit PNG or TIFF decodes at full precision, as DALI 2.4 (exact): dtype=uint16 gives
    the stored values, float32 value / 65535, uint8 the value / 257 rounded (ndd went
    through 8 bits, and OpenCV's RGB read scrambled 16-bit TIFF)."""
    rgb = rng.integers(0, 65536, (13, 17, 3), dtype=np.uint16)
    ok, buf = cv2.imencode(ext, np.ascontiguousarray(rgb[..., ::-1]))  # OpenCV writes BGR
    assert ok
    data = np.frombuffer(buf.tobytes(), np.uint8)
    np.testing.assert_array_equal(as_np(ndd.decoders.image(data, dtype=ndd.uint16)), rgb)
    np.testing.assert_allclose(as_np(ndd.decoders.image(data, dtype=ndd.float32)), rgb / 65535, atol=1e-6)
    np.testing.assert_array_equal(as_np(ndd.decoders.image(data)), np.floor(rgb / 257 + 0.5).astype(np.uint8))
    bgr = as_np(ndd.decoders.image(data, output_type=types.BGR, dtype=ndd.uint16))
    np.testing.assert_array_equal(bgr, rgb[..., ::-1])
    gray = rng.integers(0, 65536, (13, 17), dtype=np.uint16)
    ok, buf = cv2.imencode(ext, gray)
    g = as_np(ndd.decoders.image(np.frombuffer(buf.tobytes(), np.uint8), output_type=types.GRAY, dtype=ndd.uint16))
    np.testing.assert_array_equal(g[..., 0], gray)
