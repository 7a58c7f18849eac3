"""The worker that runs the captured graph ahead of the Python loop.

It pulls the next source item, computes every captured node for that step and puts
the results in a bounded queue (``depth`` steps ahead). When the queue stays full for
a while (the loop stopped consuming: a ``break``, an exception in the body) the
thread parks — it exits, keeping its next item — and the consumer restarts it on
demand. So no thread outlives a loop that is no longer used, and a dropped reader
can be garbage-collected.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

_PARK_AFTER_S = 0.5


class Failure:
    """An exception raised by the worker, delivered in order."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


END = object()  # the source is exhausted


class Worker:
    """Runs ``compute(item)`` for each item of ``source`` on a parking background thread."""

    def __init__(self, source: Iterator, compute: Callable[[Any], Any], depth: int) -> None:
        self._source = source
        self._compute = compute
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending: Any = None
        self._finished = False
        self._stop = False

    def _run(self) -> None:
        while not self._stop:
            item = self._pending
            self._pending = None
            if item is None:
                try:
                    item = self._compute(next(self._source))
                except StopIteration:
                    item, self._finished = END, True
                except BaseException as e:  # noqa: BLE001 - delivered to the consumer
                    item, self._finished = Failure(e), True
            while True:
                if self._stop:
                    return
                try:
                    self._queue.put(item, timeout=_PARK_AFTER_S)
                    break
                except queue.Full:
                    with self._lock:
                        if self._queue.full():  # nobody is consuming: park
                            self._pending = item
                            self._thread = None
                            return
            if item is END or isinstance(item, Failure):
                with self._lock:
                    self._thread = None
                return

    def _ensure_running(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop and (self._pending is not None or not self._finished):
                t = threading.Thread(target=self._run, name="ndd-capture-worker", daemon=True)
                self._thread = t
                t.start()

    def get(self) -> Any:
        """The next computed item (END when the source ran out, or a Failure)."""
        while True:
            self._ensure_running()
            try:
                return self._queue.get(timeout=0.05)
            except queue.Empty:
                continue

    def close(self) -> None:
        """Stop the thread and drop queued items."""
        self._stop = True
        with self._lock:
            t = self._thread
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        self._pending = None

    @property
    def alive(self) -> bool:
        return self._thread is not None
