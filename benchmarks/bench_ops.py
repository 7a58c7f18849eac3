"""CPU image operators: µs per batch of 64, ndd against a plain per-sample Pillow/NumPy loop.

Two workloads: (a) 28x28 GRAY "digits", (b) 256x256 RGB "photos" (crops of
scikit-image's sample photographs when it is installed, smooth noise otherwise).
Each row runs the ndd operator on the whole batch (sync_cpu mode, so the time
includes the work) and a loop doing the same work sample by sample with
Pillow / NumPy, and prints both and their ratio (loop / ndd: above 1 means ndd
is faster). Run with ``nox -s bench_ops`` or ``python benchmarks/bench_ops.py``.
"""

from __future__ import annotations

import argparse
import io
import math
import time
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter

import ndd

N = 64
MEAN = np.array([0.485, 0.456, 0.406], np.float32) * 255
STD = np.array([0.229, 0.224, 0.225], np.float32) * 255


def _photos(rng: np.random.Generator) -> list[np.ndarray]:
    try:
        import skimage.data as d

        srcs = [d.astronaut(), d.chelsea(), d.coffee(), d.rocket()]
    except ImportError:
        srcs = [np.clip(rng.normal(128, 60, (512, 512, 3)), 0, 255).astype(np.uint8)]
    out = []
    for i in range(N):
        s = srcs[i % len(srcs)]
        y = int(rng.integers(0, s.shape[0] - 256 + 1))
        x = int(rng.integers(0, s.shape[1] - 256 + 1))
        out.append(np.ascontiguousarray(s[y:y + 256, x:x + 256]))
    return out


def _digits(photos: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(Image.fromarray(p).convert("L").resize((28, 28), Image.Resampling.BILINEAR))[..., None]
            for p in photos]


def _jpeg(a: np.ndarray) -> np.ndarray:
    b = io.BytesIO()
    Image.fromarray(a[..., 0] if a.shape[2] == 1 else a).save(b, "JPEG", quality=90)
    return np.frombuffer(b.getvalue(), np.uint8)


def timeit(fn: Callable[[], object], budget: float) -> float:
    """Best-of-repeats µs per call, spending about ``budget`` seconds."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-6)
    reps = max(1, min(50, int(budget / 3 / once)))
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best * 1e6


def _pil(a: np.ndarray) -> Image.Image:
    return Image.fromarray(a[..., 0] if a.shape[2] == 1 else a)


def _np(im: Image.Image, c: int) -> np.ndarray:
    a = np.asarray(im)
    return a[..., None] if c == 1 else a


def cases(imgs: list[np.ndarray], size: int) -> list[tuple[str, Callable, Callable]]:
    """(name, ndd call on the whole batch, per-sample loop) for one workload."""
    c = imgs[0].shape[2]
    batch = ndd.batch(imgs, layout="HWC")
    jpegs = [_jpeg(a) for a in imgs]
    jbatch = ndd.batch(jpegs)
    out_type = ndd.types.GRAY if c == 1 else ndd.types.RGB
    pil_mode = "L" if c == 1 else "RGB"
    angles = np.random.default_rng(0).uniform(-30, 30, N).astype(np.float32)
    abatch = ndd.batch(list(angles))
    mirror = (np.arange(N) % 2).astype(np.int32)
    mbatch = ndd.batch(list(mirror))
    small = size * 7 // 8  # 24 for digits, 224 for photos
    half = size // 2
    mtx = [0.9, 0.1, 1.0, -0.1, 0.9, 2.0]
    mean, std = (MEAN[:1], STD[:1]) if c == 1 else (MEAN, STD)
    noise_rng = np.random.default_rng(1)

    def loop(fn: Callable[[int, np.ndarray], object]) -> Callable[[], list]:
        return lambda: [fn(i, a) for i, a in enumerate(imgs)]

    def cmn_ref(i: int, a: np.ndarray) -> np.ndarray:
        y0, x0 = (size - small) // 2, (size - small) // 2
        x = a[y0:y0 + small, x0:x0 + small]
        if mirror[i]:
            x = x[:, ::-1]
        return np.ascontiguousarray(((x - mean) / std).astype(np.float32).transpose(2, 0, 1))

    def hsv_ref(i: int, a: np.ndarray) -> np.ndarray:
        hsv = np.asarray(Image.fromarray(a).convert("HSV")).copy()
        hsv[..., 0] = hsv[..., 0] + np.uint8(21)
        hsv[..., 1] = np.clip(hsv[..., 1] * 1.2, 0, 255).astype(np.uint8)
        return np.asarray(Image.fromarray(hsv, "HSV").convert("RGB"))

    def rrc_ref(i: int, a: np.ndarray) -> np.ndarray:
        y0, x0 = (i * 7) % (size // 4), (i * 5) % (size // 4)
        box = (x0, y0, x0 + size * 3 // 4, y0 + size * 3 // 4)
        return _np(_pil(a).resize((small, small), Image.Resampling.BILINEAR, box=box), c)

    rows = [
        ("decoders.image", lambda: ndd.decoders.image(jbatch, output_type=out_type),
         lambda: [np.asarray(Image.open(io.BytesIO(j.tobytes())).convert(pil_mode)) for j in jpegs]),
        ("resize (x0.5, linear)", lambda: ndd.resize(batch, size=(half, half)),
         loop(lambda i, a: _np(_pil(a).resize((half, half), Image.Resampling.BILINEAR), c))),
        ("resize (x2, linear)", lambda: ndd.resize(batch, size=(2 * size, 2 * size)),
         loop(lambda i, a: _np(_pil(a).resize((2 * size, 2 * size), Image.Resampling.BILINEAR), c))),
        ("rotate (per-sample angle)", lambda: ndd.rotate(batch, angle=abatch, keep_size=True, fill_value=0),
         loop(lambda i, a: _np(_pil(a).rotate(float(angles[i]), Image.Resampling.BILINEAR), c))),
        ("warp_affine", lambda: ndd.warp_affine(batch, matrix=mtx, fill_value=0),
         loop(lambda i, a: _np(_pil(a).transform((size, size), Image.Transform.AFFINE, mtx,
                                                 Image.Resampling.BILINEAR), c))),
        ("flip (per-sample)", lambda: ndd.flip(batch, horizontal=mbatch),
         loop(lambda i, a: np.ascontiguousarray(a[:, ::-1]) if mirror[i] else a.copy())),
        ("crop", lambda: ndd.crop(batch, crop=(small, small)),
         loop(lambda i, a: np.ascontiguousarray(a[(size - small) // 2:(size + small) // 2,
                                                  (size - small) // 2:(size + small) // 2]))),
        ("crop_mirror_normalize", lambda: ndd.crop_mirror_normalize(batch, crop=(small, small), mirror=mbatch,
                                                                    mean=mean.tolist(), std=std.tolist()),
         loop(cmn_ref)),
        ("normalize (per-sample HW)", lambda: ndd.normalize(batch, axes=[0, 1]),
         loop(lambda i, a: ((a - a.mean((0, 1))) / a.std((0, 1))).astype(np.float32))),
        ("brightness_contrast", lambda: ndd.brightness_contrast(batch, brightness=1.2, contrast=0.8),
         loop(lambda i, a: _np(ImageEnhance.Contrast(ImageEnhance.Brightness(_pil(a)).enhance(1.2)).enhance(0.8),
                               c))),
        ("random_resized_crop", lambda: ndd.random_resized_crop(batch, size=(small, small)), loop(rrc_ref)),
        ("gaussian_blur (sigma 1.5)", lambda: ndd.gaussian_blur(batch, sigma=1.5),
         loop(lambda i, a: _np(_pil(a).filter(ImageFilter.GaussianBlur(1.5)), c))),
        ("noise.gaussian (stddev 10)", lambda: ndd.noise.gaussian(batch, stddev=10.0),
         loop(lambda i, a: np.clip(np.rint(a + noise_rng.normal(0, 10, a.shape)), 0, 255).astype(np.uint8))),
        ("reductions.mean (per channel)", lambda: ndd.reductions.mean(batch, axis_names="HW"),
         loop(lambda i, a: a.mean((0, 1), dtype=np.float32))),
        ("peek_image_shape", lambda: ndd.peek_image_shape(jbatch),
         lambda: [Image.open(io.BytesIO(j.tobytes())).size for j in jpegs]),
        ("decoders.image_slice", lambda: ndd.decoders.image_slice(jbatch, rel_start=[0.25, 0.25], rel_shape=[0.5, 0.5],
                                                                  output_type=out_type),
         lambda: [np.asarray(Image.open(io.BytesIO(j.tobytes())).convert(pil_mode).crop(
             (size // 4, size // 4, size * 3 // 4, size * 3 // 4))) for j in jpegs]),
    ]
    if c == 3:
        rows += [
            ("hsv", lambda: ndd.hsv(batch, hue=30.0, saturation=1.2), loop(hsv_ref)),
            ("color_twist", lambda: ndd.color_twist(batch, hue=30.0, saturation=1.2, contrast=0.8),
             loop(lambda i, a: _np(ImageEnhance.Contrast(ImageEnhance.Color(_pil(a)).enhance(1.2)).enhance(0.8),
                                   c))),
        ]
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--budget", type=float, default=0.4, help="seconds per measurement (default 0.4)")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    photos = _photos(rng)
    digits = _digits(photos)
    print(f"ndd {ndd.__version__}, {ndd.get_num_threads()} pool threads, batch of {N}; µs per batch")
    print(f"{'workload':<14}{'operator':<28}{'ndd':>10}{'loop':>10}{'loop/ndd':>10}")
    with ndd.EvalMode.sync_cpu:
        for label, imgs, size in (("28x28 GRAY", digits, 28), ("256x256 RGB", photos, 256)):
            for name, fast, slow in cases(imgs, size):
                t_ndd = timeit(fast, args.budget)
                t_ref = timeit(slow, args.budget)
                print(f"{label:<14}{name:<28}{t_ndd:>10.0f}{t_ref:>10.0f}{t_ref / t_ndd:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
