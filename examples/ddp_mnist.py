"""The MNIST-like training loop with DistributedDataParallel under torchrun.

Each rank reads its own shard of the Caffe2 LMDB (``ndd.readers.shard_args()``), runs
the tutorial's pipeline in capture mode (GRAY decode → random rotation → crop_mirror_normalize)
and trains a small MLP with SGD wrapped in DDP (gloo on CPU, nccl with CUDA)::

    torchrun --standalone --nproc-per-node 2 examples/ddp_mnist.py --epochs 2

* ``pad_last_batch=True`` and ``stick_to_shard=True``: every rank runs the same number
  of steps per epoch (the shorter shard repeats its last sample), so DDP's all-reduce
  never waits for a rank that has finished.
* Every ``--ckpt-every`` steps each rank saves its reader and RNG with
  ``ndd.checkpoint`` (``<ckpt-dir>/rank<r>_<seq>.json``) and the model/optimizer with
  ``torch.save`` next to it (``rank<r>_<seq>.pt``). A restart resumes from the latest
  step that every rank saved and then yields exactly the batches (and random angles)
  the uninterrupted run would have.
* ``--steps-limit N`` stops after N steps in total, without a final checkpoint, which
  simulates a kill.
* ``--log-dir D`` writes what each step saw to ``D/rank<r>.jsonl`` (one JSON line per
  step: global step, epoch, CRC32 of each encoded sample, labels, loss), which the
  tests compare across runs.

The reader is built before ``init_process_group``: a world larger than the dataset
fails on every rank with a clear message before any collective starts.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pathlib
import sys
import time
import zlib

import numpy as np

import ndd
import ndd.types as types

PROGRESS = "progress"


class Progress:
    """The training position (global step), saved in the ndd checkpoint next to the
    reader and RNG: anything with ``get_state``/``set_state`` can be registered."""

    def __init__(self) -> None:
        self.step = 0

    def get_state(self) -> str:
        return json.dumps({"step": self.step})

    def set_state(self, state: str) -> None:
        self.step = int(json.loads(state)["step"])


def preprocess(jpegs, labels, rng, batch_size):
    images = ndd.decoders.image(jpegs, output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=batch_size, range=[-7.5, 7.5], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    images = ndd.crop_mirror_normalize(
        images, dtype=ndd.float32, output_layout="CHW", mean=[0.1307 * 255], std=[0.3081 * 255]
    )
    labels = ndd.squeeze(labels, axes=0)
    labels = ndd.cast(labels, dtype=ndd.int64)
    return images.torch(), labels.torch()


def ensure_dataset(path: pathlib.Path, count: int) -> None:
    """Build the dataset if it is missing; one rank builds while the others wait on a
    file lock (no collective: the process group does not exist yet)."""
    if (path / "data.mdb").exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (path / "data.mdb").exists():
                from make_demo_dataset import build

                tmp = path.with_name(path.name + f".tmp{os.getpid()}")
                build(tmp, n=count)
                os.replace(tmp, path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -- checkpoints -------------------------------------------------------------------------
def _complete_checkpoints(ckpt_dir: pathlib.Path, rank: int) -> dict[int, pathlib.Path]:
    """``{step: json path}`` of this rank's checkpoints whose torch file also exists."""
    out = {}
    for js in sorted(ckpt_dir.glob(f"rank{rank}_*.json")):
        if not js.with_suffix(".pt").exists():
            continue  # killed between the two saves
        try:
            progress = Progress()
            progress.set_state(json.loads(js.read_text())["states"][PROGRESS]["state"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not one of ours, or damaged
        out[progress.step] = js
    return out


def agree_on_checkpoint(ckpt_dir: pathlib.Path, rank: int, dist) -> pathlib.Path | None:
    """The checkpoint of the latest step that *every* rank saved completely (ranks run
    in lock-step, but a kill can land between two ranks' saves), or None."""
    mine = _complete_checkpoints(ckpt_dir, rank)
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, sorted(mine))
    common = set(everyone[0]).intersection(*map(set, everyone[1:]))
    return mine[max(common)] if common else None


def save_checkpoint(ckpt, pattern: str, model, opt, keep: int = 2) -> str:
    import torch

    ckpt.collect()  # reader: the batch the loop receives next; RNG: its position
    path = pathlib.Path(ckpt.save(pattern))
    tmp = path.with_suffix(".pt.tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
    os.replace(tmp, path.with_suffix(".pt"))  # the checkpoint is complete from here on
    old = sorted(path.parent.glob(path.name.split("_")[0] + "_*.json"))[:-keep]
    for js in old:
        js.with_suffix(".pt").unlink(missing_ok=True)
        js.unlink(missing_ok=True)
    return str(path)


# -- the loop -----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=pathlib.Path, default=pathlib.Path("data/mnist_lmdb"),
                   help="Caffe2 LMDB of MNIST-like JPEGs (built if missing)")
    p.add_argument("--data-count", type=int, default=20000, help="records when building the dataset")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--ckpt-dir", type=pathlib.Path, default=None,
                   help="per-rank checkpoints (resumed from when present); none if omitted")
    p.add_argument("--ckpt-every", type=int, default=50, help="steps between checkpoints")
    p.add_argument("--steps-limit", type=int, default=None,
                   help="stop after this many steps in total, without a final checkpoint (a simulated kill)")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch intra-op threads per rank (1 leaves the cores to the data pipelines)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-dir", type=pathlib.Path, default=None,
                   help="write per-step sample ids, labels and losses to <log-dir>/rank<r>.jsonl")
    a = p.parse_args(argv)

    rank, world = ndd.readers.shard_args().values()  # torchrun's RANK / WORLD_SIZE
    ensure_dataset(a.data, a.data_count)

    # 1. The reader, before any collective: a world larger than the dataset fails here,
    #    on every rank, and torchrun reports it instead of hanging in a rendezvous.
    try:
        reader = ndd.readers.Caffe2(path=str(a.data), pad_last_batch=True, stick_to_shard=True,
                                    random_shuffle=True, seed=a.seed, **ndd.readers.shard_args())
    except ValueError as e:
        print(f"[rank {rank}] cannot shard {a.data} over {world} ranks: {e}", file=sys.stderr, flush=True)
        return 2
    meta = reader.get_metadata()
    steps_per_epoch = -(-(meta["epoch_size_padded"] // world) // a.batch_size)

    # 2. The process group and the model.
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.torch_threads)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    assert (dist.get_rank(), dist.get_world_size()) == (rank, world)
    device = torch.device("cuda") if cuda else torch.device("cpu")

    torch.manual_seed(a.seed)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    rng = ndd.random.RNG(a.seed * 1000 + rank)  # different augmentations per rank
    progress = Progress()

    # 3. Resume from the latest checkpoint every rank has.
    ckpt = ndd.checkpoint.Checkpoint()
    pattern = None
    if a.ckpt_dir is not None:
        a.ckpt_dir.mkdir(parents=True, exist_ok=True)
        pattern = str(a.ckpt_dir / f"rank{rank}_") + "{seq:06d}.json"
        found = agree_on_checkpoint(a.ckpt_dir, rank, dist)
        if found is not None:
            ckpt.deserialize(found.read_text())  # applied as each object is registered
            state = torch.load(found.with_suffix(".pt"), map_location=device)
            net.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
    ckpt.register(reader, "reader")
    ckpt.register(rng, "rng")
    ckpt.register(progress, PROGRESS)
    if progress.step:
        print(f"[rank {rank}] resumed at step {progress.step} from {found}", flush=True)
    model = DDP(net)

    log = open(a.log_dir / f"rank{rank}.jsonl", "a") if a.log_dir is not None else None
    per_epoch: list[tuple[int, float]] = []  # (samples, seconds) of each epoch run here
    stopped, loss = False, float("nan")
    for epoch in range(progress.step // steps_per_epoch, a.epochs):
        t0, samples = time.perf_counter(), 0
        # Continues an interrupted epoch after a resume (the reader knows where it was).
        for jpegs, labels in reader.next_epoch(batch_size=a.batch_size, capture=True):
            images, targets = preprocess(jpegs, labels, rng, a.batch_size)
            images, targets = images.to(device), targets.to(device)
            opt.zero_grad(set_to_none=True)
            out = F.cross_entropy(model(images), targets)
            out.backward()  # DDP all-reduces the gradients here
            opt.step()
            progress.step += 1
            samples += targets.numel()
            loss = out.item()
            if log is not None:
                log.write(json.dumps({
                    "step": progress.step, "epoch": epoch,
                    "ids": [zlib.crc32(np.asarray(t)) for t in jpegs],
                    "labels": targets.tolist(), "loss": loss,
                    "pixels": float(images.double().sum()),
                }) + "\n")
                log.flush()
            if pattern is not None and progress.step % a.ckpt_every == 0:
                save_checkpoint(ckpt, pattern, net, opt)
            if a.steps_limit is not None and progress.step >= a.steps_limit:
                stopped = True
                break
        per_epoch.append((samples, time.perf_counter() - t0))
        if stopped:
            break

    # 4. Throughput: per rank, and the total over ranks (one last collective). The first
    #    epoch (capture's trace, warm-up) is left out when later ones ran. Padded samples
    #    count: the rank processed them.
    steady = per_epoch[1:] if len(per_epoch) > 1 else per_epoch
    samples, seconds = sum(n for n, _ in steady), sum(t for _, t in steady)
    rate = samples / seconds if seconds else 0.0
    total = torch.tensor([rate], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    print(f"[rank {rank}] {samples} samples in {seconds:.2f} s: {rate:,.0f} samples/s, "
          f"final loss {loss:.4f}", flush=True)
    if rank == 0:
        print(f"total over {world} ranks: {total.item():,.0f} samples/s"
              + (f" (stopped at step {progress.step})" if stopped else ""), flush=True)
    if log is not None:
        log.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
