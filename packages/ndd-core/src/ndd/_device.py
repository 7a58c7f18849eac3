"""Devices: ``ndd.Device("cpu" | "gpu" | "gpu:N")`` and the GPU backend lookup."""

from __future__ import annotations

import threading
from typing import Any

_tls = threading.local()


class Device:
    """A device on which data lives and operators run.

    Works as a thread-local context manager: inside ``with ndd.Device("gpu"):``
    new tensors and operators without inputs use that device.
    """

    __slots__ = ("device_type", "device_id")

    def __init__(self, name: str | Device = "cpu", device_id: int | None = None) -> None:
        if isinstance(name, Device):
            name, device_id = name.device_type, name.device_id if device_id is None else device_id
        if not isinstance(name, str):
            raise TypeError(f"Device name must be a string, got {type(name).__name__}")
        dev_type, _, idx = name.partition(":")
        if dev_type == "mixed":
            raise ValueError(
                'device="mixed" is a pipeline-mode concept; in dynamic mode use device="gpu" '
                "(decoders then run their hybrid CPU+GPU path)."
            )
        if dev_type not in ("cpu", "gpu"):
            raise ValueError(f'Invalid device "{name}": expected "cpu", "gpu" or "gpu:N"')
        if idx:
            if not idx.isdigit():
                raise ValueError(f'Invalid device id in "{name}"')
            if device_id is not None and device_id != int(idx):
                raise ValueError(f'Device id {device_id} conflicts with "{name}"')
            device_id = int(idx)
        if dev_type == "cpu":
            if device_id not in (None, 0):
                raise ValueError(f"Invalid device id {device_id} for the CPU")
            device_id = None
        else:
            if device_id is None:
                device_id = 0
            if not isinstance(device_id, int) or device_id < 0:
                raise ValueError(f"Invalid GPU device id {device_id!r}")
        self.device_type = dev_type
        self.device_id = device_id

    @staticmethod
    def default_device_id(device_type: str) -> int | None:
        """The index a device of ``device_type`` gets when none is given: None for "cpu"; for
        "gpu" the GPU of the innermost ``with ndd.Device("gpu:N")`` on this thread, else 0."""
        if device_type == "cpu":
            return None
        if device_type != "gpu":
            raise ValueError(f'Invalid device type "{device_type}": expected "cpu" or "gpu"')
        cur = Device.current()
        return cur.device_id if cur.device_type == "gpu" else 0

    @staticmethod
    def type_from_dlpack(dev_type: int) -> str:
        """The device type of a DLPack device type code: 1 (kDLCPU) "cpu", 2 (kDLCUDA) "gpu"."""
        try:
            return _DLPACK_TYPES[int(dev_type)]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"Unsupported DLPack device type: {dev_type!r}") from None

    @staticmethod
    def from_dlpack(dlpack_device: Any) -> Device:
        """The Device of an object with ``__dlpack_device__`` (a torch tensor, a NumPy array)."""
        dev_type, dev_id = dlpack_device.__dlpack_device__()
        kind = Device.type_from_dlpack(dev_type)
        return Device(kind, int(dev_id) if kind == "gpu" else None)

    @staticmethod
    def current() -> Device:
        """The innermost active device on this thread (CPU by default)."""
        stack = getattr(_tls, "stack", None)
        return stack[-1] if stack else CPU

    def __enter__(self) -> Device:
        stack = getattr(_tls, "stack", None)
        if stack is None:
            stack = _tls.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _tls.stack.pop()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except ValueError:
                return False
        if not isinstance(other, Device):
            return NotImplemented
        return self.device_type == other.device_type and self.device_id == other.device_id

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __str__(self) -> str:
        return "cpu" if self.device_type == "cpu" else f"gpu:{self.device_id}"

    def __repr__(self) -> str:
        if self.device_type == "cpu":
            return "Device(device_type='cpu')"
        return f"Device(device_type='gpu', device_id={self.device_id})"


CPU = Device("cpu")
Device.CPU = CPU  # type: ignore[attr-defined] - DALI's class constant
_DLPACK_TYPES = {1: "cpu", 2: "gpu"}


def device(obj: Any, id: int | None = None) -> Device:  # noqa: A002 - DALI's argument name
    """Convert a name or Device to a :class:`Device` (``id``: the device index)."""
    if isinstance(obj, Device) and id is None:
        return obj
    return Device(obj, id)
