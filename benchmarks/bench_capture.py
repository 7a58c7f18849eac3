"""Capture vs eager on the tutorial's MNIST-like loop (``nox -s bench_capture``).

Caffe2 reader → decoders.image (GRAY) → random.uniform → rotate → crop_mirror_normalize
→ labels squeeze/cast → .torch(), batch 64; with and without the tutorial's small
training step. Prints samples/s (median of the timed epochs) for eager mode, capture
with the pipeline on threads, and capture with its default worker processes, the ratio of
the default capture to eager, the cost of the traced step, and the main-thread cost of a
replayed op call.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import ndd
import ndd.types as types

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from make_demo_dataset import build  # noqa: E402

B = 64
_body_time = [0.0, 0]


def preprocess(jpegs, labels, rng):
    t0 = time.perf_counter()
    images = ndd.decoders.image(jpegs, output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=B, range=[-7.5, 7.5], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    images = ndd.crop_mirror_normalize(images, dtype=ndd.float32, output_layout="CHW",
                                       mean=[0.1307 * 255], std=[0.3081 * 255])
    labels = ndd.cast(ndd.squeeze(labels, axes=0), dtype=ndd.int64)
    _body_time[0] += time.perf_counter() - t0
    _body_time[1] += 1
    return images.torch(), labels.torch()


def run(path: str, capture: bool, train: bool, epochs: int) -> tuple[list[float], float, float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    reader = ndd.readers.Caffe2(path=path, random_shuffle=False)
    rng = ndd.random.RNG(0)
    rates, first_step = [], 0.0
    for epoch in range(epochs):
        n, t0 = 0, time.perf_counter()
        t_step = t0
        _body_time[:] = [0.0, 0]
        for step, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=B, capture=capture)):
            images, targets = preprocess(jpegs, labels, rng)
            if train:
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(images), targets)
                loss.backward()
                opt.step()
            n += targets.numel()
            if epoch == 0 and step == 0:
                first_step = time.perf_counter() - t_step
        rates.append(n / (time.perf_counter() - t0))
    body_us = _body_time[0] / max(_body_time[1], 1) * 1e6
    return rates, first_step * 1e3, body_us


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(ROOT / "data" / "mnist_lmdb"))
    p.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is warm-up")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch intra-op threads (default 1: on a 2-core machine the loader's threads "
                        "need the cores, and torch's spinning OpenMP threads slow a tiny model ~10x)")
    a = p.parse_args()
    torch.set_num_threads(a.torch_threads)
    if not (pathlib.Path(a.data) / "data.mdb").exists():
        build(pathlib.Path(a.data))
    procs = ndd.capture.default_worker_processes()
    print(f"MNIST-like loop, batch {B}, {a.epochs - 1} timed epochs (median), torch threads "
          f"{torch.get_num_threads()}, ndd threads {ndd.get_num_threads()}; capture pipeline on "
          f"threads, then on {procs} worker process(es) (the default here)")
    print(f"{'variant':<16}{'eager smp/s':>13}{'capture thr':>13}{'capture proc':>14}{'ratio':>8}"
          f"{'trace step ms':>15}{'eager step ms':>15}{'body µs/call e|c':>19}")
    for train in (False, True):
        e_rates, e_first, e_body = run(a.data, False, train, a.epochs)
        ndd.capture.set_worker_processes(0)
        t_rates, _, _ = run(a.data, True, train, a.epochs)
        ndd.capture.set_worker_processes(None)
        c_rates, c_first, c_body = run(a.data, True, train, a.epochs)
        e, t, c = (statistics.median(r[1:]) for r in (e_rates, t_rates, c_rates))
        name = "with training" if train else "no training"
        print(f"{name:<16}{e:>13,.0f}{t:>13,.0f}{c:>14,.0f}{c / e:>8.2f}{c_first:>15.1f}"
              f"{B / e * 1e3:>15.2f}{e_body / 6:>10.1f} | {c_body / 6:<7.1f}")


if __name__ == "__main__":
    main()
