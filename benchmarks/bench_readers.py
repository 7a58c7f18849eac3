"""Reader throughput: ndd.readers.Caffe2 and ndd.readers.File against plain Python loops.

Reads the demo dataset (MNIST-like JPEGs in a Caffe2 LMDB; built by
``examples/make_demo_dataset.py`` when missing) with ``reader.next_epoch(batch_size=64)``
and nothing in the loop body, and the same records with a plain loop: an LMDB cursor
that collects raw values in lists of 64 (no parsing). The JPEGs are then written out as
files in a temporary directory (one sub-folder per label, 10 classes) and read with
``ndd.readers.File(file_root=...)`` and with a plain ``open``/``read`` loop over the same
files. Prints samples/s (median of the timed epochs) and the reader's per-batch
overhead: its µs per batch minus the plain loop's. Run with ``python
benchmarks/bench_readers.py`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import ndd

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from make_demo_dataset import build  # noqa: E402

# LMDB allows one open environment per path and process: share the readers' one.
from ndd_readers._caffe2 import _open_env, _release_env, parse_caffe2_record  # noqa: E402


def rates(epoch: Callable[[], int], epochs: int) -> list[float]:
    """Samples/s of each call of ``epoch`` (which returns the samples it read)."""
    out = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        n = epoch()
        out.append(n / (time.perf_counter() - t0))
    return out


def reader_epoch(reader: ndd.Reader, batch: int) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for _outs in reader.next_epoch(batch_size=batch):
            n += batch
        return n
    return run


def plain_lmdb_epoch(path: str, batch: int) -> Callable[[], int]:
    def run() -> int:
        env = _open_env(path)
        n = 0
        values: list[bytes] = []
        with env.begin() as txn:
            for _key, value in txn.cursor():
                values.append(value)
                if len(values) == batch:
                    n += batch
                    values = []
        _release_env(path)
        return n + len(values)
    return run


def plain_files_epoch(paths: list[str], batch: int) -> Callable[[], int]:
    def run() -> int:
        n = 0
        data: list[bytes] = []
        for p in paths:
            with open(p, "rb") as f:
                data.append(f.read())
            if len(data) == batch:
                n += batch
                data = []
        return n + len(data)
    return run


def write_tree(lmdb_path: str, root: str) -> list[str]:
    """The LMDB's JPEGs as ``root/<label>/<index>.jpg``; returns the paths sorted as the
    File reader lists them."""
    env = _open_env(lmdb_path)
    for d in range(10):
        os.makedirs(os.path.join(root, str(d)), exist_ok=True)
    paths = []
    with env.begin() as txn:
        for i, (_key, value) in enumerate(txn.cursor()):
            img, label = parse_caffe2_record(value)
            rel = os.path.join(str(int(label[0])), f"{i:06d}.jpg")
            with open(os.path.join(root, rel), "wb") as f:
                f.write(img.tobytes())
            paths.append(rel)
    _release_env(lmdb_path)
    return [os.path.join(root, p) for p in sorted(paths)]


def report(name: str, reader: list[float], plain: list[float], batch: int) -> None:
    r, p = statistics.median(reader[1:]), statistics.median(plain[1:])
    r_us, p_us = batch / r * 1e6, batch / p * 1e6
    print(f"{name:<8}{r:>15,.0f}{p:>15,.0f}{r / p:>8.2f}{r_us:>13.0f}{p_us:>13.0f}{r_us - p_us:>13.0f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(ROOT / "data" / "mnist_lmdb"), help="the demo Caffe2 LMDB")
    p.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is warm-up")
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    if a.epochs < 2:
        p.error("--epochs must be at least 2 (the first is warm-up)")
    if not (pathlib.Path(a.data) / "data.mdb").exists():
        build(pathlib.Path(a.data))
    b = a.batch
    print(f"readers, batch {b}, {a.epochs - 1} timed epochs (median), nothing in the loop body")
    print(f"{'reader':<8}{'ndd smp/s':>15}{'plain smp/s':>15}{'ratio':>8}"
          f"{'ndd µs/batch':>13}{'plain µs/b':>13}{'overhead µs':>13}")
    reader = ndd.readers.Caffe2(path=a.data)
    report("Caffe2", rates(reader_epoch(reader, b), a.epochs), rates(plain_lmdb_epoch(a.data, b), a.epochs), b)
    with tempfile.TemporaryDirectory(prefix="ndd-bench-files-") as root:
        paths = write_tree(a.data, root)
        reader = ndd.readers.File(file_root=root)
        report("File", rates(reader_epoch(reader, b), a.epochs), rates(plain_files_epoch(paths, b), a.epochs), b)


if __name__ == "__main__":
    main()
