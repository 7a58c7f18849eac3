"""Schemas of the audio operators: preemphasis_filter, spectrogram, mel_filter_bank,
to_decibels, mfcc, power_spectrum, nonsilent_region, decoders.audio and audio_resample
(DALI 2.4's names, arguments and defaults; CPU kernels in ndd-ops-cpu)."""

from __future__ import annotations

from collections.abc import Sequence

from . import _dtype
from ._schema import BOOL, DTYPE, FLOAT, FLOATS, INT, STR, Arg, OpSchema, OutMeta, given

_PKG = "ndd-ops-cpu"
_F32 = _dtype.float32


def _err(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


def _need_float32(op: str, m: OutMeta) -> None:
    if m.dtype != _F32:
        raise ValueError(f"Operator `{op}`: expects float32 input (as DALI), got {m.dtype}")


def _need_positive(op: str, args: dict, *names: str) -> None:
    for n in names:
        if args[n] is not None and args[n] <= 0:
            raise _err(op, n, f"must be positive, got {args[n]}")


# -- preemphasis_filter -----------------------------------------------------------------

_NUMERIC = (_dtype.uint8, _dtype.int8, _dtype.uint16, _dtype.int16, _dtype.uint32, _dtype.int32,
            _dtype.uint64, _dtype.int64, _F32, _dtype.float64)


def _preemph_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    if m.dtype not in _NUMERIC:
        raise ValueError(f"Operator `preemphasis_filter`: unsupported input type {m.dtype} (as DALI: integers, "
                        "float32 and float64)")
    return [OutMeta(args["dtype"], m.ndim, m.layout)]


def _preemph_validate(args: dict) -> None:
    if args["dtype"] not in _NUMERIC:
        raise _err("preemphasis_filter", "dtype", f"must be an integer type, float32 or float64, got {args['dtype']}")


PREEMPHASIS_FILTER = OpSchema(
    "preemphasis_filter",
    args={
        "preemph_coeff": Arg(FLOAT, 0.97, per_sample=True, doc="the coefficient c of y[t] = x[t] - c x[t-1]"),
        "border": Arg(STR, "clamp", choices=("zero", "clamp", "reflect"),
                      doc="x[-1] taken as 0 ('zero'), x[0] ('clamp') or x[1] ('reflect')"),
        "dtype": Arg(DTYPE, _F32, doc="output type (integers saturate)"),
    },
    infer=_preemph_infer, validate=_preemph_validate, provided_by=_PKG,
    doc="Apply the pre-emphasis filter y[t] = x[t] - preemph_coeff * x[t-1] to the flattened samples "
        "(computed in float32, float64 for float64 input).",
)

# -- spectrogram ------------------------------------------------------------------------


def _spectrogram_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    _need_float32("spectrogram", inputs[0])
    return [OutMeta(_F32, 2, args["layout"])]


def _spectrogram_validate(args: dict) -> None:
    op = "spectrogram"
    _need_positive(op, args, "window_length", "window_step", "nfft")
    wl = args["window_length"]
    if args["nfft"] is not None and args["nfft"] < wl:
        raise _err(op, "nfft", f"({args['nfft']}) cannot be smaller than window_length ({wl})")
    if args["window_fn"] is not None and len(args["window_fn"]) != wl:
        raise _err(op, "window_fn", f"must have window_length ({wl}) values, got {len(args['window_fn'])}")
    if args["power"] not in (1, 2):
        raise _err(op, "power", f"must be 1 (magnitude) or 2 (power), got {args['power']}")


SPECTROGRAM = OpSchema(
    "spectrogram",
    args={
        "nfft": Arg(INT, None, doc="FFT size, at least window_length (not set: window_length); "
                                   "nfft // 2 + 1 frequency bins"),
        "window_length": Arg(INT, 512, doc="window size in samples"),
        "window_step": Arg(INT, 256, doc="step between windows in samples"),
        "window_fn": Arg(FLOATS, None, doc="window_length window values (not set: a Hann window)"),
        "power": Arg(INT, 2, doc="exponent of the magnitude: 1 or 2"),
        "center_windows": Arg(BOOL, True, doc="centre window i at i * window_step (padding the signal)"),
        "reflect_padding": Arg(BOOL, True, doc="pad by mirroring the signal (False: zeros)"),
        "layout": Arg(STR, "ft", choices=("ft", "tf"), doc="output layout: 'ft' (frequency-major) or 'tf'"),
    },
    infer=_spectrogram_infer, validate=_spectrogram_validate, provided_by=_PKG,
    doc="Short-time Fourier transform magnitudes of a float32 1-D signal (or one with all but one "
        "extent 1).",
)

# -- mel_filter_bank --------------------------------------------------------------------


def _freq_axis(op: str, layout: str | None, ndim: int) -> int:
    """The 'f' axis of a spectrogram: from its layout, or 0 (1-D, 2-D) / ndim - 2 without one."""
    if layout:
        if "f" not in layout:
            raise ValueError(f"Operator `{op}`: the input layout {layout!r} has no 'f' (frequency) axis")
        return layout.index("f")
    return 0 if ndim < 2 else ndim - 2


def _mel_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    _need_float32("mel_filter_bank", m)
    _freq_axis("mel_filter_bank", m.layout, m.ndim)
    return [m]


def _mel_validate(args: dict) -> None:
    op = "mel_filter_bank"
    _need_positive(op, args, "nfilter", "sample_rate")
    if args["freq_low"] < 0:
        raise _err(op, "freq_low", f"must be at least 0, got {args['freq_low']}")
    high = args["freq_high"] or args["sample_rate"] / 2
    if not args["freq_low"] < high <= args["sample_rate"]:
        raise _err(op, "freq_high", f"must be in (freq_low, sample_rate], got {high} with freq_low="
                                    f"{args['freq_low']} and sample_rate={args['sample_rate']}")


MEL_FILTER_BANK = OpSchema(
    "mel_filter_bank",
    args={
        "sample_rate": Arg(FLOAT, 44100.0, doc="sampling rate of the signal, Hz"),
        "nfilter": Arg(INT, 128, doc="number of mel filters"),
        "freq_low": Arg(FLOAT, 0.0, doc="lowest frequency, Hz"),
        "freq_high": Arg(FLOAT, 0.0, doc="highest frequency, Hz (0: sample_rate / 2)"),
        "normalize": Arg(BOOL, True, doc="filters of unit area (False: of unit peak)"),
        "mel_formula": Arg(STR, "slaney", choices=("slaney", "htk"), doc="Hz to mel: 'slaney' or 'htk'"),
    },
    infer=_mel_infer, validate=_mel_validate, provided_by=_PKG,
    doc="Apply a bank of triangular mel filters along the frequency ('f') axis of a spectrogram "
        "(no layout: 'f', 'ft' or '*ft' by the number of dimensions).",
)

# -- to_decibels ------------------------------------------------------------------------


def _db_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    _need_float32("to_decibels", inputs[0])
    return [inputs[0]]


def _db_validate(args: dict) -> None:
    if args["reference"] is not None and args["reference"] == 0:
        raise _err("to_decibels", "reference", "cannot be 0 (leave it unset to use each sample's maximum)")


TO_DECIBELS = OpSchema(
    "to_decibels",
    args={
        "multiplier": Arg(FLOAT, 10.0, doc="factor of the logarithm: 10 for power, 20 for magnitude"),
        "reference": Arg(FLOAT, None, doc="reference magnitude (not set: each sample's maximum)"),
        "cutoff_db": Arg(FLOAT, -200.0, doc="lowest output, dB"),
    },
    infer=_db_infer, validate=_db_validate, provided_by=_PKG,
    doc="multiplier * log10(max(10 ** (cutoff_db / multiplier), x / reference)), in float32.",
)

# -- mfcc -------------------------------------------------------------------------------


def _mfcc_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "mfcc"
    m = inputs[0]
    _need_float32(op, m)
    if m.ndim < 2:
        raise ValueError(f"Operator `{op}`: expects at least a 2-D input (a mel spectrogram), got {m.ndim}-D")
    if not 0 <= args["axis"] < m.ndim:
        raise _err(op, "axis", f"must be in [0, {m.ndim}) for a {m.ndim}-D input, got {args['axis']}")
    return [m]


def _mfcc_validate(args: dict) -> None:
    op = "mfcc"
    if args["dct_type"] not in (1, 2, 3, 4):
        raise _err(op, "dct_type", f"must be 1, 2, 3 or 4, got {args['dct_type']}")
    if args["dct_type"] == 1 and args["normalize"]:
        raise _err(op, "normalize", "is not supported with dct_type=1")
    _need_positive(op, args, "n_mfcc")


MFCC = OpSchema(
    "mfcc",
    args={
        "n_mfcc": Arg(INT, 20, doc="number of coefficients (at most the axis length)"),
        "dct_type": Arg(INT, 2, doc="DCT type 1, 2, 3 or 4 (Wikipedia's definitions)"),
        "normalize": Arg(BOOL, False, doc="orthonormal DCT (not with type 1)"),
        "axis": Arg(INT, 0, doc="axis the DCT runs over"),
        "lifter": Arg(FLOAT, 0.0, doc="when > 0, coefficient i is scaled by 1 + sin(pi (i + 1) / lifter) * lifter / 2"),
    },
    infer=_mfcc_infer, validate=_mfcc_validate, provided_by=_PKG,
    doc="Mel-frequency cepstral coefficients: a DCT of a (log) mel spectrogram along axis.",
)

# -- power_spectrum ---------------------------------------------------------------------


def _power_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "power_spectrum"
    m = inputs[0]
    _need_float32(op, m)
    if m.ndim < 1:
        raise ValueError(f"Operator `{op}`: expects at least a 1-D input, got a scalar")
    if args["axis"] >= m.ndim:  # (any negative axis is the last one, as in DALI)
        raise _err(op, "axis", f"is out of range for a {m.ndim}-D input, got {args['axis']}")
    return [m]


def _power_validate(args: dict) -> None:
    if args["power"] not in (1, 2):
        raise _err("power_spectrum", "power", f"must be 1 (magnitude) or 2 (power), got {args['power']}")


POWER_SPECTRUM = OpSchema(
    "power_spectrum",
    args={
        "nfft": Arg(INT, None, doc="FFT size (not set or not positive: the axis length; the signal is cut or "
                                   "zero-padded to it); nfft // 2 + 1 bins"),
        "axis": Arg(INT, -1, doc="axis transformed (any negative value: the last)"),
        "power": Arg(INT, 2, doc="exponent of the magnitude: 1 or 2"),
    },
    infer=_power_infer, validate=_power_validate, provided_by=_PKG,
    doc="|FFT|**power of a float32 signal along axis (the non-negative frequencies).",
)

# -- nonsilent_region -------------------------------------------------------------------

_NSR_TYPES = _NUMERIC[:-1]


def _nsr_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "nonsilent_region"
    m = inputs[0]
    if m.dtype not in _NSR_TYPES:
        raise ValueError(f"Operator `{op}`: unsupported input type {m.dtype} (as DALI: integers and float32)")
    if m.ndim != 1:
        raise ValueError(f"Operator `{op}`: expects a 1-D input, got {m.ndim}-D")
    return [OutMeta(_dtype.int32, 0, None), OutMeta(_dtype.int32, 0, None)]


def _nsr_validate(args: dict) -> None:
    op = "nonsilent_region"
    _need_positive(op, args, "window_length")
    ri, wl = args["reset_interval"], args["window_length"]
    if ri != -1 and (ri <= 0 or ri % wl):
        raise _err(op, "reset_interval", f"must be -1 or a positive multiple of window_length ({wl}), got {ri}")
    if args["reference_power"] is not None and args["reference_power"] <= 0:
        raise _err(op, "reference_power", f"must be positive, got {args['reference_power']}")


NONSILENT_REGION = OpSchema(
    "nonsilent_region",
    args={
        "cutoff_db": Arg(FLOAT, -60.0, doc="threshold in dB below which the signal is silent"),
        "reference_power": Arg(FLOAT, None, doc="power of 0 dB (not set: the largest short-term power)"),
        "reset_interval": Arg(INT, 8192, doc="samples after which the running sum is recomputed (-1: never)"),
        "window_length": Arg(INT, 2048, doc="samples over which the short-term power is averaged"),
    },
    infer=_nsr_infer, validate=_nsr_validate, provided_by=_PKG,
    doc="Begin and length (int32 scalars) of the region between the first and last window whose "
        "mean power is at least cutoff_db relative to the reference (length 0: all silent).",
)

# -- audio_resample, decoders.audio -----------------------------------------------------

_RESAMPLE_RATE_ARGS = ("in_rate", "out_rate", "scale", "out_length")
_RESAMPLE_TYPES = (_dtype.uint8, _dtype.int8, _dtype.uint16, _dtype.int16, _dtype.uint32, _dtype.int32, _F32)


def _resample_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "audio_resample"
    m = inputs[0]
    if m.dtype not in _RESAMPLE_TYPES:
        raise ValueError(f"Operator `{op}`: unsupported input type {m.dtype} (as DALI: 8-, 16- and 32-bit "
                         "integers and float32)")
    if m.ndim not in (1, 2):
        raise ValueError(f"Operator `{op}`: expects 1-D audio or 2-D (samples, channels), got {m.ndim}-D")
    have = [n for n in _RESAMPLE_RATE_ARGS if given(args, n)]
    if have not in (["in_rate", "out_rate"], ["scale"], ["out_length"]):
        raise ValueError(f"Operator `{op}`: give either in_rate and out_rate, or scale, or out_length; "
                         f"got {', '.join(have) or 'none of them'}")
    return [OutMeta(args["dtype"] or m.dtype, m.ndim, m.layout)]


def _quality_validate(op: str, args: dict) -> None:
    if not 0 <= args["quality"] <= 100:
        raise _err(op, "quality", f"must be in [0, 100], got {args['quality']}")


def _resample_validate(args: dict) -> None:
    _quality_validate("audio_resample", args)
    if args["dtype"] is not None and args["dtype"] not in _RESAMPLE_TYPES:
        raise _err("audio_resample", "dtype", f"must be an 8-, 16- or 32-bit integer type or float32, "
                                              f"got {args['dtype']}")


AUDIO_RESAMPLE = OpSchema(
    "audio_resample",
    args={
        "in_rate": Arg(FLOAT, None, per_sample=True, doc="input sampling rate (with out_rate)"),
        "out_rate": Arg(FLOAT, None, per_sample=True, doc="output sampling rate (with in_rate)"),
        "scale": Arg(FLOAT, None, per_sample=True, doc="output rate / input rate"),
        "out_length": Arg(INT, None, per_sample=True, doc="output length in samples"),
        "quality": Arg(FLOAT, 50.0, doc="0..100: 3, 16 (at 50) to 64 lobes of the windowed sinc"),
        "dtype": Arg(DTYPE, None, doc="output type (not set: the input's); values are rescaled to "
                                      "its range, floats spanning -1..1 (uint8 0..255 as -1..1)"),
    },
    infer=_resample_infer, validate=_resample_validate, provided_by=_PKG,
    doc="Resample 1-D audio or (samples, channels) audio with a Hann-windowed sinc filter.",
)

_DECODE_TYPES = (_dtype.int16, _dtype.int32, _F32)


def _decode_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    return [OutMeta(args["dtype"], 1 if args["downmix"] else 2, None), OutMeta(_F32, 0, None)]


def _decode_validate(args: dict) -> None:
    op = "decoders.audio"
    if args["dtype"] not in _DECODE_TYPES:
        raise _err(op, "dtype", f"must be int16, int32 or float32, got {args['dtype']}")
    _quality_validate(op, args)


DECODE_AUDIO = OpSchema(
    "decoders.audio",
    args={
        "sample_rate": Arg(FLOAT, None, per_sample=True, doc="resample to this rate, Hz (not set or 0: keep the file's)"),
        "downmix": Arg(BOOL, False, doc="average the channels to one (1-D output)"),
        "dtype": Arg(DTYPE, _F32, doc="output type: int16, int32 or float32 (in -1..1)"),
        "quality": Arg(FLOAT, 50.0, doc="resampling quality, as in audio_resample"),
    },
    infer=_decode_infer, validate=_decode_validate, provided_by=_PKG, host_inputs=True,
    doc="Decode WAV files (PCM 8/16/24/32-bit, float 32/64-bit; a 1-D uint8 tensor each) to "
        "(samples, channels) audio and its sampling rate (a float32 scalar).",
)

AUDIO_SCHEMAS = (PREEMPHASIS_FILTER, SPECTROGRAM, MEL_FILTER_BANK, TO_DECIBELS, MFCC, POWER_SPECTRUM,
                 NONSILENT_REGION, AUDIO_RESAMPLE, DECODE_AUDIO)
