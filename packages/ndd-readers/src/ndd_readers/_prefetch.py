"""Read-ahead on a background thread with a bounded number of finished steps.

A :class:`Prefetcher` runs ``jobs`` (an iterator whose ``next`` does the reading) on a
worker thread and hands the results out in order.  At most ``depth`` finished results
wait for the consumer.  When the consumer stops taking results (a ``break`` out of the
loop), the worker waits ``idle_s`` for a free slot, then exits on its own; the consumer
restarts it when it takes the next result, so no thread outlives an abandoned loop for
long and an unfinished iterator costs nothing.  ``close()`` stops the worker at once
(it finishes the read in progress) and drops the unconsumed results.
"""

from __future__ import annotations

import atexit
import queue
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

_END = object()

# Every live Prefetcher, closed at exit: a read-ahead thread still reading while the
# interpreter shuts down (torchrun ranks tearing down their process group meanwhile) could
# abort the process. Weak: an abandoned iterator is not kept alive.
_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_live_prefetchers() -> None:
    for p in list(_LIVE):
        p.close()


class Prefetcher:
    """Iterate ``jobs`` on a worker thread, ``depth`` results ahead of the consumer."""

    def __init__(self, jobs: Iterator, depth: int = 1, idle_s: float = 0.5) -> None:
        self._jobs = jobs
        self._idle = idle_s
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._slots = threading.Semaphore(max(1, depth))
        self._lock = threading.Lock()
        self._stop = False
        self._running = False
        self._finished = False  # the worker has queued the end or an error
        self._thread: threading.Thread | None = None
        _LIVE.add(self)
        self._ensure_running()

    def _ensure_running(self) -> None:
        with self._lock:
            if self._running or self._finished or self._stop:
                return
            self._running = True
            self._thread = threading.Thread(target=self._work, name="ndd-reader-prefetch", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            if not self._slots.acquire(timeout=self._idle):
                with self._lock:
                    if not self._slots.acquire(blocking=False):
                        self._running = False
                        return
            if self._stop:
                break
            try:
                item: Any = ("ok", next(self._jobs))
            except StopIteration:
                item = ("end", _END)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                item = ("err", e)
            self._results.put(item)
            if item[0] != "ok":
                with self._lock:
                    self._finished = True
                break
        with self._lock:
            self._running = False

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self) -> Any:
        if self._stop:
            raise StopIteration
        kind, value = self._results.get()
        if kind == "ok":
            self._slots.release()
            self._ensure_running()
            return value
        self.close()
        if kind == "err":
            raise value
        raise StopIteration

    def close(self) -> None:
        """Stop the worker (after its current read) and drop what it read ahead."""
        with self._lock:
            self._stop = True
            t = self._thread
        self._slots.release()  # wake a worker waiting for a slot
        # Not while the interpreter shuts down (a generator closed by the last garbage
        # collection): daemon threads are frozen then, and joining one never returns.
        if t is not None and t is not threading.current_thread() and not sys.is_finalizing():
            t.join()
        self._thread = None
        while not self._results.empty():
            self._results.get_nowait()
