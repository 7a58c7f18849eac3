"""Plugin discovery through entry points (internal; the public face is ``ndd.plugins``).

Groups: ``ndd.ops`` and ``ndd.readers`` (callables ``register(registry)``),
``ndd.devices`` (callables ``register(registry)`` adding a device backend), and
``ndd.extensions`` (modules that appear as ``ndd.<name>``, e.g. ``ndd.capture``).
Loading happens once, on first use; a plugin that fails is skipped and reported.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

from ._schema import OpSchema

GROUPS = ("ndd.ops", "ndd.readers", "ndd.devices")
EXTENSION_GROUP = "ndd.extensions"

schemas: dict[str, OpSchema] = {}
readers: dict[str, type] = {}
devices: dict[str, Any] = {}
_device_records: dict[str, PluginRecord] = {}  # device name -> the entry point that added it
_extensions: dict[str, Any] = {}  # name -> EntryPoint, then the loaded module
_records: list[PluginRecord] = []
_loaded = False
_lock = threading.RLock()

# Which distribution provides what, for errors when it is missing.
KNOWN_EXTENSIONS = {"capture": "ndd-capture", "checkpoint": "ndd-checkpoint",
                    "tfrecord": "ndd-readers"}
KNOWN_READERS = ("File", "Caffe", "Caffe2", "COCO", "MXNet", "NemoAsr", "Numpy", "TFRecord",
                 "Video", "VideoResize", "Webdataset", "experimental.Fits", "experimental.Video")


@dataclass
class PluginRecord:
    """One entry point: where it came from and whether it loaded."""

    group: str
    name: str
    value: str
    distribution: str
    version: str
    ok: bool
    error: str | None = None
    unavailable: str | None = None  # loaded, but unusable here (e.g. a GPU backend without a GPU)


class Registry:
    """What a plugin's ``register(registry)`` function receives."""

    def __init__(self, source: str, record: PluginRecord | None = None) -> None:
        self.source = source
        self._record = record

    def add_schema(self, schema: OpSchema) -> None:
        """Declare a new operator (core declares DALI's; plugins may add their own)."""
        old = schemas.get(schema.name)
        if old is not None and old is not schema:
            raise RuntimeError(f"Operator `{schema.name}` is declared twice (again by {self.source})")
        schemas[schema.name] = schema

    def add_kernel(self, op: str, device: str, fn: Callable) -> None:
        """Attach the kernel of operator ``op`` for ``device`` ("cpu" or "gpu")."""
        schema = schemas.get(op)
        if schema is None:
            raise KeyError(f"{self.source}: no operator `{op}` is declared; call add_schema first")
        if device not in ("cpu", "gpu"):
            raise ValueError(f"{self.source}: unknown device {device!r} for `{op}`")
        prev = schema.kernel_sources.get(device)
        if prev is not None:
            message = (f"Operator `{op}` on {device} is provided by two plugins: {prev} and "
                       f"{self.source}; uninstall one of them.")
            schema.conflicts[device] = message
            raise RuntimeError(message)
        schema.kernels[device] = fn
        schema.kernel_sources[device] = self.source

    def add_reader(self, name: str, cls: type) -> None:
        """Publish a reader class as ``ndd.readers.<name>``; a dotted name ``<module>.<Name>``
        (``experimental.Fits``) as ``ndd.<module>.readers.<Name>``."""
        if name in readers and readers[name] is not cls:
            raise RuntimeError(f"Reader `{name}` is provided twice (again by {self.source})")
        readers[name] = cls

    def add_device(self, name: str, backend: Any) -> None:
        """Install a device backend (for example "gpu")."""
        if name in devices:
            raise RuntimeError(f"Device backend {name!r} is provided twice (again by {self.source})")
        devices[name] = backend
        if self._record is not None:
            _device_records[name] = self._record


def _dist_of(ep: metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "?", "?"
    return dist.metadata["Name"], dist.version


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    eps = list(metadata.entry_points(group=group))
    # Core first, so its schemas exist before plugins attach kernels; then by name.
    return sorted(eps, key=lambda ep: (_dist_of(ep)[0] != "ndd-core", _dist_of(ep)[0], ep.name))


def ensure_loaded() -> None:
    """Scan the entry points once (thread-safe)."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for group in GROUPS:
            for ep in _entry_points(group):
                dist, ver = _dist_of(ep)
                rec = PluginRecord(group, ep.name, ep.value, dist, ver, True)
                try:
                    fn = ep.load()
                    fn(Registry(f"{dist} {ver} ({ep.name})", rec))
                except Exception as e:  # noqa: BLE001 - a broken plugin is reported, not fatal
                    rec.ok = False
                    rec.error = "".join(traceback.format_exception_only(type(e), e)).strip()
                _records.append(rec)
        for ep in _entry_points(EXTENSION_GROUP):
            _extensions.setdefault(ep.name, ep)
        _loaded = True


def extension(name: str) -> ModuleType:
    """The module registered as ``ndd.<name>`` (ImportError naming the package if absent)."""
    ensure_loaded()
    with _lock:
        ext = _extensions.get(name)
        if ext is None:
            pkg = KNOWN_EXTENSIONS.get(name)
            hint = f": pip install {pkg}" if pkg else ""
            raise ImportError(f"ndd.{name} is not available; it needs the `{pkg or name}` package{hint}")
        if isinstance(ext, metadata.EntryPoint):
            dist, ver = _dist_of(ext)
            rec = PluginRecord(EXTENSION_GROUP, name, ext.value, dist, ver, True)
            try:
                mod = ext.load()
            except Exception as e:
                rec.ok = False
                rec.error = "".join(traceback.format_exception_only(type(e), e)).strip()
                _records.append(rec)
                raise ImportError(f"ndd.{name} failed to load from {dist} {ver}: {rec.error}") from e
            _records.append(rec)
            _extensions[name] = ext = mod
        return ext


def has_extension(name: str) -> bool:
    ensure_loaded()
    return name in _extensions


def device_backend(name: str) -> Any:
    """The backend for device type ``name`` or a RuntimeError saying what to install."""
    ensure_loaded()
    be = devices.get(name)
    if be is None:
        raise RuntimeError(
            f"No {name.upper()} backend is available: the CUDA plugin (package ndd-ops-cuda, "
            "extra ndd[cuda]) is not installed or provides no GPU backend yet; it needs a machine "
            "with an NVIDIA GPU."
        )
    if not be.available():
        rec = _device_records.get(name)
        source = f" (from {rec.distribution} {rec.version})" if rec is not None else ""
        raise RuntimeError(f"The {name.upper()} backend{source} is installed but unusable: "
                           f"{be.unavailable_reason()}")
    return be


def records() -> list[PluginRecord]:
    """Every entry point seen so far; device backends are asked here whether they are usable
    (not at load time: that can be slow, e.g. importing torch to look for a GPU)."""
    ensure_loaded()
    for name, rec in _device_records.items():
        be = devices.get(name)
        if be is not None:
            rec.unavailable = None if be.available() else (be.unavailable_reason() or "unavailable")
    return list(_records)
