"""Constructors: ``tensor``, ``as_tensor``, ``batch``, ``as_batch``."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from . import _convert, _dtype
from ._batch import Batch, _TensorsProxy
from ._device import Device
from ._storage import BatchData, SampleOrigins
from ._tensor import Tensor


def _check_layout(layout: str | None, ndim: int) -> str | None:
    if layout is None or layout == "":
        return None
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a string, got {type(layout).__name__}")
    if len(layout) != ndim:
        raise ValueError(f"layout {layout!r} has {len(layout)} dims but the data has {ndim}")
    return layout


def _resolve_device(device: Any, default: Device) -> Device:
    if device is None:
        return default
    return device if isinstance(device, Device) else Device(device)


def _is_python_data(data: Any) -> bool:
    """Python numbers, or lists and tuples of them (not enums, not NumPy or ndd objects)."""
    if isinstance(data, (list, tuple)):
        return all(_is_python_data(x) for x in data)
    return isinstance(data, (bool, int, float)) and not isinstance(data, (enum.Enum, np.generic))


def _make_tensor(data: Any, dtype: Any, device: Any, layout: str | None, pad: bool, copy: bool) -> Tensor:
    origin = None
    if isinstance(data, Tensor):
        arr, src, hint, ext = data._array(), data.device, None, data._ext
        src_dtype, origin = data.dtype, data._origin
        layout = data.layout if layout is None else layout
    elif isinstance(data, Batch):
        arr = data._dense(pad, None)
        src, hint, ext, src_dtype = data.device, None, False, data.dtype
        if layout is None and data.layout:
            layout = "N" + data.layout
    elif dtype is not None and _is_python_data(data) and _dtype.dtype(dtype).kind is not _dtype.DType.Kind.enum:
        # Python numbers with a dtype are converted as NumPy converts them, as in DALI: floats
        # truncated, an int outside the type (or a NaN for an int type) raises
        dt = _dtype.dtype(dtype)
        arr = np.array(data, dtype=dt.numpy_dtype)
        src, ext, src_dtype = Device("cpu"), False, dt
    else:
        arr, src, hint, ext = _convert.to_array(data)
        src_dtype = hint or _dtype.from_numpy(arr.dtype)
    dt = src_dtype if dtype is None else _dtype.dtype(dtype)
    if dt != src_dtype or copy:
        if dt.kind is _dtype.DType.Kind.enum or src_dtype.kind is _dtype.DType.Kind.enum:
            arr = arr.astype(dt.numpy_dtype, copy=True)
        else:
            arr = _convert.cast_array(arr, dt, copy)
        ext = False
    dev = _resolve_device(device, src)
    if dev != src:
        arr = _convert.move(arr, src, dev)
        ext = False
    return Tensor._wrap(arr, dt, _check_layout(layout, arr.ndim), dev, arr.ndim, ext=ext,
                        origin=origin if dt == src_dtype else None)  # (a conversion is new data)


def tensor(data: Any, dtype: Any = None, device: Any = None, layout: str | None = None,
           pad: bool = False) -> Tensor:
    """A new Tensor holding a copy of ``data``.

    Python ints become int32 (uint32 from 2**31 when none is negative), floats float32;
    NumPy keeps its dtype. With ``dtype``, Python numbers convert as NumPy converts them
    (floats truncated; an int the type cannot hold raises), arrays as ``cast`` (saturated).
    A Batch becomes one tensor with a leading batch dimension (``pad`` for ragged).
    """
    return _make_tensor(data, dtype, device, layout, pad, copy=True)


def as_tensor(data: Any, dtype: Any = None, device: Any = None, layout: str | None = None,
              pad: bool = False) -> Tensor:
    """A Tensor that wraps ``data`` without copying when it can."""
    if isinstance(data, Tensor) and dtype is None and device is None and layout is None:
        return data
    return _make_tensor(data, dtype, device, layout, pad, copy=False)


def _make_batch(data: Any, dtype: Any, device: Any, layout: str | None, copy: bool) -> Batch:
    dt_req = None if dtype is None else _dtype.dtype(dtype)
    if isinstance(data, _TensorsProxy):  # batch(b.tensors), as_batch(b.tensors)
        data = data.as_batch()
    if isinstance(data, Batch):
        if not copy and dt_req in (None, data.dtype) and device is None and layout in (None, data.layout):
            return data
        bd = data._batch_data()
        samples = bd.samples
        src_dev = data.device
        dt = data.dtype
        layout = data.layout if layout is None else layout
        ndim = data.ndim
        dense = bd.dense
        ext = data._ext
        origin = bd.origin
    elif isinstance(data, (list, tuple)):
        if not data:
            if dt_req is None:
                raise ValueError("An empty batch needs an explicit dtype.")
            return Batch._wrap(BatchData(samples=[]), dt_req, _check_layout(layout, 0) if layout else None,
                               _resolve_device(device, Device("cpu")), 0, 0)
        ts = [as_tensor(x, dtype=dt_req if dt_req is not None and _is_python_data(x) else None) for x in data]
        dt, ndim, src_dev = ts[0].dtype, ts[0].ndim, ts[0].device
        for i, t in enumerate(ts[1:], 1):
            if t.dtype != dt:  # as DALI: every sample takes the type of the first (or of dtype=)
                ts[i] = t = as_tensor(data[i], dtype=dt_req or dt)
            if t.ndim != ndim:
                raise ValueError(f"Sample {i} has {t.ndim} dims, sample 0 has {ndim}; a batch needs one ndim.")
            if t.device != src_dev:
                raise ValueError(f"Sample {i} is on {t.device}, sample 0 on {src_dev}.")
        lays = {t.layout for t in ts}
        if layout is None and len(lays) == 1:
            layout = lays.pop()
        samples = [t._array() for t in ts]
        dense = None
        ext = any(t._ext for t in ts)
        origin = SampleOrigins.join([t._origin for t in ts])
    else:
        if isinstance(data, (bool, int, float)) or (isinstance(data, np.ndarray) and data.ndim == 0):
            raise ValueError("A scalar cannot be converted to a batch.")
        t = data if isinstance(data, Tensor) else as_tensor(data)
        if t.ndim == 0:
            raise ValueError("A scalar cannot be converted to a batch.")
        dense = t._array()
        samples = None
        ext = t._ext
        origin = None
        dt, ndim, src_dev = t.dtype, t.ndim - 1, t.device
        if layout is None and t.layout:
            layout = t.layout[1:]
    out_dt = dt_req or dt
    dev = _resolve_device(device, src_dev)
    conv = out_dt != dt or copy or dev != src_dev

    def fix(a: Any) -> Any:
        if out_dt != dt or copy:
            a = _convert.cast_array(a, out_dt, copy=True)
        return _convert.move(a, src_dev, dev)

    if dense is None and copy and dev.device_type == "cpu" and all(isinstance(a, np.ndarray) for a in samples) \
            and len({a.shape for a in samples}) == 1:
        # A copy of same-shape host samples is made as one dense array (as DALI's contiguous
        # batches): dense kernels take it, and torch(copy=False) shares it. (The stack is
        # the copy: only a change of type converts it again.)
        dense, samples, copy, ext = np.stack(samples), None, False, False  # (our own copy)
        conv = out_dt != dt
    if dense is not None:
        bd = BatchData(dense=fix(dense) if conv else dense)
        n = len(dense)
    else:
        bd = BatchData(samples=[fix(a) for a in samples] if conv else list(samples))
        n = len(samples)
    if out_dt == dt:  # (a conversion is new data)
        bd.origin = origin
    return Batch._wrap(bd, out_dt, _check_layout(layout, ndim), dev, ndim, n, ext=ext and not conv)


def batch(tensors: Any, dtype: Any = None, device: Any = None, layout: str | None = None) -> Batch:
    """A new Batch holding copies of the samples.

    Accepts a list of tensor-likes, one tensor-like whose outer dimension is the
    batch, or a Batch.
    """
    return _make_batch(tensors, dtype, device, layout, copy=True)


def as_batch(tensors: Any, dtype: Any = None, device: Any = None, layout: str | None = None) -> Batch:
    """A Batch that wraps the samples without copying when it can (a Batch is returned as is)."""
    return _make_batch(tensors, dtype, device, layout, copy=False)
