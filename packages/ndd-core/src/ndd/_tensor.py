"""``Tensor``: one sample, possibly the lazy result of an operator call."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _convert, _dtype
from ._device import CPU, Device
from ._eval import Invocation
from ._storage import BatchData

# What a Tensor holds (its slots but __weakref__): the constructor copies them from the Tensor
# ``_make_tensor`` builds.
# ``_origin``: the reader origin of this one sample (see ``BatchData``), or None.
_STATE = ("_data", "_inv", "_idx", "_dtype", "_layout", "_device", "_ndim", "_ext", "_meta_extra", "_origin")


class Tensor:
    """One sample (an n-dimensional array) on a device.

    Build it with :func:`ndd.tensor` (copies) or :func:`ndd.as_tensor` (wraps).
    Results of operator calls are lazy: reading data waits for the call to run,
    while ``dtype``, ``ndim``, ``layout`` and ``device`` are known at once.
    """

    __slots__ = (*_STATE, "__weakref__")

    def __init__(self, data: Any = None, dtype: Any = None, device: Any = None, layout: str | None = None,
                 copy: bool = False) -> None:
        """``data`` wrapped as :func:`ndd.as_tensor` wraps it (``copy=True``: copied, as
        :func:`ndd.tensor`), as DALI's constructor does."""
        if data is None:
            raise TypeError("Tensor() needs data: an array, a tensor-like, a list or a scalar")
        from ._construct import _make_tensor  # (_construct imports this module)

        src = _make_tensor(data, dtype, device, layout, False, copy)
        for k in _STATE:
            setattr(self, k, getattr(src, k))

    @classmethod
    def _wrap(
        cls,
        data: Any,
        dtype: _dtype.DType,
        layout: str | None,
        device: Device,
        ndim: int,
        *,
        inv: Invocation | None = None,
        idx: int = 0,
        ext: bool = False,
        origin: Any = None,
    ) -> Tensor:
        t = object.__new__(cls)
        t._data = data
        t._inv = inv
        t._idx = idx
        t._dtype = dtype
        t._layout = layout or None
        t._device = device
        t._ndim = ndim
        t._ext = ext
        t._meta_extra = None
        t._origin = origin
        return t

    # -- data access -------------------------------------------------------
    def _array(self) -> Any:
        d = self._data
        if d is None:
            bd: BatchData = self._inv.result()[self._idx]
            d = self._data = bd.sample(0)
            self._origin = bd.origin
            self._inv = None
        return d

    def _batch_data(self) -> BatchData:
        bd = BatchData(dense=self._array()[None])
        bd.origin = self._origin
        return bd

    def evaluate(self) -> Tensor:
        """Run the pending call (if any) and return self."""
        self._array()
        return self

    # -- metadata ----------------------------------------------------------
    @property
    def dtype(self) -> _dtype.DType:
        return self._dtype

    @property
    def layout(self) -> str | None:
        return self._layout

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return self._ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._array().shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        return self._dtype.bytes

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def item(self) -> Any:
        """The single element as a Python value (ValueError if size != 1)."""
        a = self._host()
        if a.size != 1:
            raise ValueError(f"item() needs a tensor with exactly one element, got shape {a.shape}")
        return a.reshape(()).item()

    # -- devices -----------------------------------------------------------
    def _host(self) -> np.ndarray:
        a = self._array()
        return a if self._device.device_type == "cpu" else _convert.gpu_backend().to_host(a)

    def to_device(self, device: Device | str, force_copy: bool = False) -> Tensor:
        """This tensor on ``device`` (self when already there, unless ``force_copy``)."""
        dev = Device(device) if not isinstance(device, Device) else device
        if dev == self._device and not force_copy:
            return self
        arr = _convert.move(self._array(), self._device, dev)
        if arr is self._data:
            arr = _convert.copy_array(arr)
        return Tensor._wrap(arr, self._dtype, self._layout, dev, self._ndim)

    def cpu(self) -> Tensor:
        return self.to_device(CPU)

    def gpu(self, index: int | None = None) -> Tensor:
        return self.to_device(Device("gpu", index))

    # -- interop -----------------------------------------------------------
    def torch(self, copy: bool = False) -> Any:
        """A ``torch.Tensor`` sharing this tensor's memory (unless ``copy``, or unless the data
        runs backwards, as in ``t[::-1]``: torch has no negative strides, so that is a copy)."""
        import torch

        a = self._array()
        if self._device.device_type != "cpu":
            t = _convert.gpu_backend().to_torch(a)
            return t.clone() if copy else t
        # torch cannot share read-only memory (np.frombuffer of a file's bytes): a copy, as
        # DALI's tensor of read-only data is one
        if copy or (isinstance(a, np.ndarray) and (any(st < 0 for st in a.strides) or not a.flags.writeable)):
            return torch.from_numpy(np.array(a))
        if isinstance(a, np.ndarray):
            return torch.from_numpy(a) if a.dtype != np.bool_ else torch.from_dlpack(a)
        return torch.from_dlpack(a)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if self._device.device_type != "cpu":
            raise TypeError("A GPU tensor cannot be converted to a NumPy array; call .cpu() first.")
        a = self._array()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return np.array(a) if copy else a

    @property
    def __cuda_array_interface__(self) -> dict:
        if self._device.device_type != "gpu":
            raise AttributeError("A CPU tensor has no __cuda_array_interface__; call .gpu() first.")
        return _convert.gpu_backend().cuda_array_interface(self._array())

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        a = self._array()
        if self._device.device_type == "cpu":
            if any(st < 0 for st in a.strides):
                # Exported as a compact copy: consumers such as torch abort the process on a
                # DLPack tensor with negative strides (a reversed slice).
                a = np.ascontiguousarray(a)
            return a.__dlpack__(**kwargs) if kwargs else a.__dlpack__()
        return _convert.gpu_backend().dlpack(a, stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        if self._device.device_type == "cpu":
            return (1, 0)
        return _convert.gpu_backend().dlpack_device(self._array())

    # -- indexing ----------------------------------------------------------
    def __getitem__(self, index: Any) -> Tensor:
        from ._builtins import subscript

        if index is Ellipsis or (isinstance(index, slice) and index == slice(None)):
            return self
        return subscript(self, index)

    def __len__(self) -> int:
        if self._ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        return bool(self._host())

    def __int__(self) -> int:
        return int(self._host())

    def __float__(self) -> float:
        return float(self._host())

    def __index__(self) -> int:
        return int(self._host().__index__())

    def __repr__(self) -> str:
        body = np.array2string(self._host(), separator=", ", threshold=64)
        lay = f", layout={self._layout!r}" if self._layout else ""
        return f"Tensor(\n{body},\n       dtype={self._dtype}, device={self._device}{lay}, shape={self.shape})"
