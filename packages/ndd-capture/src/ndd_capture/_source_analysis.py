"""Constant proofs for capture mode, by reading the caller's source with the stdlib ``ast``.

DALI uses libcst; ``ast`` is enough here (its node positions are UTF-8 byte columns, the
same unit as PEP 657 ``co_positions``) and keeps ndd-capture free of extra dependencies.

``analyze_call(frame, lasti)`` finds the call expression that ``frame`` is executing at
instruction offset ``lasti`` and proves, argument by argument, whether its value is
constant across iterations. The rules (see ``REASON_CODES`` for every rejection):

* literals, unary +/-, binary operations and inline list/tuple/set displays of constants;
* a local name bound exactly once in its function (every binding form counts, including
  ``nonlocal`` rebinding from nested functions and ``+=``) to a constant expression, whose
  runtime value is immutable (numbers, str, bytes, None, enum members, ndd DType/Device,
  and tuples/frozensets of these);
* an attribute chain rooted at a module (or an ndd enum class) that ends at an ndd
  constant, resolved with ``inspect.getattr_static`` so no user code runs;
* anything marked with ``invariant``: a name or attribute chain whose value is a proxy, or
  a call of ``invariant`` itself (marked parts count as constant inside expressions);
* a parameter whose argument at the caller's call site is provably constant (or which
  takes a literal, immutable default), recursively through the callers. The callee is
  checked: the caller's call must resolve statically to the very code object running
  (functions, bound methods, classmethods, staticmethods, class construction through
  ``__init__``, instances with ``__call__``); ``functools.partial``, wrappers passing
  ``*args``, callables returned inline and callables stored as instance attributes are
  rejected. ``ArgProof.depth`` counts the caller frames the proof relied on.
* closure variables are resolved in the owning function: a single constant assignment
  is accepted whether or not the owning call is still running (the cell is then frozen,
  and its runtime value must be immutable); a closure over a *parameter* needs the owning
  call to be live on the stack (found through ``f_back``, checked by cell identity).

On Python 3.11+ the call is located exactly with ``co_positions``; on 3.10 only the line
is known, so a line holding more than one call gives up (``NDD-C003``). Source that
cannot be read (REPL, ``exec``) gives ``NDD-C001``. The proofs of one analysis are lazy:
call ``positional``/``keyword`` while ``frame`` is still executing.
"""

from __future__ import annotations

import ast
import enum
import functools
import inspect
import itertools
import linecache
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any

from ndd._threads import AST_LOCK

__all__ = ["REASON_CODES", "ArgProof", "CallAnalysis", "analyze_call"]

REASON_CODES: dict[str, tuple[str, str]] = {
    "NDD-C001": ("source unavailable",
                 "run the loop from a source file (not the REPL or exec'd code), or wrap the value "
                 "with ndd.capture.invariant()"),
    "NDD-C002": ("call not found in the source",
                 "the running code does not match its source file (edited after import?) or the "
                 "call is made implicitly (property, decorator); call the operator directly"),
    "NDD-C003": ("several calls on one line (Python 3.10)",
                 "put the operator call on a line of its own, or use Python 3.11+"),
    "NDD-C004": ("*args or **kwargs at a call",
                 "pass the arguments explicitly, by position or keyword"),
    "NDD-C010": ("module-level or builtin name",
                 "assign the value to a local name inside the function, or wrap it with "
                 "ndd.capture.invariant()"),
    "NDD-C011": ("imported name",
                 "write the value as a literal or local constant, or wrap it with "
                 "ndd.capture.invariant()"),
    "NDD-C012": ("assigned more than once",
                 "assign it once, or wrap the value with ndd.capture.invariant()"),
    "NDD-C013": ("mutable value",
                 "use an immutable value (a tuple instead of a list), or wrap it with "
                 "ndd.capture.invariant()"),
    "NDD-C014": ("loop or comprehension target",
                 "the value changes with the iteration; wrap it with ndd.capture.invariant() if "
                 "it really is the same on every step"),
    "NDD-C015": ("starred or unpacked assignment",
                 "assign the name directly from a literal, e.g. `a, b = 1, 2`"),
    "NDD-C016": ("not a plain assignment",
                 "bind the name with a plain `name = <constant>` assignment"),
    "NDD-C017": ("value returned by a function call",
                 "write the value as a literal or constant expression, or wrap the result with "
                 "ndd.capture.invariant()"),
    "NDD-C018": ("attribute of a user object",
                 "read it into a local constant, or mark the object with ndd.capture.invariant() "
                 "(the marker propagates through attribute access)"),
    "NDD-C019": ("unsupported expression",
                 "use literals, names, + - * / ... and inline tuples/lists, or wrap the value "
                 "with ndd.capture.invariant()"),
    "NDD-C020": ("*args, **kwargs or self parameter",
                 "declare a named parameter and pass the value to it explicitly"),
    "NDD-C021": ("parameter reached through an indirect call",
                 "call the function directly by name or as a method (not through "
                 "functools.partial, a wrapper, a callable returned inline or stored on an "
                 "instance)"),
    "NDD-C022": ("parameter default is not a literal constant",
                 "use a literal immutable default (e.g. a tuple), or pass the argument explicitly"),
    "NDD-C023": ("closure variable cannot be proven",
                 "pass the value as an argument instead of capturing it in a closure, or wrap it "
                 "with ndd.capture.invariant()"),
}  # fmt: skip

_MAX_LEVELS = 32  # caller frames followed for parameter proofs
_HAS_POSITIONS = sys.version_info >= (3, 11)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (*_FUNCS, ast.ClassDef, ast.Module, *_COMPS)
_IMMUTABLE_TYPES = frozenset({int, float, complex, bool, str, bytes, type(None), type(...)})
_NDD_CONST_TYPES: tuple[type, ...] | None = None


@dataclass(frozen=True)
class ArgProof:
    """Whether one argument is provably constant, and why not."""

    constant: bool
    code: str | None = None  # a key of REASON_CODES when not constant
    reason: str | None = None  # plain words naming the name and the rule it broke
    depth: int = 0  # caller frames above the call-site frame the proof relied on


_YES = ArgProof(True)


def _no(code: str, reason: str) -> ArgProof:
    return ArgProof(False, code, reason)


@dataclass(frozen=True)
class CallAnalysis:
    """The analysis of one call; ``code`` is set when no argument can be proven at all."""

    code: str | None
    reason: str | None
    _call: ast.Call | None = field(default=None, repr=False, compare=False)
    _ctx: _Ctx | None = field(default=None, repr=False, compare=False)
    _cache: dict[int | str, ArgProof] = field(default_factory=dict, repr=False, compare=False)

    def positional(self, i: int) -> ArgProof:
        """The proof for positional argument ``i`` of the call."""
        if self._call is None or self._ctx is None:
            return ArgProof(False, self.code, self.reason)
        if i not in self._cache:
            if 0 <= i < len(self._call.args):
                self._cache[i] = self._ctx.prove(self._call.args[i])
            else:
                self._cache[i] = _no("NDD-C002", f"the call in the source has no positional argument {i}")
        return self._cache[i]

    def release(self) -> None:
        """Give back the locals snapshots the proofs took; call when no more proofs are needed."""
        if self._ctx is not None:
            _release_snapshots(self._ctx.snapshots)

    def keyword(self, name: str) -> ArgProof:
        """The proof for keyword argument ``name`` of the call."""
        if self._call is None or self._ctx is None:
            return ArgProof(False, self.code, self.reason)
        if name not in self._cache:
            node = next((k.value for k in self._call.keywords if k.arg == name), None)
            if node is None:
                self._cache[name] = _no(
                    "NDD-C002", f"the call in the source has no keyword argument {name!r}"
                )
            else:
                self._cache[name] = self._ctx.prove(node)
        return self._cache[name]


def analyze_call(frame: types.FrameType, lasti: int) -> CallAnalysis:
    """Analyse the call expression executing at instruction offset ``lasti`` of ``frame``."""
    located = _locate(frame, lasti)
    if isinstance(located, ArgProof):
        return CallAnalysis(located.code, located.reason)
    module, call = located
    return CallAnalysis(None, None, call, _Ctx(module, frame, 0, snapshots={}))


# --------------------------------------------------------------------------- source index


@dataclass
class _Binding:
    kind: str  # param, assign, augassign, for, star, unpack, unpack_rhs, import, with, ...
    line: int
    value: ast.expr | None = None


@dataclass
class _ScopeInfo:
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    children: list[ast.AST] = field(default_factory=list)  # nested def/class scopes

    def add(self, name: str, binding: _Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)


_KIND_WORDS = {
    "with": "a with statement", "except": "an except clause", "def": "a def statement",
    "class": "a class statement", "del": "a del statement", "match": "a match pattern",
    "augassign": "an augmented assignment", "type": "a type statement", "annotation": "an annotation only",
}  # fmt: skip


class _Module:
    """A parsed source file with its call positions, parents and per-scope bindings."""

    def __init__(self, filename: str, lines: list[str], tree: ast.Module) -> None:
        self.filename = filename
        self.lines = lines
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {}
        self.calls: dict[tuple[int, int, int, int], ast.Call] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Call):
                span = (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)
                self.calls[span] = node  # type: ignore[index]
        self._scopes: dict[ast.AST, _ScopeInfo] = {}

    def calls_on_line(self, line: int) -> list[ast.Call]:
        """Calls whose CALL instruction Python 3.10 attributes to ``line``.

        That is the line where the call starts, or for a method call the line where the
        method name ends, when a method call spans lines.
        """
        return [
            c for c in self.calls.values()
            if c.lineno == line or isinstance(c.func, ast.Attribute) and c.func.end_lineno == line
        ]  # fmt: skip

    def scope_chain(self, node: ast.AST) -> list[ast.AST]:
        """The scopes in which ``node`` is evaluated, innermost first."""
        chain: list[ast.AST] = []
        child, parent = node, self.parents.get(node)
        while parent is not None:
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if any(child is s for s in parent.body):
                    chain.append(parent)
            elif isinstance(parent, ast.Lambda):
                if child is parent.body:
                    chain.append(parent)
            elif isinstance(parent, _COMPS):
                chain.append(parent)
            elif isinstance(parent, ast.comprehension):
                comp = self.parents[parent]
                if parent is comp.generators[0] and child is parent.iter:  # type: ignore[attr-defined]
                    child, parent = comp, self.parents.get(comp)  # skip the comprehension scope
                    continue
            child, parent = parent, self.parents.get(parent)
        chain.append(self.tree)
        return chain

    def info(self, scope: ast.AST) -> _ScopeInfo:
        if scope not in self._scopes:
            self._scopes[scope] = _collect(scope)
        return self._scopes[scope]

    def all_bindings(self, scope: ast.AST, name: str) -> list[_Binding]:
        """Bindings of ``name`` in ``scope`` plus ``nonlocal`` rebindings in nested functions."""
        out = list(self.info(scope).bindings.get(name, ()))
        pending = list(self.info(scope).children)
        while pending:
            child = pending.pop()
            info = self.info(child)
            if isinstance(child, ast.ClassDef) or name not in info.bindings or name in info.nonlocals:
                if name in info.nonlocals:
                    out += [_Binding("nonlocal", b.line, b.value) for b in info.bindings.get(name, ())]
                if name not in info.globals:
                    pending += info.children
        return out


def _collect(scope: ast.AST) -> _ScopeInfo:
    """The bindings made directly in ``scope`` (nested scopes are only listed as children)."""
    info = _ScopeInfo()
    if isinstance(scope, _FUNCS):
        a = scope.args
        for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            info.add(arg.arg, _Binding("param", arg.lineno))
        for arg in (a.vararg, a.kwarg):
            if arg is not None:
                info.add(arg.arg, _Binding("varparam", arg.lineno))
        body: list[ast.AST] = [scope.body] if isinstance(scope, ast.Lambda) else list(scope.body)
    elif isinstance(scope, _COMPS):
        for gen in scope.generators:
            for name in _target_names(gen.target):
                info.add(name, _Binding("comprehension", gen.target.lineno))
        return info
    else:
        body = list(scope.body)  # type: ignore[attr-defined]

    def visit(node: ast.AST) -> None:
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            info.add(node.name, _Binding("class" if isinstance(node, ast.ClassDef) else "def", line))
            info.children.append(node)
            for sub in node.decorator_list:
                visit(sub)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, _COMPS):  # targets are the comprehension's; walrus binds here
            for sub in ast.walk(node):
                if isinstance(sub, ast.NamedExpr):
                    info.add(sub.target.id, _Binding("assign", sub.lineno, sub.value))
            return
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _bind_target(info, target, node.value, line)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            info.add(node.target.id, _Binding("assign" if node.value else "annotation", line, node.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            info.add(node.target.id, _Binding("augassign", line))
        elif isinstance(node, ast.NamedExpr):
            info.add(node.target.id, _Binding("assign", line, node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            for name in _target_names(node.target):
                info.add(name, _Binding("for", line))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            for name in _target_names(node.optional_vars):
                info.add(name, _Binding("with", node.optional_vars.lineno))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            info.add(node.name, _Binding("except", line))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                info.add((alias.asname or alias.name).partition(".")[0], _Binding("import", line))
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                for name in _target_names(target):
                    info.add(name, _Binding("del", line))
        elif isinstance(node, ast.Global):
            info.globals.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            info.nonlocals.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            info.add(node.name, _Binding("match", line))
        elif isinstance(node, ast.MatchMapping) and node.rest:
            info.add(node.rest, _Binding("match", line))
        elif type(node).__name__ == "TypeAlias":  # Python 3.12 `type X = ...`
            info.add(node.name.id, _Binding("type", line))  # type: ignore[attr-defined]
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in body:
        visit(node)
    return info


def _target_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _bind_target(info: _ScopeInfo, target: ast.expr, value: ast.expr | None, line: int) -> None:
    """Record the names bound by ``target = value``, pairing unpacked names with literal parts."""
    if isinstance(target, ast.Name):
        info.add(
            target.id, _Binding("assign", line, value) if value is not None else _Binding("unpack", line)
        )
    elif isinstance(target, ast.Starred):
        for name in _target_names(target):
            info.add(name, _Binding("star", line))
    elif isinstance(target, (ast.Tuple, ast.List)):
        elts = target.elts
        star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
        parts: list[ast.expr | None] = [None] * len(elts)
        if isinstance(value, (ast.Tuple, ast.List)):
            if any(isinstance(v, ast.Starred) for v in value.elts):
                for name in _target_names(target):
                    info.add(name, _Binding("unpack_rhs", line))
                return
            n = len(value.elts)
            if star is None and n == len(elts):
                parts = list(value.elts)
            elif star is not None and n >= len(elts) - 1:
                parts = [*value.elts[:star], None, *value.elts[n - (len(elts) - star - 1) :]]
        for elt, part in zip(elts, parts):
            _bind_target(info, elt, part, line)


_MODULES: dict[str, _Module] = {}


def _module_for(frame: types.FrameType) -> _Module | ArgProof:
    filename = frame.f_code.co_filename
    lines = linecache.getlines(filename, frame.f_globals)
    if not lines:
        return _no("NDD-C001", f"the source of {filename} is not available (REPL or exec'd code)")
    module = _MODULES.get(filename)
    if module is None or module.lines is not lines:
        try:
            with AST_LOCK:
                tree = ast.parse("".join(lines), filename)
        except (SyntaxError, ValueError):
            return _no("NDD-C001", f"the source of {filename} cannot be parsed")
        module = _MODULES[filename] = _Module(filename, lines, tree)
    return module


def _locate(frame: types.FrameType, lasti: int) -> tuple[_Module, ast.Call] | ArgProof:
    """The call node executing at ``lasti`` in ``frame``."""
    module = _module_for(frame)
    if isinstance(module, ArgProof):
        return module
    code = frame.f_code
    call: ast.Call | None = None
    line: int | None = None
    if _HAS_POSITIONS:
        pos = next(itertools.islice(code.co_positions(), lasti // 2, None), None)
        if pos is not None and None not in pos:
            call = module.calls.get(pos)  # type: ignore[arg-type]
            if call is None:
                return _no(
                    "NDD-C002", f"no call expression at {_where(module, pos[0])} matches the running code"
                )
        elif pos is not None:
            line = pos[0]
    if call is None:
        if line is None:
            line = next((ln for start, end, ln in code.co_lines() if start <= lasti < end), None)
        if line is None:
            return _no("NDD-C002", f"the running instruction of {code.co_name!r} has no line number")
        candidates = module.calls_on_line(line)
        if not candidates:
            return _no("NDD-C002", f"no call expression found at {_where(module, line)}")
        if len(candidates) > 1:
            return _no(
                "NDD-C003",
                f"{_where(module, line)} holds {len(candidates)} calls, which cannot be told "
                f"apart on Python {sys.version_info[0]}.{sys.version_info[1]}",
            )
        call = candidates[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return _no("NDD-C004", f"the call at {_where(module, call.lineno)} passes *args or **kwargs")
    return module, call


def _where(module: _Module, line: int) -> str:
    return f"{os.path.basename(module.filename)}:{line}"


def _lines(bindings: list[_Binding]) -> str:
    nums = sorted({b.line for b in bindings})
    if len(nums) == 1:
        return f"line {nums[0]}"
    return "lines " + ", ".join(map(str, nums[:-1])) + f" and {nums[-1]}"


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- runtime values


def _ndd_const_types() -> tuple[type, ...]:
    global _NDD_CONST_TYPES
    if _NDD_CONST_TYPES is None:
        import ndd
        from ndd import types as ndd_types

        _NDD_CONST_TYPES = (ndd.DType, ndd.Device, ndd_types.DALIDataType, ndd_types.DALIImageType,
                            ndd_types.DALIInterpType)  # fmt: skip
    return _NDD_CONST_TYPES


def _is_ndd_constant(value: Any) -> bool:
    return isinstance(value, _ndd_const_types())


def _is_immutable(value: Any, depth: int = 0) -> bool:
    from ._invariant import is_invariant

    t = type(value)
    if t in _IMMUTABLE_TYPES or isinstance(value, enum.Enum) or is_invariant(value):
        return True
    if (t is tuple or t is frozenset) and depth < 16:
        return all(_is_immutable(v, depth + 1) for v in value)
    return _is_ndd_constant(value)


def _mutable_reason(name: str, value: Any) -> str:
    t = type(value).__name__
    fix = {"list": "; write a tuple instead", "set": "; write a frozenset instead", "dict": ""}.get(t, "")
    if isinstance(value, (tuple, frozenset)):
        return f"local name {name!r} is bound to a {t} holding mutable items"
    return f"local name {name!r} is bound to a {t}{fix}"


_MISSING = object()


def _is_invariant_fn(value: Any) -> bool:
    from ._invariant import invariant

    return value is invariant


# Python 3.10-3.12 keep what ``frame.f_locals`` returns on the frame: a snapshot dict of
# the function's locals that lives until the function returns or the next read refreshes
# it. Left there, one traced step's locals (its batches, a loop's iterator after ``del``)
# would stay alive for the rest of the function. The snapshot is emptied after the proofs
# unless someone else holds it (``locals()`` kept in a variable, a debugger); a later
# ``locals()`` or ``f_locals`` fills it again. 3.13's f_locals is a view, with no copy.
_SNAPSHOTS_STAY = sys.version_info >= (3, 13) or sys.implementation.name != "cpython"


def _release_snapshots(snapshots: dict[int, tuple[types.FrameType, Any]]) -> None:
    while snapshots:
        frame, ns = snapshots.popitem()[1]
        optimized = frame.f_code.co_flags & inspect.CO_OPTIMIZED  # module and class bodies: real namespaces
        # holders: the frame, ``ns`` and getrefcount's argument
        if not _SNAPSHOTS_STAY and optimized and sys.getrefcount(ns) == 3:
            ns.clear()
        del frame, ns


# --------------------------------------------------------------------------- proofs


class _Ctx:
    """Proofs evaluated in one frame (``frame`` None: structure only, no runtime values)."""

    def __init__(self, module: _Module, frame: types.FrameType | None, level: int,
                 static_globals: dict[str, Any] | None = None,
                 snapshots: dict[int, tuple[types.FrameType, Any]] | None = None) -> None:  # fmt: skip
        self.module = module
        self.frame = frame
        self.level = level  # f_back steps from the call-site frame to ``frame``
        self.static_globals = static_globals  # set for default values: names are not allowed
        # id(frame) -> (frame, frame.f_locals), shared by the contexts of one analysis
        self.snapshots: dict[int, tuple[types.FrameType, Any]] = {} if snapshots is None else snapshots
        self._visiting: set[tuple[int, str]] = set()

    # runtime lookups -----------------------------------------------------------------
    def lookup(self, name: str) -> Any:
        """The runtime value of ``name`` as the frame sees it (locals, globals, builtins)."""
        if self.frame is None:
            if self.static_globals is not None:
                return self.static_globals.get(name, _MISSING)
            return _MISSING
        entry = self.snapshots.get(id(self.frame))
        if entry is None:
            entry = self.snapshots[id(self.frame)] = (self.frame, self.frame.f_locals)
        for ns in (entry[1], self.frame.f_globals, self.frame.f_builtins):
            if name in ns:
                return ns[name]
        return _MISSING

    def owner(self, scope: ast.AST, name: str) -> tuple[_Ctx | None, Any]:
        """The context of the live frame running ``scope``, and ``name``'s value seen from here."""
        if self.frame is None:
            return None, _MISSING
        here = self.frame.f_code
        if _code_is(here, scope, self.module):
            return self, self.lookup(name)
        seen = self.lookup(name) if name in here.co_freevars else _MISSING
        frame, level = self.frame.f_back, self.level + 1
        while frame is not None and level - self.level <= _MAX_LEVELS:
            if _code_is(frame.f_code, scope, self.module):
                ctx = _Ctx(self.module, frame, level, snapshots=self.snapshots)
                if seen is _MISSING or ctx.lookup(name) is seen:
                    return ctx, seen
                break
            frame, level = frame.f_back, level + 1
        return None, seen

    # expressions ---------------------------------------------------------------------
    def prove(self, node: ast.expr) -> ArgProof:
        if isinstance(node, ast.Constant):
            return _YES
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            return self.prove(node.operand)
        if isinstance(node, ast.BinOp):
            return _all(self.prove(node.left), lambda: self.prove(node.right))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            proof = _YES
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    return _no("NDD-C015", f"the display '{_text(node)}' unpacks with *")
                proof = _all(proof, functools.partial(self.prove, elt))
            return proof
        if isinstance(node, ast.Name):
            return self.prove_name(node)
        if isinstance(node, ast.NamedExpr):
            return self.prove(node.value)
        if isinstance(node, ast.Attribute):
            return self.prove_attribute(node)
        if isinstance(node, ast.Call):
            if _is_invariant_fn(self.resolve_static(node.func)):
                return _YES
            return _no("NDD-C017", f"'{_text(node)}' is the value returned by a function call")
        return _no(
            "NDD-C019", f"'{_text(node)}' ({type(node).__name__}) is not a recognised constant expression"
        )

    def resolve_static(self, node: ast.expr) -> Any:
        """The value of a name or of an attribute chain on a module/ndd class, without running user code."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve_static(node.value)
            if isinstance(base, types.ModuleType) or _is_ndd_class(base):
                return _getattr_static(base, node.attr)
        return _MISSING

    def prove_attribute(self, node: ast.Attribute) -> ArgProof:
        from ._invariant import is_invariant

        attrs: list[str] = []
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            attrs.append(root.attr)
            root = root.value
        attrs.reverse()
        dunder = any(a[:2] == "__" and a[-2:] == "__" for a in attrs)
        if isinstance(root, ast.Call):
            if not dunder and _is_invariant_fn(self.resolve_static(root.func)):
                return _YES
            return _no(
                "NDD-C017", f"'{_text(node)}' reads an attribute of a value returned by a function call"
            )
        if not isinstance(root, ast.Name):
            return _no("NDD-C019", f"'{_text(node)}' is not a recognised constant expression")
        value = self.lookup(root.id)
        static_root = True  # every object on the chain so far is a module or an ndd class
        for attr in attrs:
            if value is _MISSING:
                break
            if is_invariant(value):
                return _YES if not dunder else _no("NDD-C018", f"'{_text(node)}' reads a special attribute")
            static_root = static_root and (isinstance(value, types.ModuleType) or _is_ndd_class(value))
            value = _getattr_static(value, attr)
        if value is not _MISSING and (
            is_invariant(value) and not dunder or static_root and _is_ndd_constant(value)
        ):
            return _YES
        if static_root and value is not _MISSING:
            return _no(
                "NDD-C018",
                f"'{_text(node)}' is not an ndd constant (only DType, Device and the "
                "DALIDataType/DALIImageType/DALIInterpType members are)",
            )
        return _no("NDD-C018", f"'{_text(node)}' is an attribute of a user object")

    # names ---------------------------------------------------------------------------
    def prove_name(self, node: ast.Name) -> ArgProof:
        from ._invariant import is_invariant

        name = node.id
        if self.static_globals is not None:
            return _no("NDD-C022", f"the default value uses the name {name!r}")
        if is_invariant(self.lookup(name)):
            return _YES
        free = False
        for scope in self.module.scope_chain(node):
            if isinstance(scope, _COMPS):
                if name in self.module.info(scope).bindings:
                    return _no("NDD-C014", f"{name!r} is a comprehension target (line {scope.lineno})")
                continue
            if isinstance(scope, ast.ClassDef) and not free:
                return _no(
                    "NDD-C010", f"{name!r} is a class-level name (only names inside functions are proven)"
                )
            if isinstance(scope, (ast.Module, ast.ClassDef)):
                continue
            info = self.module.info(scope)
            if name in info.globals:
                break
            if name in info.nonlocals or name not in info.bindings:
                free = True
                continue
            return self.prove_local(name, scope, free)
        binding = self.module.info(self.module.tree).bindings.get(name)
        if binding and binding[0].kind == "import":
            return _no("NDD-C011", f"{name!r} is a name imported from a module (line {binding[0].line})")
        where = "module-level global" if binding else "global or builtin name"
        return _no("NDD-C010", f"{name!r} is a {where}; module-level names are never proven constant")

    def prove_local(self, name: str, scope: ast.AST, free: bool) -> ArgProof:
        bindings = self.module.all_bindings(scope, name)
        local = "closure variable" if free else "local name"
        if len(bindings) > 1:
            times = "twice" if len(bindings) == 2 else f"{len(bindings)} times"
            extra = " (including a nonlocal rebinding)" if any(b.kind == "nonlocal" for b in bindings) else ""
            return _no("NDD-C012", f"{local} {name!r} is assigned {times}{extra} ({_lines(bindings)})")
        b = bindings[0]
        if b.kind == "param":
            return self.prove_param(name, scope, free)
        if b.kind == "varparam":
            return _no("NDD-C020", f"parameter {name!r} collects *args or **kwargs (line {b.line})")
        if b.kind in ("for", "comprehension"):
            return _no("NDD-C014", f"{local} {name!r} is a for-loop target (line {b.line})")
        if b.kind == "star":
            return _no("NDD-C015", f"{local} {name!r} is a starred assignment target (line {b.line})")
        if b.kind == "unpack":
            return _no("NDD-C015", f"{local} {name!r} is unpacked from a non-literal value (line {b.line})")
        if b.kind == "unpack_rhs":
            return _no(
                "NDD-C015",
                f"{local} {name!r} is assigned from a right-hand side that unpacks with * (line {b.line})",
            )
        if b.kind == "import":
            return _no("NDD-C011", f"{local} {name!r} is imported from a module (line {b.line})")
        if b.kind != "assign" or b.value is None:
            return _no(
                "NDD-C016", f"{local} {name!r} is bound by {_KIND_WORDS.get(b.kind, b.kind)} (line {b.line})"
            )
        owner, value = self.owner(scope, name)
        if owner is not None:
            value = owner.lookup(name)
        if value is not _MISSING and not _is_immutable(value):
            return _no("NDD-C013", _mutable_reason(name, value).replace("local name", local, 1))
        if owner is None and free and value is _MISSING and self.frame is not None:
            return _no("NDD-C023", f"closure variable {name!r} cannot be read from this frame")
        key = (id(scope), name)
        if key in self._visiting:
            return _no("NDD-C019", f"{local} {name!r} is defined in terms of itself")
        ctx = owner or _Ctx(self.module, None, self.level)
        if ctx is not self:
            ctx._visiting.update(self._visiting)
        ctx._visiting.add(key)
        try:
            proof = ctx.prove(b.value)
        finally:
            ctx._visiting.discard(key)
        if proof.constant:
            return proof
        return ArgProof(False, proof.code, f"{local} {name!r} is assigned a non-constant value at line {b.line}: "
                                           f"{proof.reason}", proof.depth)  # fmt: skip

    # parameters ----------------------------------------------------------------------
    def prove_param(self, name: str, scope: ast.AST, free: bool) -> ArgProof:
        from ._invariant import is_invariant

        owner, _ = self.owner(scope, name)
        fname = getattr(scope, "name", "<lambda>")
        if owner is None or owner.frame is None:
            return _no("NDD-C023", f"{name!r} is a parameter of {fname!r}, whose call is no longer running")
        value = owner.lookup(name)
        if is_invariant(value):
            return _YES
        caller = owner.frame.f_back
        level = owner.level + 1
        if caller is None:
            return _no("NDD-C021", f"parameter {name!r} of {fname!r}: the caller cannot be found")
        if level > _MAX_LEVELS:
            return _no(
                "NDD-C021", f"parameter {name!r} of {fname!r}: more than {_MAX_LEVELS} callers to follow"
            )
        located = _locate(caller, caller.f_lasti)
        if isinstance(located, ArgProof):
            return ArgProof(False, located.code, f"parameter {name!r} of {fname!r}: {located.reason}", level)
        module, call = located
        cctx = _Ctx(module, caller, level, snapshots=self.snapshots)
        where = _where(module, call.lineno)
        shift = cctx.callee_shift(call.func, owner.frame.f_code)
        if isinstance(shift, str):
            return ArgProof(
                False, "NDD-C021", f"parameter {name!r} of {fname!r}: the call at {where} {shift}", level
            )
        code = owner.frame.f_code
        params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        index = params.index(name)
        expr: ast.expr | None = None
        if index < code.co_argcount:
            if index < shift:
                return _no("NDD-C020", f"parameter {name!r} of {fname!r} is the bound instance or class")
            if index - shift < len(call.args):
                expr = call.args[index - shift]
        if expr is None and index >= code.co_posonlyargcount:
            expr = next((k.value for k in call.keywords if k.arg == name), None)
        if expr is None:
            return self.prove_default(name, scope, owner, level)
        proof = cctx.prove(expr)
        if proof.constant:
            return ArgProof(True, depth=max(level, proof.depth))
        return ArgProof(False, proof.code, f"parameter {name!r} of {fname!r} gets a non-constant argument at "
                                           f"{where}: {proof.reason}", max(level, proof.depth))  # fmt: skip

    def prove_default(self, name: str, scope: ast.AST, owner: _Ctx, level: int) -> ArgProof:
        a = scope.args  # type: ignore[attr-defined]
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults))
        pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        default = next((d for arg, d in pairs if arg.arg == name), None)
        fname = getattr(scope, "name", "<lambda>")
        if default is None:
            return _no("NDD-C021", f"parameter {name!r} of {fname!r} got no argument at the call")
        assert owner.frame is not None
        proof = _Ctx(self.module, None, level, owner.frame.f_globals).prove(default)
        if not proof.constant:
            return ArgProof(False, "NDD-C022", f"parameter {name!r} of {fname!r} takes its default, which is "
                                               f"not a literal constant: {proof.reason}", level)  # fmt: skip
        value = owner.lookup(name)
        if not _is_immutable(value):
            return ArgProof(False, "NDD-C022", f"parameter {name!r} of {fname!r} takes a mutable default "
                                               f"({type(value).__name__})", level)  # fmt: skip
        return ArgProof(True, depth=level)

    def callee_shift(self, func: ast.expr, code: types.CodeType) -> int | str:
        """How many leading parameters the call binds implicitly, or why the callee is not ``code``."""
        if isinstance(func, ast.Call):
            return "calls a callable returned inline"
        on_instance = False
        if isinstance(func, ast.Name):
            value = self.lookup(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Name, ast.Attribute)):
            base = self.resolve_chain(func.value)
            if base is _MISSING:
                return f"calls '{_text(func)}', which cannot be resolved statically"
            value = _getattr_static(base, func.attr)
            if not isinstance(base, (type, types.ModuleType)):
                if not any(func.attr in vars(k) for k in type(base).__mro__):
                    return f"calls '{_text(func)}', a callable stored on an instance"
                on_instance = True
        else:
            return f"calls '{_text(func)}', which cannot be resolved statically"
        if isinstance(value, functools.partial):
            return "calls it through functools.partial"
        if isinstance(value, (classmethod, types.MethodType)):
            return 1 if getattr(value.__func__, "__code__", None) is code else _not_direct(func)
        if isinstance(value, staticmethod):
            value = value.__func__
            on_instance = False
        if isinstance(value, types.FunctionType):
            return int(on_instance) if value.__code__ is code else _not_direct(func)
        if isinstance(value, type):
            init = _getattr_static(value, "__init__")
            return 1 if getattr(init, "__code__", None) is code else _not_direct(func)
        call = _getattr_static(type(value), "__call__") if value is not _MISSING else _MISSING
        return 1 if getattr(call, "__code__", None) is code else _not_direct(func)

    def resolve_chain(self, node: ast.expr) -> Any:
        """The value of a name/attribute chain read with static lookups only."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve_chain(node.value)
            return _MISSING if base is _MISSING else _getattr_static(base, node.attr)
        return _MISSING


def _not_direct(func: ast.expr) -> str:
    return f"does not call it directly ('{_text(func)}' is another callable, e.g. a wrapper)"


def _all(first: ArgProof, rest: Any) -> ArgProof:
    """Combine proofs: the first rejection wins, otherwise the deepest depth."""
    if not first.constant:
        return first
    second = rest()
    if not second.constant:
        return second
    return first if first.depth >= second.depth else second


def _getattr_static(obj: Any, attr: str) -> Any:
    if isinstance(obj, types.ModuleType):
        value = obj.__dict__.get(attr, _MISSING)
        if value is _MISSING:
            value = sys.modules.get(f"{obj.__name__}.{attr}", _MISSING)
        return value
    try:
        return inspect.getattr_static(obj, attr)
    except AttributeError:
        return _MISSING


def _is_ndd_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, _ndd_const_types())


def _code_is(code: types.CodeType, scope: ast.AST, module: _Module) -> bool:
    """Whether ``code`` was compiled from ``scope`` (a function, lambda or comprehension node)."""
    if code.co_filename != module.filename:
        return False
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        first = min([scope.lineno, *(d.lineno for d in scope.decorator_list)])
        return code.co_name == scope.name and code.co_firstlineno == first
    if isinstance(scope, ast.Lambda):
        return code.co_name == "<lambda>" and code.co_firstlineno == scope.lineno
    return False
