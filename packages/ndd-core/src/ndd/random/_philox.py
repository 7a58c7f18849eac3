"""Philox4x32-10 counter-based generator and value transforms (pure, numpy only).

Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as
1, 2, 3", SC 2011; the Random123 library) maps a 128-bit counter and a 64-bit key
to a block of four 32-bit words.  With counter words ``(c0, c1, c2, c3)`` and key
words ``(k0, k1)`` one round is::

    p0 = c0 * 0xD2511F53            # full 64-bit product
    p1 = c2 * 0xCD9E8D57
    (c0, c1, c2, c3) = (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0))

and the key is bumped between rounds by the Weyl constants
``k0 += 0x9E3779B9``, ``k1 += 0xBB67AE85`` (mod 2**32): round ``r`` (0..9) uses
``(k0 + r * 0x9E3779B9, k1 + r * 0xBB67AE85)``.  The output block is
``(c0, c1, c2, c3)`` after ten rounds, consumed in that order (word 0 first).

Stream layout used by ndd
-------------------------
* The 64-bit key ``key`` splits into ``k0 = key & 0xFFFFFFFF`` (low word) and
  ``k1 = key >> 32`` (high word).
* The counter is a 128-bit little-endian integer ``counter``:
  ``c0 = counter & 0xFFFFFFFF`` is the lowest word and ``c3 = counter >> 96``
  the highest.
* A generator state is ``(key, counter, phase)`` with ``phase`` in 0..3; the next
  word is ``philox(counter, key)[phase]``.  After word 3 of a block has been
  consumed the counter is incremented by one (mod 2**128) and the phase is reset
  to 0.  Equivalently, word number ``i`` of the stream starting at
  ``(counter, 0)`` is ``philox(counter + i // 4, key)[i % 4]``.

Value transforms
----------------
The transforms below turn uint32 words into values.  They are pure functions,
element-wise and broadcasting, and are the reference that CPU and GPU kernels
must reproduce.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "PHILOX_M0",
    "PHILOX_M1",
    "PHILOX_ROUNDS",
    "PHILOX_W0",
    "PHILOX_W1",
    "block_at",
    "blocks_packed",
    "bounded_int",
    "normal",
    "philox4x32_10",
    "philox4x32_10_array",
    "round_keys",
    "stream_words",
    "to_unit_float32",
    "to_unit_float64",
    "uniform",
]

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1
# Index of the low / high 32-bit half of a uint64 seen through a uint32 view.
_LO, _HI = (0, 1) if sys.byteorder == "little" else (1, 0)

RoundKeys = tuple[tuple[int, int], ...]


# --------------------------------------------------------------------------- #
# Scalar (pure Python integer) implementation
# --------------------------------------------------------------------------- #


def round_keys(key: int) -> RoundKeys:
    """Return the ten per-round key pairs ``(k0, k1)`` for a 64-bit ``key``."""
    k0 = key & _MASK32
    k1 = (key >> 32) & _MASK32
    keys = []
    for _ in range(PHILOX_ROUNDS):
        keys.append((k0, k1))
        k0 = (k0 + PHILOX_W0) & _MASK32
        k1 = (k1 + PHILOX_W1) & _MASK32
    return tuple(keys)


def block_at(counter: int, rkeys: RoundKeys) -> tuple[int, int, int, int]:
    """Return the 4-word block for a 128-bit ``counter`` and precomputed round keys."""
    c0 = counter & _MASK32
    c1 = (counter >> 32) & _MASK32
    c2 = (counter >> 64) & _MASK32
    c3 = (counter >> 96) & _MASK32
    for k0, k1 in rkeys:
        p0 = c0 * PHILOX_M0
        p1 = c2 * PHILOX_M1
        c0 = (p1 >> 32) ^ c1 ^ k0
        c2 = (p0 >> 32) ^ c3 ^ k1
        c1 = p1 & _MASK32
        c3 = p0 & _MASK32
    return c0, c1, c2, c3


def philox4x32_10(ctr: Sequence[int], key: Sequence[int]) -> tuple[int, int, int, int]:
    """Philox4x32-10 of counter words ``ctr = (c0, c1, c2, c3)`` and ``key = (k0, k1)``.

    Word order follows Random123 (``ctr[0]`` / ``key[0]`` are the low words).
    """
    if len(ctr) != 4 or len(key) != 2:
        raise ValueError("philox4x32_10 needs 4 counter words and 2 key words")
    counter = 0
    for i, c in enumerate(ctr):
        counter |= (int(c) & _MASK32) << (32 * i)
    return block_at(counter, round_keys((int(key[0]) & _MASK32) | (int(key[1]) & _MASK32) << 32))


# Lanes of the packed implementation below, by block count: (one per lane, lane index per
# lane, the low 32 bits of every lane).
_LANES: dict[int, tuple[int, int, int]] = {}


def blocks_packed(counter: int, rkeys: RoundKeys, nblocks: int) -> np.ndarray | None:
    """The words (uint32, shape ``(4 * nblocks,)``) of the blocks at ``counter``,
    ``counter + 1``, ...; None when the lowest counter word wraps among them.

    Hand-written for the draws of one operator call (a few to a few hundred blocks): each
    counter word of every block is a 64-bit lane of one Python integer, so one round is a
    dozen integer operations for all the blocks (a lane's 32x32-bit product never carries
    into the next lane). 16 blocks: 10 µs, against 45 µs block by block and 55 µs for the
    NumPy path, whose per-call cost wins only from about 250 blocks.
    """
    c0 = counter & _MASK32
    if c0 + nblocks > 1 << 32:
        return None
    lanes = _LANES.get(nblocks)
    if lanes is None:
        one = sum(1 << (64 * i) for i in range(nblocks))
        lanes = _LANES[nblocks] = (one, sum(i << (64 * i) for i in range(nblocks)), one * _MASK32)
    one, index, low = lanes
    a0 = c0 * one + index
    a1 = ((counter >> 32) & _MASK32) * one
    a2 = ((counter >> 64) & _MASK32) * one
    a3 = ((counter >> 96) & _MASK32) * one
    for k0, k1 in rkeys:
        p0 = a0 * PHILOX_M0
        p1 = a2 * PHILOX_M1
        a0 = ((p1 >> 32) & low) ^ a1 ^ (k0 * one)
        a2 = ((p0 >> 32) & low) ^ a3 ^ (k1 * one)
        a1 = p1 & low
        a3 = p0 & low
    out = np.empty((nblocks, 4), np.uint32)
    nbytes = 8 * nblocks
    for j, lane in enumerate((a0, a1, a2, a3)):
        out[:, j] = np.frombuffer(lane.to_bytes(nbytes, "little"), np.uint64)  # each lane < 2**32
    return out.reshape(-1)


# --------------------------------------------------------------------------- #
# Vectorized (numpy) implementation
# --------------------------------------------------------------------------- #


def _rounds(lo: np.ndarray, hi: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Philox4x32-10 of 128-bit counters split in uint64 halves ``lo``, ``hi`` (N,).

    ``keys`` holds the per-round keys, uint32 of shape (10, 2, 1) or (10, 2, N)
    with ``keys[r] = (k0_r, k1_r)``.  Returns uint32 blocks of shape (N, 4).

    Lanes are processed in pairs: ``a = (c0, c2)`` (the multiplied words) and
    ``b = (c1, c3)``.  One round maps ``a * (M0, M1) = (p0, p1)`` to
    ``a' = (hi(p0) ^ c3 ^ k1, hi(p1) ^ c1 ^ k0) = (c2', c0')`` and
    ``b' = (lo(p0), lo(p1)) = (c3', c1')``, i.e. the pair order flips every
    round; multipliers and keys are flipped to match.  ``hi``/``lo`` of the
    64-bit products are read through a uint32 view, and the two product
    buffers alternate so that ``b`` can stay a view of the previous product.
    """
    n = lo.shape[0]
    c = np.stack((lo, hi)).view(np.uint32)  # (2, 2N): 32-bit halves of each counter half
    a = np.ascontiguousarray(c[:, _LO::2])  # (c0, c2)
    b = c[:, _HI::2]  # (c1, c3)
    mult = np.array([[PHILOX_M0], [PHILOX_M1]], dtype=np.uint64)
    mults = (mult, mult[::-1])
    flipped_keys = (keys[:, ::-1], keys)
    products = (np.empty((2, n), dtype=np.uint64), np.empty((2, n), dtype=np.uint64))
    for r in range(PHILOX_ROUNDS):
        flip = r & 1  # 0: a = (c0, c2), b = (c1, c3); 1: a = (c2, c0), b = (c3, c1)
        p = products[flip]
        np.multiply(a, mults[flip], out=p)
        halves = p.view(np.uint32)
        np.bitwise_xor(halves[:, _HI::2], b[::-1], out=a)
        np.bitwise_xor(a, flipped_keys[flip][r], out=a)
        b = halves[:, _LO::2]
    out = np.empty((n, 4), dtype=np.uint32)
    out[:, 0::2] = a.T
    out[:, 1::2] = b.T
    return out


def philox4x32_10_array(ctr: npt.ArrayLike, key: npt.ArrayLike) -> np.ndarray:
    """Vectorized Philox4x32-10.

    ``ctr`` has shape ``(..., 4)`` and ``key`` shape ``(..., 2)`` (uint32 values,
    same word order as :func:`philox4x32_10`); leading dimensions broadcast.
    Returns a uint32 array of shape ``(..., 4)``.
    """
    c = np.asarray(ctr, dtype=np.uint32)
    k = np.asarray(key, dtype=np.uint32)
    if c.shape[-1:] != (4,) or k.shape[-1:] != (2,):
        raise ValueError("ctr must have shape (..., 4) and key shape (..., 2)")
    lead = np.broadcast_shapes(c.shape[:-1], k.shape[:-1])
    c = np.broadcast_to(c, (*lead, 4)).reshape(-1, 4).astype(np.uint64)
    k = np.broadcast_to(k, (*lead, 2)).reshape(-1, 2).astype(np.uint64)
    s32 = np.uint64(32)
    lo = c[:, 0] | (c[:, 1] << s32)
    hi = c[:, 2] | (c[:, 3] << s32)
    steps = np.arange(PHILOX_ROUNDS, dtype=np.uint64)[:, None, None]
    weyl = np.array([[PHILOX_W0], [PHILOX_W1]], dtype=np.uint64)
    keys = ((k.T[None] + steps * weyl) & np.uint64(_MASK32)).astype(np.uint32)
    return _rounds(lo, hi, keys).reshape(*lead, 4)


def _stream_blocks(key: int, counter: int, nblocks: int) -> np.ndarray:
    """Blocks at counters ``counter + i`` (mod 2**128) for i < nblocks, (nblocks, 4)."""
    u64 = np.uint64
    start_lo = u64(counter & _MASK64)
    lo = np.arange(nblocks, dtype=u64)
    lo += start_lo  # wraps modulo 2**64
    hi = (lo < start_lo).astype(u64)  # carry into the high 64 bits
    hi += u64(counter >> 64)
    keys = np.array(round_keys(key), dtype=np.uint32)[:, :, None]
    return _rounds(lo, hi, keys)


def stream_words(key: int, counter: int, phase: int, n: int) -> np.ndarray:
    """The ``n`` words (uint32, shape (n,)) of the stream at ``(key, counter, phase)``.

    Word ``i`` is ``philox(counter + (phase + i) // 4, key)[(phase + i) % 4]``.
    """
    if n <= 0:
        return np.empty(0, dtype=np.uint32)
    nblocks = (phase + n + 3) // 4
    return _stream_blocks(key, counter & _MASK128, nblocks).reshape(-1)[phase : phase + n]


# --------------------------------------------------------------------------- #
# Value transforms
# --------------------------------------------------------------------------- #


def _u32(words: npt.ArrayLike) -> np.ndarray:
    return np.asarray(words, dtype=np.uint32)


def to_unit_float32(words: npt.ArrayLike) -> np.ndarray:
    """float32 in [0, 1) from the top 24 bits of each word: ``(w >> 8) * 2**-24``.

    The result is exact (24 bits fit the float32 significand); the largest
    value is ``1 - 2**-24``.
    """
    return (_u32(words) >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


def to_unit_float64(w_hi: npt.ArrayLike, w_lo: npt.ArrayLike) -> np.ndarray:
    """float64 in [0, 1) from 53 bits: ``((w_hi << 21) | (w_lo >> 11)) * 2**-53``.

    All 32 bits of ``w_hi`` are the most significant bits, followed by the top 21
    bits of ``w_lo``.  The result is exact; the largest value is ``1 - 2**-53``.
    """
    hi = _u32(w_hi).astype(np.uint64) << np.uint64(21)
    lo = _u32(w_lo).astype(np.uint64) >> np.uint64(11)
    return (hi | lo).astype(np.float64) * 2.0**-53


def uniform(words: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike) -> np.ndarray:
    """float32 uniform values ``lo + (hi - lo) * u``, ``u = to_unit_float32(words)``.

    ``lo`` and ``hi`` are cast to float32 and every operation is a single
    float32 operation rounded to nearest (subtract, multiply, add; no fused
    multiply-add), so a GPU kernel reproduces it bit-exactly with
    ``__fadd_rn(lo, __fmul_rn(__fsub_rn(hi, lo), u))`` and the same clamp: the result
    lies in ``[lo, hi)``, and where rounding of the final add gives exactly ``hi`` (a
    narrow range) the float below it is taken, as DALI never gives ``hi``. Arguments
    broadcast.
    """
    u = to_unit_float32(words)
    lo32 = np.asarray(lo, dtype=np.float32)
    hi32 = np.asarray(hi, dtype=np.float32)
    x = lo32 + (hi32 - lo32) * u
    return np.where((x >= hi32) & (hi32 > lo32), np.nextafter(hi32, lo32), x)


def normal(words_a: npt.ArrayLike, words_b: npt.ArrayLike) -> np.ndarray:
    """float32 standard normal values by the Box-Muller transform (cosine branch).

    Element ``i`` uses one word from each argument::

        u1 = (words_a[i] + 1) * 2**-32      # in (0, 1], never 0 -> no log(0)
        u2 = words_b[i] * 2**-32            # in [0, 1)
        z  = sqrt(-2 * ln(u1)) * cos(2 * pi * u2)

    computed in float64 and rounded to float32 (GPU math libraries may differ
    from numpy in the last ulp).  The sine branch is not used, so each value
    consumes two words.  ``|z| <= sqrt(64 * ln 2) ~= 6.66``.  Arguments broadcast.
    """
    a = _u32(words_a).astype(np.float64)
    b = _u32(words_b).astype(np.float64)
    u1 = (a + 1.0) * 2.0**-32
    u2 = b * 2.0**-32
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos((2.0 * np.pi) * u2)).astype(np.float32)


def bounded_int(words: npt.ArrayLike, n: npt.ArrayLike) -> np.ndarray:
    """int64 values in ``[0, n)`` by multiply-shift: ``(w * n) >> 32`` (64-bit product).

    ``n`` (broadcasting) must satisfy ``1 <= n <= 2**32``.  The mapping is
    monotonic in ``w``.  Bias: each result value is hit by either
    ``floor(2**32 / n)`` or ``ceil(2**32 / n)`` words, so its probability differs
    from ``1 / n`` by less than ``2**-32`` (exactly uniform when ``n`` is a power
    of two).
    """
    w = _u32(words)
    if isinstance(n, int) and not 1 <= n <= 2**32:
        raise ValueError(f"bounded_int: n must satisfy 1 <= n <= 2**32, got {n}")
    nn = np.asarray(n)
    if nn.dtype.kind not in "iu":
        raise TypeError(f"bounded_int: n must be an integer (array), got dtype {nn.dtype}")
    if nn.size and (np.any(nn < 1) or np.any(nn > 2**32)):
        raise ValueError("bounded_int: n must satisfy 1 <= n <= 2**32")
    return ((w.astype(np.uint64) * nn.astype(np.uint64)) >> np.uint64(32)).astype(np.int64)
