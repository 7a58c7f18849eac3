"""``tensor_resize`` against independent references: linear interpolation at pixel centres
(``np.interp`` of ``(i + 0.5) * in / out - 0.5``, edges clamped) one axis at a time, hand-computed
nearest-neighbour picks and antialiasing tents, and output shapes worked out from the documented
size rules. Float results agree to 1e-4 (float32 accumulation); integer ones exactly after rounding."""

from __future__ import annotations

import numpy as np
import pytest

import ndd

NN = ndd.types.DALIInterpType.INTERP_NN
GAUSSIAN = ndd.types.DALIInterpType.INTERP_GAUSSIAN


def _lin_axis(x: np.ndarray, axis: int, n_out: int, lo: float = 0.0, hi: float | None = None) -> np.ndarray:
    """Linear interpolation along ``axis`` at the centres of ``n_out`` pixels spread over lo..hi."""
    n = x.shape[axis]
    hi = float(n) if hi is None else hi
    pos = lo + (np.arange(n_out) + 0.5) * (hi - lo) / n_out - 0.5
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.apply_along_axis(lambda v: np.interp(pos, np.arange(n), v), -1, moved)
    return np.moveaxis(out, -1, axis)


def _run(x, **kw) -> np.ndarray:
    return np.asarray(ndd.tensor_resize(ndd.tensor(x), **kw))


@pytest.mark.parametrize("shape, axes, sizes", [
    ((7,), None, [12]), ((5, 9), None, [8, 4]), ((4, 6, 3), [0, 1], [7, 2]), ((3, 5, 8), [2], [13]),
    ((2, 3, 6, 5), [1, 2], [5, 4]),
])
def test_linear_without_antialias_is_centre_interpolation(shape, axes, sizes) -> None:
    x = np.random.default_rng(0).random(shape).astype(np.float32) * 100
    got = _run(x, sizes=sizes, axes=axes, antialias=False)
    ref = x
    for ax, n in zip(axes if axes is not None else range(len(shape)), sizes):
        ref = _lin_axis(ref, ax, n)
    assert got.dtype == np.float32 and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, atol=1e-4)


def test_nearest_neighbour_hand_computed() -> None:
    x = np.arange(6, dtype=np.uint8)
    np.testing.assert_array_equal(_run(x, sizes=[12], interp_type=NN), np.repeat(x, 2))
    np.testing.assert_array_equal(_run(x, sizes=[3], interp_type=NN), [1, 3, 5])  # centres 1, 3, 5
    y = np.arange(12, dtype=np.int16).reshape(3, 4)
    np.testing.assert_array_equal(_run(y, scales=[2, 0.5], interp_type=NN), np.repeat(y[:, [1, 3]], 2, axis=0))


def test_antialiased_shrink_by_two_is_a_tent() -> None:
    """Default LINEAR with antialias halving an axis: a tent 2 pixels wide, weights
    (1, 3, 3, 1) / 8 around each output centre, edge pixels repeated."""
    x = np.random.default_rng(1).random(10).astype(np.float32)
    p = np.concatenate([x[:1], x, x[-1:]])
    ref = np.array([(p[2 * i] + 3 * p[2 * i + 1] + 3 * p[2 * i + 2] + p[2 * i + 3]) / 8 for i in range(5)])
    np.testing.assert_allclose(_run(x, scales=[0.5]), ref, atol=1e-6)


def test_flipped_roi_and_roi_relative() -> None:
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(_run(x, sizes=[8], roi_start=[8], roi_end=[0]), x[::-1])
    got = _run(x, sizes=[8], roi_start=[0.25], roi_end=[0.75], roi_relative=True, antialias=False)
    np.testing.assert_allclose(got, _lin_axis(x, 0, 8, 2.0, 6.0), atol=1e-5)


def test_axes_outside_the_resized_block_are_untouched() -> None:
    """Only axis 2 changes: each slice along axis 0 is resized on its own (axis 1 is
    resampled with its identity parameters, which GAUSSIAN blurs; axis 0 is not)."""
    x = np.random.default_rng(2).random((3, 4, 10)).astype(np.float32)
    got = _run(x, sizes=[15], axes=[2], interp_type=GAUSSIAN)
    for k in range(3):
        np.testing.assert_array_equal(got[k], _run(x[k], sizes=[4, 15], interp_type=GAUSSIAN))


@pytest.mark.parametrize("shape, kw, out", [
    ((10, 20), dict(scales=[0.55, 1.5]), (6, 30)),                              # 5.5 rounds up
    ((10, 20), dict(scales=[0.55, 1.5], size_rounding="truncate"), (5, 30)),
    ((10, 20), dict(scales=[0.52, 1.5], size_rounding="ceil"), (6, 30)),
    ((10, 20), dict(sizes=[5, 0]), (5, 10)),                                    # 0: same scale
    ((10, 20), dict(sizes=[20, 10], mode="not_larger"), (5, 10)),
    ((10, 20), dict(sizes=[5, 0], mode="stretch"), (5, 20)),
    ((10, 20), dict(sizes=[40, 40], max_size=[30]), (30, 30)),
    ((4, 10, 20, 3), dict(axes=[1, 2], sizes=[5, 7]), (4, 5, 7, 3)),
    ((4, 10, 3), dict(axes=[-2], sizes=[5]), (4, 5, 3)),
])
def test_output_shapes(shape, kw, out) -> None:
    assert _run(np.zeros(shape, np.uint8), **kw).shape == out


def test_axis_names_layout_dtype_and_rounding() -> None:
    x = np.array([[0, 255]], np.uint8).repeat(2, axis=0)[..., None]  # HWC
    t = ndd.tensor_resize(ndd.tensor(x, layout="HWC"), axis_names="W", sizes=[4], antialias=False)
    assert t.layout == "HWC" and t.dtype == ndd.uint8
    # centres at 0.25 and 0.75 of the step: 0, 63.75 -> 64, 191.25 -> 191, 255
    np.testing.assert_array_equal(np.asarray(t)[0, :, 0], [0, 64, 191, 255])
    f = ndd.tensor_resize(ndd.tensor(x, layout="HWC"), axis_names="W", sizes=[4], antialias=False, dtype=ndd.float32)
    assert f.dtype == ndd.float32
    np.testing.assert_allclose(np.asarray(f)[0, :, 0], [0, 63.75, 191.25, 255], atol=1e-4)


def test_ragged_batch_with_per_sample_sizes() -> None:
    rng = np.random.default_rng(3)
    xs = [rng.random(s).astype(np.float32) for s in [(5, 7), (9, 4), (3, 3)]]
    sizes = [np.array(v, np.float32) for v in ([10, 3], [4, 8], [6, 6])]
    out = ndd.tensor_resize(ndd.batch(xs), sizes=ndd.batch(sizes), antialias=False)
    for x, s, o in zip(xs, sizes, out):
        ref = _lin_axis(_lin_axis(x, 0, int(s[0])), 1, int(s[1]))
        np.testing.assert_allclose(np.asarray(o), ref, atol=1e-5)


@pytest.mark.parametrize("x, kw, match", [
    (np.zeros((4, 4), np.float32), dict(sizes=[2, 2], scales=[1, 1]), "sizes"),
    (np.zeros((4, 4), np.float32), dict(), "sizes"),
    (np.zeros((4, 4), np.float32), dict(sizes=[2, 2], axes=[0, 2]), "axis 2"),
    (np.zeros((4, 4), np.float32), dict(sizes=[2, 2, 2]), "3 values for 2 axes"),
    (np.zeros((4, 4), np.float32), dict(sizes=[2], roi_start=[0]), "roi_end"),
    (np.zeros((3, 3, 3, 3), np.float32), dict(sizes=[2, 2], axes=[0, 3]), "at most 3"),
    (np.zeros((4, 4), np.int32), dict(sizes=[2, 2]), "int32"),
    (np.zeros((4, 4), np.float32), dict(scales=[1, 2], mode="not_larger"), "not_larger"),
])
def test_errors(x, kw, match) -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises((ValueError, TypeError, RuntimeError), match=match):
        _run(x, **kw)


def test_empty_axes_stay_empty() -> None:
    assert _run(np.zeros((0, 4), np.float32), sizes=[2, 2]).shape == (0, 2)
    assert _run(np.zeros((3, 0), np.uint8), scales=[2, 2]).shape == (6, 0)


def _keys(d: np.ndarray) -> np.ndarray:
    d = np.abs(d)
    return np.where(d < 1, (1.5 * d - 2.5) * d * d + 1, np.where(d < 2, ((-0.5 * d + 2.5) * d - 4) * d + 2, 0.0))


def _lanczos3(d: np.ndarray) -> np.ndarray:
    return np.where(np.abs(d) < 3, np.sinc(d) * np.sinc(d / 3), 0.0)


def _conv_ref(x: np.ndarray, n_out: int, f, reach: int) -> np.ndarray:
    """Magnification of 1-D ``x`` with kernel ``f`` at pixel centres, taps normalised, edges clamped."""
    c = (np.arange(n_out) + 0.5) * len(x) / n_out - 0.5
    j = np.floor(c)[:, None].astype(int) + np.arange(1 - reach, reach + 1)
    w = f(c[:, None] - j)
    return (x[np.clip(j, 0, len(x) - 1)] * w).sum(1) / w.sum(1)


@pytest.mark.parametrize("interp, f, reach", [(ndd.types.DALIInterpType.INTERP_CUBIC, _keys, 2),
                                              (ndd.types.DALIInterpType.INTERP_LANCZOS3, _lanczos3, 3)])
def test_cubic_and_lanczos3(interp, f, reach) -> None:
    """DALI reads these filters from tables of 32 samples per pixel with linear interpolation:
    doubling the size samples them only at table entries (exact), other scales within 2e-3
    of the exact kernel on data in [0, 1]."""
    x = np.random.default_rng(4).random(9).astype(np.float32)
    np.testing.assert_allclose(_run(x, sizes=[18], interp_type=interp), _conv_ref(x, 18, f, reach), atol=1e-5)
    np.testing.assert_allclose(_run(x, sizes=[13], interp_type=interp), _conv_ref(x, 13, f, reach), atol=2e-3)


@pytest.mark.parametrize("kw, lo, hi", [(dict(), -0.1, 3.1), (dict(alignment=[0.5]), 0.0, 3.2)])
def test_subpixel_roi_of_an_axis_not_listed(kw, lo, hi) -> None:
    """Axis 0 is scaled with axis 1 (mode not_smaller) to 3 * 1.25 = 3.75 rows, rounded to 4:
    its ROI shrinks to 4 / 1.25 = 3.2 rows about the centre, or, once ``alignment`` is given
    (for the listed axes only), about its start."""
    x = np.random.default_rng(5).random((3, 4)).astype(np.float32)
    got = _run(x, axes=[1], sizes=[5], mode="not_smaller", antialias=False, **kw)
    np.testing.assert_allclose(got, _lin_axis(_lin_axis(x, 0, 4, lo, hi), 1, 5), atol=1e-5)
