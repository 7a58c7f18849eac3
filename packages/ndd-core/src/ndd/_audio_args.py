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

_SLANEY_STEP = 200.0 / 3  # Hz per mel below 1 kHz
_SLANEY_KNEE = 1000.0
_SLANEY_LOG = math.log(6.4) / 27


def hz_to_mel(f: np.ndarray, formula: str) -> np.ndarray:
    """Frequencies in Hz to mel: ``htk`` (2595 log10(1 + f/700)) or ``slaney`` (linear below
    1 kHz, logarithmic above)."""
    f = np.asarray(f, np.float64)
    if formula == "htk":
        return 2595.0 * np.log10(1.0 + f / 700.0)
    knee = _SLANEY_KNEE / _SLANEY_STEP
    log_part = knee + np.log(np.maximum(f, _SLANEY_KNEE) / _SLANEY_KNEE) / _SLANEY_LOG
    return np.where(f >= _SLANEY_KNEE, log_part, f / _SLANEY_STEP)


def mel_to_hz(m: np.ndarray, formula: str) -> np.ndarray:
    """The inverse of :func:`hz_to_mel`."""
    m = np.asarray(m, np.float64)
    if formula == "htk":
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    knee = _SLANEY_KNEE / _SLANEY_STEP
    return np.where(m >= knee, _SLANEY_KNEE * np.exp(_SLANEY_LOG * (m - knee)), m * _SLANEY_STEP)


def mel_filters(nfreq: int, sample_rate: float, nfilter: int, freq_low: float, freq_high: float,
                normalize: bool, formula: str) -> np.ndarray:
    """The ``(nfilter, nfreq)`` matrix of triangular filters over the FFT bins of an
    ``nfft = 2 (nfreq - 1)`` spectrum: filter j rises linearly (in Hz) from mel point j to
    j + 1 and falls to j + 2, the ``nfilter + 2`` points evenly spaced in mel between
    ``freq_low`` and ``freq_high`` (0: ``sample_rate / 2``). ``normalize`` scales each by
    ``2 / (width in Hz)``, so that its integral is 1; otherwise its peak is 1."""
    high = freq_high if freq_high else sample_rate / 2
    nfft = 2 * (nfreq - 1)
    pts = mel_to_hz(np.linspace(hz_to_mel(freq_low, formula), hz_to_mel(high, formula), nfilter + 2), formula)
    freqs = np.arange(nfreq) * (sample_rate / nfft)
    lo, mid, hi = pts[:-2, None], pts[1:-1, None], pts[2:, None]
    w = np.maximum(0.0, np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)))
    if normalize:
        w *= 2.0 / (hi - lo)
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
