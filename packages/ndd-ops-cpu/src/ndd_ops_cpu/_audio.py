"""Audio kernels: preemphasis_filter, spectrogram, mel_filter_bank, to_decibels, mfcc,
power_spectrum, nonsilent_region, audio_resample and decoders.audio (WAV)."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    ResampleWindow,
    convert_decoded,
    dct_matrix,
    decode_wav,
    from_unit,
    hann_window,
    mel_filters,
    num_windows,
    resample_signal,
    resample_window,
    resampled_length,
    to_unit,
)

from ._common import batch_nbytes, cast_to, map_samples, sample_name

_F = np.float32


def _err(ctx: KernelContext, bd: BatchData, i: int, msg: str) -> ValueError:
    return ValueError(f"Operator `{ctx.op}`: {sample_name(ctx, bd, i)}: {msg}")


def _per_sample(ctx: KernelContext, bd: BatchData, fn: Any) -> list:
    return map_samples(ctx, lambda i: fn(i, bd.samples[i]), len(bd), batch_nbytes(bd.samples))


# -- preemphasis_filter -----------------------------------------------------------------


def _preemph(x: np.ndarray, coeff: Any, border: str, dtype: np.dtype) -> np.ndarray:
    """Filter each row of ``x`` (one flattened sample a row); ``coeff`` a scalar or a column."""
    work = np.float64 if x.dtype == np.float64 else _F  # (C++'s promotion of x - c * x')
    xf = x.astype(work)
    prev = np.empty_like(xf)
    prev[:, 1:] = xf[:, :-1]
    n = xf.shape[1]
    if n:
        prev[:, 0] = {"zero": 0, "clamp": xf[:, 0], "reflect": xf[:, 1] if n > 1 else 0}[border]
    return cast_to(xf - np.asarray(coeff, _F).astype(work) * prev, dtype)


def preemphasis_filter_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    dtype = np.dtype(args["dtype"].numpy_dtype)
    border = args["border"]
    if bd.dense is not None and len(bd):
        coeff = args["preemph_coeff"]
        if args.is_per_sample("preemph_coeff"):
            coeff = coeff.array().reshape(-1, 1)
        d = bd.dense
        return _preemph(d.reshape(len(d), -1), coeff, border, dtype).reshape(d.shape)
    return _per_sample(ctx, bd, lambda i, s: _preemph(s.reshape(1, -1), args.sample("preemph_coeff", i),
                                                      border, dtype).reshape(s.shape))


# -- to_decibels ------------------------------------------------------------------------


def _to_db(x: np.ndarray, args: KernelArgs) -> np.ndarray:
    mult = _F(args["multiplier"])
    min_ratio = _F(10.0 ** (args["cutoff_db"] / args["multiplier"]))
    ref = args["reference"]
    if ref is None:
        ref = x.max() if x.size else _F(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = _F(1) / _F(ref)
        ratio = np.fmax(min_ratio, x * inv)  # (fmax: a NaN of 0 * inf gives the cutoff)
        return (mult * np.log10(ratio)).astype(_F)


def to_decibels_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    return _per_sample(ctx, inputs[0], lambda i, s: _to_db(s, args))


# -- power_spectrum ---------------------------------------------------------------------


def _power(spec: np.ndarray, power: int) -> np.ndarray:
    mag2 = spec.real * spec.real + spec.imag * spec.imag
    return (mag2 if power == 2 else np.sqrt(mag2)).astype(_F)


def power_spectrum_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    nfft, power = args["nfft"], args["power"]

    def one(i: int, s: np.ndarray, lead: int = 0) -> np.ndarray:
        axis = (args["axis"] if args["axis"] >= 0 else s.ndim - lead - 1) + lead
        n = nfft if nfft and nfft > 0 else s.shape[axis]
        if n < 1:
            raise _err(ctx, bd, i, "the transformed axis is empty")
        return _power(np.fft.rfft(s.astype(np.float64), n=n, axis=axis), power)

    if bd.dense is not None and len(bd) and not nfft:
        return one(0, bd.dense, lead=1)
    return _per_sample(ctx, bd, one)


# -- spectrogram ------------------------------------------------------------------------


def _spectrogram(ctx: KernelContext, bd: BatchData, i: int, s: np.ndarray, args: KernelArgs) -> np.ndarray:
    if sum(e != 1 for e in s.shape) > 1:
        raise _err(ctx, bd, i, f"expects a 1-D signal (or all but one extent 1), got shape {s.shape}")
    x = s.reshape(-1)
    n = len(x)
    if n == 0:
        raise _err(ctx, bd, i, "the signal is empty")
    wl, step = args["window_length"], args["window_step"]
    center = args["center_windows"]
    nw = num_windows(n, wl, step, center)
    if nw < 1:
        raise _err(ctx, bd, i, f"the signal ({n} samples) is shorter than window_length ({wl})")
    if center:
        pad = wl // 2
        mode = "constant" if not args["reflect_padding"] else "reflect" if n > 1 else "edge"
        x = np.pad(x, (pad, wl - pad), mode=mode)
    win = hann_window(wl) if args["window_fn"] is None else np.asarray(args["window_fn"], _F)
    frames = np.lib.stride_tricks.sliding_window_view(x, wl)[::step][:nw] * win
    spec = _power(np.fft.rfft(frames.astype(np.float64), n=args["nfft"] or wl, axis=1), args["power"])
    return spec if args["layout"] == "tf" else np.ascontiguousarray(spec.T)


def spectrogram_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    return _per_sample(ctx, bd, lambda i, s: _spectrogram(ctx, bd, i, s, args))


# -- mel_filter_bank --------------------------------------------------------------------


def _freq_axis(layout: str | None, ndim: int) -> int:
    if layout:
        return layout.index("f")
    return 0 if ndim < 2 else ndim - 2


def mel_filter_bank_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]

    def one(i: int, s: np.ndarray, lead: int = 0) -> np.ndarray:
        axis = _freq_axis(ctx.input_layouts[0], s.ndim - lead) + lead
        nfreq = s.shape[axis]
        if nfreq < 2:
            raise _err(ctx, bd, i, f"needs at least 2 frequency bins, got {nfreq}")
        w = mel_filters(nfreq, args["sample_rate"], args["nfilter"], args["freq_low"], args["freq_high"],
                        args["normalize"], args["mel_formula"])
        return _apply_along(w.astype(_F), s, axis)

    if bd.dense is not None and len(bd):
        return one(0, bd.dense, lead=1)
    return _per_sample(ctx, bd, one)


def _apply_along(m: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    """The float32 matrix ``m`` applied to the vectors of ``x`` along ``axis``."""
    if x.ndim >= 2 and axis == x.ndim - 2:
        return m @ x  # (a batched matmul: no transposes)
    return np.ascontiguousarray(np.moveaxis(np.tensordot(m, x, axes=([1], [axis])), 0, axis))


# -- mfcc -------------------------------------------------------------------------------


def mfcc_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]

    def one(i: int, s: np.ndarray, lead: int = 0) -> np.ndarray:
        axis = args["axis"] + lead
        n = s.shape[axis]
        if n < 1 or (args["dct_type"] == 1 and n < 2):
            raise _err(ctx, bd, i, f"the DCT axis has {n} element(s); DCT type {args['dct_type']} needs "
                                   f"at least {2 if args['dct_type'] == 1 else 1}")
        m = dct_matrix(n, min(args["n_mfcc"], n), args["dct_type"], args["normalize"], args["lifter"])
        return _apply_along(m.astype(_F), s, axis)

    if bd.dense is not None and len(bd):
        return one(0, bd.dense, lead=1)
    return _per_sample(ctx, bd, one)


# -- nonsilent_region -------------------------------------------------------------------


def _window_power_sums(x: np.ndarray, wl: int, reset: int) -> np.ndarray:
    """Sum of squares over the window ending at each sample (zeros before the signal), kept
    as DALI keeps it for float input: a float32 running sum (minus the sample leaving, then
    plus the one entering), recomputed from scratch every ``reset`` samples."""
    sq = x.astype(_F) * x.astype(_F)
    n = len(sq)
    out = np.empty(n, _F)
    for r in range(0, n, reset if reset > 0 else max(n, 1)):
        end = min(r + (reset if reset > 0 else n), n)
        start = np.add.accumulate(sq[max(r - wl + 1, 0):r + 1], dtype=_F)[-1]
        steps = np.empty(2 * (end - r - 1) + 1, _F)
        steps[0] = start
        leaving = np.arange(r + 1 - wl, end - wl)
        steps[1::2] = -np.where(leaving >= 0, sq[np.maximum(leaving, 0)], _F(0))
        steps[2::2] = sq[r + 1:end]
        out[r:end] = np.add.accumulate(steps, dtype=_F)[0::2]
    return out


def _exact_power_sums(x: np.ndarray, wl: int) -> np.ndarray:
    """The same sums for integer input, exact (int64 cumulative sums of exact squares)."""
    sq = x.astype(np.int64) ** 2 if x.dtype.itemsize <= 2 else x.astype(np.float64) ** 2
    c = np.concatenate([[0], np.cumsum(sq)])
    idx = np.arange(len(x))
    return (c[idx + 1] - c[np.maximum(idx + 1 - wl, 0)]).astype(_F)


def _nonsilent(x: np.ndarray, args: KernelArgs) -> tuple[np.ndarray, np.ndarray]:
    wl = args["window_length"]
    if not len(x):
        return np.array(0, np.int32), np.array(0, np.int32)
    sums = (_window_power_sums(x, wl, args["reset_interval"]) if x.dtype == _F
            else _exact_power_sums(x, wl))
    power = sums / _F(wl)
    ref = _F(args["reference_power"]) if args["reference_power"] is not None else power.max()
    loud = np.flatnonzero(power >= ref * _F(10.0 ** (args["cutoff_db"] / 10)))
    if not len(loud):
        return np.array(0, np.int32), np.array(0, np.int32)
    begin = max(int(loud[0]) - wl + 1, 0)
    return np.array(begin, np.int32), np.array(int(loud[-1]) + 1 - begin, np.int32)


def nonsilent_region_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    res = _per_sample(ctx, inputs[0], lambda i, s: _nonsilent(s, args))
    return np.array([r[0] for r in res], np.int32), np.array([r[1] for r in res], np.int32)


# -- audio_resample ---------------------------------------------------------------------


def _resample_rates(ctx: KernelContext, bd: BatchData, args: KernelArgs, i: int, n: int) -> tuple[float, float, int]:
    """(in_rate, out_rate, output length) of sample ``i`` from the arguments given."""
    def value(name: str) -> float:
        v = float(_F(args.sample(name, i)))
        if not math.isfinite(v) or v < 0:
            raise _err(ctx, bd, i, f"argument '{name}' must be non-negative, got {v}")
        return v

    if args["out_length"] is not None:
        out_len = int(args.sample("out_length", i))
        if out_len < 0:
            raise _err(ctx, bd, i, f"argument 'out_length' must be non-negative, got {out_len}")
        return float(n), float(out_len), out_len
    if args["scale"] is not None:
        in_rate, out_rate = 1.0, value("scale")
    else:
        in_rate, out_rate = value("in_rate"), value("out_rate")
    if in_rate == 0:
        raise _err(ctx, bd, i, "the input rate must be positive")
    return in_rate, out_rate, resampled_length(n, in_rate, out_rate) if out_rate else 0


def audio_resample_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    win = resample_window(args["quality"])

    def one(i: int, s: np.ndarray) -> np.ndarray:
        in_rate, out_rate, out_len = _resample_rates(ctx, bd, args, i, s.shape[0])
        if out_len and not s.shape[0]:
            raise _err(ctx, bd, i, f"cannot make {out_len} samples from an empty input")
        dtype = np.dtype(args["dtype"].numpy_dtype) if args["dtype"] is not None else s.dtype
        if dtype.kind == "u":  # filtered in the output's range (0..max), as DALI does
            top = _F(np.iinfo(dtype).max)
            scaled = (to_unit(s) + _F(1)) * (top / _F(2))
            return cast_to(resample_signal(scaled, in_rate, out_rate, out_len, win), dtype)
        return from_unit(resample_signal(to_unit(s), in_rate, out_rate, out_len, win), dtype)

    return _per_sample(ctx, bd, one)


# -- decoders.audio ---------------------------------------------------------------------

def _decode_one(ctx: KernelContext, bd: BatchData, args: KernelArgs, i: int, s: np.ndarray,
                win: ResampleWindow) -> tuple[np.ndarray, np.ndarray]:
    if s.dtype != np.uint8 or s.ndim != 1:
        raise _err(ctx, bd, i, f"expects encoded audio as a 1-D uint8 tensor, got {s.dtype} of shape {s.shape}")
    try:
        x, rate, is_float = decode_wav(s.tobytes())
    except (ValueError, struct.error) as e:
        raise _err(ctx, bd, i, f"cannot decode the audio: {e}") from None
    dtype = np.dtype(args["dtype"].numpy_dtype)
    target = args.sample("sample_rate", i)
    target = float(_F(target)) if target is not None else 0.0
    out, rate = convert_decoded(x, rate, is_float, dtype, args["downmix"], target, win)
    return out, np.array(rate, _F)


def audio_decoder_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    win = resample_window(args["quality"])
    res = _per_sample(ctx, bd, lambda i, s: _decode_one(ctx, bd, args, i, s, win))
    return [r[0] for r in res], np.array([r[1] for r in res], _F)
