"""ndd.readers.Caffe: LMDBs of Caffe ``Datum`` records.

Records are encoded with ``google.protobuf`` (a message class built here from a
descriptor of Caffe's ``Datum``), an encoder independent of the reader's decoder; the
expected outputs are written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import ndd
from ndd_readers._caffe2 import write_lmdb


@pytest.fixture(scope="module")
def Datum() -> type:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="caffe_ref.proto", package="caffe_ref", syntax="proto2")
    m = f.message_type.add(name="Datum")
    for name, num, typ in (("channels", 1, fdp.TYPE_INT32), ("height", 2, fdp.TYPE_INT32),
                           ("width", 3, fdp.TYPE_INT32), ("data", 4, fdp.TYPE_BYTES),
                           ("label", 5, fdp.TYPE_INT32), ("float_data", 6, fdp.TYPE_FLOAT),
                           ("encoded", 7, fdp.TYPE_BOOL)):
        m.field.add(name=name, number=num, type=typ,
                    label=fdp.LABEL_REPEATED if name == "float_data" else fdp.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe_ref.Datum"))


def encoded(Datum, k: int) -> bytes:
    """Record ``k``: an 'encoded image' of k+1 bytes, all k, with label k."""
    return Datum(data=bytes([k]) * (k + 1), label=k, encoded=True).SerializeToString()


@pytest.fixture
def dbs(tmp_path, Datum) -> list[str]:
    """Two databases: records 0..4 and 5..8."""
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    write_lmdb(paths[0], [encoded(Datum, k) for k in range(5)])
    write_lmdb(paths[1], [encoded(Datum, k) for k in range(5, 9)])
    return paths


def labels(batch) -> list[int]:
    return [int(np.asarray(t)[0]) for t in batch]


def test_outputs(tmp_path, Datum):
    pixels = np.arange(12, dtype=np.uint8)
    records = [
        Datum(data=b"\xff\xd8JPEG", label=7, encoded=True),
        Datum(channels=2, height=2, width=3, data=pixels.tobytes(), label=-3, encoded=False),  # raw
        Datum(data=b"xyz", float_data=[1.5]),  # no `encoded`: the bytes; no label: empty
        Datum(channels=3, height=1, width=2, data=bytes(range(6)), label=5),  # no `encoded`: the bytes
    ]
    write_lmdb(tmp_path / "db", [r.SerializeToString() for r in records])
    r = ndd.readers.Caffe(path=tmp_path / "db")
    got = [tuple(np.asarray(t) for t in s) for s, _ in zip(r.next_epoch(), range(4))]
    assert got[0][0].tobytes() == b"\xff\xd8JPEG" and got[0][1].tolist() == [7]
    np.testing.assert_array_equal(got[1][0], pixels.reshape(2, 3, 2))  # (height, width, channels) as stored
    assert got[1][1].tolist() == [-3]
    assert got[2][0].tobytes() == b"xyz" and got[2][1].shape == (0,)
    assert got[3][0].tolist() == list(range(6)) and got[3][1].tolist() == [5]
    images, labs = next(iter(ndd.readers.Caffe(path=tmp_path / "db").next_epoch(batch_size=1)))
    assert images.dtype == ndd.uint8 and images.layout is None and labs.dtype == ndd.int32 and labs.layout is None
    (only,) = next(iter(ndd.readers.Caffe(path=tmp_path / "db", image_available=False).next_epoch()))
    assert np.asarray(only).tolist() == [7]
    (only,) = next(iter(ndd.readers.Caffe(path=tmp_path / "db", label_available=False).next_epoch()))
    assert np.asarray(only).tobytes() == b"\xff\xd8JPEG"


def test_raw_images_of_several_shapes_batch_together(tmp_path, Datum):
    shapes = [(2, 1, 3), (1, 4, 1), (2, 1, 3)]
    write_lmdb(tmp_path / "db", [Datum(height=h, width=w, channels=c, data=bytes(h * w * c), label=k,
                                       encoded=False).SerializeToString() for k, (h, w, c) in enumerate(shapes)])
    images, labs = next(iter(ndd.readers.Caffe(path=tmp_path / "db").next_epoch(batch_size=3)))
    assert images.shape == shapes and labels(labs) == [0, 1, 2]


def test_epochs_shards_and_padding(dbs):
    r = ndd.readers.Caffe(path=dbs)
    assert [labels(lab) for _, lab in r.next_epoch(batch_size=4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 0, 1, 2]]
    r = ndd.readers.Caffe(path=dbs, num_shards=2, shard_id=1, pad_last_batch=True)
    assert r.get_metadata() == {"epoch_size": 9, "epoch_size_padded": 10, "number_of_shards": 2, "shard_id": 1,
                                "pad_last_batch": True, "stick_to_shard": False}
    assert [labels(lab) for _, lab in r.next_epoch(batch_size=3)] == [[4, 5, 6], [7, 8, 8]]
    assert [labels(lab) for _, lab in r.next_epoch(batch_size=3)] == [[0, 1, 2], [3, 3, 3]]
    r = ndd.readers.Caffe(path=dbs, random_shuffle=True, seed=3, num_shards=2, shard_id=0, stick_to_shard=True,
                          pad_last_batch=True)
    for _ in range(2):
        assert sorted(set(k for _, lab in r.next_epoch(batch_size=5) for k in labels(lab))) == [0, 1, 2, 3]


@pytest.mark.parametrize("cfg", [dict(), dict(num_shards=2, shard_id=1, pad_last_batch=True),
                                 dict(random_shuffle=True, initial_fill=4)])
def test_state_resumes_exactly(dbs, cfg):
    def stream(reader, n):
        for _ in range(n):
            for _, lab in reader.next_epoch(batch_size=2):
                yield labels(lab), reader.get_state()

    full = list(stream(ndd.readers.Caffe(path=dbs, enable_checkpointing=True, **cfg), 4))
    for m in (0, 3, 6):
        fresh = ndd.readers.Caffe(path=dbs, seed=99, **cfg)
        fresh.set_state(full[m][1])
        assert [s for s, _ in stream(fresh, 4)][:len(full) - m - 1] == [s for s, _ in full[m + 1:]]


def test_errors_name_the_record(tmp_path, Datum):
    write_lmdb(tmp_path / "raw", [encoded(Datum, 0),
                                  Datum(channels=2, height=2, width=3, data=b"12345", encoded=False).SerializeToString()])
    r = ndd.readers.Caffe(path=tmp_path / "raw")
    with pytest.raises(ValueError, match=r"raw: record 1 \(key b'00000001'\): the raw image has 5 bytes, but its "
                                         r"height x width x channels is 2 x 3 x 2"):
        list(r.next_epoch(batch_size=2))
    write_lmdb(tmp_path / "junk", [b"\xff\xff\xff"])
    with pytest.raises(ValueError, match=r"junk: record 0 \(key b'00000000'\): not a Caffe Datum"):
        ndd.readers.Caffe(path=tmp_path / "junk")
    write_lmdb(tmp_path / "wire", [b"\x22\x01"])  # field 4 (data) announces a byte that is missing
    with pytest.raises(ValueError, match=r"wire: record 0 .*not a Caffe Datum"):
        ndd.readers.Caffe(path=tmp_path / "wire")
    write_lmdb(tmp_path / "wt", [b"\x20\x01"])  # field 4 (data) as a varint
    with pytest.raises(ValueError, match=r"field 4 \(data\) has wire type varint, expected length-delimited"):
        ndd.readers.Caffe(path=tmp_path / "wt")
    with pytest.raises(ValueError, match="needs image_available or label_available"):
        ndd.readers.Caffe(path=tmp_path / "raw", image_available=False, label_available=False)
    with pytest.raises(ValueError, match="needs `path`"):
        ndd.readers.Caffe()
    with pytest.raises(TypeError, match="label_available"):
        ndd.readers.Caffe(path=tmp_path / "raw", label_available="no")
