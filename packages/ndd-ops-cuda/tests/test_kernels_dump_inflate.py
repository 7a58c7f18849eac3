"""decoders.inflate (GPU only) against its independent reference: NumPy arrays compressed
here with ``lz4.block.compress(store_size=False)`` (LZ4 block format, as DALI's nvCOMP
decoder reads) must come back exactly; and dump_image's GPU kernel, whose files must be
the CPU kernel's byte for byte (the CPU files are checked in ndd-ops-cpu's tests)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("ndd_ops_cpu")
# lz4 is a dependency of ndd-ops-cuda; only the offline GPU machine may lack it (see
# scripts/gpu-check.sh for fetching its wheel).
lz4_block = pytest.importorskip("lz4.block")

import ndd  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import rand_images, samples_of  # noqa: E402

INFLATE_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                  np.float32, np.float16]


def lz4_bytes(a: np.ndarray) -> bytes:
    return lz4_block.compress(np.ascontiguousarray(a).tobytes(), store_size=False)


def as_u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, np.uint8).copy()


def rand_array(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Random values with runs (so that LZ4 finds matches) of ``dtype``."""
    v = rng.integers(0, 4, shape) * rng.integers(1, 100)
    return (v > 1) if dtype is np.bool_ else v.astype(dtype)


def gpu_out(b: ndd.Batch) -> list[np.ndarray]:
    assert b.device == ndd.Device("gpu:0")
    return samples_of(b.cpu())


def inflate(samples: list[bytes], **kw) -> ndd.Batch:
    return ndd.decoders.inflate(ndd.as_batch([as_u8(s) for s in samples]).gpu(), **kw)


# -- inflate: one chunk per sample ----------------------------------------------------------------


def test_cpu_inputs_need_the_gpu() -> None:
    with pytest.raises(ValueError, match=r"runs only on the GPU, but its inputs are on the CPU"):
        ndd.decoders.inflate(ndd.as_batch([as_u8(lz4_bytes(np.zeros(4, np.uint8)))]), shape=[4])


@pytest.mark.parametrize("dtype", INFLATE_DTYPES)
def test_one_chunk_per_sample(dtype) -> None:
    rng = np.random.default_rng(0)
    refs = [rand_array(rng, (3, 5), dtype), rand_array(rng, (3, 5), dtype)]
    out = inflate([lz4_bytes(r) for r in refs], shape=[3, 5], dtype=np.dtype(dtype))
    assert out.dtype == ndd.dtype(np.dtype(dtype)) and out.layout is None and out.ndim == 2
    for r, g in zip(refs, gpu_out(out)):
        np.testing.assert_array_equal(g, r)
        assert g.dtype == r.dtype


def test_per_sample_shapes_layout_and_a_tensor() -> None:
    rng = np.random.default_rng(1)
    refs = [rand_array(rng, (4, 6, 3), np.uint8), rand_array(rng, (2, 9, 3), np.uint8)]
    shapes = ndd.as_batch([np.array(r.shape, np.int32) for r in refs])
    out = inflate([lz4_bytes(r) for r in refs], shape=shapes, layout="HWC")
    assert out.layout == "HWC"
    for r, g in zip(refs, gpu_out(out)):
        np.testing.assert_array_equal(g, r)
    t = ndd.decoders.inflate(ndd.Tensor(as_u8(lz4_bytes(refs[0]))), shape=[4, 6, 3], device="gpu")
    assert isinstance(t, ndd.Tensor) and t.device == ndd.Device("gpu:0")
    np.testing.assert_array_equal(np.asarray(t.cpu()), refs[0])


def test_data_shorter_than_the_shape_leave_zeros() -> None:
    a = np.arange(1, 7, dtype=np.int16)
    (g,) = gpu_out(inflate([lz4_bytes(a)], shape=[2, 5], dtype=ndd.int16, algorithm="lz4"))
    np.testing.assert_array_equal(g, np.concatenate([a, np.zeros(4, np.int16)]).reshape(2, 5))


# -- inflate: sequences of chunks ---------------------------------------------------------------------


def _frames(seed: int, n: int, shape: tuple[int, ...], dtype=np.uint8) -> tuple[np.ndarray, list[bytes]]:
    rng = np.random.default_rng(seed)
    seq = np.stack([rand_array(rng, shape, dtype) for _ in range(n)]) if n else np.zeros((0,) + shape, dtype)
    return seq, [lz4_bytes(f) for f in seq]


def test_chunk_sizes_offsets_and_both() -> None:
    seq, frames = _frames(2, 4, (3, 4, 3), np.float32)
    data = b"".join(frames)
    sizes = [len(f) for f in frames]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    for kw in (dict(chunk_sizes=sizes), dict(chunk_offsets=offsets), dict(chunk_offsets=offsets, chunk_sizes=sizes)):
        out = inflate([data], shape=[3, 4, 3], dtype=ndd.float32, layout="HWC", **kw)
        assert out.layout == "FHWC"
        np.testing.assert_array_equal(gpu_out(out)[0], seq)
    # offsets and sizes together may skip bytes and take the chunks in any order
    padded = b"\x07" * 5 + frames[2] + b"\x00" * 3 + frames[0]
    out = inflate([padded], shape=[3, 4, 3], dtype=ndd.float32, chunk_offsets=[5 + len(frames[2]) + 3, 5],
                  chunk_sizes=[len(frames[0]), len(frames[2])], layout="HWC", sequence_axis_name="T")
    assert out.layout == "THWC"
    np.testing.assert_array_equal(gpu_out(out)[0], seq[[0, 2]])


def test_per_sample_chunks() -> None:
    (s0, f0), (s1, f1), (s2, f2) = (_frames(k, n, (5,), np.int32) for k, n in ((3, 3), (4, 1), (5, 0)))
    sizes = ndd.as_batch([np.array([len(f) for f in fr], np.int32) for fr in (f0, f1, f2)])
    out = inflate([b"".join(f0), b"".join(f1), b"\x00"], shape=[5], dtype=ndd.int32, chunk_sizes=sizes)
    assert out.layout is None and out.ndim == 2  # no layout given: none, and no sequence axis name
    for r, g in zip((s0, s1, s2), gpu_out(out)):
        assert g.shape == r.shape
        np.testing.assert_array_equal(g, r)


def test_one_chunk_given_is_a_sequence_of_one() -> None:
    seq, frames = _frames(6, 1, (2, 3))
    out = inflate(frames, shape=[2, 3], chunk_offsets=0, layout="HW")
    assert out.layout == "FHW"
    np.testing.assert_array_equal(gpu_out(out)[0], seq)


# -- inflate: errors ---------------------------------------------------------------------------------------

GOOD = lz4_bytes(np.arange(12, dtype=np.uint8))


@pytest.mark.parametrize("kw, err, match", [
    (dict(shape=[12], dtype=ndd.float64), TypeError, r"'dtype' f64 is not supported"),
    (dict(shape=[12], algorithm="zstd"), ValueError, r"'algorithm' must be 'LZ4'"),
    (dict(shape=[12], sequence_axis_name="FT", chunk_sizes=[len(GOOD)]), ValueError,
     r"'sequence_axis_name' must be one character"),
    (dict(shape=[3, 4], layout="HWC"), ValueError, r"'layout' 'HWC' must name the 2 dimension"),
    (dict(shape=[-1]), ValueError, r"'shape' must have non-negative extents"),
    (dict(shape=[12], chunk_offsets=[0, 1], chunk_sizes=[3]), ValueError, r"give 2 and 1 chunks \(sample 0\)"),
    (dict(shape=[12], chunk_offsets=[len(GOOD)]), ValueError, r"'chunk_offsets' has \d+, outside"),
    (dict(shape=[12], chunk_offsets=[0, 4, 2]), ValueError, r"must be strictly increasing"),
    (dict(shape=[12], chunk_sizes=[0]), ValueError, r"a chunk size must be positive"),
    (dict(shape=[12], chunk_sizes=[len(GOOD) - 1, 2]), ValueError, r"adds up to \d+ bytes, more than"),
    (dict(shape=[12], chunk_offsets=[2], chunk_sizes=[len(GOOD) - 1]), ValueError, r"chunk 0 .* ends past"),
    (dict(shape=[11]), ValueError, r"chunk 0 of sample 0 .* inflates to more than the 11 bytes"),
])
def test_argument_errors(kw, err, match) -> None:
    with ndd.EvalMode.sync_cpu, pytest.raises(err, match=match) as e:
        inflate([GOOD], **kw)
    assert "Operator `decoders.inflate`" in str(e.value)


def test_input_errors() -> None:
    with pytest.raises(TypeError, match=r"`decoders.inflate`: the input must hold bytes \(uint8\)"):
        ndd.decoders.inflate(ndd.as_batch([np.zeros(4, np.int8)]).gpu(), shape=[4])
    with pytest.raises(ValueError, match=r"`decoders.inflate`: the input samples must be 1-D"):
        ndd.decoders.inflate(ndd.as_batch([np.zeros((2, 4), np.uint8)]).gpu(), shape=[4])
    with pytest.raises(TypeError, match=r"missing the required argument 'shape'"):
        inflate([GOOD])
    with pytest.raises(ValueError, match=r"'shape' takes a scalar or a 1-D list per sample, got 2-D"):
        inflate([GOOD], shape=ndd.as_batch([np.array([[3, 4]], np.int32)]))
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"an input sample cannot be empty \(sample 1\)"):
        inflate([GOOD, b""], shape=[12])


def test_corrupt_data_names_the_sample_and_chunk() -> None:
    seq, frames = _frames(7, 3, (64,))
    bad = frames[1][:-4]  # cut inside its last literal run
    data = [b"".join(frames), frames[0] + bad + frames[2]]
    sizes = ndd.as_batch([np.array([len(f) for f in fr], np.int32) for fr in (frames, (frames[0], bad, frames[2]))])
    with ndd.EvalMode.sync_cpu, pytest.raises(
            ValueError, match=rf"chunk 1 of sample 1 \(bytes {len(frames[0])} to {len(frames[0]) + len(bad)}\) "
                              r"is not valid LZ4 block data"):
        inflate(data, shape=[64], chunk_sizes=sizes)


# -- dump_image on the GPU ------------------------------------------------------------------------------


def test_dump_image_gpu_writes_the_cpu_files(tmp_path, monkeypatch) -> None:
    imgs = rand_images(8, [(5, 4, 3), (2, 7, 1), (0, 3, 3)])
    b = ndd.as_batch(imgs, layout="HWC")
    files = {}
    for dev in ("cpu", "gpu"):
        os.makedirs(tmp_path / dev)
        monkeypatch.chdir(tmp_path / dev)
        out = ndd.dump_image(b if dev == "cpu" else b.gpu(), suffix="x")
        assert out.device == ndd.Device("gpu:0" if dev == "gpu" else "cpu") and out.layout == "HWC"
        for r, g in zip(imgs, samples_of(out.cpu())):
            np.testing.assert_array_equal(g, r)
        files[dev] = {n: (tmp_path / dev / n).read_bytes() for n in os.listdir(".")}
    assert sorted(files["gpu"]) == ["0-x-0.ppm", "1-x-0.ppm", "2-x-0.ppm"]
    assert files["gpu"] == files["cpu"]
    with pytest.raises(ValueError, match=r"`dump_image`.*sample 0 has 2 channels"):
        ndd.dump_image(ndd.as_batch([np.zeros((2, 2, 2), np.uint8)]).gpu())
