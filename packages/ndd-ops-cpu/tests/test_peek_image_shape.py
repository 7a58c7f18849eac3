"""peek_image_shape: the decoded shape from the header, against DALI 2.4's observed values,
Pillow's sizes and ndd's own decoder."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import ndd
import ndd.types as types


def _enc(arr: np.ndarray, fmt: str, exif: int | None = None) -> np.ndarray:
    buf = io.BytesIO()
    kw = {}
    if exif is not None:
        e = Image.Exif()
        e[0x0112] = exif
        kw["exif"] = e.tobytes()
    Image.fromarray(arr).save(buf, format=fmt, **kw)
    return np.frombuffer(buf.getvalue(), np.uint8)


RGB, GRAY, RGBA = np.zeros((20, 30, 3), np.uint8), np.zeros((20, 30), np.uint8), np.zeros((20, 30, 4), np.uint8)
IMAGES = {"jpeg_rgb": _enc(RGB, "JPEG"), "jpeg_gray": _enc(GRAY, "JPEG"), "png_rgba": _enc(RGBA, "PNG"),
          "png_gray": _enc(GRAY, "PNG"), "jpeg_exif6": _enc(RGB, "JPEG", 6), "jpeg_exif3": _enc(RGB, "JPEG", 3),
          "bmp": _enc(RGB, "BMP"), "tiff": _enc(RGB, "TIFF"), "webp": _enc(RGB, "WEBP")}
VARIANTS = [{}, {"image_type": types.GRAY}, {"image_type": types.ANY_DATA}, {"adjust_orientation": False},
            {"image_type": types.YCbCr}, {"image_type": types.BGR}]
# What DALI 2.4 returned for these images and arguments (nvidia-dali-cuda120==2.4.0, CPU).
DALI = {
    "jpeg_rgb": ["20,30,3", "20,30,1", "20,30,3", "20,30,3", "20,30,3", "20,30,3"],
    "jpeg_gray": ["20,30,3", "20,30,1", "20,30,1", "20,30,3", "20,30,3", "20,30,3"],
    "png_rgba": ["20,30,3", "20,30,1", "20,30,4", "20,30,3", "20,30,3", "20,30,3"],
    "png_gray": ["20,30,3", "20,30,1", "20,30,1", "20,30,3", "20,30,3", "20,30,3"],
    "jpeg_exif6": ["30,20,3", "30,20,1", "30,20,3", "20,30,3", "30,20,3", "30,20,3"],
    "jpeg_exif3": ["20,30,3", "20,30,1", "20,30,3", "20,30,3", "20,30,3", "20,30,3"],
    "bmp": ["20,30,3", "20,30,1", "20,30,3", "20,30,3", "20,30,3", "20,30,3"],
    "tiff": ["20,30,3", "20,30,1", "20,30,3", "20,30,3", "20,30,3", "20,30,3"],
    "webp": ["20,30,3", "20,30,1", "20,30,3", "20,30,3", "20,30,3", "20,30,3"],
}


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_shapes_as_dali(name: str) -> None:
    for kw, want in zip(VARIANTS, DALI[name]):
        got = ndd.peek_image_shape(ndd.as_tensor(IMAGES[name]), **kw)
        assert got.dtype == ndd.int64 and got.layout is None
        assert ",".join(map(str, np.asarray(got))) == want, (name, kw)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "BMP", "TIFF", "WEBP"])
def test_matches_pillow_and_the_decoder(fmt: str) -> None:
    rng = np.random.default_rng(0)
    for h, w in [(1, 1), (7, 300), (333, 5), (64, 48)]:
        for channels in (1, 3, 4):
            if channels == 4 and fmt in ("JPEG", "BMP"):
                continue
            arr = rng.integers(0, 256, (h, w, channels) if channels > 1 else (h, w), np.uint8)
            data = _enc(arr, fmt)
            assert Image.open(io.BytesIO(data.tobytes())).size == (w, h)
            for image_type in (types.RGB, types.GRAY, types.ANY_DATA):
                peek = np.asarray(ndd.peek_image_shape(ndd.as_tensor(data), image_type=image_type))
                decoded = ndd.decoders.image(ndd.as_tensor(data), output_type=image_type)
                assert tuple(peek) == tuple(decoded.shape), (fmt, h, w, channels, image_type)


def test_batches_and_dtypes() -> None:
    batch = ndd.as_batch([IMAGES["jpeg_rgb"], IMAGES["jpeg_exif6"], IMAGES["png_gray"]])
    out = ndd.peek_image_shape(batch, image_type=types.ANY_DATA)
    assert isinstance(out, ndd.Batch) and out.batch_size == 3
    assert [tuple(np.asarray(t)) for t in out.tensors] == [(20, 30, 3), (30, 20, 3), (20, 30, 1)]
    for dt, np_dt in [(ndd.int32, np.int32), (ndd.uint32, np.uint32), (ndd.uint64, np.uint64),
                      (ndd.float32, np.float32), (ndd.float64, np.float64)]:
        got = np.asarray(ndd.peek_image_shape(ndd.as_tensor(IMAGES["webp"]), dtype=dt))
        assert got.dtype == np_dt and got.tolist() == [20, 30, 3]


def test_errors_name_the_sample_and_argument() -> None:
    batch = ndd.as_batch([IMAGES["jpeg_rgb"], np.frombuffer(b"definitely not an image", np.uint8)])
    with pytest.raises(Exception, match="cannot read the header of sample 1: not an image in a supported format"):
        ndd.peek_image_shape(batch).evaluate()
    with pytest.raises(ValueError, match="argument 'dtype' must be int32, uint32, int64, uint64"):
        ndd.peek_image_shape(ndd.as_tensor(IMAGES["jpeg_rgb"]), dtype=ndd.uint8)
    with pytest.raises(ValueError, match='Invalid device "gpu'):
        ndd.peek_image_shape(ndd.as_tensor(IMAGES["jpeg_rgb"]), device="gpu")


def test_tiff_orientation_and_grey_with_alpha() -> None:
    rgb = Image.fromarray(np.zeros((20, 30, 3), np.uint8))
    for o, want, raw in [(1, [20, 30, 3], [20, 30, 3]), (6, [30, 20, 3], [20, 30, 3]), (8, [30, 20, 3], [20, 30, 3])]:
        buf = io.BytesIO()
        rgb.save(buf, format="TIFF", tiffinfo={0x0112: o})
        data = ndd.as_tensor(np.frombuffer(buf.getvalue(), np.uint8))
        assert np.asarray(ndd.peek_image_shape(data)).tolist() == want  # as DALI 2.4
        assert np.asarray(ndd.peek_image_shape(data, adjust_orientation=False)).tolist() == raw
        assert tuple(want) == ndd.decoders.image(data).shape
    buf = io.BytesIO()
    Image.fromarray(np.zeros((5, 7, 2), np.uint8), "LA").save(buf, format="PNG")
    data = ndd.as_tensor(np.frombuffer(buf.getvalue(), np.uint8))
    peek = np.asarray(ndd.peek_image_shape(data, image_type=types.ANY_DATA)).tolist()
    assert tuple(peek) == ndd.decoders.image(data, output_type=types.ANY_DATA).shape == (5, 7, 2)  # grey and alpha (DALI 2.4 peeks 2)
