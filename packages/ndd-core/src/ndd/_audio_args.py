"""Argument handling shared by the CPU and GPU kernels of the audio operators
(internal; exported through :mod:`ndd.plugins`).

Pure NumPy: the Hann window of ``spectrogram``, the number of its windows, the mel filter
bank matrix, the DCT matrix of ``mfcc``, and the windowed-sinc resampling filter and output
lengths of ``audio_resample`` and ``decoders.audio``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

_F = np.float32

# -- spectrogram ------------------------------------------------------------------------


def hann_window(n: int) -> np.ndarray:
    """The periodic-centred Hann window DALI's spectrogram uses: ``0.5 (1 - cos(2 pi (t + 0.5) / n))``."""
    t = np.arange(n, dtype=np.float64)
    return (0.5 * (1.0 - np.cos(2.0 * np.pi * (t + 0.5) / n))).astype(_F)


def num_windows(length: int, window_length: int, window_step: int, center: bool) -> int:
    """How many STFT windows a signal of ``length`` samples gives: windows centred at every
    multiple of ``window_step`` inside the signal, or (``center=False``) those that fit in it."""
    if center:
        return length // window_step + 1
    return max((length - window_length) // window_step + 1, 0)


# -- mel_filter_bank --------------------------------------------------------------------

# Hz to mel in float32, as DALI evaluates it (its constants, float32 log).
_FSP = _F(200.0 / 3.0)  # Hz per mel below 1 kHz (slaney)
_KNEE_HZ = _F(1000.0)
_KNEE_MEL = _KNEE_HZ / _FSP
_LOG_STEP = _F(0.068751777)  # log(6.4) / 27


def hz_to_mel(f: np.ndarray, formula: str) -> np.ndarray:
    """Hz to mel in float32: ``htk`` (1127 ln(1 + f/700), i.e. 2595 log10(1 + f/700)) or
    ``slaney`` (linear below 1 kHz, logarithmic above)."""
    f = np.asarray(f, _F)
    if formula == "htk":
        return _F(1127) * np.log(_F(1) + f / _F(700))
    with np.errstate(divide="ignore"):
        log_part = _KNEE_MEL + np.log(f / _KNEE_HZ) / _LOG_STEP
    return np.where(f >= _KNEE_HZ, log_part, f / _FSP).astype(_F)


def mel_to_hz(m: np.ndarray, formula: str) -> np.ndarray:
    """The inverse of :func:`hz_to_mel`, in float64."""
    m = np.asarray(m, np.float64)
    if formula == "htk":
        return 700.0 * (np.exp(m / 1127.0) - 1.0)
    knee = 1000.0 / (200.0 / 3.0)
    return np.where(m >= knee, 1000.0 * np.exp(math.log(6.4) / 27 * (m - knee)), m * (200.0 / 3.0))


def mel_filters(nfreq: int, sample_rate: float, nfilter: int, freq_low: float, freq_high: float,
                normalize: bool, formula: str) -> np.ndarray:
    """The ``(nfilter, nfreq)`` matrix of triangular filters over the bins of an
    ``nfft = 2 (nfreq - 1)`` spectrum.

    ``nfilter + 2`` points evenly spaced in mel between ``freq_low`` and ``freq_high``
    (0: ``sample_rate / 2``; both mapped to mel in float32, as DALI does) split the bins from
    ``ceil(freq_low / step)`` to ``floor(freq_high / step)`` into intervals; a bin at f in
    interval j (between the points j and j + 1, at f0 and f1 Hz) gives filter j - 1 the weight
    ``(f1 - f) / (f1 - f0)`` and filter j the rest. ``normalize`` scales filter j by
    ``2 / (width in Hz)`` (unit area); otherwise its peak is 1."""
    sr = float(_F(sample_rate))
    high = float(_F(freq_high)) if freq_high else sr / 2
    low = float(_F(freq_low))
    step = sr / (2 * (nfreq - 1))
    mel_low, mel_high = float(hz_to_mel(low, formula)), float(hz_to_mel(high, formula))
    delta = (mel_high - mel_low) / (nfilter + 1)
    spaced = mel_to_hz(mel_low + np.arange(nfilter + 2) * delta, formula)
    hz = spaced.copy()
    hz[-1] = mel_to_hz(mel_high, formula)  # the last interval ends at freq_high exactly
    bins = np.arange(max(math.ceil(low / step), 0), min(math.floor(high / step), nfreq - 1) + 1)
    f = bins * step
    interval = np.searchsorted(hz[1:], f, side="right")  # first j with f < hz[j + 1]
    keep = interval <= nfilter
    bins, f, interval = bins[keep], f[keep], interval[keep]
    down = (hz[interval + 1] - f) / (hz[interval + 1] - hz[interval])
    norm = 2.0 / (spaced[2:] - spaced[:-2]) if normalize else np.ones(nfilter)
    w = np.zeros((nfilter, nfreq))
    sel = interval >= 1
    w[interval[sel] - 1, bins[sel]] = down[sel] * norm[interval[sel] - 1]
    sel = interval < nfilter
    w[interval[sel], bins[sel]] = (1.0 - down[sel]) * norm[interval[sel]]
    return w


# -- mfcc -------------------------------------------------------------------------------


def dct_matrix(n: int, ndct: int, dct_type: int, normalize: bool, lifter: float) -> np.ndarray:
    """The ``(ndct, n)`` matrix of a DCT of type 1-4 as Wikipedia defines them (no factor 2),
    or orthonormal (types 2-4), each row k then scaled by the lifter
    ``1 + sin(pi (k + 1) / lifter) * lifter / 2`` when ``lifter > 0``."""
    k = np.arange(ndct, dtype=np.float64)[:, None]
    t = np.arange(n, dtype=np.float64)[None, :]
    if dct_type == 1:
        m = np.cos(np.pi / (n - 1) * t * k)
        m[:, 0] *= 0.5
        m[:, -1] *= 0.5
    elif dct_type == 2:
        m = np.cos(np.pi / n * (t + 0.5) * k)
        if normalize:
            m *= math.sqrt(2.0 / n)
            m[0] *= math.sqrt(0.5)
    elif dct_type == 3:
        m = np.cos(np.pi / n * t * (k + 0.5))
        if normalize:
            m *= math.sqrt(2.0 / n)
            m[:, 0] *= math.sqrt(0.5)
        else:
            m[:, 0] *= 0.5
    else:
        m = np.cos(np.pi / n * (t + 0.5) * (k + 0.5))
        if normalize:
            m *= math.sqrt(2.0 / n)
    if lifter > 0:
        m *= 1.0 + np.sin(np.pi * (k + 1) / lifter) * (lifter / 2)
    return m


# -- audio_resample, decoders.audio -----------------------------------------------------

RESAMPLE_BLOCK = 256  # output samples whose input positions grow from one float32 start


class ResampleWindow(NamedTuple):
    """A Hann-windowed sinc tabulated at ``lookup`` (read with linear interpolation at
    ``x * scale + center``); it is non-zero over ``lobes`` input samples on each side."""

    lookup: np.ndarray
    center: float
    scale: float
    lobes: int


def resample_window(quality: float) -> ResampleWindow:
    """The filter for ``quality`` (0..100): ``round(0.007 q^2 - 0.09 q + 3)`` lobes (3 at 0,
    16 at 50, 64 at 100), tabulated at 64 points a lobe."""
    q = float(_F(quality))
    lobes = int(round(0.007 * q * q - 0.09 * q + 3))
    coeffs = lobes * 64 + 1
    step = 2.0 * lobes / (coeffs - 1)
    center = (coeffs - 1) // 2
    i = np.arange(coeffs, dtype=np.float64) - center
    envelope = 0.5 * (1.0 + np.cos(i * (2.0 / coeffs) * np.pi))
    lookup = np.zeros(coeffs + 5, _F)  # a zero each side, and padding
    lookup[1:coeffs + 1] = np.sinc(i * step) * envelope
    return ResampleWindow(lookup, float(center + 1), 1.0 / step, lobes)


def resampled_length(length: int, in_rate: float, out_rate: float) -> int:
    """Output samples for ``length`` input samples: ``ceil(length * out_rate / in_rate)``."""
    return int(math.ceil(length * out_rate / in_rate))
