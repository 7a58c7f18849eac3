"""Distributed training under torchrun (issue 10): examples/ddp_mnist.py on CPU with gloo.

Each run is ``python -m torch.distributed.run --standalone --nproc-per-node N`` over a
tiny Caffe2 LMDB built in a temporary directory; the example writes what every step saw
(CRC32 of each encoded sample, labels, loss, a pixel checksum) to ``rank<r>.jsonl``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import zlib

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("ndd_readers")
pytest.importorskip("ndd_checkpoint")
pytest.importorskip("ndd_capture")
pytest.importorskip("cv2")

import ndd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ddp_mnist.py"
BATCH = 4
TIMEOUT = 150  # seconds for one torchrun invocation; a hang fails the test instead of CI


def _records(n: int) -> list[int]:
    """Build nothing; the CRC32s of the ``n`` records make_demo_dataset writes."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from make_demo_dataset import records
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return [zlib.crc32(jpeg) for jpeg, _ in records(n, 0)]


def _build(path: pathlib.Path, n: int) -> list[int]:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from make_demo_dataset import build
    finally:
        sys.path.remove(str(ROOT / "examples"))
    build(path, n=n)
    ids = _records(n)
    assert len(set(ids)) == n, "the test needs distinct records"
    return ids


def torchrun(nproc: int, *args: str | os.PathLike, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run the example under torchrun; kill the whole process group on timeout."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           str(EXAMPLE), *map(str, args)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"torchrun did not finish in {timeout} s (a hang?):\n{out[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, None)


def run_ok(nproc: int, *args) -> str:
    r = torchrun(nproc, *args)
    assert r.returncode == 0, r.stdout[-6000:]
    return r.stdout


def read_logs(log_dir: pathlib.Path, world: int) -> list[list[dict]]:
    return [[json.loads(line) for line in (log_dir / f"rank{r}.jsonl").read_text().splitlines()]
            for r in range(world)]


def by_epoch(steps: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for s in steps:
        out.setdefault(s["epoch"], []).extend(s["ids"])
    return out


def check_padding(ids: list[int]) -> int:
    """The distinct samples of one rank's epoch come first; the rest repeat the last one.
    Returns the number of distinct samples."""
    distinct = list(dict.fromkeys(ids))
    k = len(distinct)
    assert ids[:k] == distinct, "a sample was repeated before the shard was exhausted"
    assert all(i == ids[k - 1] for i in ids[k:]), "padding must repeat the shard's last sample"
    return k


# -- the helper (no torchrun) ------------------------------------------------------------
def test_shard_args_from_environment(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert ndd.readers.shard_args() == {"shard_id": 0, "num_shards": 1}
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert ndd.readers.shard_args() == {"shard_id": 1, "num_shards": 3}
    monkeypatch.setenv("RANK", "3")
    with pytest.raises(ValueError, match="RANK=3 and WORLD_SIZE=3"):
        ndd.readers.shard_args()
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(ValueError, match="WORLD_SIZE is not set"):
        ndd.readers.shard_args()


def test_shard_args_from_torch_distributed(monkeypatch, tmp_path):
    import torch.distributed as dist

    monkeypatch.setenv("RANK", "5")  # the initialised process group wins over the environment
    monkeypatch.setenv("WORLD_SIZE", "7")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert ndd.readers.shard_args() == {"shard_id": 0, "num_shards": 1}
    finally:
        dist.destroy_process_group()


def test_shard_args_with_a_reader(monkeypatch, tmp_path):
    ids = _build(tmp_path / "db", 5)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    r = ndd.readers.Caffe2(path=str(tmp_path / "db"), pad_last_batch=True, **ndd.readers.shard_args())
    meta = r.get_metadata()
    assert (meta["shard_id"], meta["number_of_shards"], meta["epoch_size_padded"]) == (1, 2, 6)
    got = [zlib.crc32(np.asarray(j)) for j, _ in r.next_epoch()]
    assert got == ids[2:5]
    monkeypatch.setenv("WORLD_SIZE", "6")
    with pytest.raises(ValueError, match="larger than the dataset"):
        ndd.readers.Caffe2(path=str(tmp_path / "db"), **ndd.readers.shard_args())


# -- torchrun ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def data50(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "db50"
    return path, _build(path, 50)


@pytest.fixture(scope="module")
def full_run(data50, tmp_path_factory):
    """Two ranks, two epochs, checkpoints every 4 steps, never interrupted."""
    path, ids = data50
    d = tmp_path_factory.mktemp("full")
    out = run_ok(2, "--data", path, "--batch-size", BATCH, "--epochs", 2, "--ckpt-dir", d / "ckpt",
                 "--ckpt-every", 4, "--log-dir", d)
    return read_logs(d, 2), out


def test_ranks_partition_each_epoch(data50, full_run):
    _, ids = data50
    logs, out = full_run
    assert "total over 2 ranks:" in out and out.count("samples/s") >= 3
    # 25 samples per shard -> 7 steps of 4 per epoch on both ranks, 14 in all
    assert [[s["step"] for s in log] for log in logs] == [list(range(1, 15))] * 2
    for epoch in (0, 1):
        shards = [set(by_epoch(log)[epoch]) for log in logs]
        assert [check_padding(by_epoch(log)[epoch]) for log in logs] == [25, 25]
        assert not shards[0] & shards[1], f"epoch {epoch}: the ranks share samples"
        assert shards[0] | shards[1] == set(ids), f"epoch {epoch}: the ranks miss samples"
    # stick_to_shard: each rank keeps its shard; DALI's contiguous split of the records
    assert set(by_epoch(logs[0])[0]) == set(by_epoch(logs[0])[1]) == set(ids[:25])
    # random_shuffle: a new order each epoch
    assert by_epoch(logs[0])[0] != by_epoch(logs[0])[1]


def test_kill_and_resume_reproduces_the_batches(data50, full_run, tmp_path):
    path, _ = data50
    reference, _ = full_run
    args = ["--data", path, "--batch-size", BATCH, "--epochs", 2, "--ckpt-dir", tmp_path / "ckpt",
            "--ckpt-every", 4, "--log-dir", tmp_path]
    killed = run_ok(2, *args, "--steps-limit", 10)  # mid-epoch 1; last checkpoint after step 8
    assert "stopped at step 10" in killed
    resumed = run_ok(2, *args)
    assert "resumed at step 8" in resumed
    for rank, log in enumerate(read_logs(tmp_path, 2)):
        steps = [s["step"] for s in log]
        assert steps == list(range(1, 11)) + list(range(9, 15)), steps
        ref = {s["step"]: s for s in reference[rank]}
        for s in log:  # same samples, same random angles (pixels), same model (loss)
            assert s == ref[s["step"]], f"rank {rank} step {s['step']} differs from the uninterrupted run"


def test_uneven_shards_pad_like_dali(tmp_path):
    path = tmp_path / "db51"
    ids = _build(path, 51)
    run_ok(2, "--data", path, "--batch-size", BATCH, "--epochs", 1, "--log-dir", tmp_path)
    logs = read_logs(tmp_path, 2)
    # padded epoch 52 -> 26 per shard -> 7 steps of 4 on both ranks (no rank waits)
    assert [len(log) for log in logs] == [7, 7]
    seqs = [by_epoch(log)[0] for log in logs]
    assert [check_padding(s) for s in seqs] == [25, 26]  # shard 0 holds 25 records, shard 1 26
    assert set(seqs[0]) == set(ids[:25]) and set(seqs[1]) == set(ids[25:])


def test_more_ranks_than_samples_fails_clearly(tmp_path):
    path = tmp_path / "db3"
    _build(path, 3)
    r = torchrun(4, "--data", path, "--batch-size", BATCH, "--epochs", 1, timeout=120)
    assert r.returncode != 0, r.stdout[-4000:]
    # Every rank fails at reader construction; torchrun stops the others when the first
    # one exits, so how many of them get to print first is a race: at least one does.
    assert re.search(r"\[rank \d\] cannot shard", r.stdout), r.stdout[-4000:]
    assert "num_shards=4 is larger than the dataset (3 samples)" in r.stdout
    assert "samples/s" not in r.stdout
