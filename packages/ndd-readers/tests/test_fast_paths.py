"""The batch fast paths give exactly what the general, sample-by-sample code gives.

* ``fast_image_label`` (the common Caffe2 record layout) against the general parser, on
  varied, extended and damaged records;
* ``Caffe2Dataset.read_many`` / ``FileDataset.read_many`` against ``read``;
* the run-at-a-time index computation of ``SampleStream`` against the per-index one.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

import ndd
from ndd_readers import _caffe2 as c2
from ndd_readers import _protowire as pw
from ndd_readers._base import build_outputs
from ndd_readers._stream import SampleStream


def ld(field: int, payload: bytes) -> bytes:
    return pw.field_bytes(field, payload)


def image_proto(img: bytes, dims=None) -> bytes:
    out = b"".join(pw.field_varint(1, d) for d in (dims or ()))
    return out + pw.field_varint(2, c2.STRING) + ld(6, img)


def label_proto(label: int, packed: bool) -> bytes:
    out = pw.field_varint(2, c2.INT32)
    if packed:
        return out + pw.field_packed_varints(4, [label])
    return out + pw.field_varint(4, label)


def record(img: bytes, label: int, *, dims=None, packed=True, extra: bytes = b"") -> bytes:
    return ld(1, image_proto(img, dims)) + ld(1, label_proto(label, packed)) + extra


def outcome(fn, value: bytes, **kw):
    """The outputs as plain (dtype, shape, bytes) triples, or the error (type, message)."""
    try:
        outs = fn(value, source="db: record 1", **kw)
    except ValueError as e:
        return type(e), str(e)
    return [(a.dtype.str, a.shape, a.tobytes(), a.flags.writeable, a.flags.owndata) for a in outs]


def same_as_general(value: bytes, **kw) -> None:
    assert outcome(c2.parse_caffe2_record, value, **kw) == outcome(c2.parse_caffe2_record_general, value, **kw)


LABELS = [0, 1, 9, 127, 128, 300, 16384, -1, -128, 2**31 - 1, -(2**31), 2**32 + 5, 2**40 - 3, -(2**40)]
SIZES = [0, 1, 100, 127, 128, 16383, 16384, 70000]
DIMS = [None, [5], [0], [28, 28], [2**40, 3, 1], [-1]]


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("dims", DIMS)
def test_fast_layout_matches_general(packed, dims):
    rng = np.random.default_rng(0)
    for size, label in itertools.product(SIZES, LABELS):
        img = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        value = record(img, label, dims=dims, packed=packed)
        r = c2.fast_image_label(value)
        assert r is not None, (size, label, dims, packed)
        assert value[r[0]:r[1]] == img
        assert r[2] == np.array([label], np.int64).astype(np.int32)[0]
        same_as_general(value)


EXTENDED = [
    # extra fields and other layouts the fast path leaves to the general parser
    ld(1, image_proto(b"abc") + ld(7, b"name")) + ld(1, label_proto(3, True)),
    ld(1, pw.field_varint(2, c2.STRING) + pw.field_varint(1, 3) + ld(6, b"abc")) + ld(1, label_proto(3, True)),
    ld(1, ld(6, b"abc") + pw.field_varint(2, c2.STRING)) + ld(1, label_proto(3, True)),
    ld(1, image_proto(b"abc") + ld(6, b"second")) + ld(1, label_proto(3, True)),
    ld(1, image_proto(b"abc")) + ld(1, label_proto(3, True) + ld(7, b"label")),
    ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(4, 3) + pw.field_varint(2, c2.INT32)),
    ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(2, c2.INT32) + pw.field_varint(4, 3)
                                    + pw.field_varint(2, c2.INT32)),
    ld(1, pw.field_varint(2, c2.INT32) + image_proto(b"abc")) + ld(1, label_proto(3, True)),
    ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(2, c2.FLOAT) + pw.field_packed_floats(3, [2.5])),
    ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(2, c2.INT32) + pw.field_packed_varints(4, [3, 4])),
    ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(2, c2.INT32) + pw.field_varint(4, 3)
                                    + pw.field_varint(4, 4)),
    ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(2, c2.INT32)),
    ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(2, c2.INT32) + ld(4, b"")),
    record(b"abc", 3, extra=ld(1, label_proto(4, True))),  # a trailing proto (ignored)
    record(b"abc", 3, extra=ld(2, b"unknown field")),
    record(b"abc", 3, extra=b"\x08"),
    ld(1, pw.field_varint(1, 4) + image_proto(b"abc")),  # no label proto
    ld(1, image_proto(b"abc")),
    ld(1, ld(1, b"\x05") + image_proto(b"abc")) + ld(1, label_proto(3, True)),  # packed dims
    ld(1, b"\x08" + b"\xff" * 10 + b"\x01" + image_proto(b"abc")) + ld(1, label_proto(3, True)),
    ld(1, pw.field_varint(2, c2.BYTE) + ld(5, b"abcd") + pw.field_varint(1, 2) * 2)
    + ld(1, label_proto(3, True)),
    b"",
    b"\x0a",
    b"\x0a\x00",
    b"\x0a\x00\x0a\x00",
]


@pytest.mark.parametrize("value", EXTENDED)
def test_other_layouts_take_the_general_path(value):
    assert c2.fast_image_label(value) is None
    same_as_general(value)


def test_rejected_record_raises_the_general_error_naming_the_record():
    value = ld(1, image_proto(b"abc")) + ld(1, pw.field_varint(2, c2.INT32) + pw.field_packed_varints(4, [3, 4]))
    assert c2.fast_image_label(value) is None
    with pytest.raises(ValueError, match=r"db: record 1: label protos\[1\] holds 2 values"):
        c2.parse_caffe2_record(value, source="db: record 1")
    truncated = record(b"x" * 300, 3)[:-1]
    with pytest.raises(ValueError, match=r"db: record 1: malformed Caffe2 TensorProtos.*runs past"):
        c2.parse_caffe2_record(truncated, source="db: record 1")


def test_damaged_records_match_general():
    """Every truncation, and many single-byte changes, of fast-layout records: the fast
    path accepts only what the general parser reads the same way."""
    rnd = random.Random(1)
    bases = [record(b"JPEGDATA" * n, lab, dims=dims, packed=packed)
             for n, lab, dims, packed in [(1, 7, None, True), (20, 300, [160], False), (2100, -5, [5, 7], True)]]
    for base in bases:
        for cut in range(len(base)):
            same_as_general(base[:cut])
        positions = list(range(min(len(base), 40))) + list(range(max(0, len(base) - 40), len(base)))
        for pos in positions:
            for byte in {0x00, 0x01, 0x02, 0x04, 0x08, 0x0A, 0x10, 0x20, 0x22, 0x32, 0x7F, 0x80, 0xFF,
                         rnd.randrange(256), base[pos] ^ 0x80, (base[pos] + 1) & 0xFF}:
                damaged = base[:pos] + bytes([byte]) + base[pos + 1:]
                same_as_general(damaged)
            same_as_general(base[:pos] + base[pos + 1:])
            same_as_general(base[:pos] + b"\x00" + base[pos:])


def test_other_options_never_take_the_fast_path():
    value = record(b"abc", 3)
    for kw in [{"label_type": 2}, {"label_type": 4}, {"image_available": False, "label_type": 4},
               {"additional_inputs": 1}, {"bbox": True}]:
        assert outcome(c2.parse_caffe2_record, value, **kw) == outcome(c2.parse_caffe2_record_general, value, **kw)


# -- datasets -------------------------------------------------------------------------------

def as_arrays(outputs):
    """A batch's outputs as lists of per-sample arrays, plus whether each is dense."""
    return [([np.asarray(t) for t in b], b._batch_data().dense is not None) for b in outputs]


def reference_batch(ds, indices):
    """What build_outputs made before read_many: sample by sample, stacked when possible."""
    samples = [ds.read(i) for i in indices]
    out = []
    for col in zip(*samples):
        dense = all(a.shape == col[0].shape for a in col)
        out.append((list(col), dense))
    return out


def check_same(got, want):
    assert len(got) == len(want)
    for (ga, gd), (wa, wd) in zip(got, want):
        assert gd == wd and len(ga) == len(wa)
        for x, y in zip(ga, wa):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def mixed_records():
    out = []
    for i in range(40):
        kind = i % 5
        if kind == 0:
            out.append(record(b"img%d" % i * (i + 1), i, packed=True))
        elif kind == 1:
            out.append(record(b"i%d" % i, -i, dims=[i], packed=False))
        elif kind == 2:  # a name field: general parser, same outputs
            out.append(ld(1, image_proto(b"n%d" % i) + ld(7, b"name")) + ld(1, label_proto(i, True)))
        elif kind == 3:
            out.append(record(b"x" * 200 * i, 2**31 + i))
        else:  # a trailing proto: ignored by the general parser
            out.append(record(b"t%d" % i, i, extra=ld(1, label_proto(1, True))))
    return out


def test_caffe2_read_many_matches_read(tmp_path):
    c2.write_lmdb(tmp_path / "db", mixed_records())
    r = ndd.readers.Caffe2(path=tmp_path / "db")
    ds = r._ds
    for indices in ([0, 5, 10], [2, 7, 12], [1, 2, 3, 4, 5, 6], list(range(40)), [39, 0, 39, 0]):
        got = as_arrays(build_outputs(ds, indices, True))
        check_same(got, reference_batch(ds, indices))
    # all-fast batches take the direct dense path
    labels = build_outputs(ds, [0, 5, 10], True)[1]
    assert labels._batch_data().dense.shape == (3, 1) and labels.dtype == ndd.int32
    assert [int(np.asarray(t)[0]) for t in labels] == [0, 5, 10]


def test_caffe2_read_many_several_dbs(tmp_path):
    c2.write_caffe2_lmdb(tmp_path / "a", [(b"a%d" % i, i) for i in range(3)])
    c2.write_caffe2_lmdb(tmp_path / "b", [(b"b%d" % i, 10 + i) for i in range(4)])
    r = ndd.readers.Caffe2(path=[tmp_path / "a", tmp_path / "b"])
    ds = r._ds
    for indices in ([0, 3, 6], [6, 5, 4, 3, 2, 1, 0], [2, 3]):
        check_same(as_arrays(build_outputs(ds, indices, True)), reference_batch(ds, indices))
    assert ds.source.read_many([]) == []
    assert ds.source.read_many([6, 0]) == [ds.source.read(6), ds.source.read(0)]
    with pytest.raises(IndexError):
        ds.source.read_many([0, 7])
    src = c2.Caffe2Source(tmp_path / "a")
    assert src.read_many([2, 1]) == [src.read(2), src.read(1)]
    with pytest.raises(IndexError):
        src.read_many([3])
    src.close()
    with pytest.raises(RuntimeError, match="closed"):
        src.read_many([0])


def test_caffe2_batch_errors_name_the_first_bad_record(tmp_path):
    good = record(b"x", 1)
    float_label = ld(1, image_proto(b"y")) + ld(1, pw.field_varint(2, c2.FLOAT) + pw.field_packed_floats(3, [2.0]))
    c2.write_lmdb(tmp_path / "db", [good, good, good[:-2], float_label, b"\x0a\x05", float_label])
    ds = ndd.readers.Caffe2(path=tmp_path / "db")._ds
    with pytest.raises(ValueError, match=r"db: record 2 \(key b'00000002'\): malformed"):
        build_outputs(ds, [0, 1, 2, 3, 4], True)
    with pytest.raises(ValueError, match=r"db: record 4 \(key b'00000004'\): malformed"):
        build_outputs(ds, [3, 4, 2], True)
    # a float label next to int32 labels: the general dtype check, naming both records
    with pytest.raises(ValueError, match=r"record 3 .*output 1 has dtype float32.*record 0 "):
        build_outputs(ds, [0, 3], True)
    out = build_outputs(ds, [3, 5], True)
    assert out[1]._batch_data().dense.dtype == np.float32


def test_file_read_many_matches_read(tmp_path):
    for d in range(3):
        (tmp_path / f"c{d}").mkdir()
        for i in range(4):
            (tmp_path / f"c{d}" / f"{i}.jpg").write_bytes(b"f%d%d" % (d, i) * (i + 1))
    r = ndd.readers.File(file_root=tmp_path)
    ds = r._ds
    for indices in ([0, 1, 2], [11, 4, 4, 0], list(range(12))):
        check_same(as_arrays(build_outputs(ds, indices, True)), reference_batch(ds, indices))
    (tmp_path / "c1" / "2.jpg").unlink()
    with pytest.raises(ValueError, match=r"2\.jpg: cannot read sample 6"):
        build_outputs(ds, [0, 6, 7], True)


# -- stream -----------------------------------------------------------------------------------

def test_run_indices_match_per_index_rules():
    for n in (1, 2, 5, 7, 13):
        for shards in range(1, min(n, 4) + 1):
            for shard in range(shards):
                for stick, pad, rs, sae in itertools.product((0, 1), repeat=4):
                    if (rs and sae) or (sae and stick):
                        continue

                    kw = dict(shard_id=shard, num_shards=shards, stick_to_shard=stick, pad_last_batch=pad,
                              random_shuffle=rs, shuffle_after_epoch=sae, seed=3, initial_fill=3)
                    st, ref = SampleStream(n, **kw), SampleStream(n, **kw)
                    for e in range(4):
                        for pos in range(0, 10, 3):
                            for cnt in (1, 3, 8, 20):
                                if pad:
                                    got = st._epoch_indices(e, pos, cnt)
                                    want = [ref._at_epoch(e, pos + j) for j in range(cnt)]
                                else:
                                    off = e * 7 + pos
                                    got = st._stream_indices(off, cnt)
                                    want = [ref._at_offset(off + j) for j in range(cnt)]
                                assert got == want
                                assert all(type(x) is int for x in got)


@pytest.mark.parametrize("size", [0, 1, 4096, 200_001])
def test_read_bytes_whole_file_writable(tmp_path, size):
    from ndd_readers._base import read_bytes

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    (tmp_path / "f.bin").write_bytes(data)
    a = read_bytes(str(tmp_path / "f.bin"), "sample 0")
    assert a.dtype == np.uint8 and a.shape == (size,) and a.tobytes() == data
    assert a.flags.writeable and a.flags.owndata
    with pytest.raises(ValueError, match=r"nope\.bin: cannot read sample 0: No such file"):
        read_bytes(str(tmp_path / "nope.bin"), "sample 0")
    with pytest.raises(ValueError, match=r"cannot read sample 0: Is a directory"):
        read_bytes(str(tmp_path), "sample 0")
