"""Argument handling shared by the CPU and GPU kernels of ``color_space_conversion``,
``lookup_table`` and ``erase`` (internal; exported through :mod:`ndd.plugins`).

Pure NumPy: the colour conversion recipes (with the float32 constants that reproduce
DALI 2.4's uint8 results bit for bit), lookup tables, erase regions and fill values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ._dispatch import KernelArgs
from ._reductions import trunc_cast
from ._saturate import saturate_cast
from .types import DALIImageType

# -- color_space_conversion -------------------------------------------------------------

_RGB, _BGR, _GRAY, _YCBCR = DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY, DALIImageType.YCbCr
COLOR_CHANNELS = {_RGB: 3, _BGR: 3, _GRAY: 1, _YCBCR: 3}

# RGB -> GRAY in 15-bit fixed point: (R, G, B) . GRAY_WEIGHTS + 2**14, shifted right by 15.
GRAY_WEIGHTS = (9798, 19235, 3735)

_F = np.float32
# ITU-R BT.601 (Y in 16..235, Cb and Cr in 16..240), rows over (R, G, B).
_RGB_TO_YCBCR = np.array([[0.25678822, 0.5041294, 0.09790588],
                          [-0.1482229, -0.29099279, 0.43921569],
                          [0.43921569, -0.36778831, -0.071427375]], _F)
# Rows R, G, B over (Y - 16, Cb - 128, Cr - 128); G takes the Cb term first.
_YCBCR_TO_RGB = np.array([[1.16438356, 0.0, 1.59602678],
                          [1.16438356, -0.39176229, -0.81296765],
                          [1.16438356, 2.01723214, 0.0]], _F)
_Y_RANGE = _F(219 / 255)  # gray <-> Y: the full range to 16..235
_Y_INV = _F(1.16438356)


class ColorConversion(NamedTuple):
    """How to convert one pixel, in three steps every device runs alike.

    1. ``source``: the input channels read, in canonical order (R, G, B for colour
       inputs, so a BGR input is read backwards);
    2. ``kind``: ``"copy"`` (the channels as read), ``"gray"`` (integer
       ``(x . GRAY_WEIGHTS + 2**14) >> 15``) or ``"affine"`` (``matrix`` has one column per
       channel read): output row j is
       ``matrix[j, 0] * (x0 - pre[0])``, then ``+ matrix[j, k] * (xk - pre[k])`` for each
       non-zero coefficient in order, then ``+ post[j]``, every step in float32, and the sum
       rounded half away from zero and saturated to uint8;
    3. ``target``: the computed channel written to each output channel (a BGR output is
       written backwards; a GRAY input repeated for RGB).
    """

    in_channels: int
    out_channels: int
    source: tuple[int, ...]
    kind: str
    target: tuple[int, ...]
    matrix: np.ndarray | None = None
    pre: np.ndarray | None = None
    post: np.ndarray | None = None


def color_conversion(op: str, image_type: DALIImageType, output_type: DALIImageType) -> ColorConversion:
    """The recipe converting ``image_type`` pixels to ``output_type`` (RGB, BGR, GRAY, YCbCr)."""
    for name, t in (("image_type", image_type), ("output_type", output_type)):
        if t not in COLOR_CHANNELS:
            raise ValueError(f"Operator `{op}`: argument '{name}' must be RGB, BGR, GRAY or YCbCr, got {t.name}")
    if image_type == output_type:
        raise ValueError(f"Operator `{op}`: 'image_type' and 'output_type' are both {image_type.name}; "
                         "DALI has no conversion of a type to itself")
    source = (2, 1, 0) if image_type == _BGR else tuple(range(COLOR_CHANNELS[image_type]))
    rgb_out = (2, 1, 0) if output_type == _BGR else (0, 1, 2)
    zero3 = np.zeros(3, _F)
    if image_type == _YCBCR:
        if output_type == _GRAY:
            return ColorConversion(3, 1, (0,), "affine", (0,), np.array([[_Y_INV]], _F), np.array([16], _F),
                                   np.zeros(1, _F))
        return ColorConversion(3, 3, source, "affine", rgb_out, _YCBCR_TO_RGB, np.array([16, 128, 128], _F), zero3)
    if image_type == _GRAY:
        if output_type == _YCBCR:
            m = np.array([[_Y_RANGE], [0], [0]], _F)
            return ColorConversion(1, 3, (0,), "affine", (0, 1, 2), m, np.zeros(1, _F), np.array([16, 128, 128], _F))
        return ColorConversion(1, 3, (0,), "copy", (0, 0, 0))
    if output_type == _GRAY:
        return ColorConversion(3, 1, source, "gray", (0,))
    if output_type == _YCBCR:
        return ColorConversion(3, 3, source, "affine", (0, 1, 2), _RGB_TO_YCBCR, zero3, np.array([16, 128, 128], _F))
    return ColorConversion(3, 3, source, "copy", rgb_out)  # RGB <-> BGR


# -- lookup_table -----------------------------------------------------------------------

LUT_MAX_KEY = 65535


def x86_cast(values: Any, dtype: Any) -> np.ndarray:
    """``static_cast<T>(float)`` as DALI's CPU build gives it on x86-64: truncation toward
    zero; a value outside the range of the conversion instruction (int32 for the types up to
    32 bits but uint32, int64 for uint32 and int64) or NaN gives its minimum, and the result
    is wrapped to ``T`` (uint8 300.0 -> 44, -1.0 -> 255; int32 3e9 -> -2147483648). Float and
    bool targets: a plain conversion."""
    v = np.asarray(values, np.float64)
    dt = np.dtype(dtype)
    if dt.kind in "fb":
        with np.errstate(over="ignore"):  # (a float16 overflow gives inf, as in DALI)
            return v.astype(np.float32).astype(dt)
    return trunc_cast(v, dt)


def lookup_table_array(keys: Sequence[int], values: Sequence[float], default: float,
                       dtype: Any) -> np.ndarray:
    """The lookup table in ``dtype``, extended by the default value: ``max(keys) + 2``
    entries (1 without keys), ``default`` where no key maps and the last value given for a
    key, ``default`` again at the end.

    Values are float32 first, then converted as DALI's ConvertSat (rounded half away from
    zero, saturated; bool: True unless rounded to 0, so 0.3 is False); a NaN going to an
    integer type as DALI's x86 build gives it (0, or the minimum of int32 / int64, 2**63
    for uint64), to bool True.
    """
    dt = np.dtype(dtype)
    with np.errstate(over="ignore"):  # (values past the float32 or float16 range become inf, as in DALI)
        table = np.full(max(keys) + 2 if keys else 1, default, np.float32)
        for k, v in zip(keys, values):
            table[k] = v
        out = saturate_cast(table, dt) if dt.kind != "b" else ~(np.abs(table) < 0.5)
    if dt.kind in "iu":
        out[np.isnan(table)] = x86_cast(np.float32("nan"), dt)
    return out


def lookup_indices(x: np.ndarray, n: int) -> np.ndarray:
    """Indices into a table extended by its default (at ``n``): ``x`` where 0 <= x < n,
    else ``n``."""
    ok = x < n if x.dtype.kind == "u" else (x >= 0) & (x < n)
    return np.where(ok, x.astype(np.intp), n)  # (uint64 values past 2**63 wrap, but are not ok)


# -- erase ------------------------------------------------------------------------------

ERASE_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32,
                                           np.uint64, np.int64, np.float16, np.float32))


def erase_axes(op: str, args: KernelArgs, layout: str | None, ndim: int) -> tuple[int, ...]:
    """The axes ``anchor`` and ``shape`` give, in order: ``axis_names`` when set, else
    ``axes``, else every axis of the layout but C."""
    names, axes = args["axis_names"], args["axes"]
    if names is not None:
        if not names:
            raise ValueError(f"Operator `{op}`: argument 'axis_names' must name at least one axis")
        if not layout:
            raise ValueError(f"Operator `{op}`: argument 'axis_names' needs an input with a layout; "
                             "give 'axes' for an input without one")
        missing = [c for c in names if c not in layout]
        if missing:
            raise ValueError(f"Operator `{op}`: argument 'axis_names' names {''.join(missing)!r}, "
                             f"not in the input layout {layout!r}")
        return tuple(layout.index(c) for c in names)
    if axes is not None:
        if not axes:
            raise ValueError(f"Operator `{op}`: argument 'axes' must name at least one axis")
        bad = [a for a in axes if not 0 <= a < ndim]
        if bad:
            raise ValueError(f"Operator `{op}`: argument 'axes' has {bad[0]}, outside [0, {ndim}) "
                             f"for a {ndim}-D input")
        return tuple(axes)
    if not layout:
        raise ValueError(f"Operator `{op}`: the input has no layout: give 'axes' (or a layout) to say "
                         "which axes 'anchor' and 'shape' refer to")
    return tuple(k for k, c in enumerate(layout) if c != "C")


def check_erase_counts(op: str, n_anchor: int, n_shape: int, axes: Sequence[int], where: str = "") -> None:
    """Raise unless ``anchor`` and ``shape`` have as many values, a multiple of ``len(axes)``."""
    if n_anchor != n_shape:
        raise ValueError(f"Operator `{op}`: arguments 'anchor' and 'shape' must have as many values, "
                         f"got {n_anchor} and {n_shape}{where}")
    if n_anchor % len(axes):
        raise ValueError(f"Operator `{op}`: arguments 'anchor' and 'shape' must have a multiple of "
                         f"{len(axes)} values (one per axis in {tuple(axes)} for each region), got "
                         f"{n_anchor}{where}")


def _floats(args: KernelArgs, name: str, i: int) -> np.ndarray:
    v = args.sample(name, i)
    return np.zeros(0, np.float32) if v is None else np.asarray(v, np.float32).reshape(-1)


def erase_regions(op: str, args: KernelArgs, i: int, shape: Sequence[int],
                  axes: Sequence[int]) -> list[tuple[slice, ...]]:
    """Sample ``i``'s erased regions as index tuples (``shape``: the sample's), clipped to
    the sample; empty ones left out.

    ``anchor`` and ``shape`` hold one value per axis of ``axes`` for each region, region
    after region. In float32: normalised values are multiplied by the axis size, a centred
    anchor moves back by half the shape, and the region covers
    ``floor(anchor) .. floor(anchor + shape)`` (end excluded). An axis given twice takes
    its last value; an axis not given is covered whole.
    """
    anchor, size = _floats(args, "anchor", i), _floats(args, "shape", i)
    check_erase_counts(op, anchor.size, size.size, axes, f" (sample {i})")
    n = len(axes)
    norm = args["normalized"]
    norm_a = bool(norm) or bool(args["normalized_anchor"])
    norm_s = bool(norm) or bool(args["normalized_shape"])
    dims = np.array([shape[a] for a in axes], np.float32)
    lo = anchor.reshape(-1, n)
    ext = size.reshape(-1, n)
    if norm_a:
        lo = lo * dims
    if norm_s:
        ext = ext * dims
    if args["centered_anchor"]:
        lo = lo - ext * np.float32(0.5)
    hi = lo + ext
    start = np.clip(np.floor(lo), 0, dims).astype(np.int64)
    end = np.clip(np.floor(hi), 0, dims).astype(np.int64)
    regions = []
    for r in range(len(lo)):
        box = [slice(None)] * len(shape)
        for k, a in enumerate(axes):
            box[a] = slice(int(start[r, k]), int(end[r, k]))
        if all(box[a].start < box[a].stop for a in axes):
            regions.append(tuple(box))
    return regions


def erase_fill(op: str, args: KernelArgs, i: int, dtype: Any, shape: Sequence[int],
               layout: str | None) -> tuple[np.ndarray, int | None]:
    """``(fill, channel_axis)``: sample ``i``'s fill value in the input type, a 0-d array,
    or, for one value per channel, a (C,) array and the index of the layout's C axis.

    The values convert as DALI's do (:func:`x86_cast`: 2.5 gives uint8 2, 300 gives 44);
    no value means 0.
    """
    f = _floats(args, "fill_value", i)
    if f.size <= 1:
        return x86_cast(f[0] if f.size else 0.0, dtype), None
    c = layout.find("C") if layout else -1
    if c < 0:
        raise ValueError(f"Operator `{op}`: argument 'fill_value' has {f.size} values (one per channel), "
                         f"but the input has no channel axis C (layout {layout or 'not set'}) (sample {i})")
    if f.size != shape[c]:
        raise ValueError(f"Operator `{op}`: argument 'fill_value' has {f.size} values but the input has "
                         f"{shape[c]} channels (sample {i})")
    return x86_cast(f, dtype), c
