"""serialize/deserialize edge cases, save/load patterns, and damaged or interrupted files."""

from __future__ import annotations

import json
import os
import re

import pytest

import ndd
from ndd.checkpoint import Checkpoint
from ndd.random import RNG


def collected(seed: int = 1, name: str = "rng") -> Checkpoint:
    ck = Checkpoint()
    ck.register(RNG(seed), name)
    ck.collect()
    return ck


def state_of(path) -> str:
    with open(path) as f:
        return json.load(f)["states"]["rng"]["state"]


# -- deserialize ----------------------------------------------------------------------------
@pytest.mark.parametrize("payload, message", [
    ({"version": 1, "states": {}}, "Unsupported checkpoint format version 1; expected 2."),
    ({"version": 3, "states": {}}, "Unsupported checkpoint format version 3; expected 2."),
    ({"states": {}}, "Unsupported checkpoint format version 0; expected 2."),
    ({"version": 2}, "Invalid checkpoint payload."),
    ([1, 2], "Invalid checkpoint payload."),
    ({"version": 2, "states": []}, "Invalid checkpoint payload: `states` must be a dict."),
    ({"version": 2, "states": {"a": "state"}}, "Invalid checkpoint entry for 'a'."),
    ({"version": 2, "states": {"a": {"type": "RNG"}}}, "Invalid checkpoint entry for 'a'."),
    ({"version": 2, "states": {"a": {"state": "s", "type": 5}}}, "Invalid `type` for entry 'a': expected a string."),
])
def test_deserialize_errors(payload, message):
    ck = collected()
    before = ck.serialize()
    with pytest.raises(ValueError, match=re.escape(message)):
        ck.deserialize(json.dumps(payload))
    assert ck.serialize() == before and ck.is_complete  # unchanged


def test_deserialize_invalid_json():
    with pytest.raises(ValueError):
        Checkpoint().deserialize('{"version": 2, "sta')


def test_deserialize_null_and_missing_type_skip_the_type_check():
    state = str(RNG(4).get_state())
    ck = Checkpoint()
    ck.deserialize(json.dumps({"version": 2, "states": {"a": {"state": state, "type": None},
                                                        "b": {"state": state}}}))
    assert ck.is_loaded and not ck.is_complete
    a, b = RNG(0), RNG(0)
    ck.register(a, "a")
    ck.register(b, "b")
    assert a.get_state() == b.get_state() == state


def test_deserialize_stringifies_states():
    ck = Checkpoint()
    ck.deserialize(json.dumps({"version": 2, "states": {"a": {"state": 12, "type": None}}}))
    assert json.loads(ck.serialize())["states"]["a"] == {"state": "12", "type": None}


# -- save / load -----------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["ckpt_{seq:04d}.json", "deep/er/run-{seq}.ckpt", "c{seq:d}", "c{seq:010}"])
def test_save_and_load(tmp_path, pattern):
    pattern = str(tmp_path / pattern)
    rng = RNG(1)
    ck = Checkpoint()
    ck.register(rng, "rng")
    paths = []
    for _ in range(3):
        rng()
        ck.collect()
        paths.append(ck.save(pattern))
    assert paths == [pattern.format(seq=i) for i in range(3)]
    assert not [p for p in os.listdir(os.path.dirname(paths[0])) if p.endswith(".tmp")]

    target = RNG(0)
    ck2 = Checkpoint()
    assert ck2.load(pattern) == paths[-1]
    ck2.register(target, "rng")
    assert target.get_state() == rng.get_state()
    assert ck2.save(pattern) == pattern.format(seq=3)  # numbering continues after the loaded file


def test_first_save_numbers_after_the_highest_file(tmp_path):
    pattern = str(tmp_path / "c{seq}.json")
    assert collected().save(pattern) == pattern.format(seq=0)
    (tmp_path / "c9.json").write_text(collected(9).serialize())
    assert collected(10).save(pattern) == pattern.format(seq=10)
    ck = Checkpoint()
    assert ck.load(pattern) == pattern.format(seq=10)  # numeric order, not lexicographic
    rng = RNG(0)
    ck.register(rng, "rng")
    assert rng.get_state() == RNG(10).get_state()


def test_no_overwrite_across_instances(tmp_path):
    pattern = str(tmp_path / "c_{seq:02d}.json")
    a, b = collected(1), collected(2)
    assert a.save(pattern).endswith("c_00.json")
    assert b.save(pattern).endswith("c_01.json")
    assert a.save(pattern).endswith("c_02.json")  # a's counter said 01, which b took
    assert [state_of(tmp_path / f"c_0{i}.json") for i in range(3)] == [
        str(RNG(s).get_state()) for s in (1, 2, 1)]


def test_load_without_match(tmp_path):
    (tmp_path / "other.json").write_text("{}")
    pattern = str(tmp_path / "c_{seq}.json")
    with pytest.raises(FileNotFoundError, match=re.escape(f"No checkpoint file matches filename {pattern!r}.")):
        Checkpoint().load(pattern)


@pytest.mark.parametrize("pattern, message", [
    ("ckpt.json", "Checkpoint pattern must include `{seq}`."),
    ("ckpt_{rank}_{seq}.json", "Unsupported field {rank} in checkpoint pattern. "
                               "Only `{seq}` (with an optional format spec) is allowed."),
    ("ckpt_{seq}_{seq}.json", "`{seq}` may appear at most once in a checkpoint pattern."),
    # names load could not read back (in order): refused by save, not missed by load later
    ("ckpt_{seq:x}.json", "Unsupported format of `{seq}` in checkpoint pattern"),
    ("ckpt_{seq:4d}.json", "Unsupported format of `{seq}` in checkpoint pattern"),
    ("ckpt_{seq:+d}.json", "Unsupported format of `{seq}` in checkpoint pattern"),
    ("ckpt_{seq!r}.json", "Unsupported format of `{seq}` in checkpoint pattern"),
])
def test_pattern_errors(tmp_path, pattern, message):
    ck = collected()
    for method in (ck.save, Checkpoint().load):
        with pytest.raises(ValueError, match=re.escape(message)):
            method(str(tmp_path / pattern))
    ck.save(str(tmp_path / "ok_{seq}.json"))
    with pytest.raises(ValueError, match=re.escape(message)):  # checked on every save, unlike DALI
        ck.save(str(tmp_path / pattern))


def test_fixed_text_with_glob_characters(tmp_path):
    rank = 1
    pattern = str(tmp_path / "run[a]*") + f"/rank{rank}_" + "{seq:04d}.json"
    ck = collected()
    assert ck.save(pattern).endswith("run[a]*/rank1_0000.json")
    assert ck.save(pattern).endswith("rank1_0001.json")
    os.makedirs(tmp_path / "runa*")
    (tmp_path / "runa*" / "rank1_0007.json").write_text("not a match")
    assert Checkpoint().load(pattern).endswith("rank1_0001.json")


def test_save_fsyncs(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    collected().save(str(tmp_path / "c{seq}.json"))
    assert synced


# -- damaged and foreign files -------------------------------------------------------------------
def _damage(tmp_path, text: bytes | str) -> str:
    ck = collected()
    good = ck.save(str(tmp_path / "c{seq}.json"))
    bad = str(tmp_path / "c1.json")
    with open(bad, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    assert good != bad
    return bad


def _reader_state(jpeg_root) -> str:
    reader = ndd.readers.File(file_root=jpeg_root, enable_checkpointing=True)
    for _ in reader.next_epoch(batch_size=2):
        break
    return str(reader.get_state())


@pytest.mark.parametrize("content, what", [
    (lambda s: s[: len(s) // 2], "not valid JSON (truncated or corrupted?)"),
    (lambda s: "", "not valid JSON (truncated or corrupted?)"),
    (lambda s: b"\xff\xfe\x00garbage", "not a valid ndd checkpoint"),
    (lambda s: '{"model": "resnet50", "epoch": 3}', "Invalid checkpoint payload."),
    (lambda s: s.replace('"version": 2', '"version": 1'), "Unsupported checkpoint format version 1; expected 2."),
    (lambda s: s.replace("Philox_", "Philix_"), "Malformed RNG state string"),
])
def test_damaged_file(tmp_path, content, what):
    ck = collected()
    bad = _damage(tmp_path, content(ck.serialize()))
    target = collected(5)
    before = target.serialize()
    with pytest.raises(ValueError, match=re.escape(f"Checkpoint file {bad!r}")) as info:
        target.load(str(tmp_path / "c{seq}.json"))
    assert what in str(info.value)
    assert target.serialize() == before and target.is_complete and not target.is_loaded


def test_corrupted_reader_state(tmp_path, jpeg_root):
    state = _reader_state(jpeg_root)
    pattern = str(tmp_path / "c{seq}.json")
    for text, type_name, what in [
        (state[:-12] + "!!!" + state[-9:], "File", "Corrupted reader state"),
        (state, "Caffe2", "typed 'Caffe2' but holds the state of a File reader"),
        ("Cg4KCDQzODk5NTExEAEYAg==", "File", "Not an ndd reader state"),  # a DALI (protobuf) state
    ]:
        ck = Checkpoint()
        ck.set_state("reader", text, op_type=type_name)
        path = ck.save(pattern)
        with pytest.raises(ValueError, match=re.escape(f"Checkpoint file {path!r}")) as info:
            Checkpoint().load(pattern)
        assert what in str(info.value)
        os.remove(path)


def test_a_reader_state_past_its_dataset_names_the_entry_and_the_file(tmp_path, jpeg_root):
    """A position the reader could not have written (an edited file) is caught when the
    reader is registered (the file alone does not say how large the dataset is)."""
    reader = ndd.readers.File(file_root=jpeg_root, enable_checkpointing=True)
    next(iter(reader.next_epoch(batch_size=2)))
    saved = reader.get_state().to_dict()
    saved["state"]["pos"] = 1000
    ck = Checkpoint()
    ck.set_state("reader", str(ndd.ReaderState.from_dict(saved["type"], saved["state"])), op_type="File")
    path = ck.save(str(tmp_path / "c{seq}.json"))
    loaded = Checkpoint()
    loaded.load(str(tmp_path / "c{seq}.json"))
    with pytest.raises(ValueError, match=re.escape(f"Entry 'reader' of checkpoint file {path!r} does not fit the "
                                                   "File registered under that name: Corrupted reader state: "
                                                   "position 1000 in epoch 0")):
        loaded.register(ndd.readers.File(file_root=jpeg_root), "reader")


# -- interrupted saves -----------------------------------------------------------------------------
def test_leftover_tmp_file_is_never_loaded(tmp_path):
    pattern = str(tmp_path / "c_{seq:03d}.json")
    good = collected(1).save(pattern)
    (tmp_path / "c_001.json.tmp").write_text('{"version": 2, "sta')  # a save killed while writing
    assert Checkpoint().load(pattern) == good
    assert collected(2).save(pattern).endswith("c_001.json")  # and the next save overwrites the leftover
    assert not os.path.exists(tmp_path / "c_001.json.tmp")


@pytest.mark.parametrize("where", ["write", "link"])
def test_interrupted_save_leaves_nothing_loadable(tmp_path, monkeypatch, where):
    pattern = str(tmp_path / "c{seq}.json")
    good = collected(1).save(pattern)
    ck = collected(2)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "write":
        monkeypatch.setattr(os, "fsync", crash)
    else:
        monkeypatch.setattr(os, "link", crash)
        monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        ck.save(pattern)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["c0.json"]
    assert Checkpoint().load(pattern) == good
    assert ck.save(pattern) == pattern.format(seq=1)


def test_filesystem_without_hard_links(tmp_path, monkeypatch):
    def no_links(*args):
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    pattern = str(tmp_path / "c{seq}.json")
    ck = collected(3)
    assert ck.save(pattern) == pattern.format(seq=0)
    (tmp_path / "c1.json").write_text("someone else's")
    assert ck.save(pattern) == pattern.format(seq=2)
    assert (tmp_path / "c1.json").read_text() == "someone else's"
    assert sorted(os.listdir(tmp_path)) == ["c0.json", "c1.json", "c2.json"]
