"""Build the demo dataset: MNIST-like 28×28 grey digit JPEGs, as a Caffe2 LMDB and a file tree.

Real MNIST cannot be downloaded here (only package registries are reachable), so the
digits are drawn with OpenCV's Hershey fonts at random scale, thickness, slant and
position, blurred a little and encoded as JPEG. The labels are the digits, so a model
can learn them. The same records are written as a Caffe2 LMDB (``data/mnist_lmdb``) and
as a file tree of label folders (``data/mnist_files``); both are cached (built only when
missing). Run ``python examples/make_demo_dataset.py --help``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Iterator

import cv2
import numpy as np

from ndd_readers.writers import write_caffe2_lmdb, write_file_tree

FONTS = (cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX, cv2.FONT_HERSHEY_COMPLEX,
         cv2.FONT_HERSHEY_TRIPLEX, cv2.FONT_HERSHEY_SCRIPT_SIMPLEX, cv2.FONT_HERSHEY_PLAIN)


def digit_image(label: int, rng: np.random.Generator) -> np.ndarray:
    """One 28×28 uint8 image of ``label`` on a black background."""
    canvas = np.zeros((56, 56), np.uint8)
    font = FONTS[rng.integers(len(FONTS))]
    scale = rng.uniform(1.2, 1.9) if font != cv2.FONT_HERSHEY_PLAIN else rng.uniform(2.4, 3.4)
    thick = int(rng.integers(3, 7))
    (w, h), _ = cv2.getTextSize(str(label), font, scale, thick)
    x = int((56 - w) / 2 + rng.integers(-4, 5))
    y = int((56 + h) / 2 + rng.integers(-4, 5))
    cv2.putText(canvas, str(label), (x, y), font, scale, 255, thick, cv2.LINE_AA)
    shear = rng.uniform(-0.3, 0.3)
    m = np.float32([[1, shear, -shear * 28], [0, 1, 0]])
    canvas = cv2.warpAffine(canvas, m, (56, 56))
    small = cv2.resize(canvas, (28, 28), interpolation=cv2.INTER_AREA)
    return cv2.GaussianBlur(small, (3, 3), rng.uniform(0.1, 0.7))


def records(n: int, seed: int) -> Iterator[tuple[bytes, int]]:
    rng = np.random.default_rng(seed)
    for i in range(n):
        label = int(rng.integers(10))
        ok, jpeg = cv2.imencode(".jpg", digit_image(label, rng), [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise RuntimeError(f"JPEG encoding failed for record {i}")
        if i % 1000 == 0 or i == n - 1:
            done = (i + 1) / n
            print(f"\r  building demo dataset [{'#' * int(30 * done):<30}] {i + 1}/{n}", end="",
                  file=sys.stderr, flush=True)
        yield jpeg.tobytes(), label
    print(file=sys.stderr)


def build(path: pathlib.Path, n: int = 20000, seed: int = 0, tree: pathlib.Path | None = None) -> int:
    """Write ``n`` records to the LMDB directory ``path`` and, unless it exists, the file tree
    ``tree`` (default: ``mnist_files`` next to ``path``); returns the count."""
    path.mkdir(parents=True, exist_ok=True)
    count = write_caffe2_lmdb(str(path), records(n, seed))
    tree = tree if tree is not None else path.parent / "mnist_files"
    if not tree.exists():
        write_file_tree(tree, records(n, seed), ext="jpg")
    return count


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", type=pathlib.Path, nargs="?", default=pathlib.Path("data/mnist_lmdb"))
    p.add_argument("--count", type=int, default=20000, help="number of images")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    print(f"wrote {build(a.path, a.count, a.seed)} records to {a.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
