"""WAV decoding and resampling in pure NumPy, shared by the ``decoders.audio`` and
``audio_resample`` kernels and by the ``NemoAsr`` reader (internal; exported through
:mod:`ndd.plugins`)."""

from __future__ import annotations

import struct

import numpy as np

from ._audio_args import RESAMPLE_BLOCK, ResampleWindow, resampled_length
from ._saturate import saturate_cast

_F = np.float32

# -- sample conversions and resampling --------------------------------------------------


def to_unit(x: np.ndarray) -> np.ndarray:
    """Samples as float32 in -1..1: signed integers over their maximum, unsigned ones mapped
    from 0..max (floats as they are)."""
    if x.dtype.kind == "f":
        return x.astype(_F, copy=False)
    top = float(np.iinfo(x.dtype).max)
    if x.dtype.kind == "i":
        return (x.astype(np.float64) / top).astype(_F)
    return ((x.astype(np.float64) * 2 - top) / top).astype(_F)


def from_unit(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The inverse of :func:`to_unit`, rounded and saturated."""
    if dtype.kind == "f":
        return y.astype(dtype)
    top = _F(np.iinfo(dtype).max)  # (float32: int32's maximum rounds to 2**31, as in DALI)
    y = y.astype(_F) * top if dtype.kind == "i" else (y.astype(_F) + _F(1)) * (top / _F(2))
    return saturate_cast(y, dtype)


_CHUNK = 4096  # output samples filtered at a time


def resample_signal(x: np.ndarray, in_rate: float, out_rate: float, out_len: int, win: ResampleWindow) -> np.ndarray:
    """Windowed-sinc resampling of float32 ``x`` (samples first), as DALI's CPU kernel: the
    input position of output o is ``o * in_rate / out_rate``, grown in float32 steps from each
    block's exact start."""
    n = x.shape[0]
    out = np.zeros((out_len,) + x.shape[1:], _F)
    if n == 0 or out_len == 0:
        return out
    scale = in_rate / out_rate
    lobes = win.lobes
    taps = np.arange(2 * lobes + 1)
    for lo in range(0, out_len, _CHUNK):  # (_CHUNK is a multiple of RESAMPLE_BLOCK)
        o = np.arange(lo, min(lo + _CHUNK, out_len))
        pos, anchor = _positions(o, scale)
        i0 = np.maximum(np.ceil(pos).astype(np.int64) - lobes, -anchor)
        i1 = np.minimum(np.floor(pos).astype(np.int64) + lobes + 1, n - anchor)
        rel = (i0.astype(_F) - pos)[:, None] + taps.astype(_F)
        t = rel * _F(win.scale) + _F(win.center)
        k = np.clip(np.floor(t).astype(np.int64), 0, len(win.lookup) - 2)
        frac = t - k.astype(_F)
        w = win.lookup[k] + frac * (win.lookup[k + 1] - win.lookup[k])
        idx = (anchor + i0)[:, None] + taps
        w[idx >= (anchor + i1)[:, None]] = 0
        src = x[np.clip(idx, 0, n - 1)]
        out[lo:lo + len(o)] = np.einsum("ot,ot...->o...", w, src)
    return out


def _positions(o: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Input positions of the outputs ``o`` (whole blocks from a block start): for each block
    of RESAMPLE_BLOCK outputs, the exact start split into an integer anchor and a float32
    offset, then float32 steps of ``scale``; the positions relative to the anchors."""
    nb = -(-len(o) // RESAMPLE_BLOCK)
    block = o[::RESAMPLE_BLOCK]
    base = block * scale
    anchor = np.floor(base).astype(np.int64)
    steps = np.full((nb, RESAMPLE_BLOCK), _F(scale))
    steps[:, 0] = (base - anchor).astype(_F)
    pos = np.add.accumulate(steps, axis=1, dtype=_F).reshape(-1)[:len(o)]
    return pos, np.repeat(anchor, RESAMPLE_BLOCK)[:len(o)]


# -- WAV -------------------------------------------------------------------------------

_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE


def _wav_chunks(data: bytes) -> dict[bytes, bytes]:
    if len(data) < 12 or data[:4] not in (b"RIFF", b"RIFX") or data[8:12] != b"WAVE":
        kind = "FLAC" if data[:4] == b"fLaC" else "OGG" if data[:4] == b"OggS" else "unrecognised"
        raise ValueError(f"not a WAV file ({kind} data; only WAV is supported)")
    if data[:4] == b"RIFX":
        raise ValueError("big-endian WAV (RIFX) is not supported")
    chunks, at = {}, 12
    while at + 8 <= len(data):
        cid, size = data[at:at + 4], struct.unpack_from("<I", data, at + 4)[0]
        chunks.setdefault(cid, data[at + 8:at + 8 + size])
        at += 8 + size + (size & 1)
    if b"fmt " not in chunks or b"data" not in chunks:
        raise ValueError("a WAV file without a 'fmt ' or 'data' chunk")
    return chunks


def decode_wav(data: bytes) -> tuple[np.ndarray, float, bool]:
    """The samples (frames, channels), the sampling rate, and whether they are floats; integer
    samples come as int32 with their bits at the top (an 8-bit 0x80 is 0)."""
    chunks = _wav_chunks(data)
    fmt = chunks[b"fmt "]
    if len(fmt) < 16:
        raise ValueError("a WAV 'fmt ' chunk shorter than 16 bytes")
    tag, channels, rate, _, align, bits = struct.unpack_from("<HHIIHH", fmt)
    if tag == _EXTENSIBLE and len(fmt) >= 26:
        tag = struct.unpack_from("<H", fmt, 24)[0]
    if tag not in (_PCM, _FLOAT) or channels < 1:
        raise ValueError(f"unsupported WAV encoding (format tag {tag:#x}, {channels} channels; "
                         "PCM and IEEE float are supported)")
    width = bits // 8 if bits % 8 == 0 else 0
    if (tag == _PCM and width not in (1, 2, 3, 4)) or (tag == _FLOAT and width not in (4, 8)):
        raise ValueError(f"unsupported WAV sample size: {bits} bits ({'float' if tag == _FLOAT else 'PCM'})")
    raw = chunks[b"data"]
    frames = len(raw) // (width * channels)
    raw = np.frombuffer(raw, np.uint8, frames * width * channels)
    if tag == _FLOAT:
        x = raw.view("<f4" if width == 4 else "<f8").astype(_F)
        return x.reshape(frames, channels), float(rate), True
    if width == 1:
        x = (raw.astype(np.int32) - 128) << 24
    elif width == 3:
        b = raw.reshape(-1, 3).astype(np.int32)
        x = (b[:, 0] << 8) | (b[:, 1] << 16) | (b[:, 2] << 24)
    else:
        x = raw.view("<i2" if width == 2 else "<i4").astype(np.int32) << (32 - bits)
    return x.reshape(frames, channels), float(rate), False


def native_samples(x: np.ndarray, is_float: bool, dtype: np.dtype) -> np.ndarray:
    """Decoded samples in ``dtype`` as libsndfile reads them: integer samples by their top
    bits (float32 in -1..1), float samples as they are (to integers: rounded, not scaled)."""
    if is_float:
        if dtype == _F:
            return x
        info = np.iinfo(dtype)
        return np.clip(np.rint(x.astype(np.float64)), info.min, info.max).astype(dtype)
    if dtype == _F:
        return (x.astype(np.float64) / 2.0 ** 31).astype(_F)
    return x if dtype == np.int32 else (x >> 16).astype(np.int16)


def convert_decoded(x: np.ndarray, rate: float, is_float: bool, dtype: np.dtype, downmix: bool,
                    target: float, win: ResampleWindow) -> tuple[np.ndarray, float]:
    """Decoded samples (from :func:`decode_wav`) as ``decoders.audio`` gives them: downmixed
    to mono (the channels' mean) when ``downmix``, resampled to ``target`` Hz when it is
    positive and not ``rate``, in ``dtype``; with the output's sampling rate."""
    resample = target > 0 and target != rate
    if resample or (downmix and x.shape[1] > 1):  # to float32, downmixed, resampled, converted
        y = x if is_float else (x.astype(np.float64) / 2.0 ** 31).astype(_F)
        if downmix:
            y = y.mean(axis=1, dtype=np.float64).astype(_F)
        if resample:
            y = resample_signal(y, rate, target, resampled_length(len(y), rate, target), win)
            rate = target
        return from_unit(y, dtype), rate
    out = native_samples(x, is_float, dtype)
    if downmix:
        out = out[:, 0]
    return out, rate
