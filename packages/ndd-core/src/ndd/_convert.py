"""Turning user data (NumPy, torch, DLPack, Python values) into arrays (internal)."""

from __future__ import annotations

import array
import enum
from typing import Any

import numpy as np

from . import _dtype, _plugins  # (circular: _plugins is only read at call time)
from ._device import CPU, Device
from ._saturate import saturate_cast


def gpu_backend() -> Any:
    """The installed GPU device backend, or a RuntimeError saying what to install.

    Besides moving data (``to_device``, ``to_host``, ``from_external``, ``device_of``)
    it does the few array operations core needs on GPU arrays, with NumPy dtypes:
    ``dtype_of``, ``astype``, ``copy``, ``stack``, ``pad_stack``, ``broadcast``, and hands
    data out safely: ``to_torch``, ``dlpack``, ``dlpack_device``, ``cuda_array_interface``.
    """
    return _plugins.device_backend("gpu")


def is_gpu_array(x: Any) -> bool:
    return hasattr(x, "__cuda_array_interface__") and not isinstance(x, np.ndarray)


def _python_to_numpy(data: Any) -> np.ndarray:
    """Python scalars and nested lists, with DALI's inference rules.

    ints → int32 (uint32 when ≥ 2**31 and none negative, else OverflowError beyond int32),
    floats → float32, bools → bool, DALI enums → their enum dtype (stored as int32). As in
    DALI, the rules apply to what NumPy makes 64-bit: a list of uint8 or float16 arrays (or
    tensors) keeps that type.
    """
    arr = np.array(data)
    if arr.dtype == object:
        flat = arr.reshape(-1)
        if flat.size and isinstance(flat[0], enum.IntEnum):
            return np.array([int(v) for v in flat], np.int32).reshape(arr.shape)
        raise TypeError(f"Cannot convert {type(data).__name__} of mixed types to a tensor")
    if arr.dtype.kind in "iu" and arr.dtype.itemsize == 8:
        if arr.size == 0:
            return arr.astype(np.int32)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -(2**31) or hi >= 2**32 or (lo < 0 and hi >= 2**31):  # (as DALI: no type holds both)
            bad = lo if lo < -(2**31) else hi
            raise OverflowError(f"Python integer {bad} out of range for int32"
                                + ("" if lo < 0 else "/uint32") + "; give dtype= (e.g. ndd.int64)")
        return arr.astype(np.uint32 if hi >= 2**31 else np.int32)
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    return arr


def _enum_dtype_of(data: Any) -> _dtype.DType | None:
    x = data
    while isinstance(x, (list, tuple)) and x:
        x = x[0]
    if isinstance(x, enum.IntEnum):
        return _dtype.enum_dtype(type(x))
    return None


def to_array(data: Any) -> tuple[Any, Device, _dtype.DType | None, bool]:
    """Return ``(array, device, dtype_hint, wraps_user_memory)`` for tensor-like data.

    ``dtype_hint`` is set for enum-valued data; ``wraps_user_memory`` is True when the
    array shares memory with the caller's object.
    """
    if isinstance(data, np.ndarray):
        return data, CPU, None, True
    if isinstance(data, (bool, int, float, list, tuple, np.generic)) or isinstance(data, enum.Enum):
        hint = _enum_dtype_of(data) if not isinstance(data, np.generic) else None
        if isinstance(data, np.generic):
            return np.asarray(data), CPU, None, False
        return _python_to_numpy(data), CPU, hint, False
    mod = type(data).__module__
    if mod.startswith("torch") and hasattr(data, "is_cuda"):
        if data.is_cuda:
            return _from_gpu(data)
        t = data.detach()
        if t.dtype.is_floating_point and str(t.dtype) == "torch.bfloat16":
            raise TypeError("bfloat16 torch tensors are not supported on the CPU")
        return t.numpy(), CPU, None, True
    if is_gpu_array(data):
        return _from_gpu(data)
    if hasattr(data, "__dlpack_device__"):
        dev_type, _ = data.__dlpack_device__()
        if dev_type in (1, 3):  # kDLCPU, kDLCUDAHost
            return np.from_dlpack(data), CPU, None, True
        return _from_gpu(data)
    if hasattr(data, "__array__"):
        return np.asarray(data), CPU, None, True
    if isinstance(data, (bytearray, memoryview, array.array)):  # their items, as DALI
        return np.asarray(memoryview(data)), CPU, None, True
    raise TypeError(f"Cannot convert an object of type {type(data).__name__} to a tensor")


def _from_gpu(data: Any) -> tuple[Any, Device, _dtype.DType, bool]:
    be = gpu_backend()
    arr = be.from_external(data)
    return arr, be.device_of(data), _dtype.from_numpy(be.dtype_of(arr)), True


def copy_array(arr: Any) -> Any:
    """A copy of a CPU or GPU array."""
    return arr.copy() if isinstance(arr, np.ndarray) else gpu_backend().copy(arr)


def cast_array(arr: Any, dt: _dtype.DType, copy: bool) -> Any:
    """Convert ``arr`` to dtype ``dt`` (copy when needed or asked). On the CPU the values
    saturate and round as the ``cast`` operator's do (DALI converts with its Cast)."""
    npd = dt.numpy_dtype
    if isinstance(arr, np.ndarray):
        if arr.dtype == npd:
            return arr.copy() if copy else arr
        return saturate_cast(arr, npd)
    return gpu_backend().astype(arr, npd, copy)


def move(arr: Any, src: Device, dst: Device) -> Any:
    """Copy an array between devices (no-op when they match)."""
    if src == dst:
        return arr
    be = gpu_backend()
    if dst.device_type == "cpu":
        return be.to_host(arr)
    return be.to_device(arr, dst.device_id)
