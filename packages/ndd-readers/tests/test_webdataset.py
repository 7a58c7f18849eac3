"""ndd.readers.Webdataset: tar archives written here with Python's tarfile.

The expected samples are written out by hand from the format's rules (see the module
docstring of ``ndd_readers._webdataset``); the epochs follow the sharding rules of
``ndd_readers._stream``, spelled out here for small datasets.
"""

from __future__ import annotations

import io
import re
import tarfile
import warnings

import numpy as np
import pytest

import ndd
from ndd_readers._webdataset import split_name, write_index

Entry = tuple[str, bytes | None]  # (name, data); None: a directory


def make_tar(path, entries: list[Entry], fmt: int = tarfile.GNU_FORMAT) -> str:
    with tarfile.open(path, "w", format=fmt) as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return str(path)


def numbered(path, first: int, count: int) -> str:
    """An archive of samples ``first .. first+count-1``: ``s<k>.jpg`` holds the byte k,
    ``s<k>.cls`` the int32 k."""
    entries = []
    for k in range(first, first + count):
        entries += [(f"s{k:03d}.jpg", bytes([k])), (f"s{k:03d}.cls", np.int32(k).tobytes())]
    return make_tar(path, entries)


@pytest.fixture
def archives(tmp_path):
    """Three archives with 3, 2 and 4 samples: 0..8 in order."""
    return [numbered(tmp_path / "a.tar", 0, 3), numbered(tmp_path / "b.tar", 3, 2),
            numbered(tmp_path / "c.tar", 5, 4)]


def ids(batch) -> list[int]:
    """Which samples a batch of ``.jpg`` outputs holds."""
    return [int(np.asarray(t)[0]) for t in batch]


def epochs(reader, n: int, batch_size: int) -> list[list[int]]:
    return [[k for jpg, _ in reader.next_epoch(batch_size=batch_size) for k in ids(jpg)] for _ in range(n)]


def contents(reader, n: int | None = None) -> list[list[bytes]]:
    """The first ``n`` samples (default: one epoch) as bytes, one list per sample."""
    n = reader.get_metadata()["epoch_size"] if n is None else n
    out = []
    for sample in reader.next_epoch():
        out.append([np.asarray(t).tobytes() for t in sample])
        if len(out) == n:
            return out
    return out


# -- the format --------------------------------------------------------------------------
def test_split_name_follows_the_last_path_element():
    assert split_name("a.jpg") == ("a", "jpg")
    assert split_name("d/b.x.jpg") == ("d/b", "x.jpg")
    assert split_name("d.e/g.jpg") == ("d.e/g", "jpg")
    assert split_name("m..jpg") == ("m", ".jpg")
    assert split_name("z.") == ("z", "")
    assert split_name("x/.h.jpg") == ("x/", "h.jpg")
    assert split_name(".h.jpg") == ("", "h.jpg")
    assert split_name("x/nodot") == ("x/nodot", "x/nodot")  # no dot: the whole name, twice


def test_samples_group_consecutive_files_and_skip_hidden_and_non_files(tmp_path):
    path = make_tar(tmp_path / "t.tar", [
        ("a.jpg", b"A1"), ("a.cls", b"A2"), ("d/b.x.jpg", b"B1"), ("c.jpg", b"C1"), (".hid.jpg", b"H"),
        ("e.png", b"E1"), ("e.cls", b"E2"), ("a.txt", b"A3"), ("nodot", b"N"), ("dir.d", None),
        ("f.JPG", b"F1"), ("d.e/g.jpg", b"G1"), ("x/.h.jpg", b"XH"), ("x/nodot", b"XN"), ("x/nodot.jpg", b"XJ"),
    ])
    r = ndd.readers.Webdataset(paths=path, ext=["jpg", "cls", "x.jpg;nodot;h.jpg;x/nodot"])
    assert r.get_metadata()["epoch_size"] == 10
    assert contents(r) == [
        [b"A1", b"A2", b""], [b"", b"", b"B1"], [b"C1", b"", b""], [b"", b"E2", b""], [b"", b"", b""],
        [b"", b"", b"N"], [b"", b"", b""], [b"G1", b"", b""], [b"", b"", b"XH"], [b"XJ", b"", b"XN"],
    ]


def test_outputs_are_uint8_vectors_without_layout(archives):
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls", "png"])
    jpg, cls, png = next(iter(r.next_epoch(batch_size=4)))
    for b in (jpg, cls, png):
        assert isinstance(b, ndd.Batch) and b.dtype == ndd.uint8 and b.ndim == 1 and b.layout is None
    assert jpg.shape == [(1,)] * 4 and cls.shape == [(4,)] * 4 and png.shape == [(0,)] * 4
    assert np.asarray(cls.tensors[2]).tobytes() == np.int32(2).tobytes()
    assert np.asarray(jpg.tensors[0]).flags.writeable
    sample = next(iter(ndd.readers.Webdataset(paths=archives, ext="jpg").next_epoch()))
    assert len(sample) == 1 and isinstance(sample[0], ndd.Tensor) and sample[0].shape == (1,)


def test_a_hidden_first_file_or_no_files_make_an_empty_sample(tmp_path):
    """As DALI: the first file of an archive opens a sample even when it is left out, and
    an archive without files holds one sample without files."""
    first = make_tar(tmp_path / "h.tar", [(".h.jpg", b"H"), ("a.jpg", b"A")])
    assert contents(ndd.readers.Webdataset(paths=first, ext="jpg")) == [[b""], [b"A"]]
    last = make_tar(tmp_path / "l.tar", [("a.jpg", b"A"), (".h.jpg", b"H"), ("a.png", b"P")])
    assert contents(ndd.readers.Webdataset(paths=last, ext=["jpg", "png"])) == [[b"A", b"P"]]
    dirs = make_tar(tmp_path / "d.tar", [("d.d", None)])
    assert contents(ndd.readers.Webdataset(paths=[dirs, last], ext="jpg")) == [[b""], [b"A"]]
    assert contents(ndd.readers.Webdataset(paths=[dirs, last], ext="jpg", missing_component_behavior="skip")) \
        == [[b"A"]]


def test_alternatives_take_the_first_file_in_the_archive(tmp_path):
    path = make_tar(tmp_path / "t.tar", [("a.png", b"P"), ("a.jpg", b"J"), ("b.jpg", b"J1"), ("b.jpg", b"J2"),
                                         ("c.JPG", b"U"), ("c.jpg", b"L")])
    with pytest.warns(UserWarning, match=r"t.tar: sample 0 has several components for output 0 \(ext 'jpg;png'\)"):
        r = ndd.readers.Webdataset(paths=path, ext=["jpg;png", "png;jpg"])
    assert contents(r) == [[b"P", b"P"], [b"J1", b"J1"], [b"L", b"L"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = ndd.readers.Webdataset(paths=path, ext="jpg", case_sensitive_extensions=False)
    assert contents(r) == [[b"J"], [b"J1"], [b"U"]]


def test_ext_entries_split_on_semicolons(tmp_path):
    path = make_tar(tmp_path / "t.tar", [("z.", b"Z"), ("q.jpg", b"Q"), ("m..jpg", b"M"), ("v.jpg.gz", b"V")])
    # an inner empty entry matches the empty extension; a trailing ';' adds nothing
    assert contents(ndd.readers.Webdataset(paths=path, ext=[";jpg", "jpg;", "", ".jpg;jpg.gz"])) == [
        [b"Z", b"", b"", b""], [b"Q", b"Q", b"", b""], [b"", b"", b"", b"M"], [b"", b"", b"", b"V"]]
    assert contents(ndd.readers.Webdataset(paths=path, ext=["JPG;"], case_sensitive_extensions=False)) == \
        [[b""], [b"Q"], [b""], [b""]]


@pytest.mark.filterwarnings("ignore:.*several components")
def test_missing_component_behavior(tmp_path):
    path = make_tar(tmp_path / "t.tar", [("a.png", b"P"), ("b.png", b"Q"), ("b.txt", b"T"), ("c.txt", b"U"),
                                         ("c.png", b"V"), ("d.txt", b"W")])
    both = ["png", "txt"]
    for value in ("", "empty", "EMPTY"):
        r = ndd.readers.Webdataset(paths=path, ext=both, missing_component_behavior=value)
        assert contents(r) == [[b"P", b""], [b"Q", b"T"], [b"V", b"U"], [b"", b"W"]]
    r = ndd.readers.Webdataset(paths=path, ext=both, missing_component_behavior="Skip")
    assert r.get_metadata()["epoch_size"] == 2 and contents(r) == [[b"Q", b"T"], [b"V", b"U"]]
    with pytest.raises(ValueError, match=r"t.tar: sample 0 \('a'\) has no component for output 1 \(ext 'txt'\), "
                                         r"and missing_component_behavior is 'error'"):
        ndd.readers.Webdataset(paths=path, ext=both, missing_component_behavior="error")
    # As in DALI, a sample is complete with one file per output: a file that fills two
    # outputs counts once.
    r = ndd.readers.Webdataset(paths=path, ext=["png", "png;txt"], missing_component_behavior="skip")
    assert contents(r) == [[b"V", b"U"]]
    with pytest.raises(ValueError, match="files for only 1 of the 2 outputs"):
        ndd.readers.Webdataset(paths=path, ext=["png", "png;txt"], missing_component_behavior="error")
    with pytest.raises(ValueError, match=r"hold no samples with a component for every output"):
        ndd.readers.Webdataset(paths=path, ext=["png", "png"], missing_component_behavior="skip")


def test_dtypes_view_the_bytes(tmp_path):
    ints = np.arange(6, dtype=np.int16)
    floats = np.linspace(0, 1, 3, dtype=np.float32)
    path = make_tar(tmp_path / "t.tar", [("a.i", ints.tobytes()), ("a.f", floats.tobytes()), ("b.i", b"")])
    for dtypes in ([ndd.int16, ndd.float32], ["int16", "float32"], [np.int16, np.float32],
                   [ndd.types.DALIDataType.INT16, ndd.types.DALIDataType.FLOAT]):
        r = ndd.readers.Webdataset(paths=path, ext=["i", "f"], dtypes=dtypes)
        i, f = next(iter(r.next_epoch(batch_size=2)))
        assert i.dtype == ndd.int16 and f.dtype == ndd.float32
        np.testing.assert_array_equal(np.asarray(i.tensors[0]), ints)
        np.testing.assert_array_equal(np.asarray(f.tensors[0]), floats)
        assert i.tensors[1].shape == (0,) and f.tensors[1].shape == (0,)
    one = ndd.readers.Webdataset(paths=path, ext="i", dtypes=ndd.uint16)
    assert next(iter(one.next_epoch()))[0].dtype == ndd.uint16
    with pytest.raises(ValueError, match=r"component 'a.f' has 12 bytes, not a multiple of the 8-byte dtype "
                                         r"float64 of output 0"):
        ndd.readers.Webdataset(paths=path, ext="f", dtypes=[ndd.float64])
    with pytest.raises(ValueError, match="`dtypes` has 1 entries but `ext` has 2"):
        ndd.readers.Webdataset(paths=path, ext=["i", "f"], dtypes=[ndd.int16])
    with pytest.raises(ValueError, match="entry 0 is bool; the Webdataset reader supports uint8"):
        ndd.readers.Webdataset(paths=path, ext="i", dtypes=[ndd.bool])
    with pytest.raises(TypeError, match="`dtypes`: entry 0"):
        ndd.readers.Webdataset(paths=path, ext="i", dtypes=[object()])


# -- index files -------------------------------------------------------------------------
def test_index_files_read_like_the_archive(tmp_path):
    path = make_tar(tmp_path / "t.tar", [(".h.jpg", b"H"), ("a.jpg", b"A1"), ("a.cls", b"A2"),
                                         ("d/b.x.jpg", b"B1"), ("c.jpg", b"C1")])
    assert write_index(path, tmp_path / "t.idx") == 3  # (the empty sample is not listed)
    text = (tmp_path / "t.idx").read_text().splitlines()
    assert text == ["v1.2 3", "jpg 1536 2 a.jpg cls 2560 2 a.cls", "x.jpg 3584 2 d/b.x.jpg", "jpg 4608 2 c.jpg"]
    r = ndd.readers.Webdataset(paths=[path], index_paths=[str(tmp_path / "t.idx")], ext=["jpg", "cls"])
    assert contents(r) == [[b"A1", b"A2"], [b"", b""], [b"C1", b""]]
    # v1.1: no names; the header's count limits the samples read
    (tmp_path / "old.idx").write_text("v1.1 2\njpg 4608 2\ncls 2560 2 jpg 1536 2\nthis line is not read\n")
    r = ndd.readers.Webdataset(paths=path, index_paths=tmp_path / "old.idx", ext=["jpg", "cls"])
    assert contents(r) == [[b"C1", b""], [b"A1", b"A2"]]


@pytest.mark.parametrize("text, message", [
    ("", r"t.idx:1: expected the index version \(v1.1 or v1.2\), found nothing"),
    ("v9 1\njpg 1536 2 a.jpg\n", r"t.idx:1: expected the index version \(v1.1 or v1.2\), found 'v9'"),
    ("v1.2\njpg 1536 2 a.jpg\n", r"t.idx:1: expected 'v1.2 <number of samples>'"),
    ("v1.2 2\njpg 1536 2 a.jpg\n", r"t.idx:3: no components for sample 1 \(the header announces 2 samples\)"),
    ("v1.2 1\njpg 1536 2\n", r"t.idx:2: every component must be '<ext> <offset> <size> <name>'"),
    ("v1.1 1\njpg 1536 x\n", r"t.idx:2: offset and size must be decimal integers"),
    ("v1.1 1\njpg -512 2\n", r"t.idx:2: offset and size must be decimal integers"),
    ("v1.1 1\njpg 1537 2\n", r"t.idx:2: offset 1537 is not a multiple of the tar block size \(512\)"),
    ("v1.2 1\njpg 1536 99999 a.jpg\n", r"t.idx:2: component 'a.jpg' \(99999 bytes at offset 1536\) runs past the "
                                        r"end of the \d+-byte archive .*t.tar"),
])
def test_malformed_index_names_the_file_and_line(tmp_path, text, message):
    path = make_tar(tmp_path / "t.tar", [("a.jpg", b"A1")])
    (tmp_path / "t.idx").write_text(text)
    with pytest.raises(ValueError, match=message):
        ndd.readers.Webdataset(paths=path, index_paths=tmp_path / "t.idx", ext="jpg")


def test_index_errors(tmp_path):
    path = make_tar(tmp_path / "t.tar", [("a.jpg", b"A1"), ("b.", b"B")])
    with pytest.raises(ValueError, match=r"nope.idx: cannot read the index file: No such file"):
        ndd.readers.Webdataset(paths=path, index_paths=tmp_path / "nope.idx", ext="jpg")
    with pytest.raises(ValueError, match="`index_paths` has 2 entries but `paths` has 1"):
        ndd.readers.Webdataset(paths=path, index_paths=["x.idx", "y.idx"], ext="jpg")
    with pytest.raises(ValueError, match=r"member 'b.': an index file cannot list a member with an empty extension"):
        write_index(path, tmp_path / "t.idx")


# -- bad archives ------------------------------------------------------------------------
def test_truncated_and_corrupt_archives_name_the_file_and_member(tmp_path):
    good = numbered(tmp_path / "good.tar", 0, 2)  # headers at 0, 1024, 2048, 3072; data one block after
    data = open(good, "rb").read()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[:1024 + 512 + 1])  # in the middle of s000.cls's data
    with pytest.raises(ValueError, match=r"cut.tar: member 's000.cls' \(4 bytes at offset 1536\) runs past the end "
                                         r"of the 1537-byte archive: the archive is truncated"):
        ndd.readers.Webdataset(paths=[good, str(cut)], ext="jpg")
    cut.write_bytes(data[:2048 + 100])  # in the middle of a header
    with pytest.raises(ValueError, match=r"cut.tar: corrupt or truncated tar header at offset 2048 \(after member "
                                         r"'s000.cls'\)"):
        ndd.readers.Webdataset(paths=cut, ext="jpg")
    cut.write_bytes(data[:2048])  # at a header boundary, without the closing blocks: as DALI, the files so far
    assert contents(ndd.readers.Webdataset(paths=cut, ext="jpg")) == [[b"\x00"]]
    bad = tmp_path / "bad.tar"
    bad.write_bytes(data[:2048] + b"garbage!" * 64 + data[2048:])
    with pytest.raises(ValueError, match=r"bad.tar: corrupt or truncated tar header at offset 2048"):
        ndd.readers.Webdataset(paths=bad, ext="jpg")
    bad.write_bytes(b"hello world" * 100)
    with pytest.raises(ValueError, match=r"bad.tar: not a tar archive"):
        ndd.readers.Webdataset(paths=bad, ext="jpg")
    bad.write_bytes(b"")
    with pytest.raises(ValueError, match=r"bad.tar: not a tar archive"):
        ndd.readers.Webdataset(paths=bad, ext="jpg")
    with pytest.raises(ValueError, match=r"nope.tar: archive #1 of `paths` cannot be read: No such file"):
        ndd.readers.Webdataset(paths=[good, str(tmp_path / "nope.tar")], ext="jpg")


def test_an_archive_truncated_after_opening_names_the_sample(tmp_path):
    path = numbered(tmp_path / "t.tar", 0, 3)
    r = ndd.readers.Webdataset(paths=path, ext=["jpg", "cls"])
    data = open(path, "rb").read()
    open(path, "wb").write(data[:4096])
    with pytest.raises(ValueError, match=r"t.tar: sample 2 \('s002'\) \(sample 2 of the dataset\): the archive ends"):
        list(r.next_epoch(batch_size=3))


def test_long_names_of_gnu_and_pax_archives(tmp_path):
    long = "d" * 120 + "/" + "e" * 110
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        path = make_tar(tmp_path / f"{fmt}.tar", [("a.jpg", b"A"), (long + ".jpg", b"L"), (long + ".cls", b"C")],
                        fmt=fmt)
        assert contents(ndd.readers.Webdataset(paths=path, ext=["jpg", "cls"])) == [[b"A", b""], [b"L", b"C"]]


@pytest.mark.parametrize("kw, error, message", [
    (dict(ext="jpg"), ValueError, "needs `paths`"),
    (dict(paths="x.tar"), ValueError, "needs `ext`"),
    (dict(paths="x.tar", ext=[]), TypeError, "`ext` must be a string or a non-empty list"),
    (dict(paths="x.tar", ext=["jpg", 3]), TypeError, "`ext`: entry 1 must be a string"),
    (dict(paths="x.tar", ext="jpg", missing_component_behavior="bogus"), ValueError,
     "missing_component_behavior must be 'empty', 'skip' or 'error', got 'bogus'"),
    (dict(paths="x.tar", ext="jpg", case_sensitive_extensions="no"), TypeError, "case_sensitive_extensions"),
    (dict(paths=[], ext="jpg"), ValueError, "`paths` must be a path or a non-empty list"),
])
def test_argument_errors(kw, error, message):
    with pytest.raises(error, match=re.escape(message)):
        ndd.readers.Webdataset(lazy_init=True, **kw)


def test_lazy_init_defers_reading(tmp_path):
    r = ndd.readers.Webdataset(paths=tmp_path / "later.tar", ext="jpg", lazy_init=True)
    numbered(tmp_path / "later.tar", 0, 2)
    assert r.get_metadata()["epoch_size"] == 2


# -- epochs, shards, shuffling, state ----------------------------------------------------
def test_epochs_continue_the_stream_without_padding(archives):
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"])
    assert epochs(r, 3, 4) == [[0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2], [3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5],
                               [6, 7, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8]]
    _, cls = next(iter(ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], dtypes=["uint8", "int32"])
                       .next_epoch(batch_size=9)))
    assert [int(np.asarray(t)[0]) for t in cls] == list(range(9))


def test_shards_and_padding(archives):
    # 9 samples, 2 shards: shard 0 holds 0..3, shard 1 holds 4..8; padded, each shard yields 5
    meta = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], num_shards=2, pad_last_batch=True,
                                  shard_id=1).get_metadata()
    assert meta == {"epoch_size": 9, "epoch_size_padded": 10, "number_of_shards": 2, "shard_id": 1,
                    "pad_last_batch": True, "stick_to_shard": False}
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], num_shards=2, shard_id=1, pad_last_batch=True)
    assert epochs(r, 2, 2) == [[4, 5, 6, 7, 8, 8], [0, 1, 2, 3, 3, 3]]  # (5 a shard: 10 padded)
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], num_shards=2, shard_id=1, pad_last_batch=True,
                               stick_to_shard=True)
    assert epochs(r, 2, 2) == [[4, 5, 6, 7, 8, 8]] * 2
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], num_shards=2, shard_id=0)
    assert epochs(r, 2, 3) == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 0, 1, 2]]
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], num_shards=3, shard_id=2, stick_to_shard=True)
    assert epochs(r, 2, 2) == [[6, 7, 8, 6], [7, 8, 6, 7]]


def test_skipped_samples_do_not_count(tmp_path):
    a = make_tar(tmp_path / "a.tar", [("s0.jpg", b"\x00"), ("s0.cls", b"0"), ("s1.jpg", b"\x01"),
                                      ("s2.jpg", b"\x02"), ("s2.cls", b"2")])
    r = ndd.readers.Webdataset(paths=a, ext=["jpg", "cls"], missing_component_behavior="skip", num_shards=2,
                               shard_id=1)
    assert r.get_metadata()["epoch_size"] == 2 and epochs(r, 2, 1) == [[2], [0]]


def test_shuffle_after_epoch_moves_whole_archives(archives):
    blocks = {0: [0, 1, 2], 3: [3, 4], 5: [5, 6, 7, 8]}
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], shuffle_after_epoch=True)
    seen = epochs(r, 6, 9)
    for e in seen:
        assert sorted(e) == list(range(9))
        k = 0
        while k < 9:  # each archive's samples stay together and in order
            assert e[k:k + len(blocks[e[k]])] == blocks[e[k]]
            k += len(blocks[e[k]])
    assert len({tuple(e) for e in seen}) > 1
    again = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], shuffle_after_epoch=True)
    assert epochs(again, 6, 9) == seen
    other = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], shuffle_after_epoch=True,
                                   shuffle_after_epoch_seed=7)
    assert epochs(other, 6, 9) != seen
    # the shards split every epoch's order
    halves = [epochs(ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], shuffle_after_epoch=True,
                                            num_shards=2, shard_id=s, pad_last_batch=True), 4, 1) for s in (0, 1)]
    for e in range(4):
        assert sorted(set(halves[0][e]) | set(halves[1][e])) == list(range(9))
        assert not set(halves[0][e]) & set(halves[1][e])
    # with random_shuffle too (as DALI allows for this reader): each epoch is still a permutation
    mixed = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], shuffle_after_epoch=True,
                                   random_shuffle=True, seed=3)
    assert all(sorted(e) == list(range(9)) for e in epochs(mixed, 3, 9))
    with pytest.raises(ValueError, match="shuffle_after_epoch and stick_to_shard"):
        ndd.readers.Webdataset(paths=archives, ext="jpg", shuffle_after_epoch=True, stick_to_shard=True)


def test_random_shuffle_permutes_each_shard(archives):
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], random_shuffle=True, seed=5, num_shards=2,
                               shard_id=1, pad_last_batch=True)
    got = epochs(r, 4, 5)
    for e in got[::2]:  # shard 1: samples 4..8
        assert sorted(e) == [4, 5, 6, 7, 8]
    for e in got[1::2]:  # shard 0: samples 0..3, padded with the last one read
        assert sorted(set(e)) == [0, 1, 2, 3] and len(e) == 5 and e[4] == e[3]
    assert len({tuple(e) for e in got[::2]}) == 2  # a fresh order every time a shard comes round
    same = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], random_shuffle=True, seed=5, num_shards=2,
                                  shard_id=1, pad_last_batch=True)
    assert epochs(same, 4, 5) == got


STATE_CONFIGS = [
    dict(),
    dict(pad_last_batch=True, num_shards=2, shard_id=1),
    dict(num_shards=3, shard_id=2, stick_to_shard=True),
    dict(random_shuffle=True, initial_fill=3),
    dict(shuffle_after_epoch=True, num_shards=2),
    dict(shuffle_after_epoch=True, random_shuffle=True, pad_last_batch=True),
]


@pytest.mark.parametrize("cfg", STATE_CONFIGS)
def test_state_resumes_exactly(archives, cfg):
    def stream(reader, n):
        for _ in range(n):
            for jpg, _ in reader.next_epoch(batch_size=2):
                yield ids(jpg), reader.get_state()

    full = list(stream(ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], enable_checkpointing=True,
                                              **cfg), 5))
    for m in (0, 2, 5, 9):
        fresh = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], seed=1234, **cfg)
        fresh.set_state(full[m][1])
        got = [s for s, _ in stream(fresh, 5)][:len(full) - m - 1]
        assert got == [s for s, _ in full[m + 1:]]


def test_a_state_of_other_archives_is_refused(archives, tmp_path):
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], enable_checkpointing=True)
    next(iter(r.next_epoch(batch_size=2)))
    state = r.get_state()
    other = [numbered(tmp_path / "o1.tar", 10, 5), numbered(tmp_path / "o2.tar", 20, 4)]
    with pytest.raises(ValueError, match="other data of the same size"):
        ndd.readers.Webdataset(paths=other, ext=["jpg", "cls"]).set_state(state)
    # the same archives read for other outputs take it
    ndd.readers.Webdataset(paths=archives, ext=["cls"]).set_state(state)
    with pytest.raises(ValueError, match="belongs to a Webdataset reader"):
        ndd.readers.File(files=archives).set_state(state)


def test_direct_calls_and_dense_outputs(archives):
    r = ndd.readers.Webdataset(paths=archives, ext=["jpg", "cls"], dtypes=["uint8", "int32"])
    jpg, cls = r(batch_size=4)
    assert ids(jpg) == [0, 1, 2, 3] and cls.shape == [(1,)] * 4
    jpg, _ = r(batch_size=4)
    assert ids(jpg) == [4, 5, 6, 7]
