"""``ndd.ExternalSource``: feed Python data (a callable or an iterable) into ndd.

Eager use: ``es(batch_size=None)`` pulls one item. ``es.captured(batch_size=B)``
drives a capture-mode loop and is provided by the ``ndd-capture`` package, which
also uses the role bookkeeping kept here (an instance stays in the role it was
first used in).
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import _dispatch
from ._batch import Batch
from ._construct import batch as make_batch
from ._construct import tensor as make_tensor
from ._device import Device
from ._tensor import Tensor

UNUSED, EAGER, ROOT, FEEDER = "unused", "eager", "root", "feeder"
PASS_END = object()  # in put-back items: the end of a pass (a StopIteration read ahead)
_CYCLE = {None: "no", False: "no", "no": "no", True: "quiet", "quiet": "quiet", "raise": "raise"}


def _cycle_mode(cycle: Any) -> str:
    """``cycle`` as "no", "quiet" or "raise" (not 0 or 1, which equal False and True)."""
    if cycle is None or isinstance(cycle, bool) or cycle in ("no", "quiet", "raise"):
        return _CYCLE[cycle]
    raise ValueError(f"cycle must be 'no', 'quiet', 'raise', True, False or None; got {cycle!r}")


def _makes_generator(source: Any) -> bool:
    """A generator function (or a method, partial or callable object that is one): called
    to get the iterable, as DALI does, once per pass when cycling."""
    if inspect.isgeneratorfunction(source):
        return True
    if inspect.isfunction(source) or not callable(source):
        return False
    return inspect.isgeneratorfunction(type(source).__call__)  # an object whose __call__ is one


def _per_output(name: str, value: Any, n: int) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"`{name}` has {len(value)} entries but num_outputs is {n}")
        return list(value)
    return [value] * n


def _check_batch_size(v: Any, least: int) -> int:
    """``batch_size`` as an int of at least ``least``: TypeError for a non-int, ValueError if smaller."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"ExternalSource: batch_size must be an int, got {type(v).__name__} {v!r}")
    if v < least:
        raise ValueError(f"ExternalSource: batch_size must be at least {least}, got {v}")
    return int(v)


def _is_scalar(x: Any) -> bool:
    return isinstance(x, (int, float, bool, np.generic)) or (isinstance(x, np.ndarray) and x.ndim == 0)


def _is_batch_like(item: Any) -> bool:
    """A Batch, or a list of arrays (each a sample); a list of scalars (Python or NumPy, or
    0-d arrays) is one sample."""
    if isinstance(item, Batch):
        return True
    return isinstance(item, (list, tuple)) and len(item) > 0 and all(
        isinstance(x, (Tensor, np.ndarray)) or hasattr(x, "__array__") or hasattr(x, "__dlpack__")
        for x in item
    ) and not all(_is_scalar(x) for x in item)


class ExternalSource:
    """A source of data from Python: a callable with no parameters, an iterable, or a
    generator function (called for an iterator, again for each pass when cycling).

    ``cycle``: ``"no"``/False/None raises StopIteration at the end; ``"quiet"``/True
    starts over silently; ``"raise"`` raises StopIteration once, then starts over.
    Cycling needs an iterable. ``layout`` and ``dtype`` may be per-output sequences.
    """

    def __init__(
        self,
        source: Callable[[], Any] | Any,
        num_outputs: int = 1,
        *,
        cycle: str | bool | None = None,
        device: str | Device = "cpu",
        layout: str | Sequence[str | None] | None = None,
        dtype: Any = None,
    ) -> None:
        if not isinstance(num_outputs, (int, np.integer)) or num_outputs <= 0:  # (True is 1, as DALI)
            raise ValueError(f"num_outputs must be a positive integer, got {num_outputs!r}")
        num_outputs = int(num_outputs)
        self._cycle = _cycle_mode(cycle)
        self._factory: Callable[[], Any] | None = None
        if inspect.isgenerator(source) and self._cycle != "no":
            raise TypeError("Cannot cycle through a generator: pass the generator function instead, "
                            "which is called again for each pass")
        if _makes_generator(source):
            self._factory = source
            self._callable = None
        elif callable(source) and not hasattr(source, "__iter__"):
            try:
                sig = inspect.signature(source)
            except (TypeError, ValueError):
                sig = None
            if sig is not None and any(
                p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                for p in sig.parameters.values()
            ):
                raise ValueError("ExternalSource only supports callables with no parameters")
            if cycle is not None:
                raise ValueError("`cycle` needs an iterable source; a callable cannot be cycled")
            self._callable: Callable[[], Any] | None = source
        elif hasattr(source, "__iter__"):
            self._callable = None
        else:
            raise TypeError(
                f"ExternalSource needs a callable or an iterable, got {type(source).__name__}"
            )
        self._source = source
        self._iter: Iterator | None = None
        self._num_outputs = num_outputs
        self._device = device if isinstance(device, Device) else Device(device)
        self._layouts = _per_output("layout", layout, num_outputs)
        self._dtypes = _per_output("dtype", dtype, num_outputs)
        self._role = UNUSED
        self._owner: Any = None  # the capture loop this instance is bound to
        self._put_back: deque = deque()  # items read ahead by a capture loop and not used

    @property
    def num_outputs(self) -> int:
        return self._num_outputs

    # -- pulling items ------------------------------------------------------------------
    def _next_item(self) -> Any:
        if self._put_back:
            item = self._put_back.popleft()
            if item is PASS_END:
                raise StopIteration
            return item
        if self._callable is not None:
            return self._callable()
        if self._iter is None:
            self._iter = self._pass()
        try:
            return next(self._iter)
        except StopIteration:
            if self._cycle == "no":
                raise  # stays exhausted: every later pull raises StopIteration too
            self._iter = None  # "raise": start over on the next pull
            if self._cycle == "quiet":
                self._iter = self._pass()
                try:
                    return next(self._iter)
                except StopIteration:
                    raise StopIteration("ExternalSource: the iterable is empty") from None
            raise

    def _unread(self, items: list) -> None:
        """Give back ``items`` (in order; PASS_END for a StopIteration) that a capture loop
        read ahead and its body did not use: the next reads return them first, so the
        source goes on where eager mode would."""
        self._put_back.extendleft(reversed(items))

    def _pass(self) -> Iterator:
        """An iterator over one pass of an iterable source."""
        return iter(self._factory() if self._factory is not None else self._source)

    def _convert(self, item: Any, batch_size: int | None) -> Any:
        """Turn one pulled item into Tensors/Batches (a tuple when num_outputs > 1)."""
        n = self._num_outputs
        if n == 1:
            parts = [item]
        else:
            if not isinstance(item, (list, tuple)) or len(item) != n:
                raise ValueError(
                    f"ExternalSource with num_outputs={n} expects the source to give {n} outputs, "
                    f"got {type(item).__name__}"
                )
            parts = list(item)
        kinds = {_is_batch_like(p) for p in parts}
        if len(kinds) > 1:
            raise TypeError("All outputs of one ExternalSource item must be all batches, or all samples")
        outs = []
        for part, layout, dt in zip(parts, self._layouts, self._dtypes):
            if _is_batch_like(part):
                b = make_batch(part, dtype=dt, device=self._device, layout=layout)
                if batch_size is not None and b.batch_size != batch_size:
                    raise ValueError(f"Expected batch size {batch_size}, got {b.batch_size}")
                outs.append(b)
            else:
                t = make_tensor(part, dtype=dt, device=self._device, layout=layout)
                outs.append(t if batch_size is None else Batch.broadcast(t, batch_size))
        return outs[0] if n == 1 else tuple(outs)

    def __call__(self, *, batch_size: int | None = None) -> Any:
        """Pull one item: a Tensor (or a Batch when the item is a batch or ``batch_size`` is given)."""
        if self._role == ROOT:
            raise RuntimeError("This ExternalSource is already used in a capture-mode loop")
        if batch_size is not None:
            batch_size = _check_batch_size(batch_size, 0)
        if _dispatch.op_call_hook is not None or self._role == FEEDER:
            # A capture extension is active: it decides whether this is a feeder read.
            from ._plugins import extension

            out = extension("capture").feed(self, batch_size)
            if out is not NotImplemented:
                return out
        self._role = EAGER
        return self._convert(self._next_item(), batch_size)

    def captured(self, batch_size: int, ctx: Any = None, strict: bool = False) -> Iterator:
        """Iterate the source in capture mode (needs ``ndd-capture``); ends with the source."""
        batch_size = _check_batch_size(batch_size, 1)
        if self._role == EAGER:
            raise RuntimeError("This ExternalSource was already used eagerly")
        if self._role == FEEDER:
            raise RuntimeError("Instance already used through __call__")
        from ._plugins import extension

        try:
            cap = extension("capture")
        except ImportError as e:
            raise RuntimeError(
                "ExternalSource.captured() needs the `ndd-capture` package: pip install ndd-capture"
            ) from e
        return cap.external_source_epoch(self, batch_size, ctx, strict)
