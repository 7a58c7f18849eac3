"""Distributed throughput: examples/ddp_mnist.py under torchrun with 1 and 2 ranks.

Prints samples/s per rank and in total (the sum over ranks) for each world size, from
the steady epochs (the first epoch, with capture's trace, is left out). Every rank
trains on its own shard with batch ``--batch-size``; padded samples count. On a machine
with few cores the ranks compete for them: the total is what the machine sustains.

    python benchmarks/bench_distributed.py [--ranks 1 2] [--epochs 3] [--count 20000]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ddp_mnist.py"
RANK_LINE = re.compile(r"\[rank (\d+)\] (\d+) samples in ([\d.]+) s: ([\d,]+) samples/s")
TOTAL_LINE = re.compile(r"total over (\d+) ranks: ([\d,]+) samples/s")


def run(ranks: int, a: argparse.Namespace) -> tuple[dict[int, float], float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
           str(EXAMPLE), "--data", str(a.data), "--data-count", str(a.count), "--epochs", str(a.epochs),
           "--batch-size", str(a.batch_size), "--torch-threads", str(a.torch_threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(a.torch_threads)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        sys.exit(f"{ranks} rank(s) failed (exit {r.returncode}):\n{out[-4000:]}")
    per_rank = {int(m[1]): float(m[4].replace(",", "")) for m in RANK_LINE.finditer(out)}
    total = TOTAL_LINE.search(out)
    if total is None or len(per_rank) != ranks:
        sys.exit(f"could not parse the output of {ranks} rank(s):\n{out[-4000:]}")
    return per_rank, float(total[2].replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=pathlib.Path, default=ROOT / "data" / "mnist_lmdb",
                   help="Caffe2 LMDB (built if missing)")
    p.add_argument("--count", type=int, default=20000, help="records when building the dataset")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--epochs", type=int, default=3, help="the first is warm-up and not measured")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--timeout", type=float, default=1800)
    a = p.parse_args(argv)
    print(f"ddp_mnist.py, batch {a.batch_size} per rank, {a.epochs} epochs (first not measured), "
          f"{os.cpu_count()} CPUs")
    print(f"{'ranks':>5}  {'per rank (samples/s)':<32}  {'total samples/s':>15}")
    for n in a.ranks:
        per_rank, total = run(n, a)
        ranks = ", ".join(f"{per_rank[r]:,.0f}" for r in sorted(per_rank))
        print(f"{n:>5}  {ranks:<32}  {total:>15,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
