"""``ndd.experimental.readers.Fits``: image HDUs of FITS files (astropy reads the files).

Files are opened with ``astropy.io.fits`` (an optional dependency: ``pip install
ndd-readers[fits]``). A hand-written parser of uncompressed HDUs would save astropy's
per-file cost (measured 0.87 ms to open a small file and read one HDU, against about
0.05 ms to read the bytes), but astropy is still needed for tile-compressed HDUs (RICE,
GZIP, HCOMPRESS, PLIO); one well-kept path for both is kept instead of two.

The output types and values follow CFITSIO, which DALI reads with: the raw data, then
``BSCALE``/``BZERO`` applied as CFITSIO's "equivalent image type" decides (see
:func:`equivalent_dtype`); ``BLANK`` is not applied (DALI reads with null checking off).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ndd._dtype import dtype as as_dtype

from ._base import Dataset, StreamReader, integer
from ._numpy_reader import list_files
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED

_RAW = {8: np.dtype(np.uint8), 16: np.dtype(np.int16), 32: np.dtype(np.int32), 64: np.dtype(np.int64),
        -32: np.dtype(np.float32), -64: np.dtype(np.float64)}
# the types DALI accepts in `dtypes` (it checks them, then outputs the data's own types)
_DTYPES_ACCEPTED = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
                    "float16", "float32", "float64")


def _fits() -> Any:
    try:
        from astropy.io import fits
    except ImportError:
        raise ImportError("ndd.experimental.readers.Fits reads FITS files with astropy, which is not "
                          "installed: pip install ndd-readers[fits]") from None
    return fits


def _c_integral(x: float) -> bool:
    """Whether ``x`` survives CFITSIO's cast to a C ``long`` unchanged."""
    return math.isfinite(x) and -2.0**63 <= x < 2.0**63 and x == math.trunc(x)


def equivalent_dtype(bitpix: int, bscale: float, bzero: float) -> np.dtype:
    """The output type of an image with ``BITPIX``, ``BSCALE`` and ``BZERO`` (CFITSIO's
    equivalent image type, as measured with DALI): the raw type when unscaled and for
    BITPIX 64, -32, -64; else the smallest of int8, int16, uint16, int32, uint32 holding
    the scaled range when the scale and zero are integers (a zero of 2**31 counts as one,
    other zeros from 2**31 up do not), float32 (BITPIX 8, 16) or float64 (BITPIX 32)
    for non-integer scaling, float64 for integer ranges beyond uint32."""
    raw = _RAW[bitpix]
    if (bscale == 1.0 and bzero == 0.0) or bitpix in (64, -32, -64):
        return raw
    info = np.iinfo(raw)
    lo, hi = bzero + bscale * float(info.min), bzero + bscale * float(info.max)
    if bscale < 0:
        lo, hi = hi, lo
    integral = bzero == 2.0**31 or (bzero < 2.0**31 and _c_integral(bzero) and _c_integral(bscale))
    if not integral:
        return np.dtype(np.float32 if bitpix in (8, 16) else np.float64)
    for t, a, b in ((np.int8, -128, 127), (np.int16, -32768, 32767), (np.uint16, 0, 65535),
                    (np.int32, -2**31, 2**31 - 1), (np.uint32, 0, 2**32 - 1)):
        if (lo == a and hi == b) if t is np.int8 else (lo >= a and hi <= b):
            return np.dtype(t)
    return np.dtype(np.float64)


def scale(raw: np.ndarray, bitpix: int, bscale: float, bzero: float, where: str) -> np.ndarray:
    """The values of an image from its raw data (native byte order), as CFITSIO computes
    them: ``raw * BSCALE + BZERO`` in double precision, cast to :func:`equivalent_dtype`
    (truncated toward zero for BITPIX 64, where a value outside int64 is a ValueError);
    BITPIX 64 with BZERO 2**63 (unsigned 64-bit data) is converted exactly."""
    out = equivalent_dtype(bitpix, bscale, bzero)
    if bscale == 1.0 and bzero == 0.0:
        return np.array(raw, dtype=out, order="C")  # (a copy: out of a memory map, in native order)
    if bitpix == 64 and bscale == 1.0 and bzero == 2.0**63:
        if np.any(raw >= 0):
            raise ValueError(f"{where}: the data holds unsigned values from 2**63 up (BZERO = 2**63), "
                             "beyond int64, the output type of a BITPIX = 64 image")
        return raw ^ np.int64(-2**63)
    v = raw.astype(np.float64) * bscale + bzero  # (a new array in native byte order)
    if out.kind == "f":
        return v.astype(out)
    if bitpix == 64 and v.size and (v.min() < -2.0**63 or v.max() > 2.0**63):
        raise ValueError(f"{where}: the scaled values (BSCALE = {bscale:g}, BZERO = {bzero:g}) are beyond "
                         "int64, the output type of a BITPIX = 64 image")
    with np.errstate(invalid="ignore"):  # (exactly 2**63: what the C cast gives, as CFITSIO)
        return v.astype(out)


class FitsDataset(Dataset):
    """FITS files: one output per entry of ``hdu_indices`` (1-based HDU numbers)."""

    def __init__(self, paths: list[str], hdu_indices: tuple[int, ...], use_mmap: bool) -> None:
        self.paths = paths
        self.hdu_indices = hdu_indices
        self.use_mmap = use_mmap
        self.layouts = (None,) * len(hdu_indices)
        self._fits = _fits()

    def __len__(self) -> int:
        return len(self.paths)

    def _image(self, hdul: Any, k: int, where: str) -> np.ndarray:
        """HDU ``k`` (1-based) of an open file as an array."""
        fits = self._fits
        try:
            hdu = hdul[k - 1]
        except IndexError:
            raise ValueError(f"{where}: `hdu_indices` names HDU {k}, but the file has {len(hdul)} HDUs") from None
        if not isinstance(hdu, (fits.PrimaryHDU, fits.ImageHDU, fits.CompImageHDU)):
            raise ValueError(f"{where}: HDU {k} is a {type(hdu).__name__}, not an image (only image HDUs "
                             "are read)")
        header = hdu.header
        naxis = header.get("NAXIS", 0)
        if not naxis:
            raise ValueError(f"{where}: HDU {k} holds no image (NAXIS = 0)")
        bitpix = header.get("BITPIX")
        if bitpix not in _RAW:
            raise ValueError(f"{where}: HDU {k} has BITPIX = {bitpix!r}, not one of 8, 16, 32, 64, -32, -64")
        shape = tuple(int(header[f"NAXIS{n}"]) for n in range(naxis, 0, -1))
        try:
            raw = hdu.data
        except Exception as e:  # noqa: BLE001 - astropy's reasons vary (truncated data, bad tiles)
            raise ValueError(f"{where}: HDU {k} cannot be read: {e}") from None
        if raw is None:  # (an image with an axis of length 0)
            raw = np.zeros(shape, _RAW[bitpix])
        raw = raw.reshape(shape)
        return scale(raw, bitpix, float(header.get("BSCALE", 1.0)), float(header.get("BZERO", 0.0)),
                     f"{where}, HDU {k}")

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        path = self.paths[i]
        where = self.describe(i)
        try:
            hdul = self._fits.open(path, memmap=self.use_mmap, do_not_scale_image_data=True,
                                   lazy_load_hdus=True)
        except Exception as e:  # noqa: BLE001 - astropy raises OSError, ValueError and others
            raise ValueError(f"{where}: not a readable FITS file: {e}") from None
        with hdul:  # (each output is a new array: nothing refers to the memory map after this)
            return tuple(self._image(hdul, k, where) for k in self.hdu_indices)

    def describe(self, i: int) -> str:
        return f"{self.paths[i]} (sample {i})"

    def identity(self, i: int) -> bytes:
        """The file's size and first 64 KiB (its headers and leading data)."""
        with open(self.paths[i], "rb") as f:
            return str(os.fstat(f.fileno()).st_size).encode() + f.read(1 << 16)


def _hdu_indices(value: Any) -> tuple[int, ...]:
    items = [value] if isinstance(value, (int, np.integer)) else value
    if isinstance(items, (str, bytes)) or not isinstance(items, (Sequence, np.ndarray)):
        raise TypeError(f"`hdu_indices` must be an HDU number or a list of them, got {value!r}")
    out = tuple(integer(k, "hdu_indices") for k in items)
    if not out:
        raise ValueError("`hdu_indices` must name at least one HDU (one output per entry)")
    for k in out:
        if k < 1:
            raise ValueError(f"`hdu_indices`: HDUs are numbered from 1 (the primary HDU), got {k}")
    return out


def _check_dtypes(value: Any, n: int) -> None:
    """DALI's checks of ``dtypes``: one supported type per output. (DALI outputs each HDU's
    own type whatever ``dtypes`` says, and so does this reader.)"""
    if value is None:
        return
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    accepted = [as_dtype(n) for n in _DTYPES_ACCEPTED]
    for v in items:
        try:
            d = as_dtype(v)
        except (TypeError, ValueError) as e:
            raise type(e)(f"`dtypes`: {e}") from None
        if d not in accepted:
            raise ValueError(f"`dtypes`: unsupported output dtype {d}; supported types are "
                             f"{', '.join(_DTYPES_ACCEPTED)}")
    if len(items) != n:
        raise ValueError(f"`dtypes` gives {len(items)} types for {n} outputs (`hdu_indices` has {n} entries)")


class Fits(StreamReader):
    """Reads image HDUs of FITS files: one output per entry of ``hdu_indices`` (1-based HDU
    numbers, default ``[2]``: the first extension).

    Give ``file_root`` (the files matching ``file_filter`` in it and in its sub-directories,
    one level down), ``files`` (relative to ``file_root`` if given) or ``file_list`` (one name
    per line, relative to ``file_root`` or to the list's directory), as the Numpy reader.
    Each output has the HDU's NumPy-order shape (``NAXISn`` reversed), no layout, and the
    type CFITSIO gives the scaled data (:func:`equivalent_dtype`); tile-compressed HDUs are
    decompressed. ``dtypes`` is checked (one supported type per output) but, as in DALI,
    does not change the outputs. Needs astropy: ``pip install ndd-readers[fits]``.
    """

    _SHUFFLES_LIST = True

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        file_root: str | os.PathLike | None = None,
        file_filter: str = "*.fits",
        files: Sequence[str | os.PathLike] | None = None,
        file_list: str | os.PathLike | None = None,
        hdu_indices: int | Sequence[int] = (2,),
        dtypes: Any = None,
        shuffle_after_epoch: bool = False,
        shuffle_after_epoch_seed: int = DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
        initial_fill: int = 1024,
        lazy_init: bool = False,
        pad_last_batch: bool = False,
        prefetch_queue_depth: int = 1,
        random_shuffle: bool = False,
        read_ahead: bool = False,
        seed: int = -1,
        shard_id: int = 0,
        num_shards: int = 1,
        stick_to_shard: bool = False,
        skip_cached_images: bool = False,
        dont_use_mmap: bool = False,
        tensor_init_bytes: int = 1048576,
        enable_checkpointing: bool = False,
    ) -> None:
        _fits()  # (a missing astropy is reported here, not at the first read)
        if not isinstance(file_filter, str):
            raise TypeError(f"`file_filter` must be a pattern (a string), got {file_filter!r}")
        self._hdu_indices = _hdu_indices(hdu_indices)
        _check_dtypes(dtypes, len(self._hdu_indices))
        self._where = (file_root, file_filter, files, file_list)
        self._use_mmap = not dont_use_mmap
        super().__init__(
            max_batch_size, name, device, num_inputs, initial_fill=initial_fill, lazy_init=lazy_init,
            pad_last_batch=pad_last_batch, prefetch_queue_depth=prefetch_queue_depth,
            random_shuffle=random_shuffle, read_ahead=read_ahead, seed=seed, shard_id=shard_id,
            num_shards=num_shards, stick_to_shard=stick_to_shard, skip_cached_images=skip_cached_images,
            dont_use_mmap=dont_use_mmap, tensor_init_bytes=tensor_init_bytes,
            shuffle_after_epoch=shuffle_after_epoch, shuffle_after_epoch_seed=shuffle_after_epoch_seed,
            enable_checkpointing=enable_checkpointing,
        )

    def _open(self) -> Dataset:
        paths, _ = list_files(*self._where, reader="Fits")
        return FitsDataset(paths, self._hdu_indices, self._use_mmap)
