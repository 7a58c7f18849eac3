"""``Batch``: a list of samples with one dtype, ndim and layout (shapes may differ)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _convert, _dtype
from ._device import CPU, Device
from ._eval import Invocation
from ._storage import BatchData, SampleOrigins
from ._tensor import Tensor

# One object for ``.gpu()``'s device: capture mode checks a replayed call's device by identity first.
_GPU0 = Device("gpu")


def _builtins() -> Any:
    """``ndd._builtins`` (it imports this module), bound here at its first use: an import
    statement in a method costs about a microsecond per call."""
    global _builtins_mod
    if _builtins_mod is None:
        from . import _builtins as mod

        _builtins_mod = mod
    return _builtins_mod


_builtins_mod: Any = None

_NO_GETITEM = (
    "'Batch' object is not subscriptable: use batch.tensors[i] to pick samples "
    "and batch.slice[...] to index inside every sample."
)


# What a Batch holds (its slots but __weakref__): the constructor copies them from the Batch
# ``_make_batch`` builds.
_STATE = ("_bd", "_inv", "_idx", "_dtype", "_layout", "_device", "_ndim", "_bs", "_ext", "_meta_extra")


class Batch:
    """A batch of samples, possibly the lazy result of an operator call.

    Build it with :func:`ndd.batch` (copies) or :func:`ndd.as_batch` (wraps).
    ``batch_size``, ``dtype``, ``ndim``, ``layout`` and ``device`` are known at once;
    ``shape`` (a list of per-sample tuples) waits for the data.
    """

    __slots__ = (*_STATE, "__weakref__")

    def __init__(self, tensors: Any = None, dtype: Any = None, device: Any = None, layout: str | None = None,
                 copy: bool = False) -> None:
        """``tensors`` wrapped as :func:`ndd.as_batch` wraps them (``copy=True``: copied, as
        :func:`ndd.batch`), as DALI's constructor does."""
        if tensors is None:
            raise TypeError("Batch() needs tensors: a list of tensor-likes, one tensor-like whose outer "
                            "dimension is the batch, or a Batch")
        from ._construct import _make_batch  # (_construct imports this module)

        src = _make_batch(tensors, dtype, device, layout, copy)
        for k in _STATE:
            setattr(self, k, getattr(src, k))

    @classmethod
    def _wrap(
        cls,
        bd: BatchData | None,
        dtype: _dtype.DType,
        layout: str | None,
        device: Device,
        ndim: int,
        batch_size: int,
        *,
        inv: Invocation | None = None,
        idx: int = 0,
        ext: bool = False,
    ) -> Batch:
        b = object.__new__(cls)
        b._bd = bd
        b._inv = inv
        b._idx = idx
        b._dtype = dtype
        b._layout = layout or None
        b._device = device
        b._ndim = ndim
        b._bs = batch_size
        b._ext = ext
        b._meta_extra = None
        return b

    def _batch_data(self) -> BatchData:
        bd = self._bd
        if bd is None:
            bd = self._bd = self._inv.result()[self._idx]
            self._inv = None
        return bd

    def as_batch(self, copy: bool = False) -> Batch:
        """This batch (a copy with ``copy=True``). DALI's ``b.tensors[1:]`` is a selection with
        ``as_batch(copy=False)`` and ``tolist()``; ndd's is already a Batch, and takes both so
        that such code runs."""
        return self.to_device(self._device, force_copy=True) if copy else self

    def tolist(self) -> list[Tensor]:
        """The samples as a list of Tensors (see :meth:`as_batch`)."""
        return list(self)

    def evaluate(self) -> Batch:
        """Run the pending call (if any) and return self."""
        self._batch_data()
        return self

    # -- metadata ----------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self._bs

    @property
    def dtype(self) -> _dtype.DType:
        return self._dtype

    @property
    def layout(self) -> str | None:
        return self._layout

    @property
    def ndim(self) -> int:
        return self._ndim

    @property
    def device(self) -> Device:
        return self._device

    @property
    def shape(self) -> list[tuple[int, ...]]:
        bd = self._batch_data()
        if bd.dense is not None:
            s = tuple(bd.dense.shape[1:])
            return [s] * len(bd)
        return [tuple(x.shape) for x in bd.samples]

    # -- samples -----------------------------------------------------------
    @property
    def tensors(self) -> _TensorsProxy:
        """Pick samples: ``[i]`` gives a Tensor, ``[slice or list]`` a Batch of those samples."""
        return _TensorsProxy(self, None)

    def _tensor(self, i: int) -> Tensor:
        n = self._bs
        if not -n <= i < n:
            raise IndexError(f"sample index {i} out of range for a batch of {n}")
        bd = self._batch_data()
        return Tensor._wrap(bd.sample(i % n), self._dtype, self._layout, self._device, self._ndim,
                            origin=SampleOrigins.pick(bd.origin, (i % n,)))

    def select(self, index: Any) -> Tensor | Batch:
        """Tensor for an int, Batch for a slice or list, self for ``...``."""
        if index is Ellipsis:
            return self
        if isinstance(index, (int, np.integer)):
            return self._tensor(int(index))
        return _TensorsProxy(self, index).as_batch()

    @property
    def slice(self) -> _SliceProxy:
        """Index inside every sample; indices may be Batches of per-sample values."""
        return _SliceProxy(self)

    def __getitem__(self, index: Any) -> Any:
        raise TypeError(_NO_GETITEM)

    def __iter__(self) -> Any:
        for i in range(self._bs):
            yield self._tensor(i)

    # -- devices -----------------------------------------------------------
    def to_device(self, device: Device | str, force_copy: bool = False) -> Batch:
        """This batch on ``device`` (self when already there, unless ``force_copy``)."""
        dev = Device(device) if not isinstance(device, Device) else device
        if dev == self._device and not force_copy:
            return self
        if self._device.device_type == "cpu" and dev.device_type == "gpu":
            return _builtins().to_device(self, dev)  # an operator call: capture mode replays it
        bd = self._batch_data()
        if bd.dense is not None:
            arr = _convert.move(bd.dense, self._device, dev)
            nbd = BatchData(dense=_convert.copy_array(arr) if arr is bd.dense else arr)
        else:
            moved = [_convert.move(x, self._device, dev) for x in bd.samples]
            nbd = BatchData(samples=[_convert.copy_array(m) if m is x else m
                                     for m, x in zip(moved, bd.samples)])
        return Batch._wrap(nbd, self._dtype, self._layout, dev, self._ndim, self._bs)

    def cpu(self) -> Batch:
        return self.to_device(CPU)

    def gpu(self, index: int | None = None) -> Batch:
        return self.to_device(_GPU0 if index is None else Device("gpu", index))

    # -- interop -----------------------------------------------------------
    def _dense(self, pad: bool, copy: bool | None) -> Any:
        """One array with a leading batch dim (zero-padded when ``pad``)."""
        bd = self._batch_data()
        if bd.dense is not None:
            return bd.dense
        if copy is False:
            raise ValueError("This batch is not stored contiguously; converting it needs a copy.")
        if not bd.samples:
            return np.zeros((0,), self._dtype.numpy_dtype)
        on_cpu = self._device.device_type == "cpu"
        if bd.is_uniform():
            return np.stack(bd.samples) if on_cpu else _convert.gpu_backend().stack(bd.samples)
        if not pad:
            shapes = [tuple(x.shape) for x in bd.samples]
            raise ValueError(
                f"The samples have different shapes ({_shape_summary(shapes)}); "
                "pass pad=True to zero-pad them to a common shape."
            )
        if not on_cpu:
            return _convert.gpu_backend().pad_stack(bd.samples, self._dtype.numpy_dtype)
        shape = (len(bd.samples),) + tuple(max(s) for s in zip(*(x.shape for x in bd.samples)))
        out = np.zeros(shape, bd.samples[0].dtype)
        for i, x in enumerate(bd.samples):
            out[(i,) + tuple(slice(0, d) for d in x.shape)] = x
        return out

    def torch(self, copy: bool | None = None, pad: bool = False) -> Any:
        """One ``torch.Tensor`` with a leading batch dimension.

        ``copy=None`` avoids a copy when possible, ``True`` always copies, ``False``
        raises if a copy would be needed. ``pad=True`` zero-pads ragged samples.
        """
        import torch

        dense = self._dense(pad, copy)
        if self._device.device_type != "cpu":
            t = _convert.gpu_backend().to_torch(dense)
            return t.clone() if copy else t
        if copy:
            return Tensor._wrap(dense, self._dtype, None, self._device, self._ndim + 1).torch(True)
        if isinstance(dense, np.ndarray) and not dense.flags.writeable:
            if copy is False:
                raise ValueError("This batch wraps read-only memory and cannot be shared.")
            dense = dense.copy()
        if isinstance(dense, np.ndarray) and dense.dtype != np.bool_:
            return torch.from_numpy(dense)
        return torch.from_dlpack(dense)

    def __repr__(self) -> str:
        try:
            shapes = _shape_summary(self.shape)
        except Exception as e:  # noqa: BLE001 - repr must not raise
            shapes = f"<error: {type(e).__name__}>"
        lay = f", layout={self._layout!r}" if self._layout else ""
        return (
            f"Batch(batch_size={self._bs}, dtype={self._dtype}, device={self._device}"
            f"{lay}, shape={shapes})"
        )

    @staticmethod
    def broadcast(
        sample: Any, batch_size: int, device: Device | str | None = None, dtype: Any = None
    ) -> Batch:
        """A batch of ``batch_size`` copies of one sample."""
        from ._construct import as_tensor

        if isinstance(sample, Batch):
            raise ValueError("Batch.broadcast takes one sample, not a Batch.")
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 0:
            raise ValueError(f"batch_size must be a non-negative integer, got {batch_size!r}")
        t = as_tensor(sample, dtype=dtype, device=device)
        a = t._array()
        shape = (int(batch_size),) + tuple(a.shape)
        if t.device.device_type == "cpu":
            dense = np.broadcast_to(a, shape).copy()
        else:
            dense = _convert.gpu_backend().broadcast(a, shape)
        return Batch._wrap(BatchData(dense=dense), t.dtype, t.layout, t.device, t.ndim, int(batch_size))


def _shape_summary(shapes: list[tuple[int, ...]]) -> str:
    if shapes and all(s == shapes[0] for s in shapes):
        return f"[{shapes[0]}] * {len(shapes)}"
    if len(shapes) > 6:
        return ", ".join(map(str, shapes[:6])) + ", ..."
    return ", ".join(map(str, shapes))


class _TensorsProxy:
    """``batch.tensors``: sample selection."""

    __slots__ = ("_batch", "_sel")

    def __init__(self, batch: Batch, sel: Any) -> None:
        self._batch = batch
        self._sel = sel

    def _indices(self) -> list[int]:
        n = self._batch._bs
        if self._sel is None:
            return list(range(n))
        if isinstance(self._sel, slice):
            return list(range(n))[self._sel]
        out = []
        for i in self._sel:
            i = int(i)
            if not -n <= i < n:
                raise IndexError(f"sample index {i} out of range for a batch of {n}")
            out.append(i % n)
        return out

    def __len__(self) -> int:
        return len(self._indices())

    def __getitem__(self, index: Any) -> Any:
        idx = self._indices()
        if isinstance(index, (int, np.integer)):
            return self._batch._tensor(idx[int(index)])
        # A subset of samples is a Batch, as the dynamic-mode guide says (DALI 2.4 returns a
        # selection proxy here; the guide wins).
        if isinstance(index, slice):
            return _TensorsProxy(self._batch, idx[index]).as_batch()
        if isinstance(index, (list, tuple, range, np.ndarray)):
            return _TensorsProxy(self._batch, [idx[int(i)] for i in index]).as_batch()
        raise TypeError(f"batch.tensors[] takes an int, a slice or a list of ints, got {type(index).__name__}")

    def __iter__(self) -> Any:
        for i in self._indices():
            yield self._batch._tensor(i)

    def tolist(self) -> list[Tensor]:
        return list(self)

    def as_batch(self, copy: bool = False) -> Batch:
        """The selected samples as a Batch."""
        b = self._batch
        idx = self._indices()
        bd = b._batch_data()
        if bd.dense is not None:
            sel = bd.dense[idx]
            nbd = BatchData(dense=sel)
        else:
            samples = [bd.samples[i] for i in idx]
            nbd = BatchData(samples=[_convert.copy_array(s) for s in samples] if copy else samples)
        nbd.origin = SampleOrigins.pick(bd.origin, idx)
        return Batch._wrap(nbd, b._dtype, b._layout, b._device, b._ndim, len(idx))


class _SliceProxy:
    """``batch.slice[...]``: per-sample indexing."""

    __slots__ = ("_batch",)

    def __init__(self, batch: Batch) -> None:
        self._batch = batch

    def __getitem__(self, index: Any) -> Batch:
        from ._builtins import subscript

        return subscript(self._batch, index)
