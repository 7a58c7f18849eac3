"""Reader classes (``ndd.readers.File`` …), provided by plugins such as ``ndd-readers``.

Readers DALI keeps under another module (``ndd.experimental.readers.Fits``) are registered
with a dotted name (``experimental.Fits``) and appear in that module's :func:`namespace`.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from .. import _plugins


def _lookup(prefix: str, name: str) -> type:
    """The reader ``name`` of namespace ``prefix`` ("" for ``ndd.readers``), or an
    AttributeError naming the right spelling or the package that provides it."""
    module = f"ndd.{prefix}.readers" if prefix else "ndd.readers"
    if name.startswith("__"):
        raise AttributeError(name)
    _plugins.ensure_loaded()
    key = f"{prefix}.{name}" if prefix else name
    cls = _plugins.readers.get(key)
    if cls is not None:
        return cls
    known = {k for k in set(_plugins.readers) | set(_plugins.KNOWN_READERS)
             if k.rpartition(".")[0] == prefix}
    for k in known:
        if k.lower() == key.lower():
            short = k.rpartition(".")[2]
            if k in _plugins.readers:
                raise AttributeError(f"{module} has no attribute '{name}'; reader classes are "
                                     f"PascalCase: use {module}.{short}")
            break
    else:
        raise AttributeError(f"module '{module}' has no attribute '{name}'")
    case = f" (and note reader classes are PascalCase: {module}.{short})" if short != name else ""
    if any(r.distribution == "ndd-readers" for r in _plugins.records()):
        raise AttributeError(f"{module}.{short} is not implemented by the installed readers plugin "
                             f"(ndd-readers) yet{case}")
    raise AttributeError(
        f"{module}.{short} is provided by the `ndd-readers` package, which is not installed: "
        f"pip install ndd-readers{case}"
    )


def _names(prefix: str) -> list[str]:
    _plugins.ensure_loaded()
    return sorted(k.rpartition(".")[2] for k in _plugins.readers if k.rpartition(".")[0] == prefix)


def __getattr__(name: str) -> Any:
    cls = _lookup("", name)
    globals()[name] = cls
    return cls


def __dir__() -> list[str]:
    return _names("")


class ReaderNamespace(ModuleType):
    """``ndd.<prefix>.readers``: the readers registered as ``<prefix>.<Name>``."""

    def __init__(self, prefix: str) -> None:
        super().__init__(f"ndd.{prefix}.readers")
        self._ndd_prefix = prefix
        self.__doc__ = f"Reader classes under ndd.{prefix}.readers (provided by plugins)."

    def __getattr__(self, name: str) -> Any:
        cls = _lookup(self._ndd_prefix, name)
        setattr(self, name, cls)
        return cls

    def __dir__(self) -> list[str]:
        return _names(self._ndd_prefix)


def namespace(prefix: str) -> ReaderNamespace:
    """The module ``ndd.<prefix>.readers`` (created once, also put in ``sys.modules``)."""
    full = f"ndd.{prefix}.readers"
    mod = sys.modules.get(full)
    if not isinstance(mod, ReaderNamespace):
        mod = sys.modules[full] = ReaderNamespace(prefix)
    return mod
