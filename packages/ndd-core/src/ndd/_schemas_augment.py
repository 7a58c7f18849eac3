"""Schemas of the image augmentations ``equalize``, ``grid_mask``,
``jpeg_compression_distortion``, ``clahe`` and ``debayer`` (kernels in ndd-ops-cpu).

Argument names, defaults, tensor arguments, accepted types and layouts follow DALI 2.4's
CPU operators. The per-sample checks a GPU kernel would repeat (``grid_mask``'s tile,
``debayer``'s blue_position and algorithm) are the functions at the top.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._schema import BOOL, FLOAT, INT, INTS, STR, Arg, OpSchema, OutMeta

_PKG = "ndd-ops-cpu"

# debayer: blue_position (row, column) -> OpenCV's name of the 2x2 Bayer tile.
BAYER_PATTERNS = {(0, 0): "BG", (0, 1): "GB", (1, 0): "GR", (1, 1): "RG"}
DEBAYER_ALGORITHMS = ("bilinear_ocv", "edgeaware_ocv", "vng_ocv", "gray_ocv")


def grid_mask_tile(op: str, tile: Any, where: str = "") -> int:
    """``grid_mask``'s tile as an int, checked positive (``where``: " (sample i)" or "")."""
    t = int(tile)
    if t <= 0:
        raise ValueError(f"Operator `{op}`: argument 'tile' must be positive, got {t}{where}")
    return t


def grid_mask_keep(h: int, w: int, tile: int, ratio: float, angle: float, shift_x: float,
                   shift_y: float) -> np.ndarray:
    """(h, w) bool: the pixels ``grid_mask`` keeps, in DALI's float32 arithmetic.

    Pixel (x, y) maps to grid coordinates ``((x cos a - y sin a - shift_x) / tile,
    (x sin a + y cos a - shift_y) / tile)``; it is zeroed when the fractional parts of both
    are below ``ratio``."""
    f32 = np.float32
    a = float(f32(angle))
    t = f32(tile)
    ca, sa = f32(math.cos(a)) / t, f32(math.sin(a)) / t
    sx, sy = f32(shift_x) / t, f32(shift_y) / t
    y = np.arange(h, dtype=f32)[:, None]
    x = np.arange(w, dtype=f32)[None, :]
    gx = (-sx + y * -sa) + x * ca
    gy = (-sy + y * ca) + x * sa
    r = f32(ratio)
    return ((gx - np.floor(gx)) >= r) | ((gy - np.floor(gy)) >= r)  # (NaN: zeroed, as DALI)


def bayer_pattern(op: str, blue_position: Any, where: str = "") -> str:
    """OpenCV's Bayer pattern name ("BG", "GB", "GR", "RG") for a ``blue_position``."""
    pos = tuple(int(v) for v in np.asarray(blue_position).ravel())
    if len(pos) != 2:
        raise ValueError(f"Operator `{op}`: argument 'blue_position' must have two values (row, column) "
                         f"of the blue sensor in the 2x2 tile, got {len(pos)}{where}")
    if pos not in BAYER_PATTERNS:
        raise ValueError(f"Operator `{op}`: argument 'blue_position' must lie in the 2x2 tile (each value "
                         f"0 or 1), got {list(pos)}{where}")
    return BAYER_PATTERNS[pos]


def debayer_algorithm(op: str, algorithm: str | None) -> str:
    """The CPU algorithm name (not set: "bilinear_ocv"; DALI compares names without case)."""
    if algorithm is None:
        return "bilinear_ocv"
    name = algorithm.lower()
    if name == "default_npp":
        raise ValueError(f"Operator `{op}`: algorithm 'default_npp' is GPU-only; on the CPU use one of "
                         f"{', '.join(DEBAYER_ALGORITHMS)}")
    if name not in DEBAYER_ALGORITHMS:
        raise ValueError(f"Operator `{op}`: argument 'algorithm' must be one of "
                         f"{', '.join(DEBAYER_ALGORITHMS)}, got {algorithm!r}")
    return name


def _layout(op: str, m: OutMeta, allowed: tuple[str, ...], guess: dict[int, str]) -> str:
    """The input's layout (guessed from its dimensions when it has none), checked."""
    lay = m.layout or guess.get(m.ndim)
    if lay is None:
        raise ValueError(f"Operator `{op}`: a {m.ndim}-D input matches none of the layouts "
                         f"{', '.join(allowed)}")
    if lay not in allowed:
        raise ValueError(f"Operator `{op}`: the layout {lay!r} is not one of {', '.join(allowed)}")
    return lay


def _name(t: _dtype.DType) -> str:
    try:
        return np.dtype(t.numpy_dtype).name
    except TypeError:  # no NumPy equivalent (bfloat16)
        return str(t)


def _check_dtype(op: str, m: OutMeta, allowed: tuple[_dtype.DType, ...]) -> None:
    if m.dtype not in allowed:
        names = ", ".join(map(_name, allowed))
        raise ValueError(f"Operator `{op}`: expects {names} input (as DALI), got {_name(m.dtype)}")


# -- equalize ---------------------------------------------------------------------------

_EQ_LAYOUTS = ("HW", "HWC", "CHW", "FHW", "FHWC", "FCHW")


def _equalize_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    _check_dtype("equalize", m, (_dtype.uint8,))
    lay = _layout("equalize", m, _EQ_LAYOUTS, {2: "HW", 3: "HWC", 4: "FHWC"})
    return [OutMeta(m.dtype, m.ndim, lay)]


EQUALIZE = OpSchema(
    "equalize", infer=_equalize_infer, provided_by=_PKG,
    doc="Histogram equalization of uint8 images and videos, each channel of each frame on its own "
        "(OpenCV's equalizeHist).",
)

# -- grid_mask --------------------------------------------------------------------------

_GM_DTYPES = (_dtype.uint8, _dtype.int16, _dtype.int32, _dtype.float32)


def _grid_mask_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "grid_mask"
    m = inputs[0]
    _check_dtype(op, m, _GM_DTYPES)
    if m.ndim != 3 or (m.layout or "HWC") != "HWC":
        raise ValueError(f"Operator `{op}`: expects HWC images (3-D, channels last), got a {m.ndim}-D input"
                         + (f" with layout {m.layout!r}" if m.layout else ""))
    return [m]  # (no layout stays none, as DALI)


def _grid_mask_validate(args: dict) -> None:
    if args["tile"] is not None:
        grid_mask_tile("grid_mask", args["tile"])


GRID_MASK = OpSchema(
    "grid_mask",
    args={
        "tile": Arg(INT, 100, per_sample=True, doc="period of the grid in pixels (black square plus gap)"),
        "ratio": Arg(FLOAT, 0.5, per_sample=True, doc="side of a black square as a fraction of tile"),
        "angle": Arg(FLOAT, 0.0, per_sample=True, doc="rotation of the grid about the origin, in radians"),
        "shift_x": Arg(FLOAT, 0.0, per_sample=True, doc="x translation of the grid, after the rotation"),
        "shift_y": Arg(FLOAT, 0.0, per_sample=True, doc="y translation of the grid, after the rotation"),
    },
    infer=_grid_mask_infer, validate=_grid_mask_validate, provided_by=_PKG,
    doc="GridMask (arXiv:2001.04086): zero the pixels inside a rotated, shifted grid of squares.",
)

# -- jpeg_compression_distortion --------------------------------------------------------


def _jpeg_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "jpeg_compression_distortion"
    m = inputs[0]
    _check_dtype(op, m, (_dtype.uint8,))
    lay = _layout(op, m, ("HWC", "FHWC"), {3: "HWC", 4: "FHWC"})
    return [OutMeta(m.dtype, m.ndim, lay)]


JPEG_COMPRESSION_DISTORTION = OpSchema(
    "jpeg_compression_distortion",
    args={"quality": Arg(INT, 50, per_sample=True, doc="JPEG quality, clamped to 1..100")},
    infer=_jpeg_infer, provided_by=_PKG,
    doc="Encode RGB uint8 images (or each frame of a video) as baseline JPEG (4:2:0) with the given "
        "quality and decode them again, as DALI's CPU operator does through OpenCV.",
)

# -- clahe ------------------------------------------------------------------------------


def _clahe_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    _check_dtype("clahe", m, (_dtype.uint8,))
    _layout("clahe", m, ("HWC",), {3: "HWC"})
    return [OutMeta(m.dtype, 3, "HWC")]


def _clahe_validate(args: dict) -> None:
    for name in ("tiles_x", "tiles_y"):
        if args[name] <= 0:
            raise ValueError(f"Operator `clahe`: argument '{name}' must be positive, got {args[name]}")


CLAHE = OpSchema(
    "clahe",
    args={
        "tiles_x": Arg(INT, required=True, doc="number of tiles across the width"),
        "tiles_y": Arg(INT, required=True, doc="number of tiles down the height"),
        "clip_limit": Arg(FLOAT, required=True,
                          doc="histogram clip limit, relative to the mean bin count of a tile (<= 0: none)"),
        "bins": Arg(INT, 256, doc="histogram bins; DALI's CPU operator ignores it (always 256), and so does ndd"),
        "luma_only": Arg(BOOL, True, doc="RGB input: equalize the L channel of CIE Lab only "
                                         "(False: each channel on its own)"),
    },
    infer=_clahe_infer, validate=_clahe_validate, provided_by=_PKG,
    doc="Contrast limited adaptive histogram equalization of uint8 HWC images with 1 or 3 (RGB) "
        "channels, as OpenCV's CLAHE.",
)

# -- debayer ----------------------------------------------------------------------------


def _debayer_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "debayer"
    m = inputs[0]
    _check_dtype(op, m, (_dtype.uint8, _dtype.uint16))
    lay = _layout(op, m, ("HW", "HWC", "FHW", "FHWC"), {2: "HW", 3: "HWC", 4: "FHWC"})
    if debayer_algorithm(op, args["algorithm"]) == "vng_ocv" and m.dtype != _dtype.uint8:
        raise ValueError(f"Operator `{op}`: algorithm 'vng_ocv' supports uint8 input only, got {_name(m.dtype)}")
    seq = lay[0] == "F"
    return [OutMeta(m.dtype, 3 + seq, "FHWC" if seq else "HWC")]


def _debayer_validate(args: dict) -> None:
    debayer_algorithm("debayer", args["algorithm"])
    if args["blue_position"] is not None:  # (None when given per sample: checked by the kernel)
        bayer_pattern("debayer", args["blue_position"])


DEBAYER = OpSchema(
    "debayer",
    args={
        "blue_position": Arg(INTS, required=True, per_sample=True,
                             doc="(row, column) of the blue sensor in the 2x2 Bayer tile, as OpenCV counts it: "
                                 "(0, 0) BG, (0, 1) GB, (1, 0) GR, (1, 1) RG; per sample, a (frames, 2) "
                                 "value gives one per frame"),
        "algorithm": Arg(STR, None, doc="bilinear_ocv (not set), edgeaware_ocv, vng_ocv (uint8 only) or "
                                        "gray_ocv (one output channel); case ignored"),
    },
    infer=_debayer_infer, validate=_debayer_validate, provided_by=_PKG,
    doc="Demosaic single-channel Bayer images (uint8 or uint16, even height and width) to RGB with "
        "OpenCV's algorithms.",
)

AUGMENT_SCHEMAS = (EQUALIZE, GRID_MASK, JPEG_COMPRESSION_DISTORTION, CLAHE, DEBAYER)
