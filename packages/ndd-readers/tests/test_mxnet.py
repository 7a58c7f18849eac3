"""ndd.readers.MXNet: RecordIO files written here byte by byte (an independent writer of
MXNet's record framing and image header), with hand-written index files."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import ndd

MAGIC = struct.pack("<I", 0xCED7230A)


def frame(data: bytes, part: int = 0) -> bytes:
    """One RecordIO record: magic, part flag and length, data, zero padding to 4 bytes."""
    return MAGIC + struct.pack("<I", part << 29 | len(data)) + data + b"\0" * (-len(data) % 4)


def image_record(label: float | list[float], image: bytes, id_: int = 0) -> bytes:
    """An image record's payload: MXNet's IRHeader (flag, label, id, id2), labels, image."""
    if isinstance(label, list):
        return struct.pack("<IfQQ", len(label), 0.0, id_, 0) + np.asarray(label, "<f4").tobytes() + image
    return struct.pack("<IfQQ", 0, label, id_, 0) + image


def write_rec(path, payloads: list[bytes], base: int = 0) -> list[int]:
    """Write records (split where a payload holds the magic number, as MXNet does); the
    offsets of the records, counted from ``base``."""
    offsets = []
    with open(path, "wb") as f:
        for p in payloads:
            offsets.append(base + f.tell())
            pieces = p.split(MAGIC)
            if len(pieces) == 1:
                f.write(frame(p))
            else:
                for k, piece in enumerate(pieces):
                    f.write(frame(piece, 1 if k == 0 else 3 if k == len(pieces) - 1 else 2))
    return offsets


def write_idx(path, offsets: list[int], keys: list[int] | None = None) -> str:
    keys = list(range(len(offsets))) if keys is None else keys
    path.write_text("".join(f"{k}\t{o}\n" for k, o in zip(keys, offsets)))
    return str(path)


@pytest.fixture
def recs(tmp_path):
    """Two files with records 0..3 and 4..6 (image bytes [k] * (k + 1), label k) and their
    one index."""
    a, b = tmp_path / "a.rec", tmp_path / "b.rec"
    offsets = write_rec(a, [image_record(float(k), bytes([k]) * (k + 1), k) for k in range(4)])
    offsets += write_rec(b, [image_record(float(k), bytes([k]) * (k + 1), k) for k in range(4, 7)],
                         base=a.stat().st_size)
    return [str(a), str(b)], write_idx(tmp_path / "all.idx", offsets)


def labels(batch) -> list[float]:
    return [float(np.asarray(t)[0]) for t in batch]


def test_outputs(tmp_path):
    payloads = [image_record(1.5, b"IMG0"), image_record([1.0, 2.0, 3.0], b"IMG1x"), image_record(-2.0, b""),
                image_record(3.0, b"AA" + MAGIC + b"BB" + MAGIC + b"C")]  # split in three parts
    offsets = write_rec(tmp_path / "t.rec", payloads)
    idx = write_idx(tmp_path / "t.idx", offsets[::-1], keys=[7, 3, 9, 1])  # any line order; keys unused
    r = ndd.readers.MXNet(path=tmp_path / "t.rec", index_path=idx)
    got = [tuple(np.asarray(t) for t in s) for s, _ in zip(r.next_epoch(), range(4))]
    assert [g[0].tobytes() for g in got] == [b"IMG0", b"IMG1x", b"", b"AA" + MAGIC + b"BB" + MAGIC + b"C"]
    assert [g[1].tolist() for g in got] == [[1.5], [1.0, 2.0, 3.0], [-2.0], [3.0]]
    image, label = next(iter(ndd.readers.MXNet(path=[tmp_path / "t.rec"], index_path=[idx]).next_epoch(batch_size=2)))
    assert image.dtype == ndd.uint8 and image.ndim == 1 and image.layout is None
    assert label.dtype == ndd.float32 and label.shape == [(1,), (3,)] and label.layout is None


def test_index_offsets_run_through_the_files(recs):
    paths, idx = recs
    r = ndd.readers.MXNet(path=paths, index_path=idx)
    assert r.get_metadata()["epoch_size"] == 7
    got = [(np.asarray(i).tobytes(), float(np.asarray(lab)[0])) for (i, lab), _ in zip(r.next_epoch(), range(7))]
    assert got == [(bytes([k]) * (k + 1), float(k)) for k in range(7)]


def test_an_index_of_some_records_reads_those(tmp_path):
    offsets = write_rec(tmp_path / "t.rec", [image_record(float(k), b"x") for k in range(5)])
    idx = write_idx(tmp_path / "t.idx", [offsets[0], offsets[3]])
    r = ndd.readers.MXNet(path=tmp_path / "t.rec", index_path=idx)
    assert [labels(lab) for _, lab in r.next_epoch(batch_size=2)] == [[0.0, 3.0]]


def test_shards_padding_and_file_order_shuffle(recs):
    paths, idx = recs
    # 7 records, 2 shards: shard 0 holds 0..2, shard 1 holds 3..6; padded, each yields 4
    r = ndd.readers.MXNet(path=paths, index_path=idx, num_shards=2, shard_id=1, pad_last_batch=True)
    assert r.get_metadata() == {"epoch_size": 7, "epoch_size_padded": 8, "number_of_shards": 2, "shard_id": 1,
                                "pad_last_batch": True, "stick_to_shard": False}
    assert [labels(lab) for _, lab in r.next_epoch(batch_size=3)] == [[3.0, 4.0, 5.0], [6.0, 6.0, 6.0]]
    assert [labels(lab) for _, lab in r.next_epoch(batch_size=3)] == [[0.0, 1.0, 2.0], [2.0, 2.0, 2.0]]
    r = ndd.readers.MXNet(path=paths, index_path=idx, shuffle_after_epoch=True)
    orders = [[k for _, lab in r.next_epoch(batch_size=7) for k in labels(lab)] for _ in range(8)]
    assert {tuple(o) for o in orders} <= {(0, 1, 2, 3, 4, 5, 6), (4, 5, 6, 0, 1, 2, 3)}  # whole files move
    assert len({tuple(o) for o in orders}) == 2


@pytest.mark.parametrize("cfg", [dict(), dict(num_shards=3, shard_id=1, stick_to_shard=True),
                                 dict(random_shuffle=True, initial_fill=3, pad_last_batch=True, num_shards=2)])
def test_state_resumes_exactly(recs, cfg):
    paths, idx = recs

    def stream(reader, n):
        for _ in range(n):
            for _, lab in reader.next_epoch(batch_size=2):
                yield labels(lab), reader.get_state()

    full = list(stream(ndd.readers.MXNet(path=paths, index_path=idx, enable_checkpointing=True, **cfg), 4))
    assert len(full) >= 4
    for m in range(0, len(full) - 1, 2):
        fresh = ndd.readers.MXNet(path=paths, index_path=idx, seed=11, **cfg)
        fresh.set_state(full[m][1])
        assert [s for s, _ in stream(fresh, 4)][:len(full) - m - 1] == [s for s, _ in full[m + 1:]]


@pytest.mark.parametrize("text, message", [
    ("", r"t.idx: the index lists no records"),
    ("0\n", r"t.idx:1: expected '<key> <offset>' \(decimal integers\), got '0'"),
    ("0\t0\n1\t-4\n", r"t.idx:2: expected '<key> <offset>'"),
    ("0\t0\n1\t36.0\n", r"t.idx:2: expected '<key> <offset>'"),
    ("0\t0\n1\t0\n", r"t.idx:2: offset 0 is listed twice \(also on line 1\)"),
    ("0\t0\n1\t99999\n", r"t.idx: offset 99999 is past the end of the RecordIO files \(\d+ bytes in all\)"),
])
def test_malformed_index_names_the_line(tmp_path, text, message):
    write_rec(tmp_path / "t.rec", [image_record(1.0, b"x"), image_record(2.0, b"y")])
    (tmp_path / "t.idx").write_text(text)
    with pytest.raises(ValueError, match=message):
        ndd.readers.MXNet(path=tmp_path / "t.rec", index_path=tmp_path / "t.idx")


def test_bad_records_name_the_file_and_byte(tmp_path):
    offsets = write_rec(tmp_path / "t.rec", [image_record(1.0, b"abc"), image_record(2.0, b"def")])
    data = (tmp_path / "t.rec").read_bytes()
    idx = write_idx(tmp_path / "t.idx", offsets)
    (tmp_path / "bad.rec").write_bytes(data[:offsets[1]] + b"\xff" + data[offsets[1] + 1:])
    r = ndd.readers.MXNet(path=tmp_path / "bad.rec", index_path=idx)
    with pytest.raises(ValueError, match=r"bad.rec: record at byte 36 \(sample 1\): wrong magic number 0xced723ff"):
        list(r.next_epoch(batch_size=2))
    (tmp_path / "cut.rec").write_bytes(data[:-6])
    with pytest.raises(ValueError, match=r"cut.rec: record at byte 36 \(sample 1\): the record needs 27 bytes, but "
                                         r"the next record or the end of the file comes after 22"):
        list(ndd.readers.MXNet(path=tmp_path / "cut.rec", index_path=idx).next_epoch(batch_size=2))
    write_rec(tmp_path / "short.rec", [b"short"])
    idx0 = write_idx(tmp_path / "0.idx", [0])
    with pytest.raises(ValueError, match=r"short.rec: record at byte 0 \(sample 0\): the record has 5 bytes, less "
                                         r"than the 24-byte image record header"):
        ndd.readers.MXNet(path=tmp_path / "short.rec", index_path=idx0)
    write_rec(tmp_path / "labels.rec", [struct.pack("<IfQQ", 1000, 0.0, 0, 0) + b"abc"])
    with pytest.raises(ValueError, match=r"the header announces 1000 labels \(4000 bytes\), but the record has 3 bytes"):
        ndd.readers.MXNet(path=tmp_path / "labels.rec", index_path=idx0)
    (tmp_path / "part.rec").write_bytes(frame(image_record(1.0, b"x"), part=3))
    with pytest.raises(ValueError, match=r"a record part with flag 3 at byte 0 is out of sequence"):
        ndd.readers.MXNet(path=tmp_path / "part.rec", index_path=idx0)


def test_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="needs `path`"):
        ndd.readers.MXNet(index_path="x.idx")
    with pytest.raises(ValueError, match="needs `index_path`"):
        ndd.readers.MXNet(path="x.rec")
    with pytest.raises(ValueError, match="`index_path` must list one index file"):
        ndd.readers.MXNet(path=["a.rec", "b.rec"], index_path=["a.idx", "b.idx"])
    with pytest.raises(ValueError, match=r"nope.idx: cannot read the index file"):
        write_rec(tmp_path / "t.rec", [image_record(1.0, b"x")])
        ndd.readers.MXNet(path=tmp_path / "t.rec", index_path=tmp_path / "nope.idx")
    with pytest.raises(ValueError, match=r"nope.rec: RecordIO file #1 of `path` cannot be read"):
        ndd.readers.MXNet(path=[tmp_path / "t.rec", tmp_path / "nope.rec"], index_path=write_idx(tmp_path / "i", [0]))
