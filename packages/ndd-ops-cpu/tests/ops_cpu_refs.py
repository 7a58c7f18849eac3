"""Independent NumPy references for the resampling tests (written from the formulas, not the kernels)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def _weights(kind: str, n_in: int, n_out: int, lo: float, hi: float, antialias: bool) -> np.ndarray:
    """Dense (n_out, n_in) weight matrix; pixel centres at i + 0.5, edges clamped."""
    scale = (hi - lo) / n_out
    shrink = abs(hi - lo) / n_out if antialias and abs(hi - lo) > n_out else 1.0
    w = np.zeros((n_out, n_in))
    for o in range(n_out):
        c = lo + (o + 0.5) * scale
        if kind == "nn":  # exact arithmetic (the tests use sizes without centres on pixel edges)
            exact = Fraction(lo) + (o + Fraction(1, 2)) * (Fraction(hi) - Fraction(lo)) / n_out
            w[o, min(max(int(np.floor(exact)), 0), n_in - 1)] = 1
            continue
        radius = {"linear": 1.0, "cubic": 2.0, "lanczos3": 3.0}[kind] * shrink
        for i in range(int(np.floor(c - radius)) - 1, int(np.ceil(c + radius)) + 2):
            d = (i + 0.5 - c) / shrink
            if kind == "linear":
                v = max(0.0, 1 - abs(d))
            elif kind == "cubic":
                x = abs(d)
                v = 1.5 * x**3 - 2.5 * x**2 + 1 if x < 1 else (-0.5 * x**3 + 2.5 * x**2 - 4 * x + 2 if x < 2 else 0)
            else:
                v = np.sinc(d) * np.sinc(d / 3) if abs(d) < 3 else 0.0
            w[o, min(max(i, 0), n_in - 1)] += v
        w[o] /= w[o].sum()
    return w


def resample(img: np.ndarray, out_hw: tuple[int, int], kind: str | tuple[str, str], antialias: bool = True,
             lo: tuple[float, float] = (0, 0), hi: tuple[float, float] | None = None) -> np.ndarray:
    """Separable resampling of an HWC image (float64 result); ``kind`` for both axes or (rows, columns)."""
    h, w = img.shape[:2]
    hi = hi or (h, w)
    ky, kx = (kind, kind) if isinstance(kind, str) else kind
    wy = _weights(ky, h, out_hw[0], lo[0], hi[0], antialias)
    wx = _weights(kx, w, out_hw[1], lo[1], hi[1], antialias)
    x = img.astype(np.float64)
    return np.einsum("oh,hwc,pw->opc", wy, x, wx)


def bilinear_sample(img: np.ndarray, sx: np.ndarray, sy: np.ndarray, fill: float | None) -> np.ndarray:
    """Sample an HWC image at continuous coordinates (pixel centres at i + 0.5).

    ``fill=None`` clamps to the border; otherwise points outside read ``fill``.
    """
    h, w = img.shape[:2]
    x = sx - 0.5
    y = sy - 0.5
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    src = img.astype(np.float64)

    def at(yy, xx):
        if fill is None:
            return src[np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
        ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        v = src[np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
        return np.where(ok[..., None], v, fill)

    return ((1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x0 + 1))
            + fy * ((1 - fx) * at(y0 + 1, x0) + fx * at(y0 + 1, x0 + 1)))
