"""The ``Reader`` base class: the stateful-reader protocol that reader plugins implement.

Core owns the rules every reader shares (DALI's names and errors): batch size fixed
after first use, no mixing of sample iteration, batch iteration and direct calls,
capture-mode stickiness, the hand-off of ``capture=True`` to the capture extension,
and versioned printable states. A plugin subclass provides the data:
``_epoch(batch_size)`` (a generator over one epoch), ``_run(batch_size)`` (one direct
call), ``_state()`` / ``_restore(state)`` (a JSON-able dict) and ``get_metadata``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._eval import EvalContext

STATE_PREFIX = "ndd-reader-v1:"


class ReaderState:
    """A reader's position, printable as one string (``ndd-reader-v1:<base64 JSON>``).

    Compares equal to another ReaderState or to its string, and is hashable.
    """

    __slots__ = ("_text",)

    def __init__(self, value: ReaderState | str | bytes) -> None:
        if isinstance(value, ReaderState):
            text = value._text
        elif isinstance(value, bytes):
            try:
                text = value.decode("ascii")
            except UnicodeDecodeError:
                raise ValueError("A reader state given as bytes must be ASCII") from None
        elif isinstance(value, str):
            text = value
        else:
            raise TypeError(
                f"A reader state must be a ReaderState, str or bytes, got {type(value).__name__}"
            )
        self._text = text

    @classmethod
    def from_dict(cls, reader_type: str, data: dict) -> ReaderState:
        payload = json.dumps({"type": reader_type, "state": data}, sort_keys=True, separators=(",", ":"))
        return cls(STATE_PREFIX + base64.b64encode(payload.encode()).decode("ascii"))

    def to_dict(self) -> dict:
        """Decode to ``{"type": ..., "state": {...}}`` (ValueError if malformed)."""
        if not self._text.startswith(STATE_PREFIX):
            raise ValueError(
                f"Not an ndd reader state (expected the prefix {STATE_PREFIX!r}): {self._text[:40]!r}"
            )
        try:
            data = json.loads(base64.b64decode(self._text[len(STATE_PREFIX):], validate=True))
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"Corrupted reader state {self._text[:40]!r}…: {e}") from None
        if not isinstance(data, dict) or not isinstance(data.get("state"), dict) or "type" not in data:
            raise ValueError(f"Corrupted reader state {self._text[:40]!r}…: missing fields")
        return data

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"ReaderState({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReaderState):
            return self._text == other._text
        if isinstance(other, str):
            return self._text == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._text)


def _snapshot(v: Any) -> Any:
    """A copy of a mutable container (list, dict, set, NumPy array); other values as they are."""
    return v.copy() if isinstance(v, (list, dict, set, bytearray, np.ndarray)) else v


_MIX_ERROR = "Cannot mix `samples`, `batches` and `_run`/`__call__` on the same reader."


class Reader:
    """Base class of stateful readers (``ndd.readers.File`` and friends).

    Create a reader once and reuse it across epochs: ``next_epoch(batch_size=N)``
    yields tuples of Batches (a dict for named outputs), ``next_epoch()`` yields
    tuples of Tensors.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Reader:
        self = super().__new__(cls)
        # The constructor call and the directory relative paths in it refer to, so that a
        # worker process can build an identical reader (ours). Lists, dicts and arrays are
        # copied: a caller that refills its list of files or labels after making the reader
        # must not change what the workers read (one level deep; ~0.06 s for 1.3M paths).
        self._ctor_args = (tuple(_snapshot(a) for a in args), {k: _snapshot(v) for k, v in kwargs.items()})
        self._ctor_cwd = os.getcwd()
        return self

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        enable_checkpointing: bool = False,
    ) -> None:
        if device != "cpu":
            raise ValueError(f'Readers run on the CPU; got device="{device}"')
        self._max_batch_size = max_batch_size
        self._name = name
        self._mode: str | None = None  # "samples", "batches", "run" or "capture"
        self._batch_size: int | None = None
        self._checkpointing = bool(enable_checkpointing)
        self._started = False
        self._epoch_iter: Iterator | None = None
        self._capture_iter: weakref.ref | None = None
        # Set by a driver that reads ahead of the loop (capture mode): the state as the
        # loop sees it, and callbacks that stop the read-ahead before set_state moves the reader.
        self._loop_state: dict | None = None
        self._before_restore: list = []

    # -- hooks for subclasses ---------------------------------------------------------
    def _epoch(self, batch_size: int | None) -> Iterator:
        """One epoch of outputs. A subclass may take an extra ``skip`` callable, asked once
        per step in order: when it returns True the step is not read and None is yielded
        in its place (capture worker processes read only their own steps this way)."""
        raise NotImplementedError

    def _run(self, batch_size: int | None, **args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not support direct calls")

    def _state(self) -> dict:
        raise NotImplementedError

    def _restore(self, state: dict) -> None:
        raise NotImplementedError

    def get_metadata(self, batch_size: int | None = None) -> dict:
        """``epoch_size``, ``epoch_size_padded``, ``number_of_shards``, ``shard_id``,
        ``pad_last_batch``, ``stick_to_shard``."""
        raise NotImplementedError

    # -- the protocol -----------------------------------------------------------------
    def _lock_batch_size(self, batch_size: int | None) -> int | None:
        if batch_size is None:
            batch_size = self._max_batch_size
        if batch_size is None:
            return None
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if self._max_batch_size is not None and batch_size > self._max_batch_size:
            raise ValueError(f"`batch_size` {batch_size} is larger than the `max_batch_size` "
                             f"{self._max_batch_size} given to the reader")
        if self._batch_size is not None and batch_size != self._batch_size:
            raise ValueError(
                f"`batch_size` {batch_size} is different than the `max_batch_size` "
                f"{self._batch_size} used in the previous call"
            )
        return batch_size

    def _lock_mode(self, mode: str) -> None:
        if self._mode == "capture" and mode != "capture":
            raise RuntimeError(
                "This reader was previously used with capture=True and cannot switch to eager mode."
            )
        if mode == "capture" and self._mode not in (None, "capture"):
            raise RuntimeError(
                "This reader was previously used without capture=True and cannot switch to capture mode."
            )
        if self._mode is not None and self._mode != mode:
            raise RuntimeError(_MIX_ERROR)

    def next_epoch(
        self, batch_size: int | None = None, ctx: EvalContext | None = None, capture: bool | str = False
    ) -> Iterator:
        """An iterator over one epoch.

        If the previous epoch's iterator was not consumed, it is closed and this epoch
        continues from the next unread sample (nothing is skipped or repeated).
        ``capture=True`` runs the loop in capture mode (needs ``ndd-capture``).
        """
        if capture:
            self._lock_mode("capture")
            if batch_size is None and self._max_batch_size is None:
                raise ValueError("capture=True requires a non-None batch_size.")
            if batch_size is not None and self._batch_size not in (None, batch_size):
                raise ValueError(f"Cannot change batch_size from {self._batch_size} to {batch_size}")
            bs = self._lock_batch_size(batch_size)
            from ._plugins import extension

            try:
                cap = extension("capture")
            except ImportError as e:
                raise RuntimeError(
                    "next_epoch(capture=True) needs the `ndd-capture` package: pip install ndd-capture"
                ) from e
            self._close_previous_epoch()
            self._mode, self._batch_size, self._started = "capture", bs, True
            it = cap.reader_epoch(self, bs, ctx, capture)
            # Weakly: a finished or abandoned captured loop must not be kept alive by the reader.
            self._capture_iter = weakref.ref(it)
            return it
        bs = self._lock_batch_size(batch_size)
        self._lock_mode("batches" if bs is not None else "samples")
        self._close_previous_epoch()
        self._mode = "batches" if bs is not None else "samples"
        self._batch_size = bs
        self._started = True
        it = self._epoch_iter = self._epoch(bs)
        return it

    def _close_previous_epoch(self) -> None:
        it, self._epoch_iter = self._epoch_iter, None
        if it is not None and hasattr(it, "close"):
            it.close()
        ref, self._capture_iter = self._capture_iter, None
        captured = ref() if ref is not None else None
        if captured is not None:
            captured.close()

    # The arguments a direct call may take besides batch_size (the Numpy reader's regions of
    # interest); a subclass's ``_run`` receives them.
    _CALL_ARGS: tuple[str, ...] = ()

    def __call__(self, *, batch_size: int | None = None, **args: Any) -> Any:
        """One direct call: the next batch (or sample) of the stream, ignoring epochs."""
        for name in args:
            if name not in self._CALL_ARGS:
                raise TypeError(f"Reader `{type(self).__name__}` got an unexpected keyword argument "
                                f"'{name}' in a call")
        bs = self._lock_batch_size(batch_size)
        self._lock_mode("run")
        self._mode, self._batch_size, self._started = "run", bs, True
        return self._run(bs, **{k: v for k, v in args.items() if v is not None})

    # -- state ------------------------------------------------------------------------
    def get_state(self, *, cuda_stream: Any = None) -> ReaderState:
        """The position of the reader: the next sample it will produce."""
        if not self._checkpointing:
            raise RuntimeError(
                "Cannot get the state of a reader initialized with checkpointing disabled. "
                "Pass `enable_checkpointing=True` to the reader's constructor."
            )
        if not self._started:
            raise RuntimeError(
                "Cannot get the reader's state before its first iteration; iterate it once, "
                "or call set_state() to start from a saved position."
            )
        state = self._loop_state if self._loop_state is not None else self._state()
        return ReaderState.from_dict(type(self).__qualname__, state)

    def set_state(self, state: ReaderState | str | bytes) -> None:
        """Resume from ``state`` (turns checkpointing on).

        Beyond DALI, this also works after iteration has begun, at a step boundary:
        the next sample produced is the one the state points at.
        """
        data = ReaderState(state).to_dict()
        if data["type"] != type(self).__qualname__:
            raise ValueError(
                f"This state belongs to a {data['type']} reader, not {type(self).__qualname__}"
            )
        self._close_previous_epoch()
        for callback in self._before_restore:
            callback()
        self._checkpointing = True
        self._restore(data["state"])
        self._loop_state = None
        self._started = True
