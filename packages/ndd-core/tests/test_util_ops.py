"""Data-movement operators (copy, element_extract, reinterpret, permute_batch,
batch_permutation, per_frame, sequence_rearrange, get_property, io.file.read,
decoders.numpy) against NumPy re-derivations: exact equality (they move bytes, no
arithmetic, except decoders.numpy's dtype conversion, checked against ``ndd.cast``)."""

import io
import itertools

import numpy as np
import pytest

import ndd

A = np.asarray


def samples(b):
    return [A(t) for t in b]


SEQ = np.arange(24, dtype=np.int16).reshape(4, 3, 2)
RAGGED = [np.arange(6, dtype=np.int16).reshape(3, 2), np.arange(8, dtype=np.int16).reshape(4, 2),
          np.arange(2, dtype=np.int16).reshape(1, 2)]


def sync(fn, *args, **kwargs):
    with ndd.EvalMode.sync_cpu:
        return fn(*args, **kwargs)


def npy(a):
    f = io.BytesIO()
    np.save(f, a)
    return np.frombuffer(f.getvalue(), np.uint8)


# -- copy / per_frame -----------------------------------------------------------------


def test_copy_tensor_and_ragged_batch():
    t = ndd.tensor(SEQ, layout="FHW")
    c = ndd.copy(t)
    assert c.layout == "FHW" and c.dtype == ndd.int16
    np.testing.assert_array_equal(A(c), SEQ)
    assert not np.shares_memory(A(c), A(t))
    b = ndd.batch(RAGGED, layout="FX")
    for got, want in zip(samples(ndd.copy(b)), RAGGED):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout,replace,want", [
    (None, False, "F**"), ("FHW", False, "FHW"), ("HWC", True, "FWC"), ("FHW", True, "FHW"),
])
def test_per_frame_layout(layout, replace, want):
    out = ndd.per_frame(ndd.tensor(SEQ, layout=layout), replace=replace)
    assert out.layout == want
    np.testing.assert_array_equal(A(out), SEQ)


def test_per_frame_errors():
    with pytest.raises(ValueError, match="per_frame.*'HWC' does not start with 'F'"):
        ndd.per_frame(ndd.tensor(SEQ, layout="HWC"))
    with pytest.raises(ValueError, match="per_frame.*0-dimensional"):
        ndd.per_frame(ndd.tensor(np.float32(1)))


# -- element_extract ------------------------------------------------------------------


def test_element_extract_outputs_and_layout():
    a, b = ndd.element_extract(ndd.tensor(SEQ, layout="FHW"), element_map=[2, 0])
    assert a.layout == "HW" and b.layout == "HW"
    np.testing.assert_array_equal(A(a), SEQ[2])
    np.testing.assert_array_equal(A(b), SEQ[0])
    one = ndd.element_extract(ndd.tensor(SEQ), element_map=[1])  # one index: one output, not a tuple
    assert isinstance(one, ndd.Tensor) and one.layout is None
    np.testing.assert_array_equal(A(one), SEQ[1])


def test_element_extract_ragged_batch():
    out = ndd.element_extract(ndd.batch(RAGGED[:2], layout="FX"), element_map=[2, 1])
    for k, e in enumerate([2, 1]):
        assert out[k].layout == "X"
        for got, s in zip(samples(out[k]), RAGGED[:2]):
            np.testing.assert_array_equal(got, s[e])


def test_element_extract_errors():
    with pytest.raises(ValueError, match="'element_map' has index 2, out of range for sample 2 of 1"):
        sync(ndd.element_extract, ndd.batch(RAGGED), element_map=[0, 2])
    with pytest.raises(ValueError, match="negative"):
        ndd.element_extract(ndd.tensor(SEQ), element_map=[-1])
    with pytest.raises(ValueError, match="at least one"):
        ndd.element_extract(ndd.tensor(SEQ), element_map=[])
    with pytest.raises(ValueError, match="must start with 'F'"):
        ndd.element_extract(ndd.tensor(SEQ, layout="HWC"), element_map=[0])
    with pytest.raises(ValueError, match="at least two"):
        ndd.element_extract(ndd.tensor(np.arange(3)), element_map=[0])


# -- sequence_rearrange ---------------------------------------------------------------


def test_sequence_rearrange_constant_and_per_sample():
    t = ndd.tensor(SEQ, layout="FHW")
    out = ndd.sequence_rearrange(t, new_order=[3, 0, 0, 1, 2])
    assert out.layout == "FHW"
    np.testing.assert_array_equal(A(out), SEQ[[3, 0, 0, 1, 2]])
    orders = [np.array([2, 1], np.int32), np.array([3], np.int32), np.array([0, 0, 0], np.int32)]
    ob = ndd.sequence_rearrange(ndd.batch(RAGGED), new_order=ndd.batch(orders))
    for got, s, o in zip(samples(ob), RAGGED, orders):
        np.testing.assert_array_equal(got, s[o])


def test_sequence_rearrange_errors():
    with pytest.raises(ValueError, match="'new_order' has index 1, out of range for sample 2 of 1 frame"):
        sync(ndd.sequence_rearrange, ndd.batch(RAGGED), new_order=[1])
    with pytest.raises(ValueError, match="empty for sample 0"):
        sync(ndd.sequence_rearrange, ndd.tensor(SEQ), new_order=[])
    with pytest.raises(ValueError, match="must start with 'F'"):
        ndd.sequence_rearrange(ndd.tensor(SEQ, layout="HWC"), new_order=[0])


# -- reinterpret ----------------------------------------------------------------------


def test_reinterpret_dtype_rescales_innermost_extent():
    t = ndd.tensor(SEQ, layout="FHW")
    u8 = ndd.reinterpret(t, dtype=ndd.uint8)
    assert u8.layout == "FHW" and u8.dtype == ndd.uint8
    np.testing.assert_array_equal(A(u8), SEQ.view(np.uint8))
    i32 = ndd.reinterpret(ndd.batch(RAGGED, layout="FX"), dtype=ndd.int32)
    for got, s in zip(samples(i32), RAGGED):
        assert got.shape == s.shape[:-1] + (1,)
        np.testing.assert_array_equal(got, s.view(np.int32))


def test_reinterpret_shape_from_bytes():
    t = ndd.tensor(SEQ, layout="FHW")
    out = ndd.reinterpret(t, shape=[-1, 4], dtype=ndd.int32)  # 48 bytes: 12 int32 in rows of 4
    assert out.shape == (3, 4) and out.layout is None
    np.testing.assert_array_equal(A(out), SEQ.reshape(-1).view(np.int32).reshape(3, 4))
    rel = ndd.reinterpret(t, rel_shape=[1, 1, 2], dtype=ndd.uint8)  # relative to the input's extents
    np.testing.assert_array_equal(A(rel), SEQ.view(np.uint8))
    lay = ndd.reinterpret(t, shape=[2, 12], layout="XY")
    assert lay.layout == "XY"
    np.testing.assert_array_equal(A(lay), SEQ.reshape(2, 12))
    extra = ndd.reinterpret(t, rel_shape=[1, 1, 1, -1])  # a negative last extent may add a dimension
    assert extra.shape == (4, 3, 2, 1)
    with pytest.raises(ValueError, match="'rel_shape' has 4 elements for 3"):
        ndd.reinterpret(t, rel_shape=[1, 1, 1, 1])
    shp = ndd.reinterpret(t, ndd.tensor(np.array([6, 4], np.int32)))
    np.testing.assert_array_equal(A(shp), SEQ.reshape(6, 4))


def test_reinterpret_per_sample_shape():
    shapes = [np.array([n], np.int32) for n in (6, 8, 2)]
    out = ndd.reinterpret(ndd.batch(RAGGED), shape=ndd.batch(shapes))
    for got, s in zip(samples(out), RAGGED):
        np.testing.assert_array_equal(got, s.reshape(-1))


def test_reinterpret_errors():
    with pytest.raises(ValueError, match="innermost dimension holds 6 byte"):
        sync(ndd.reinterpret, ndd.tensor(np.zeros(3, np.int16)), dtype=ndd.int32)
    with pytest.raises(ValueError, match="holds 48 bytes, but the shape \\[2, 2\\]"):
        sync(ndd.reinterpret, ndd.tensor(SEQ), shape=[2, 2])
    with pytest.raises(ValueError, match="nothing to do"):
        ndd.reinterpret(ndd.tensor(SEQ))
    with pytest.raises(ValueError, match="reinterpret.*'layout'"):
        ndd.reinterpret(ndd.tensor(SEQ), shape=[24], layout="AB")
    with pytest.raises(ValueError, match="'layout' 'AB' does not match the 3 dimension"):
        ndd.reinterpret(ndd.tensor(SEQ), layout="AB", dtype=ndd.uint8)
    with pytest.raises(ValueError, match="sample 0 of shape \\(\\)"):
        sync(ndd.reinterpret, ndd.tensor(np.int32(5)), dtype=ndd.uint8)


# -- permute_batch / batch_permutation --------------------------------------------------


def test_permute_batch_list_and_per_sample():
    b = ndd.batch(RAGGED, layout="FX")
    out = ndd.permute_batch(b, indices=[2, 0, 0])
    assert out.layout == "FX"
    for got, j in zip(samples(out), [2, 0, 0]):
        np.testing.assert_array_equal(got, RAGGED[j])
    idx = ndd.batch([np.array(j, np.int32) for j in (1, 1, 2)])
    for got, j in zip(samples(ndd.permute_batch(b, indices=idx)), (1, 1, 2)):
        np.testing.assert_array_equal(got, RAGGED[j])
    dense = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = ndd.permute_batch(ndd.as_batch(dense), indices=[1, 2, 0])
    np.testing.assert_array_equal(np.stack(samples(out)), dense[[1, 2, 0]])


def test_permute_batch_errors():
    b = ndd.batch(RAGGED)
    with pytest.raises(ValueError, match="'indices' has 2 index\\(es\\) for a batch of 3"):
        sync(ndd.permute_batch, b, indices=[0, 1])
    with pytest.raises(ValueError, match="index 3 \\(for output sample 1\\), out of range"):
        sync(ndd.permute_batch, b, indices=[0, 3, 1])
    with pytest.raises(ValueError, match="one index per sample"):
        sync(ndd.permute_batch, b, indices=ndd.batch([np.array([0, 1], np.int32)] * 3))


def _perms(n, **kw):
    rng = ndd.random.RNG(seed=7)
    return [tuple(int(x) for x in samples(ndd.batch_permutation(batch_size=n, rng=rng, **kw)))
            for _ in range(600)]


def test_batch_permutation_kinds():
    n = 4
    every = set(itertools.permutations(range(n)))
    plain = _perms(n)
    assert set(plain) == every  # all 24 permutations appear in 600 draws
    cycles = _perms(n, no_fixed_points=True)
    # Sattolo's shuffle: the (n-1)! = 6 single n-cycles, each about 1/6 of the draws
    def one_cycle(p):
        seen, j = set(), 0
        while j not in seen:
            seen.add(j)
            j = p[j]
        return len(seen) == n
    assert set(cycles) == {p for p in every if one_cycle(p)}
    counts = np.unique(np.array(cycles), axis=0, return_counts=True)[1]
    assert counts.min() > 60
    rep = np.array(_perms(n, allow_repetitions=True))
    assert any(len(set(p)) < n for p in rep.tolist())  # repetitions happen
    rep_nf = np.array(_perms(n, allow_repetitions=True, no_fixed_points=True))
    assert not (rep_nf == np.arange(n)).any()
    assert len({tuple(p) for p in rep_nf.tolist()}) > 60  # 3**4 = 81 outcomes
    one = samples(ndd.batch_permutation(batch_size=1, no_fixed_points=True))
    assert [int(x) for x in one] == [0]  # ignored for a batch of one


def test_batch_permutation_deterministic_and_typed():
    a = ndd.batch_permutation(batch_size=9, rng=ndd.random.RNG(seed=3))
    b = ndd.batch_permutation(batch_size=9, rng=ndd.random.RNG(seed=3))
    assert a.dtype == ndd.int32 and a.ndim == 0
    assert [int(x) for x in samples(a)] == [int(x) for x in samples(b)]
    assert sorted(int(x) for x in samples(a)) == list(range(9))
    with pytest.raises(RuntimeError, match="batch_size must be given"):
        sync(ndd.batch_permutation)


# -- get_property ---------------------------------------------------------------------


def test_get_property():
    b = ndd.batch(RAGGED, layout="FX")
    lay = ndd.get_property(b, key="layout")
    assert lay.dtype == ndd.uint8
    assert [bytes(x) for x in samples(lay)] == [b"FX"] * 3
    assert bytes(A(ndd.get_property(ndd.tensor(SEQ), key="layout"))) == b""
    assert [x.size for x in samples(ndd.get_property(b, key="source_info"))] == [0, 0, 0]
    with pytest.raises(ValueError, match="'key' must be one of"):
        ndd.get_property(b, key="foo")


class _Origin:
    """An origin of the BatchData protocol, as a reader plugin sets one: ``name<i>``, and the
    source info ``src<i>`` (sample 2's is not UTF-8)."""

    def __call__(self, i):
        return f"name{i}"

    def source_info(self, i):
        return b"src\xff".decode("utf-8", "surrogateescape") if i == 2 else f"src{i}"


def _read(origin):
    from ndd._storage import BatchData

    bd = BatchData(dense=np.arange(6, dtype=np.int32).reshape(3, 2))
    bd.origin = origin
    return ndd.Batch._wrap(bd, ndd.int32, None, ndd.Device("cpu"), 1, 3)


def test_get_property_source_info_through_the_origin_protocol():
    def info(x):
        return [bytes(v) for v in samples(ndd.get_property(x, key="source_info"))]

    b = _read(_Origin())
    assert info(b) == [b"src0", b"src1", b"src\xff"]  # the bytes as read
    assert info(ndd.copy(b)) == info(ndd.reshape(b, shape=[2, 1])) == info(b)
    assert info(ndd.permute_batch(b, indices=[2, 2, 0])) == [b"src\xff", b"src\xff", b"src0"]
    assert info(b.tensors[[1, 0]]) == [b"src1", b"src0"]
    assert bytes(A(ndd.get_property(b.tensors[1], key="source_info"))) == b"src1"
    assert info(ndd.Batch([b.tensors[1], ndd.tensor(np.zeros(2, np.int32))])) == [b"src1", b""]
    assert info(b + 1) == info(ndd.cast(b, dtype=ndd.float32)) == [b""] * 3
    assert info(_read(lambda i: f"name{i}")) == [b""] * 3  # an origin for error messages only


# -- io.file.read ---------------------------------------------------------------------


def _path(p):
    return np.frombuffer(str(p).encode(), np.uint8)


def test_file_read(tmp_path):
    data = [bytes(range(200)) * 3, b"", b"hello"]
    paths = []
    for k, d in enumerate(data):
        paths.append(tmp_path / f"f{k}.bin")
        paths[-1].write_bytes(d)
    out = ndd.io.file.read(ndd.batch([_path(p) for p in paths]), dont_use_mmap=True)
    assert out.dtype == ndd.uint8 and out.ndim == 1
    assert [bytes(x) for x in samples(out)] == data
    nul = np.concatenate([_path(paths[2]), np.zeros(3, np.uint8)])  # the path ends at a NUL
    assert bytes(A(ndd.io.file.read(ndd.tensor(nul.view(np.int8)), use_o_direct=True))) == b"hello"


def test_file_read_errors(tmp_path):
    (tmp_path / "x").write_bytes(b"x")
    with pytest.raises(RuntimeError, match="io.file.read.*missing.bin' of sample 1"):
        sync(ndd.io.file.read, ndd.batch([_path(tmp_path / "x"), _path(tmp_path / "missing.bin")]))
    with pytest.raises(ValueError, match="'filepaths' must be uint8 or int8"):
        ndd.io.file.read(ndd.tensor(_path("a").astype(np.int32)))
    with pytest.raises(ValueError, match="must be 1-D"):
        ndd.io.file.read(ndd.tensor(_path("abc")[None]))


# -- decoders.numpy -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.bool_, np.int16, np.uint32, np.int64, np.float16,
                                   np.float32, np.float64])
def test_numpy_decoder_types(dtype):
    arrs = [(np.arange(12).reshape(3, 4) * 37 % 11).astype(dtype), np.ones((1, 5), dtype)]
    out = ndd.decoders.numpy(ndd.batch([npy(a) for a in arrs]))
    assert out.dtype == ndd.dtype(np.dtype(dtype)) and out.layout is None
    for got, want in zip(samples(out), arrs):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_numpy_decoder_layouts_and_scalars():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for src in (np.asfortranarray(a), a.astype(">f4"), a):  # Fortran order and big-endian too
        got = A(ndd.decoders.numpy(ndd.tensor(npy(src))))
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, a)
    s = ndd.decoders.numpy(ndd.tensor(npy(np.array(3.5))))
    assert s.shape == () and float(A(s)) == 3.5


def test_numpy_decoder_dtype_converts_as_cast():
    x = np.array([300.0, -300.0, np.nan, 2.5, -2.5, 0.4], np.float64)
    got = A(ndd.decoders.numpy(ndd.tensor(npy(x)), dtype=ndd.int8))
    np.testing.assert_array_equal(got, [127, -128, 0, 3, -3, 0])  # saturated, ties away from zero
    mixed = ndd.decoders.numpy(ndd.batch([npy(x[:2]), npy(np.array([7, 9], np.int16))]), dtype=ndd.float32)
    np.testing.assert_array_equal(samples(mixed)[1], [7.0, 9.0])


def test_numpy_decoder_errors():
    with pytest.raises(ValueError, match="same type unless 'dtype'"):
        ndd.decoders.numpy(ndd.batch([npy(np.zeros(2, np.int16)), npy(np.zeros(2, np.int32))]))
    with pytest.raises(ValueError, match="sample 1 has 1 dimension"):
        ndd.decoders.numpy(ndd.batch([npy(np.zeros((2, 2))), npy(np.zeros(2))]))
    with pytest.raises(ValueError, match="sample 0 is not a .npy file"):
        ndd.decoders.numpy(ndd.tensor(np.arange(50, dtype=np.uint8)))
    with pytest.raises(ValueError, match="complex64.*not supported"):
        ndd.decoders.numpy(ndd.tensor(npy(np.zeros(2, np.complex64))))
    with pytest.raises(ValueError, match="truncated"):
        sync(ndd.decoders.numpy, ndd.tensor(npy(np.zeros(100))[:-8]))
    with pytest.raises(ValueError, match="'dtype' must be a numeric type"):
        ndd.decoders.numpy(ndd.tensor(npy(np.zeros(2))), dtype=ndd.bfloat16)
    with pytest.raises(ValueError, match="bfloat16 has no NumPy equivalent"):
        ndd.reinterpret(ndd.tensor(SEQ), dtype=ndd.bfloat16)
