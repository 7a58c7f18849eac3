"""Tests of the format modules: protobuf wire codec, Caffe2 LMDB, TFRecord.

Test dependency: ``protobuf`` (``google.protobuf``) is used, unconditionally, as an
independent reference encoder/decoder, with message classes built at run time
from descriptors (no protoc, no generated modules).  Besides that, several
payloads are written out byte by byte below.
"""

from __future__ import annotations

import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import lmdb
import numpy as np
import pytest

from ndd_readers import _caffe2 as c2
from ndd_readers import _protowire as pw
from ndd_readers import _tfrecord as tfr

# ---------------------------------------------------------------- helpers


def varint(v: int) -> bytes:
    """Independent varint writer for hand-built payloads."""
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field: int, data: bytes) -> bytes:
    """A hand-built length-delimited field."""
    return varint(field << 3 | 2) + varint(len(data)) + data


def pb_classes() -> dict[str, type]:
    """Reference message classes built from descriptors with google.protobuf."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FieldDescriptorProto
    rep = fdp.LABEL_REPEATED
    opt = fdp.LABEL_OPTIONAL

    def add(msg, name, num, typ, label=opt, packed=None, type_name=None):
        f = msg.field.add(name=name, number=num, type=typ, label=label)
        if packed is not None:
            f.options.packed = packed
        if type_name:
            f.type_name = type_name
        return f

    c2f = descriptor_pb2.FileDescriptorProto(name="c2ref.proto", package="c2ref", syntax="proto2")
    tp = c2f.message_type.add(name="TensorProto")
    add(tp, "dims", 1, fdp.TYPE_INT64, rep)
    add(tp, "data_type", 2, fdp.TYPE_INT32)
    add(tp, "float_data", 3, fdp.TYPE_FLOAT, rep, packed=True)
    add(tp, "int32_data", 4, fdp.TYPE_INT32, rep, packed=True)
    add(tp, "byte_data", 5, fdp.TYPE_BYTES)
    add(tp, "string_data", 6, fdp.TYPE_BYTES, rep)
    add(tp, "name", 7, fdp.TYPE_STRING)
    add(tp, "int64_data", 10, fdp.TYPE_INT64, rep, packed=True)
    tps = c2f.message_type.add(name="TensorProtos")
    add(tps, "protos", 1, fdp.TYPE_MESSAGE, rep, type_name=".c2ref.TensorProto")

    tff = descriptor_pb2.FileDescriptorProto(name="tfref.proto", package="tfref", syntax="proto3")
    for name, typ in (
        ("BytesList", fdp.TYPE_BYTES),
        ("FloatList", fdp.TYPE_FLOAT),
        ("Int64List", fdp.TYPE_INT64),
    ):
        add(tff.message_type.add(name=name), "value", 1, typ, rep)
    feat = tff.message_type.add(name="Feature")
    feat.oneof_decl.add(name="kind")
    for num, (name, tname) in enumerate(
        (("bytes_list", "BytesList"), ("float_list", "FloatList"), ("int64_list", "Int64List")), 1
    ):
        add(feat, name, num, fdp.TYPE_MESSAGE, type_name=f".tfref.{tname}").oneof_index = 0
    feats = tff.message_type.add(name="Features")
    entry = feats.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    add(entry, "key", 1, fdp.TYPE_STRING)
    add(entry, "value", 2, fdp.TYPE_MESSAGE, type_name=".tfref.Feature")
    add(feats, "feature", 1, fdp.TYPE_MESSAGE, rep, type_name=".tfref.Features.FeatureEntry")
    add(tff.message_type.add(name="Example"), "features", 1, fdp.TYPE_MESSAGE, type_name=".tfref.Features")

    pool = descriptor_pool.DescriptorPool()
    pool.Add(c2f)
    pool.Add(tff)
    names = ["c2ref.TensorProto", "c2ref.TensorProtos", "tfref.Example"]
    return {n.split(".")[1]: message_factory.GetMessageClass(pool.FindMessageTypeByName(n)) for n in names}


@pytest.fixture(scope="module")
def pb() -> dict[str, type]:
    return pb_classes()


# ---------------------------------------------------------------- _protowire


@pytest.mark.parametrize("v", [0, 1, 127, 128, 300, 2**31 - 1, 2**35, 2**63 - 1, 2**64 - 1])
def test_varint_round_trip(v):
    enc = pw.encode_varint(v)
    assert enc == varint(v)
    assert pw.decode_varint(enc, 0, len(enc)) == (v, len(enc))


def test_negative_varint_is_ten_bytes():
    enc = pw.encode_varint(-1)
    assert len(enc) == 10
    assert pw.decode_varint(enc, 0, 10)[0] == 2**64 - 1
    with pytest.raises(ValueError):
        pw.encode_varint(2**64)


def test_varint_errors():
    with pytest.raises(pw.DecodeError, match="truncated varint"):
        pw.decode_varint(b"\x80\x80", 0, 2)
    with pytest.raises(pw.DecodeError, match="longer than 10"):
        pw.decode_varint(b"\xff" * 11 + b"\x01", 0, 12)
    # The end bound is respected even when the buffer goes on.
    with pytest.raises(pw.DecodeError, match="truncated"):
        pw.decode_varint(b"\x80\x01", 0, 1)


def test_scan_fields():
    msg = varint(1 << 3) + varint(150) + ld(2, b"abc") + b"\x1d" + struct.pack("<f", 1.5)
    msg += b"\x21" + struct.pack("<d", 2.5)
    fields = pw.scan(msg)
    assert [(f[0], f[1]) for f in fields] == [(1, 0), (2, 2), (3, 5), (4, 1)]
    assert fields[0][2] == 150
    _, _, a, b = fields[1]
    assert msg[a:b] == b"abc"
    _, _, a, b = fields[2]
    assert struct.unpack("<f", msg[a:b])[0] == 1.5


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\x0b", "unsupported wire type 3"),  # start group
        (b"\x0c", "unsupported wire type 4"),  # end group
        (b"\x0e", "unsupported wire type 6"),
        (b"\x0f", "unsupported wire type 7"),
        (b"\x00\x01", "field number 0"),
        (b"\x0a\x05ab", "runs past the end"),
        (b"\x0a", "truncated varint"),
        (b"\x0d\x00\x00", "truncated fixed32"),
        (b"\x09\x00", "truncated fixed64"),
        (b"\x08", "truncated varint"),
    ],
)
def test_scan_errors(data, match):
    with pytest.raises(pw.DecodeError, match=match):
        pw.scan(data)


def test_scan_sub_range_respects_end():
    msg = ld(1, ld(2, b"xy")) + ld(3, b"z")
    (_, _, a, b), _ = pw.scan(msg)
    assert [f[0] for f in pw.scan(msg, a, b)] == [2]


@pytest.mark.parametrize("n", [1, 5, 40, 500])
def test_packed_varints_python_and_numpy_paths(n):
    rng = np.random.default_rng(n)
    vals = np.concatenate(
        [
            rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64),
            rng.integers(0, 128, n),
            np.array([0, -1, 2**63 - 1, -(2**63), 127, 128]),
        ]
    ).astype(np.int64)
    data = b"".join(varint(int(v)) for v in vals)
    buf = b"xx" + data + b"yy"
    np.testing.assert_array_equal(pw.packed_varints(buf, 2, 2 + len(data)), vals)
    # both implementations on the same input
    out: list[int] = []
    pw._unpack_varints_py(buf, 2, 2 + len(data), out)
    np.testing.assert_array_equal(np.array(out, np.int64), vals)
    np.testing.assert_array_equal(pw._unpack_varints_np(buf, 2, 2 + len(data)), vals)


def test_packed_varints_numpy_errors():
    with pytest.raises(pw.DecodeError, match="truncated"):
        pw._unpack_varints_np(b"\x01" * 70 + b"\x80", 0, 71)
    with pytest.raises(pw.DecodeError, match="longer than 10"):
        pw._unpack_varints_np(b"\x01" * 70 + b"\xff" * 11 + b"\x01", 0, 82)


def test_repeated_scalars_packed_unpacked_mixed():
    msg = (
        varint(4 << 3)
        + varint(7)  # unpacked
        + ld(4, varint(8) + varint(-9))  # packed
        + varint(4 << 3)
        + varint(10)
        + b"\x1d"
        + struct.pack("<f", 1.0)  # float unpacked
        + ld(3, struct.pack("<2f", 2.0, 3.0))  # float packed
    )
    fields = pw.scan(msg)
    ints = pw.repeated_varints(msg, [f for f in fields if f[0] == 4], np.int32)
    assert ints.dtype == np.int32
    assert ints.tolist() == [7, 8, -9, 10]
    floats = pw.repeated_fixed(msg, [f for f in fields if f[0] == 3], "<f4")
    assert floats.tolist() == [1.0, 2.0, 3.0]
    assert floats.flags.writeable
    with pytest.raises(pw.DecodeError, match="expected varint"):
        pw.repeated_varints(msg, [f for f in fields if f[0] == 3], np.int64)
    with pytest.raises(pw.DecodeError, match="expected fixed32"):
        pw.repeated_fixed(msg, [f for f in fields if f[0] == 4 and f[1] == 0], "<f4")
    bad = ld(3, b"\x00" * 5)
    with pytest.raises(pw.DecodeError, match="not a multiple of 4"):
        pw.repeated_fixed(bad, pw.scan(bad), "<f4")


# ---------------------------------------------------------------- Caffe2 records


def rec(*protos: dict) -> bytes:
    return c2.encode_tensor_protos(list(protos))


IMG = {"data_type": "STRING", "dims": [5], "string_data": [b"\xff\xd8abc"]}


def parse(value: bytes, **kw) -> tuple[np.ndarray, ...]:
    return c2.parse_caffe2_record(value, source="db: record 7 (key b'x')", **kw)


def test_encoder_matches_reference_protobuf(pb):
    protos = [
        {"data_type": "BYTE", "dims": [2, 3, 1], "byte_data": bytes(range(6)), "name": "img"},
        {"data_type": c2.INT32, "int32_data": [3, -4, 2**31 - 1]},
        {"data_type": "FLOAT", "float_data": [0.5, -1.25]},
        {"data_type": "INT64", "int64_data": [-(2**40), 5]},
        {"data_type": "STRING", "string_data": [b"a", b"bc"]},
    ]
    ours = c2.encode_tensor_protos(protos)
    ref = pb["TensorProtos"]()
    ref.ParseFromString(ours)
    assert len(ref.protos) == 5
    assert list(ref.protos[0].dims) == [2, 3, 1]
    assert ref.protos[0].byte_data == bytes(range(6))
    assert ref.protos[0].name == "img"
    assert list(ref.protos[1].int32_data) == [3, -4, 2**31 - 1]
    assert list(ref.protos[2].float_data) == [0.5, -1.25]
    assert list(ref.protos[3].int64_data) == [-(2**40), 5]
    assert list(ref.protos[4].string_data) == [b"a", b"bc"]
    assert ref.SerializeToString() == ours


def test_decode_reference_protobuf_record(pb):
    m = pb["TensorProtos"]()
    img = m.protos.add()
    img.data_type = c2.BYTE
    img.dims.extend([2, 2, 3])
    img.byte_data = bytes(range(12))
    lab = m.protos.add()
    lab.data_type = c2.INT32
    lab.int32_data.extend([0, 3])
    w = m.protos.add()
    w.float_data.extend([0.25, 0.75])  # data_type left at its FLOAT default
    extra = m.protos.add()
    extra.data_type = c2.INT64
    extra.int64_data.extend([-7, 2**40])
    box = m.protos.add()
    box.data_type = c2.INT32
    box.int32_data.extend([1, 2, 30, 40])
    image, label, add0, bbox = parse(
        m.SerializeToString(), label_type=3, num_labels=4, additional_inputs=1, bbox=True
    )
    np.testing.assert_array_equal(image, np.arange(12, dtype=np.uint8).reshape(2, 2, 3))
    np.testing.assert_array_equal(label, np.array([0.25, 0, 0, 0.75], np.float32))
    assert label.dtype == np.float32
    assert add0.dtype == np.int64 and add0.tolist() == [-7, 2**40]
    assert bbox.dtype == np.int32 and bbox.tolist() == [1, 2, 30, 40]


def test_hand_built_record_unpacked_and_negative():
    # TensorProtos with: image STRING (dims unpacked), label INT32 written
    # unpacked as a 10-byte negative varint, and an unknown field 99.
    image = varint(1 << 3) + varint(3) + varint(2 << 3) + varint(4) + ld(6, b"JPG")
    label = varint(2 << 3) + varint(2) + varint(4 << 3) + varint(-3)
    value = ld(1, image) + ld(99, b"ignored") + ld(1, label)
    img, lab = parse(value)
    assert img.dtype == np.uint8 and bytes(img) == b"JPG"
    assert lab.dtype == np.int32 and lab.shape == (1,) and lab[0] == -3


def test_single_label_int32_and_float():
    img, lab = parse(rec(IMG, {"data_type": "INT32", "int32_data": [9]}))
    assert img.dtype == np.uint8 and img.shape == (5,) and bytes(img) == b"\xff\xd8abc"
    assert lab.dtype == np.int32 and lab.tolist() == [9]
    (lab,) = parse(rec({"data_type": "FLOAT", "float_data": [2.5]}), image_available=False)
    assert lab.dtype == np.float32 and lab.tolist() == [2.5]
    assert img.flags.writeable and lab.flags.writeable


def test_multi_label_sparse():
    for dt, key, dtype in (("INT32", "int32_data", np.int32), ("FLOAT", "float_data", np.float32)):
        _, lab = parse(rec(IMG, {"data_type": dt, key: [1, 4]}), label_type=1, num_labels=6)
        assert lab.dtype == dtype
        assert lab.tolist() == [0, 1, 0, 0, 1, 0]


def test_multi_label_sparse_skips_one_proto_before_additional_inputs():
    value = rec(
        IMG,
        {"data_type": "INT32", "int32_data": [0]},
        {"data_type": "FLOAT", "float_data": [123.0]},  # skipped, as DALI does
        {"data_type": "FLOAT", "float_data": [7.0, 8.0]},
    )
    _, lab, add0 = parse(value, label_type=1, num_labels=2, additional_inputs=1)
    assert lab.tolist() == [1, 0]
    assert add0.tolist() == [7.0, 8.0]


def test_multi_label_dense():
    _, lab = parse(rec(IMG, {"data_type": "FLOAT", "float_data": [0.1, 0.2, 0.3]}), label_type=2)
    assert lab.dtype == np.float32 and lab.shape == (3,)
    np.testing.assert_allclose(lab, [0.1, 0.2, 0.3], rtol=1e-6)
    _, lab = parse(rec(IMG, {"data_type": "INT32", "int32_data": [5, 6]}), label_type=2)
    assert lab.dtype == np.int32 and lab.tolist() == [5, 6]


def test_weighted_sparse():
    value = rec(
        IMG,
        {"data_type": "INT32", "int32_data": [2, 0]},
        {"data_type": "FLOAT", "float_data": [0.5, 2.0]},
        {"data_type": "INT32", "int32_data": [11]},
    )
    _, lab, add0 = parse(value, label_type=3, num_labels=3, additional_inputs=1)
    assert lab.dtype == np.float32 and lab.tolist() == [2.0, 0.0, 0.5]
    assert add0.dtype == np.int32 and add0.tolist() == [11]


def test_no_label_additional_inputs_and_bbox():
    value = rec(
        IMG,
        {"data_type": "FLOAT", "float_data": [1.5]},
        {"data_type": "INT32", "int32_data": [-1, 2]},
        {"data_type": "INT64", "int64_data": [2**50]},
        {"data_type": "INT32", "int32_data": [0, 0, 10, 20]},
    )
    out = parse(value, label_type=4, additional_inputs=3, bbox=True)
    assert [o.dtype for o in out] == [np.uint8, np.float32, np.int32, np.int64, np.int32]
    assert out[3].tolist() == [2**50]
    assert out[4].tolist() == [0, 0, 10, 20]
    # bbox=False ignores the trailing proto
    assert len(parse(value, label_type=4, additional_inputs=3)) == 4


def test_label_then_bbox():
    value = rec(
        IMG,
        {"data_type": "INT32", "int32_data": [3]},
        {"data_type": "INT32", "int32_data": [1, 2, 3, 4]},
    )
    _, lab, box = parse(value, bbox=True)
    assert lab.tolist() == [3] and box.tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("dims", [[2, 3, 3], [2, 3]])
def test_byte_image(dims):
    c = dims[2] if len(dims) == 3 else 1
    pixels = bytes(range(2 * 3 * c))
    img, _ = parse(
        rec({"data_type": "BYTE", "dims": dims, "byte_data": pixels}, {"data_type": 2, "int32_data": [0]})
    )
    assert img.shape == (2, 3, c) and img.dtype == np.uint8
    assert bytes(img) == pixels


def test_image_not_available():
    (lab,) = parse(rec({"data_type": "INT32", "int32_data": [4]}), image_available=False)
    assert lab.tolist() == [4]


@pytest.mark.parametrize(
    ("value", "kw", "match"),
    [
        (rec(IMG, {"data_type": "INT64", "int64_data": [1]}), {}, "data_type INT64; expected INT32 or FLOAT"),
        (rec(IMG, {"data_type": "INT32", "int32_data": [1, 2]}), {}, "holds 2 values; label_type 0"),
        (rec(IMG, {"data_type": "INT32"}), {}, "holds 0 values"),
        (rec(IMG), {}, "record has 1 protos, but the label is expected at protos\\[1\\]"),
        (rec(), {}, "the image is expected at protos\\[0\\]"),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [5]}),
            {"label_type": 1, "num_labels": 5},
            "label index 5 outside",
        ),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [-1]}),
            {"label_type": 1, "num_labels": 5},
            "label index -1 outside",
        ),
        (
            rec(IMG, {"data_type": "FLOAT", "float_data": [float("nan")]}),
            {"label_type": 1, "num_labels": 5},
            "non-finite",
        ),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [1, 2]}, {"float_data": [1.0]}),
            {"label_type": 3, "num_labels": 5},
            "1 weights for 2 label indices",
        ),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [1]}, {"data_type": "INT32", "int32_data": [1]}),
            {"label_type": 3, "num_labels": 5},
            "weights protos\\[2\\] has data_type INT32",
        ),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [1]}),
            {"label_type": 3, "num_labels": 5},
            "label weights is expected",
        ),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [1]}, {"data_type": "DOUBLE"}),
            {"additional_inputs": 1},
            "additional input 0 \\(protos\\[2\\]\\) has data_type DOUBLE",
        ),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [1]}),
            {"additional_inputs": 1},
            "additional input 0 is expected",
        ),
        (
            rec(IMG, {"data_type": "INT32", "int32_data": [1]}),
            {"bbox": True},
            "bbox=True needs exactly one proto",
        ),
        (
            rec(
                IMG,
                {"data_type": "INT32", "int32_data": [1]},
                {"data_type": "INT32", "int32_data": [1, 2, 3]},
            ),
            {"bbox": True},
            "must be INT32 with 4 values",
        ),
        (
            rec(
                IMG,
                {"data_type": "INT32", "int32_data": [1]},
                {"data_type": "INT32", "int32_data": [1, 2, 3, 4]},
                {},
            ),
            {"bbox": True},
            "exactly one proto",
        ),
        (
            rec({"data_type": "STRING"}, {"data_type": "INT32", "int32_data": [1]}),
            {},
            "STRING image protos\\[0\\] has no string_data",
        ),
        (
            rec({"data_type": "BYTE", "dims": [2, 2], "byte_data": b"abc"}),
            {},
            "has dims \\[2, 2\\] but 3 bytes",
        ),
        (rec({"data_type": "BYTE", "dims": [4], "byte_data": b"abcd"}), {}, "needs dims \\(H, W\\)"),
        (rec({"data_type": "INT32", "int32_data": [1]}), {}, "image protos\\[0\\] has data_type INT32"),
    ],
)
def test_record_errors(value, kw, match):
    with pytest.raises(ValueError, match=match) as ei:
        parse(value, **kw)
    assert "db: record 7 (key b'x')" in str(ei.value)


def test_truncated_and_bad_wire_type_records():
    good = rec(IMG, {"data_type": "INT32", "int32_data": [1]})
    with pytest.raises(ValueError, match=r"record 7.*malformed Caffe2 TensorProtos.*runs past"):
        parse(good[:-3])
    # protos field with varint wire type
    with pytest.raises(ValueError, match=r"malformed.*field 1 has wire type varint"):
        parse(b"\x08\x01" + good)
    # a group inside protos[2]
    with pytest.raises(ValueError, match="protos\\[2\\]: unsupported wire type 3"):
        parse(good + ld(1, b"\x0b"))
    # data_type written as length-delimited
    with pytest.raises(ValueError, match="field 2 has wire type length-delimited"):
        parse(ld(1, ld(2, b"\x04")))


@pytest.mark.parametrize(
    "kw",
    [{"label_type": 5}, {"label_type": -1}, {"label_type": 1, "num_labels": 0}, {"additional_inputs": -1}],
)
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        parse(rec(IMG, {"data_type": "INT32", "int32_data": [1]}), **kw)


def test_encode_tensor_proto_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown TensorProto keys"):
        c2.encode_tensor_protos([{"dtype": 1}])
    with pytest.raises(ValueError, match="unknown Caffe2 data_type"):
        c2.encode_tensor_protos([{"data_type": "COMPLEX"}])


# ---------------------------------------------------------------- Caffe2 LMDB source


def test_caffe2_lmdb_round_trip(tmp_path):
    recs0 = [(bytes([i]) * (i + 1), i % 3) for i in range(12)]
    recs1 = [(b"second-%d" % i, 100 + i) for i in range(3)]
    assert c2.write_caffe2_lmdb(tmp_path / "a", recs0) == 12
    assert c2.write_caffe2_lmdb(str(tmp_path / "b"), recs1) == 3
    with c2.Caffe2Source([tmp_path / "a", str(tmp_path / "b")]) as src:
        assert len(src) == 15
        assert src.key(0) == b"00000000" and src.key(11) == b"00000011"
        assert src.key(12) == b"00000000"
        assert "b: record 13 (key b'00000001')" in src.describe(13)
        for i, (img, label) in enumerate(recs0 + recs1):
            out_img, out_lab = c2.parse_caffe2_record(src.read(i))
            assert bytes(out_img) == img
            assert out_lab.tolist() == [label] and out_lab.dtype == np.int32
        # the writer stores dims=[len] on the STRING image
        p = c2.decode_tensor_protos(src.read(3))[0]
        assert p.dims == [4] and p.data_type == c2.STRING
        with pytest.raises(IndexError):
            src.read(15)
        with pytest.raises(IndexError):
            src.read(-1)
    with pytest.raises(RuntimeError, match="closed"):
        src.read(0)


def test_caffe2_source_key_order(tmp_path):
    env = lmdb.open(str(tmp_path / "db"), map_size=1 << 20)
    with env.begin(write=True) as txn:
        for k in (b"c", b"a", b"b"):
            txn.put(k, rec(IMG, {"data_type": "INT32", "int32_data": [ord(k)]}))
    env.close()
    src = c2.Caffe2Source(str(tmp_path / "db"))
    assert [src.key(i) for i in range(3)] == [b"a", b"b", b"c"]
    assert [c2.parse_caffe2_record(src.read(i))[1][0] for i in range(3)] == [97, 98, 99]
    src.close()


def test_caffe2_source_threads(tmp_path):
    n = 200
    c2.write_caffe2_lmdb(tmp_path / "db", ((os.urandom(64 + i), i) for i in range(n)))
    src = c2.Caffe2Source(tmp_path / "db")
    expected = [src.read(i) for i in range(n)]
    order = np.random.default_rng(0).permutation(np.tile(np.arange(n), 5)).tolist()
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(src.read, order))
    assert got == [expected[i] for i in order]
    src.close()


def test_write_lmdb_grows_map(tmp_path):
    values = [os.urandom(20000) for _ in range(300)]  # ~6 MB into a 1 MB map
    assert c2.write_lmdb(tmp_path / "db", values, map_size=1 << 20) == 300
    with c2.Caffe2Source(tmp_path / "db") as src:
        assert len(src) == 300 and src.read(299) == values[299]
    with pytest.raises(ValueError, match="already exists"):
        c2.write_lmdb(tmp_path / "db", [b"x"])


def test_caffe2_source_errors(tmp_path):
    with pytest.raises(ValueError, match="nope: LMDB path does not exist"):
        c2.Caffe2Source(tmp_path / "nope")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="plain: not an LMDB environment"):
        c2.Caffe2Source(tmp_path / "plain")
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(ValueError, match="file: not an LMDB environment"):
        c2.Caffe2Source(tmp_path / "file")
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "data.mdb").write_bytes(os.urandom(8192))
    with pytest.raises(ValueError, match="garbage: not a readable LMDB environment"):
        c2.Caffe2Source(tmp_path / "garbage")
    lmdb.open(str(tmp_path / "empty")).close()
    with pytest.raises(ValueError, match="empty: the LMDB database is empty"):
        c2.Caffe2Source(tmp_path / "empty")
    c2.write_caffe2_lmdb(tmp_path / "ok", [(b"x", 1)])
    with pytest.raises(ValueError, match="empty: the LMDB database is empty"):
        c2.Caffe2Source([tmp_path / "ok", tmp_path / "empty"])
    with pytest.raises(ValueError, match="at least one"):
        c2.Caffe2Source([])


def test_caffe2_source_names_the_record_of_an_lmdb_read_error(tmp_path):
    import gc

    c2.write_lmdb(tmp_path / "a", [b"a" * 10, b"b" * 20000, b"c" * 10])  # record 1 on overflow pages
    c2.write_lmdb(tmp_path / "b", [b"d"])
    single = c2.Caffe2Source(tmp_path / "a")
    both = c2.Caffe2Source([tmp_path / "a", tmp_path / "b"])
    # Damage the database under the open sources: the leaf node of key 00000001 holds the
    # key, then the number of its first overflow page; point that past the last page.
    mdb = tmp_path / "a" / "data.mdb"
    at = mdb.read_bytes().find(b"00000001") + 8
    with open(mdb, "r+b") as f:
        f.seek(at)
        f.write(struct.pack("<Q", 10**6))
    match = r"a: record 1 \(key b'00000001'\): reading the record failed .*MDB_PAGE_NOTFOUND"
    with pytest.raises(ValueError, match=match):
        single.read(1)
    with pytest.raises(ValueError, match=match):
        single.read_many([0, 2, 1])
    with pytest.raises(ValueError, match=match):
        both.read_many([3, 0, 1])
    assert single.read_many([2, 0]) == [b"c" * 10, b"a" * 10]
    assert both.read_many([3, 2]) == [b"d", b"c" * 10]
    del single, both
    gc.collect()
    assert c2._ENVS.get(os.path.realpath(tmp_path / "a"), lambda: None)() is None
    with pytest.raises(ValueError, match=r"a: corrupt LMDB database, listing its keys failed: .*MDB_PAGE_NOTFOUND"):
        c2.Caffe2Source(tmp_path / "a")


# ---------------------------------------------------------------- TFRecord framing and index


def test_crc32c_known_values():
    assert tfr._crc32c(b"123456789") == 0xE3069283
    assert tfr._crc32c(b"") == 0
    assert tfr._crc32c(bytes(32)) == 0x8A9136AA


def test_write_tfrecord_framing_and_index(tmp_path):
    payloads = [b"", b"a", os.urandom(300), os.urandom(70000)]
    path = tmp_path / "x.tfrecord"
    index = tfr.write_tfrecord(path, payloads)
    data = path.read_bytes()
    offsets = [0]
    for p in payloads:
        offsets.append(offsets[-1] + len(p) + 16)
    assert index == [(o, len(p) + 16) for o, p in zip(offsets, payloads, strict=False)]
    assert len(data) == offsets[-1]
    for (off, _), p in zip(index, payloads, strict=True):
        header = data[off : off + 8]
        assert struct.unpack("<Q", header)[0] == len(p)
        assert struct.unpack("<I", data[off + 8 : off + 12])[0] == tfr._masked_crc(header)
        assert data[off + 12 : off + 12 + len(p)] == p
        assert struct.unpack("<I", data[off + 12 + len(p) : off + 16 + len(p)])[0] == tfr._masked_crc(p)
    assert tfr.build_index(path) == index
    tfr.write_index(index, tmp_path / "x.idx")
    assert (tmp_path / "x.idx").read_text() == "".join(f"{o} {n}\n" for o, n in index)
    np.testing.assert_array_equal(tfr.read_index(tmp_path / "x.idx"), np.array(index))
    assert tfr.read_index(tmp_path / "x.idx").dtype == np.int64


def test_tfrecord2idx_main(tmp_path, capsys):
    tfr.write_tfrecord(tmp_path / "x.tfrecord", [b"abc", b"defg"], crc=False)
    assert tfr.main([str(tmp_path / "x.tfrecord"), str(tmp_path / "x.idx")]) == 0
    assert (tmp_path / "x.idx").read_text() == "0 19\n19 20\n"
    (tmp_path / "bad.tfrecord").write_bytes(b"\x05" + bytes(7))
    assert tfr.main([str(tmp_path / "bad.tfrecord"), str(tmp_path / "bad.idx")]) == 1
    assert "bad.tfrecord: truncated record at offset 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tfr.main([])


def test_build_index_truncated(tmp_path):
    path = tmp_path / "t.tfrecord"
    tfr.write_tfrecord(path, [b"abcd", b"efghij"])
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    with pytest.raises(ValueError, match=r"t.tfrecord: truncated record at offset 20: it needs 22"):
        tfr.build_index(path)
    path.write_bytes(data[:25])
    with pytest.raises(ValueError, match="truncated record at offset 20: only 5 bytes of its 12-byte header"):
        tfr.build_index(path)
    path.write_bytes(b"")
    assert tfr.build_index(path) == []


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("0 20\n12\n", 2),
        ("0 20\na b\n", 2),
        ("0 20 5\n", 1),
        ("0 20\n\n-4 20\n", 3),
        ("0 15\n", 1),
        ("0x10 20\n", 1),
    ],
)
def test_read_index_malformed(tmp_path, text, line):
    (tmp_path / "i.idx").write_text(text)
    with pytest.raises(ValueError, match=f"i.idx:{line}: "):
        tfr.read_index(tmp_path / "i.idx")


def test_read_index_tolerates_blank_lines_and_spacing(tmp_path):
    (tmp_path / "i.idx").write_text("0 20\n\n  20\t30  \n")
    assert tfr.read_index(tmp_path / "i.idx").tolist() == [[0, 20], [20, 30]]
    (tmp_path / "e.idx").write_text("")
    assert tfr.read_index(tmp_path / "e.idx").shape == (0, 2)


def test_tfrecord_source(tmp_path):
    a = [os.urandom(n) for n in (0, 10, 1000)]
    b = [os.urandom(n) for n in (5, 7)]
    tfr.write_index(tfr.write_tfrecord(tmp_path / "a.tfrecord", a), tmp_path / "a.idx")
    tfr.write_index(tfr.write_tfrecord(tmp_path / "b.tfrecord", b, crc=False), tmp_path / "b.idx")
    src = tfr.TFRecordSource(
        [tmp_path / "a.tfrecord", str(tmp_path / "b.tfrecord")], [tmp_path / "a.idx", tmp_path / "b.idx"]
    )
    assert len(src) == 5
    assert [src.read(i) for i in range(5)] == a + b
    assert src.describe(4) == f"{tmp_path / 'b.tfrecord'}: record 1 (offset 21)"
    order = np.random.default_rng(1).permutation(np.tile(np.arange(5), 40)).tolist()
    with ThreadPoolExecutor(8) as ex:
        assert list(ex.map(src.read, order)) == [(a + b)[i] for i in order]
    with pytest.raises(IndexError):
        src.read(5)
    src.close()
    with pytest.raises(RuntimeError, match="closed"):
        src.read(0)
    with tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "a.idx") as one:
        assert len(one) == 3


def test_tfrecord_source_errors(tmp_path):
    tfr.write_index(tfr.write_tfrecord(tmp_path / "a.tfrecord", [b"x" * 10, b"y" * 20]), tmp_path / "a.idx")
    tfr.write_index(tfr.write_tfrecord(tmp_path / "b.tfrecord", [b"z" * 12, b"w" * 16]), tmp_path / "b.idx")
    with pytest.raises(ValueError, match=r"nope.tfrecord: TFRecord file does not exist"):
        tfr.TFRecordSource(tmp_path / "nope.tfrecord", tmp_path / "a.idx")
    with pytest.raises(ValueError, match=r"nope.idx: index file does not exist"):
        tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "nope.idx")
    with pytest.raises(ValueError, match="2 TFRecord paths but 1 index paths"):
        tfr.TFRecordSource([tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"], [tmp_path / "a.idx"])
    # An index of another file, which ends 2 bytes before this one.
    with pytest.raises(ValueError, match=r"b.idx does not match .*a.tfrecord: its entries end at byte 60, "
                                         r"but the file has 62 bytes"):
        tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "b.idx")
    # Entries that tile the file but cut it in the wrong places: lengths disagree with
    # the record header.
    (tmp_path / "cut.idx").write_text("0 28\n28 34\n")
    src = tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "cut.idx")
    with pytest.raises(ValueError, match=r"a.tfrecord: record 0 \(offset 0\): the index gives length 28"):
        src.read(0)
    src.close()
    # An index that runs past the end of the file.
    (tmp_path / "long.idx").write_text("0 26\n26 36\n62 20\n")
    with pytest.raises(ValueError, match=r"a.tfrecord: record 2 at offset 62 with length 20 runs past"):
        tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "long.idx")
    # A file truncated after the source was opened.
    src = tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "a.idx")
    os.truncate(tmp_path / "a.tfrecord", 40)
    with pytest.raises(ValueError, match="record 1 \\(offset 26\\): file truncated: read 14 of 36"):
        src.read(1)
    src.close()
    (tmp_path / "empty.idx").write_text("")
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(ValueError, match="no records"):
        tfr.TFRecordSource(tmp_path / "empty.tfrecord", tmp_path / "empty.idx")


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("0 21\n21 23\n", "its entries end at byte 44, but the file has 69 bytes"),  # stale: too few
        ("", "its entries end at byte 0, but the file has 69 bytes"),
        ("0 21\n44 25\n", "bytes 21 to 44 of the file are in no entry"),
        ("21 23\n44 25\n", "bytes 0 to 21 of the file are in no entry"),
        ("0 21\n21 23\n0 21\n44 25\n", "the entry at offset 0 overlaps the one before it"),
    ],
)
def test_tfrecord_index_must_cover_its_file(tmp_path, text, what):
    import re

    tfr.write_tfrecord(tmp_path / "a.tfrecord", [b"x" * 5, b"y" * 7, b"z" * 9])  # 21 + 23 + 25 bytes
    tfr.write_index(tfr.write_tfrecord(tmp_path / "b.tfrecord", [b"w"]), tmp_path / "b.idx")
    (tmp_path / "a.idx").write_text(text)
    match = re.escape(f"{tmp_path / 'a.idx'} does not match {tmp_path / 'a.tfrecord'}: {what} (a stale index?")
    with pytest.raises(ValueError, match=match):
        tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "a.idx")
    with pytest.raises(ValueError, match=match):  # also one bad index among several
        tfr.TFRecordSource([tmp_path / "b.tfrecord", tmp_path / "a.tfrecord"], [tmp_path / "b.idx", tmp_path / "a.idx"])


def test_tfrecord_index_in_any_order(tmp_path):
    tfr.write_tfrecord(tmp_path / "a.tfrecord", [b"x" * 5, b"y" * 7, b"z" * 9])
    (tmp_path / "a.idx").write_text("44 25\n0 21\n21 23\n")
    with tfr.TFRecordSource(tmp_path / "a.tfrecord", tmp_path / "a.idx") as src:
        assert [src.read(i) for i in range(3)] == [b"z" * 9, b"x" * 5, b"y" * 7]


# ---------------------------------------------------------------- tf.train.Example


def hand_example() -> bytes:
    """An Example written byte by byte, exercising the decoder's slow paths."""
    bytes_feature = ld(1, ld(1, b"first") + ld(1, b"second"))  # bytes_list
    int_feature = ld(3, ld(1, varint(5) + varint(-2) + varint(2**40)))  # packed int64_list
    # float_list written unpacked (wire type 5 per value)
    float_feature = ld(2, b"\x0d" + struct.pack("<f", 1.5) + b"\x0d" + struct.pack("<f", -4.0))
    # int64_list with packed and unpacked parts mixed
    mixed_feature = ld(3, ld(1, varint(1) + varint(2)) + varint(1 << 3) + varint(3))
    entries = [
        ld(1, ld(1, b"img") + ld(2, bytes_feature)),
        # map entry with the value before the key, and an unknown field
        ld(1, ld(2, int_feature) + ld(7, b"??") + ld(1, b"ids")),
        ld(1, ld(1, b"f") + ld(2, float_feature)),
        ld(1, ld(1, b"mixed") + ld(2, mixed_feature)),
        ld(1, ld(1, b"empty") + ld(2, b"")),  # Feature with no list set
        ld(1, ld(1, b"unused") + ld(2, ld(3, ld(1, varint(1))))),
    ]
    return ld(1, b"".join(entries))


def test_parse_hand_built_example():
    feats = {
        "img": tfr.FixedLenFeature([], tfr.string, ""),
        "ids": tfr.VarLenFeature(tfr.int64, 0),
        "f": tfr.FixedLenFeature([2], tfr.float32, 0.0),
        "mixed": tfr.FixedLenFeature([3], tfr.int64, 0),
        "empty": tfr.VarLenFeature(tfr.float32, 0.0),
    }
    out = tfr.parse_example(hand_example(), feats)
    assert list(out) == ["img", "ids", "f", "mixed", "empty"]
    assert out["img"].dtype == np.uint8 and bytes(out["img"]) == b"first"
    assert out["ids"].dtype == np.int64 and out["ids"].tolist() == [5, -2, 2**40]
    assert out["f"].dtype == np.float32 and out["f"].tolist() == [1.5, -4.0]
    assert out["mixed"].tolist() == [1, 2, 3]
    assert out["empty"].shape == (0,) and out["empty"].dtype == np.float32
    assert all(v.flags.writeable for v in out.values())


def test_parse_reference_protobuf_example(pb):
    ex = pb["Example"]()
    f = ex.features.feature
    f["image/encoded"].bytes_list.value.append(bytes(range(256)) * 3)
    f["image/class/label"].int64_list.value.append(-1)
    f["bbox"].float_list.value.extend([0.0, 0.25, 0.5, 1.0, 0.1, 0.2, 0.3, 0.4])
    f["big"].int64_list.value.extend([*range(-50, 50), 2**62, -(2**63)])
    f["text"].bytes_list.value.append("ünïcode".encode())
    feats = {
        "image/encoded": tfr.FixedLenFeature((), tfr.string, b""),
        "image/class/label": tfr.FixedLenFeature([1], tfr.int64, -1),
        "bbox": tfr.VarLenFeature([4], tfr.float32, 0.0),
        "big": tfr.VarLenFeature(tfr.int64, 0),
        "text": tfr.FixedLenFeature([1], tfr.string, ""),
        "absent": tfr.FixedLenFeature([2], tfr.float32, 7.0),
    }
    out = tfr.parse_example(ex.SerializeToString(), feats)
    assert bytes(out["image/encoded"]) == bytes(range(256)) * 3
    assert out["image/class/label"].shape == (1,) and out["image/class/label"].dtype == np.int64
    assert out["image/class/label"].tolist() == [-1]
    assert out["bbox"].shape == (2, 4)
    np.testing.assert_array_equal(out["bbox"].ravel(), np.array(f["bbox"].float_list.value, np.float32))
    assert out["big"].tolist() == [*range(-50, 50), 2**62, -(2**63)]
    assert bytes(out["text"]).decode() == "ünïcode"
    assert out["absent"].tolist() == [7.0, 7.0] and out["absent"].dtype == np.float32


def test_encode_example_matches_reference(pb):
    payload = tfr.encode_example(
        {
            "s": [b"ab", "cd"],
            "one": b"x",
            "i": [1, -2, 2**40],
            "f": [0.5, 1],
            "nf": np.array([[1.5, 2.5]], np.float32),
            "ni": np.array([3, 4], np.uint8),
            "nb": np.array([True, False]),
            "ns": np.array([b"p", b"q"]),
            "empty": np.array([], np.int64),
        }
    )
    ex = pb["Example"]()
    ex.ParseFromString(payload)
    f = ex.features.feature
    assert list(f["s"].bytes_list.value) == [b"ab", b"cd"]
    assert list(f["one"].bytes_list.value) == [b"x"]
    assert list(f["i"].int64_list.value) == [1, -2, 2**40]
    assert list(f["f"].float_list.value) == [0.5, 1.0]
    assert list(f["nf"].float_list.value) == [1.5, 2.5]
    assert list(f["ni"].int64_list.value) == [3, 4]
    assert list(f["nb"].int64_list.value) == [1, 0]
    assert list(f["ns"].bytes_list.value) == [b"p", b"q"]
    assert f["empty"].WhichOneof("kind") == "int64_list"
    assert list(f["empty"].int64_list.value) == []
    with pytest.raises(ValueError, match="empty list"):
        tfr.encode_example({"x": []})
    with pytest.raises(ValueError, match="all bytes, all ints or all numbers"):
        tfr.encode_example({"x": [1, b"a"]})


def test_feature_semantics():
    payload = tfr.encode_example({"lab": [3], "s": [b"one", b"two"], "m": np.arange(6), "v": [1.0, 2.0, 3.0]})
    out = tfr.parse_example(
        payload,
        {
            "lab": tfr.FixedLenFeature([], tfr.int64, -1),
            "s": tfr.FixedLenFeature([1], tfr.string, ""),
            "m": tfr.FixedLenFeature([2, 3], tfr.int64, 0),
            "v": tfr.VarLenFeature(tfr.float32, 0.0),
            "miss_s": tfr.FixedLenFeature([], tfr.string, "dflt"),
            "miss_i": tfr.FixedLenFeature([2, 2], tfr.int64, [1, 2]),
            "miss_v": tfr.VarLenFeature([3], tfr.int64, 0),
        },
    )
    assert out["lab"].shape == () and out["lab"].tolist() == 3  # shape [] is a 0-d scalar (DALI 2.4)
    assert bytes(out["s"]) == b"one"
    assert out["m"].shape == (2, 3) and out["m"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert out["v"].shape == (3,)
    assert bytes(out["miss_s"]) == b"dflt"
    assert out["miss_i"].tolist() == [[1, 2], [1, 2]]
    assert out["miss_v"].shape == (0, 3) and out["miss_v"].dtype == np.int64


@pytest.mark.parametrize(
    ("feature", "match"),
    [
        (tfr.FixedLenFeature([1], tfr.int64), "feature 'gone' is missing and has no default_value"),
        (tfr.FixedLenFeature([], tfr.string), "feature 'gone' is missing"),
    ],
)
def test_missing_feature_without_default(feature, match):
    with pytest.raises(ValueError, match=match) as ei:
        tfr.parse_example(tfr.encode_example({"x": [1]}), {"gone": feature}, source="f.tfrecord: record 3")
    assert "f.tfrecord: record 3" in str(ei.value)


@pytest.mark.parametrize(
    ("values", "feature", "match"),
    [
        (
            [1, 2],
            tfr.FixedLenFeature([1], tfr.int64, 0),
            "holds 2 values; FixedLenFeature shape \\[1\\] needs 1",
        ),
        (
            [1.0],
            tfr.FixedLenFeature([1], tfr.int64, 0),
            "is a float_list, but the int64 feature needs a int64_list",
        ),
        ([b"a"], tfr.VarLenFeature(tfr.float32, 0.0), "is a bytes_list"),
        (
            [1, 2, 3],
            tfr.VarLenFeature([2], tfr.int64, 0),
            "holds 3 values, not a multiple of partial_shape \\[2\\]",
        ),
        (np.array([], np.int64), tfr.FixedLenFeature([], tfr.string), "is a int64_list"),
    ],
)
def test_feature_mismatch_errors(values, feature, match):
    with pytest.raises(ValueError, match=match) as ei:
        tfr.parse_example(tfr.encode_example({"x": values}), {"x": feature}, source="rec 9")
    assert "rec 9: feature 'x'" in str(ei.value)


def test_empty_bytes_list_uses_default():
    empty = ld(1, ld(1, ld(1, b"x") + ld(2, ld(1, b""))))  # bytes_list with no values
    assert bytes(tfr.parse_example(empty, {"x": tfr.FixedLenFeature([], tfr.string, "d")})["x"]) == b"d"
    with pytest.raises(ValueError, match="empty bytes_list and no default_value"):
        tfr.parse_example(empty, {"x": tfr.FixedLenFeature([], tfr.string)})


def test_malformed_example():
    good = tfr.encode_example({"x": [1, 2]})
    feats = {"x": tfr.VarLenFeature(tfr.int64, 0)}
    with pytest.raises(ValueError, match=r"r1: malformed tf.train.Example"):
        tfr.parse_example(good[:-1], feats, source="r1")
    with pytest.raises(ValueError, match=r"malformed.*unsupported wire type 3"):
        tfr.parse_example(good + b"\x0b", feats)
    with pytest.raises(ValueError, match=r"malformed.*field 1 has wire type varint"):
        tfr.parse_example(b"\x08\x01", feats)


def test_feature_descriptors():
    assert (int(tfr.int64), int(tfr.string), int(tfr.float32)) == (0, 1, 2)
    f = tfr.FixedLenFeature([1], tfr.int64, -1)
    assert (f.shape, f.dtype, f.default_value) == ((1,), tfr.int64, -1)
    assert repr(f) == "FixedLenFeature([1], int64, -1)"
    v = tfr.VarLenFeature(tfr.float32, 0.0)
    assert (v.partial_shape, v.dtype, v.default_value) == (None, tfr.float32, 0.0)
    v = tfr.VarLenFeature([2, 2], tfr.int64, 0)
    assert v.partial_shape == (2, 2) and repr(v) == "VarLenFeature([2, 2], int64, 0)"
    assert tfr.VarLenFeature(2, default_value=1.0).default_value == 1.0
    assert tfr.FixedLenFeature([1], 0).default_value is None
    with pytest.raises(ValueError, match="unknown TFRecord feature dtype"):
        tfr.FixedLenFeature([1], 7, 0)
    with pytest.raises(ValueError, match="tensors of strings are not supported"):
        tfr.FixedLenFeature([2], tfr.string, "")
    with pytest.raises(ValueError, match="tensors of strings are not supported"):
        tfr.VarLenFeature(tfr.string, "")
    with pytest.raises(ValueError, match="does not fit shape"):
        tfr.FixedLenFeature([2], tfr.int64, [1, 2, 3])
    with pytest.raises(ValueError, match="non-negative"):
        tfr.FixedLenFeature([-1], tfr.int64, 0)
    with pytest.raises(ValueError, match="partial_shape must be positive"):
        tfr.VarLenFeature([0], tfr.int64, 0)
    with pytest.raises(TypeError):
        tfr.VarLenFeature()
    with pytest.raises(TypeError, match="must be a FixedLenFeature or VarLenFeature"):
        tfr.ExampleParser({"x": "int64"})


def test_example_parser_reuse_across_threads():
    parser = tfr.ExampleParser({"i": tfr.FixedLenFeature([1], tfr.int64, -1)})
    payloads = [tfr.encode_example({"i": [k]}) for k in range(300)]
    results: list[int] = [0] * 300
    lock = threading.Lock()

    def work(k: int) -> None:
        v = int(parser(payloads[k])["i"][0])
        with lock:
            results[k] = v

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(work, range(300)))
    assert results == list(range(300))


def test_sources_over_one_database_share_its_environment_until_the_last_is_gone(tmp_path):
    """LMDB allows one environment per path and process: sources share it, closing one
    source leaves the other readable, and the environment closes with the last source."""
    import gc
    import weakref

    c2.write_caffe2_lmdb(tmp_path / "a", [(b"x", 1), (b"y", 2)])
    first = c2.Caffe2Source(tmp_path / "a")
    second = c2.Caffe2Source(str(tmp_path / "a") + "/")  # the same database, spelled differently
    assert first._envs[0] is second._envs[0]
    env = weakref.ref(first._envs[0])
    first.close()
    with pytest.raises(RuntimeError, match="closed"):
        first.read(0)
    assert c2.parse_caffe2_record(second.read(1))[1][0] == 2
    second.cycle = second  # collected only by the cycle collector, with no close()
    del second
    gc.collect()
    assert env() is None, "the environment outlived every source over it"
    third = c2.Caffe2Source(tmp_path / "a")  # a fresh environment
    assert c2.parse_caffe2_record(third.read(0))[1][0] == 1


def test_a_source_collected_while_an_environment_opens_does_not_deadlock(tmp_path, monkeypatch):
    """Garbage collection can drop a source at any allocation, also while this thread
    opens another environment under the cache's lock: nothing waits for that lock then."""
    import gc

    c2.write_caffe2_lmdb(tmp_path / "a", [(b"x", 1)])
    c2.write_caffe2_lmdb(tmp_path / "b", [(b"y", 2)])
    old = c2.Caffe2Source(tmp_path / "a")
    old.cycle = old
    del old
    opened = c2._open_new_env

    def open_with_gc(path):
        gc.collect()  # what an allocation can trigger at any point
        return opened(path)

    monkeypatch.setattr(c2, "_open_new_env", open_with_gc)
    result = []
    t = threading.Thread(target=lambda: result.append(c2.Caffe2Source(tmp_path / "b")), daemon=True)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), "deadlock: collecting a source waited for the lock its own thread held"
    assert c2._ENVS.get(os.path.realpath(tmp_path / "a"), lambda: None)() is None  # its environment closed with it
    assert c2.parse_caffe2_record(result[0].read(0))[1][0] == 2


def test_sources_opened_and_dropped_on_many_threads_share_the_environment_without_error(tmp_path):
    """Threads that open and drop sources over one database at once never find its
    environment gone from the cache but still open (py-lmdb then refuses the path): the
    race of a cache whose weak references ran Python code inside the deallocation."""
    import sys

    c2.write_caffe2_lmdb(tmp_path / "a", [(b"x", 1), (b"y", 2)])
    path = str(tmp_path / "a")
    errors: list[BaseException] = []

    def churn() -> None:
        for _ in range(1500):
            try:
                src = c2.Caffe2Source(path)
                assert c2.parse_caffe2_record(src.read(1))[1][0] == 2
                del src
            except BaseException as e:  # noqa: BLE001 - reported by the assertion below
                errors.append(e)
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, to meet the window
    try:
        threads = [threading.Thread(target=churn) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads)


def test_a_database_held_open_by_another_handle_is_refused_by_name(tmp_path, monkeypatch):
    """An environment the caller opened with py-lmdb itself cannot be opened again in the
    process: the error names the path and says why, after a short wait for a closing one."""
    c2.write_caffe2_lmdb(tmp_path / "a", [(b"x", 1)])
    monkeypatch.setattr(c2, "_CLOSING_WAIT_S", 0.05)
    theirs = lmdb.open(str(tmp_path / "a"), readonly=True, lock=False)
    try:
        with pytest.raises(ValueError, match=r"a: the LMDB environment is still open in this process "
                                             r"through a handle ndd does not own"):
            c2.Caffe2Source(tmp_path / "a")
    finally:
        theirs.close()
    assert c2.parse_caffe2_record(c2.Caffe2Source(tmp_path / "a").read(0))[1][0] == 1
