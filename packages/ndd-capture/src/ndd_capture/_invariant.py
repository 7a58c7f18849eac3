"""``ndd.capture.invariant``: a proxy that marks a value as promised-constant.

``invariant(value)`` returns an instance of a class generated once per wrapped type and
named ``_Invariant_<Type>``:

* For plain Python classes (whose only built-in base is ``object``) and for the
  immutable built-ins ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``tuple`` and
  ``frozenset`` (and their subclasses), the class is a real subclass of the wrapped type,
  so ``type(p).__mro__`` contains it and C code that reads the built-in payload sees the
  right value (the payload is copied at creation, which is safe because it is immutable).
* Every other type gets a generic proxy: types that cannot be subclassed (``bool``,
  ``NoneType``, enum classes with members, functions, methods, ...), mutable built-ins
  (``list``, ``dict``, ``set``, ``bytearray``: a subclass would carry an empty, stale
  payload that C code such as ``json`` reads directly), C extension types (NumPy arrays),
  and classes whose subclassing fails (``__slots__`` layout conflicts, metaclasses or
  ``__init_subclass__`` hooks that refuse). Its ``__class__`` reports the wrapped type, so
  ``isinstance(invariant(True), bool)`` still holds; ``type()`` shows the proxy.

Both kinds forward every special method the wrapped type defines and return plain
results: operators, comparisons, indexing, iteration, calls, conversions, ``len``,
``hash``, ``bool``, ``str``, ``repr``. Reading a non-dunder attribute returns the
attribute marked as invariant, with methods bound to the wrapped object rebound to the
proxy (so ``invariant(cfg).get_size()`` reads ``self.size`` through the proxy). Dunder
attributes are read from the wrapped object unmarked. Setting and deleting attributes act
on the wrapped object. ``copy``/``deepcopy``/``pickle`` give a marked copy of the wrapped
value. Identity, exact type, buffers and native layout are not preserved.
"""

from __future__ import annotations

import copy as _copy
import operator as _op
import types as _types
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["invariant", "is_invariant", "unwrap_invariant", "unwrap_invariants"]

_T = TypeVar("_T")
_SLOT = "_ndd_wrapped"
_get = object.__getattribute__
_set = object.__setattr__

# Binary operators: forward name -> function, reflected name -> function (called swapped).
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": _op.add, "sub": _op.sub, "mul": _op.mul, "matmul": _op.matmul,
    "truediv": _op.truediv, "floordiv": _op.floordiv, "mod": _op.mod, "divmod": divmod,
    "lshift": _op.lshift, "rshift": _op.rshift, "and": _op.and_, "or": _op.or_, "xor": _op.xor,
}  # fmt: skip
_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "add": _op.iadd, "sub": _op.isub, "mul": _op.imul, "matmul": _op.imatmul,
    "truediv": _op.itruediv, "floordiv": _op.ifloordiv, "mod": _op.imod, "pow": _op.ipow,
    "lshift": _op.ilshift, "rshift": _op.irshift, "and": _op.iand, "or": _op.ior, "xor": _op.ixor,
}  # fmt: skip
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "__eq__": _op.eq, "__ne__": _op.ne, "__lt__": _op.lt, "__le__": _op.le, "__gt__": _op.gt, "__ge__": _op.ge,
}  # fmt: skip

# Dunders that are never forwarded: object life cycle, attribute protocol, class-level
# hooks, descriptor protocol, pickling/copying (handled by the proxy itself), buffers.
_NOT_FORWARDED = frozenset(
    {
        "__new__", "__init__", "__del__", "__init_subclass__", "__subclasshook__",
        "__class_getitem__", "__class__", "__getattribute__", "__getattr__", "__setattr__",
        "__delattr__", "__dir__", "__get__", "__set__", "__delete__", "__set_name__",
        "__instancecheck__", "__subclasscheck__", "__mro_entries__", "__prepare__",
        "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__getnewargs__",
        "__getnewargs_ex__", "__copy__", "__deepcopy__", "__sizeof__", "__buffer__",
        "__release_buffer__",
    }
)  # fmt: skip
# Built-in bases whose payload is immutable and can be copied into the subclass instance.
_IMMUTABLE_BASES = (int, float, complex, str, bytes, tuple, frozenset)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


class _InvariantProxy:
    """Common base of every generated proxy class (the marker ``is_invariant`` tests)."""

    __slots__ = ()
    _ndd_own: frozenset[str] = frozenset()

    def __getattribute__(self, name: str) -> Any:
        wrapped = _get(self, _SLOT)
        if name[:2] == "__" and name[-2:] == "__":
            if name in type(self)._ndd_own:
                return _get(self, name)
            return getattr(wrapped, name)
        value = getattr(wrapped, name)
        if type(value) is _types.MethodType and value.__self__ is wrapped:
            value = _types.MethodType(value.__func__, self)
        return invariant(value)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(_get(self, _SLOT), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(_get(self, _SLOT), name)

    def __dir__(self) -> list[str]:
        return dir(_get(self, _SLOT))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return invariant, (_get(self, _SLOT),)

    def __reduce__(self) -> tuple[Any, ...]:
        return invariant, (_get(self, _SLOT),)

    def __copy__(self) -> Any:
        return invariant(_copy.copy(_get(self, _SLOT)))

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return invariant(_copy.deepcopy(_get(self, _SLOT), memo))


_BASE_OWN = frozenset(
    {
        "__class__",
        "__setattr__",
        "__delattr__",
        "__dir__",
        "__reduce_ex__",
        "__reduce__",
        "__copy__",
        "__deepcopy__",
    }
)


def _forwarder(name: str, impl: Any) -> Callable[..., Any]:
    """A method named ``name`` that applies the wrapped type's special method to the wrapped value."""
    short = name[2:-2]
    if name in _COMPARE or short in _BINARY:
        fn = _COMPARE.get(name) or _BINARY[short]

        def method(self: Any, other: Any) -> Any:
            return fn(_get(self, _SLOT), other)

    elif short[:1] == "r" and short[1:] in _BINARY or short == "rpow":
        fn = _BINARY.get(short[1:], pow)

        def method(self: Any, other: Any, mod: Any = None) -> Any:  # type: ignore[misc]
            return fn(other, _get(self, _SLOT))

    elif short[:1] == "i" and short[1:] in _INPLACE:
        fn = _INPLACE[short[1:]]

        def method(self: Any, other: Any) -> Any:
            return fn(_get(self, _SLOT), other)

    elif name == "__pow__":

        def method(self: Any, other: Any, mod: Any = None) -> Any:  # type: ignore[misc]
            wrapped = _get(self, _SLOT)
            return wrapped**other if mod is None else pow(wrapped, other, mod)

    else:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return impl(_get(self, _SLOT), *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    return method


def _namespace(cls: type) -> dict[str, Any]:
    """Forwarding methods for every callable special method of ``cls``."""
    ns: dict[str, Any] = {}
    names = {name for klass in cls.__mro__ for name in vars(klass)}  # dir() may be customised
    for name in sorted(names):
        if name[:2] != "__" or name[-2:] != "__" or name in _NOT_FORWARDED:
            continue
        impl = getattr(cls, name, None)
        if callable(impl):
            ns[name] = _forwarder(name, impl)
    ns["_ndd_own"] = _BASE_OWN | ns.keys()
    return ns


def _builtin_base(cls: type) -> type:
    return next(c for c in cls.__mro__ if not c.__flags__ & _HEAPTYPE)


def _subclass_factory(cls: type) -> tuple[type, Callable[[type, Any], Any]] | None:
    """A generated subclass of ``cls`` and its instance factory, or None when not applicable."""
    base = _builtin_base(cls)
    if base is not object and not issubclass(base, _IMMUTABLE_BASES):
        return None
    name = f"_Invariant_{cls.__name__}"
    ns = _namespace(cls)
    try:
        try:
            proxy_cls = type(name, (_InvariantProxy, cls), {**ns, "__slots__": (_SLOT,)})
        except TypeError:  # variable-size built-ins (int, str, tuple, bytes) refuse slots
            proxy_cls = type(name, (_InvariantProxy, cls), ns)
    except Exception:  # final classes, enums with members, layout conflicts, refusing hooks
        return None
    if base is object:
        return proxy_cls, lambda c, value: object.__new__(c)
    return proxy_cls, base.__new__


def _generic_factory(cls: type) -> tuple[type, Callable[[type, Any], Any]]:
    ns = _namespace(cls)
    ns["__slots__"] = (_SLOT,)
    ns["__class__"] = property(lambda self: type(_get(self, _SLOT)))
    return type(f"_Invariant_{cls.__name__}", (_InvariantProxy,), ns), lambda c, value: object.__new__(c)


_FACTORIES: dict[type, tuple[type, Callable[[type, Any], Any]]] = {}


def invariant(value: _T) -> _T:
    """Mark ``value`` as invariant for capture mode (an unchecked promise that it will not change).

    Returns a proxy for ``value``, or ``value`` itself when it already is one.
    """
    if isinstance(value, _InvariantProxy):
        return value
    cls = type(value)
    entry = _FACTORIES.get(cls)
    if entry is None:
        entry = _FACTORIES[cls] = _subclass_factory(cls) or _generic_factory(cls)
    proxy_cls, make = entry
    try:
        proxy = make(proxy_cls, value)
    except Exception:  # a subclass payload that cannot be built from this value
        proxy_cls, make = _FACTORIES[cls] = _generic_factory(cls)
        proxy = make(proxy_cls, value)
    _set(proxy, _SLOT, value)
    return proxy  # type: ignore[no-any-return]


def is_invariant(x: Any) -> bool:
    """Whether ``x`` is an invariant proxy."""
    return isinstance(x, _InvariantProxy)


def unwrap_invariant(x: Any) -> Any:
    """The value wrapped by an invariant proxy, or ``x`` itself when it is not one."""
    return _get(x, _SLOT) if isinstance(x, _InvariantProxy) else x


def unwrap_invariants(x: Any) -> Any:
    """``x`` with invariant proxies removed, recursively inside exact lists, tuples and dicts.

    Returns the same container object when nothing inside it was marked; other objects
    (including subclasses of list, tuple and dict) are never iterated.
    """
    if isinstance(x, _InvariantProxy):
        x = _get(x, _SLOT)
    t = type(x)
    if t is list or t is tuple:
        for i, item in enumerate(x):
            plain = unwrap_invariants(item)
            if plain is not item:
                out = [*x[:i], plain, *map(unwrap_invariants, x[i + 1 :])]
                return out if t is list else tuple(out)
        return x
    if t is dict:
        for key, item in x.items():
            if unwrap_invariants(item) is not item or unwrap_invariants(key) is not key:
                return {unwrap_invariants(k): unwrap_invariants(v) for k, v in x.items()}
        return x
    return x
