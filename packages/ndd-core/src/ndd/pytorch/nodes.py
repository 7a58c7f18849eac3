"""``torchdata.nodes`` nodes over ndd readers (package ndd-core; needs torch and torchdata).

The names and arguments are DALI dynamic mode's (``Reader``, ``DictMapper``, ``ToTorch``).
Beyond DALI, the nodes are checkpointable: a ``torchdata.nodes.Loader``'s
``state_dict()`` holds the reader's position (and the RNGs given to ``Reader`` with
``rngs=``), and ``load_state_dict()`` resumes with exactly the batch that would have come
next, mid-epoch included. DALI's nodes return an empty state and refuse to restore one.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import torch
import torchdata.nodes as tn

from .._batch import Batch
from .._reader import Reader as _ReaderBase
from .._reader import ReaderState
from .._tensor import Tensor
from ..random import RNG

__all__ = ["Reader", "DictMapper", "ToTorch"]

T = TypeVar("T", Tensor, Batch)

_SOURCE = "source"


def _cuda_device() -> int | None:
    """torch's current CUDA device in this thread, or None without CUDA."""
    if not torch.cuda.is_available():
        return None
    return torch.cuda.current_device()


def _on_device(next_fn: Callable) -> Callable:
    """Run ``next`` on the CUDA device that was current at ``reset``: torchdata may call
    ``next`` from a prefetching thread, where the current device is device 0."""

    @functools.wraps(next_fn)
    def wrapped(self: Any) -> Any:
        dev = getattr(self, "_cuda_device_id", None)
        if dev is None or torch.cuda.current_device() == dev:
            return next_fn(self)
        with torch.cuda.device(dev):
            return next_fn(self)

    return wrapped


class _Node(tn.BaseNode):
    def reset(self, initial_state: dict | None = None) -> None:
        super().reset(initial_state)
        self._cuda_device_id = _cuda_device()


class Reader(_Node):
    """A reader as a node that yields one dict per batch (or per sample).

    ``reader_type`` is a reader class (``ndd.readers.File``, ...) built here with
    ``**kwargs``; ``batch_size`` is passed to ``next_epoch`` (None: samples);
    ``output_names`` name the outputs (default ``("data", "label")`` for two outputs; a
    reader with named outputs, such as TFRecord, gives its own dict). Each ``reset()``
    without a state starts the next epoch, as torchdata's own nodes do: the rest of an epoch
    left early (a ``break``) is skipped, however far a ``Prefetcher`` downstream had read
    ahead. To continue an epoch after a ``break``, ``loader.load_state_dict(loader.state_dict())``
    before iterating again. ``rngs`` (ours): RNGs whose state is
    saved and restored with the reader's, such as the ones the mapping functions draw from;
    the mapping must then run on the thread that calls this node (put a ``Prefetcher`` after
    the mapper, not between this node and it).
    """

    def __init__(self, reader_type: type[_ReaderBase], *, batch_size: int | None,
                 output_names: Iterable[str] | None = None, rngs: Mapping[str, RNG] | None = None,
                 **kwargs: Any) -> None:
        super().__init__()
        if not (isinstance(reader_type, type) and issubclass(reader_type, _ReaderBase)):
            raise TypeError(f"reader_type must be a reader class such as ndd.readers.File, "
                            f"got {reader_type!r}")
        if batch_size is not None and "max_batch_size" not in kwargs:
            kwargs["max_batch_size"] = batch_size
        # Ours: states are what make the node resumable; a reader can only give one with this.
        kwargs.setdefault("enable_checkpointing", True)
        self._reader = reader_type(**kwargs)
        self._batch_size = batch_size
        self._output_names = None if output_names is None else tuple(output_names)
        self._rngs = dict(rngs or {})
        for key, rng in self._rngs.items():
            if not isinstance(rng, RNG):
                raise TypeError(f"rngs[{key!r}] must be an ndd.random.RNG, got {type(rng).__name__}")
        self._epoch: Iterator | None = None
        self._epoch_start: ReaderState | None = None  # the reader's state when ``_epoch`` began
        self._epoch_done = False  # ``_epoch`` raised StopIteration

    @property
    def reader(self) -> _ReaderBase:
        """The reader this node iterates (ours)."""
        return self._reader

    def _names(self, n: int) -> tuple[str, ...]:
        if self._output_names is not None:
            if len(self._output_names) != n:
                raise ValueError(f"Number of output names does not match number of outputs: "
                                 f"{len(self._output_names)} names for {n} outputs of "
                                 f"{type(self._reader).__qualname__}")
            return self._output_names
        if n == 2:
            return ("data", "label")
        raise ValueError(f"Cannot infer output names for reader {type(self._reader).__qualname__} "
                         f"({n} outputs): pass output_names")

    @_on_device
    def next(self) -> dict[str, Any]:
        if self._epoch is None:
            raise RuntimeError("Reader.next() called before reset(). Call reset() first.")
        try:
            outputs = next(self._epoch)
        except StopIteration:
            self._epoch_done = True
            raise
        if isinstance(outputs, dict):
            return dict(outputs)
        return dict(zip(self._names(len(outputs)), outputs))

    def reset(self, initial_state: dict | None = None) -> None:
        super().reset(initial_state)
        if initial_state is not None:
            state = initial_state.get("reader")
            if state is None:
                raise ValueError("This state has no reader position: it was not saved by "
                                 "ndd.pytorch.nodes.Reader, or its reader had checkpointing disabled")
            missing = set(self._rngs) - set(initial_state.get("rngs", {}))
            if missing:
                raise ValueError(f"The state has no entry for the RNGs {sorted(missing)}")
            self._reader.set_state(state)
            for key, rng in self._rngs.items():
                rng.set_state(initial_state["rngs"][key])
        else:
            self._skip_rest_of_epoch()
        self._epoch = iter(self._reader.next_epoch(batch_size=self._batch_size))
        self._epoch_done = False
        self._epoch_start = self._reader.get_state() if self._reader._checkpointing else None

    def _skip_rest_of_epoch(self) -> None:
        """Move the reader past the rest of an epoch left early. Not from the reader's own
        position: a ``Prefetcher`` downstream may have taken batches the loop never got, and
        torchdata's ``reset(None)`` does not say which (ours; torchdata's nodes restart too)."""
        if self._epoch is None or self._epoch_done:
            return
        reader = self._reader
        if self._epoch_start is not None and "skip" in inspect.signature(reader._epoch).parameters:
            # From the epoch's start, each step skipped unread (core's ``Reader._epoch`` hook):
            # this stops at the epoch's end even when the last batch was taken but not its end.
            reader.set_state(self._epoch_start)
            for _ in reader._epoch(reader._batch_size, skip=lambda: True):
                pass
        else:  # a reader without checkpointing or skipping: read the rest
            for _ in self._epoch:
                pass
        self._epoch = None

    def get_state(self) -> dict[str, Any]:
        """The position after the last batch returned (ours; DALI returns ``{}``). ``{}`` for a
        reader made with ``enable_checkpointing=False`` (restoring that is an error)."""
        if not self._reader._checkpointing:
            return {}
        state: dict[str, Any] = {"reader": str(self._reader.get_state())}
        if self._rngs:
            state["rngs"] = {key: str(rng.get_state()) for key, rng in self._rngs.items()}
        return state

    def get_metadata(self) -> dict:
        """The reader's metadata (``epoch_size``, shards, padding)."""
        return self._reader.get_metadata(self._batch_size)


class DictMapper(_Node):
    """Applies ``map_fn`` to the entry ``key`` of each dict from ``source``."""

    def __init__(self, source: tn.BaseNode, map_fn: Callable[[Any], Any], key: str = "data") -> None:
        super().__init__()
        self._source = source
        self._map_fn = map_fn
        self._key = key

    @_on_device
    def next(self) -> dict[str, Any]:
        item = dict(self._source.next())
        if self._key not in item:
            raise KeyError(f"DictMapper: the source's dict has no key {self._key!r} "
                           f"(it has {sorted(item)})")
        item[self._key] = self._map_fn(item[self._key])
        return item

    def reset(self, initial_state: dict | None = None) -> None:
        super().reset(initial_state)
        self._source.reset(None if initial_state is None else initial_state[_SOURCE])

    def get_state(self) -> dict[str, Any]:
        return {_SOURCE: self._source.state_dict()}


class ToTorch(_Node):
    """Turns each dict of Tensors/Batches from ``source`` into a tuple of ``torch.Tensor``.

    If any entry is on a GPU, CPU entries are moved to that GPU (entries on two GPUs are
    an error). ``output_stream``: the CUDA stream the tensors will be used on (a
    ``torch.cuda.Stream``, an object with ``__cuda_stream__`` or a raw handle); it waits for
    ndd's work on them. Default: torch's current stream when the node is made.
    """

    def __init__(self, source: tn.BaseNode, output_stream: Any = None) -> None:
        super().__init__()
        self._source = source
        self._stream = _torch_stream(output_stream)

    @_on_device
    def next(self) -> tuple[torch.Tensor, ...]:
        item = dict(self._source.next())
        gpu: int | None = None
        for key, value in item.items():
            if not isinstance(value, (Tensor, Batch)):
                raise TypeError(f"ToTorch: entry {key!r} is a {type(value).__name__}, not an "
                                f"ndd Tensor or Batch")
            dev = value.device
            if dev.device_type == "gpu":
                if gpu is not None and gpu != dev.device_id:
                    raise ValueError("All GPU tensors/batches must be on the same device")
                gpu = dev.device_id
        if gpu is not None:
            item = {k: v.gpu(gpu) if v.device.device_type == "cpu" else v for k, v in item.items()}
        ctx = torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext()
        with ctx:
            return tuple(v.torch() for v in item.values())

    def reset(self, initial_state: dict | None = None) -> None:
        super().reset(initial_state)
        self._source.reset(None if initial_state is None else initial_state[_SOURCE])

    def get_state(self) -> dict[str, Any]:
        return {_SOURCE: self._source.state_dict()}


def _torch_stream(stream: Any) -> Any:
    """``stream`` as a torch CUDA stream (None on a machine without CUDA)."""
    if stream is None:
        return torch.cuda.current_stream() if torch.cuda.is_available() else None
    if isinstance(stream, torch.cuda.Stream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        _, handle = stream.__cuda_stream__()
    elif isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    else:
        raise TypeError(f"output_stream must be a torch.cuda.Stream, an object with "
                        f"__cuda_stream__ or a raw stream handle, got {type(stream).__name__}")
    if not torch.cuda.is_available():
        raise RuntimeError("output_stream was given, but torch sees no CUDA device")
    device = getattr(stream, "device_id", None)
    return torch.cuda.ExternalStream(handle, device=device)
