"""color_space_conversion, lookup_table and erase on the CPU: NumPy references written
here, values observed from DALI 2.4 (CPU) on small fixed inputs, and every error path.

Values "observed from DALI 2.4" were produced by nvidia.dali.experimental.dynamic 2.4 on
the same inputs and are compared exactly (all three operators give integers, or floats
that are copies of float32 values)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ndd
from ndd.types import DALIImageType as T

# -- color_space_conversion -------------------------------------------------------------

PIX = np.array([[[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0]],
                [[0, 0, 255], [10, 200, 30], [128, 64, 32], [1, 2, 3]]], np.uint8)

# Observed from DALI 2.4: PIX (read as image_type) converted to output_type, pixel by pixel.
CSC_OBSERVED = {
    (T.RGB, T.BGR): [[0, 0, 0], [255, 255, 255], [0, 0, 255], [0, 255, 0], [255, 0, 0], [30, 200, 10],
                     [32, 64, 128], [3, 2, 1]],
    (T.RGB, T.GRAY): [[0], [255], [76], [150], [29], [124], [79], [2]],
    (T.RGB, T.YCbCr): [[16, 128, 128], [235, 128, 128], [81, 90, 240], [145, 54, 34], [41, 240, 110],
                       [122, 81, 57], [84, 104, 158], [18, 129, 127]],
    (T.BGR, T.RGB): [[0, 0, 0], [255, 255, 255], [0, 0, 255], [0, 255, 0], [255, 0, 0], [30, 200, 10],
                     [32, 64, 128], [3, 2, 1]],
    (T.BGR, T.GRAY): [[0], [255], [29], [150], [76], [128], [62], [2]],
    (T.BGR, T.YCbCr): [[16, 128, 128], [235, 128, 128], [41, 240, 110], [145, 54, 34], [81, 90, 240],
                       [126, 70, 67], [69, 161, 109], [18, 127, 129]],
    (T.YCbCr, T.RGB): [[0, 136, 0], [255, 125, 255], [74, 255, 20], [0, 36, 238], [184, 0, 0], [0, 44, 138],
                       [0, 234, 1], [0, 134, 0]],
    (T.YCbCr, T.BGR): [[0, 136, 0], [255, 125, 255], [20, 255, 74], [238, 36, 0], [0, 0, 184], [138, 44, 0],
                       [1, 234, 0], [0, 134, 0]],
    (T.YCbCr, T.GRAY): [[0], [255], [255], [0], [0], [0], [130], [0]],
}
GRAY_IN = np.array([[[0], [16], [100], [235], [255]]], np.uint8)
GRAY_OBSERVED = {  # observed from DALI 2.4 for GRAY_IN
    T.RGB: [[0, 0, 0], [16, 16, 16], [100, 100, 100], [235, 235, 235], [255, 255, 255]],
    T.BGR: [[0, 0, 0], [16, 16, 16], [100, 100, 100], [235, 235, 235], [255, 255, 255]],
    T.YCbCr: [[16, 128, 128], [30, 128, 128], [102, 128, 128], [218, 128, 128], [235, 128, 128]],
}

# Pixels where float64 BT.601 formulas round differently from DALI (float32 sums, OpenCV's
# fixed-point gray), with DALI 2.4's outputs.
HARD_RGB = np.array([[3, 168, 11], [8, 168, 188], [15, 175, 195], [129, 14, 15], [155, 177, 11],
                     [165, 105, 145], [176, 176, 169], [184, 241, 44], [191, 97, 118], [208, 208, 201],
                     [219, 239, 59], [235, 27, 249]], np.uint8)
HARD_RGB_YCBCR = [[103, 83, 67], [121, 160, 56], [127, 160, 56], [58, 111, 178], [146, 58, 130],
                  [125, 137, 151], [166, 125, 129], [189, 50, 117], [125, 123, 168], [194, 125, 129],
                  [199, 52, 132], [114, 195, 204]]
HARD_RGB_GRAY = [101, 122, 129, 49, 152, 128, 175, 202, 128, 207, 213, 114]
HARD_YCC = np.array([[45, 212, 94], [103, 141, 78], [167, 15, 189], [176, 87, 78], [176, 160, 78],
                     [212, 163, 144]], np.uint8)
HARD_YCC_RGB = [[0, 28, 203], [22, 137, 128], [255, 171, 0], [107, 243, 104], [107, 214, 251], [254, 202, 255]]
HARD_YCC_GRAY = [34, 101, 176, 186, 186, 228]


def _csc(x: np.ndarray, src: T, dst: T, layout: str | None = "HWC") -> np.ndarray:
    t = ndd.as_tensor(x, layout=layout) if layout else ndd.as_tensor(x)
    out = ndd.color_space_conversion(t, image_type=src, output_type=dst)
    assert out.dtype == ndd.uint8
    return np.asarray(out)


@pytest.mark.parametrize("pair", list(CSC_OBSERVED))
def test_csc_values_observed_from_dali(pair) -> None:
    got = _csc(PIX, *pair)
    assert got.shape == (2, 4, len(CSC_OBSERVED[pair][0]))
    assert got.reshape(8, -1).tolist() == CSC_OBSERVED[pair]


@pytest.mark.parametrize("dst", list(GRAY_OBSERVED))
def test_csc_from_gray_observed_from_dali(dst) -> None:
    assert _csc(GRAY_IN, T.GRAY, dst).reshape(5, 3).tolist() == GRAY_OBSERVED[dst]


def test_csc_rounding_as_dali_on_hard_pixels() -> None:
    rgb = HARD_RGB[None]
    assert _csc(rgb, T.RGB, T.YCbCr)[0].tolist() == HARD_RGB_YCBCR
    assert _csc(rgb, T.RGB, T.GRAY)[0, :, 0].tolist() == HARD_RGB_GRAY
    assert _csc(rgb[..., ::-1].copy(), T.BGR, T.YCbCr)[0].tolist() == HARD_RGB_YCBCR
    assert _csc(HARD_YCC[None], T.YCbCr, T.RGB)[0].tolist() == HARD_YCC_RGB
    assert _csc(HARD_YCC[None], T.YCbCr, T.BGR)[0].tolist() == [p[::-1] for p in HARD_YCC_RGB]
    assert _csc(HARD_YCC[None], T.YCbCr, T.GRAY)[0, :, 0].tolist() == HARD_YCC_GRAY


def _round(x: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(x + 0.5), 0, 255)


def test_csc_against_bt601_reference(rng) -> None:
    """float64 ITU-R BT.601 formulas: every value within 1, nearly all equal."""
    x = rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)
    r, g, b = (x[..., k].astype(np.float64) for k in range(3))
    ycc = np.stack([16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255,
                    128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255,
                    128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255], -1)
    y, cb, cr = (x[..., k].astype(np.float64) - o for k, o in enumerate((16, 128, 128)))
    back = np.stack([255 / 219 * y + 1.596027 * cr, 255 / 219 * y - 0.391762 * cb - 0.812968 * cr,
                     255 / 219 * y + 2.017232 * cb], -1)
    refs = [((T.RGB, T.YCbCr), ycc), ((T.RGB, T.GRAY), (0.299 * r + 0.587 * g + 0.114 * b)[..., None]),
            ((T.YCbCr, T.RGB), back), ((T.YCbCr, T.GRAY), (255 / 219 * y)[..., None])]
    for pair, ref in refs:
        got = _csc(x, *pair).astype(np.float64)
        d = np.abs(got - _round(ref))
        assert d.max() <= 1, pair
        assert np.mean(d == 0) > 0.995, pair


def test_csc_gray_is_opencv_fixed_point(rng) -> None:
    """RGB -> GRAY as DALI's CPU (OpenCV): (9798 R + 19235 G + 3735 B + 2**14) >> 15, exactly."""
    x = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    w = x.astype(np.int64)
    ref = (9798 * w[..., 0] + 19235 * w[..., 1] + 3735 * w[..., 2] + 16384) >> 15
    np.testing.assert_array_equal(_csc(x, T.RGB, T.GRAY)[..., 0], ref)
    np.testing.assert_array_equal(_csc(x[..., ::-1].copy(), T.BGR, T.GRAY)[..., 0], ref)


def test_csc_channel_swaps_and_gray_repeat(rng) -> None:
    x = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(_csc(x, T.RGB, T.BGR), x[..., ::-1])
    np.testing.assert_array_equal(_csc(x, T.BGR, T.RGB), x[..., ::-1])
    g = x[..., :1].copy()
    np.testing.assert_array_equal(_csc(g, T.GRAY, T.RGB), np.repeat(g, 3, -1))
    # BGR -> YCbCr reads the channels backwards; YCbCr -> BGR writes them backwards
    np.testing.assert_array_equal(_csc(x, T.BGR, T.YCbCr), _csc(x[..., ::-1].copy(), T.RGB, T.YCbCr))
    np.testing.assert_array_equal(_csc(x, T.YCbCr, T.BGR), _csc(x, T.YCbCr, T.RGB)[..., ::-1])


@pytest.mark.parametrize("shape,layout,out_layout", [
    ((2, 3, 4, 3), "FHWC", "FHWC"), ((2, 3, 4, 3), "DHWC", "DHWC"), ((2, 2, 3, 4, 3), "FDHWC", "FDHWC"),
    ((3, 4, 3), None, "HWC"), ((2, 3, 4, 3), None, "FHWC"), ((2, 2, 3, 4, 3), None, "FDHWC"),
])
def test_csc_layouts(rng, shape, layout, out_layout) -> None:
    """Sequences and volumes convert pixel by pixel; without a layout, 3-5 dims are
    HWC / FHWC / FDHWC (as DALI 2.4: a 4-D input comes back FHWC)."""
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    t = ndd.as_tensor(x, layout=layout) if layout else ndd.as_tensor(x)
    out = ndd.color_space_conversion(t, image_type=T.RGB, output_type=T.GRAY)
    assert out.layout == out_layout
    ref = _csc(x.reshape(1, -1, 3), T.RGB, T.GRAY).reshape(shape[:-1] + (1,))
    np.testing.assert_array_equal(np.asarray(out), ref)


def test_csc_batch_ragged_and_dense(rng) -> None:
    xs = [rng.integers(0, 256, s, dtype=np.uint8) for s in [(4, 5, 3), (2, 7, 3), (0, 3, 3)]]
    out = ndd.color_space_conversion(ndd.as_batch(xs, layout="HWC"), image_type=T.RGB, output_type=T.YCbCr)
    assert out.layout == "HWC"
    for x, o in zip(xs, out):
        np.testing.assert_array_equal(np.asarray(o), _csc(x, T.RGB, T.YCbCr))
    same = [xs[0], xs[0][::-1].copy()]
    dense = ndd.color_space_conversion(ndd.as_batch(same, layout="HWC"), image_type=T.YCbCr, output_type=T.GRAY)
    for x, o in zip(same, dense):
        np.testing.assert_array_equal(np.asarray(o), _csc(x, T.YCbCr, T.GRAY))
    # an empty image converts to an empty one (DALI 2.4's OpenCV path raises for RGB -> GRAY)
    assert np.asarray(list(out)[2]).shape == (0, 3, 3)


def test_csc_int_image_types() -> None:
    """Image types may be given as ints (DALI 2.4: 0 = RGB, 2 = GRAY)."""
    np.testing.assert_array_equal(
        np.asarray(ndd.color_space_conversion(ndd.as_tensor(PIX, layout="HWC"), image_type=0, output_type=2)),
        _csc(PIX, T.RGB, T.GRAY))


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"image_type": T.RGB, "output_type": T.RGB}, ValueError, "both RGB"),
    ({"image_type": T.GRAY, "output_type": T.GRAY}, ValueError, "both GRAY"),
    ({"image_type": T.RGB, "output_type": T.ANY_DATA}, ValueError, "'output_type' must be RGB"),
    ({"image_type": T.ANY_DATA, "output_type": T.RGB}, ValueError, "'image_type' must be RGB"),
    ({"image_type": T.RGB}, TypeError, "missing the required argument 'output_type'"),
    ({"output_type": T.RGB}, TypeError, "missing the required argument 'image_type'"),
    ({"image_type": 7, "output_type": T.RGB}, ValueError, "'image_type': 7 is not a valid"),
    ({"image_type": "RGB", "output_type": T.GRAY}, TypeError, "'image_type'"),
])
def test_csc_argument_errors(kwargs, exc, match) -> None:
    with pytest.raises(exc, match=match):
        ndd.color_space_conversion(ndd.as_tensor(PIX, layout="HWC"), **kwargs)


def test_csc_input_errors() -> None:
    conv = {"image_type": T.RGB, "output_type": T.GRAY}
    with pytest.raises(ValueError, match="expects uint8 images .* got f32"):
        ndd.color_space_conversion(ndd.as_tensor(PIX.astype(np.float32), layout="HWC"), **conv)
    with pytest.raises(ValueError, match="layout HWC, FHWC, DHWC, FDHWC, got 'CHW'"):
        ndd.color_space_conversion(ndd.as_tensor(PIX, layout="CHW"), **conv)
    with pytest.raises(ValueError, match="2-D input without a layout"):
        ndd.color_space_conversion(ndd.as_tensor(PIX[..., 0]), **conv)
    with pytest.raises(ValueError, match="needs 3 channel.*sample 1 has 4"):
        ndd.color_space_conversion(ndd.as_batch([PIX, np.zeros((2, 2, 4), np.uint8)], layout="HWC"), **conv)
    with pytest.raises(ValueError, match="needs 1 channel.*sample 0 has 3"):
        ndd.color_space_conversion(ndd.as_tensor(PIX, layout="HWC"), image_type=T.GRAY, output_type=T.RGB)


# -- lookup_table -----------------------------------------------------------------------

DOC_KEYS, DOC_VALUES = [0, 2, 3, 4, 5, 3], [0.2, 0.4, 0.5, 0.6, 0.7, 0.10]


def _lut(x, **kw) -> np.ndarray:
    return np.asarray(ndd.lookup_table(ndd.as_tensor(x), **kw))


def _lut_reference(x: np.ndarray, keys, values, default: float) -> np.ndarray:
    table = dict(zip(keys, values))  # (a repeated key keeps its last value)
    return np.array([table.get(int(v), default) for v in x.ravel()], np.float32).reshape(x.shape)


def test_lut_doc_example_observed_from_dali() -> None:
    x = np.array([1, 4, 1, 0, 100, 2, 3, 4], np.int32)
    got = _lut(x, keys=DOC_KEYS, values=DOC_VALUES, default_value=0.99)
    assert got.dtype == np.float32
    # observed from DALI 2.4
    assert got.tolist() == [0.9900000095367432, 0.6000000238418579, 0.9900000095367432, 0.20000000298023224,
                            0.9900000095367432, 0.4000000059604645, 0.10000000149011612, 0.6000000238418579]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64])
def test_lut_against_reference(rng, dtype) -> None:
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -300), min(info.max, 700), (20, 30), endpoint=True).astype(dtype)
    keys = [int(k) for k in rng.integers(0, 600, 50)]
    values = [float(v) for v in rng.normal(0, 10, 50).astype(np.float32)]
    got = _lut(x, keys=keys, values=values, default_value=-0.5)
    np.testing.assert_array_equal(got, _lut_reference(x, keys, values, -0.5))


def test_lut_out_of_range_inputs() -> None:
    """Negative inputs and inputs past the largest key give the default (DALI 2.4: [-1, 0, 1, -5]
    with keys [0, 1] -> [0, 5, 6, 0]; int8 -128 and 127; int64 2**40)."""
    assert _lut(np.array([-1, 0, 1, -5], np.int32), keys=[0, 1], values=[5, 6]).tolist() == [0, 5, 6, 0]
    assert _lut(np.array([-1, 0, 1, -128, 127], np.int8), keys=[0, 1, 127],
                values=[5, 6, 9]).tolist() == [0, 5, 6, 0, 9]
    big = np.array([70000, 65535, 65536, 2 ** 40], np.int64)
    assert _lut(big, keys=[65535], values=[1], default_value=9).tolist() == [9, 1, 9, 9]
    huge = np.array([2 ** 64 - 1, 2 ** 63, 3], np.uint64)
    assert _lut(huge, keys=[3], values=[1], default_value=2).tolist() == [2, 2, 1]
    assert _lut(np.array([0, 1, 255], np.uint8), keys=[300, 255], values=[1, 2]).tolist() == [0, 0, 2]


OBSERVED_DTYPES = [  # values [1.5, -2.5, 300.7] for keys 0..2, default 2.5; observed from DALI 2.4
    (ndd.uint8, np.uint8, [2, 0, 255, 3]),
    (ndd.int8, np.int8, [2, -3, 127, 3]),
    (ndd.int16, np.int16, [2, -3, 301, 3]),
    (ndd.uint16, np.uint16, [2, 0, 301, 3]),
    (ndd.int32, np.int32, [2, -3, 301, 3]),
    (ndd.uint32, np.uint32, [2, 0, 301, 3]),
    (ndd.int64, np.int64, [2, -3, 301, 3]),
    (ndd.float32, np.float32, [1.5, -2.5, 300.70001220703125, 2.5]),
    (ndd.float64, np.float64, [1.5, -2.5, 300.70001220703125, 2.5]),
    (ndd.float16, np.float16, [1.5, -2.5, 300.75, 2.5]),
    (ndd.bool, np.bool_, [True, True, True, True]),
]


@pytest.mark.parametrize("dtype,npdt,expected", OBSERVED_DTYPES)
def test_lut_output_types_observed_from_dali(dtype, npdt, expected) -> None:
    got = _lut(np.array([0, 1, 2, 3], np.uint8), keys=[0, 1, 2], values=[1.5, -2.5, 300.7], default_value=2.5,
               dtype=dtype)
    assert got.dtype == npdt
    assert got.tolist() == expected


def test_lut_special_values_observed_from_dali() -> None:
    x = np.array([0, 1], np.uint8)
    nan, inf = float("nan"), float("inf")
    # NaN to an integer type: as DALI's x86 build (0, or the type's minimum for int32/int64, 2**63 for uint64)
    assert _lut(x, keys=[0, 1], values=[nan, inf], dtype=ndd.int8).tolist() == [0, 127]
    assert _lut(x, keys=[0, 1], values=[nan, -inf], dtype=ndd.uint8).tolist() == [0, 0]
    assert _lut(x, keys=[0, 1], values=[nan, inf], dtype=ndd.int16).tolist() == [0, 32767]
    assert _lut(x, keys=[0, 1], values=[nan, inf], dtype=ndd.uint32).tolist() == [0, 4294967295]
    assert _lut(x, keys=[0], values=[nan], dtype=ndd.int32).tolist() == [-2147483648, 0]
    assert _lut(x, keys=[0, 1], values=[nan, -inf], dtype=ndd.int64).tolist() == [-2 ** 63, -2 ** 63]
    assert _lut(x, keys=[0, 1], values=[nan, -inf], dtype=ndd.uint64).tolist() == [2 ** 63, 0]
    assert _lut(x, keys=[0, 1], values=[nan, 0.0], dtype=ndd.bool).tolist() == [True, False]
    assert _lut(x, keys=[0, 1], values=[-0.0, 0.0], default_value=0.3, dtype=ndd.bool).tolist() == [False, False]
    # bool: True unless the value rounds (half away from zero) to 0
    vals = [0.3, 0.5, 0.49, -0.5, -0.7, 1e-3, nan, inf, 0.50000006, 0.49999997, -0.49999997, 2.0, 256.0]
    got = _lut(np.arange(14, dtype=np.int32), keys=list(range(13)), values=vals, default_value=0.3, dtype=ndd.bool)
    assert got.tolist() == [False, True, False, True, True, False, True, True, True, False, False, True, True, False]
    assert _lut(x, keys=[0], values=[3e9], default_value=-3e9, dtype=ndd.int32).tolist() == [2147483647, -2147483648]
    assert _lut(x, keys=[0], values=[5e9], default_value=-3e9, dtype=ndd.uint32).tolist() == [4294967295, 0]
    assert _lut(x, keys=[0], values=[3e9], default_value=-3e9, dtype=ndd.int64).tolist() == [3000000000, -3000000000]
    assert _lut(x, keys=[0], values=[70000.0], default_value=-1e10, dtype=ndd.float16).tolist() == [inf, -inf]
    got = _lut(x, keys=[0], values=[nan])
    assert np.isnan(got[0]) and got[1] == 0
    assert _lut(x, keys=[0], values=[1e39]).tolist()[0] == inf


def test_lut_tables_and_shapes() -> None:
    x = np.array([[3, 0], [1, 2]], np.int32)
    assert _lut(x, keys=[3, 0, 3], values=[1, 2, 5]).tolist() == [[5, 2], [0, 0]]  # last value of key 3
    assert _lut(x).tolist() == [[0, 0], [0, 0]]  # no keys: all default
    assert _lut(x, default_value=3.0).tolist() == [[3, 3], [3, 3]]
    assert _lut(x, keys=1, values=7.0).tolist() == [[0, 0], [7, 0]]  # scalars are one-entry lists
    assert _lut(np.array(3, np.int32), keys=[3], values=[1]).tolist() == 1.0  # 0-d
    assert _lut(np.zeros((0, 3), np.int32), keys=[0], values=[1]).shape == (0, 3)
    out = ndd.lookup_table(ndd.as_tensor(np.zeros((2, 2, 3), np.uint8), layout="HWC"), keys=[0], values=[1])
    assert out.layout == "HWC" and np.asarray(out).min() == 1


def test_lut_batch(rng) -> None:
    xs = [np.array([1, 2], np.uint8), np.array([0, 1, 3], np.uint8)]
    out = ndd.lookup_table(ndd.as_batch(xs), keys=[1, 2], values=[10, 20])
    assert [np.asarray(t).tolist() for t in out] == [[10, 20], [0, 10, 0]]  # observed from DALI 2.4
    same = [rng.integers(0, 9, (4, 5)).astype(np.int16) for _ in range(3)]
    out = ndd.lookup_table(ndd.as_batch(same), keys=[1, 5, 8], values=[-1, 0.5, 2], default_value=4, dtype=ndd.int32)
    for x, o in zip(same, out):
        np.testing.assert_array_equal(np.asarray(o), _lut_reference(x, [1, 5, 8], [-1, 1, 2], 4).astype(np.int32))


def test_lut_output_dtype_alias() -> None:
    x = np.array([0, 1], np.uint8)
    with pytest.warns(DeprecationWarning, match="'output_dtype' is a deprecated alias"):
        got = _lut(x, keys=[0], values=[3.7], output_dtype=ndd.int32)
    assert got.dtype == np.int32 and got.tolist() == [4, 0]  # observed from DALI 2.4
    with pytest.raises(TypeError, match="both 'dtype' and its deprecated alias 'output_dtype'"):
        _lut(x, keys=[0], values=[3.7], output_dtype=ndd.int32, dtype=ndd.int16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _lut(x, keys=[0], values=[1.0], dtype=ndd.int32)  # no warning for dtype


@pytest.mark.parametrize("x,kwargs,exc,match", [
    (np.array([1.0], np.float32), {}, ValueError, "expects an integer input, got f32"),
    (np.array([1.0]), {}, ValueError, "expects an integer input, got f64"),
    (np.array([True]), {}, ValueError, "expects an integer input, got bool"),
    (np.array([1], np.int32), {"keys": [-1, 2], "values": [1, 2]}, ValueError, r"'keys' must be in \[0, 65535\], got -1"),
    (np.array([1], np.int32), {"keys": [65536], "values": [1]}, ValueError, "got 65536"),
    (np.array([1], np.int32), {"keys": [1, 2], "values": [1]}, ValueError, "same length, got 2 and 1"),
    (np.array([1], np.int32), {"keys": [1.5], "values": [1]}, TypeError, "'keys' expects an int"),
    (np.array([1], np.int32), {"dtype": ndd.bfloat16}, ValueError, "'dtype' must be a numeric type or bool"),
    (np.array([1], np.int32), {"dtype": "float"}, ValueError, "'dtype' takes a dtype"),
    (np.array([1], np.int32), {"default_value": float("nan")}, ValueError, "'default_value' must be finite"),
])
def test_lut_errors(x, kwargs, exc, match) -> None:
    with pytest.raises(exc, match=match):
        _lut(x, **kwargs)


# -- erase ------------------------------------------------------------------------------

HW = np.arange(1, 31, dtype=np.uint8).reshape(5, 6)
HWC = (np.arange(30, dtype=np.uint8).reshape(5, 6, 1) + 1) * np.array([1, 2], np.uint8)


def _erase(x: np.ndarray, layout: str | None = "HW", **kw) -> np.ndarray:
    t = ndd.as_tensor(x, layout=layout) if layout else ndd.as_tensor(x)
    out = ndd.erase(t, **kw)
    assert out.dtype == t.dtype and out.layout == t.layout
    return np.asarray(out)


def _erased(x: np.ndarray, boxes: list[tuple], fill=0) -> np.ndarray:
    """Reference: ``x`` with every box (a tuple of (start, stop) per axis; None: whole axis)
    set to ``fill``, the boxes clipped to ``x``."""
    out = x.copy()
    for box in boxes:
        idx = tuple(slice(None) if b is None else slice(max(b[0], 0), max(min(b[1], n), 0))
                    for b, n in zip(box, x.shape))
        out[idx] = fill
    return out


# (kwargs, boxes of the reference); the erased regions were observed from DALI 2.4 on HW
ERASE_CASES = [
    ({"anchor": [1, 2], "shape": [2, 3]}, [((1, 3), (2, 5))]),
    ({"anchor": [0, 0, 3, 4], "shape": [1, 1, 2, 2]}, [((0, 1), (0, 1)), ((3, 5), (4, 6))]),
    ({"anchor": [1, 4], "shape": [2, 1], "axis_names": "W"}, [(None, (1, 3)), (None, (4, 5))]),
    ({"anchor": [1], "shape": [2], "axes": [1]}, [(None, (1, 3))]),
    ({"anchor": [1], "shape": [2], "axes": [1], "axis_names": "H"}, [((1, 3), None)]),  # names win
    ({"anchor": [1, 2], "shape": [2, 3], "axes": [0, 1]}, [((1, 3), (2, 5))]),
    ({"anchor": [1, 2], "shape": [2, 3], "axis_names": "WH"}, [((2, 5), (1, 3))]),
    ({"anchor": [-1, 4], "shape": [3, 5]}, [((0, 2), (4, 6))]),  # clipped
    ({"anchor": [10, 10], "shape": [3, 5]}, []),  # outside
    ({"anchor": [1, 1], "shape": [-1, 2]}, []),  # negative shape: nothing
    ({"anchor": [1, 2], "shape": [0, 3]}, []),
    ({"anchor": [0.5, 1.4], "shape": [1.5, 1.6]}, [((0, 2), (1, 3))]),  # floor(anchor) .. floor(anchor + shape)
    ({"anchor": [0.6, 1.5], "shape": [1.4, 2.5]}, [((0, 2), (1, 4))]),
    ({"anchor": [0.2, 1.7], "shape": [1.6, 1.2]}, [((0, 1), (1, 2))]),
    ({"anchor": [0.2, 0.5], "shape": [0.4, 0.34], "normalized": True}, [((1, 3), (3, 5))]),
    ({"anchor": [0.2, 0.5], "shape": [2, 1], "normalized_anchor": True}, [((1, 3), (3, 4))]),
    ({"anchor": [1, 1], "shape": [0.4, 0.5], "normalized_shape": True}, [((1, 3), (1, 4))]),
    ({"anchor": [0.2, 0.5], "shape": [0.4, 0.5], "normalized_anchor": True, "normalized_shape": True},
     [((1, 3), (3, 6))]),
    ({"anchor": [2, 3], "shape": [2, 3], "centered_anchor": True}, [((1, 3), (1, 4))]),
    ({"anchor": [2, 3], "shape": [3, 3], "centered_anchor": True}, [((0, 3), (1, 4))]),
    ({"anchor": [2.2, 3.0], "shape": [1.5, 2.5], "centered_anchor": True}, [((1, 2), (1, 4))]),
    ({"anchor": [0.5, 0.5], "shape": [0.4, 0.5], "normalized": True, "centered_anchor": True}, [((1, 3), (1, 4))]),
    ({"anchor": [2, 3], "shape": [0.5, 0.5], "centered_anchor": True, "normalized_shape": True},
     [((0, 3), (1, 4))]),
    ({"anchor": [1e10, -1e10], "shape": [1e10, 3e10]}, []),
    ({"anchor": [1, 3], "shape": [1, 1], "axis_names": "WW"}, [(None, (3, 4))]),  # the last value of W
    ({"anchor": [0, 2, 4], "shape": [1, 1, 1], "axis_names": "H"}, [((0, 1), None), ((2, 3), None), ((4, 5), None)]),
    ({"anchor": [0, 0, 1, 1], "shape": [2, 2, 2, 2]}, [((0, 2), (0, 2)), ((1, 3), (1, 3))]),  # overlapping
    ({}, []),  # no regions: a copy of the input
]


@pytest.mark.parametrize("kwargs,boxes", ERASE_CASES)
def test_erase_regions_observed_from_dali(kwargs, boxes) -> None:
    np.testing.assert_array_equal(_erase(HW, **kwargs), _erased(HW, boxes))


def test_erase_normalized_in_float32() -> None:
    """0.7 * 10 is 7 in float32 (6.99... in float64); observed from DALI 2.4: row 7, column 3."""
    got = _erase(np.zeros((10, 10), np.uint8), anchor=[0.7, 0.3], shape=[0.1, 0.1], normalized=True, fill_value=1)
    assert np.argwhere(got).tolist() == [[7, 3]]


def test_erase_fill_per_channel_and_layouts() -> None:
    got = _erase(HWC, "HWC", anchor=[1, 2], shape=[2, 3], fill_value=[100, 200])
    np.testing.assert_array_equal(got, _erased(HWC, [((1, 3), (2, 5), None)], np.array([100, 200], np.uint8)))
    got = _erase(HWC, "HWC", anchor=[1, 2], shape=[2, 3], fill_value=7)
    np.testing.assert_array_equal(got, _erased(HWC, [((1, 3), (2, 5), None)], 7))
    chw = np.ascontiguousarray(HWC.transpose(2, 0, 1))
    got = _erase(chw, "CHW", anchor=[1, 2], shape=[2, 3], fill_value=[100, 200])
    np.testing.assert_array_equal(got, _erased(chw, [(None, (1, 3), (2, 5))],
                                               np.array([100, 200], np.uint8)[:, None, None]))
    # the C axis may be erased too: each channel takes its own fill value (DALI 2.4: [8, 9] -> channel 1 is 9)
    got = _erase(HWC, "HWC", anchor=[1], shape=[1], axis_names="C", fill_value=[8, 9])
    np.testing.assert_array_equal(got, _erased(HWC, [(None, None, (1, 2))], 9))
    got = _erase(HWC, "HWC", anchor=[1, 2, 1], shape=[2, 3, 1], axis_names="HWC")
    np.testing.assert_array_equal(got, _erased(HWC, [((1, 3), (2, 5), (1, 2))]))
    got = _erase(HWC, "HWC", anchor=[1, 2], shape=[2, 3], fill_value=[])  # no value: 0 (DALI 2.4)
    np.testing.assert_array_equal(got, _erased(HWC, [((1, 3), (2, 5), None)]))
    # a sequence: the frames are erased alike (the regions span F)
    seq = np.stack([HWC] * 3)
    got = _erase(seq, "FHWC", anchor=[1, 2, 1], shape=[2, 3, 1], axis_names="W")
    np.testing.assert_array_equal(got, _erased(seq, [(None, None, (1, 3), None), (None, None, (2, 5), None),
                                                     (None, None, (1, 2), None)]))
    vol = np.stack([HW] * 3)
    got = _erase(vol, "DHW", anchor=[1, 1, 2], shape=[1, 2, 3])  # default: every axis but C
    np.testing.assert_array_equal(got, _erased(vol, [((1, 2), (1, 3), (2, 5))]))
    line = np.arange(8, dtype=np.int32)
    np.testing.assert_array_equal(_erase(line, None, anchor=[2], shape=[3], axes=[0]), [0, 1, 0, 0, 0, 5, 6, 7])
    np.testing.assert_array_equal(_erase(line, "W", anchor=[2], shape=[3]), [0, 1, 0, 0, 0, 5, 6, 7])


FILL_OBSERVED = [  # (input type, fill value, stored value): observed from DALI 2.4
    (np.uint8, 300, 44), (np.uint8, 2.5, 2), (np.uint8, -1.5, 255), (np.uint8, 256.7, 0), (np.uint8, 1e10, 0),
    (np.uint8, 255.9, 255), (np.uint8, float("nan"), 0), (np.uint8, float("inf"), 0),
    (np.int8, -129, 127), (np.int8, 128, -128), (np.int8, 200.5, -56),
    (np.uint16, 70000, 4464), (np.uint16, -1, 65535), (np.int16, -2.5, -2), (np.int16, 40000, -25536),
    (np.uint32, 5e9, 705032704), (np.uint32, -1, 4294967295), (np.uint32, 1e19, 0), (np.uint32, float("nan"), 0),
    (np.int32, 3e9, -2147483648), (np.int32, -3e9, -2147483648), (np.int32, 2147483520.0, 2147483520),
    (np.int32, float("nan"), -2147483648),
    (np.int64, 1e19, -2 ** 63), (np.int64, 9.2e18, 9200000267938955264), (np.int64, float("nan"), -2 ** 63),
    (np.uint64, -1, 2 ** 64 - 1), (np.uint64, 1e19, 9999999980506447872), (np.uint64, 2e19, 0),
    (np.uint64, -1e19, 2 ** 63), (np.uint64, float("nan"), 2 ** 63),
    (np.float16, 1e6, float("inf")), (np.float32, 0.1, 0.10000000149011612),
]


@pytest.mark.parametrize("dtype,fill,stored", FILL_OBSERVED)
def test_erase_fill_conversion_observed_from_dali(dtype, fill, stored) -> None:
    """The fill value is converted as C's static_cast on x86 (truncated; out of range wraps)."""
    got = _erase(np.zeros((1, 2), dtype), anchor=[0], shape=[1], axis_names="W", fill_value=fill)
    assert got.dtype == dtype
    assert got[0, 0].item() == stored and got[0, 1] == 0
    float_fill = _erase(np.zeros((1, 2), np.float32), anchor=[0], shape=[1], axis_names="W", fill_value=float("nan"))
    assert np.isnan(float_fill[0, 0])


def test_erase_batch_per_sample_args() -> None:
    small = HW[:3, :4].copy()
    b = ndd.as_batch([HW, small], layout="HW")
    anchor = ndd.as_batch([np.array([1, 2], np.float32), np.array([0, 0, 2, 3], np.float32)])
    shape = ndd.as_batch([np.array([2, 3], np.float32), np.array([1, 1, 1, 1], np.float32)])
    got = [np.asarray(t) for t in ndd.erase(b, anchor=anchor, shape=shape)]
    np.testing.assert_array_equal(got[0], _erased(HW, [((1, 3), (2, 5))]))
    np.testing.assert_array_equal(got[1], _erased(small, [((0, 1), (0, 1)), ((2, 3), (3, 4))]))
    # a sample without regions is left as it is (observed from DALI 2.4)
    none = ndd.as_batch([np.array([1, 2], np.float32), np.zeros(0, np.float32)])
    got = [np.asarray(t) for t in ndd.erase(ndd.as_batch([HW, HW], layout="HW"), anchor=none, shape=none)]
    np.testing.assert_array_equal(got[1], HW)
    # per-sample fill values
    fill = ndd.as_batch([np.array([1, 2], np.float32), np.array([3, 4], np.float32)])
    got = [np.asarray(t) for t in ndd.erase(ndd.as_batch([HWC, HWC], layout="HWC"), anchor=[1, 2], shape=[2, 3],
                                            fill_value=fill)]
    for g, f in zip(got, ([1, 2], [3, 4])):
        np.testing.assert_array_equal(g, _erased(HWC, [((1, 3), (2, 5), None)], np.array(f, np.uint8)))


def test_erase_dense_batch_and_sample_mode(rng) -> None:
    xs = [rng.integers(0, 255, (6, 7, 3), dtype=np.uint8) for _ in range(3)]
    kw = {"anchor": [1, 1, 4, 5], "shape": [2, 3, 9, 9], "fill_value": [1, 2, 3]}
    out = ndd.erase(ndd.as_batch(xs, layout="HWC"), **kw)
    for x, o in zip(xs, out):
        np.testing.assert_array_equal(np.asarray(o), _erased(x, [((1, 3), (1, 4), None), ((4, 13), (5, 14), None)],
                                                              np.array([1, 2, 3], np.uint8)))
    fill = ndd.as_tensor(np.array([5, 6], np.float32))  # observed from DALI 2.4 (sample mode)
    got = _erase(HWC, "HWC", anchor=[1, 1], shape=[1, 1], fill_value=fill)
    assert got[1, 1].tolist() == [5, 6] and got[1, 2].tolist() == [9, 18]
    x = np.ones((3, 3), np.uint8)  # the output is a new array, even with nothing to erase
    t = ndd.as_tensor(x)
    out = np.asarray(ndd.erase(t, axes=[0]))
    assert out.tolist() == x.tolist() and not np.shares_memory(out, np.asarray(t))
    assert _erase(np.zeros((0, 3), np.uint8), anchor=[0, 0], shape=[1, 1]).shape == (0, 3)


@pytest.mark.parametrize("x,layout,kwargs,exc,match", [
    (HW, "HW", {"anchor": [1, 2, 3], "shape": [2, 3]}, ValueError, "as many values, got 3 and 2"),
    (HW, "HW", {"anchor": [1, 2]}, ValueError, "as many values, got 2 and 0"),
    (HW, "HW", {"shape": [1, 2]}, ValueError, "as many values, got 0 and 2"),
    (HW, "HW", {"anchor": [1, 2, 3], "shape": [2, 3, 1]}, ValueError, r"multiple of 2 values .* got 3"),
    (np.stack([HW] * 3), "DHW", {"anchor": [1, 2], "shape": [2, 3]}, ValueError, "multiple of 3 values"),
    (HW, "HW", {"anchor": [1], "shape": [2], "axis_names": "C"}, ValueError, "names 'C', not in the input layout 'HW'"),
    (HW, "HW", {"anchor": [1], "shape": [2], "axis_names": ""}, ValueError, "'axis_names' must name at least one"),
    (HW, None, {"anchor": [1], "shape": [2], "axis_names": "H"}, ValueError, "'axis_names' needs an input with a layout"),
    (HW, None, {"anchor": [1, 2], "shape": [2, 3]}, ValueError, "the input has no layout: give 'axes'"),
    (HW, "HW", {"anchor": [1], "shape": [2], "axes": [2]}, ValueError, r"'axes' has 2, outside \[0, 2\)"),
    (HW, "HW", {"anchor": [1], "shape": [2], "axes": [-1]}, ValueError, "'axes' has -1"),
    (HW, "HW", {"anchor": [1], "shape": [2], "axes": []}, ValueError, "'axes' must name at least one"),
    (HW, "HW", {"anchor": [0.2, 0.5], "shape": [0.4, 0.5], "normalized": True, "normalized_anchor": True},
     ValueError, "'normalized' cannot be combined"),
    (HW, "HW", {"anchor": [0.2, 0.5], "shape": [0.4, 0.5], "normalized": True, "normalized_shape": False},
     ValueError, "'normalized' cannot be combined"),
    (HW, "HW", {"anchor": [1, 2], "shape": [2, 3], "fill_value": [1, 2]}, ValueError,
     r"'fill_value' has 2 values \(one per channel\), but the input has no channel axis C \(layout HW\) \(sample 0\)"),
    (HWC, "HWC", {"anchor": [1, 2], "shape": [2, 3], "fill_value": [1, 2, 3]}, ValueError,
     r"'fill_value' has 3 values but the input has 2 channels \(sample 0\)"),
    (HW.astype(np.float64), "HW", {}, ValueError, "does not support input type f64"),
    (HW > 5, "HW", {}, ValueError, "does not support input type bool"),
    (HW, "HW", {"anchor": [float("nan"), 1], "shape": [1, 1]}, ValueError, "'anchor' must be finite"),
])
def test_erase_errors(x, layout, kwargs, exc, match) -> None:
    with pytest.raises(exc, match=match):
        _erase(x, layout, **kwargs)


def test_erase_per_sample_errors_name_the_sample() -> None:
    b = ndd.as_batch([HW, HW], layout="HW")
    anchor = ndd.as_batch([np.array([1, 2], np.float32), np.array([1, 2, 3], np.float32)])
    shape = ndd.as_batch([np.array([1, 2], np.float32), np.array([1, 2], np.float32)])
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"as many values, got 3 and 2 \(sample 1\)"):
        ndd.erase(b, anchor=anchor, shape=shape)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        ndd.erase(b, anchor=[1, 2], shape=[1, 2], fill=3)
    with pytest.raises(TypeError, match="takes 1 positional input"):
        ndd.erase(b, [1, 2], [1, 2])  # anchor and shape are keyword arguments, as in DALI 2.4
