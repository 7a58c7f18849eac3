"""The reader classes: outputs, epochs, modes, read-ahead, state, errors."""

from __future__ import annotations

import gc
import json
import os
import re
import threading
import time

import numpy as np
import pytest

import ndd
from ndd_readers import _caffe2 as c2
from ndd_readers import _tfrecord as tfr

LABELS = [0] * 5 + [1] * 5


def payload(i: int) -> bytes:
    """The bytes of sample ``i``: distinct lengths and contents."""
    return bytes([i]) * (i + 3)


@pytest.fixture
def file_tree(tmp_path):
    """10 files in two class directories: c0 holds samples 0-4, c1 samples 5-9."""
    root = tmp_path / "tree"
    for i, lab in enumerate(LABELS):
        d = root / f"c{lab}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"img{i:02d}.jpg").write_bytes(payload(i))
    return root


@pytest.fixture
def caffe2_db(tmp_path):
    path = tmp_path / "db"
    c2.write_caffe2_lmdb(path, [(payload(i), lab) for i, lab in enumerate(LABELS)])
    return path


@pytest.fixture
def tfrecord_file(tmp_path):
    path, index = tmp_path / "data.tfrecord", tmp_path / "data.idx"
    examples = [tfr.encode_example({"image": payload(i), "label": [lab], "box": np.arange(4, dtype=np.float32) + i})
                for i, lab in enumerate(LABELS)]
    tfr.write_tfrecord(path, examples)
    assert tfr.main([str(path), str(index)]) == 0
    return path, index


def as_list(x) -> list:
    """A Batch or Tensor as nested Python lists."""
    if hasattr(x, "tensors"):
        return [np.asarray(t).tolist() for t in x]
    return np.asarray(x).tolist()


def first_bytes(batch) -> list[int]:
    """Which sample each encoded payload of a batch is (its first byte)."""
    return [int(np.asarray(t)[0]) for t in batch]


def wait_threads(baseline: int, timeout: float = 5.0) -> int:
    end = time.monotonic() + timeout
    while threading.active_count() > baseline and time.monotonic() < end:
        time.sleep(0.02)
    return threading.active_count()


# -- registration -------------------------------------------------------------------------
def test_readers_are_published():
    assert {"File", "Caffe2", "TFRecord", "COCO", "Numpy"} <= set(dir(ndd.readers))
    assert issubclass(ndd.readers.Caffe2, ndd.Reader)


def test_lowercase_name_error():
    with pytest.raises(AttributeError, match="PascalCase: use ndd.readers.File"):
        ndd.readers.file  # noqa: B018


# -- File -----------------------------------------------------------------------------------
def test_file_root_outputs_and_observed_epochs(file_tree):
    r = ndd.readers.File(file_root=file_tree)
    epochs = [[(first_bytes(x), as_list(lab)) for x, lab in r.next_epoch(batch_size=4)] for _ in range(2)]
    assert [[sum(lab, []) for _, lab in e] for e in epochs] == [
        [[0, 0, 0, 0], [0, 1, 1, 1], [1, 1, 0, 0]],
        [[0, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0]],
    ]
    assert [s for e in epochs for s, _ in e][:3] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    x, lab = next(iter(r.next_epoch(batch_size=4)))
    assert x.dtype == ndd.uint8 and x.layout is None and x.ndim == 1 and x.device.device_type == "cpu"
    assert lab.dtype == ndd.int32 and lab.shape == [(1,)] * 4
    arr = np.asarray(x.tensors[0])
    assert arr.flags.writeable and arr.tobytes() == payload(np.asarray(x.tensors[0])[0])


def test_file_padded_epochs(file_tree):
    r = ndd.readers.File(file_root=file_tree, pad_last_batch=True)
    for _ in range(2):
        assert [sum(as_list(lab), []) for _, lab in r.next_epoch(batch_size=4)] == \
            [[0, 0, 0, 0], [0, 1, 1, 1], [1, 1, 1, 1]]


def test_file_sample_mode_and_shards(file_tree):
    r = ndd.readers.File(file_root=file_tree, num_shards=3, shard_id=1, stick_to_shard=True)
    got = [[int(np.asarray(x)[0]) for x, _ in r.next_epoch()] for _ in range(2)]
    assert got == [[3, 4, 5], [3, 4, 5]]
    x, lab = next(iter(r.next_epoch()))
    assert isinstance(x, ndd.Tensor) and lab.shape == (1,) and lab.dtype == ndd.int32


def test_file_filters_and_dirs(tmp_path):
    for d, names in {"b": ["x.JPG", "y.txt", "z.png"], "a": ["w.jpeg"], "skip": ["q.jpg"]}.items():
        (tmp_path / d).mkdir()
        for n in names:
            (tmp_path / d / n).write_bytes(n.encode())
    (tmp_path / "top.jpg").write_bytes(b"top")

    def read(**kw):
        r = ndd.readers.File(file_root=tmp_path, **kw)
        return [(bytes(np.asarray(x)).decode(), int(np.asarray(lab)[0])) for x, lab in r.next_epoch()]

    assert read() == [("w.jpeg", 0), ("x.JPG", 1), ("z.png", 1), ("q.jpg", 2)]
    assert read(case_sensitive_filter=True) == [("w.jpeg", 0), ("z.png", 1), ("q.jpg", 2)]
    assert read(file_filters=["*.txt"]) == [("y.txt", 1)]
    assert read(dir_filters=["[ab]"]) == [("w.jpeg", 0), ("x.JPG", 1), ("z.png", 1)]


def test_file_list_and_files(tmp_path):
    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "a b.jpg").write_bytes(b"ab")
    (tmp_path / "c.jpg").write_bytes(b"c")
    lst = tmp_path / "list.txt"
    lst.write_text("sub dir/a b.jpg 7\n\nc.jpg   3\n")
    r = ndd.readers.File(file_list=lst)
    assert [(bytes(np.asarray(x)), int(np.asarray(lab)[0])) for x, lab in r.next_epoch()] == \
        [(b"ab", 7), (b"c", 3)]
    r = ndd.readers.File(files=[tmp_path / "c.jpg", tmp_path / "sub dir" / "a b.jpg"])
    assert [int(np.asarray(lab)[0]) for _, lab in r.next_epoch()] == [0, 1]
    r = ndd.readers.File(file_root=tmp_path, files=["c.jpg"], labels=[42])
    assert [int(np.asarray(lab)[0]) for _, lab in r.next_epoch()] == [42]


def test_file_shuffled_shards_are_dalis(tmp_path):
    """random_shuffle=True with 3 shards, read in order (initial_fill=1): each shard's epochs
    are the blocks DALI 2.4 gives for the same list (observed: its File reader shuffles the
    list once with a fixed seed, the same on every shard, then cuts it into shards)."""
    f = tmp_path / "x.bin"
    f.write_bytes(b"x")
    observed = {0: [[10, 0, 2, 11], [7, 1, 6, 5], [3, 9, 8, 4, 12]],
                1: [[7, 1, 6, 5], [3, 9, 8, 4, 12], [10, 0, 2, 11]],
                2: [[3, 9, 8, 4, 12], [10, 0, 2, 11], [7, 1, 6, 5]]}
    for shard, epochs in observed.items():
        r = ndd.readers.File(files=[f] * 13, labels=list(range(13)), random_shuffle=True,
                             initial_fill=1, num_shards=3, shard_id=shard)
        got = [[int(np.asarray(lab)[0]) for _, lab in r.next_epoch()] for _ in range(3)]
        assert got == epochs
    # with the default shuffle buffer, every epoch still reads exactly its shard's block
    for e in range(3):
        seen = []
        for shard in range(3):
            r = ndd.readers.File(files=[f] * 13, labels=list(range(13)), random_shuffle=True,
                                 num_shards=3, shard_id=shard, seed=5)
            epochs = [[int(np.asarray(lab)[0]) for _, lab in r.next_epoch()] for _ in range(e + 1)]
            seen += epochs[e]
        assert sorted(seen) == list(range(13))


@pytest.mark.parametrize("kw,match", [
    (dict(), "needs `file_root`, `file_list` or `files`"),
    (dict(file_root="/nonexistent/x"), "file_root '/nonexistent/x' is not a directory"),
    (dict(files=["/nonexistent/a.jpg"]), "/nonexistent/a.jpg: file #0 of `files`"),
    (dict(files=["a"], labels=[1, 2]), "`labels` has 2 entries"),
    (dict(file_list="/nonexistent/list.txt"), "file_list '/nonexistent/list.txt' cannot be read"),
    (dict(num_shards=0, files=["a"]), "num_shards"),
    (dict(num_shards=2, shard_id=2, files=["a"]), "shard_id"),
    (dict(prefetch_queue_depth=0, files=["a"]), "prefetch_queue_depth"),
])
def test_file_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        ndd.readers.File(**kw)


def test_file_list_label_outside_int32_names_the_line(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x")
    (tmp_path / "list.txt").write_text("a.bin 1\na.bin 3000000000\n")
    with pytest.raises(ValueError, match=r"list.txt:2: label 3000000000 does not fit in int32"):
        ndd.readers.File(file_list=tmp_path / "list.txt")


def test_file_labels_must_be_integers(tmp_path):
    files = [tmp_path / f"{i}.jpg" for i in range(3)]
    for i, f in enumerate(files):
        f.write_bytes(payload(i))
    for labels, match in [(["a", 1, 2], "entry 0 is 'a'"), ([0, 1.7, 2], "entry 1 is 1.7"),
                          ([0, 1, None], "entry 2 is None"), ([0, 1, 2**31], "entry 2 is 2147483648")]:
        with pytest.raises(ValueError, match=r"`labels` must be integers \(int32\): " + match):
            ndd.readers.File(files=files, labels=labels)
    with pytest.raises(TypeError, match="`labels` must be a list of integers, got str"):
        ndd.readers.File(files=files, labels="012")
    r = ndd.readers.File(files=files, labels=[np.int64(5), 6.0, -1])
    assert [int(np.asarray(lab)[0]) for _, lab in r.next_epoch()] == [5, 6, -1]


def test_list_of_path_arguments_take_one_path_or_a_list(tmp_path):
    # As in DALI, a single path is a list of one; anything else that is not a path is refused.
    (tmp_path / "one.jpg").write_bytes(b"xyz")
    r = ndd.readers.File(files=str(tmp_path / "one.jpg"), labels=4)
    assert [(bytes(np.asarray(x)), int(np.asarray(lab)[0])) for x, lab in r.next_epoch()] == [(b"xyz", 4)]
    np.save(tmp_path / "a.npy", np.arange(3))
    r = ndd.readers.Numpy(files=tmp_path / "a.npy")
    assert [np.asarray(o[0]).tolist() for o in r.next_epoch()] == [[0, 1, 2]]
    with pytest.raises(TypeError, match=r"`files`: entry 1 must be a path \(str or os.PathLike\), got int 5"):
        ndd.readers.File(files=[tmp_path / "one.jpg", 5])
    with pytest.raises(TypeError, match="`files` must be a path or a list of paths, got int"):
        ndd.readers.Numpy(files=3)
    with pytest.raises(ValueError, match="`files` must be a path or a non-empty list of paths"):
        ndd.readers.File(files=[])
    # any iterable of paths and of labels: a generator (Path.glob), a dict's keys or values
    (tmp_path / "two.jpg").write_bytes(b"ab")
    r = ndd.readers.File(files=(p for p in sorted(tmp_path.glob("*.jpg"))), labels={0: 7, 1: 8}.values())
    assert [(bytes(np.asarray(x)), int(np.asarray(lab)[0])) for x, lab in r.next_epoch()] == [(b"xyz", 7), (b"ab", 8)]
    with pytest.raises(TypeError, match="`files` must be a path or a list of paths, got dict"):
        ndd.readers.File(files={"a.jpg": 1})


def test_file_more_shards_than_samples_and_bad_list(file_tree, tmp_path):
    with pytest.raises(ValueError, match="num_shards=11 is larger than the dataset"):
        ndd.readers.File(file_root=file_tree, num_shards=11)
    bad = tmp_path / "bad.txt"
    bad.write_text("a.jpg 1\nb.jpg\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected '<name> <label>'"):
        ndd.readers.File(file_list=bad)
    empty = tmp_path / "empty"
    (empty / "c").mkdir(parents=True)
    with pytest.raises(ValueError, match="holds no files"):
        ndd.readers.File(file_root=empty)


def test_file_deleted_after_construction_names_file(file_tree):
    r = ndd.readers.File(file_root=file_tree)
    (file_tree / "c0" / "img02.jpg").unlink()
    it = r.next_epoch(batch_size=2)
    next(it)
    with pytest.raises(ValueError, match="img02.jpg: cannot read sample 2"):
        next(it)


def test_lazy_init_defers_errors(tmp_path):
    r = ndd.readers.File(file_root=tmp_path / "missing", lazy_init=True)
    with pytest.raises(ValueError, match="is not a directory"):
        r.get_metadata()


# -- Reader protocol -------------------------------------------------------------------------
def test_get_metadata_any_time_does_not_lock(file_tree):
    r = ndd.readers.File(file_root=file_tree, num_shards=2, shard_id=1, pad_last_batch=True)
    md = r.get_metadata()
    assert md == {"epoch_size": 10, "epoch_size_padded": 10, "number_of_shards": 2, "shard_id": 1,
                  "pad_last_batch": True, "stick_to_shard": False}
    assert len(list(r.next_epoch(batch_size=4))) == 2
    assert r.get_metadata() == md


def test_mixing_modes_and_batch_size(file_tree):
    r = ndd.readers.File(file_root=file_tree)
    list(r.next_epoch(batch_size=4))
    with pytest.raises(ValueError, match="`batch_size` 3 is different than the `max_batch_size` 4"):
        r.next_epoch(batch_size=3)
    with pytest.raises(RuntimeError, match="Cannot mix `samples`, `batches`"):
        r.next_epoch()
    with pytest.raises(RuntimeError, match="Cannot mix"):
        r(batch_size=4)
    r2 = ndd.readers.File(file_root=file_tree)
    list(r2.next_epoch())
    with pytest.raises(RuntimeError, match="Cannot mix"):
        r2.next_epoch(batch_size=2)


def test_direct_calls_continue_the_stream(file_tree):
    r = ndd.readers.File(file_root=file_tree, max_batch_size=4)
    got = [first_bytes(r()[0]) for _ in range(4)]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]


def test_break_continues_the_same_epoch(file_tree):
    r = ndd.readers.File(file_root=file_tree, prefetch_queue_depth=2)
    seen = []
    for x, _ in r.next_epoch(batch_size=2):
        seen.append(first_bytes(x))
        if len(seen) == 2:
            break
    time.sleep(0.05)  # let the worker read ahead
    rest = [first_bytes(x) for x, _ in r.next_epoch(batch_size=2)]
    assert seen + rest == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert [first_bytes(x) for x, _ in r.next_epoch(batch_size=2)][0] == [0, 1]


def test_no_thread_leaks(file_tree):
    gc.collect()
    baseline = wait_threads(threading.active_count())
    r = ndd.readers.File(file_root=file_tree, prefetch_queue_depth=3)
    for _ in r.next_epoch(batch_size=1):
        break
    assert wait_threads(baseline) == baseline  # the abandoned worker exits on its own
    list(r.next_epoch(batch_size=1))
    it = iter(r.next_epoch(batch_size=1))
    next(it)
    del r, it
    gc.collect()
    assert wait_threads(baseline) == baseline


def test_read_ahead_threads_are_stopped_at_exit(file_tree):
    """At interpreter exit every live read-ahead is closed (a thread still reading while the
    interpreter shuts down, e.g. a torchrun rank tearing down its process group, could
    abort the process), also one left mid-epoch; the epoch then goes on where it stood."""
    from ndd_readers import _prefetch

    r = ndd.readers.File(file_root=file_tree, prefetch_queue_depth=3)
    it = iter(r.next_epoch(batch_size=1))
    next(it)
    assert any(t.name == "ndd-reader-prefetch" for t in threading.enumerate())
    _prefetch._close_live_prefetchers()  # what atexit runs
    assert not [t for t in threading.enumerate() if t.name == "ndd-reader-prefetch"]
    del it
    assert [first_bytes(x) for x, _ in r.next_epoch(batch_size=1)] == [[i] for i in range(1, 10)]


def test_slow_consumer_keeps_reading(file_tree):
    r = ndd.readers.File(file_root=file_tree)
    r_fetch_idle = 0.5
    got = []
    for i, (x, _) in enumerate(r.next_epoch(batch_size=5)):
        got.append(first_bytes(x))
        if i == 0:
            time.sleep(r_fetch_idle + 0.2)  # the worker times out and is restarted
    assert got == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


# -- state -------------------------------------------------------------------------------
STATE_CONFIGS = [
    dict(),
    dict(pad_last_batch=True),
    dict(num_shards=3, shard_id=2),
    dict(num_shards=2, shard_id=1, stick_to_shard=True, pad_last_batch=True),
    dict(random_shuffle=True, initial_fill=3),
    dict(random_shuffle=True, num_shards=3, shard_id=1, pad_last_batch=True),
    dict(shuffle_after_epoch=True, num_shards=2),
]


@pytest.mark.parametrize("cfg", STATE_CONFIGS)
def test_state_resumes_exactly(file_tree, cfg):
    def stream(reader, epochs):
        out = []
        for _ in range(epochs):
            for x, _ in reader.next_epoch(batch_size=3):
                out.append(first_bytes(x))
                yield out[-1], reader.get_state()

    full = list(stream(ndd.readers.File(file_root=file_tree, enable_checkpointing=True, **cfg), 8))
    assert len(full) >= 9
    for m in (0, 1, 2, 4, 7):
        state = str(full[m][1])
        assert state.startswith("ndd-reader-v1:")
        fresh = ndd.readers.File(file_root=file_tree, seed=1234, **cfg)
        fresh.set_state(state)
        got = [s for s, _ in stream(fresh, 8)][:len(full) - m - 1]
        assert got == [s for s, _ in full[m + 1:]]
        # also on a reader that already iterated (beyond DALI)
        used = ndd.readers.File(file_root=file_tree, enable_checkpointing=True, seed=77, **cfg)
        next(iter(used.next_epoch(batch_size=3)))
        used.set_state(full[m][1])
        got = [s for s, _ in stream(used, 8)][:len(full) - m - 1]
        assert got == [s for s, _ in full[m + 1:]]


def test_state_errors(file_tree, caffe2_db):
    r = ndd.readers.File(file_root=file_tree)
    next(iter(r.next_epoch(batch_size=2)))
    with pytest.raises(RuntimeError, match="checkpointing disabled"):
        r.get_state()
    r = ndd.readers.File(file_root=file_tree, enable_checkpointing=True)
    with pytest.raises(RuntimeError, match="before its first iteration"):
        r.get_state()
    next(iter(r.next_epoch(batch_size=2)))
    state = r.get_state()
    with pytest.raises(ValueError, match="belongs to a File reader"):
        ndd.readers.Caffe2(path=caffe2_db).set_state(state)
    with pytest.raises(ValueError, match="num_shards=1"):
        ndd.readers.File(file_root=file_tree, num_shards=2).set_state(state)
    with pytest.raises(TypeError):
        r.set_state(12)


@pytest.mark.parametrize("field, value, message", [
    ("pos", 1000, "position 1000 in epoch 0, whose shard has"),  # past the shard: would skip an epoch
    ("pos", "x", "field 'pos' must be an integer of at least 0, got 'x'"),
    ("pos", 2.0, "field 'pos' must be an integer of at least 0, got 2.0"),
    ("pos", True, "field 'pos' must be an integer of at least 0, got True"),
    ("epoch", -1, "field 'epoch' must be an integer of at least 0, got -1"),
    ("initial_fill", 0, "field 'initial_fill' must be an integer of at least 1, got 0"),
    ("seed", None, "field 'seed' must be an integer, got None"),
    ("offset", None, "field 'offset' must be an integer of at least 0, got None"),
    ("config", "x", "Corrupted reader state: missing or bad field"),
])
def test_a_tampered_state_is_refused_naming_its_field(file_tree, field, value, message):
    """A state whose fields a reader could not have written (edited, or from a bug) is
    refused with the field named, never adopted as a position elsewhere in the data."""
    r = ndd.readers.File(file_root=file_tree, enable_checkpointing=True)
    it = r.next_epoch(batch_size=2)
    next(it)
    saved = r.get_state().to_dict()
    saved["state"][field] = value
    fresh = ndd.readers.File(file_root=file_tree)
    with pytest.raises(ValueError, match=re.escape(message)):
        fresh.set_state(ndd.ReaderState.from_dict(saved["type"], saved["state"]))
    saved["state"][field] = r.get_state().to_dict()["state"][field]  # untouched: resumes
    fresh.set_state(ndd.ReaderState.from_dict(saved["type"], saved["state"]))
    assert [np.asarray(b[1].tensors[0]).tolist() for b in fresh.next_epoch(batch_size=2)] == \
        [np.asarray(b[1].tensors[0]).tolist() for b in it]


def test_a_state_of_other_data_of_the_same_size_is_refused(file_tree, tmp_path):
    """The state keeps a hash of a few samples: a reader over other files (as many) refuses
    it; the same files moved elsewhere, or relabelled, take it; an older state without the
    hash is taken as before."""
    import shutil

    r = ndd.readers.File(file_root=file_tree, enable_checkpointing=True)
    it = r.next_epoch(batch_size=2)
    next(it)
    state = r.get_state()
    rest = [np.asarray(b[1].tensors[0]).tolist() for b in it]
    other = tmp_path / "other"
    shutil.copytree(file_tree, other)
    (other / "c1" / "img09.jpg").write_bytes(b"another image")  # the last sample: one of those hashed
    with pytest.raises(ValueError, match=r"other data of the same size: the samples at positions 0, 3, 6, 9 "):
        ndd.readers.File(file_root=other).set_state(state)
    moved = tmp_path / "moved"
    shutil.copytree(file_tree, moved)
    for fresh in (ndd.readers.File(file_root=moved),
                  ndd.readers.File(files=sorted(str(p) for p in moved.rglob("*.jpg")), labels=list(range(10)))):
        fresh.set_state(state)
        got = [np.asarray(b[1].tensors[0]).tolist() for b in fresh.next_epoch(batch_size=2)]
        assert len(got) == len(rest) == 4
    old = state.to_dict()
    del old["state"]["data"]
    fresh = ndd.readers.File(file_root=other)
    fresh.set_state(ndd.ReaderState.from_dict(old["type"], old["state"]))
    assert [np.asarray(b[1].tensors[0]).tolist() for b in fresh.next_epoch(batch_size=2)] == rest


def test_state_of_sample_mode(file_tree):
    r = ndd.readers.File(file_root=file_tree, enable_checkpointing=True, num_shards=2, pad_last_batch=True)
    it = iter(r.next_epoch())
    [next(it) for _ in range(3)]
    s = r.get_state()
    r2 = ndd.readers.File(file_root=file_tree, num_shards=2, pad_last_batch=True)
    r2.set_state(s)
    assert [int(np.asarray(x)[0]) for x, _ in r2.next_epoch()] == [3, 4]
    assert [int(np.asarray(x)[0]) for x, _ in r2.next_epoch()] == [5, 6, 7, 8, 9]


# -- Caffe2 -------------------------------------------------------------------------------
def test_caffe2_outputs_and_epochs(caffe2_db):
    r = ndd.readers.Caffe2(path=caffe2_db)
    batches = list(r.next_epoch(batch_size=4))
    assert [sum(as_list(lab), []) for _, lab in batches] == [[0, 0, 0, 0], [0, 1, 1, 1], [1, 1, 0, 0]]
    img, lab = batches[0]
    assert img.dtype == ndd.uint8 and img.ndim == 1 and img.layout is None
    assert lab.dtype == ndd.int32 and lab.shape == [(1,)] * 4
    assert [bytes(np.asarray(t)) for t in img] == [payload(i) for i in range(4)]
    assert np.asarray(img.tensors[0]).flags.writeable


def test_caffe2_several_paths_and_options(tmp_path):
    def rec(i):
        return c2.encode_tensor_protos([
            {"data_type": "BYTE", "dims": [2, 3], "byte_data": bytes(range(i, i + 6))},
            {"data_type": "INT32", "int32_data": [i % 3]},
            {"data_type": "FLOAT", "float_data": [i, i + 0.5]},
            {"data_type": "INT32", "int32_data": [1, 2, 3, i]},
        ])
    c2.write_lmdb(tmp_path / "a", [rec(i) for i in range(3)])
    c2.write_lmdb(tmp_path / "b", [rec(i) for i in range(3, 5)])
    r = ndd.readers.Caffe2(path=[tmp_path / "a", tmp_path / "b"], additional_inputs=1, bbox=True)
    assert r.get_metadata()["epoch_size"] == 5
    img, lab, extra, box = next(iter(r.next_epoch(batch_size=5)))
    assert img.layout == "HWC" and img.shape == [(2, 3, 1)] * 5
    assert as_list(lab) == [[0], [1], [2], [0], [1]]
    assert extra.dtype == ndd.float32 and as_list(extra)[4] == [4.0, 4.5]
    assert box.dtype == ndd.int32 and as_list(box)[3] == [1, 2, 3, 3]
    c2.write_lmdb(tmp_path / "c", [c2.encode_tensor_protos([{"data_type": "INT32", "int32_data": [i, 3]},
                                                            {"data_type": "FLOAT", "float_data": [1]}])
                                   for i in range(3)])
    r = ndd.readers.Caffe2(path=tmp_path / "c", image_available=False, label_type=1, num_labels=4)
    (lab,) = next(iter(r.next_epoch(batch_size=3)))
    assert as_list(lab) == [[1, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, 1]]
    r = ndd.readers.Caffe2(path=tmp_path / "a", label_type=4)
    assert len(next(iter(r.next_epoch()))) == 1


def test_caffe2_errors(tmp_path, caffe2_db):
    with pytest.raises(ValueError, match="needs `path`"):
        ndd.readers.Caffe2()
    with pytest.raises(ValueError, match="LMDB path does not exist"):
        ndd.readers.Caffe2(path=tmp_path / "nope")
    with pytest.raises(ValueError, match="label_type"):
        ndd.readers.Caffe2(path=caffe2_db, label_type=5)
    c2.write_lmdb(tmp_path / "junk", [b"\xff\xff\xff"])
    with pytest.raises(ValueError, match=r"junk: record 0 \(key b'00000000'\): malformed"):
        ndd.readers.Caffe2(path=tmp_path / "junk")
    good = c2.encode_tensor_protos([{"data_type": "STRING", "string_data": [b"x"]},
                                    {"data_type": "INT32", "int32_data": [1]}])
    c2.write_lmdb(tmp_path / "bad", [good, good, good, good[:-3], good])
    r = ndd.readers.Caffe2(path=tmp_path / "bad")
    it = r.next_epoch(batch_size=2)
    assert len(next(it)) == 2
    with pytest.raises(ValueError, match=r"bad: record 3 \(key b'00000003'\)"):
        next(it)


# Opens each truncated copy named on the command line, then a database truncated while a
# source holds its (cached) environment; prints each error. A read past the end of
# data.mdb would kill this process with SIGBUS, so it runs apart from pytest.
_OPEN_TRUNCATED = """
import os, sys
import ndd
from ndd_readers import _caffe2 as c2

def attempt(path):
    try:
        r = ndd.readers.Caffe2(path=path)
        print("READ", sum(len(b[1]) for b in r.next_epoch(batch_size=7)))
    except ValueError as e:
        print("ValueError", e)

for path in sys.argv[2:]:
    attempt(path)
held = c2.Caffe2Source(sys.argv[1])
for pages in (3, 1):  # the second cut leaves less than LMDB's two meta pages
    os.truncate(os.path.join(sys.argv[1], "data.mdb"), held._envs[0].stat()["psize"] * pages)
    attempt(sys.argv[1])
"""


def test_truncated_lmdb_raises_naming_the_file_and_sizes(tmp_path):
    import mmap
    import subprocess
    import sys

    # small records on branch and leaf pages, and large ones on overflow pages
    recs = [(payload(i % 50) * (400 if i % 10 == 0 else 1), i) for i in range(300)]
    c2.write_caffe2_lmdb(tmp_path / "db", recs)
    data = (tmp_path / "db" / "data.mdb").read_bytes()
    full = len(data)
    sizes = [int(full * f) for f in (0.3, 0.5, 0.75, 0.9, 0.99)] + [full - 1]
    paths = []
    for size in sizes:
        (tmp_path / f"t{size}").mkdir()
        (tmp_path / f"t{size}" / "data.mdb").write_bytes(data[:size])
        paths.append(str(tmp_path / f"t{size}"))
    run = subprocess.run([sys.executable, "-c", _OPEN_TRUNCATED, str(tmp_path / "db"), *paths],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    lines = run.stdout.splitlines()
    assert len(lines) == len(sizes) + 2, run.stdout
    held = str(tmp_path / "db")
    for line, path, size in zip(lines[:-1], paths + [held], sizes + [3 * mmap.PAGESIZE], strict=True):
        assert line == (f"ValueError {path}/data.mdb is {size} bytes, but the database needs {full} "
                        "bytes (the file is truncated or was copied incompletely)")
    assert lines[-1] == (f"ValueError {held}/data.mdb is {mmap.PAGESIZE} bytes, too short to hold an "
                         "LMDB database (truncated?)")


def test_lmdb_data_file_larger_than_the_database_reads(caffe2_db):
    """A data.mdb longer than its pages (as LMDB's writemap mode leaves it) is fine."""
    mdb = caffe2_db / "data.mdb"
    os.truncate(mdb, mdb.stat().st_size + (1 << 20))
    imgs, labels = next(iter(ndd.readers.Caffe2(path=caffe2_db).next_epoch(batch_size=10)))
    assert [bytes(np.asarray(x)) for x in imgs] == [payload(i) for i in range(10)]
    assert sum(as_list(labels), []) == LABELS


# -- TFRecord ------------------------------------------------------------------------------
def test_tfrecord_dict_outputs(tfrecord_file):
    path, index = tfrecord_file
    tfrec = ndd.tfrecord
    feats = {"image": tfrec.FixedLenFeature([], tfrec.string, ""),
             "label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
             "box": tfrec.VarLenFeature(tfrec.float32, 0.0),
             "missing": tfrec.FixedLenFeature([2], tfrec.int64, 5)}
    r = ndd.readers.TFRecord(path=path, index_path=index, features=feats, pad_last_batch=True)
    batches = list(r.next_epoch(batch_size=4))
    assert [sum(as_list(b["label"]), []) for b in batches] == [[0, 0, 0, 0], [0, 1, 1, 1], [1, 1, 1, 1]]
    b = batches[0]
    assert list(b) == ["image", "label", "box", "missing"]
    assert b["image"].dtype == ndd.uint8 and [bytes(np.asarray(t)) for t in b["image"]][1] == payload(1)
    assert b["label"].dtype == ndd.int64 and b["label"].shape == [(1,)] * 4
    assert as_list(b["box"])[2] == [2.0, 3.0, 4.0, 5.0] and as_list(b["missing"])[0] == [5, 5]
    s = next(iter(ndd.readers.TFRecord(path=path, index_path=index, features=feats).next_epoch()))
    assert isinstance(s, dict) and isinstance(s["label"], ndd.Tensor)


def test_tfrecord_errors(tfrecord_file, tmp_path):
    path, index = tfrecord_file
    feats = {"label": ndd.tfrecord.FixedLenFeature([1], ndd.tfrecord.int64)}
    with pytest.raises(ValueError, match="needs `index_path`"):
        ndd.readers.TFRecord(path=path, features=feats)
    with pytest.raises(ValueError, match="needs `features`"):
        ndd.readers.TFRecord(path=path, index_path=index)
    with pytest.raises(ValueError, match="index file per TFRecord file"):
        ndd.readers.TFRecord(path=[path, path], index_path=index, features=feats)
    cut = tmp_path / "cut.idx"  # covers the file, but not at its record boundaries
    cut.write_text(f"0 30\n30 {path.stat().st_size - 30}\n")
    with pytest.raises(ValueError, match=r"data.tfrecord: record 0 .*index gives length 30"):
        ndd.readers.TFRecord(path=path, index_path=cut, features=feats)
    with pytest.raises(ValueError, match=r"data.tfrecord: record 0 .*'nope' is missing"):
        ndd.readers.TFRecord(path=path, index_path=index,
                             features={"nope": ndd.tfrecord.FixedLenFeature([1], ndd.tfrecord.int64)})


def test_tfrecord_stale_index_raises_instead_of_a_short_epoch(tmp_path):
    """The file is regenerated with more records, but its old index is kept."""
    from ndd_readers import writers

    path, old, fresh = tmp_path / "d.tfrecord", tmp_path / "old.idx", tmp_path / "fresh.idx"
    feats = {"label": ndd.tfrecord.FixedLenFeature([1], ndd.tfrecord.int64, -1)}
    writers.write_tfrecord(path, [{"label": [i]} for i in range(3)], index_path=old)
    writers.write_tfrecord(path, [{"label": [i]} for i in range(12)], index_path=fresh)
    old_end, size = int(tfr.read_index(old)[-1].sum()), path.stat().st_size
    assert 0 < old_end < size
    with pytest.raises(ValueError, match=rf"old.idx does not match .*d.tfrecord: its entries end at byte "
                                         rf"{old_end}, but the file has {size} bytes"):
        ndd.readers.TFRecord(path=path, index_path=old, features=feats)
    r = ndd.readers.TFRecord(path=path, index_path=fresh, features=feats)
    assert sum((as_list(b["label"]) for b in r.next_epoch(batch_size=4)), []) == [[i] for i in range(12)]


def test_tfrecord2idx_console_script(tfrecord_file, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path, index = tfrecord_file
    script = Path(sys.executable).with_name("ndd-tfrecord2idx")
    if not script.exists():
        pytest.skip("console script not installed in this environment")
    out = tmp_path / "again.idx"
    subprocess.run([str(script), str(path), str(out)], check=True)
    assert out.read_text() == index.read_text()


# -- Numpy ----------------------------------------------------------------------------------
def test_numpy_keeps_dtype_and_shape(tmp_path):
    arrays = [np.arange(6, dtype=np.int16).reshape(2, 3), np.ones((2, 2), np.float64),
              np.asfortranarray(np.arange(6, dtype=np.int16).reshape(3, 2))]
    (tmp_path / "sub").mkdir()
    for i, a in enumerate(arrays):
        np.save(tmp_path / ("sub" if i == 2 else ".") / f"a{i}.npy", a)
    (tmp_path / "note.txt").write_text("x")
    r = ndd.readers.Numpy(file_root=tmp_path)
    out = list(r.next_epoch())
    assert all(len(o) == 1 for o in out)
    assert [np.asarray(o[0]).tolist() for o in out] == [a.tolist() for a in arrays]
    assert [o[0].dtype for o in out] == [ndd.int16, ndd.float64, ndd.int16]
    r = ndd.readers.Numpy(files=["a0.npy", "sub/a2.npy"], file_root=tmp_path)
    (b,) = next(iter(r.next_epoch(batch_size=2)))
    assert b.shape == [(2, 3), (3, 2)]
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    r = ndd.readers.Numpy(files=[tmp_path / "bad.npy"])
    with pytest.raises(ValueError, match="bad.npy .sample 0.: not a readable .npy file: it does not start with "
                                         r"the .npy magic string .*, it starts with b'not nu'"):
        next(iter(r.next_epoch()))
    np.save(tmp_path / "obj.npy", np.array([{}], dtype=object))  # a .npy with pickled objects
    with pytest.raises(ValueError, match="obj.npy .sample 0.: not a readable .npy file: Object arrays cannot"):
        next(iter(ndd.readers.Numpy(files=[tmp_path / "obj.npy"]).next_epoch()))


def test_numpy_file_root_lists_root_then_one_level_of_folders(tmp_path):
    """As DALI's Numpy reader: the root's files first, then each sub-folder's (sorted), and
    nothing deeper (observed with DALI 2.4)."""
    (tmp_path / "s1" / "s2").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    np.save(tmp_path / "top.npy", np.array([0]))
    np.save(tmp_path / "s1" / "a.npy", np.array([1]))
    np.save(tmp_path / "s1" / "s2" / "deep.npy", np.array([2]))
    np.save(tmp_path / "b" / "z.npy", np.array([3]))
    np.save(tmp_path / "b" / "c.npy", np.array([4]))
    out = [int(np.asarray(o[0])[0]) for o in ndd.readers.Numpy(file_root=tmp_path).next_epoch()]
    assert out == [0, 4, 3, 1]


def test_numpy_file_list_and_errors(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(3, np.uint8))
    (tmp_path / "l.txt").write_text("x.npy\nx.npy\n")
    assert len(list(ndd.readers.Numpy(file_list=tmp_path / "l.txt").next_epoch())) == 2
    with pytest.raises(ValueError, match="needs `file_root`"):
        ndd.readers.Numpy()
    with pytest.raises(ValueError, match="no files matching"):
        ndd.readers.Numpy(file_root=tmp_path, file_filter="*.npz")


def test_numpy_big_endian_files_read_like_np_load(tmp_path):
    arrays = [np.arange(6, dtype=">i4").reshape(2, 3), np.linspace(0, 1, 4).astype(">f8"),
              np.array(7, dtype=">u2")]
    for i, a in enumerate(arrays):
        np.save(tmp_path / f"{i}.npy", a)
    out = [np.asarray(o[0]) for o in ndd.readers.Numpy(file_root=tmp_path).next_epoch()]
    for i, got in enumerate(out):
        want = np.load(tmp_path / f"{i}.npy")
        assert got.dtype == want.dtype.newbyteorder("=") and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    (roi,) = next(iter(ndd.readers.Numpy(files="0.npy", file_root=tmp_path, roi_start=[1, 1]).next_epoch()))
    np.testing.assert_array_equal(np.asarray(roi), np.load(tmp_path / "0.npy")[1:, 1:])
    np.save(tmp_path / "c.npy", np.zeros(2, np.complex64))
    with pytest.raises(ValueError, match=r"c.npy \(sample 0\): element type complex64 is not supported"):
        next(iter(ndd.readers.Numpy(files=tmp_path / "c.npy").next_epoch()))


# -- COCO -------------------------------------------------------------------------------------
@pytest.fixture
def coco(tmp_path):
    import json

    root = tmp_path / "images"
    root.mkdir()
    for i in (1, 2, 3):
        (root / f"{i}.jpg").write_bytes(payload(i))
    data = {
        "images": [{"id": 3, "file_name": "3.jpg", "width": 100, "height": 50},
                   {"id": 1, "file_name": "1.jpg", "width": 10, "height": 20},
                   {"id": 2, "file_name": "2.jpg", "width": 10, "height": 10}],
        "categories": [{"id": 90}, {"id": 7}],
        "annotations": [
            {"image_id": 1, "bbox": [1, 2, 3, 4], "category_id": 90, "iscrowd": 0,
             "segmentation": [[0, 0, 2, 0, 2, 2], [1, 1, 3, 1, 3, 3, 1, 3]]},
            {"image_id": 1, "bbox": [0, 0, 5, 5], "category_id": 7, "iscrowd": 1, "segmentation": [[0, 0, 1, 1, 1, 0]]},
            {"image_id": 3, "bbox": [10, 10, 20, 5], "category_id": 7, "iscrowd": 0, "segmentation": []},
            {"image_id": 3, "bbox": [0, 0, 0.05, 5], "category_id": 7, "iscrowd": 0},
        ],
    }
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(data))
    return root, ann


def test_coco_outputs(coco):
    root, ann = coco
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, image_ids=True)
    samples = list(r.next_epoch())
    assert [int(np.asarray(s[3])[0]) for s in samples] == [1, 2, 3]  # image-id order
    img, boxes, labels, ids = samples[0]
    assert bytes(np.asarray(img)) == payload(1) and img.dtype == ndd.uint8
    assert boxes.dtype == ndd.float32 and np.asarray(boxes).tolist() == [[1, 2, 3, 4], [0, 0, 5, 5]]
    assert labels.dtype == ndd.int32 and np.asarray(labels).tolist() == [1, 2]  # list order: 90, 7
    assert np.asarray(samples[1][1]).shape == (0, 4) and np.asarray(samples[1][2]).shape == (0,)
    assert np.asarray(samples[2][1]).tolist() == [[10, 10, 20, 5]]  # the 0.05-wide box is dropped
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, ltrb=True, ratio=True, skip_empty=True,
                         include_iscrowd=False, avoid_class_remapping=True)
    samples = list(r.next_epoch())
    assert len(samples) == 2 and len(samples[0]) == 3
    np.testing.assert_allclose(np.asarray(samples[0][1]), [[0.1, 0.1, 0.4, 0.3]])
    assert np.asarray(samples[0][2]).tolist() == [90]
    np.testing.assert_allclose(np.asarray(samples[1][1]), [[0.1, 0.2, 0.3, 0.3]])
    imgs, boxes, labels = next(iter(ndd.readers.COCO(file_root=root, annotations_file=ann).next_epoch(batch_size=3)))
    assert boxes.shape == [(2, 4), (0, 4), (1, 4)] and labels.shape == [(2,), (0,), (1,)]


def test_coco_labels_follow_the_categories_list_order(coco, tmp_path):
    """Category ids are numbered 1..K in the order the JSON lists them (DALI 2.4 observed:
    categories [12, 3, 7] give 12 -> 1, 3 -> 2, 7 -> 3), not by sorted id."""
    root, ann = coco
    data = json.loads(ann.read_text())
    data["categories"] = [{"id": 90}, {"id": 7}]  # the fixture's order: 90 first
    ann.write_text(json.dumps(data))
    _, _, labels = next(iter(ndd.readers.COCO(file_root=root, annotations_file=ann).next_epoch()))
    assert np.asarray(labels).tolist() == [1, 2]  # image 1: category 90, then 7
    data["categories"] = [{"id": 7}, {"id": 90}]
    ann.write_text(json.dumps(data))
    _, _, labels = next(iter(ndd.readers.COCO(file_root=root, annotations_file=ann).next_epoch()))
    assert np.asarray(labels).tolist() == [2, 1]


def test_coco_polygons(coco):
    root, ann = coco
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, polygon_masks=True, ratio=True)
    _, _, _, polys, verts = next(iter(r.next_epoch()))
    assert np.asarray(polys).tolist() == [[0, 0, 3], [0, 3, 7], [1, 7, 10]]
    assert np.asarray(verts).shape == (10, 2)
    np.testing.assert_allclose(np.asarray(verts)[1], [0.2, 0.0])


def test_coco_images_argument(coco):
    root, ann = coco
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, images=["3.jpg", "1.jpg", "3.jpg"], image_ids=True)
    assert [int(np.asarray(s[3])[0]) for s in r.next_epoch()] == [3, 1, 3]
    r = ndd.readers.COCO(file_root=root, annotations_file=ann, images="3.jpg", image_ids=True)  # one name
    assert [int(np.asarray(s[3])[0]) for s in r.next_epoch()] == [3]


def test_coco_errors(coco, tmp_path):
    root, ann = coco
    with pytest.raises(ValueError, match="needs `file_root`"):
        ndd.readers.COCO(annotations_file=ann)
    with pytest.raises(ValueError, match="needs `annotations_file`"):
        ndd.readers.COCO(file_root=root)
    (root / "2.jpg").unlink()
    with pytest.raises(ValueError, match=r"2.jpg: image 2 of annotations_file"):
        ndd.readers.COCO(file_root=root, annotations_file=ann)
    bad = tmp_path / "bad.json"
    bad.write_text('{"images": [')
    with pytest.raises(ValueError, match="bad.json' is not valid JSON"):
        ndd.readers.COCO(file_root=root, annotations_file=bad)
    bad.write_text('{"images": [{"id": 1, "file_name": "1.jpg", "width": 1, "height": 1}], '
                   '"annotations": [{"image_id": 1, "bbox": [1, 2], "category_id": 1}], "categories": [{"id": 1}]}')
    with pytest.raises(ValueError, match=r"annotation #0: `bbox` must be a list of 4 finite numbers, got \[1, 2\]"):
        ndd.readers.COCO(file_root=root, annotations_file=bad)
    with pytest.raises(ValueError, match="`pixelwise_masks` and `polygon_masks` are mutually exclusive"):
        ndd.readers.COCO(file_root=root, annotations_file=ann, pixelwise_masks=True, polygon_masks=True)


def test_coco_bad_polygon_names_the_annotation(coco, tmp_path):
    import json

    root, ann = coco
    data = json.loads(ann.read_text())
    for seg, got in [([[1, 2, 3]], "a polygon must be a flat list of finite x, y pairs, got 3 numbers"),
                     ([[1, 2], ["x", "y"]], "a polygon must be a flat list of finite x, y pairs, got something else"),
                     ([[1, 2, float("nan"), 4, 5, 6]], "a polygon must be a flat list of finite x, y pairs, got a NaN"),
                     ("garbage", "`segmentation` must be a list of polygons or an RLE dict, got 'garbage'")]:
        data["annotations"][0]["segmentation"] = seg
        bad = tmp_path / "poly.json"
        bad.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=r"poly.json': image id 1, annotation #0: " + re.escape(got)):
            ndd.readers.COCO(file_root=root, annotations_file=bad, polygon_masks=True)


_IMG = {"id": 1, "file_name": "1.jpg", "width": 8, "height": 6}


def test_coco_deprecated_aliases(coco):
    root, ann = coco
    with pytest.warns(DeprecationWarning, match="`save_img_ids` is a deprecated alias for `image_ids`"):
        r = ndd.readers.COCO(file_root=root, annotations_file=ann, save_img_ids=True)
    assert [int(np.asarray(s[3])[0]) for s in r.next_epoch()] == [1, 2, 3]
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="preprocessed_annotations` is not"):
        ndd.readers.COCO(file_root=root, annotations_file=ann, meta_files_path=str(root))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="save_preprocessed_annotations` is not"):
        ndd.readers.COCO(file_root=root, annotations_file=ann, dump_meta_files=True)


def _coco_json(images=None, annotations=None, categories=None):
    return {"images": images if images is not None else [_IMG],
            "annotations": annotations if annotations is not None else
            [{"image_id": 1, "bbox": [1, 1, 2, 2], "category_id": 1}],
            "categories": categories if categories is not None else [{"id": 1}]}


@pytest.mark.parametrize("data, args, message", [
    (_coco_json(images=[_IMG, {**_IMG, "id": 2, "file_name": "2.jpg"}, {**_IMG, "id": 2, "file_name": "3.jpg"}]),
     {}, "`images` entry #2: image id 2 is also that of '2.jpg'"),  # would drop an image: a short epoch
    (_coco_json(images=[{**_IMG, "id": "1"}]), {}, "`images` entry #0: `id` must be an integer, got '1'"),
    (_coco_json(images=[{**_IMG, "id": 1.5}]), {}, "`images` entry #0: `id` must be an integer, got 1.5"),
    (_coco_json(images=[{**_IMG, "file_name": 5}]), {}, "`images` entry #0: `file_name` must be a string, got 5"),
    (_coco_json(images=[{**_IMG, "width": 0}]), {"ratio": True},
     "`images` entry #0: `width` must be a positive number, got 0"),
    (_coco_json(images=[{**_IMG, "height": -3}]), {"pixelwise_masks": True},
     "`images` entry #0: `height` must be a positive number, got -3"),
    (_coco_json(annotations=[{"image_id": 1, "bbox": "1234", "category_id": 1}]), {},
     "annotation #0: `bbox` must be a list of 4 finite numbers, got '1234'"),
    (_coco_json(annotations=[{"image_id": 1, "bbox": [1, 1, float("nan"), 2], "category_id": 1}]), {},
     "annotation #0: `bbox` must be a list of 4 finite numbers, got [1, 1, nan, 2]"),
    (_coco_json(annotations=[{"image_id": 1, "bbox": [1, 1, 2, 2]}]), {},
     "annotation #0: `category_id` must be an integer, got None"),
    (_coco_json(categories=[{"name": "cat"}]), {}, "`categories` entry #0: `id` must be an integer, got None"),
    (_coco_json(annotations={"image_id": 1}), {}, "`annotations` must be a list"),
])
def test_coco_bad_annotations_name_the_entry(coco, tmp_path, data, args, message):
    """JSON a COCO file should not hold is refused naming the file and the entry, never read
    as something else (a string bbox as its characters, two images of one id as one)."""
    import json

    root, _ = coco
    (root / "3.jpg").write_bytes((root / "2.jpg").read_bytes())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=re.escape(f"annotations_file {str(bad)!r}: {message}")):
        ndd.readers.COCO(file_root=root, annotations_file=bad, **args)
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match=re.escape(f"annotations_file {str(bad)!r} is not valid JSON")):
        ndd.readers.COCO(file_root=root, annotations_file=bad)


# -- throughput smoke ------------------------------------------------------------------------
def test_caffe2_reads_a_larger_db_in_order(tmp_path):
    n = 700
    c2.write_caffe2_lmdb(tmp_path / "big", [(payload(i % 200), i) for i in range(n)])
    r = ndd.readers.Caffe2(path=tmp_path / "big", prefetch_queue_depth=2)
    labels = [v for _, lab in r.next_epoch(batch_size=64) for v in sum(as_list(lab), [])]
    assert labels == list(range(n)) + list(range(64 * 11 - n))


def test_same_shape_outputs_are_dense_ragged_stay_lists(caffe2_db, tfrecord_file):
    """Labels (all of shape (1,)) arrive as one dense array; encoded payloads of different
    lengths stay a per-sample list; values are unchanged."""
    img, lab = next(iter(ndd.readers.Caffe2(path=caffe2_db).next_epoch(batch_size=4)))
    assert lab._batch_data().dense is not None and lab._batch_data().dense.shape == (4, 1)
    assert img._batch_data().dense is None
    assert as_list(lab) == [[0], [0], [0], [0]]
    assert [bytes(np.asarray(t)) for t in img] == [payload(i) for i in range(4)]
    path, index = tfrecord_file
    r = ndd.readers.TFRecord(path=str(path), index_path=str(index), features={
        "image": ndd.tfrecord.FixedLenFeature((), ndd.tfrecord.string, ""),
        "box": ndd.tfrecord.FixedLenFeature([4], ndd.tfrecord.float32, 0.0)})
    out = next(iter(r.next_epoch(batch_size=3)))
    box = out["box"]
    assert box._batch_data().dense is not None
    np.testing.assert_array_equal(np.asarray(box.tensors[2]), np.arange(4, dtype=np.float32) + 2)


# -- argument types ----------------------------------------------------------------------------
@pytest.mark.parametrize("arg", ["pad_last_batch", "random_shuffle", "stick_to_shard", "shuffle_after_epoch",
                                 "lazy_init", "case_sensitive_filter", "read_ahead", "dont_use_mmap"])
@pytest.mark.parametrize("value", ["no", "False", 0.0, None, 2])
def test_yes_no_arguments_take_only_yes_or_no(file_tree, arg, value):
    """A yes/no argument given a string, a float, None or another number is refused naming
    it ("no" would otherwise turn padding on); bools, NumPy bools and 0/1 work."""
    with pytest.raises(TypeError, match=re.escape(f"`{arg}` must be True or False, got {value!r}")):
        ndd.readers.File(file_root=file_tree, **{arg: value})
    for ok in (False, np.bool_(False), 0):
        ndd.readers.File(file_root=file_tree, **{arg: ok})


@pytest.mark.parametrize("make, error, message", [
    (lambda d: ndd.readers.Caffe2(path=d["caffe2"], label_type=True), TypeError,
     "`label_type` must be an integer, got True"),
    (lambda d: ndd.readers.Caffe2(path=d["caffe2"], label_type=1.0), TypeError,
     "`label_type` must be an integer, got 1.0"),
    (lambda d: ndd.readers.Caffe2(path=d["caffe2"], bbox="yes"), TypeError, "`bbox` must be True or False"),
    (lambda d: ndd.readers.COCO(file_root=d["tree"], annotations_file="x.json", ratio="no"), TypeError,
     "`ratio` must be True or False, got 'no'"),
    (lambda d: ndd.readers.File(file_root=d["tree"], file_filters=5), TypeError,
     "`file_filters` must be a pattern or a list of patterns, got 5"),
    (lambda d: ndd.readers.File(file_root=d["tree"], dir_filters=["c*", 3]), TypeError,
     "`dir_filters` must be a pattern or a list of patterns: entry 1 is 3"),
    (lambda d: ndd.readers.File(file_root=d["tree"], shuffle_after_epoch_seed="x"), TypeError,
     "`shuffle_after_epoch_seed` must be an integer, got 'x'"),
    (lambda d: ndd.readers.Numpy(file_root=d["tree"], file_filter=["*.npy"]), TypeError,
     "`file_filter` must be a pattern (a string), got ['*.npy']"),
    (lambda d: ndd.readers.TFRecord(path=d["tfr"][0], index_path=d["tfr"][1],
                                    features={1: tfr.FixedLenFeature([1], tfr.int64, -1)}), TypeError,
     "feature names must be strings, got 1"),
    (lambda d: tfr.FixedLenFeature([1], tfr.int64, 1.5), TypeError,
     "default_value 1.5 is not of the feature's type int64"),
    (lambda d: tfr.FixedLenFeature([], tfr.float32, "x"), TypeError,
     "default_value 'x' is not of the feature's type float32"),
])
def test_bad_argument_types_name_the_argument(file_tree, caffe2_db, tfrecord_file, make, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make({"tree": file_tree, "caffe2": caffe2_db, "tfr": tfrecord_file})


def test_fractional_defaults_of_float_features_are_kept():
    assert tfr.FixedLenFeature([], tfr.float32, 0.1)._default.tolist() == np.float32(0.1)
    assert tfr.FixedLenFeature([2], tfr.int64, 3.0)._default.tolist() == [3, 3]


def test_file_list_labels_and_index_offsets_are_plain_decimals(tmp_path, tfrecord_file):
    """Python's int() takes "1_0" as 10: a label so written is refused, as is an index
    offset too large for the index's int64 array."""
    (tmp_path / "a.jpg").write_bytes(b"x")
    (tmp_path / "list.txt").write_text("a.jpg 1_0\n")
    with pytest.raises(ValueError, match=re.escape("list.txt:1: expected '<name> <label>', got 'a.jpg 1_0'")):
        ndd.readers.File(file_list=tmp_path / "list.txt")
    (tmp_path / "list.txt").write_text("a.jpg -3\n")
    _, label = next(ndd.readers.File(file_list=tmp_path / "list.txt").next_epoch())
    assert np.asarray(label).tolist() == [-3]
    (tmp_path / "big.idx").write_text("99999999999999999999 20\n")
    with pytest.raises(ValueError, match=re.escape("big.idx:1: invalid index entry '99999999999999999999 20'")):
        ndd.readers.TFRecord(path=tfrecord_file[0], index_path=tmp_path / "big.idx",
                             features={"label": tfr.FixedLenFeature([1], tfr.int64, -1)})


def test_tfrecord_scalar_features_are_0d(tfrecord_file):
    """FixedLenFeature([]) (TensorFlow's usual label feature) gives 0-d samples, so a batch
    stacks to (N,); [1] gives (N, 1) (observed with DALI 2.4)."""
    path, index = tfrecord_file

    def first_batch(**features):
        return next(ndd.readers.TFRecord(path=path, index_path=index, features=features).next_epoch(batch_size=3))

    b = first_batch(label=tfr.FixedLenFeature([], tfr.int64, -1), missing=tfr.FixedLenFeature((), tfr.float32, 7))
    assert b["label"].shape == [(), (), ()] and b["label"].dtype == ndd.int64
    assert np.stack([np.asarray(t) for t in b["label"]]).tolist() == LABELS[:3]
    assert b["missing"].shape == [(), (), ()] and [np.asarray(t).item() for t in b["missing"]] == [7.0] * 3
    assert first_batch(label=tfr.FixedLenFeature([1], tfr.int64, -1))["label"].shape == [(1,)] * 3
    with pytest.raises(ValueError, match=r"feature 'box' holds 4 values; FixedLenFeature shape \[\] needs 1"):
        first_batch(box=tfr.FixedLenFeature([], tfr.float32))


def test_a_state_is_taken_by_the_same_data_read_with_other_options(tfrecord_file, tmp_path):
    """The state's hash is of the records (the file, for Numpy), not of what the options
    make of them: other features, in another order, or another region of interest."""
    path, index = tfrecord_file
    both = {"image": tfr.FixedLenFeature((), tfr.string, ""), "label": tfr.FixedLenFeature([1], tfr.int64, -1)}
    r = ndd.readers.TFRecord(path=path, index_path=index, features=both, enable_checkpointing=True)
    next(r.next_epoch(batch_size=3))
    state = r.get_state()
    for features in ({"label": both["label"], "image": both["image"]}, {"label": both["label"]}):
        other = ndd.readers.TFRecord(path=path, index_path=index, features=features)
        other.set_state(state)
        labels = [np.asarray(b["label"].tensors[0]).tolist() for b in other.next_epoch(batch_size=3)]
        assert labels[0] == [LABELS[3]]
    for k in range(4):
        np.save(tmp_path / f"{k}.npy", np.arange(6 * k, 6 * k + 6).reshape(2, 3))
    r = ndd.readers.Numpy(file_root=tmp_path, enable_checkpointing=True)
    next(r.next_epoch(batch_size=2))
    region = ndd.readers.Numpy(file_root=tmp_path, roi_start=[1], roi_shape=[1], roi_axes=[0])
    region.set_state(r.get_state())
    (rows,) = next(region.next_epoch(batch_size=2))
    assert np.asarray(rows.tensors[0]).tolist() == [[15, 16, 17]]


def test_numpy_integers_for_integer_arguments(file_tree):
    """Sharding and shuffling arguments may be NumPy integers (as from np.arange or a
    config array); the state still serialises."""
    r = ndd.readers.File(file_root=file_tree, shard_id=np.int64(1), num_shards=np.int32(2), seed=np.int64(3),
                         initial_fill=np.int16(4), prefetch_queue_depth=np.uint8(2), random_shuffle=True,
                         enable_checkpointing=True)
    first = [np.asarray(b[1].tensors[0]).tolist() for b in r.next_epoch(batch_size=2)]
    plain = ndd.readers.File(file_root=file_tree, shard_id=1, num_shards=2, seed=3, initial_fill=4,
                             random_shuffle=True)
    assert first == [np.asarray(b[1].tensors[0]).tolist() for b in plain.next_epoch(batch_size=2)]
    assert ndd.ReaderState(str(r.get_state())).to_dict()["state"]["config"]["num_shards"] == 2
