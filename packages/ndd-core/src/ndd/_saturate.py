"""Element type conversion with DALI's ConvertSat rules (``cast``, constructors, random ops)."""

from __future__ import annotations

import functools

import numpy as np

# DALI's Cast converts each element with ConvertSat (dali/core/convert.h): a float going to
# an integer type is rounded to the nearest integer and clamped to the target's range, an
# integer going to a narrower (or differently signed) integer type is clamped, a NaN
# becomes 0. Rounding: DALI's CPU backend uses std::round (ties go away from zero), its
# CUDA kernels __float2int_rn (ties to even), so DALI's two devices differ on exact .5
# ties. ndd takes the CPU rule, half away from zero, on both devices (core's kernel here
# and ndd-ops-cuda's, which runs the same plan with torch), so that CPU and GPU agree
# bit for bit and the CPU results match DALI's CPU operator. A float goes to bool rounded
# first (0.3 is False, 0.5 and NaN True, as DALI 2.4 gives). Casts to a float type,
# integers to bool, and integer casts the target can hold (same type, widening, int ->
# float), are a plain ``astype``.


def cast_plan(src: np.dtype, dst: np.dtype) -> tuple:
    """How ``cast`` converts elements of ``src`` to ``dst`` (shared by the CPU and GPU kernels):

    * ``("plain",)``: a plain conversion (``astype``): same type, float target, bool
      source, an integer to bool, or an integer target that holds every source value;
    * ``("bool",)``: floats to bool, rounded first as DALI does: True where ``|x| >= 0.5``
      or NaN (0.3 is False);
    * ``("clip", lo, hi)``: integers: clamp to ``[lo, hi]`` (Python ints, both in the range
      of ``src`` and of ``dst``), then convert;
    * ``("round", work, half, lo, hi, big, top)``: floats to integers, computed in the float
      type ``work`` (``src``; float32 for float16, whose range some targets exceed, as DALI
      also converts float16 through float): clamp to ``[lo, hi]`` (integer floats that
      convert exactly), round with ``trunc(x + copysign(half, x))`` (``half`` is the largest
      ``work`` float below 0.5: ties go away from zero, and unlike adding 0.5 the addition
      never carries a value just below a tie over it), NaN to 0, convert; then, when ``big``
      is not None (``dst``'s maximum is no ``work`` float, e.g. float32 -> int32, so ``hi``
      is the float below it), ``top`` (that maximum) where ``x >= big``.
    """
    return _cast_plan(np.dtype(src), np.dtype(dst))


@functools.cache
def _cast_plan(src: np.dtype, dst: np.dtype) -> tuple:
    if dst.kind == "b" and src.kind == "f":
        return ("bool",)
    if src == dst or dst.kind not in "iu" or src.kind == "b":
        return ("plain",)
    info = np.iinfo(dst)
    if src.kind in "iu":
        sinfo = np.iinfo(src)
        lo, hi = max(info.min, sinfo.min), min(info.max, sinfo.max)
        return ("plain",) if (lo, hi) == (sinfo.min, sinfo.max) else ("clip", lo, hi)
    work = np.dtype(np.float32) if src == np.float16 else src
    f = work.type
    half = np.nextafter(f(0.5), f(0))
    lo, hi = f(info.min), f(info.max)  # the minimum (0 or -2**k) is exact
    big = None
    if int(hi) > info.max:  # the maximum rounded up (2**k): clamp below it, fix up after
        big, hi = hi, np.nextafter(hi, f(0))
    return ("round", work, half, lo, hi, big, info.max)


# Floats to integers are converted in chunks of this many elements, so the temporaries
# of the rounding stay in cache (64x224x224x3 float32 -> uint8: 12.8 ms in whole-array
# passes, ~4 ms in chunks, against 1.8 ms for a plain astype). A second thread only
# added interpreter-lock contention at this grain.
_CHUNK = 1 << 17


def saturate_cast(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """``x.astype(dst)`` with DALI's ConvertSat rules (see :func:`cast_plan`)."""
    dst = np.dtype(dst)
    plan = _cast_plan(x.dtype, dst)
    if plan[0] == "plain":
        return x.astype(dst)
    if plan[0] == "bool":
        a = np.abs(x)
        return ~(a < x.dtype.type(0.5))  # (NaN compares False: True)
    if plan[0] == "clip":
        src = x.dtype.type
        # (np.asarray: np.clip of a 0-d array gives a NumPy scalar, not an array)
        return np.asarray(np.clip(x, src(plan[1]), src(plan[2]))).astype(dst)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, dst)
    dest = out.reshape(-1)
    for lo in range(0, flat.size, _CHUNK):
        _round_into(flat[lo:lo + _CHUNK], dest[lo:lo + _CHUNK], plan)
    return out


def _round_into(x: np.ndarray, out: np.ndarray, plan: tuple) -> None:
    """One chunk of a float-to-integer ``("round", ...)`` plan, written into ``out``: the
    clamped value plus ``half`` (with the value's sign), truncated toward zero by the
    conversion itself."""
    _, work, half, lo, hi, big, top = plan
    x = np.asarray(x, dtype=work)
    r = np.clip(x, lo, hi)  # a NaN stays NaN
    least = np.minimum.reduce(r)  # (np.minimum keeps a NaN: one cheap pass finds both)
    if np.isnan(least):
        r[np.isnan(r)] = 0
        least = np.minimum.reduce(r)
    if least < 0:  # copysign costs ~5x an add here: only for chunks with negative values
        r += np.copysign(half, r)
    else:
        r += half
    np.copyto(out, r, casting="unsafe")
    if big is not None and np.fmax.reduce(x) >= big:  # (fmax: a NaN does not hide the rest)
        out[x >= big] = top
