"""Image decoders: ``decoders.image``, ``decoders.image_crop``, ``decoders.image_random_crop``;
and ``peek_image_shape``.

JPEG goes through libjpeg-turbo (simplejpeg): measured fastest here, see the
README. PNG, BMP, TIFF and WebP go through OpenCV's ``imdecode``.
"""

from __future__ import annotations

import io
import struct
import warnings
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
import simplejpeg
from PIL import Image

from ndd.plugins import BatchData, KernelArgs, KernelContext, slice_box
from ndd.types import DALIImageType

from ._common import _PARALLEL_MIN_BYTES, cast_to, map_samples
from ._crop import crop_window, random_windows

_RGB, _BGR, _GRAY, _YCBCR, _ANY = (DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY,
                                   DALIImageType.YCbCr, DALIImageType.ANY_DATA)

# ITU-R BT.601 studio-swing RGB -> YCbCr (Y in 16..235, Cb/Cr in 16..240) with the standard's
# full-precision coefficients, rounded to nearest: DALI 2.4's decoder output, bit for bit
# (checked on 12,288 random values). Rows: Y, Cb, Cr.
_YCBCR_MATRIX = (np.array([[65.481, 128.553, 24.966],
                           [-37.797, -74.203, 112.0],
                           [112.0, -93.786, -18.214]]) / 255).astype(np.float32)
_YCBCR_OFFSET = np.array([16.0, 128.0, 128.0], np.float32)
_YCBCR_UNIT_OFFSET = np.array([16 / 256, 0.5, 0.5], np.float32)
_SCALED_INTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.uint32))
_GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114], np.float32).astype(np.float64)


class DecodeError(Exception):
    """Why one sample could not be decoded (turned into a ValueError with the sample index)."""


def exif_orientation(data: bytes) -> int:
    """The EXIF orientation tag (1..8) of a JPEG, 1 when absent.

    Hand-written: it only walks the JPEG markers up to APP1 and one TIFF IFD,
    which costs ~1 us against ~30 us for opening the file with Pillow.
    """
    n = len(data)
    pos = 2
    while pos + 4 <= n and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker in (0xD9, 0xDA):  # end of image / start of scan: no more metadata
            break
        size = (data[pos + 2] << 8) | data[pos + 3]
        if marker == 0xE1 and data[pos + 4:pos + 10] == b"Exif\0\0":
            return _tiff_orientation(data[pos + 10:pos + 2 + size])
        pos += 2 + size
    return 1


def _tiff_orientation(t: bytes) -> int:
    if len(t) < 8 or t[:2] not in (b"II", b"MM"):
        return 1
    e = "<" if t[:2] == b"II" else ">"
    ifd = struct.unpack_from(e + "I", t, 4)[0]
    if ifd + 2 > len(t):
        return 1
    count = struct.unpack_from(e + "H", t, ifd)[0]
    for k in range(count):
        off = ifd + 2 + 12 * k
        if off + 12 > len(t):
            break
        tag, typ = struct.unpack_from(e + "HH", t, off)
        if tag == 0x0112 and typ == 3:
            v = struct.unpack_from(e + "H", t, off + 8)[0]
            return v if 1 <= v <= 8 else 1
    return 1


def apply_orientation(img: np.ndarray, o: int) -> np.ndarray:
    """Turn a decoded image upright according to EXIF orientation ``o``."""
    if o == 2:
        return img[:, ::-1]
    if o == 3:
        return img[::-1, ::-1]
    if o == 4:
        return img[::-1]
    if o == 5:
        return img.swapaxes(0, 1)
    if o == 6:
        return img.swapaxes(0, 1)[:, ::-1]
    if o == 7:
        return img.swapaxes(0, 1)[::-1, ::-1]
    if o == 8:
        return img.swapaxes(0, 1)[::-1]
    return img


def _has_adobe_marker(data: bytes) -> bool:
    pos = 2
    n = len(data)
    while pos + 4 <= n and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker in (0xD9, 0xDA):
            break
        size = (data[pos + 2] << 8) | data[pos + 3]
        if marker == 0xEE and data[pos + 4:pos + 9] == b"Adobe":
            return True
        pos += 2 + size
    return False


def _cmyk_to_rgb(cmyk: np.ndarray, inverted: bool) -> np.ndarray:
    """R = (255 - C) * (255 - K) / 255 truncated (as DALI), with Adobe's inverted storage
    taken into account."""
    x = cmyk.astype(np.uint16)
    if not inverted:
        x = 255 - x
    rgb = x[..., :3] * x[..., 3:4]
    return (rgb // 255).astype(np.uint8)


def _from_rgb(rgb: np.ndarray, out: DALIImageType) -> np.ndarray:
    if out in (_RGB, _ANY):
        return rgb
    if out == _BGR:
        return rgb[..., ::-1]
    if out == _GRAY:
        return cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)[..., None]
    # In float and rounded once (OpenCV's uint8 transform is fixed point, off by 1 at times).
    y = rgb.astype(np.float32) @ _YCBCR_MATRIX.T + _YCBCR_OFFSET
    return np.clip(np.rint(y), 0, 255).astype(np.uint8)


_EXIF = b"Exif\x00\x00"
_SMALL_JPEG_BYTES = 4096  # mean encoded size under which a batch decodes on one thread


def _jpeg(data: np.ndarray, colorspace: str, fastdct: bool, where: Callable[[], str],
          buffer: np.ndarray | None = None) -> Any:
    """libjpeg-turbo's decode. Data that libjpeg reports as corrupt but decodes anyway
    (bad bytes in a scan, a scan cut short before the end marker) is decoded as DALI
    does, with a warning naming the sample; a file that ends early still raises."""
    try:
        return simplejpeg.decode_jpeg(data, colorspace=colorspace, fastdct=fastdct, buffer=buffer)
    except ValueError as e:
        if not str(e).startswith("Corrupt JPEG data"):
            raise
        warnings.warn(f"decoding {where()}: {e}; using what libjpeg recovered", RuntimeWarning, stacklevel=2)
        return simplejpeg.decode_jpeg(data, colorspace=colorspace, fastdct=fastdct, buffer=buffer, strict=False)


def _decode_jpeg(data: np.ndarray, out: DALIImageType, fast_idct: bool, orient: bool,
                 where: Callable[[], str]) -> np.ndarray:
    try:
        _, _, space, _ = simplejpeg.decode_jpeg_header(data)
        if space in ("CMYK", "YCCK"):
            rgb = _cmyk_to_rgb(_jpeg(data, "CMYK", fast_idct, where), _has_adobe_marker(data[:65536].tobytes()))
            if out == _GRAY:  # DALI: the float32 weights' sum, truncated (exact on random CMYK)
                img = (rgb.astype(np.float64) @ _GRAY_WEIGHTS).astype(np.uint8)
            else:
                img = _from_rgb(rgb, out)
        elif out == _GRAY or (out == _ANY and space == "Gray"):
            img = _jpeg(data, "GRAY", fast_idct, where)
        elif out == _BGR:
            img = _jpeg(data, "BGR", fast_idct, where)
        else:
            img = _from_rgb(_jpeg(data, "RGB", fast_idct, where), out)
    except ValueError as e:
        raise DecodeError(f"corrupt or truncated JPEG data ({e})") from None
    if img.ndim == 2:
        img = img[..., None]
    if orient:
        img = apply_orientation(img, exif_orientation(data[:65536].tobytes()))
    return img


def _decode_other(data: np.ndarray, out: DALIImageType, orient: bool) -> np.ndarray:
    """PNG, BMP, TIFF, WebP, ...: uint8, or uint16 for 16-bit images (kept to the end, as
    DALI does, so that dtype=uint16 or float32 loses nothing)."""
    # IMREAD_UNCHANGED keeps alpha and 16-bit depth but ignores EXIF orientation; the
    # colour modes apply it unless told not to. ANY_DATA therefore keeps the stored
    # orientation. GRAY is the decoder's own conversion (DALI's values). Colour is read as
    # BGR: OpenCV 5.0's IMREAD_COLOR_RGB | IMREAD_ANYDEPTH scrambles 16-bit TIFF.
    keep = 0 if orient else cv2.IMREAD_IGNORE_ORIENTATION
    if out == _ANY:
        img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    elif out == _GRAY:
        img = cv2.imdecode(data, cv2.IMREAD_GRAYSCALE | cv2.IMREAD_ANYDEPTH | keep)
    else:
        img = cv2.imdecode(data, cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH | keep)
    if img is None and out != _ANY:  # OpenCV reads float TIFFs in colour only unchanged
        img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
        if img is not None and orient and data[:2].tobytes() in (b"II", b"MM"):
            img = apply_orientation(img, _tiff_orientation(data.tobytes()))
    if img is None:
        raise DecodeError("unsupported format or corrupt data")
    if img.dtype.kind == "f":  # samples in [0, 1] (float TIFF), scaled as DALI does
        img = cast_to(img * np.float32(255), np.uint8)
    elif img.dtype not in (np.uint8, np.uint16):
        img = cast_to(img, np.uint8)
    if img.ndim == 2:
        img = img[..., None]
    c = img.shape[2]
    if c in (3, 4):  # OpenCV gives BGR(A)
        img = cv2.cvtColor(img, cv2.COLOR_BGRA2RGBA if c == 4 else cv2.COLOR_BGR2RGB)
    if out == _ANY and c == 4:  # a PNG's own channels, as DALI: a palette without its alpha, grey with alpha
        ct = _png_color_type(data)
        if ct == 3:
            img = np.ascontiguousarray(img[..., :3])
        elif ct == 4:
            img = np.ascontiguousarray(img[..., ::3])
    if out == _ANY or (out == _GRAY and c == 1):
        return img
    rgb = np.repeat(img, 3, axis=2) if c == 1 else img[..., :3]
    if out == _YCBCR and rgb.dtype == np.uint16:  # from the 16-bit values, rounded once (DALI's, exactly)
        y = (rgb * (255 / 65535)) @ _YCBCR_MATRIX.T.astype(np.float64) + _YCBCR_OFFSET
        return np.clip(np.floor(y + 0.5), 0, 255).astype(np.uint8)
    return _from_rgb(rgb, out)


def _ycbcr_unit(rgb: np.ndarray) -> np.ndarray:
    """YCbCr in [0, 1] (float32) of uint8 or uint16 RGB at its full precision: Y from 16/256,
    Cb and Cr about 1/2, as DALI's float output (within 6e-7)."""
    top = np.float32(1 / 65535 if rgb.dtype == np.uint16 else 1 / 255)
    return (rgb.astype(np.float32) * top) @ _YCBCR_MATRIX.T + _YCBCR_UNIT_OFFSET


def _png_color_type(data: Any) -> int | None:
    """The colour type in a PNG's header (3: palette, 4: grey with alpha), None for other files."""
    head = bytes(data[:26])
    return head[25] if len(head) == 26 and head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" else None


def _u16_to_u8(x: np.ndarray) -> np.ndarray:
    return ((x.astype(np.uint32) + 128) // 257).astype(np.uint8)  # x * 255 / 65535, rounded


def decode_one(data: Any, out: DALIImageType, fast_idct: bool, orient: bool,
               where: Callable[[], str] = lambda: "an image") -> np.ndarray:
    """Decode one encoded image (``where()`` names it in warnings) to an HWC array, uint8
    (uint16 for 16-bit images; raises DecodeError)."""
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise DecodeError(f"expected a 1-D uint8 array of encoded bytes, got {data.dtype} of shape {data.shape}")
    if data.size < 8:
        raise DecodeError(f"only {data.size} bytes: not an image")
    if data[0] == 0xFF and data[1] == 0xD8:
        return _decode_jpeg(data, out, fast_idct, orient, where)
    return _decode_other(data, out, orient)


def _to_dtype(img: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt in _SCALED_INTS:  # scaled to the type's maximum in float32, as DALI (bit for bit)
        top = np.float32(1 / 65535 if img.dtype == np.uint16 else 1 / 255)
        return cast_to(img.astype(np.float32) * top * np.float32(np.iinfo(dt).max), dt)
    if img.dtype == np.uint16:  # a 16-bit image, at full precision
        if dt == np.uint16:
            return np.ascontiguousarray(img)
        if dt == np.uint8:
            return _u16_to_u8(img)
        return img.astype(np.float32) * np.float32(1 / 65535)
    if dt == np.uint8:
        return np.ascontiguousarray(img)
    if dt == np.uint16:
        return img.astype(np.uint16) * np.uint16(257)
    return img.astype(np.float32) * np.float32(1 / 255)


def _decode_batch(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs, post: Any = None) -> list:
    samples = inputs[0].samples
    out = args["output_type"]
    fast = args["use_fast_idct"]
    orient = args["adjust_orientation"]
    dt = args["dtype"].numpy_dtype

    # YCbCr of another type than uint8 is computed from the RGB pixels at full precision, as
    # DALI does (through 8 bits it was up to 1/255 off)
    unit_ycbcr = out == _YCBCR and dt != np.uint8

    def one(i: int) -> np.ndarray:
        try:
            img = decode_one(samples[i], _RGB if unit_ycbcr else out, fast, orient,
                             lambda: f"{inputs[0].describe(i)} in `{ctx.op}`")
        except DecodeError as e:
            raise ValueError(f"Operator `{ctx.op}`: cannot decode {inputs[0].describe(i)}: {e}") from None
        if post is not None:
            img = post(i, img)
        if unit_ycbcr:
            y = _ycbcr_unit(img)
            return y if dt == np.float32 else cast_to(y * np.float32(np.iinfo(dt).max), dt)
        return _to_dtype(img, dt)

    # Threads pay off only for images that take long to decode: handing a ~10 µs decode
    # of a tiny JPEG to another thread costs more than it saves (64 28x28 JPEGs: 650 µs
    # serial, 850 µs on two threads; 16 256x256 JPEGs: 12.1 ms serial, 7.6 ms on two).
    total = sum(s.size for s in samples)
    small = total < _SMALL_JPEG_BYTES * max(len(samples), 1)
    return map_samples(ctx, one, len(samples), 0 if small else total * 8)


_DENSE_SPACES = {_RGB: ("RGB", 3), _BGR: ("BGR", 3), _GRAY: ("GRAY", 1)}


def _decode_dense(ctx: KernelContext, bd: BatchData, args: KernelArgs) -> np.ndarray | None:
    """Decode a batch of JPEGs of one size straight into one (N, H, W, C) uint8 array.

    Each image is decoded by libjpeg-turbo into its slice of the output (simplejpeg's
    ``buffer``), on the thread pool, instead of into its own array that ``np.stack``
    then copies (64 256x256 RGB JPEGs: the copy and the fresh pages cost ~3-5 ms of
    ~15); tiny images are decoded on their own and copied in (64 28x28: 25 µs less). The headers are read first (~2 µs each); None (the general path runs) unless
    every sample is a baseline/progressive JPEG whose colour space libjpeg converts
    itself (not CMYK/YCCK), of one size, upright (EXIF orientation 1 or ignored), and
    the output is RGB, BGR or GRAY uint8. Same libjpeg calls, so the same pixels.
    """
    out, samples = args["output_type"], bd.samples
    if len(samples) < 2 or out not in _DENSE_SPACES or args["dtype"].numpy_dtype != np.uint8:
        return None
    space, c = _DENSE_SPACES[out]
    orient = args["adjust_orientation"]
    shape = None
    data = []
    for s in samples:
        d = s if type(s) is np.ndarray else np.asarray(s)
        if d.dtype != np.uint8 or d.ndim != 1 or d.size < 8:
            return None
        head = d[:65536].tobytes()  # the markers before the image data (a copy of <= 64 KiB)
        if head[:2] != b"\xff\xd8":
            return None
        try:
            h, w, cs, _ = simplejpeg.decode_jpeg_header(d)
        except ValueError:
            return None
        if cs in ("CMYK", "YCCK") or (shape is not None and (h, w) != shape):
            return None
        # A substring test first: walking the markers in Python costs ~3 µs a JPEG.
        if orient and _EXIF in head and exif_orientation(head) != 1:
            return None
        shape = (h, w)
        data.append(d)
    dense = np.empty((len(data), *shape, c), np.uint8)
    fast = args["use_fast_idct"]
    decode = simplejpeg.decode_jpeg
    n = len(data)
    small = sum(d.size for d in data) < _SMALL_JPEG_BYTES * n  # see _decode_batch

    def run(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            try:
                if small:  # a tiny image's copy costs less than simplejpeg's checks of a buffer (~1 µs)
                    dense[i] = decode(data[i], space, fast)
                else:
                    decode(data[i], space, fast, buffer=dense[i])
            except ValueError:
                try:  # the general path's handling of corrupt data (rare: no cost to the loop above)
                    _jpeg(data[i], space, fast, lambda i=i: f"{bd.describe(i)} in `{ctx.op}`", buffer=dense[i])
                except ValueError as e:
                    raise ValueError(f"Operator `{ctx.op}`: cannot decode {bd.describe(i)}: corrupt or truncated "
                                     f"JPEG data ({e})") from None

    k = min(ctx.thread_pool.num_threads, n)
    if k <= 1 or small or dense.nbytes < _PARALLEL_MIN_BYTES:
        run(0, n)
    else:
        bounds = np.linspace(0, n, k + 1).astype(int).tolist()
        ctx.thread_pool.map(run, bounds[:-1], bounds[1:])
    return dense


def image_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    dense = _decode_dense(ctx, inputs[0], args)
    if dense is not None:
        return dense
    imgs = _decode_batch(ctx, inputs, args)
    if len(imgs) > 1 and all(im.shape == imgs[0].shape for im in imgs):
        return np.stack(imgs)  # one dense batch: downstream kernels take their vectorised paths
    return imgs


def image_crop_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    def post(i: int, img: np.ndarray) -> np.ndarray:
        (y0, x0), (h, w) = crop_window(ctx.op, args, i, img.shape[:2], policy="error")
        return np.ascontiguousarray(img[y0:y0 + h, x0:x0 + w])

    return _decode_batch(ctx, inputs, args, post)


def image_slice_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Decode, then cut the window ``slice`` would (it must lie inside the image, as in DALI)."""
    anchor = inputs[1] if len(inputs) > 1 else None
    shape_in = inputs[2] if len(inputs) > 2 else None

    def post(i: int, img: np.ndarray) -> np.ndarray:
        box = slice_box(args, i, img.shape, "HWC", None if anchor is None else anchor.sample(i),
                        None if shape_in is None else shape_in.sample(i))
        (y0, y1), (x0, x1) = box[0], box[1]
        if not (0 <= y0 < y1 <= img.shape[0] and 0 <= x0 < x1 <= img.shape[1]) or box[2] != (0, img.shape[2]):
            raise ValueError(f"Operator `{ctx.op}`: {inputs[0].describe(i)}: the window (rows {y0}..{y1}, "
                             f"columns {x0}..{x1}, channels {box[2][0]}..{box[2][1]}) is empty or not inside "
                             f"the {img.shape[0]}x{img.shape[1]}x{img.shape[2]} image")
        return np.ascontiguousarray(img[y0:y1, x0:x1])

    return _decode_batch(ctx, inputs, args, post)


def image_random_crop_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Decode, then crop the window drawn as described in :func:`random_windows`.

    Draw pattern: ``RNG.from_words(ctx.random_state)`` gives 4 words per attempt
    per sample, ``batch_size * num_attempts * 4`` words in all, in sample order.
    """
    n = len(inputs[0])
    words = random_words(ctx, n, args["num_attempts"])

    def post(i: int, img: np.ndarray) -> np.ndarray:
        (y0, x0), (h, w) = random_windows(words[i:i + 1], [img.shape[:2]], args)[0]
        return np.ascontiguousarray(img[y0:y0 + h, x0:x0 + w])

    return _decode_batch(ctx, inputs, args, post)


def random_words(ctx: KernelContext, n: int, attempts: int) -> np.ndarray:
    """The call's random words, shaped (samples, attempts, 4)."""
    from ndd.random import RNG

    sub = RNG.from_words(ctx.random_state)
    return sub.draw_words(n * attempts * 4).reshape(n, attempts, 4)


# Channels of the decoded image per Pillow mode, for output_type=ANY_DATA (what
# decode_one keeps: OpenCV's IMREAD_UNCHANGED, which expands grey with alpha to BGRA and a
# palette to RGB, or RGBA with transparency; a PNG keeps its own channels instead).
_MODE_CHANNELS = {"1": 1, "L": 1, "I": 1, "I;16": 1, "I;16B": 1, "I;16L": 1, "F": 1, "LA": 4, "La": 4,
                  "RGB": 3, "YCbCr": 3, "LAB": 3, "HSV": 3, "RGBA": 4, "RGBa": 4, "RGBX": 4, "CMYK": 4}


def _peek_one(data: np.ndarray, image_type: DALIImageType, orient: bool) -> tuple[int, int, int]:
    """(H, W, C) of an encoded image from its header: JPEG through libjpeg-turbo's header
    reader, other formats through Pillow's lazy open (no pixels are decoded)."""
    if data.dtype != np.uint8 or data.ndim != 1:
        raise DecodeError(f"expected a 1-D uint8 array of encoded bytes, got {data.dtype} of shape {data.shape}")
    if data.size < 8:
        raise DecodeError(f"only {data.size} bytes: not an image")
    raw = data.tobytes()
    try:
        if raw[:2] == b"\xff\xd8":
            h, w, space, _ = simplejpeg.decode_jpeg_header(raw)
            stored = 1 if space == "Gray" else 3  # CMYK and YCCK JPEGs are decoded to RGB
            o = exif_orientation(raw[:65536]) if orient else 1
        else:
            with Image.open(io.BytesIO(raw)) as im:
                w, h = im.size
                if im.format == "TIFF":  # Pillow reports a TIFF's size already turned by its orientation
                    w, h = im.tag_v2.get(256, w), im.tag_v2.get(257, h)
                stored = _MODE_CHANNELS.get(im.mode, 3)
                if im.format == "PNG" and im.mode == "LA":  # a PNG keeps its own channels (_decode_other)
                    stored = 2
                elif im.format != "PNG" and im.mode == "P" and "transparency" in im.info:
                    stored = 4
                o = im.getexif().get(0x0112, 1) if orient else 1
    except Image.UnidentifiedImageError:
        raise DecodeError("not an image in a supported format") from None
    except (ValueError, OSError, SyntaxError) as e:  # what the two parsers raise on bad data
        raise DecodeError(f"corrupt header ({e})") from None
    c = 1 if image_type == _GRAY else stored if image_type == _ANY else 3
    return (w, h, c) if o in (5, 6, 7, 8) else (h, w, c)


def peek_image_shape_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    out = np.empty((len(bd.samples), 3), args["dtype"].numpy_dtype)
    for i, data in enumerate(bd.samples):
        try:
            out[i] = _peek_one(np.asarray(data), args["image_type"], args["adjust_orientation"])
        except DecodeError as e:
            raise ValueError(f"Operator `{ctx.op}`: cannot read the header of {bd.describe(i)}: {e}") from None
    return out
