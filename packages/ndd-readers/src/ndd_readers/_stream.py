"""The sample stream: which dataset index each reader step produces (DALI's epoch rules).

Definitions (N samples, S shards, reader shard ``s0``, batch size ``B``; sample mode is
``B = 1``):

* ``P = epoch_size_padded`` is ``S * ceil(N / S)`` with ``pad_last_batch`` and ``N``
  without it.  Epoch ``e`` belongs to shard ``k(e) = s0`` with ``stick_to_shard``,
  otherwise ``(s0 + e) % S``.  Its size is ``floor((k+1)P/S) - floor(kP/S)`` and it
  yields ``ceil(size / B) * B`` samples: every batch is full.
* The data of shard ``k`` are the positions ``[floor(kN/S), floor((k+1)N/S))``.
* Without ``pad_last_batch`` the reader reads one continuous stream and the epochs cut
  it into consecutive pieces, so the top-up of a last batch comes from the stream and
  the next epoch starts offset.  With ``stick_to_shard`` the stream cycles over the
  shard's data; without it, it runs from the start of shard ``s0`` to the end of the
  dataset and then cycles over the whole dataset (the next epoch's samples are the next
  shard's, as in DALI).
* With ``pad_last_batch`` every epoch reads the data of its shard once, then repeats the
  last sample it produced until the epoch's size is reached; every epoch starts cleanly.
* Sources are cut into *segments* that shuffling never mixes: with ``random_shuffle``,
  each shard's block of data as the continuous stream reaches it (so an epoch holds the
  samples of its own shard only, as in DALI), or each epoch with ``pad_last_batch``;
  otherwise each pass over the data of the continuous stream (the first, partial one
  included).
* ``shuffle_after_epoch``: pass ``g`` (the segment index) reads the dataset in the
  order of a permutation drawn from PCG64 seeded by ``(shuffle_after_epoch_seed, g)``;
  every shard sees the same permutation, so the shards still partition the data.
  A reader of container files (Webdataset, MXNet) gives their sample counts as ``groups``:
  then the permutation moves whole files, keeping each file's samples in order (DALI's
  file-order shuffle), and ``random_shuffle`` may be combined with it.
* ``random_shuffle``: readers of file lists first put the list in DALI's fixed shuffled
  order (:func:`dali_list_order`), so that the shards hold what DALI's hold. Then a
  shuffle buffer of ``initial_fill`` indices per segment. The
  buffer is filled with the first ``initial_fill`` source indices; each step takes the
  element at a uniform random slot and refills that slot with the next source index
  (once the source is exhausted, the last element moves into the slot). The draws come
  from PCG64 seeded by ``(seed, g)``; ``seed=-1`` picks a random seed once, which the
  state keeps. With ``initial_fill >= segment length`` a segment is a uniform
  permutation.

Because every index is a pure function of the position, the state of a stream is just a
:class:`Cursor` (epoch, position in the epoch, offset in the continuous stream) plus the
resolved seed; no buffer contents need saving.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_SHUFFLE_AFTER_EPOCH_SEED = 524287  # DALI's data-loader seed


@dataclass(frozen=True)
class Cursor:
    """The next sample: ``pos`` samples of ``epoch`` are done; ``offset`` counts the
    samples taken from the continuous stream (used without ``pad_last_batch``)."""

    epoch: int = 0
    pos: int = 0
    offset: int = 0


def check_sharding(shard_id: int, num_shards: int) -> None:
    """ValueError for ``num_shards < 1`` or ``shard_id`` outside ``[0, num_shards)``."""
    if isinstance(num_shards, (bool, np.bool_)) or not isinstance(num_shards, (int, np.integer)) or num_shards < 1:
        raise ValueError(f"num_shards must be an integer >= 1, got {num_shards!r}")
    if isinstance(shard_id, (bool, np.bool_)) or not isinstance(shard_id, (int, np.integer)) \
            or not 0 <= shard_id < num_shards:
        raise ValueError(f"shard_id must be in [0, num_shards={num_shards}), got {shard_id!r}")


def _rng(seed: int, segment: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed & (2**63 - 1), segment])))


def dali_list_order(n: int) -> np.ndarray:
    """The order in which DALI's file-list readers (File, Numpy, COCO) keep their ``n``
    entries when ``random_shuffle`` is set: one shuffle with a fixed seed, the same on every
    shard, before the list is cut into shards.

    Hand-written to give the very shards DALI gives (checked against DALI 2.4 for 7 to
    70,001 entries): ``std::shuffle`` of libstdc++ driven by ``std::mt19937`` seeded with
    524287. Its swap positions come from Lemire's bounded draw on 32-bit words, two at a
    time from one draw while ``n * n`` fits in 32 bits. About 1 s for ImageNet's 1.28M
    files, once per reader.
    """
    order = list(range(n))
    if n < 2:
        return np.asarray(order, np.int64)
    bits = np.random.MT19937(0)
    bits._legacy_seeding(DEFAULT_SHUFFLE_AFTER_EPOCH_SEED)  # the classic init_genrand(seed)
    words: list[int] = []

    def below(bound: int) -> int:  # uniform in [0, bound), bound <= 2**32
        while True:
            if not words:
                words.extend(reversed(bits.random_raw(4096).tolist()))
            product = words.pop() * bound
            if (product & 0xFFFFFFFF) >= (1 << 32) % bound:  # (2**32 - bound) % bound, as libstdc++
                return product >> 32

    i = 1
    if (2**32 - 1) // n >= n:  # two swap positions per draw
        if n % 2 == 0:
            j = below(2)
            order[1], order[j] = order[j], order[1]
            i = 2
        while i < n:
            r = i + 1
            x = below(r * (r + 1))
            j, k = divmod(x, r + 1)
            order[i], order[j] = order[j], order[i]
            order[i + 1], order[k] = order[k], order[i + 1]
            i += 2
    else:
        for i in range(1, n):
            j = below(i + 1)
            order[i], order[j] = order[j], order[i]
    return np.asarray(order, np.int64)  # (8 bytes an entry; the list is ~40)


def buffer_shuffle(source: np.ndarray, fill: int, rng: np.random.Generator) -> np.ndarray:
    """Shuffle ``source`` through a buffer of ``fill`` slots (see the module docstring)."""
    n = len(source)
    fill = max(1, min(fill, n))
    bounds = np.minimum(fill, n - np.arange(n))
    picks = rng.integers(0, bounds).tolist()
    src = source.tolist()
    buf = src[:fill]
    nxt = fill
    out = []
    for j in picks:
        out.append(buf[j])
        if nxt < n:
            buf[j] = src[nxt]
            nxt += 1
        else:
            buf[j] = buf[-1]
            buf.pop()
    return np.asarray(out, dtype=np.int64)


def _field(state: dict[str, Any], name: str, least: int | None = None) -> int:
    """Integer field ``name`` of a saved state (at least ``least``), or a ValueError naming it."""
    v = state[name]
    if type(v) is not int or (least is not None and v < least):  # (not a bool, float or string)
        need = "an integer" if least is None else f"an integer of at least {least}"
        raise ValueError(f"Corrupted reader state: field {name!r} must be {need}, got {v!r}")
    return v


class SampleStream:
    """Maps a :class:`Cursor` to dataset indices for one reader configuration."""

    def __init__(
        self,
        size: int,
        *,
        shard_id: int = 0,
        num_shards: int = 1,
        stick_to_shard: bool = False,
        pad_last_batch: bool = False,
        random_shuffle: bool = False,
        initial_fill: int = 1024,
        seed: int = -1,
        shuffle_after_epoch: bool = False,
        shuffle_after_epoch_seed: int = DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
        shuffle_list: bool = False,
        groups: list[int] | None = None,
    ) -> None:
        check_sharding(shard_id, num_shards)
        if size < 1:
            raise ValueError("The dataset is empty")
        if num_shards > size:
            raise ValueError(
                f"num_shards={num_shards} is larger than the dataset ({size} samples); every "
                "shard needs at least one sample"
            )
        if initial_fill < 0:
            raise ValueError(f"initial_fill must be >= 0, got {initial_fill}")
        initial_fill = max(initial_fill, 1)  # 0 (which DALI accepts): a buffer of one, no shuffling
        if groups is not None and sum(groups) != size:
            raise ValueError(f"the groups hold {sum(groups)} samples, not {size}")
        if shuffle_after_epoch and random_shuffle and groups is None:
            raise ValueError("shuffle_after_epoch and random_shuffle cannot be both true")
        if shuffle_after_epoch and stick_to_shard:
            raise ValueError("shuffle_after_epoch and stick_to_shard cannot be both true")
        self.size = size
        self.shard_id = shard_id
        self.num_shards = num_shards
        self.stick_to_shard = bool(stick_to_shard)
        self.pad_last_batch = bool(pad_last_batch)
        self.random_shuffle = bool(random_shuffle)
        self.initial_fill = initial_fill
        self.seed = secrets.randbits(63) if seed == -1 else int(seed)
        self.shuffle_after_epoch = bool(shuffle_after_epoch)
        self.shuffle_after_epoch_seed = int(shuffle_after_epoch_seed)
        s = num_shards
        self.padded_size = s * -(-size // s) if pad_last_batch else size
        # A file-list reader's entries in DALI's shuffled order (see dali_list_order).
        self._order = dali_list_order(size) if shuffle_list and self.random_shuffle else None
        self._groups = None if groups is None else np.asarray(groups, np.int64)
        self._cache: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    # -- geometry ----------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        return {
            "epoch_size": self.size,
            "epoch_size_padded": self.padded_size,
            "number_of_shards": self.num_shards,
            "shard_id": self.shard_id,
            "pad_last_batch": self.pad_last_batch,
            "stick_to_shard": self.stick_to_shard,
        }

    def shard_of(self, epoch: int) -> int:
        return self.shard_id if self.stick_to_shard else (self.shard_id + epoch) % self.num_shards

    def _range(self, k: int, total: int) -> tuple[int, int]:
        s = self.num_shards
        return k * total // s, (k + 1) * total // s

    def shard_size(self, epoch: int) -> int:
        a, b = self._range(self.shard_of(epoch), self.padded_size)
        return b - a

    def epoch_length(self, epoch: int, batch_size: int) -> int:
        """Samples epoch ``epoch`` yields: its shard size rounded up to full batches."""
        return -(-self.shard_size(epoch) // batch_size) * batch_size

    # -- indices -----------------------------------------------------------------
    def _segment(self, g: int, start: int, stop: int) -> np.ndarray:
        """The (shuffled) order of segment ``g`` whose source is ``[start, stop)`` of the
        dataset order (with shuffle_after_epoch: of permutation ``g``)."""
        with self._lock:
            order = self._cache.get(g)
            if order is None:
                if self.shuffle_after_epoch:
                    source = self._permutation(g)[start:stop]
                else:
                    source = np.arange(start, stop, dtype=np.int64)
                if self.random_shuffle:
                    source = buffer_shuffle(source, self.initial_fill, _rng(self.seed, g))
                order = source
                if len(self._cache) >= 4:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[g] = order
            return order

    def _permutation(self, g: int) -> np.ndarray:
        """Pass ``g``'s order of the dataset with ``shuffle_after_epoch``: of the samples, or
        of whole groups (files) when the reader gave ``groups``."""
        rng = _rng(self.shuffle_after_epoch_seed, g)
        if self._groups is None:
            return rng.permutation(self.size)
        starts = np.cumsum(self._groups) - self._groups
        order = rng.permutation(len(self._groups))
        return np.concatenate([np.arange(starts[k], starts[k] + self._groups[k]) for k in order])

    def _plain(self) -> bool:
        return not (self.random_shuffle or self.shuffle_after_epoch)

    def _at_offset(self, offset: int) -> int:
        """Continuous-stream (no padding) index at ``offset``."""
        g, lo, hi, r = self._run_at_offset(offset)
        if self._plain():
            return lo + r
        return int(self._segment(g, lo, hi)[r])

    def _at_epoch(self, epoch: int, pos: int) -> int:
        """Padded-mode index at position ``pos`` of ``epoch``."""
        a, b = self._range(self.shard_of(epoch), self.size)
        r = min(pos, b - a - 1)
        if self._plain():
            return a + r
        return int(self._segment(epoch, a, b)[r])

    def _run_at_offset(self, offset: int) -> tuple[int, int, int, int]:
        """``(g, lo, hi, r)``: continuous-stream ``offset`` is position ``r`` of segment
        ``g`` over ``[lo, hi)`` (as in :meth:`_at_offset`)."""
        a, b = self._range(self.shard_id, self.size)
        if self.stick_to_shard:
            g, r = divmod(offset, b - a)
            return g, a, b, r
        n, s = self.size, self.num_shards
        if offset < n - a:  # pass 0: from the start of shard s0 to the end of the dataset
            p, pos = 0, a + offset
        else:
            p, pos = divmod(offset - (n - a), n)
            p += 1
        if self._plain():  # one segment per pass
            lo = a if p == 0 else 0
            return p, lo, n, pos - lo
        # Shuffled: a segment per shard's block, numbered by the epoch that reads it, so that
        # an epoch holds its shard's samples only (random_shuffle) and every shard's epoch e
        # is its block of permutation e (shuffle_after_epoch): the shards split each epoch, as
        # in DALI
        k = ((pos + 1) * s - 1) // n  # the shard whose block holds pos
        lo, hi = self._range(k, n)
        g = k - self.shard_id if p == 0 else (s - self.shard_id) + (p - 1) * s + k
        return g, lo, hi, pos - lo

    def _stream_indices(self, offset: int, count: int) -> list[int]:
        """``[_at_offset(offset + j) for j in range(count)]``, one segment run at a time."""
        out: list[int] = []
        plain = self._plain()
        while count > 0:
            g, lo, hi, r = self._run_at_offset(offset)
            m = min(count, hi - lo - r)
            if plain:
                out.extend(range(lo + r, lo + r + m))
            else:
                out.extend(self._segment(g, lo, hi)[r:r + m].tolist())
            offset += m
            count -= m
        return out

    def _epoch_indices(self, epoch: int, pos: int, count: int) -> list[int]:
        """``[_at_epoch(epoch, pos + j) for j in range(count)]``: the shard's data, then
        its last sample repeated."""
        a, b = self._range(self.shard_of(epoch), self.size)
        n = b - a
        stop = min(pos + count, n)
        pad = pos + count - max(pos, n)
        if self._plain():
            out = list(range(a + pos, a + stop))
            last = a + n - 1
        else:
            order = self._segment(epoch, a, b)
            out = order[pos:stop].tolist()
            last = int(order[n - 1])
        if pad > 0:
            out.extend([last] * pad)
        return out

    def take(self, cur: Cursor, count: int, batch_size: int) -> tuple[list[int], Cursor]:
        """The next ``count`` indices after ``cur`` (all within ``cur.epoch``) and the
        cursor after them; a finished epoch rolls over to the next one."""
        if self.pad_last_batch:
            idx = self._epoch_indices(cur.epoch, cur.pos, count)
        else:
            idx = self._stream_indices(cur.offset, count)
        if self._order is not None:
            idx = self._order[idx].tolist()
        nxt = Cursor(cur.epoch, cur.pos + count, cur.offset + count)
        return idx, self.normalize(nxt, batch_size)

    def normalize(self, cur: Cursor, batch_size: int) -> Cursor:
        """Roll a cursor at (or past) the end of its epoch over to the next epoch."""
        if cur.pos >= self.epoch_length(cur.epoch, batch_size):
            return Cursor(cur.epoch + 1, 0, cur.offset)
        return cur

    def epoch_steps(self, cur: Cursor, batch_size: int):
        """Yield ``(indices, cursor_after)`` for each step of the epoch at ``cur``."""
        cur = self.normalize(cur, batch_size)
        epoch = cur.epoch
        while cur.epoch == epoch:
            idx, cur = self.take(cur, batch_size, batch_size)
            yield idx, cur

    # -- state -------------------------------------------------------------------
    _CHECKED = ("size", "num_shards", "shard_id", "pad_last_batch", "stick_to_shard",
                "random_shuffle", "shuffle_after_epoch")

    def state(self, cur: Cursor) -> dict[str, Any]:
        config = {k: getattr(self, k) for k in self._CHECKED}
        return {"epoch": cur.epoch, "pos": cur.pos, "offset": cur.offset, "seed": self.seed,
                "shuffle_after_epoch_seed": self.shuffle_after_epoch_seed,
                "initial_fill": self.initial_fill, "config": config}

    def restore(self, state: dict[str, Any]) -> Cursor:
        """Adopt ``state``'s seeds and return its cursor (ValueError if it was saved by a
        reader with a different dataset size, sharding, padding or shuffling)."""
        try:
            config = state["config"]
            for k in self._CHECKED:
                if config[k] != getattr(self, k):
                    raise ValueError(
                        f"The state was saved by a reader with {k}={config[k]!r}, but this reader "
                        f"has {k}={getattr(self, k)!r}"
                    )
            cur = Cursor(_field(state, "epoch", 0), _field(state, "pos", 0), _field(state, "offset", 0))
            seed, fill = _field(state, "seed"), _field(state, "initial_fill", 1)
            sae_seed = _field(state, "shuffle_after_epoch_seed")
        except (KeyError, TypeError) as e:
            raise ValueError(f"Corrupted reader state: missing or bad field {e}") from None
        if cur.pos >= max(1, self.shard_size(cur.epoch)):  # a reader's own states stop short of it
            raise ValueError(f"Corrupted reader state: position {cur.pos} in epoch {cur.epoch}, whose shard "
                             f"has {self.shard_size(cur.epoch)} samples")
        with self._lock:
            if (seed, fill, sae_seed) != (self.seed, self.initial_fill, self.shuffle_after_epoch_seed):
                self._cache.clear()
            self.seed, self.initial_fill, self.shuffle_after_epoch_seed = seed, fill, sae_seed
        return cur
