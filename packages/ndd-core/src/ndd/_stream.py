"""CUDA streams as objects: ``ndd.Stream``, ``ndd.stream`` and the default and current
streams (package ndd-core).

A :class:`Stream` wraps a stream made elsewhere (a torch or CuPy stream, an object with
``__cuda_stream__``, a raw ``cudaStream_t`` handle) or a new one. Making a new stream asks
the "gpu" device backend (ndd-ops-cuda). A raw handle carries no device: without
``device_id`` it is taken to belong to the current GPU (DALI asks the driver; pass
``device_id`` for a stream of another GPU). Wrapping a handle with ``device_id`` needs
nothing. Which stream an operator runs on:
its EvalContext's own (``EvalContext(cuda_stream=...)``, or the thread's current stream
when the context was made), else the process-wide default for the device, else a stream
the GPU backend keeps per context.
"""

from __future__ import annotations

import threading
from typing import Any

from . import _plugins
from ._device import Device

_CREATE_NEW = object()


def _backend() -> Any:
    return _plugins.device_backend("gpu")


def _handle_of(obj: Any) -> int:
    """The raw ``cudaStream_t`` of a stream object, or a TypeError naming what was given."""
    if isinstance(obj, bool):
        raise TypeError("A CUDA stream cannot be a bool")
    if isinstance(obj, int):
        if obj < 0:
            raise ValueError(f"A CUDA stream handle cannot be negative, got {obj}")
        return obj
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        value = proto()
        return int(value[1] if isinstance(value, tuple) else value)
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, CUDA Python-like objects
        value = getattr(obj, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    raise TypeError(f"Expected a CUDA stream (a torch or CuPy stream, an object with "
                    f"__cuda_stream__, or a raw handle), got {type(obj).__name__}")


def _device_of(obj: Any) -> int | None:
    """The device ordinal a stream object says it belongs to, if it says."""
    for attr in ("device_id", "device_index"):
        value = getattr(obj, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    dev = getattr(obj, "device", None)
    if isinstance(dev, int) and not isinstance(dev, bool):
        return dev
    for attr in ("index", "id"):  # torch.device, CuPy Device
        value = getattr(dev, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class Stream:
    """A CUDA stream and the device it belongs to. Make one with :func:`stream`."""

    create_new = _CREATE_NEW

    def __init__(self, *, stream: Any = _CREATE_NEW, device_id: int | None = None) -> None:
        if stream is None:
            raise ValueError("The stream must not be None; omit it to create a new stream.")
        self._torch: Any = None  # the torch stream the GPU backend runs work on (it fills this)
        if stream is _CREATE_NEW:
            self._obj, self._device_id = _backend().new_stream(device_id)
            self._handle = _handle_of(self._obj)
            return
        if isinstance(stream, Stream):
            if device_id is not None and device_id != stream._device_id:
                raise ValueError(f"The device_id {device_id} doesn't match the id {stream._device_id} "
                                 f"of the stream object.")
            self._obj, self._handle, self._device_id = stream._obj, stream._handle, stream._device_id
            self._torch = stream._torch
            return
        self._handle = _handle_of(stream)
        dev = _device_of(stream)
        if dev is None:
            dev = device_id if device_id is not None else _backend().current_device()
        elif device_id is not None and device_id != dev:
            raise ValueError(f"The device_id {device_id} doesn't match the id {dev} of the stream "
                             f"{self._handle}.")
        self._obj, self._device_id = stream, dev

    @property
    def handle(self) -> int:
        """The raw CUDA stream handle."""
        return self._handle

    @property
    def device_id(self) -> int:
        """The GPU the stream belongs to."""
        return self._device_id

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._handle)

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has run."""
        _backend().synchronize_stream(self)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if other is None:
            return False
        if not isinstance(other, Stream):
            try:
                other = Stream(stream=other, device_id=self._device_id if isinstance(other, int) else None)
            except (TypeError, ValueError):
                return NotImplemented
        return self._handle == other._handle and self._device_id == other._device_id

    def __hash__(self) -> int:
        return hash((self._handle, self._device_id))

    def __str__(self) -> str:
        return f"CUDA stream {self._handle}, device_id={self._device_id}"

    def __repr__(self) -> str:
        return f"Stream(stream={self._obj!r}, device_id={self._device_id})"


def stream(*, stream: Any = _CREATE_NEW, device_id: int | None = None) -> Stream | None:
    """Wrap a stream object or handle as a :class:`Stream`, or make a new stream (on
    ``device_id``, default the current GPU). ``stream=None`` gives None."""
    if stream is None:
        return None
    if isinstance(stream, Stream):
        if device_id is not None and device_id != stream.device_id:
            raise ValueError(f"The device_id {device_id} doesn't match the id {stream.device_id} "
                             f"of the stream object.")
        return stream
    return Stream(stream=stream, device_id=device_id)


_defaults: dict[int, Stream] = {}
_defaults_lock = threading.Lock()


def _current_gpu() -> int:
    dev = Device.current()
    if dev.device_type == "gpu":
        return dev.device_id
    return _backend().current_device()


def set_default_stream(cuda_stream: Any, /, device_id: int | None = None) -> None:
    """Set the process-wide default stream of a GPU (the stream's own, else the current
    GPU); ``None`` clears it. Contexts with a stream of their own, and threads that called
    :func:`set_current_stream`, keep theirs."""
    s = stream(stream=cuda_stream, device_id=device_id)
    if device_id is None:
        device_id = s.device_id if s is not None else _current_gpu()
    with _defaults_lock:
        if s is None:
            _defaults.pop(device_id, None)
        else:
            _defaults[device_id] = s


def get_default_stream(device_id: int | None = None) -> Stream | None:
    """The default stream set for a GPU (the current one by default), or None."""
    if not _defaults:
        return None
    return _defaults.get(_current_gpu() if device_id is None else device_id)


def set_current_stream(cuda_stream: Any, /) -> None:
    """Set the stream of this thread's default EvalContext for the current device; contexts
    made later on this thread for that device take it too. ``None`` resets it. This does not
    order the new stream after work already queued on the old one."""
    from ._eval import EvalContext

    ctx = EvalContext.default()
    ctx._cuda_stream = stream(stream=cuda_stream, device_id=ctx.device_id)
    ctx._own_stream = None


def get_current_stream() -> Stream | None:
    """The stream of this thread's default EvalContext (``EvalContext.default().cuda_stream``)."""
    from ._eval import EvalContext

    return EvalContext.default().cuda_stream
