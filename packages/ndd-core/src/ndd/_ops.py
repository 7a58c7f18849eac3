"""Public operator functions generated from schemas, and the op namespaces."""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import _dispatch, _plugins
from ._schema import OpSchema

_functions: dict[str, Callable] = {}


def _signature(schema: OpSchema) -> inspect.Signature:
    P = inspect.Parameter
    params = []
    for i, name in enumerate(schema.inputs):
        default = P.empty if i < schema.min_inputs else None
        params.append(P(name, P.POSITIONAL_ONLY, default=default))
    if schema.variadic:
        params.append(P("inputs", P.VAR_POSITIONAL))
    params.append(P("batch_size", P.KEYWORD_ONLY, default=None))
    params.append(P("device", P.KEYWORD_ONLY, default=None))
    for name in (*schema.args, *schema.deprecated):
        params.append(P(name, P.KEYWORD_ONLY, default=None))
    if schema.random:
        params.append(P("rng", P.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


def _docstring(schema: OpSchema) -> str:
    lines = [schema.doc or f"The `{schema.name}` operator.", "", "Keyword arguments (schema defaults):"]
    for name, a in schema.args.items():
        star = "*" if a.per_sample else ""
        req = " (required)" if a.required else f" = {a.default!r}"
        lines.append(f"  {name}{star}: {a.kind}{req}{' - ' + a.doc if a.doc else ''}")
    for name, new in schema.deprecated.items():
        lines.append(f"  {name}: deprecated, " + (f"alias of {new}" if new else "no longer used"))
    lines.append("  (* accepts a Batch with one value per sample)")
    return "\n".join(lines)


def op_function(schema: OpSchema) -> Callable:
    """The public function for an operator (one per schema, cached)."""
    fn = _functions.get(schema.name)
    if fn is None:
        call = _dispatch.call

        def fn(*inputs: Any, **kwargs: Any) -> Any:
            return call(schema, inputs, kwargs)

        fn.__name__ = schema.short_name
        fn.__qualname__ = schema.short_name
        fn.__module__ = "ndd." + schema.module if schema.module else "ndd"
        fn.__doc__ = _docstring(schema)
        fn.__signature__ = _signature(schema)
        fn._ndd_schema = schema
        _functions[schema.name] = fn
    return fn


def resolve(module: str, name: str) -> Callable | None:
    """The function for ``ndd.<module>.<name>``; None if no such operator is declared.

    A declared operator with no kernel installed raises AttributeError naming the
    package that provides it.
    """
    _plugins.ensure_loaded()
    schema = _plugins.schemas.get(f"{module}.{name}" if module else name)
    if schema is None or schema.internal:
        return None
    if not schema.kernels:
        raise AttributeError(_dispatch._missing_message(schema))
    return op_function(schema)


def module_names(module: str) -> list[str]:
    _plugins.ensure_loaded()
    prefix = module + "." if module else ""
    out = []
    for name, s in _plugins.schemas.items():
        if s.internal or not s.kernels or not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        out.append(rest.partition(".")[0])
    return sorted(set(out))


def submodules(module: str) -> set[str]:
    _plugins.ensure_loaded()
    prefix = module + "." if module else ""
    return {n[len(prefix):].split(".")[0] for n, s in _plugins.schemas.items()
            if n.startswith(prefix) and "." in n[len(prefix):]}


class OpModule(ModuleType):
    """A namespace such as ``ndd.decoders`` whose operators come from plugins."""

    def __init__(self, path: str) -> None:
        super().__init__("ndd." + path)
        self._ndd_path = path
        self.__doc__ = f"Operators under ndd.{path} (provided by plugins)."

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        fn = resolve(self._ndd_path, name)
        if fn is None:
            if name in submodules(self._ndd_path):
                return get_module(f"{self._ndd_path}.{name}")
            raise AttributeError(f"module 'ndd.{self._ndd_path}' has no attribute '{name}'")
        setattr(self, name, fn)
        return fn

    def __dir__(self) -> list[str]:
        names = module_names(self._ndd_path)
        return sorted([*names, "readers"]) if self._ndd_path == "experimental" else names


_modules: dict[str, ModuleType] = {}


def get_module(path: str) -> ModuleType:
    """The op namespace ``ndd.<path>`` (created once and put in ``sys.modules``)."""
    mod = _modules.get(path)
    if mod is None:
        mod = _modules[path] = OpModule(path)
        sys.modules["ndd." + path] = mod
    return mod


def module_getattr(path: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving operators under ``ndd.<path>``."""

    def __getattr__(name: str) -> Any:
        fn = resolve(path, name)
        if fn is None:
            raise AttributeError(f"module 'ndd.{path}' has no attribute '{name}'")
        setattr(sys.modules["ndd." + path], name, fn)
        return fn

    return __getattr__


class _ExtensionLoader(importlib.abc.Loader):
    def __init__(self, name: str, sub: str = "") -> None:
        self.name, self.sub = name, sub

    def create_module(self, spec: Any) -> ModuleType:
        ext = _plugins.extension(self.name)
        return importlib.import_module(f"{ext.__name__}.{self.sub}") if self.sub else ext

    def exec_module(self, module: ModuleType) -> None:
        pass


class ExtensionFinder(importlib.abc.MetaPathFinder):
    """Makes ``import ndd.capture`` find the module of the ``capture`` extension (last on
    ``sys.meta_path``: ndd's own subpackages come first)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not fullname.startswith("ndd.") or fullname.count(".") != 1:
            return None
        name = fullname[4:]
        if name not in _plugins.KNOWN_EXTENSIONS and not _plugins.has_extension(name):
            return None
        return importlib.util.spec_from_loader(fullname, _ExtensionLoader(name))


class ExtensionSubmoduleFinder(importlib.abc.MetaPathFinder):
    """Makes ``import ndd.capture._invariant`` give the extension's own submodule
    (``ndd_capture._invariant``), not a second copy loaded under the other name (first on
    ``sys.meta_path``, before the finder that would load that copy)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not fullname.startswith("ndd.") or fullname.count(".") < 2:
            return None
        name, _, sub = fullname[4:].partition(".")
        parent = sys.modules.get("ndd." + name)
        if parent is None or parent.__name__ == "ndd." + name:  # not an extension: ndd's own
            return None
        return importlib.util.spec_from_loader(fullname, _ExtensionLoader(name, sub))
