"""Test helpers: encoders, random images, Tensor/Batch -> NumPy."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest
from PIL import Image

import ndd


def as_np(x) -> np.ndarray | list[np.ndarray]:
    """A Tensor as an array, a Batch as a list of arrays."""
    if isinstance(x, ndd.Batch):
        return [np.asarray(t) for t in x]
    return np.asarray(x)


def encode(arr: np.ndarray, fmt: str, **kw) -> np.ndarray:
    """Encode with Pillow; returns the bytes as a 1-D uint8 array."""
    b = io.BytesIO()
    img = arr if isinstance(arr, Image.Image) else Image.fromarray(arr)
    img.save(b, fmt, **kw)
    return np.frombuffer(b.getvalue(), np.uint8)


def pil_decode(data: np.ndarray, mode: str = "RGB") -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data.tobytes())).convert(mode))


def rand_image(rng: np.random.Generator, h: int, w: int, c: int | None = 3, dtype=np.uint8) -> np.ndarray:
    shape = (h, w) if c is None else (h, w, c)
    if np.dtype(dtype) == np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.random(shape, dtype=np.float32)


def smooth_image(rng: np.random.Generator, h: int, w: int, c: int = 3, dtype=np.uint8) -> np.ndarray:
    """A smooth random image (so interpolation differences stay small)."""
    import cv2

    small = rng.random((max(2, h // 8), max(2, w // 8), c), dtype=np.float32)
    big = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC).reshape(h, w, c)
    big = np.clip(big, 0, 1)
    return (big * 255).round().astype(np.uint8) if np.dtype(dtype) == np.uint8 else big.astype(np.float32)


@contextlib.contextmanager
def raises(exc_type: type, pattern: str):
    """Like ``pytest.raises(match=...)``, but also searches the cause: eager mode re-raises
    kernel errors with a generic message and the original as ``__cause__`` (as DALI)."""
    with pytest.raises(exc_type) as info:
        yield info
    text = f"{info.value} | {info.value.__cause__}"
    assert re.search(pattern, text), text
