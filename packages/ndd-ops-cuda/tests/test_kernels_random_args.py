"""GPU kernels against the CPU kernels on random arguments and images (seeded).

Each trial draws a batch (1 to 4 samples, ragged or not, 1 to 64 x 1 to 80 pixels with many
1- and 2-pixel sides, 1, 3 or 4 channels or HW, uint8 noise or float32 values) and random
arguments of one operator, runs it on both devices and compares. An argument the CPU
refuses must be refused on the GPU with the same type of error.

Tolerances: exact for crop, flip, cast and nearest-neighbour sampling (at angles that are
not multiples of 90 degrees, at most 0.2 % of the pixels: a coordinate within float32
rounding of a half pixel); interpolated uint8 within 1 level everywhere, in at most 25 % of
the values (noise at half-pixel weights rounds ties either way); interpolated float32 (values
up to 250) within 5e-3, 2e-5 of their range (OpenCV's coordinates are fixed point); other
float32 results within 1e-4 plus 1e-5 relative.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Callable

import numpy as np
import pytest

import ndd
from ndd.types import DALIInterpType

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from kernel_helpers import assert_close, samples_of  # noqa: E402

TRIALS = 30
NN, LINEAR = DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR
FILTERS = [NN, LINEAR, DALIInterpType.INTERP_CUBIC, DALIInterpType.INTERP_LANCZOS3,
           DALIInterpType.INTERP_TRIANGULAR, DALIInterpType.INTERP_GAUSSIAN]


def _side(r: np.random.Generator, hi: int) -> int:
    return int(r.integers(1, 3)) if r.random() < 0.3 else int(r.integers(1, hi + 1))


def _images(r: np.random.Generator) -> ndd.Batch:
    n = int(r.integers(1, 5))
    dtype = np.uint8 if r.random() < 0.6 else np.float32
    c = int(r.choice([0, 1, 3, 4]))  # 0: HW
    first = (_side(r, 64), _side(r, 80))
    samples = []
    for _ in range(n):
        hw = first if r.random() < 0.4 else (_side(r, 64), _side(r, 80))
        shape = hw + ((c,) if c else ())
        samples.append(r.integers(0, 256, shape, dtype=np.uint8) if dtype == np.uint8
                       else (r.random(shape, dtype=np.float32) * 300 - 50))
    return ndd.as_batch(samples, layout="HWC" if c else "HW")


def _f(r: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.round(r.uniform(lo, hi), 2))


def _resize(r: np.random.Generator) -> tuple[Callable, str]:
    kw: dict = {"interp_type": FILTERS[int(r.integers(len(FILTERS)))], "antialias": bool(r.random() < 0.5)}
    which = r.random()
    if which < 0.5:
        kw["size"] = (_f(r, 1, 50), _f(r, 1, 50))
    elif which < 0.7:
        kw["resize_shorter"] = float(r.integers(1, 40))
    else:
        kw["resize_x"] = float(r.integers(1, 40))
    if r.random() < 0.3:
        start, end = (_f(r, 0, 0.5), _f(r, 0, 0.5)), (_f(r, 0.4, 1), _f(r, 0.4, 1))
        kw.update(roi_relative=True, roi_start=end if r.random() < 0.3 else start,
                  roi_end=start if r.random() < 0.3 else end)
    exact = kw["interp_type"] == NN
    return (lambda x: ndd.resize(x, **kw)), "exact" if exact else "interp"


def _warp_kwargs(r: np.random.Generator) -> tuple[dict, str]:
    interp = NN if r.random() < 0.5 else LINEAR
    kw: dict = {"interp_type": interp}
    if r.random() < 0.5:
        kw["fill_value"] = float(r.choice([0.0, 7.0, 300.0, -5.0, np.nan]))
    return kw, "exact" if interp == NN else "interp"


def _rotate(r: np.random.Generator) -> tuple[Callable, str]:
    kw, tol = _warp_kwargs(r)
    kw["angle"] = float(r.choice([0.0, 90.0, 180.0, -90.0])) if r.random() < 0.5 else _f(r, -180, 180)
    if r.random() < 0.4:
        kw["keep_size"] = True
    elif r.random() < 0.5:
        kw["size"] = (float(r.integers(0, 30)), float(r.integers(0, 30)))
    if tol == "exact" and kw["angle"] % 90:
        tol = "nearest"  # a source coordinate within float32 rounding of a half pixel may differ
    return (lambda x: ndd.rotate(x, **kw)), tol


def _warp_affine(r: np.random.Generator) -> tuple[Callable, str]:
    kw, tol = _warp_kwargs(r)
    m = [1.0, 0.0, float(r.integers(-4, 5)) / 2, 0.0, 1.0, float(r.integers(-4, 5)) / 2]
    if r.random() < 0.5:  # scaled by a power of two: coordinates stay exact
        m[0], m[4] = float(r.choice([0.5, 2.0, -1.0])), float(r.choice([0.5, 1.0, -2.0]))
    kw["matrix"] = m
    if r.random() < 0.5:
        kw["size"] = (float(r.integers(1, 30)), float(r.integers(1, 30)))
    return (lambda x: ndd.warp_affine(x, **kw)), tol


def _crop(r: np.random.Generator) -> tuple[Callable, str]:
    kw = {"crop": (float(r.integers(1, 40)), float(r.integers(1, 40))),
          "crop_pos_x": _f(r, 0, 1), "crop_pos_y": _f(r, 0, 1),
          "out_of_bounds_policy": str(r.choice(["pad", "trim_to_shape"])),
          "fill_values": float(r.integers(0, 9))}
    return (lambda x: ndd.crop(x, **kw)), "exact"


def _flip(r: np.random.Generator) -> tuple[Callable, str]:
    kw = {"horizontal": int(r.integers(0, 2)), "vertical": int(r.integers(0, 2))}
    return (lambda x: ndd.flip(x, **kw)), "exact"


def _crop_mirror_normalize(r: np.random.Generator) -> tuple[Callable, str]:
    kw: dict = {"crop": (float(r.integers(1, 30)), float(r.integers(1, 30))), "crop_pos_x": _f(r, 0, 1),
                "mirror": int(r.integers(0, 2)), "output_layout": str(r.choice(["HWC", "CHW"])),
                "mean": [_f(r, 0, 128)], "std": [_f(r, 1, 64)], "out_of_bounds_policy": "pad"}
    return (lambda x: ndd.crop_mirror_normalize(x, **kw)), "float"


def _normalize(r: np.random.Generator) -> tuple[Callable, str]:
    kw: dict = {"axes": tuple(int(a) for a in r.choice(2, size=int(r.integers(0, 3)), replace=False))}
    if r.random() < 0.3:
        kw.update(mean=_f(r, 0, 100), stddev=_f(r, 1, 50))
    if r.random() < 0.3:
        kw.update(scale=_f(r, 0.5, 64), shift=_f(r, 0, 128))
    if r.random() < 0.3:
        kw["epsilon"] = 1e-3
    return (lambda x: ndd.normalize(x, **kw)), "float"


def _cast(r: np.random.Generator) -> tuple[Callable, str]:
    dt = [ndd.uint8, ndd.int16, ndd.int32, ndd.float32, ndd.uint16][int(r.integers(5))]
    return (lambda x: ndd.cast(x, dtype=dt)), "exact"


OPS = {"resize": _resize, "rotate": _rotate, "warp_affine": _warp_affine, "crop": _crop, "flip": _flip,
       "crop_mirror_normalize": _crop_mirror_normalize, "normalize": _normalize, "cast": _cast}


def _run(fn: Callable, b: ndd.Batch) -> tuple[list[np.ndarray] | None, BaseException | None]:
    try:
        return samples_of(fn(b).evaluate().cpu()), None
    except Exception as e:  # noqa: BLE001 - compared with the other device's
        while e.__cause__ is not None and "asynchronous" in str(e):
            e = e.__cause__
        return None, e


def _compare(ref: list[np.ndarray], got: list[np.ndarray], tol: str) -> None:
    if ref and np.issubdtype(ref[0].dtype, np.floating):
        ref = [np.nan_to_num(x, nan=-1e30) for x in ref]  # NaN where the CPU has NaN
        got = [np.nan_to_num(x, nan=-1e30) for x in got]
    if tol == "exact":
        assert_close(ref, got)
    elif tol == "nearest":
        assert [x.shape for x in ref] == [x.shape for x in got]
        differ = sum(int((x != y).sum()) for x, y in zip(ref, got))
        assert differ <= 0.002 * sum(x.size for x in ref), f"{differ} values differ"
    elif tol == "interp" and ref and ref[0].dtype == np.uint8:
        assert_close(ref, got, atol=1, max_frac=0.25)
    elif tol == "interp":
        assert_close(ref, got, atol=5e-3)
    else:
        assert_close(ref, got, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("op", sorted(OPS))
def test_gpu_kernel_matches_cpu_on_random_arguments(op):
    r = np.random.default_rng(zlib.crc32(op.encode()))
    for trial in range(TRIALS):
        b = _images(r)
        fn, tol = OPS[op](r)
        ref, cpu_err = _run(fn, b)
        got, gpu_err = _run(fn, b.gpu())
        where = f"{op} trial {trial}: {b!r}"
        if cpu_err is not None:
            assert gpu_err is not None and type(gpu_err) is type(cpu_err), (where, cpu_err, gpu_err)
            continue
        assert gpu_err is None, (where, gpu_err)
        _compare(ref, got, tol)
