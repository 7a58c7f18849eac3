"""Reader classes (``ndd.readers.File`` …), provided by plugins such as ``ndd-readers``."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from .. import _plugins

EXPERIMENTAL = "experimental.readers."
"""Prefix of the registry names of the readers published as ``ndd.experimental.readers.<Name>``."""


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    _plugins.ensure_loaded()
    if "." in name:
        raise AttributeError(f"module 'ndd.readers' has no attribute '{name}'")
    cls = _plugins.readers.get(name)
    if cls is not None:
        globals()[name] = cls
        return cls
    known = set(_plugins.readers) | set(_plugins.KNOWN_READERS)
    for k in known:
        if k.lower() == name.lower():
            if k in _plugins.readers:
                raise AttributeError(
                    f"ndd.readers has no attribute '{name}'; reader classes are PascalCase: "
                    f"use ndd.readers.{k}"
                )
            break
    else:
        raise AttributeError(f"module 'ndd.readers' has no attribute '{name}'")
    case = f" (and note reader classes are PascalCase: ndd.readers.{k})" if k != name else ""
    if any(r.distribution == "ndd-readers" for r in _plugins.records()):
        raise AttributeError(f"ndd.readers.{k} is not implemented by the installed readers plugin "
                             f"(ndd-readers) yet{case}")
    raise AttributeError(
        f"ndd.readers.{k} is provided by the `ndd-readers` package, which is not installed: "
        f"pip install ndd-readers{case}"
    )


def __dir__() -> list[str]:
    _plugins.ensure_loaded()
    return sorted(n for n in _plugins.readers if "." not in n)


class _ExperimentalReaders(ModuleType):
    """``ndd.experimental.readers``: the readers a plugin registers as ``experimental.readers.<Name>``."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        _plugins.ensure_loaded()
        cls = _plugins.readers.get(EXPERIMENTAL + name)
        if cls is None:
            raise AttributeError(f"module 'ndd.experimental.readers' has no attribute '{name}'")
        setattr(self, name, cls)
        return cls

    def __dir__(self) -> list[str]:
        _plugins.ensure_loaded()
        return sorted(n[len(EXPERIMENTAL):] for n in _plugins.readers if n.startswith(EXPERIMENTAL))


def experimental_readers() -> ModuleType:
    """The module ``ndd.experimental.readers`` (created once, put in ``sys.modules``)."""
    mod = sys.modules.get("ndd.experimental.readers")
    if not isinstance(mod, _ExperimentalReaders):
        mod = sys.modules["ndd.experimental.readers"] = _ExperimentalReaders("ndd.experimental.readers")
    return mod
