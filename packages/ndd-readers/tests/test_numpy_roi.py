"""``ndd.readers.Numpy`` regions of interest, checked against NumPy slicing of the whole array."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ndd
from ndd._threads import AST_LOCK

DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.int64]


def llround(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def expected(full: np.ndarray, cfg: dict) -> np.ndarray | str:
    """The region by slicing ``full`` (padded with np.pad for the "pad" policy), or the
    error the reader must raise. Written from DALI's rules, independently of the reader."""
    ndim = full.ndim
    axes = [a % ndim for a in cfg.get("roi_axes") or range(ndim)]
    lo, hi = [0] * ndim, list(full.shape)
    for i, d in enumerate(axes):
        ext = full.shape[d]
        a = 0.0
        if "roi_start" in cfg:
            a = cfg["roi_start"][i]
        elif "rel_roi_start" in cfg:
            a = cfg["rel_roi_start"][i] * ext
        e = float(ext)
        if "roi_end" in cfg:
            e = cfg["roi_end"][i]
        elif "rel_roi_end" in cfg:
            e = cfg["rel_roi_end"][i] * ext
        elif "roi_shape" in cfg:
            e = a + cfg["roi_shape"][i]
        elif "rel_roi_shape" in cfg:
            if "rel_roi_start" in cfg:
                e = (cfg["rel_roi_start"][i] + cfg["rel_roi_shape"][i]) * ext
            else:
                e = a + cfg["rel_roi_shape"][i] * ext
        if e < a:
            return "ends before it starts"
        lo[d], hi[d] = llround(a), llround(e)
    policy = cfg.get("out_of_bounds_policy", "error")
    if policy == "error":
        if any(lo[d] < 0 or hi[d] > full.shape[d] for d in range(ndim)):
            return "is out of bounds"
    if policy == "trim_to_shape":
        lo = [min(max(v, 0), n) for v, n in zip(lo, full.shape)]
        hi = [min(max(v, 0), n) for v, n in zip(hi, full.shape)]
    before = [max(0, -v) for v in lo]
    after = [max(0, h - n) for h, n in zip(hi, full.shape)]
    fill = dali_fill(cfg.get("fill_value", 0.0), full.dtype)
    padded = np.pad(full, list(zip(before, after)), constant_values=fill)
    return padded[tuple(slice(v + b, h + b) for v, h, b in zip(lo, hi, before))]


def dali_fill(value: float, dtype: np.dtype):
    """fill_value as DALI converts it: a float32, rounded half away from zero and clamped
    to an integer type's range (observed with DALI 2.4)."""
    v = float(np.float32(value))
    if np.dtype(dtype).kind not in "iu":
        with np.errstate(over="ignore"):
            return np.float32(v).astype(dtype)
    info = np.iinfo(dtype)
    r = math.copysign(math.floor(abs(v) + 0.5), v)
    return np.asarray(min(max(r, info.min), info.max)).astype(dtype)


def random_cfg(rng: np.random.Generator, ndim: int, ext: int = 6) -> dict:
    cfg: dict = {}
    if rng.random() < 0.4:
        k = int(rng.integers(1, ndim + 1))
        axes = [int(a) for a in rng.permutation(ndim)[:k]]
        cfg["roi_axes"] = [a - ndim if rng.random() < 0.3 else a for a in axes]
        n = k
    else:
        n = ndim
    start = rng.choice(["none", "abs", "rel"])
    if start == "abs":
        cfg["roi_start"] = [int(v) for v in rng.integers(-2, ext + 1, n)]
    elif start == "rel":
        cfg["rel_roi_start"] = [float(v) for v in rng.uniform(-0.3, 1.0, n).round(3)]
    end = rng.choice(["none", "end", "rel_end", "shape", "rel_shape"])
    base = cfg.get("roi_start", [0] * n)
    if end == "end":
        cfg["roi_end"] = [int(b + v) for b, v in zip(base, rng.integers(0, ext + 1, n))]
        if start == "rel":  # keep end >= start: absolute ends past the largest start
            cfg["roi_end"] = [ext + int(v) for v in rng.integers(0, 3, n)]
    elif end == "rel_end":
        rs = cfg.get("rel_roi_start", [0.0] * n)
        cfg["rel_roi_end"] = [float(max(r, 0.0) + v) for r, v in zip(rs, rng.uniform(0, 1.0, n).round(3))]
        if start == "abs":
            cfg["roi_start"] = [min(v, 0) for v in cfg["roi_start"]]
    elif end == "shape":
        cfg["roi_shape"] = [int(v) for v in rng.integers(0, ext + 2, n)]
    elif end == "rel_shape":
        cfg["rel_roi_shape"] = [float(v) for v in rng.uniform(0, 1.2, n).round(3)]
    cfg["out_of_bounds_policy"] = str(rng.choice(["error", "pad", "trim_to_shape"]))
    if cfg["out_of_bounds_policy"] == "pad" and rng.random() < 0.7:
        cfg["fill_value"] = float(rng.choice([-1.0, 7.0, 2.5]))
    return cfg


def write(tmp_path, name: str, a: np.ndarray, fortran: bool) -> str:
    path = tmp_path / name
    np.save(path, np.asfortranarray(a) if fortran else a)
    return str(path)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_random_rois_match_numpy_slicing(tmp_path, ndim):
    rng = np.random.default_rng(ndim)
    checked = errors = 0
    for trial in range(60):
        cfg = random_cfg(rng, ndim)
        arrays, paths = [], []
        for k in range(3):  # different shapes, dtypes and memory orders in one reader
            shape = tuple(int(v) for v in rng.integers(1, 7, ndim))
            a = (rng.random(shape) * 100).astype(DTYPES[(trial + k) % len(DTYPES)])
            arrays.append(a)
            paths.append(write(tmp_path, f"t{trial}_{k}.npy", a, fortran=bool(k % 2)))
        r = ndd.readers.Numpy(files=paths, **cfg)
        it = iter(r.next_epoch())
        for path, a in zip(paths, arrays):
            want = expected(a, cfg)
            if isinstance(want, str):
                with pytest.raises(ValueError, match=rf"{path} \(sample \d\): the region of interest.*{want}"):
                    next(it)
                errors += 1
                break
            (t,) = next(it)
            got = np.asarray(t)
            assert got.dtype == a.dtype, cfg
            assert got.shape == want.shape, (cfg, a.shape)
            np.testing.assert_array_equal(got, want, err_msg=str(cfg))
            assert got.flags.c_contiguous and got.flags.writeable and type(got) is np.ndarray
            assert not isinstance(got.base, np.memmap)
            checked += 1
    assert checked > 60 and errors > 3


def test_fixed_cases(tmp_path):
    a = np.arange(5 * 7, dtype=np.int32).reshape(5, 7)
    path = write(tmp_path, "a.npy", a, fortran=True)

    def read(**kw):
        (t,) = next(iter(ndd.readers.Numpy(files=[path], **kw).next_epoch()))
        return np.asarray(t)

    np.testing.assert_array_equal(read(roi_start=[1, 2], roi_end=[4, 6]), a[1:4, 2:6])
    np.testing.assert_array_equal(read(roi_start=[1, 2], roi_shape=[2, 3]), a[1:3, 2:5])
    np.testing.assert_array_equal(read(rel_roi_start=[0.2, 0.0], rel_roi_end=[0.6, 0.5]), a[1:3, 0:4])
    np.testing.assert_array_equal(read(roi_start=[2], roi_axes=[1]), a[:, 2:])
    np.testing.assert_array_equal(read(roi_end=[3], roi_axes=[-2]), a[:3])
    np.testing.assert_array_equal(read(roi_start=[3, 1], roi_end=[7, 2], roi_axes=[1, 0]), a[1:2, 3:7])
    got = read(roi_start=[-1, 5], roi_end=[2, 9], out_of_bounds_policy="pad", fill_value=-3)
    want = np.full((3, 4), -3, np.int32)
    want[1:, :2] = a[:2, 5:]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(read(roi_start=[-1, 5], roi_end=[2, 9], out_of_bounds_policy="trim_to_shape"),
                                  a[0:2, 5:7])
    assert read(roi_start=[6, 0], roi_shape=[2, 2], out_of_bounds_policy="trim_to_shape").shape == (0, 2)
    assert read(roi_start=[6, 0], roi_shape=[2, 2], out_of_bounds_policy="pad").tolist() == [[0, 0], [0, 0]]
    # a 0-d CPU Tensor is a scalar: one value, for one axis
    np.testing.assert_array_equal(read(roi_start=ndd.tensor(np.int64(4)), roi_axes=[1]), a[:, 4:])
    np.testing.assert_array_equal(read(roi_start=ndd.tensor(np.array([1, 1])), roi_shape=np.array([1, 2])),
                                  a[1:2, 1:3])
    np.testing.assert_array_equal(read(roi_start=[2.0, 3.0]), a[2:, 3:])  # integral floats are fine
    np.testing.assert_array_equal(read(roi_start=[1, 2], roi_end=[4, 6], dont_use_mmap=True), a[1:4, 2:6])


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int64", "float16", "float64"])
def test_pad_converts_fill_value_as_dali(tmp_path, dtype):
    # DALI 2.4 gave, for uint8: -1 -> 0, 2.5 -> 3, 300.7 -> 255; int16: -2.5 -> -3;
    # float64: 2.7 -> 2.700000047683716 (the argument is a float32)
    path = write(tmp_path, "a.npy", np.arange(4, dtype=dtype).reshape(2, 2), False)
    for value in [-1, 2.5, 2.7, 300.7, -2.5, 1e10, -1e10]:
        r = ndd.readers.Numpy(files=[path], roi_start=[1, 1], roi_end=[2, 3], out_of_bounds_policy="pad",
                              fill_value=value)
        (t,) = next(iter(r.next_epoch()))
        got = np.asarray(t)
        assert got.dtype == np.dtype(dtype) and got[0, 0] == 3
        want = dali_fill(value, dtype)
        assert got[0, 1] == want, (value, got[0, 1], want)
    assert dali_fill(-1, "uint8") == 0 and dali_fill(300.7, "uint8") == 255 and dali_fill(-2.5, "int16") == -3


def test_batches_and_mmap(tmp_path, monkeypatch):
    arrays = [np.arange(40, dtype=np.float32).reshape(4, 10) + i for i in range(4)]
    paths = [write(tmp_path, f"b{i}.npy", a, fortran=i == 2) for i, a in enumerate(arrays)]
    modes = []
    load = np.load

    def spy(*args, **kw):
        modes.append(kw.get("mmap_mode"))
        assert AST_LOCK.locked()  # its header parse (ast) must not run beside another thread's
        return load(*args, **kw)

    monkeypatch.setattr(np, "load", spy)
    r = ndd.readers.Numpy(files=paths, roi_start=[1, 3], roi_shape=[2, 4])
    (b,) = next(iter(r.next_epoch(batch_size=4)))
    assert b.shape == [(2, 4)] * 4
    for t, a in zip(b, arrays):
        np.testing.assert_array_equal(np.asarray(t), a[1:3, 3:7])
    assert modes and all(m == "r" for m in modes)
    modes.clear()
    (whole,) = next(iter(ndd.readers.Numpy(files=paths).next_epoch(batch_size=4)))  # without a ROI
    assert modes == ["r"] * 4  # mapped while np.load holds the AST lock, read whole after it
    for t, a in zip(whole, arrays):
        x = np.asarray(t)
        np.testing.assert_array_equal(x, a)
        assert not isinstance(x, np.memmap) and not isinstance(x.base, np.memmap)  # a copy, not the map
    modes.clear()
    list(ndd.readers.Numpy(files=paths, dont_use_mmap=True).next_epoch())
    assert modes == [None] * 4  # never mapped when asked not to


def test_roi_errors(tmp_path):
    a = np.zeros((4, 5), np.uint8)
    path = write(tmp_path, "e.npy", a, fortran=False)
    with pytest.raises(ValueError, match="`roi_end` and `roi_shape` are mutually exclusive"):
        ndd.readers.Numpy(files=[path], roi_end=[1, 1], roi_shape=[1, 1])
    with pytest.raises(ValueError, match="`rel_roi_end` and `rel_roi_shape` are mutually exclusive"):
        ndd.readers.Numpy(files=[path], rel_roi_end=[1, 1], rel_roi_shape=[1, 1])
    with pytest.raises(ValueError, match="`roi_start` and `rel_roi_start` are mutually exclusive"):
        ndd.readers.Numpy(files=[path], roi_start=[1, 1], rel_roi_start=[0.1, 0.1])
    with pytest.raises(ValueError, match="`roi_start`: a Batch cannot be given in the reader's constructor"):
        ndd.readers.Numpy(files=[path], roi_start=ndd.batch([np.array([1, 1]), np.array([0, 0])]))
    with pytest.raises(ValueError, match="out_of_bounds_policy must be one of"):
        ndd.readers.Numpy(files=[path], roi_start=[0, 0], out_of_bounds_policy="clamp")
    with pytest.raises(ValueError, match=r"`roi_start` holds absolute coordinates \(integers\)"):
        ndd.readers.Numpy(files=[path], roi_start=[0.5, 0])
    with pytest.raises(ValueError, match="`roi_shape` has 2 values but `roi_axes` names 1 axes"):
        ndd.readers.Numpy(files=[path], roi_shape=[1, 1], roi_axes=[0])
    with pytest.raises(ValueError, match="`roi_axes` names an axis twice"):
        ndd.readers.Numpy(files=[path], roi_shape=[1, 1], roi_axes=[0, 0])
    with pytest.raises(ValueError, match="`fill_value` must be a number"):
        ndd.readers.Numpy(files=[path], roi_shape=[1, 1], fill_value="x")

    def first(**kw):
        return next(iter(ndd.readers.Numpy(files=[path], **kw).next_epoch()))

    where = rf"{path} \(sample 0\)"
    with pytest.raises(ValueError, match=where + r": the region of interest \[3, 6\) on axis 1 is out of bounds "
                       r"of the array's shape \(4, 5\) \(from `roi_start` and `roi_end`\)"):
        first(roi_start=[0, 3], roi_end=[2, 6])
    with pytest.raises(ValueError, match=where + r": the region of interest \[-1, 1\) on axis 0 .*`roi_start` and "
                       "`roi_shape`"):
        first(roi_start=[-1, 0], roi_shape=[2, 2])
    with pytest.raises(ValueError, match=where + ": `roi_start` has 3 values but the array has 2 dims"):
        first(roi_start=[0, 0, 0])
    with pytest.raises(ValueError, match=where + r": `roi_axes` \[2\] names axis 2, but the array has 2 dims"):
        first(roi_start=[0], roi_axes=[2])
    with pytest.raises(ValueError, match=where + r": `roi_axes` \[0, -2\] names an axis twice"):
        first(roi_start=[0, 0], roi_axes=[0, -2])
    with pytest.raises(ValueError, match=where + ": the region of interest ends before it starts on axis 1 .*"
                       "`roi_start` and `roi_end`"):
        first(roi_start=[0, 3], roi_end=[1, 2])
    with pytest.raises(ValueError, match=where + ": `roi_shape` .* is negative on axis 0"):
        first(roi_shape=[-1, 2])


def test_rois_given_per_call(tmp_path):
    """A direct call may give the region (as in DALI): one for every sample, or a Batch of
    one per sample; the constructor's other ROI arguments still apply, and an argument given
    in both places raises ValueError."""
    arrays = [np.arange(k * 100, k * 100 + 30, dtype=np.int16).reshape(5, 6) for k in range(4)]
    for k, a in enumerate(arrays):
        np.save(tmp_path / f"{k}.npy", a)
    r = ndd.readers.Numpy(file_root=tmp_path)
    (x,) = r(batch_size=2, roi_start=[1, 2], roi_end=[3, 5])
    assert [np.asarray(t).tolist() for t in x] == [a[1:3, 2:5].tolist() for a in arrays[:2]]
    starts = ndd.batch([np.array([0, 0]), np.array([2, 1])])
    (x,) = r(batch_size=2, roi_start=starts, rel_roi_shape=[0.4, 0.5])
    assert [np.asarray(t).tolist() for t in x] == [arrays[2][0:2, 0:3].tolist(), arrays[3][2:4, 1:4].tolist()]
    (x,) = r(batch_size=2)  # no region: whole arrays again
    assert [np.asarray(t).tolist() for t in x] == [a.tolist() for a in arrays[:2]]

    padded = ndd.readers.Numpy(file_root=tmp_path, roi_axes=[1], out_of_bounds_policy="pad", fill_value=-1)
    (x,) = padded(batch_size=1, roi_start=[4], roi_end=[8])
    assert np.asarray(x.tensors[0]).tolist() == np.pad(arrays[0][:, 4:], ((0, 0), (0, 2)),
                                                       constant_values=-1).tolist()
    with pytest.raises(ValueError, match="`roi_start` was given both to the reader's constructor and to the call"):
        ndd.readers.Numpy(file_root=tmp_path, roi_start=[1, 1])(batch_size=1, roi_start=[1, 1])
    with pytest.raises(ValueError, match="`roi_start` has 3 samples for a batch of 2"):
        r(batch_size=2, roi_start=ndd.batch([np.array([0, 0])] * 3))
    with pytest.raises(TypeError, match="Reader `Numpy` got an unexpected keyword argument 'roi_axes' in a call"):
        r(batch_size=2, roi_axes=[0])
    with pytest.raises(TypeError, match="Reader `File` got an unexpected keyword argument 'roi_start' in a call"):
        ndd.readers.File(files=[str(tmp_path / "0.npy")])(batch_size=1, roi_start=[0])
