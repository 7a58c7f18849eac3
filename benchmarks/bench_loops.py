"""Three data loops, ndd eager and captured against a PyTorch DataLoader (``nox -s bench``).

Loops (batch 64):

* ``mnist``        MNIST-like Caffe2 LMDB (``examples/make_demo_dataset.py``): decode GRAY →
                   random rotation (±7.5°) → crop_mirror_normalize (CHW float32) → .torch();
                   no training.
* ``mnist_train``  the same loop plus the tutorial's training step (MLP 784-128-10, SGD lr 0.01).
* ``imagenet``     ImageNet-like: 256×256 RGB JPEGs (synthetic, photo-like, quality 90) in a
                   File tree of class folders: decode RGB → resize to 224×224 →
                   crop_mirror_normalize (ImageNet mean/std, CHW float32) → .torch().

Columns: ``ndd_eager`` and ``ndd_capture`` (``reader.next_epoch(batch_size=64,
capture=...)``), and ``torch_w0`` / ``torch_w2``: a plain ``torch.utils.data.DataLoader``
(0 and 2 workers, persistent) whose Dataset does the same work per sample with Pillow and
NumPy (LMDB records read with the ``lmdb`` package and parsed with the same Caffe2
protobuf parser ndd uses). ``bench_dali.py`` adds ``dali_eager`` and ``dali_capture``: the
identical loop functions below run against ``nvidia.dali.experimental.dynamic`` imported
as ``ndd``.

Every (loop, column) runs in a fresh subprocess (so DALI is never imported next to ndd),
the columns of a loop back to back; each does one warm-up epoch and ``--epochs`` timed
ones, and the table shows the median samples/s and its ratio to ndd eager of the same
run. torch runs with 1 intra-op thread in every column (``--torch-threads``): on a
2-core machine torch's spinning OpenMP threads fight the loader's threads and slow the
tiny model ~10x. Results go to ``bench-results/<name>.json`` and ``<name>.png``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import platform
import random
import statistics
import subprocess
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
B = 64
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]  # for the Pillow baseline
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
MNIST_MEAN, MNIST_STD = 0.1307 * 255, 0.3081 * 255

LOOPS = {
    "mnist": "MNIST-like, no training",
    "mnist_train": "MNIST-like + training",
    "imagenet": "ImageNet-like 256→224",
}
COLUMNS = {
    "ndd_eager": "ndd eager",
    "ndd_capture": "ndd capture",
    "torch_w0": "DataLoader w=0",
    "torch_w2": "DataLoader w=2",
    "dali_eager": "DALI eager",
    "dali_capture": "DALI capture",
}
BASE_COLUMNS = ["ndd_eager", "ndd_capture", "torch_w0", "torch_w2"]
DALI_COLUMNS = ["dali_eager", "dali_capture"]

# Bound by _bind() in a worker process: ndd itself, or DALI's dynamic mode under the same name.
ndd = None
types = None


def _bind(backend: str) -> None:
    global ndd, types
    if backend == "dali":
        import nvidia.dali.experimental.dynamic as ndd
        import nvidia.dali.types as types
    else:
        import ndd
        import ndd.types as types


# --------------------------------------------------------------------------------------
# The loops, written as a user writes them; identical for ndd and DALI. The constants are
# literals at the call: a module-level name (MEAN) is never proven constant, so capture
# would run that call eagerly every step (reason NDD-C010).
# --------------------------------------------------------------------------------------

def mnist_preprocess(jpegs, labels, rng):
    images = ndd.decoders.image(jpegs, device="cpu", output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=B, range=[-7.5, 7.5], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    images = ndd.crop_mirror_normalize(images, dtype=ndd.float32, output_layout="CHW",
                                       mean=[0.1307 * 255], std=[0.3081 * 255])
    labels = ndd.cast(ndd.squeeze(labels, axes=0), dtype=ndd.int64)
    return images.torch(), labels.torch()


def imagenet_preprocess(jpegs, labels):
    images = ndd.decoders.image(jpegs, device="cpu", output_type=types.RGB)
    images = ndd.resize(images, size=[224, 224])
    images = ndd.crop_mirror_normalize(images, dtype=ndd.float32, output_layout="CHW",
                                       mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                       std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
    labels = ndd.cast(ndd.squeeze(labels, axes=0), dtype=ndd.int64)
    return images.torch(), labels.torch()


def make_model():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(model, opt, images, targets) -> None:
    import torch.nn.functional as F

    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), targets)
    loss.backward()
    opt.step()


def run_dynamic(loop: str, capture: bool, epochs: int, a: argparse.Namespace) -> list[float]:
    """Samples/s per epoch (warm-up first) of ``loop`` with the bound ``ndd`` module."""
    train = loop == "mnist_train"
    model, opt = make_model() if train else (None, None)
    if loop == "imagenet":
        reader = ndd.readers.File(file_root=str(a.imagenet_data), random_shuffle=False)
    else:
        reader = ndd.readers.Caffe2(path=str(a.mnist_data), random_shuffle=False)
    rng = ndd.random.RNG(0)
    rates = []
    for _ in range(epochs):
        n, t0 = 0, time.perf_counter()
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            if loop == "imagenet":
                images, targets = imagenet_preprocess(jpegs, labels)
            else:
                images, targets = mnist_preprocess(jpegs, labels, rng)
            if train:
                train_step(model, opt, images, targets)
            n += targets.shape[0]
        rates.append(n / (time.perf_counter() - t0))
    return rates


# --------------------------------------------------------------------------------------
# The PyTorch DataLoader baseline: the same work per sample with Pillow and NumPy.
# --------------------------------------------------------------------------------------

class MnistLmdbDataset:
    """Caffe2 LMDB records → Pillow GRAY decode → rotation → normalised CHW float32."""

    def __init__(self, path: str) -> None:
        import lmdb

        self.path = path
        env = lmdb.open(path, readonly=True, lock=False, readahead=False, subdir=True)
        with env.begin() as txn:
            self.keys = list(txn.cursor().iternext(keys=True, values=False))
        env.close()
        self.txn = None

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int):
        import lmdb
        import numpy as np
        import torch
        from PIL import Image

        from ndd_readers._caffe2 import parse_caffe2_record

        if self.txn is None:  # opened lazily: once per worker process
            self.txn = lmdb.open(self.path, readonly=True, lock=False, readahead=False).begin()
        jpeg, label = parse_caffe2_record(self.txn.get(self.keys[i]))
        img = Image.open(io.BytesIO(jpeg.tobytes())).convert("L")
        img = img.rotate(random.uniform(-7.5, 7.5), resample=Image.BILINEAR, fillcolor=0)
        x = (np.asarray(img, np.float32) - MNIST_MEAN) * (1.0 / MNIST_STD)
        return torch.from_numpy(x[None]), int(label[0])


class ImageFolderDataset:
    """JPEG files in class folders → Pillow RGB decode → 224×224 → normalised CHW float32."""

    def __init__(self, root: str) -> None:
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.items = [(os.path.join(root, c, f), k) for k, c in enumerate(classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))]
        self.mean = None

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        import numpy as np
        import torch
        from PIL import Image

        if self.mean is None:
            self.mean = np.array(MEAN, np.float32)
            self.inv_std = 1.0 / np.array(STD, np.float32)
        path, label = self.items[i]
        with open(path, "rb") as f:
            img = Image.open(io.BytesIO(f.read())).convert("RGB")
        img = img.resize((224, 224), Image.BILINEAR)
        x = (np.asarray(img, np.float32) - self.mean) * self.inv_std
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1))), label


def run_torch(loop: str, workers: int, epochs: int, a: argparse.Namespace) -> list[float]:
    from torch.utils.data import DataLoader

    train = loop == "mnist_train"
    model, opt = make_model() if train else (None, None)
    ds = ImageFolderDataset(str(a.imagenet_data)) if loop == "imagenet" else MnistLmdbDataset(str(a.mnist_data))
    loader = DataLoader(ds, batch_size=B, shuffle=False, num_workers=workers,
                        persistent_workers=workers > 0)
    rates = []
    for _ in range(epochs):
        n, t0 = 0, time.perf_counter()
        for images, targets in loader:
            if train:
                train_step(model, opt, images, targets)
            n += targets.shape[0]
        rates.append(n / (time.perf_counter() - t0))
    return rates


def worker(column: str, loop: str, a: argparse.Namespace) -> dict:
    """Run one (loop, column) in this process; returns rates and the thread settings."""
    import torch

    torch.set_num_threads(a.torch_threads)
    epochs = a.warmup + a.epochs
    info: dict = {"torch_threads": torch.get_num_threads()}
    if column.startswith("torch_w"):
        rates = run_torch(loop, int(column[len("torch_w"):]), epochs, a)
    else:
        backend, mode = column.split("_")
        _bind(backend)
        if backend == "dali":
            import nvidia.dali

            info["dali_version"] = nvidia.dali.__version__
        for getter in ("get_num_threads",):
            if hasattr(ndd, getter):
                info["loader_threads"] = getattr(ndd, getter)()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            rates = run_dynamic(loop, mode == "capture", epochs, a)
        if caught:  # e.g. a capture that fell back to eager
            info["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        report = getattr(getattr(ndd, "capture", None), "report", None)
        if mode == "capture" and callable(report) and report() is not None:
            info["capture_report"] = report().summary()
    info["rates"] = rates
    return info


# --------------------------------------------------------------------------------------
# Data sets.
# --------------------------------------------------------------------------------------

def photo_like(rng, size: int = 256):
    """A smooth, photo-like RGB image: random colour gradients, blurred blobs and noise."""
    import cv2
    import numpy as np

    img = cv2.resize(rng.uniform(0, 255, (4, 4, 3)).astype(np.float32), (size, size),
                     interpolation=cv2.INTER_CUBIC)
    blobs = np.zeros_like(img)
    for _ in range(int(rng.integers(3, 9))):
        center = (int(rng.integers(0, size)), int(rng.integers(0, size)))
        axes = (int(rng.integers(8, size // 3)), int(rng.integers(8, size // 3)))
        color = tuple(float(c) for c in rng.uniform(-120, 120, 3))
        cv2.ellipse(blobs, center, axes, float(rng.uniform(0, 180)), 0, 360, color, -1, cv2.LINE_AA)
    img += cv2.GaussianBlur(blobs, (0, 0), float(rng.uniform(1.0, 6.0)))
    img += cv2.GaussianBlur(rng.normal(0, 12, img.shape).astype(np.float32), (0, 0), 0.8)  # texture
    img += rng.normal(0, 3, img.shape).astype(np.float32)  # sensor noise
    return np.clip(img, 0, 255).astype(np.uint8)


def build_imagenet_like(root: pathlib.Path, n: int, classes: int = 10, seed: int = 0) -> None:
    """Write ``n`` 256×256 JPEGs (quality 90) into ``root/class_XX/``; atomic via a temp dir."""
    import shutil

    import cv2
    import numpy as np

    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        d = tmp / f"class_{i % classes:02d}"
        d.mkdir(parents=True, exist_ok=True)
        ok, jpeg = cv2.imencode(".jpg", photo_like(rng), [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise RuntimeError(f"JPEG encoding failed for image {i}")
        (d / f"img_{i:06d}.jpg").write_bytes(jpeg.tobytes())
        if i % 100 == 0 or i == n - 1:
            print(f"\r  building ImageNet-like dataset [{'#' * int(30 * (i + 1) / n):<30}] {i + 1}/{n}",
                  end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    tmp.rename(root)


def ensure_data(a: argparse.Namespace, loops: list[str]) -> None:
    if any(lp.startswith("mnist") for lp in loops) and not (a.mnist_data / "data.mdb").exists():
        sys.path.insert(0, str(ROOT / "examples"))
        from make_demo_dataset import build

        build(a.mnist_data, a.mnist_count)
    if "imagenet" in loops and not a.imagenet_data.is_dir():
        build_imagenet_like(a.imagenet_data, a.imagenet_count)


# --------------------------------------------------------------------------------------
# Driver: one subprocess per (loop, column), table, JSON, chart.
# --------------------------------------------------------------------------------------

def run_column(column: str, loop: str, a: argparse.Namespace) -> dict:
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", column, loop,
           "--epochs", str(a.epochs), "--warmup", str(a.warmup), "--torch-threads", str(a.torch_threads),
           "--mnist-data", str(a.mnist_data), "--imagenet-data", str(a.imagenet_data)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode or not lines:
        print(f"  {loop}/{column}: failed (exit {p.returncode})\n{p.stdout}", file=sys.stderr)
        return {"error": f"exit {p.returncode}", "wall_s": wall}
    r = json.loads(lines[-1][len("RESULT "):])
    timed = r["rates"][a.warmup:]
    r.update(median=statistics.median(timed), warmup_rate=r["rates"][0] if a.warmup else None, wall_s=wall)
    print(f"  {LOOPS[loop]:<26}{COLUMNS[column]:<16}{r['median']:>10,.0f} samples/s  "
          f"(warm-up {', '.join(f'{x:,.0f}' for x in r['rates'][:a.warmup]) or '-'}; timed "
          f"{', '.join(f'{x:,.0f}' for x in timed)}; {wall:.1f} s)", file=sys.stderr)
    for line in ([r["capture_report"]] if "capture_report" in r else []) + r.get("warnings", []):
        print(f"  {'':<26}{'':<16}{line}", file=sys.stderr)
    return r


def table(results: dict, loops: list[str], columns: list[str]) -> str:
    w = 17
    head = f"{'loop':<26}" + "".join(f"{COLUMNS[c]:>{w}}" for c in columns)
    lines = [head, "-" * len(head)]
    for lp in loops:
        row = results[lp]
        base = row.get("ndd_eager", {}).get("median")
        cells = []
        for c in columns:
            m = row.get(c, {}).get("median")
            if m is None:
                cells.append(f"{'failed':>{w}}")
            elif base:
                cells.append(f"{f'{m:,.0f} ({m / base:.2f}x)':>{w}}")
            else:
                cells.append(f"{f'{m:,.0f}':>{w}}")
        lines.append(f"{LOOPS[lp]:<26}" + "".join(cells))
    return "\n".join(lines)


def chart(results: dict, loops: list[str], columns: list[str], path: pathlib.Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(loops), figsize=(4.2 * len(loops), 4.2), squeeze=False)
    colors = plt.get_cmap("tab10")
    for ax, lp in zip(axes[0], loops):
        row = results[lp]
        base = row.get("ndd_eager", {}).get("median")
        vals = [row.get(c, {}).get("median") or 0.0 for c in columns]
        bars = ax.bar(range(len(columns)), vals, color=[colors(i) for i in range(len(columns))])
        for bar, v in zip(bars, vals):
            label = f"{v:,.0f}" + (f"\n{v / base:.2f}x" if base and v else "")
            ax.annotate(label, (bar.get_x() + bar.get_width() / 2, v), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(columns)), [COLUMNS[c] for c in columns], rotation=35, ha="right", fontsize=8)
        ax.set_title(LOOPS[lp], fontsize=10)
        ax.set_ylabel("samples/s (median)")
        ax.set_ylim(0, max(vals + [1.0]) * 1.25)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None, columns: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=3, help="timed epochs per (loop, column); the median is shown")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up epochs before them (capture traces here)")
    p.add_argument("--loops", nargs="+", choices=list(LOOPS), default=list(LOOPS))
    p.add_argument("--columns", nargs="+", choices=list(COLUMNS), default=columns)
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch intra-op threads in every column (default 1: on a 2-core machine torch's "
                        "OpenMP threads slow the tiny model ~10x by fighting the loader's threads)")
    p.add_argument("--mnist-data", type=pathlib.Path, default=ROOT / "data" / "mnist_lmdb",
                   help="Caffe2 LMDB of the MNIST-like loops (built if missing)")
    p.add_argument("--mnist-count", type=int, default=20000, help="records when building --mnist-data")
    p.add_argument("--imagenet-data", type=pathlib.Path, default=None,
                   help="File tree of the ImageNet-like loop (default data/imagenet_like_<count>; built if missing)")
    p.add_argument("--imagenet-count", type=int, default=2000, help="images when building --imagenet-data")
    p.add_argument("--out", type=pathlib.Path, default=ROOT / "bench-results", help="folder for JSON and PNG")
    p.add_argument("--worker", nargs=2, metavar=("COLUMN", "LOOP"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.imagenet_data is None:
        a.imagenet_data = ROOT / "data" / f"imagenet_like_{a.imagenet_count}"
    return a


def main(argv: list[str] | None = None, columns: list[str] = BASE_COLUMNS, name: str = "bench") -> int:
    a = parse_args(argv, columns)
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker[0], a.worker[1], a)), flush=True)
        return 0
    t_start = time.perf_counter()
    ensure_data(a, a.loops)
    cols = [c for c in COLUMNS if c in a.columns]
    print(f"batch {B}, {a.warmup} warm-up + {a.epochs} timed epochs per cell (median shown), torch threads "
          f"{a.torch_threads} in every column, {os.cpu_count()} CPUs; each loop's columns run back to back, "
          f"each in a fresh process", file=sys.stderr)
    results: dict = {}
    for lp in a.loops:
        results[lp] = {c: run_column(c, lp, a) for c in cols}
        base = results[lp].get("ndd_eager", {}).get("median")
        for r in results[lp].values():
            if base and r.get("median"):
                r["ratio_vs_ndd_eager"] = r["median"] / base
    elapsed = time.perf_counter() - t_start
    threads = {c: r.get("loader_threads") for lp in results for c, r in results[lp].items()
               if r.get("loader_threads") is not None}
    print()
    print(f"samples/s, median of {a.epochs} timed epochs (ratio vs ndd eager, same run); batch {B}; "
          f"torch threads {a.torch_threads}; loader threads {threads or 'n/a'}")
    print(table(results, a.loops, cols))
    a.out.mkdir(parents=True, exist_ok=True)
    doc = {
        "settings": {"batch_size": B, "epochs": a.epochs, "warmup": a.warmup, "torch_threads": a.torch_threads,
                     "mnist_data": str(a.mnist_data), "imagenet_data": str(a.imagenet_data),
                     "imagenet_count": a.imagenet_count},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "loops": LOOPS, "columns": {c: COLUMNS[c] for c in cols},
        "results": results, "elapsed_s": elapsed,
    }
    (a.out / f"{name}.json").write_text(json.dumps(doc, indent=2))
    chart(results, a.loops, cols, a.out / f"{name}.png",
          f"samples/s, batch {B}, median of {a.epochs} epochs, {os.cpu_count()} CPUs, torch threads {a.torch_threads}")
    print(f"wrote {a.out / (name + '.json')} and {a.out / (name + '.png')}; {elapsed:.0f} s")
    failed = [f"{lp}/{c}" for lp in results for c, r in results[lp].items() if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
