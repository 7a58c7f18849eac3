"""``Checkpoint``: collects and restores the state of readers and RNGs.

DALI's semantics and errors (``nvidia.dali.experimental.dynamic.checkpoint``), plus:

* registering a reader enables checkpointing at any step boundary, also after it has
  been iterated (core's ``Reader.set_state`` works mid-stream);
* capture mode is supported: a reader driven by ``next_epoch(capture=True)`` reports the
  position the Python loop sees, not the read-ahead position;
* ``save`` writes a temporary file, fsyncs it and links it into place without ever
  overwriting an existing file, so an interrupted save leaves nothing ``load`` picks;
* ``load`` reports a corrupted, truncated or foreign file as a ValueError naming the
  file and what is wrong, and checks reader and RNG state strings before applying any;
* the ``{seq}`` pattern is validated on every ``save`` (DALI skips it after the first).
"""

from __future__ import annotations

import glob
import json
import os
import re
import string
from collections.abc import Iterator
from typing import Any, NamedTuple

from ndd import EvalContext, Reader, _plugins
from ndd._reader import STATE_PREFIX, ReaderState
from ndd.random import RNG, RNGState

__all__ = ["Checkpoint", "current"]

FORMAT_VERSION = 2
_ANON = "__op_"


class _Entry(NamedTuple):
    """A stored state and the ``__qualname__`` of its operator's type (None: unchecked)."""

    state: Any
    type_name: str | None = None


# -- file name patterns ----------------------------------------------------------------
_DECIMAL_SPEC = re.compile(r"(0[1-9][0-9]*)?d?")  # plain decimal, optionally zero-padded


def _parse_pattern(pattern: str) -> tuple[str, re.Pattern]:
    """The glob and the regex (group ``seq``) of a pattern with exactly one ``{seq}`` field."""
    globs, regex, seen = [], ["^"], False
    for literal, field, spec, conv in string.Formatter().parse(pattern):
        globs.append(glob.escape(literal))
        regex.append(re.escape(literal))
        if field is None:
            continue
        if field != "seq":
            raise ValueError(
                f"Unsupported field {{{field}}} in checkpoint pattern. "
                "Only `{seq}` (with an optional format spec) is allowed."
            )
        if seen:
            raise ValueError("`{seq}` may appear at most once in a checkpoint pattern.")
        if conv is not None or not _DECIMAL_SPEC.fullmatch(spec or ""):
            # Other specs write names that load could not read back in order ({seq:x}) or at
            # all ({seq:4d} pads with spaces): refused when saving, not found missing later.
            raise ValueError(
                f"Unsupported format of `{{seq}}` in checkpoint pattern {pattern!r}: "
                f"{'!' + conv if conv else ''}{':' + spec if spec else ''}. Use `{{seq}}`, `{{seq:d}}` "
                "or a zero-padded width such as `{seq:04d}`."
            )
        seen = True
        globs.append("*")
        regex.append(r"(?P<seq>\d+)")
    if not seen:
        raise ValueError("Checkpoint pattern must include `{seq}`.")
    regex.append("$")
    return "".join(globs), re.compile("".join(regex))


def _matches(pattern: str) -> Iterator[tuple[int, str]]:
    """``(seq, path)`` for every existing file that matches ``pattern``."""
    glob_pattern, regex = _parse_pattern(pattern)
    for path in glob.iglob(glob_pattern):
        m = regex.match(path)
        if m is not None and os.path.isfile(path):
            yield int(m.group("seq")), path


def _write_new(path: str, data: str) -> bool:
    """Write ``data`` to ``path`` atomically; False (nothing written) if ``path`` exists.

    The data goes to ``<path>.tmp`` (never a match of the pattern), is fsynced, then
    linked to ``path``: a save interrupted at any point leaves no partial ``path``.
    """
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # atomic, and never replaces an existing file
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links
            if os.path.exists(path):
                return False
            os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    _fsync_dir(os.path.dirname(path))
    return True


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_state(key: str, entry: _Entry) -> None:
    """ValueError if the state string of an RNG or an ndd reader is malformed."""
    text, type_name = entry.state, entry.type_name
    if type_name == RNG.__qualname__:
        RNGState.from_string(text)
    elif text.startswith(STATE_PREFIX) or type_name in _reader_types():
        owner = ReaderState(text).to_dict()["type"]
        if type_name is not None and owner != type_name:
            raise ValueError(f"entry {key!r} is typed {type_name!r} but holds the state of a {owner} reader")


def _reader_types() -> set[str]:
    """The type names of the installed reader classes (``File``, ``Caffe2``, ...)."""
    _plugins.ensure_loaded()
    return {cls.__qualname__ for cls in _plugins.readers.values()}


# -- the checkpoint --------------------------------------------------------------------
class Checkpoint:
    """The state of a chosen set of stateful objects (readers and RNGs), for exact resume.

    Objects are added with :meth:`register`; :meth:`collect` snapshots them,
    :meth:`save`/:meth:`load` persist the snapshot, and a loaded state is applied when its
    object is registered (or by :meth:`restore`). Anything with ``get_state`` and
    ``set_state`` can be registered. Not thread-safe: use one per thread.

    Example::

        ckpt = ndd.checkpoint.Checkpoint()
        ckpt.register(reader, "reader")
        ckpt.register(rng, "rng")
        ...  # iterate
        ckpt.collect()
        ckpt.save("ckpt/run_{seq:04d}.json")
    """

    def __init__(self) -> None:
        self._ops: dict[str, Any] = {}
        self._keys: dict[int, str] = {}  # id(op) -> key
        self._states: dict[str, _Entry] = {}
        self._dirty: set[str] = set()  # keys whose state is not yet applied to the op
        self._complete = False
        self._loaded = False
        self._origins: dict[str, str] = {}  # where each pending state came from, for errors
        self._save_seq: int | None = None

    # -- bookkeeping ------------------------------------------------------------------
    def clear(self) -> None:
        """Forget every registered op and state, and the save counter."""
        self.__init__()

    @property
    def is_complete(self) -> bool:
        """True after :meth:`collect` (until :meth:`load`, :meth:`deserialize` or :meth:`clear`)."""
        return self._complete

    @property
    def is_loaded(self) -> bool:
        """True after :meth:`load` or :meth:`deserialize` (until :meth:`collect` or :meth:`clear`)."""
        return self._loaded

    @property
    def names(self) -> tuple[str, ...]:
        """The keys of the registered ops, in registration order."""
        return tuple(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __contains__(self, name: object) -> bool:
        return str(name) in self._ops

    # -- registration -----------------------------------------------------------------
    def register(self, op: Any, name: str | None = None) -> str:
        """Add ``op`` under ``name`` (or an automatic ``__op_<n>`` key); return the key.

        Re-registering an op returns its key; a named registration replaces the op of
        the same type under that name. A pending loaded state for the key is applied
        at once. Registering a reader enables its checkpointing, also after it has
        been iterated (beyond DALI, which requires a fresh reader).
        """
        if not (callable(getattr(op, "get_state", None)) and callable(getattr(op, "set_state", None))):
            raise TypeError(
                f"Cannot register an object of type {type(op).__qualname__!r}: it has no "
                "`get_state`/`set_state` methods."
            )
        old_key = self._keys.get(id(op))
        if isinstance(op, Reader):
            op._checkpointing = True
        if name is None:
            if old_key is not None:
                self._apply(old_key)
                return old_key
            if self._complete:
                raise RuntimeError(
                    "Cannot register a new operator into a checkpoint that has been "
                    "completed via `collect`. Call `clear` first."
                )
            key = f"{_ANON}{len(self._ops)}"
            if self._loaded and key not in self._states:
                raise KeyError(
                    f"Loaded checkpoint has no state for the operator's key {key!r}. "
                    "If your registration order changed since the checkpoint was saved, "
                    "use the named form `register(op, name)` instead."
                )
            self._add(key, op)
            return key

        if name.startswith(_ANON):
            raise ValueError(f"Manually assigned names must not start with '{_ANON}'.")
        if not name:
            raise ValueError("The name must not be empty.")
        if old_key is not None and old_key != name:
            raise RuntimeError(
                f"Cannot register the operator with a new key {name!r} "
                f"when it's already been added with the key {old_key!r}."
            )
        old_op = self._ops.get(name)
        if old_op is not None:
            if old_op is not op:
                if type(old_op) is not type(op):
                    raise TypeError(
                        f"Cannot replace operator {name!r} of type {type(old_op).__qualname__!r} "
                        f"with an operator of type {type(op).__qualname__!r}."
                    )
                del self._keys[id(old_op)]
                self._ops[name] = op
                self._keys[id(op)] = name
            self._apply(name)
            return name
        if self._complete:
            raise RuntimeError(
                f"Cannot register a new op {name!r} into a completed checkpoint. Call `clear` first."
            )
        if self._loaded and name not in self._states:
            raise KeyError(f"Checkpoint was loaded but does not contain a state for {name!r}.")
        self._add(name, op)
        return name

    def _add(self, key: str, op: Any) -> None:
        self._ops[key] = op
        self._keys[id(op)] = key
        try:
            self._apply(key)
        except BaseException:
            del self._ops[key], self._keys[id(op)]
            raise

    def _apply(self, key: str) -> None:
        """Apply the pending state of ``key`` to its op, after the type check."""
        if key not in self._dirty:
            return
        entry, op = self._states[key], self._ops[key]
        actual = type(op).__qualname__
        if entry.type_name is not None and entry.type_name != actual:
            raise TypeError(
                f"Type mismatch for operator {key!r}: checkpoint stores state for type "
                f"{entry.type_name!r}, but the registered operator is of type {actual!r}."
            )
        try:
            op.set_state(entry.state)
        except ValueError as e:  # e.g. a reader's position past its dataset (a tampered file)
            origin = self._origins.get(key, "the checkpoint")
            raise ValueError(f"Entry {key!r} of {origin} does not fit the {actual} registered under that "
                             f"name: {e}") from e
        self._dirty.discard(key)

    # -- states -----------------------------------------------------------------------
    def get_state(self, name: str) -> Any:
        """The stored state of the op registered as ``name`` (None before any is stored).

        Collected states are the ops' state objects; loaded ones are strings.
        """
        key = str(name)
        if key not in self._ops:
            raise KeyError(f"No op registered under {key!r}.")
        entry = self._states.get(key)
        return None if entry is None else entry.state

    def set_state(self, name: str, value: Any, op_type: type | str | None = None) -> None:
        """Store ``value`` as the pending state of ``name`` (applied by register/restore).

        ``op_type`` (a class or its ``__qualname__``) is checked against the op's type
        when the state is applied.
        """
        key = str(name)
        if self._complete and key not in self._ops:
            raise KeyError(f"No operator registered under {key!r}.")
        if op_type is None or isinstance(op_type, str):
            type_name = op_type
        elif isinstance(op_type, type):
            type_name = op_type.__qualname__
        else:
            raise TypeError(f"`op_type` must be a class or a string, got {op_type!r}.")
        self._states[key] = _Entry(value, type_name)
        self._origins[key] = "the state given to set_state"
        self._dirty.add(key)

    def _check_no_extra(self) -> None:
        extra = self._states.keys() - self._ops.keys()
        if extra:
            raise RuntimeError(
                f"Checkpoint state has entries with no corresponding registered ops: {sorted(extra)}."
            )

    def collect(self) -> None:
        """Snapshot every registered op (``get_state``); marks the checkpoint complete.

        In a capture-mode loop, a reader's state is the next batch the loop body will
        receive, so ``collect`` may be called at any step boundary, eager or captured.
        """
        self._check_no_extra()
        self._states = {key: _Entry(op.get_state(), type(op).__qualname__) for key, op in self._ops.items()}
        self._dirty.clear()
        self._complete = True
        self._loaded = False

    def restore(self) -> None:
        """Apply every pending state to its op (no-op without states).

        Works on ops that are already in use: a reader, eager or in a capture-mode
        loop, continues from the restored position with its next ``next_epoch``.
        """
        if not self._states:
            return
        self._check_no_extra()
        missing = self._ops.keys() - self._states.keys()
        if missing:
            raise RuntimeError(f"Checkpoint state is incomplete - missing entries for {sorted(missing)}.")
        for key in list(self._ops):
            self._apply(key)

    # -- serialization ----------------------------------------------------------------
    def serialize(self) -> str:
        """The states as JSON: ``{"version": 2, "states": {key: {"state", "type"}}}``."""
        if not self._states:
            raise RuntimeError("Cannot serialize an empty checkpoint. Call `collect` (or `set_state`) first.")
        states = {k: {"state": str(e.state), "type": e.type_name} for k, e in self._states.items()}
        return json.dumps({"version": FORMAT_VERSION, "states": states})

    def deserialize(self, data: str | bytes) -> None:
        """Replace the states with those in ``data`` (from :meth:`serialize`), all pending."""
        self._install(_parse(data), "the deserialized checkpoint")

    def _install(self, states: dict[str, _Entry], origin: str) -> None:
        self._states = states
        self._origins = dict.fromkeys(states, origin)
        self._dirty = set(states)
        self._complete = False
        self._loaded = True

    def save(self, pattern: str) -> str:
        """Write the checkpoint to the next free file of ``pattern``; return its path.

        ``pattern`` is a format string with exactly one ``{seq}`` field (decimal: the
        spec ``d`` and a zero-padded width like ``{seq:04d}`` are allowed) and any fixed text, e.g.
        ``f"ckpt/rank{rank}_" + "{seq:04d}.json"``. The first save numbers after the
        highest existing file. The file is written to ``<path>.tmp``, fsynced and linked
        into place; an existing file is never overwritten (the number moves on).
        """
        _parse_pattern(pattern)
        data = self.serialize()
        if self._save_seq is None:
            self._save_seq = max((seq for seq, _ in _matches(pattern)), default=-1) + 1
        seq = self._save_seq
        while True:
            path = pattern.format(seq=seq)
            if not os.path.exists(path):
                directory = os.path.dirname(path)
                if directory:
                    os.makedirs(directory, exist_ok=True)
                if _write_new(path, data):
                    break
            seq += 1
        self._save_seq = seq + 1
        return path

    def load(self, pattern: str) -> str:
        """Load the file of ``pattern`` with the highest ``{seq}``; return its path.

        FileNotFoundError if none matches; ValueError naming the file if it is not a
        valid checkpoint (corrupted, truncated, another format or version). The states
        are applied when their ops are registered (or by :meth:`restore`).
        """
        found = list(_matches(pattern))
        if not found:
            raise FileNotFoundError(f"No checkpoint file matches filename {pattern!r}.")
        seq, path = max(found)
        try:
            with open(path, "rb") as f:
                raw = f.read()
            states = _parse(raw.decode("utf-8"))
            for key, entry in states.items():
                _check_state(key, entry)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"Checkpoint file {path!r} is not valid JSON (truncated or corrupted?): {e}"
            ) from e
        except (ValueError, TypeError) as e:
            raise ValueError(f"Checkpoint file {path!r} is not a valid ndd checkpoint: {e}") from e
        self._install(states, f"checkpoint file {path!r}")
        self._save_seq = seq + 1
        return path


def _parse(data: str | bytes) -> dict[str, _Entry]:
    """The entries of a serialized checkpoint (ValueError if it is not one)."""
    payload = json.loads(data)
    if not isinstance(payload, dict) or "states" not in payload:
        raise ValueError("Invalid checkpoint payload.")
    version = payload.get("version", 0)
    if version != FORMAT_VERSION:
        raise ValueError(f"Unsupported checkpoint format version {version}; expected {FORMAT_VERSION}.")
    states = payload["states"]
    if not isinstance(states, dict):
        raise ValueError("Invalid checkpoint payload: `states` must be a dict.")
    entries = {}
    for key, value in states.items():
        if not isinstance(value, dict) or "state" not in value:
            raise ValueError(f"Invalid checkpoint entry for {key!r}.")
        type_name = value.get("type")
        if type_name is not None and not isinstance(type_name, str):
            raise ValueError(f"Invalid `type` for entry {key!r}: expected a string.")
        entries[str(key)] = _Entry(str(value["state"]), type_name)
    return entries


def current() -> Checkpoint:
    """The :class:`Checkpoint` of the current :class:`ndd.EvalContext` (shared; ``clear`` it
    between unrelated runs)."""
    return EvalContext.current().checkpoint
