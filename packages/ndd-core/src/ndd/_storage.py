"""Concrete batch storage shared by Batch and the kernels (internal)."""

from __future__ import annotations

from typing import Any

import numpy as np


class BatchData:
    """The samples of one evaluated batch.

    ``dense`` is one array with a leading batch dimension when the samples share
    a shape (kernels use it for vectorised work); ``samples`` is the list of
    per-sample arrays (views of ``dense`` when it exists). ``origin`` (ours), when a
    reader made the batch, names sample ``i``'s file or record for error messages (see
    :meth:`describe`); it stays in this process (not pickled).

    The origin protocol (how a reader plugin tells core where its samples came from):
    ``origin(i) -> str`` names sample ``i`` for error messages; an origin may also have
    ``source_info(i) -> str``, DALI's per-sample ``source_info`` of this output (what
    ``get_property(key="source_info")`` returns; bytes that are not UTF-8 are kept as
    surrogate escapes). Operators that pass samples through unchanged (``copy``,
    ``reshape``, ``permute_batch``, picking samples) keep the origin, as DALI keeps the
    source info; the others make new data without one.
    """

    __slots__ = ("dense", "_samples", "origin")

    def __init__(self, dense: Any = None, samples: list | None = None) -> None:
        if dense is None and samples is None:
            raise ValueError("BatchData needs dense data or a list of samples")
        self.dense = dense
        self._samples = samples
        self.origin: Any = None

    def __reduce__(self) -> tuple:
        return BatchData, (self.dense, self._samples)

    def describe(self, i: int) -> str:
        """``sample i`` for error messages, with its file or record when a reader made it."""
        if self.origin is not None:
            try:
                return f"sample {i} (read from {self.origin(i)})"
            except Exception:  # noqa: BLE001 - e.g. its reader was closed: the index alone
                pass
        return f"sample {i}"

    def source_info(self, i: int) -> str:
        """DALI's ``source_info`` of sample ``i``: from the origin, or empty."""
        get = getattr(self.origin, "source_info", None)
        return get(i) if get is not None else ""

    @classmethod
    def of(cls, value: Any) -> BatchData:
        """Wrap a kernel result: a BatchData, one array (leading batch dim) or a list."""
        if isinstance(value, BatchData):
            return value
        if isinstance(value, (list, tuple)):
            return cls(samples=list(value))
        return cls(dense=value)

    @property
    def samples(self) -> list:
        if self._samples is None:
            d = self.dense
            # ``d[i, ...]`` keeps 0-d samples as arrays (``list(d)`` would give scalars).
            self._samples = [d[i, ...] for i in range(len(d))]
        return self._samples

    def __len__(self) -> int:
        return len(self.dense) if self.dense is not None else len(self._samples)

    def sample(self, i: int) -> Any:
        if self.dense is not None:
            return self.dense[i, ...]
        return self._samples[i]

    def is_uniform(self) -> bool:
        if self.dense is not None:
            return True
        s = self._samples
        return all(x.shape == s[0].shape for x in s)

    def shapes(self) -> list[tuple[int, ...]]:
        """Each sample's shape, without making per-sample views of ``dense`` (64 views of a
        torch CUDA tensor cost ~100 µs)."""
        if self.dense is not None:
            return [tuple(self.dense.shape[1:])] * len(self.dense)
        return [tuple(x.shape) for x in self._samples]

    def stacked(self, xp: Any = np) -> Any:
        """One array with a leading batch dim; stacks (copies) uniform samples once."""
        if self.dense is None:
            if not self.is_uniform():
                raise ValueError("samples have different shapes and cannot be stacked")
            if not self._samples:
                raise ValueError("an empty batch cannot be stacked")
            self.dense = xp.stack(self._samples)
            self._samples = None
        return self.dense


def keep_origin(bd: BatchData, value: Any) -> BatchData:
    """A kernel's result ``value`` as a BatchData that keeps ``bd``'s origin (for operators
    whose outputs are the input's samples, reshaped or copied)."""
    out = BatchData.of(value)
    out.origin = bd.origin
    return out


class SampleOrigins:
    """An origin (see :class:`BatchData`) made of other origins' samples: sample ``j`` is
    sample ``picks[j][1]`` of origin ``picks[j][0]`` (None: no origin). For a subset or a
    permutation of a batch, a Tensor taken from a batch, or a batch built of Tensors."""

    __slots__ = ("picks",)

    def __init__(self, picks: list[tuple[Any, int]]) -> None:
        self.picks = picks

    @classmethod
    def pick(cls, origin: Any, indices: Any) -> SampleOrigins | None:
        """Samples ``indices`` of ``origin`` (None when ``origin`` is None)."""
        return None if origin is None else cls([(origin, int(i)) for i in indices])

    @classmethod
    def join(cls, origins: list) -> SampleOrigins | None:
        """One sample of each of ``origins`` (each an origin of one sample, or None)."""
        return cls([(o, 0) for o in origins]) if any(o is not None for o in origins) else None

    def __call__(self, j: int) -> str:
        origin, i = self.picks[j]
        if origin is None:
            raise LookupError(f"sample {j} was not read by a reader")
        return origin(i)

    def source_info(self, j: int) -> str:
        origin, i = self.picks[j]
        get = getattr(origin, "source_info", None)
        return get(i) if get is not None else ""


class LazyBatchData(BatchData):
    """A BatchData of ``n`` samples whose data ``make()`` builds on first use (ours): the
    sample list, or with ``dense=True`` the one array with a leading batch dimension.

    For batches that arrive in one buffer, such as a capture worker's step or a device
    graph's outputs: cutting 64 JPEGs into per-sample views, or making a view of each output
    of a replayed graph, costs tens of µs a step, and the loop usually only passes the batch
    on to the next operator, which was computed already.
    """

    __slots__ = ("_make", "_n")

    def __init__(self, n: int, make: Any, dense: bool = False) -> None:  # noqa: D107 - the base's check needs data
        # The attribute ``make`` fills stays unset: reading it calls __getattr__ below.
        if dense:
            self._samples = None
        else:
            self.dense = None
        self._make = make
        self._n = n
        self.origin = None

    def __getattr__(self, name: str) -> Any:
        # Only reached while the slot that ``make`` fills is unset: fill it once.
        if name not in ("dense", "_samples"):
            raise AttributeError(name)
        v = self._make()
        setattr(self, name, v)
        return v

    def __len__(self) -> int:
        return self._n

    def __reduce__(self) -> tuple:
        return BatchData, (self.dense, None if self.dense is not None else self.samples)
