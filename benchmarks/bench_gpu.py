"""GPU benchmark (``nox -s gpu``, ``scripts/gpu-check.sh``): one table of samples/s.

* The training step alone on ready device tensors: the ceiling for any loader here.
* The capture-mode tutorial's MNIST-like loop with training, batch 64 (Caffe2 reader →
  decoders.image GRAY → random rotation → crop_mirror_normalize → MLP + SGD), eager and
  captured, preprocessing on the CPU and on the GPU (the model on the GPU in all), the
  captured GPU loop on threads and split across worker processes (the default), its GPU part
  kernel by kernel (on a thread of its own, the default there) and as one device graph (the
  default), on a thread of its own, on the loop's thread (the default for a graph) and on
  the loop's thread four steps a replay (``ndd.capture.set_graph_steps(4)``); those three
  rows run ``--repeat`` times, interleaved, and the table gives their median and each run.
  Each loop row also gives the tutorial's own measure, the mean over the timed epochs (the
  tutorial times epochs 2-10: ``--epochs 10``). The tutorial's figures for DALI on its GPU:
  25,713 samples/s eager, 41,392 captured.
* The same loop with more augmentations (random brightness and contrast, blur, random
  resized crop and mirror), captured on the GPU as one device graph and kernel by kernel.
* The CPU cost of each operator call of the tutorial's GPU step.
* box_encoder with SSD's 8,732 anchors, samples/s on the CPU and on the GPU.
* decoders.image on batches of 256x256 RGB JPEGs, images/s: the CPU decoder
  (libjpeg-turbo on the thread pool) vs device="gpu" (nvJPEG's batched decoder), and
  the pixel difference between the two; on a GPU, torchvision's decoder alone and two rows
  that split ndd's cost over it (torchvision plus the HWC batch; ndd without the executor).

``--criterion`` runs only the ceiling and the interleaved device-graph rows (the figure the
H200 must beat), with more of the lent machine's minutes for their repeats.
``--quick`` runs a small version (also on the CPU emulation, NDD_CUDA_EMULATE=cpu, to check
that the script works on a machine without a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import ndd
import ndd.types as types

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

B = 64
TUTORIAL = {"eager": 25_713, "capture": 41_392}


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _dataset(quick: bool) -> pathlib.Path:
    default = ROOT / "data" / "mnist_lmdb"
    if not quick and (default / "data.mdb").exists():
        return default
    from make_demo_dataset import build

    path = pathlib.Path(tempfile.gettempdir()) / f"ndd-bench-gpu-mnist-{'quick' if quick else 'full'}"
    if not (path / "data.mdb").exists():
        build(path, n=2048 if quick else 20000, tree=path.parent / (path.name + "-files"))
    return path


class TutorialMLP(torch.nn.Module):
    """The tutorial's classifier as it writes it (two linear layers; flatten and ReLU as plain
    calls): an ``nn.Sequential`` of the same layers costs the loop's thread a few more module
    calls per step, which the tutorial's figures do not include."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(28 * 28, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(torch.flatten(images, start_dim=1))))


def _to_model(images: ndd.Batch, labels: ndd.Batch, device: str):
    """The tutorial's last calls: normalised CHW float images and int64 labels for torch."""
    images = ndd.crop_mirror_normalize(images, dtype=ndd.float32, output_layout="CHW",
                                       mean=[0.1307 * 255], std=[0.3081 * 255])
    if device == "gpu":
        labels = labels.gpu()
    labels = ndd.cast(ndd.squeeze(labels, axes=0), dtype=ndd.int64)
    return images.torch(), labels.torch()


def _preprocess(jpegs: ndd.Batch, labels: ndd.Batch, rng: ndd.random.RNG, device: str):
    images = ndd.decoders.image(jpegs, device=device, output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=B, range=[-7.5, 7.5], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    return _to_model(images, labels, device)


def _augmented(jpegs: ndd.Batch, labels: ndd.Batch, rng: ndd.random.RNG, device: str):
    """The tutorial's step with more augmentations, all of which a device graph takes: random
    brightness and contrast, a blur of random strength, the rotation, a random resized crop
    back to 28x28 and a random mirror."""
    images = ndd.decoders.image(jpegs, device=device, output_type=types.GRAY)
    gain = ndd.random.uniform(batch_size=B, range=[0.7, 1.3], rng=rng)
    images = ndd.brightness_contrast(images, brightness=gain, contrast=1.1)
    sigma = ndd.random.uniform(batch_size=B, range=[0.1, 1.0], rng=rng)
    images = ndd.gaussian_blur(images, sigma=sigma)
    angles = ndd.random.uniform(batch_size=B, range=[-7.5, 7.5], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    images = ndd.random_resized_crop(images, size=(28, 28), random_area=[0.6, 1.0], rng=rng)
    coins = ndd.random.coin_flip(batch_size=B, probability=0.5, rng=rng)
    images = ndd.flip(images, horizontal=coins)
    return _to_model(images, labels, device)


def _thread_cpu_s(prefix: str) -> float:
    """CPU seconds used so far by the live threads of this process named ``prefix``..."""
    import threading

    total = 0.0
    for t in threading.enumerate():
        if t.name.startswith(prefix) and t.ident is not None:
            try:
                total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except (OSError, AttributeError):  # the thread just ended, or not POSIX
                pass
    return total


# CPU µs per step of the last timed epoch of mnist_loop: the loop's thread (the training step
# plus the replayed calls) and the capture pipeline's threads here (the GPU part of a split
# pipeline); they share the interpreter lock.
last_cpu_per_step: dict[str, float] = {}
# Wall µs of each part of a step on the loop's thread (medians over the last timed epoch):
# taking the step (next), the preprocessing calls with .torch(), the training step. The
# training part against the ceiling row's step shows what the pipeline costs the training.
last_wall_per_step: list[float] = []
# The capture report's waits over the timed epochs of mnist_loop (after the first): (steps the
# loop waited for the pipeline, seconds, steps).
last_timed_waits: list[float] = []
# samples/s of each timed epoch of the last mnist_loop (the tutorial's measure is their mean)
last_epoch_rates: list[float] = []


def mnist_loop(data: pathlib.Path, device: str, capture: bool, epochs: int,
               preprocess: Callable = _preprocess) -> tuple[float, float]:
    """Median samples/s of the epochs after the first, and the final loss."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = TutorialMLP().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    reader = ndd.readers.Caffe2(path=str(data), random_shuffle=False)
    rng = ndd.random.RNG(0)
    rates, loss = [], None
    waits0 = None
    for epoch in range(epochs):
        prof = mnist_loop_profiler if epoch == epochs - 1 else None
        if prof is not None:
            prof.enable()
        walls: list[tuple[float, float, float]] = []
        n, t0, c0, p0 = 0, time.perf_counter(), time.thread_time(), _thread_cpu_s("ndd-capture")
        steps_it = iter(reader.next_epoch(batch_size=B, capture=capture))
        while True:  # a for loop, with the wall time of each part of a step taken
            s0 = time.perf_counter()
            try:
                jpegs, labels = next(steps_it)
            except StopIteration:
                break
            s1 = time.perf_counter()
            images, targets = preprocess(jpegs, labels, rng, device)
            if device == "cpu":  # the GPU rows' tensors are on the device already, as in the tutorial
                images, targets = images.to(dev, non_blocking=True), targets.to(dev, non_blocking=True)
            s2 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images), targets)
            loss.backward()
            opt.step()
            n += targets.numel()
            walls.append((s1 - s0, s2 - s1, time.perf_counter() - s2))
        _sync()
        rates.append(n / (time.perf_counter() - t0))
        rep = ndd.capture.report() if capture else None
        if rep is not None:
            if waits0 is None:
                waits0 = (rep.waits, rep.waited_s, rep.steps)
            last_timed_waits[:] = [rep.waits - waits0[0], rep.waited_s - waits0[1], rep.steps - waits0[2]]
        steps = max(1, n // B)
        last_cpu_per_step.update(loop=(time.thread_time() - c0) / steps * 1e6,
                                 pipeline=max(0.0, _thread_cpu_s("ndd-capture") - p0) / steps * 1e6)
        last_wall_per_step[:] = [statistics.median(w) * 1e6 for w in zip(*walls)] if walls else []
        if prof is not None:
            prof.disable()
    last_epoch_rates[:] = rates[1:] or rates
    return statistics.median(last_epoch_rates), float(loss.item())


def training_alone(steps: int, epochs: int) -> float:
    """Samples/s of the loop's training step on ready-made device tensors (no data loading):
    the ceiling for any data loader on this machine."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = TutorialMLP().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    images = torch.randn(8, B, 1, 28, 28, device=dev)
    targets = torch.randint(0, 10, (8, B), device=dev)
    rates = []
    for _ in range(epochs):
        walls = []
        t0, c0 = time.perf_counter(), time.thread_time()
        for i in range(steps):
            s0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images[i % 8]), targets[i % 8])
            loss.backward()
            opt.step()
            walls.append(time.perf_counter() - s0)
        _sync()
        rates.append(steps * B / (time.perf_counter() - t0))
        last_cpu_per_step.update(loop=(time.thread_time() - c0) / steps * 1e6)
        last_wall_per_step[:] = [statistics.median(walls) * 1e6]
    return statistics.median(rates[1:] or rates)


def smooth_jpegs(n: int, side: int = 256) -> list[np.ndarray]:
    """``n`` distinct natural-looking RGB JPEGs (gradients and soft blobs, quality 90, 4:2:0)."""
    import cv2

    r = np.random.default_rng(0)
    y, x = np.mgrid[0:side, 0:side].astype(np.float32)
    base = np.stack([x / side * 200, y / side * 200, (x + y) / (2 * side) * 255], -1)
    out = []
    for _ in range(n):
        img = base.copy()
        for _ in range(5):
            cy, cx, rad = r.uniform(0, side, 2).tolist() + [r.uniform(min(8, side / 6), side / 3)]
            img += r.uniform(-90, 90, 3) * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / rad**2)[..., None]
        img += r.normal(0, 4, img.shape)  # some texture, as in photographs
        ok, buf = cv2.imencode(".jpg", np.clip(img, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        out.append(buf.ravel())
    return out


def _rate(fn: Callable[[], object], items: int, seconds: float) -> float:
    fn()
    _sync()
    k, t0 = 0, time.perf_counter()
    while True:
        fn()
        k += 1
        if time.perf_counter() - t0 >= seconds:
            break
    _sync()
    return items * k / (time.perf_counter() - t0)


def decode_rows(batches: int, batch: int, seconds: float) -> list[tuple[str, str, str]]:
    jpegs = smooth_jpegs(batches * batch)
    data = [ndd.as_batch(jpegs[i * batch:(i + 1) * batch]) for i in range(batches)]
    state = {"i": 0}

    def run(device: str) -> Callable[[], object]:
        def one() -> object:
            b = data[state["i"] % batches]
            state["i"] += 1
            return ndd.decoders.image(b, device=device).torch()

        return one

    cpu = _rate(run("cpu"), batch, seconds)
    gpu = _rate(run("gpu"), batch, seconds)
    rows = [(f"decode 256x256 JPEG, batch {batch}, CPU (libjpeg-turbo, {ndd.get_num_threads()} thr)",
             f"{cpu:,.0f} img/s", ""),
            (f"decode 256x256 JPEG, batch {batch}, device='gpu'", f"{gpu:,.0f} img/s",
             f"{gpu / cpu:.2f}x the CPU")]
    try:
        import torchvision.io as tvio

        if torch.cuda.is_available():
            enc = [torch.from_numpy(j) for j in jpegs[:batch]]
            raw = _rate(lambda: tvio.decode_jpeg(enc, device="cuda"), batch, seconds)
            rows.append(("  torchvision.decode_jpeg(list, cuda) alone", f"{raw:,.0f} img/s",
                         f"ndd at {gpu / raw:.0%} of it"))
            rows += decode_overhead_rows(data, enc, batch, seconds, "cuda")
    except ImportError:
        rows.append(("  torchvision", "not installed", "GPU decode fell back to CPU + upload"))
    g = [np.asarray(t) for t in ndd.decoders.image(data[0], device="gpu").cpu()]
    c = [np.asarray(t) for t in ndd.decoders.image(data[0])]
    diff = [np.abs(a.astype(np.int16) - b.astype(np.int16)) for a, b in zip(g, c)]
    rows.append(("  |GPU - CPU| pixels (max / mean)",
                 f"{max(int(d.max()) for d in diff)} / {np.mean([d.mean() for d in diff]):.3f}",
                 "0 / 0 means the CPU path ran"))
    return rows


def decode_overhead_rows(data: list[ndd.Batch], enc: list[torch.Tensor], batch: int, seconds: float,
                         device: str) -> list[tuple[str, str, str]]:
    """Where ndd's GPU decode loses time against torchvision alone: the same torchvision call
    plus the HWC batch ndd returns (its device stage's GPU work), and ndd without the eager
    executor's thread (EvalMode.sync_cpu)."""
    import torchvision.io as tvio

    def tv_hwc() -> object:
        return torch.stack([d.movedim(0, -1) for d in tvio.decode_jpeg(enc, device=device)])

    state = {"i": 0}

    def ndd_sync() -> object:
        b = data[state["i"] % len(data)]
        state["i"] += 1
        return ndd.decoders.image(b, device="gpu").torch()

    rows = []
    for name, fn, mode in (("  torchvision + the HWC batch ndd returns", tv_hwc, contextlib.nullcontext()),
                           ("  ndd, EvalMode.sync_cpu (no executor thread)", ndd_sync, ndd.EvalMode.sync_cpu)):
        try:
            with mode:
                rows.append((name, f"{_rate(fn, batch, seconds):,.0f} img/s", ""))
        except Exception as e:  # noqa: BLE001 - a breakdown row must not hide the others
            rows.append((name, "FAILED", f"{type(e).__name__}: {e}"[:160]))
    return rows


def threshold_rows(batch: int, seconds: float) -> list[tuple[str, str, str]]:
    """Where nvJPEG starts to beat the CPU: decode rates per image side, every sample forced
    to one path (the data behind ``HYBRID_MIN_PIXELS``)."""
    from ndd_ops_cuda import _decode

    rows = []
    keep = _decode.HYBRID_MIN_PIXELS
    try:
        for side in (16, 32, 48, 64, 96, 128):
            data = ndd.as_batch(smooth_jpegs(batch, side))
            rate = {}
            for name, limit, device in (("cpu", keep, "cpu"), ("nvjpeg", 0, "gpu")):
                _decode.HYBRID_MIN_PIXELS = limit
                rate[name] = _rate(lambda b=data, d=device: ndd.decoders.image(b, device=d).torch(),
                                   batch, seconds)
            rows.append((f"  decode {side}x{side} JPEG, batch {batch}: CPU / nvJPEG",
                         f"{rate['cpu']:,.0f} / {rate['nvjpeg']:,.0f}",
                         f"nvJPEG {rate['nvjpeg'] / rate['cpu']:.2f}x the CPU"))
    finally:
        _decode.HYBRID_MIN_PIXELS = keep
    return rows


def profile_loops(data: pathlib.Path, out: pathlib.Path) -> None:
    """cProfile, one epoch after a warm-up, GPU preprocessing eager and captured (the GPU
    part on a thread of its own and on the loop's thread): where the loop's process spends
    its time (written to ``out``). From Python 3.12 cProfile sees every thread."""
    import cProfile
    import pstats

    global mnist_loop_profiler
    for name, capture, on_thread in (("eager", False, True), ("capture", True, True),
                                     ("capture-loop-thread", True, False)):
        prof = cProfile.Profile()
        mnist_loop_profiler = prof
        ndd.capture.set_gpu_thread(on_thread)
        try:
            mnist_loop(data, "gpu", capture, 2)
        finally:
            mnist_loop_profiler = None
            ndd.capture.set_gpu_thread(None)
        path = out / f"profile-gpu-{name}.txt"
        with open(path, "w") as f:
            st = pstats.Stats(prof, stream=f)
            st.sort_stats("tottime").print_stats(45)
            st.sort_stats("cumulative").print_stats(45)
        print(f"  profile written: {path}", flush=True)


mnist_loop_profiler = None


def op_rows(data: pathlib.Path) -> list[tuple[str, str, str]]:
    """Per-call cost of each operator of the tutorial's GPU step (EvalMode.sync_cpu: each
    call runs before it returns; its GPU work stays queued): where a step's CPU time goes."""
    import timeit

    reader = ndd.readers.Caffe2(path=str(data))
    jpegs, labels = next(iter(reader.next_epoch(batch_size=B)))
    rng = ndd.random.RNG(0)
    rows = []
    with ndd.EvalMode.sync_cpu:
        imgs = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        angles = ndd.random.uniform(batch_size=B, range=[-7.5, 7.5], rng=rng)
        rot = ndd.rotate(imgs, angle=angles, keep_size=True, fill_value=0)
        lab = labels.gpu()
        sq = ndd.squeeze(lab, axes=0)
        calls = {
            "decoders.image(device='gpu'), 28x28 (CPU decode + upload)":
                lambda: ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY),
            "random.uniform": lambda: ndd.random.uniform(batch_size=B, range=[-7.5, 7.5], rng=rng),
            "rotate": lambda: ndd.rotate(imgs, angle=angles, keep_size=True, fill_value=0),
            "crop_mirror_normalize": lambda: ndd.crop_mirror_normalize(
                rot, dtype=ndd.float32, output_layout="CHW", mean=[0.1307 * 255], std=[0.3081 * 255]),
            "labels.gpu()": lambda: labels.gpu(),
            "squeeze": lambda: ndd.squeeze(lab, axes=0),
            "cast": lambda: ndd.cast(sq, dtype=ndd.int64),
            ".torch()": lambda: rot.torch(),
        }
        for name, fn in calls.items():
            fn()
            best = min(timeit.repeat(fn, number=20, repeat=15)) / 20
            rows.append((f"  {name}", f"{best * 1e6:,.0f} µs", "per call, batch 64 (best of 15 x 20)"))
        _sync()
    return rows


def box_rows(batches: int, seconds: float) -> list[tuple[str, str, str]]:
    """box_encoder with SSD300's number of anchors (8,732), batch 32 of 1-19 boxes, offsets
    normalised as SSD trains: samples/s on the CPU kernel and on the GPU (one batched match)."""
    rng = np.random.default_rng(0)

    def boxes(k: int) -> np.ndarray:
        lo = rng.random((k, 2), dtype=np.float32) * 0.7
        return np.concatenate([lo, lo + rng.random((k, 2), dtype=np.float32) * 0.3 + 0.01], 1)

    anchors = tuple(boxes(8732).ravel().tolist())
    n = 32
    data = []
    for _ in range(batches):
        counts = rng.integers(1, 20, n)
        data.append((ndd.as_batch([boxes(int(k)) for k in counts]),
                     ndd.as_batch([np.ones(int(k), np.int32) for k in counts])))
    rate = {}
    for device in ("cpu", "gpu"):
        inputs = [(b, lab) if device == "cpu" else (b.gpu(), lab.gpu()) for b, lab in data]
        done, t0 = 0, time.perf_counter()
        while True:
            for b, lab in inputs:
                loc, cls = ndd.box_encoder(b, lab, anchors=anchors, criteria=0.5, offset=True,
                                           stds=(0.1, 0.1, 0.2, 0.2))
                loc.evaluate()
                cls.evaluate()
                done += n
            _sync()
            if time.perf_counter() - t0 >= seconds:
                break
        rate[device] = done / (time.perf_counter() - t0)
    return [("box_encoder, 8,732 anchors, batch 32: CPU", f"{rate['cpu']:,.0f} smp/s", "ndd's CPU kernel"),
            ("box_encoder, 8,732 anchors, batch 32: GPU", f"{rate['gpu']:,.0f} smp/s",
             f"{rate['gpu'] / rate['cpu']:.2f}x the CPU")]


def _decode_table(a: argparse.Namespace) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    try:
        rows += decode_rows(2 if a.quick else 8, B, 0.5 if a.quick else 3.0)
    except Exception as e:  # noqa: BLE001
        rows.append(("decode 256x256 JPEG", "FAILED", f"{type(e).__name__}: {e}"[:160]))
    if torch.cuda.is_available() or a.quick:
        try:
            rows += threshold_rows(B, 0.3 if a.quick else 1.0)
        except Exception as e:  # noqa: BLE001
            rows.append(("decode threshold sweep", "FAILED", f"{type(e).__name__}: {e}"[:160]))
    try:
        rows += box_rows(2 if a.quick else 4, 0.3 if a.quick else 2.0)
    except Exception as e:  # noqa: BLE001
        rows.append(("box_encoder", "FAILED", f"{type(e).__name__}: {e}"[:160]))
    return rows


def _loop_table_row(name: str, mode: str, got: list) -> tuple[str, str, str]:
    """The table row of one loop setting: its samples/s (the median of its runs, each listed
    when there are several) against the tutorial's figure, and the tutorial's own measure
    (the mean of the timed epochs, here of all the runs), or why it failed."""
    failed = [g for g in got if isinstance(g, str)]
    if failed:
        return name, "FAILED", failed[0][len("FAILED "):]
    rates = [r for r, *_ in got]
    rate = statistics.median(rates)
    ref = TUTORIAL[mode]
    epochs = [e for *_, es in got for e in es]
    runs = f"; runs {', '.join(f'{r:,.0f}' for r in rates)}" if len(rates) > 1 else ""
    return name, f"{rate:,.0f} smp/s", (f"{rate / ref:.2f}x DALI's {ref:,}; mean of {len(epochs)} timed "
                                        f"epochs {statistics.mean(epochs):,.0f} (loss {got[-1][1]:.3f}{runs})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small dataset, few epochs, short timings")
    p.add_argument("--epochs", type=int, default=None, help="epochs per MNIST run (first is warm-up)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--profile", type=pathlib.Path, default=None,
                   help="write cProfile tables of the GPU loop's main thread into this folder")
    p.add_argument("--loops-only", action="store_true", help="only the training loops (no decode tables)")
    p.add_argument("--repeat", type=int, default=2,
                   help="runs of each device-graph row, interleaved (the table gives their median)")
    p.add_argument("--criterion", action="store_true",
                   help="only the ceiling and the interleaved device-graph rows of the tutorial's loop "
                        "(the issue's H200 figure), e.g. with --epochs 10 as the tutorial times it")
    a = p.parse_args(argv)
    torch.set_num_threads(a.torch_threads)
    epochs = a.epochs or (2 if a.quick else 4)
    gpu_name = torch.cuda.get_device_name() if torch.cuda.is_available() else (
        "none (NDD_CUDA_EMULATE=cpu)" if os.environ.get("NDD_CUDA_EMULATE") == "cpu" else "none")
    print(f"ndd GPU benchmark: GPU {gpu_name}, torch {torch.__version__}, ndd threads "
          f"{ndd.get_num_threads()}, batch {B}, {epochs - 1} timed epoch(s)", flush=True)
    rows: list[tuple[str, str, str]] = []
    data = _dataset(a.quick)
    ceiling = training_alone(32 if a.quick else 313, epochs)
    # The loop thread's CPU per step here is the training's share of the loop rows' figure
    # (backward runs on torch's autograd thread: the rest of a step's time is waiting).
    rows.append(("training step alone, on ready device tensors (the ceiling)", f"{ceiling:,.0f} smp/s",
                 f"{ceiling / TUTORIAL['capture']:.2f}x DALI's {TUTORIAL['capture']:,} (loop thread "
                 f"{last_cpu_per_step.pop('loop'):,.0f} µs CPU of {B / ceiling * 1e6:,.0f} µs a step; "
                 f"median step {last_wall_per_step.pop():,.0f} µs)"))
    print(f"  {rows[-1][0]}: {rows[-1][1]} {rows[-1][2]}", flush=True)
    procs = ndd.capture.default_worker_processes()
    # (device, capture, worker processes (None: the default), device graphs ("loop": on the
    # loop's thread; "loop4": there, 4 steps a replay)). The device-graph settings run last,
    # interleaved and repeated: on the lent machine the speed of the host drifts by 15% from
    # one minute to the next, more than they differ.
    runs = [] if a.criterion else [("cpu", False, None, True), ("cpu", True, None, True), ("gpu", False, None, True),
                                   ("gpu", True, 0, True), ("gpu", True, None, False)]
    runs += [("gpu", True, None, True), ("gpu", True, None, "loop"), ("gpu", True, None, "loop4")] * max(1, a.repeat)
    # (row name, "eager" or "capture") -> [(samples/s, loss) or an error text], in run order
    results: dict[tuple[str, str], list] = {}
    for device, capture, processes, graphs in runs:
        mode = "capture" if capture else "eager"
        name = f"MNIST loop + training, {mode}, preprocessing on {device}"
        if capture:
            name += " (pipeline on threads)" if processes == 0 else f" ({procs} worker processes)"
            if device == "gpu" and processes != 0:
                name += ", GPU part as one device graph" if graphs else ", GPU part kernel by kernel"
                if graphs:
                    name += {"loop": " on the loop's thread", "loop4": " on the loop's thread, 4 steps a replay"}.get(
                        str(graphs), " on a thread of its own")
        ndd.capture.set_worker_processes(processes)
        ndd.capture.set_device_graphs(bool(graphs))
        ndd.capture.set_gpu_thread(graphs not in ("loop", "loop4"))
        ndd.capture.set_graph_steps(4 if graphs == "loop4" else 1)
        try:
            got: Any = (*mnist_loop(data, device, capture, epochs), list(last_epoch_rates))
            line = f"{got[0]:,.0f} smp/s (loss {got[1]:.3f}; epochs {', '.join(f'{r:,.0f}' for r in got[2])})"
        except Exception as e:  # noqa: BLE001 - one failing row must not hide the others
            got = line = f"FAILED {type(e).__name__}: {e}"[:160]
        finally:
            ndd.capture.set_worker_processes(None)
            ndd.capture.set_device_graphs(True)
            ndd.capture.set_gpu_thread(None)
            ndd.capture.set_graph_steps(1)
        results.setdefault((name, mode), []).append(got)
        print(f"  {name}: {line}", flush=True)
        rep = ndd.capture.report() if capture else None
        if rep is not None:
            timed = (f"; in the timed epochs on {last_timed_waits[0]:.0f} of {last_timed_waits[2]:.0f} "
                     f"({last_timed_waits[1]:.2f} s)" if last_timed_waits else "")
            print(f"    pipeline: {rep.worker}; the loop waited for it on {rep.waits} of {rep.steps} steps "
                  f"({rep.waited_s:.2f} s){timed}", flush=True)
            last_timed_waits.clear()
            if rep.device_graph is not None:
                g = rep.device_graph
                print(f"    device graph: {g.replayed} steps replayed, {g.kernel_by_kernel} kernel by kernel "
                      f"({g.unlike} unlike the captured one); host pass in the workers for "
                      f"{g.host_pass_in_workers}", flush=True)
        if last_cpu_per_step:
            print(f"    CPU per step (last epoch): loop thread {last_cpu_per_step['loop']:,.0f} µs, "
                  f"pipeline threads here {last_cpu_per_step['pipeline']:,.0f} µs", flush=True)
            last_cpu_per_step.clear()
        if last_wall_per_step:
            nx, pre, train = last_wall_per_step
            print(f"    wall per step (last epoch, medians): next() {nx:,.0f} µs, preprocessing {pre:,.0f} µs, "
                  f"training {train:,.0f} µs", flush=True)
            last_wall_per_step.clear()
    # The step with more augmentations, captured on the GPU: as one device graph (on the loop's
    # thread) against kernel by kernel, to see what the graph saves beyond the tutorial's ops.
    augmented: list[tuple[str, Any]] = []
    for graphs in () if a.criterion else (True, False):
        name = (f"augmented MNIST loop + training, capture, preprocessing on gpu ({procs} worker processes), "
                + ("one device graph on the loop's thread" if graphs else "kernel by kernel"))
        ndd.capture.set_device_graphs(graphs)
        ndd.capture.set_gpu_thread(not graphs)
        try:
            got = mnist_loop(data, "gpu", True, epochs, _augmented)
            line = f"{got[0]:,.0f} smp/s (loss {got[1]:.3f})"
        except Exception as e:  # noqa: BLE001 - one failing row must not hide the others
            got = line = f"FAILED {type(e).__name__}: {e}"[:160]
        finally:
            ndd.capture.set_device_graphs(True)
            ndd.capture.set_gpu_thread(None)
        augmented.append((name, got))
        print(f"  {name}: {line}", flush=True)
        print(f"    pipeline: {ndd.capture.report().worker}", flush=True)
    for (name, mode), got in results.items():
        rows.append(_loop_table_row(name, mode, got))
    kbk = augmented[1][1] if augmented else None
    for name, got in augmented:
        if isinstance(got, str):
            rows.append((name, "FAILED", got[len("FAILED "):]))
            continue
        ratio = f"{got[0] / kbk[0]:.2f}x kernel by kernel; " if not isinstance(kbk, str) else ""
        rows.append((name, f"{got[0]:,.0f} smp/s", f"{ratio}loss {got[1]:.3f}"))
    if a.criterion:
        rows.append(("other rows", "skipped", "--criterion"))
    else:
        try:
            rows += op_rows(data)
        except Exception as e:  # noqa: BLE001
            rows.append(("per-operator cost", "FAILED", f"{type(e).__name__}: {e}"[:160]))
    if a.loops_only or a.criterion:
        rows.append(("decode rows", "skipped", "--criterion" if a.criterion else "--loops-only"))
    else:
        rows += _decode_table(a)
    if a.profile is not None:
        a.profile.mkdir(parents=True, exist_ok=True)
        profile_loops(data, a.profile)
    w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    print()
    print(f"{'what':<{w0}}  {'result':>{w1}}  comparison")
    for r in rows:
        print(f"{r[0]:<{w0}}  {r[1]:>{w1}}  {r[2]}")
    return 1 if any(r[1] == "FAILED" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
