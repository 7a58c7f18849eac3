"""Exact resume: a run with a checkpoint-and-restart equals an uninterrupted run, sample by
sample (labels, and images decoded and randomly rotated), eager and in capture mode."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

import ndd
import ndd.types as types
from ndd.checkpoint import Checkpoint

B = 4
EPOCHS = 3

CONFIGS = {
    "plain": {},
    "shuffled": dict(random_shuffle=True, seed=7, initial_fill=8),
    "sharded": dict(num_shards=3, shard_id=1),
    "sharded_sticky": dict(num_shards=3, shard_id=1, stick_to_shard=True),
    "padded": dict(num_shards=3, shard_id=2, pad_last_batch=True),
    "shuffled_sharded_padded": dict(num_shards=2, shard_id=1, random_shuffle=True, seed=3,
                                    initial_fill=4, pad_last_batch=True),
}
MODES = {"eager-eager": (False, False), "captured-eager": (True, False),
         "eager-captured": (False, True), "captured-captured": (True, True)}


@dataclasses.dataclass
class Run:
    steps: list = dataclasses.field(default_factory=list)  # (labels, images) per step
    ends: list = dataclasses.field(default_factory=list)  # steps done when each epoch ended


def step(jpegs, labels, rng):
    images = ndd.decoders.image(jpegs, output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=B, range=[-20, 20], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    return np.array(ndd.as_tensor(labels)).ravel().tolist(), np.array(ndd.as_tensor(images))


def train(reader, rng, capture, epochs, run=None, hook=None) -> Run:
    """``epochs`` epochs; ``hook(steps_done, between_epochs)`` returning True stops (a crash)."""
    run = run if run is not None else Run()
    for _ in range(epochs):
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            run.steps.append(step(jpegs, labels, rng))
            if hook is not None and hook(len(run.steps), False):
                return run
        run.ends.append(len(run.steps))
        if hook is not None and hook(len(run.steps), True):
            return run
    return run


def assert_continues(run: Run, ref: Run, k: int) -> None:
    """``run`` (checkpointed after ``k`` steps) equals ``ref`` step by step and epoch by epoch."""
    assert [s[0] for s in run.steps] == [s[0] for s in ref.steps]
    for (_, a), (_, b) in zip(run.steps, ref.steps):
        np.testing.assert_array_equal(a, b)
    assert [e for e in run.ends if e > k] == [e for e in ref.ends if e > k]


def reference(path, config) -> Run:
    return train(ndd.readers.Caffe2(path=path, **config), ndd.random.RNG(11), False, EPOCHS)


def checkpoint_at(ref: Run, where: str) -> tuple[int, bool]:
    """(steps done, between epochs) of a checkpoint position."""
    first = ref.ends[0]
    return {"mid-epoch": (1, False), "last-step": (first, False), "between-epochs": (first, True),
            "after-boundary": (first + 1, False)}[where]


def crash_and_resume(path, config, before, after, ref, k, between, pattern) -> Run:
    """Train with ``capture=before`` until the checkpoint after step ``k``, save it and
    stop; then a fresh reader and RNG load it and train with ``capture=after`` to the end."""
    reader, rng = ndd.readers.Caffe2(path=path, **config), ndd.random.RNG(11)
    ck = Checkpoint()
    ck.register(reader, "reader")
    ck.register(rng, "rng")

    def hook(done, between_epochs):
        if (done, between_epochs) != (k, between):
            return False
        ck.collect()
        ck.save(pattern)
        return True

    run = train(reader, rng, before, EPOCHS, hook=hook)
    del reader, rng, ck  # the process dies

    reader, rng = ndd.readers.Caffe2(path=path, **config), ndd.random.RNG(999)
    ck = Checkpoint()
    ck.load(pattern)
    ck.register(reader, "reader")
    ck.register(rng, "rng")
    return train(reader, rng, after, sum(e > k for e in ref.ends), run)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["mid-epoch", "last-step", "between-epochs", "after-boundary"])
@pytest.mark.parametrize("config", CONFIGS)
def test_resume_matches_uninterrupted_run(lmdb_path, tmp_path, config, where, mode):
    ref = reference(lmdb_path, CONFIGS[config])
    k, between = checkpoint_at(ref, where)
    run = crash_and_resume(lmdb_path, CONFIGS[config], *MODES[mode], ref, k, between,
                           str(tmp_path / "ckpt_{seq:04d}.json"))
    assert_continues(run, ref, k)


@pytest.mark.parametrize("capture", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("config", ["plain", "shuffled", "padded"])
def test_restore_into_the_same_iterated_reader(lmdb_path, config, capture):
    """Collect, keep training past the checkpoint (into the next epoch), then ``restore()``
    the same reader and RNG: the run continues from the checkpoint."""
    ref = reference(lmdb_path, CONFIGS[config])
    k = ref.ends[0] - 1
    reader, rng = ndd.readers.Caffe2(path=lmdb_path, **CONFIGS[config]), ndd.random.RNG(11)
    ck = Checkpoint()
    saved: list = []

    def hook(done, between_epochs):
        if done == 1 and not between_epochs:
            ck.register(reader, "reader")  # registered mid-run, after iteration began
            ck.register(rng, "rng")
        if done == k and not between_epochs:
            ck.collect()
            saved.extend([list(run.steps), list(run.ends)])
        return done == k + 3

    run = Run()
    train(reader, rng, capture, EPOCHS, run, hook)
    assert len(run.steps) == k + 3 and len(run.ends) == 1  # went past the epoch boundary
    ck.restore()  # collected states are clean: nothing to apply
    ck.deserialize(ck.serialize())
    ck.restore()
    resumed = Run(*saved)
    train(reader, rng, capture, sum(e > k for e in ref.ends), resumed)
    assert_continues(resumed, ref, k)


def test_per_rank_files(lmdb_path, tmp_path):
    """Two ranks read shards 0 and 1 of 2, each checkpointing to its own files
    (``f"ckpt/rank{rank}_" + "{seq:04d}.json"``); both restart from their latest file."""
    config = dict(num_shards=2, random_shuffle=True, seed=5, initial_fill=8)
    crash_at = {0: 4, 1: 5}

    def pattern(rank):
        return str(tmp_path / "ckpt" / f"rank{rank}_") + "{seq:04d}.json"

    refs, runs = {}, {}
    for rank in (0, 1):
        reader = ndd.readers.Caffe2(path=lmdb_path, shard_id=rank, **config)
        refs[rank] = train(reader, ndd.random.RNG(rank), False, EPOCHS)

        reader, rng = ndd.readers.Caffe2(path=lmdb_path, shard_id=rank, **config), ndd.random.RNG(rank)
        ck = Checkpoint()
        ck.register(reader, "reader")
        ck.register(rng, "rng")

        def hook(done, between_epochs, ck=ck, rank=rank):
            if not between_epochs:
                ck.collect()
                ck.save(pattern(rank))  # a checkpoint after every step
            return done == crash_at[rank]

        runs[rank] = train(reader, rng, rank == 1, EPOCHS, hook=hook)
    files = sorted(os.listdir(tmp_path / "ckpt"))
    assert files == [f"rank0_{i:04d}.json" for i in range(4)] + [f"rank1_{i:04d}.json" for i in range(5)]

    for rank in (0, 1):  # the restart
        reader, rng = ndd.readers.Caffe2(path=lmdb_path, shard_id=rank, **config), ndd.random.RNG()
        ck = Checkpoint()
        assert ck.load(pattern(rank)).endswith(f"rank{rank}_{crash_at[rank] - 1:04d}.json")
        ck.register(reader, "reader")
        ck.register(rng, "rng")
        k = crash_at[rank]
        train(reader, rng, rank == 0, sum(e > k for e in refs[rank].ends), runs[rank])
        assert_continues(runs[rank], refs[rank], k)
    assert refs[0].steps[0][0] != refs[1].steps[0][0]  # the shards differ


def test_current_checkpoint_in_a_captured_loop(lmdb_path):
    """``ndd.checkpoint.current()`` works inside a captured loop body."""
    ref = reference(lmdb_path, {})
    reader, rng = ndd.readers.Caffe2(path=lmdb_path), ndd.random.RNG(11)
    ck = ndd.checkpoint.current()
    ck.register(reader)
    ck.register(rng)

    def hook(done, between_epochs):
        if done == 2:
            ndd.checkpoint.current().collect()
        return done == 2

    run = train(reader, rng, True, EPOCHS, hook=hook)
    data = ck.serialize()
    ck.clear()
    ck.deserialize(data)
    reader, rng = ndd.readers.Caffe2(path=lmdb_path), ndd.random.RNG(0)
    assert (ck.register(reader), ck.register(rng)) == ("__op_0", "__op_1")
    train(reader, rng, True, sum(e > 2 for e in ref.ends), run)
    assert_continues(run, ref, 2)


@pytest.mark.parametrize("capture", [False, True])
def test_an_rng_restored_alone_between_epochs(lmdb_path, capture):
    """A checkpoint holding only the RNG, restored after each epoch: every epoch draws the
    same angles, in capture mode as in eager mode (ours: DALI's capture mode raises)."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    rng = ndd.random.RNG(11)
    ck = Checkpoint()
    ck.register(rng, "rng")
    ck.collect()
    saved = ck.serialize()
    angles = []
    for _ in range(3):
        epoch = []
        for jpegs, _labels in reader.next_epoch(batch_size=4, capture=capture):
            a = ndd.random.uniform(batch_size=4, range=[-20.0, 20.0], rng=rng)
            ndd.rotate(ndd.decoders.image(jpegs, output_type=types.GRAY), angle=a, keep_size=True).evaluate()
            epoch.append(np.asarray(ndd.as_tensor(a)).tolist())
        angles.append(epoch)
        ck.deserialize(saved)
        ck.restore()
    assert len(angles[0]) > 1 and angles[0] == angles[1] == angles[2]
