"""The capture-mode tutorial's MNIST training loop, eager then captured (ndd's main job).

Caffe2 LMDB reader → decoders.image (GRAY) → random.uniform angles → rotate →
crop_mirror_normalize → a small torch MLP trained with SGD, batch 64. Run it with
``nox -s demo`` (or ``python examples/mnist_demo.py --help``).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import ndd
import ndd.types as types

NEEDED = {
    "ndd.readers.Caffe2": ("ndd-readers", "issue 5"),
    "ndd.decoders.image": ("ndd-ops-cpu", "issue 4"),
    "ndd.rotate": ("ndd-ops-cpu", "issue 4"),
    "ndd.crop_mirror_normalize": ("ndd-ops-cpu", "issue 4"),
    "ndd.squeeze": ("ndd-core", "issue 3"),
}


def missing_pieces() -> list[str]:
    """The operators and readers this loop needs that are not available yet."""
    out = []
    for path, (pkg, issue) in NEEDED.items():
        obj = ndd
        try:
            for part in path.split(".")[1:]:
                obj = getattr(obj, part)
        except AttributeError:
            out.append(f"{path} (package {pkg}, {issue})")
    return out


def preprocess(jpegs, labels, rng, batch_size, device="cpu"):
    images = ndd.decoders.image(jpegs, device=device, output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=batch_size, range=[-7.5, 7.5], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    images = ndd.crop_mirror_normalize(
        images, dtype=ndd.float32, output_layout="CHW", mean=[0.1307 * 255], std=[0.3081 * 255]
    )
    if device == "gpu":
        labels = labels.gpu()
    labels = ndd.squeeze(labels, axes=0)
    labels = ndd.cast(labels, dtype=ndd.int64)
    return images.torch(), labels.torch()


def progress(prefix: str, done: int, total: int, start: float) -> None:
    """A one-line progress bar on stderr."""
    frac = done / max(total, 1)
    rate = done / max(time.perf_counter() - start, 1e-9)
    print(f"\r  {prefix} [{'#' * int(30 * frac):<30}] {done}/{total} samples, {rate:,.0f}/s",
          end="", file=sys.stderr, flush=True)


def run(args: argparse.Namespace, capture: bool) -> tuple[list[float], float]:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    reader = ndd.readers.Caffe2(path=str(args.data), random_shuffle=False)
    rng = ndd.random.RNG(0)
    rates, loss = [], float("nan")
    total = reader.get_metadata()["epoch_size"]
    name = "capture" if capture else "eager  "
    for epoch in range(args.epochs):
        t0, n = time.perf_counter(), 0
        for step, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=args.batch_size,
                                                                 capture=capture)):
            images, targets = preprocess(jpegs, labels, rng, args.batch_size, args.device)
            opt.zero_grad(set_to_none=True)
            out = F.cross_entropy(model(images), targets)
            out.backward()
            opt.step()
            n += targets.numel()
            if step % 20 == 0:
                loss = out.item()
                progress(f"{name} epoch {epoch}", min(n, total), total, t0)
        loss = out.item()
        rate = n / (time.perf_counter() - t0)
        rates.append(rate)
        print(f"\r  {name} epoch {epoch}: {rate:,.0f} samples/s, loss {loss:.4f}" + " " * 30, file=sys.stderr)
    return rates, loss


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=pathlib.Path, default=pathlib.Path("data/mnist_lmdb"),
                   help="Caffe2 LMDB of MNIST-like JPEGs (built if missing)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per mode (the first is warm-up)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="where to decode and preprocess (gpu needs the ndd-ops-cuda plugin)")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch intra-op threads (1 leaves the cores to the data pipeline)")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(a.torch_threads)
    missing = missing_pieces()
    if missing:
        print("The demo loop needs pieces that are not implemented yet:")
        for m in missing:
            print(f"  - {m}")
        print(ndd.plugins.report())
        return 2
    if not (a.data / "data.mdb").exists():
        from make_demo_dataset import build

        build(a.data)
    eager, eager_loss = run(a, capture=False)
    captured, capture_loss = run(a, capture=True)
    report = ndd.capture.report()
    e, c = statistics.mean(eager[1:] or eager), statistics.mean(captured[1:] or captured)
    print(f"eager:   {e:,.0f} samples/s, final loss {eager_loss:.4f}")
    print(f"capture: {c:,.0f} samples/s, final loss {capture_loss:.4f}")
    print(f"speedup: {c / e:.2f}x")
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
