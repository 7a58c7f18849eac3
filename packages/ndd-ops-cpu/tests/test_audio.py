"""The audio operators on the CPU against NumPy/SciPy re-derivations of their documented
formulas (float32 outputs to a relative 1e-5 of the largest value unless stated), on
Tensors, ragged Batches and per-sample arguments, and their error paths."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest
import scipy.fft
import scipy.signal

import ndd

RNG = np.random.default_rng(1234)


def close(a: object, b: np.ndarray, rel: float = 1e-5) -> None:
    a = np.asarray(a)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=0, atol=rel * max(np.abs(b).max(), 1e-30))


# -- preemphasis_filter -----------------------------------------------------------------


def _preemph_ref(x: np.ndarray, c: float, border: str) -> np.ndarray:
    x = x.reshape(-1).astype(np.float64)
    before = {"zero": 0.0, "clamp": x[0], "reflect": x[1]}[border]
    return x - c * np.concatenate([[before], x[:-1]])


@pytest.mark.parametrize("border", ["zero", "clamp", "reflect"])
def test_preemphasis_borders(border: str) -> None:
    x = RNG.standard_normal(300).astype(np.float32)
    out = ndd.preemphasis_filter(ndd.as_tensor(x), preemph_coeff=0.9, border=border)
    assert out.dtype == ndd.float32
    close(out, _preemph_ref(x, 0.9, border))


def test_preemphasis_default_and_hand_case() -> None:
    out = np.asarray(ndd.preemphasis_filter(ndd.as_tensor(np.array([1.0, 2.0, 4.0], np.float32))))
    np.testing.assert_allclose(out, [1 - 0.97, 2 - 0.97, 4 - 1.94], rtol=1e-6)


def test_preemphasis_batch_per_sample_coeff_and_dtype() -> None:
    xs = [RNG.integers(-2000, 2000, n).astype(np.int16) for n in (10, 37)]
    out = ndd.preemphasis_filter(ndd.as_batch(xs), preemph_coeff=ndd.as_batch([np.float32(0.5), np.float32(0.1)]),
                                 dtype=ndd.int16)
    for o, x, c in zip(out, xs, (0.5, 0.1)):
        assert np.asarray(o).dtype == np.int16
        xf = x.astype(np.float32)  # computed in float32, rounded half away from zero (DALI's ConvertSat)
        y = xf - np.float32(c) * np.concatenate([xf[:1], xf[:-1]])
        np.testing.assert_array_equal(np.asarray(o), np.trunc(y + np.copysign(np.float32(0.5), y)))


def test_preemphasis_keeps_shape_and_saturates() -> None:
    x = np.array([[100.0, -100.0], [200.0, 0.0]], np.float32)
    out = ndd.preemphasis_filter(ndd.as_tensor(x, layout="tc"), dtype=ndd.uint8, preemph_coeff=1.0)
    assert out.layout == "tc"
    np.testing.assert_array_equal(np.asarray(out), [[0, 0], [255, 0]])


# -- spectrogram ------------------------------------------------------------------------


def _stft_ref(x: np.ndarray, nfft: int, wl: int, step: int, power: int, window: np.ndarray) -> np.ndarray:
    """Centred frames over a mirrored signal, each windowed, |rfft|**power, (freq, time)."""
    pad = wl // 2
    xp = np.pad(x.astype(np.float64), (pad, wl), mode="reflect")
    frames = np.stack([xp[i * step:i * step + wl] * window for i in range(len(x) // step + 1)])
    return (np.abs(np.fft.rfft(frames, n=nfft, axis=1)) ** power).T


def test_spectrogram_hann_against_scipy_window() -> None:
    x = RNG.standard_normal(2000).astype(np.float32)
    out = ndd.spectrogram(ndd.as_tensor(x), nfft=512, window_length=400, window_step=160)
    # DALI's Hann is sampled at the centres of window_length cells: scipy's periodic Hann at half steps
    hann = 0.5 * (1 - np.cos(2 * np.pi * (np.arange(400) + 0.5) / 400))
    np.testing.assert_allclose(hann, scipy.signal.windows.hann(800, sym=False)[1::2], atol=1e-12)
    assert out.layout == "ft" and out.shape == (257, 2000 // 160 + 1)
    close(out, _stft_ref(x, 512, 400, 160, 2, hann))


def test_spectrogram_tf_power1_custom_window_no_centering() -> None:
    x = RNG.standard_normal(1000).astype(np.float32)
    win = RNG.random(64).astype(np.float32)
    out = ndd.spectrogram(ndd.as_tensor(x), nfft=64, window_length=64, window_step=20, window_fn=win.tolist(),
                          power=1, center_windows=False, layout="tf")
    frames = np.stack([x[i * 20:i * 20 + 64] * win for i in range((1000 - 64) // 20 + 1)]).astype(np.float64)
    assert out.layout == "tf"
    close(out, np.abs(np.fft.rfft(frames, axis=1)))


def test_spectrogram_zero_padding_and_ragged_batch() -> None:
    xs = [RNG.standard_normal(n).astype(np.float32) for n in (300, 517)]
    out = ndd.spectrogram(ndd.as_batch(xs), window_length=32, window_step=16, reflect_padding=False)
    hann = 0.5 * (1 - np.cos(2 * np.pi * (np.arange(32) + 0.5) / 32))
    for o, x in zip(out, xs):
        xp = np.pad(x.astype(np.float64), (16, 32))
        frames = np.stack([xp[i * 16:i * 16 + 32] * hann for i in range(len(x) // 16 + 1)])
        close(o, (np.abs(np.fft.rfft(frames, axis=1)) ** 2).T)


def test_spectrogram_accepts_degenerate_2d() -> None:
    x = RNG.standard_normal(100).astype(np.float32)
    a = np.asarray(ndd.spectrogram(ndd.as_tensor(x), window_length=16, window_step=8))
    b = np.asarray(ndd.spectrogram(ndd.as_tensor(x.reshape(1, -1)), window_length=16, window_step=8))
    np.testing.assert_array_equal(a, b)


# -- mel_filter_bank --------------------------------------------------------------------


def _hz_to_mel_slaney(f: np.ndarray) -> np.ndarray:
    f = np.asarray(f, np.float64)
    return np.where(f < 1000, f * 3 / 200, 15 + np.log(np.maximum(f, 1e-9) / 1000) * 27 / np.log(6.4))


def _mel_ref(nfreq: int, sr: float, nfilter: int, lo: float, hi: float, normalize: bool, htk: bool) -> np.ndarray:
    if htk:
        to_mel = lambda f: 2595 * np.log10(1 + np.asarray(f) / 700)  # noqa: E731
        to_hz = lambda m: 700 * (10 ** (np.asarray(m) / 2595) - 1)  # noqa: E731
    else:
        to_mel = _hz_to_mel_slaney
        grid = np.linspace(0, sr, 200001)  # the inverse by interpolation: independent of the closed form
        to_hz = lambda m: np.interp(m, _hz_to_mel_slaney(grid), grid)  # noqa: E731
    edges = to_hz(np.linspace(to_mel(lo), to_mel(hi), nfilter + 2))
    freqs = np.linspace(0, sr / 2, nfreq)
    bank = np.zeros((nfilter, nfreq))
    for j in range(nfilter):
        a, b, c = edges[j:j + 3]
        bank[j] = np.interp(freqs, [a, b, c], [0, 1, 0], left=0, right=0)
        if normalize:
            bank[j] *= 2 / (c - a)
    return bank


@pytest.mark.parametrize(("formula", "normalize", "lo", "hi"),
                         [("slaney", True, 0.0, 0.0), ("htk", False, 300.0, 6000.0), ("slaney", False, 50.0, 7000.0)])
def test_mel_filter_bank(formula: str, normalize: bool, lo: float, hi: float) -> None:
    spec = RNG.random((257, 30)).astype(np.float32)
    out = ndd.mel_filter_bank(ndd.as_tensor(spec, layout="ft"), sample_rate=16000.0, nfilter=40, freq_low=lo,
                              freq_high=hi, normalize=normalize, mel_formula=formula)
    bank = _mel_ref(257, 16000.0, 40, lo, hi or 8000.0, normalize, formula == "htk")
    assert out.layout == "ft"
    close(out, bank @ spec.astype(np.float64), rel=1e-4)


def test_mel_filter_bank_tf_and_batch() -> None:
    specs = [RNG.random((t, 129)).astype(np.float32) for t in (5, 9)]
    out = ndd.mel_filter_bank(ndd.as_batch(specs, layout="tf"), sample_rate=8000.0, nfilter=20)
    bank = _mel_ref(129, 8000.0, 20, 0.0, 4000.0, True, False)
    for o, s in zip(out, specs):
        close(o, s.astype(np.float64) @ bank.T, rel=1e-4)


# -- to_decibels ------------------------------------------------------------------------


def test_to_decibels_reference_max_and_cutoff() -> None:
    xs = [(RNG.random(n) ** 4).astype(np.float32) for n in (50, 80)]
    xs[0][3] = 0
    out = ndd.to_decibels(ndd.as_batch(xs), multiplier=20.0, cutoff_db=-60.0)
    for o, x in zip(out, xs):
        ref = 20 * np.log10(np.maximum(1e-3, x.astype(np.float64) / x.max()))
        np.testing.assert_allclose(np.asarray(o), ref, atol=1e-4)
    assert np.asarray(out.tensors[0])[3] == pytest.approx(-60, abs=1e-4)


def test_to_decibels_fixed_reference() -> None:
    x = np.array([1.0, 10.0, 100.0, 0.0], np.float32)
    out = np.asarray(ndd.to_decibels(ndd.as_tensor(x), reference=10.0, cutoff_db=-30.0))
    np.testing.assert_allclose(out, [-10, 0, 10, -30], atol=1e-5)


# -- mfcc -------------------------------------------------------------------------------


@pytest.mark.parametrize(("dct_type", "normalize"), [(1, False), (2, False), (2, True), (3, False), (3, True),
                                                     (4, False), (4, True)])
def test_mfcc_against_scipy_dct(dct_type: int, normalize: bool) -> None:
    x = RNG.standard_normal((30, 12)).astype(np.float32)
    out = ndd.mfcc(ndd.as_tensor(x), n_mfcc=13, dct_type=dct_type, normalize=normalize)
    ref = scipy.fft.dct(x.astype(np.float64), type=dct_type, axis=0, norm="ortho" if normalize else None)[:13]
    close(out, ref if normalize else ref / 2)  # (scipy's unnormalised DCTs carry a factor 2)


def test_mfcc_axis_lifter_and_clamped_count() -> None:
    x = RNG.standard_normal((4, 10)).astype(np.float32)
    out = ndd.mfcc(ndd.as_tensor(x), n_mfcc=30, axis=1, lifter=22.0, normalize=True)
    ref = scipy.fft.dct(x.astype(np.float64), type=2, axis=1, norm="ortho")
    ref *= 1 + 11 * np.sin(np.pi * np.arange(1, 11) / 22)
    close(out, ref)


# -- power_spectrum ---------------------------------------------------------------------


def test_power_spectrum_axis_nfft_power() -> None:
    x = RNG.standard_normal((6, 50)).astype(np.float32)
    close(ndd.power_spectrum(ndd.as_tensor(x)), np.abs(np.fft.rfft(x.astype(np.float64), axis=1)) ** 2)
    close(ndd.power_spectrum(ndd.as_tensor(x), axis=0, nfft=16, power=1),
          np.abs(np.fft.rfft(x.astype(np.float64), n=16, axis=0)))
    # a negative nfft is the axis length, and any negative axis is the last one, as in DALI
    np.testing.assert_array_equal(np.asarray(ndd.power_spectrum(ndd.as_tensor(x), nfft=-3)),
                                  np.asarray(ndd.power_spectrum(ndd.as_tensor(x))))
    np.testing.assert_array_equal(np.asarray(ndd.power_spectrum(ndd.as_tensor(x), axis=-2)),
                                  np.asarray(ndd.power_spectrum(ndd.as_tensor(x), axis=1)))


def test_power_spectrum_ragged_batch() -> None:
    xs = [RNG.standard_normal(n).astype(np.float32) for n in (10, 33)]
    for o, x in zip(ndd.power_spectrum(ndd.as_batch(xs), nfft=64), xs):
        close(o, np.abs(np.fft.rfft(x.astype(np.float64), n=64)) ** 2)


# -- nonsilent_region -------------------------------------------------------------------


def _nonsilent_ref(x: np.ndarray, cutoff: float, wl: int, ref: float | None = None) -> tuple[int, int]:
    p = x.astype(np.float64) ** 2
    power = np.array([p[max(i - wl + 1, 0):i + 1].sum() / wl for i in range(len(x))])
    loud = np.flatnonzero(10 * np.log10(np.maximum(power, 1e-300) / (ref or power.max())) >= cutoff)
    if not len(loud):
        return 0, 0
    begin = max(loud[0] - wl + 1, 0)
    return int(begin), int(loud[-1] + 1 - begin)


def test_nonsilent_region() -> None:
    xs = []
    for n, a, b in ((3000, 700, 1900), (1500, 0, 400), (800, 500, 800)):
        x = RNG.standard_normal(n).astype(np.float32) * 1e-4
        x[a:b] *= 1e4
        xs.append(x)
    begin, length = ndd.nonsilent_region(ndd.as_batch(xs), window_length=64, cutoff_db=-40.0)
    assert begin.dtype == ndd.int32 and np.asarray(begin.tensors[0]).shape == ()
    for x, bg, ln in zip(xs, begin, length):
        assert (int(np.asarray(bg)), int(np.asarray(ln))) == _nonsilent_ref(x, -40.0, 64)


def test_nonsilent_region_int_and_reference() -> None:
    x = np.zeros(1000, np.int16)
    x[300:500] = RNG.integers(-3000, 3000, 200)
    b, n = ndd.nonsilent_region(ndd.as_tensor(x), window_length=16, reference_power=1e6, cutoff_db=-20.0)
    assert (int(np.asarray(b)), int(np.asarray(n))) == _nonsilent_ref(x, -20.0, 16, 1e6)
    b, n = ndd.nonsilent_region(ndd.as_tensor(np.zeros(50, np.float32)), window_length=8, reference_power=1.0)
    assert int(np.asarray(n)) == 0


# -- audio_resample ---------------------------------------------------------------------


def test_resample_reproduces_band_limited_signal() -> None:
    """A slow sine resampled 16 kHz -> 44.1 kHz matches the sine sampled at 44.1 kHz
    (away from the edges), and the length is ceil(n * out / in)."""
    t_in = np.arange(1600) / 16000
    x = np.sin(2 * np.pi * 440 * t_in).astype(np.float32)
    out = np.asarray(ndd.audio_resample(ndd.as_tensor(x), in_rate=16000.0, out_rate=44100.0))
    assert out.shape == (int(np.ceil(1600 * 44100 / 16000)),)
    ref = np.sin(2 * np.pi * 440 * np.arange(len(out)) / 44100)
    np.testing.assert_allclose(out[200:-200], ref[200:-200], atol=2e-3)


def test_resample_identity_positions_and_channels() -> None:
    x = RNG.standard_normal((100, 2)).astype(np.float32)
    out = np.asarray(ndd.audio_resample(ndd.as_tensor(x), scale=2.0))
    assert out.shape == (200, 2)
    np.testing.assert_allclose(out[::2], x, atol=1e-5)  # sinc zeros at the other input samples
    half = np.asarray(ndd.audio_resample(ndd.as_tensor(x), out_length=50))
    assert half.shape == (50, 2)


def test_resample_dtype_rescales() -> None:
    x = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5], np.float32)
    out = np.asarray(ndd.audio_resample(ndd.as_tensor(x), scale=0.5 * 2, dtype=ndd.int16))
    np.testing.assert_allclose(out, np.clip(np.round(x * 32767), -32767, 32767), atol=1)
    i16 = np.array([-32767, 0, 16384], np.int16)
    f = np.asarray(ndd.audio_resample(ndd.as_tensor(i16), scale=1.0, dtype=ndd.float32))
    np.testing.assert_allclose(f, i16 / 32767, atol=1e-5)


def test_resample_unsigned_output_filters_in_its_range() -> None:
    """As DALI: to an unsigned type the samples are first mapped to 0..max, then filtered (near
    the edges, where the taps do not sum to 1, this differs from filtering in -1..1)."""
    x = RNG.uniform(-0.9, 0.9, 40).astype(np.float32)
    u8 = np.asarray(ndd.audio_resample(ndd.as_tensor(x), scale=2.0, dtype=ndd.uint8))
    shifted = np.asarray(ndd.audio_resample(ndd.as_tensor((x + 1) * np.float32(127.5)), scale=2.0))
    np.testing.assert_array_equal(u8, np.clip(np.floor(shifted + 0.5), 0, 255))
    np.testing.assert_allclose(u8[::2], np.round((x + 1) * 127.5), atol=1)


def test_spectrogram_one_sample_signal_is_repeated() -> None:
    out = np.asarray(ndd.spectrogram(ndd.as_tensor(np.array([0.5], np.float32)), window_length=8, window_step=4))
    hann = 0.5 * (1 - np.cos(2 * np.pi * (np.arange(8) + 0.5) / 8))
    close(out[:, 0], np.abs(np.fft.rfft(0.5 * hann)) ** 2)


def test_resample_zero_scale_and_empty_input() -> None:
    assert np.asarray(ndd.audio_resample(ndd.as_tensor(np.ones(5, np.float32)), scale=0.0)).shape == (0,)
    with pytest.raises(RuntimeError, match="sample 1.*empty"):
        ndd.audio_resample(ndd.as_batch([np.ones(5, np.float32), np.ones(0, np.float32)]), out_length=4)


def test_resample_per_sample_scale() -> None:
    xs = [RNG.standard_normal(n).astype(np.float32) for n in (100, 60)]
    out = ndd.audio_resample(ndd.as_batch(xs), scale=ndd.as_batch([np.float32(1.5), np.float32(0.5)]))
    assert [np.asarray(o).shape for o in out] == [(150,), (30,)]


# -- decoders.audio ---------------------------------------------------------------------


def _wav(samples: np.ndarray, width: int, rate: int) -> np.ndarray:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return np.frombuffer(buf.getvalue(), np.uint8)


def _float_wav(samples: np.ndarray, rate: int) -> np.ndarray:
    data = samples.astype("<f4").tobytes()
    ch = samples.shape[1]
    fmt = struct.pack("<HHIIHH", 3, ch, rate, rate * ch * 4, ch * 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return np.frombuffer(b"RIFF" + struct.pack("<I", len(body)) + body, np.uint8)


def test_decode_wav_pcm16_and_float() -> None:
    pcm = RNG.integers(-32768, 32768, (120, 2)).astype("<i2")
    audio, rate = ndd.decoders.audio(ndd.as_tensor(_wav(pcm, 2, 16000)))
    assert audio.dtype == ndd.float32 and float(np.asarray(rate)) == 16000.0 and rate.dtype == ndd.float32
    np.testing.assert_array_equal(np.asarray(audio), pcm / 32768)
    raw, _ = ndd.decoders.audio(ndd.as_tensor(_wav(pcm, 2, 16000)), dtype=ndd.int16)
    np.testing.assert_array_equal(np.asarray(raw), pcm)
    fl = RNG.uniform(-1, 1, (50, 1)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ndd.decoders.audio(ndd.as_tensor(_float_wav(fl, 8000)))[0]), fl)


def test_decode_wav_8_and_24_bit() -> None:
    u8 = RNG.integers(0, 256, (40, 1)).astype(np.uint8)
    out = np.asarray(ndd.decoders.audio(ndd.as_tensor(_wav(u8, 1, 8000)))[0])
    np.testing.assert_array_equal(out, (u8.astype(np.float64) - 128) / 128)
    v = RNG.integers(-2 ** 23, 2 ** 23, 40)
    raw = b"".join(int(a).to_bytes(3, "little", signed=True) for a in v)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(3)
        w.setframerate(8000)
        w.writeframes(raw)
    out = np.asarray(ndd.decoders.audio(ndd.as_tensor(np.frombuffer(buf.getvalue(), np.uint8)))[0])
    np.testing.assert_allclose(out[:, 0], v / 2 ** 23, atol=1e-7)


def test_decode_downmix_resample_batch() -> None:
    pcm = RNG.integers(-20000, 20000, (400, 2)).astype("<i2")
    encoded = [_wav(pcm, 2, 16000), _wav(pcm[:, :1].copy(), 2, 8000)]
    audio, rate = ndd.decoders.audio(ndd.as_batch(encoded), downmix=True,
                                     sample_rate=ndd.as_batch([np.float32(8000), np.float32(8000)]))
    assert [np.asarray(a).shape for a in audio] == [(200,), (400,)]
    assert [float(np.asarray(r)) for r in rate] == [8000.0, 8000.0]
    np.testing.assert_allclose(np.asarray(audio.tensors[1]), pcm[:, 0] / 32768, atol=1e-7)  # no resampling needed
    mono = np.asarray(ndd.decoders.audio(ndd.as_tensor(encoded[0]), downmix=True)[0])
    np.testing.assert_allclose(mono, pcm.mean(axis=1) / 32768, atol=1e-7)


def test_asr_pipeline_end_to_end() -> None:
    t = np.arange(8000) / 16000
    pcm = (np.sin(2 * np.pi * 300 * t) * 10000).astype("<i2")[:, None]
    audio, rate = ndd.decoders.audio(ndd.as_batch([_wav(pcm, 2, 16000)]), downmix=True)
    x = ndd.preemphasis_filter(audio)
    spec = ndd.spectrogram(x, nfft=512, window_length=400, window_step=160)
    mel = ndd.mel_filter_bank(spec, sample_rate=16000.0, nfilter=64)
    db = ndd.to_decibels(mel, cutoff_db=-80.0)
    out = ndd.normalize(db, axes=[1])
    arr = np.asarray(out.tensors[0])
    assert arr.shape == (64, 8000 // 160 + 1) and np.isfinite(arr).all()


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "match"), [
    (lambda: ndd.preemphasis_filter(ndd.as_tensor(np.ones(4, np.float32)), border="bad"), "border"),
    (lambda: ndd.preemphasis_filter(ndd.as_tensor(np.ones(4, np.float16))), "input type"),
    (lambda: ndd.spectrogram(ndd.as_tensor(np.ones(100, np.float32)), window_length=60, nfft=32), "nfft"),
    (lambda: ndd.spectrogram(ndd.as_tensor(np.ones(100, np.float32)), window_length=8, window_fn=[1.0]), "window_fn"),
    (lambda: ndd.spectrogram(ndd.as_tensor(np.ones((2, 50), np.float32)), window_length=8), "sample|input"),
    (lambda: ndd.spectrogram(ndd.as_tensor(np.ones(10, np.float32)), window_length=64, center_windows=False),
     "shorter"),
    (lambda: ndd.spectrogram(ndd.as_tensor(np.ones(100, np.float64))), "float32"),
    (lambda: ndd.mel_filter_bank(ndd.as_tensor(np.ones((5, 3), np.float32), layout="ab")), "'f'"),
    (lambda: ndd.mel_filter_bank(ndd.as_tensor(np.ones((5, 3), np.float32)), freq_high=30000.0,
                                 sample_rate=16000.0), "freq_high"),
    (lambda: ndd.to_decibels(ndd.as_tensor(np.ones(3, np.float32)), reference=0.0), "reference"),
    (lambda: ndd.mfcc(ndd.as_tensor(np.ones((5, 3), np.float32)), dct_type=1, normalize=True), "normalize"),
    (lambda: ndd.mfcc(ndd.as_tensor(np.ones((5, 3), np.float32)), dct_type=5), "dct_type"),
    (lambda: ndd.mfcc(ndd.as_tensor(np.ones((5, 3), np.float32)), axis=2), "axis"),
    (lambda: ndd.power_spectrum(ndd.as_tensor(np.ones(5, np.float32)), power=3), "power"),
    (lambda: ndd.nonsilent_region(ndd.as_tensor(np.ones(5, np.float32)), window_length=100), "reset_interval"),
    (lambda: ndd.nonsilent_region(ndd.as_tensor(np.ones((5, 2), np.float32))), "1-D"),
    (lambda: ndd.audio_resample(ndd.as_tensor(np.ones(5, np.float32))), "scale"),
    (lambda: ndd.audio_resample(ndd.as_tensor(np.ones(5, np.float32)), scale=2.0, out_length=3), "scale"),
    (lambda: ndd.audio_resample(ndd.as_tensor(np.ones(5, np.float32)), scale=2.0, quality=200.0), "quality"),
    (lambda: ndd.audio_resample(ndd.as_tensor(np.ones(5, np.float32)), scale=-2.0), "scale"),
    (lambda: ndd.decoders.audio(ndd.as_tensor(np.frombuffer(b"fLaC" + bytes(40), np.uint8))), "sample 0|FLAC"),
    (lambda: ndd.decoders.audio(ndd.as_tensor(np.ones(10, np.uint8)), dtype=ndd.uint8), "dtype"),
])
def test_errors(call, match: str) -> None:
    with pytest.raises((ValueError, RuntimeError), match=match):
        call()


def test_decode_error_names_sample_and_format() -> None:
    good = _wav(np.zeros((4, 1), "<i2"), 2, 8000)
    bad = np.frombuffer(b"OggS" + bytes(40), np.uint8)
    with pytest.raises(RuntimeError, match=r"sample 1.*OGG"):
        ndd.decoders.audio(ndd.as_batch([good, bad]))
