"""Helpers shared by the CPU kernels: parallel loops, layouts, dtype conversion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import cv2
import numpy as np

from ndd.plugins import BatchData, KernelContext, saturate_cast
from ndd.types import DALIInterpType

T = TypeVar("T")

# Below this many input bytes per batch a plain loop beats handing work to threads.
_PARALLEL_MIN_BYTES = 1 << 18


def map_samples(ctx: KernelContext, fn: Callable[[int], T], n: int, nbytes: int | None = None) -> list[T]:
    """``[fn(i) for i in range(n)]``, split into one contiguous chunk per pool thread.

    Small batches (``nbytes`` under 256 KiB) run inline: for 28x28 images the
    hand-off to threads costs more than the work.
    """
    pool = ctx.thread_pool
    k = min(pool.num_threads, n)
    if k <= 1 or (nbytes is not None and nbytes < _PARALLEL_MIN_BYTES):
        return [fn(i) for i in range(n)]
    bounds = np.linspace(0, n, k + 1).astype(int)
    chunks = pool.map(lambda lo, hi: [fn(i) for i in range(lo, hi)], bounds[:-1], bounds[1:])
    return [r for c in chunks for r in c]


def batch_nbytes(samples: Sequence[np.ndarray]) -> int:
    return sum(s.nbytes for s in samples)


def cast_to(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert ``x`` to ``dtype`` as DALI's operators do (ConvertSat): floats going to integers
    are rounded half away from zero and saturated, integers saturated (``saturate_cast``)."""
    dtype, x = np.dtype(dtype), np.asarray(x)  # NumPy scalars (from 0-d arithmetic) as 0-d arrays
    if x.dtype == dtype:
        return x if x.flags.c_contiguous else np.ascontiguousarray(x)  # (it would make a 0-d array 1-d)
    return saturate_cast(x, dtype)


def window_cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``crop``'s (and core ``slice``'s) conversion, as DALI's: floats going to integers
    truncated (2.7 gives 2), then saturated like every integer target."""
    dtype = np.dtype(dtype)
    if x.dtype.kind == "f" and dtype.kind in "iu":
        x = np.trunc(x)
    return cast_to(x, dtype)


CV_INTERP = {
    DALIInterpType.INTERP_NN: cv2.INTER_NEAREST,
    DALIInterpType.INTERP_LINEAR: cv2.INTER_LINEAR,
}


def sample_name(ctx: KernelContext, bd: BatchData, i: int) -> str:
    """How an error names sample ``i``: its description in a batch, "the input" otherwise."""
    return bd.describe(i) if ctx.is_batch else "the input"
