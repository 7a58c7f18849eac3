"""The workers that run the captured graph ahead of the Python loop.

Steps are numbered in the order their source items are read; each worker thread takes
the next number, reads that item (under a read lock, so the source is read in order),
computes every node for it outside the lock, and files the result. The consumer takes
results strictly in order. At most ``depth`` steps are read ahead of the consumer, and
several threads compute different steps at once (OpenCV, JPEG decoding and large NumPy
operations release the GIL, so two cores are used).

A thread that finds no room for ``_PARK_AFTER_S`` exits ("parks"); the consumer starts
threads again on demand. So no thread outlives a loop nobody consumes any more, and a
dropped reader can be garbage-collected.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

_PARK_AFTER_S = 0.5


class Failure:
    """An exception raised while reading or computing a step, delivered in order; ``extra``
    is the step's tag from the source (for a reader, its epoch and the reader's state after
    the step's batch) when the step was read, else None."""

    __slots__ = ("error", "extra")

    def __init__(self, error: BaseException, extra: Any = None) -> None:
        self.error = error
        self.extra = extra


class EagerStep:
    """A step the pipeline read but could not compute (a captured call failed on it, say on a
    record that does not decode). The loop hands its batch to the body as usual, and the
    body's calls run as in eager mode: the failing call raises where eager mode raises it,
    the body may catch it, and a body that does not make that call on this step goes on.
    ``vals`` holds the source's values (key 0) and the feeders' (negative keys)."""

    __slots__ = ("extra", "outs", "vals")

    def __init__(self, extra: Any, outs: Any, vals: dict) -> None:
        self.extra = extra
        self.outs = outs
        self.vals = vals

    @classmethod
    def of(cls, item: tuple) -> EagerStep:
        """The step ``(extra, outs, vals)`` of a split pipeline, to run eagerly."""
        extra, outs, vals = item
        return cls(extra, outs, {0: vals[0]})


END = object()  # the source is exhausted


# Every live Worker, stopped at exit: a pipeline thread still inside a kernel (OpenCV,
# torch) while the interpreter shuts down can abort the process ("terminate called
# without an active exception"). Weak: a dropped loop's worker is not kept alive.
_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_live_workers() -> None:
    for w in list(_LIVE):
        w.close()


HEAVY_STEP_S = 0.010  # mean step compute time from which more than one thread is used
_PROBE_STEPS = 8


class Worker:
    """Computes ``compute(item, k)`` for the source's items on up to ``threads`` threads.

    It starts with one thread and allows more only when the first steps show heavy
    compute: light steps run mostly Python under the GIL, where a second thread only
    adds contention (MNIST-like loop: 27.5k samples/s on one thread, 22.8k on two),
    while heavy steps (large JPEG decodes, resizes) run in C with the GIL released.
    """

    def __init__(self, source: Iterator, compute: Callable[[Any, int], Any], depth: int,
                 threads: int = 1) -> None:
        self._source = source
        self._compute = compute
        self._depth = max(1, depth)
        self._allowed_threads = max(1, min(threads, self._depth))
        self._max_threads = 1
        self._timed = 0
        self._time = 0.0
        self._cv = threading.Condition()
        self._read_lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._results: dict[int, Any] = {}
        self._next_read = 0
        self._next_get = 0
        self._finished = False
        self.report: Any = None  # the loop's CaptureReport, which counts the waits of get()
        self._stop = False
        _LIVE.add(self)

    def _room(self, me: threading.Thread) -> bool:
        """Wait until a step may be read ahead; False when this thread should end (stopped,
        finished, or parked after ``_PARK_AFTER_S`` without room)."""
        with self._cv:
            deadline = time.monotonic() + _PARK_AFTER_S
            while not (self._stop or self._finished) and self._next_read - self._next_get >= self._depth:
                left = deadline - time.monotonic()
                if left <= 0:  # nobody consumes: park
                    self._threads.discard(me)
                    return False
                self._cv.wait(left)
            if self._stop or self._finished:
                self._threads.discard(me)
                return False
            return True

    def _run(self) -> None:
        me = threading.current_thread()
        while self._room(me):
            # Read under a lock of its own, so in order, but not under the results' lock: a
            # read may wait (for a worker process's next step), and meanwhile the consumer
            # must be able to take the results already filed.
            with self._read_lock:
                with self._cv:
                    if self._stop or self._finished:
                        self._threads.discard(me)
                        return
                    if self._next_read - self._next_get >= self._depth:
                        continue  # another thread took the room
                    k = self._next_read
                    self._next_read += 1
                try:
                    item = next(self._source)
                except StopIteration:
                    self._file(k, END, finished=True)
                    continue
                except BaseException as e:  # noqa: BLE001 - delivered to the consumer
                    item = Failure(e)
                if isinstance(item, Failure):  # (a source may also hand one over as an item)
                    self._file(k, item, finished=True)
                    continue
            t0 = time.perf_counter()
            try:
                out = self._compute(item, k)
            except BaseException as e:  # noqa: BLE001 - delivered to the consumer
                out = Failure(e, item[0])
            with self._cv:
                self._results[k] = out
                if self._timed < _PROBE_STEPS:
                    self._time += time.perf_counter() - t0
                    self._timed += 1
                    if self._timed == _PROBE_STEPS and self._time / _PROBE_STEPS >= HEAVY_STEP_S:
                        self._max_threads = self._allowed_threads
                self._cv.notify_all()

    def _file(self, k: int, result: Any, finished: bool = False) -> None:
        with self._cv:
            self._results[k] = result
            if finished:
                self._finished = True
            self._cv.notify_all()

    def _start_threads(self) -> None:
        while len(self._threads) < self._max_threads and not (self._stop or self._finished):
            t = threading.Thread(target=self._run, name="ndd-capture-worker", daemon=True)
            self._threads.add(t)
            t.start()

    def get(self) -> Any:
        """The next step's result in order (END when the source ran out, or a Failure)."""
        with self._cv:
            if self._next_get not in self._results:
                t0 = time.perf_counter()
                while self._next_get not in self._results:
                    self._start_threads()
                    self._cv.wait(0.05)
                if self.report is not None:
                    self.report.waited(time.perf_counter() - t0)
            item = self._results.pop(self._next_get)
            self._next_get += 1
            self._cv.notify_all()
            return item

    def count_waits(self, report: Any) -> None:
        """Count in ``report`` each get() that had to wait (the loop calls this worker)."""
        self.report = report

    def close(self) -> list:
        """Stop the threads and drop computed results; returns them, in step order (the
        steps read that nobody took)."""
        with self._cv:
            self._stop = True
            threads = list(self._threads)
            self._cv.notify_all()
        me = threading.current_thread()
        for t in threads:
            if t is not me:
                t.join(timeout=5)
        with self._cv:
            left = [self._results[k] for k in sorted(self._results)]
            self._results.clear()
        return left
