"""transforms.* and coord_transform: matrices as observed in DALI 2.4, geometry checked with
NumPy on random points, batches, composition order and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndd

T = ndd.transforms


def m(x) -> np.ndarray:
    return np.asarray(x)


# Matrices DALI 2.4 returned for these calls (float32; compared to 1e-5).
DALI_MATRICES = [
    (lambda: T.translation(offset=[3, 4]), [[1, 0, 3], [0, 1, 4]]),
    (lambda: T.translation(offset=[3, 4, 5]), [[1, 0, 0, 3], [0, 1, 0, 4], [0, 0, 1, 5]]),
    (lambda: T.translation(offset=3), [[1, 3]]),
    (lambda: T.scale(scale=[2, 3], center=[1, 1]), [[2, 0, -1], [0, 3, -2]]),
    (lambda: T.scale(scale=[2], ndim=3), [[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]]),
    (lambda: T.rotation(angle=30), [[0.86603, -0.5, 0], [0.5, 0.86603, 0]]),
    (lambda: T.rotation(angle=30, center=[10, 20]), [[0.86603, -0.5, 11.33975], [0.5, 0.86603, -2.32051]]),
    (lambda: T.rotation(angle=90, axis=[0, 0, 1]), [[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]]),
    (lambda: T.rotation(angle=90, axis=[1, 0, 0]), [[1, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 0]]),
    (lambda: T.shear(shear=[0.5, 0.2]), [[1, 0.5, 0], [0.2, 1, 0]]),
    (lambda: T.shear(angles=[10, 20]), [[1, 0.17633, 0], [0.36397, 1, 0]]),
    (lambda: T.shear(shear=[0.5, 0.2], center=[3, 4]), [[1, 0.5, -2], [0.2, 1, -0.6]]),
    (lambda: T.shear(shear=[1, 2, 3, 4, 5, 6]), [[1, 1, 2, 0], [3, 1, 4, 0], [5, 6, 1, 0]]),
    (lambda: T.crop(from_start=[10, 20], from_end=[110, 220]), [[0.01, 0, -0.1], [0, 0.005, -0.1]]),
    (lambda: T.crop(), [[1, 0]]),
    (lambda: T.crop(from_start=[110, 20], from_end=[10, 220], absolute=True), [[0.01, 0, -0.1], [0, 0.005, -0.1]]),
    (lambda: T.crop(from_start=[110, 20], from_end=[10, 220]), [[-0.01, 0, 1.1], [0, 0.005, -0.1]]),
    (lambda: T.crop(from_start=[10], from_end=[20], to_start=[0, 0, 0], to_end=[1, 1, 1]),
     [[0.1, 0, 0, -1], [0, 0.1, 0, -1], [0, 0, 0.1, -1]]),
    (lambda: T.scale(T.translation(offset=[3, 4]), scale=[2, 3]), [[2, 0, 6], [0, 3, 12]]),
    (lambda: T.scale(T.translation(offset=[3, 4]), scale=[2, 3], reverse_order=True), [[2, 0, 3], [0, 3, 4]]),
    (lambda: T.combine(T.translation(offset=[3, 4]), T.scale(scale=[2, 3])), [[2, 0, 6], [0, 3, 12]]),
    (lambda: T.combine(T.translation(offset=[3, 4]), T.scale(scale=[2, 3]), reverse_order=True),
     [[2, 0, 3], [0, 3, 4]]),
    (lambda: T.combine(T.translation(offset=[3, 4]), T.scale(scale=[2, 3]), T.rotation(angle=30)),
     [[1.73205, -1.5, -0.80385], [1.0, 2.59808, 13.3923]]),
]


@pytest.mark.parametrize("k", range(len(DALI_MATRICES)))
def test_matrices_as_dali(k: int) -> None:
    make, want = DALI_MATRICES[k]
    got = make()
    assert got.dtype == ndd.float32
    np.testing.assert_allclose(m(got), np.array(want, np.float64), rtol=1e-5, atol=1e-5)


def _apply(mat: np.ndarray, pts: np.ndarray) -> np.ndarray:
    n = mat.shape[0]
    return pts @ mat[:, :n].T + mat[:, n]


def test_geometry_on_random_points() -> None:
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(50, 2)) * 10
    c = np.array([3.0, -2.0])
    rot = m(T.rotation(angle=37, center=c.tolist()))
    moved = _apply(rot, pts)
    # distances to the centre kept, each point turned by 37 degrees counter-clockwise about it
    np.testing.assert_allclose(np.linalg.norm(moved - c, axis=1), np.linalg.norm(pts - c, axis=1), rtol=1e-5)
    turn = np.degrees(np.arctan2(*(moved - c)[:, ::-1].T) - np.arctan2(*(pts - c)[:, ::-1].T)) % 360
    np.testing.assert_allclose(turn, 37, atol=1e-3)
    np.testing.assert_allclose(_apply(rot, c[None]), c[None], atol=1e-5)  # the centre stays
    # 3D: about an arbitrary axis, points on the axis stay and distances are kept
    axis = np.array([1.0, 2.0, 2.0]) / 3
    r3 = m(T.rotation(angle=120, axis=axis.tolist()))
    np.testing.assert_allclose(_apply(r3, 5 * axis[None]), 5 * axis[None], atol=1e-5)
    p3 = rng.normal(size=(20, 3))
    np.testing.assert_allclose(np.linalg.norm(_apply(r3, p3), axis=1), np.linalg.norm(p3, axis=1), rtol=1e-5)
    # crop maps the source box's corners onto the destination box's
    box = m(T.crop(from_start=[5, 10], from_end=[25, 50], to_start=[-1, 0], to_end=[1, 4]))
    np.testing.assert_allclose(_apply(box, np.array([[5, 10], [25, 50]])), [[-1, 0], [1, 4]], atol=1e-5)
    # combine applies its inputs in the order listed (reversed with reverse_order)
    a, b, cc = T.translation(offset=[1, 2]), T.rotation(angle=90), T.scale(scale=[2, 0.5])
    seq = _apply(m(cc), _apply(m(b), _apply(m(a), pts)))
    np.testing.assert_allclose(_apply(m(T.combine(a, b, cc)), pts), seq, rtol=1e-5, atol=1e-4)
    rev = _apply(m(a), _apply(m(b), _apply(m(cc), pts)))
    np.testing.assert_allclose(_apply(m(T.combine(a, b, cc, reverse_order=True)), pts), rev, rtol=1e-5, atol=1e-4)


def test_batches_and_per_sample_arguments() -> None:
    angles = ndd.as_batch([np.float32(10), np.float32(20), np.float32(-45)])
    rot = T.rotation(angle=angles)
    assert isinstance(rot, ndd.Batch) and rot.batch_size == 3 and rot.shape == [(2, 3)] * 3
    for t, a in zip(rot.tensors, (10, 20, -45)):
        c, s = math.cos(math.radians(a)), math.sin(math.radians(a))
        np.testing.assert_allclose(m(t), [[c, -s, 0], [s, c, 0]], atol=1e-6)
    shifted = T.translation(rot, offset=[1, 1])  # composed per sample
    np.testing.assert_allclose(m(shifted.tensors[2])[:, 2], [1, 1])
    same = T.scale(scale=[2, 2], batch_size=4)
    assert same.batch_size == 4 and all(np.array_equal(m(t), [[2, 0, 0], [0, 2, 0]]) for t in same.tensors)


def test_coord_transform_against_numpy() -> None:
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(7, 3)).astype(np.float32)
    mat = rng.normal(size=(2, 3))
    off = rng.normal(size=2)
    got = ndd.coord_transform(ndd.as_tensor(pts), M=mat.ravel().tolist(), T=off.tolist())
    np.testing.assert_allclose(m(got), pts @ mat.T + off, rtol=1e-5, atol=1e-5)
    mt = T.rotation(angle=33, axis=[0, 1, 0], center=[1, 2, 3])
    np.testing.assert_allclose(m(ndd.coord_transform(ndd.as_tensor(pts), MT=mt)), _apply(m(mt), pts), atol=1e-5)
    np.testing.assert_allclose(m(ndd.coord_transform(ndd.as_tensor(pts), M=[2])), 2 * pts)  # a multiple of I
    np.testing.assert_allclose(m(ndd.coord_transform(ndd.as_tensor(pts), MT=2.0)), 2 * pts)  # so is MT (DALI 2.4)
    np.testing.assert_array_equal(m(ndd.coord_transform(ndd.as_tensor(pts))), pts)
    # per-sample matrices, ragged point counts, extra leading dimensions
    batch = ndd.as_batch([np.ones((2, 2), np.float32), np.zeros((4, 2), np.float32)])
    shift = T.translation(offset=ndd.as_batch([np.array([1, 2], np.float32), np.array([5, 6], np.float32)]))
    out = ndd.coord_transform(batch, MT=shift)
    np.testing.assert_array_equal(m(out.tensors[0]), [[2, 3], [2, 3]])
    assert out.tensors[1].shape == (4, 2) and np.all(m(out.tensors[1]) == [5, 6])
    grid = rng.normal(size=(3, 4, 2)).astype(np.float32)
    np.testing.assert_allclose(m(ndd.coord_transform(ndd.as_tensor(grid), M=[0, 1, 1, 0])), grid[..., ::-1])


def test_coord_transform_integer_output_rounds_and_saturates() -> None:
    u8 = ndd.as_tensor(np.array([[1, 2], [3, 4]], np.uint8))
    # As DALI 2.4: [[1.5, 2], [4.5, 4]] rounded half away from zero.
    np.testing.assert_array_equal(m(ndd.coord_transform(u8, M=[1.5, 0, 0, 1], dtype=ndd.uint8)), [[2, 2], [5, 4]])
    assert ndd.coord_transform(u8, M=[1.5, 0, 0, 1]).dtype == ndd.float32
    i32 = ndd.as_tensor(np.array([[1, 2], [3, 4]], np.int32))
    np.testing.assert_array_equal(m(ndd.coord_transform(i32, M=[0.5, 0, 0, 0.25], dtype=ndd.int32)), [[1, 1], [2, 1]])
    np.testing.assert_array_equal(m(ndd.coord_transform(u8, M=[100], T=[-300, 0], dtype=ndd.uint8)),
                                  [[0, 200], [0, 255]])


def test_errors_name_the_argument() -> None:
    with ndd.EvalMode.sync_cpu:
        with pytest.raises(ValueError, match="exactly one of 'shear' and 'angles'"):
            T.shear(shear=[1, 2], angles=[1, 2])
        with pytest.raises(ValueError, match=r"'angles' must lie in \(-90, 90\)"):
            T.shear(angles=[90, 0])
        with pytest.raises(ValueError, match="'shear' must have 2 values"):
            T.shear(shear=[1, 2, 3])
        with pytest.raises(ValueError, match="'axis' must be a non-zero 3D vector"):
            T.rotation(angle=10, axis=[0, 0, 0])
        with pytest.raises(ValueError, match="'center' has 3 values for 2 dimension"):
            T.rotation(angle=10, center=[1, 2, 3])
        with pytest.raises(ValueError, match="'from_end' must differ from from_start"):
            T.crop(from_start=[1, 2], from_end=[1, 3])
        with pytest.raises(ValueError, match="'to_end' has 2 values for 3 dimension"):
            T.crop(from_start=[0, 0, 0], to_end=[1, 1])
        with pytest.raises(ValueError, match="the input is a 3D transform, this one 2D"):
            T.scale(T.translation(offset=[1, 2, 3]), scale=[2, 2])
        with pytest.raises(ValueError, match=r"must be an affine matrix of shape \(n, n \+ 1\)"):
            T.translation(ndd.as_tensor(np.eye(3, dtype=np.float32)), offset=[1, 2])
        with pytest.raises(ValueError, match="'offset' is empty"):
            T.translation(offset=[])
        with pytest.raises(ValueError, match="different dimensions"):
            T.combine(T.translation(offset=[1, 2]), T.translation(offset=[1, 2, 3]))
        pts = ndd.as_tensor(np.zeros((2, 2), np.float32))
        with pytest.raises(ValueError, match="'MT' cannot be combined"):
            ndd.coord_transform(pts, MT=[1, 0, 0, 0, 1, 0], M=[1])
        with pytest.raises(ValueError, match="'MT' cannot be combined"):  # MT given per sample
            ndd.coord_transform(ndd.as_batch([np.zeros((2, 2), np.float32)]),
                                MT=T.translation(offset=ndd.as_batch([np.array([1, 0], np.float32)])), T=[5, 5])
        with pytest.raises(ValueError, match="'dtype' must be float32 or the input's type"):
            ndd.coord_transform(pts, dtype=ndd.uint8)
        with pytest.raises(ValueError, match="expected points of shape"):
            ndd.coord_transform(ndd.as_tensor(np.zeros(2, np.float32)))
        with pytest.raises(ValueError, match="'M' has 3 values: not a matrix of 2 columns"):
            ndd.coord_transform(pts, M=[1, 2, 3])
