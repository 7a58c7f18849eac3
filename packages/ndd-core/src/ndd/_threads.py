"""The shared CPU thread pool that kernels use for per-sample work."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# Held around every use of Python's ``ast`` module in ndd: capture's source analysis, and
# NumPy's ``.npy`` header parsing (``ast.literal_eval``) on reader threads. CPython 3.11 keeps
# the AST constructor's recursion depth per interpreter, not per thread, so two threads
# building ASTs at once can fail with "SystemError: AST constructor recursion depth mismatch"
# (seen with two reader threads loading .npy files on 3.11.7).
AST_LOCK = threading.Lock()


def _default_threads() -> int:
    """DALI's ``DALI_NUM_THREADS``, or our ``NDD_NUM_THREADS`` (first when both are set),
    else the CPUs this process may use."""
    for name in ("NDD_NUM_THREADS", "DALI_NUM_THREADS"):
        env = os.environ.get(name)
        if not env:
            continue
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"{name} must be an integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"{name} must be >= 1, got {n}")
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class ThreadPool:
    """A pool of worker threads; ``map`` runs a function over items in parallel.

    With one thread (or one item) work runs inline, which avoids hand-off cost.
    """

    def __init__(self, num_threads: int | None = None, *, device_id: int = -1) -> None:
        """``device_id`` is DALI's GPU affinity of the threads; ndd's pool threads have none,
        so it is only recorded."""
        n = _default_threads() if num_threads is None else num_threads
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"num_threads must be a positive integer, got {n!r}")
        self.num_threads = n
        self.device_id = device_id
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="ndd-pool")
        return self._pool

    def map(self, fn: Callable[..., T], *iterables: Iterable[Any]) -> list[T]:
        """Apply ``fn`` to the items and return the results in order."""
        items = list(zip(*iterables))
        if self.num_threads == 1 or len(items) <= 1:
            return [fn(*it) for it in items]
        return list(self._executor().map(lambda it: fn(*it), items))

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __repr__(self) -> str:
        return f"ThreadPool(num_threads={self.num_threads})"


_default_pool: ThreadPool | None = None
_pool_lock = threading.Lock()


def default_thread_pool() -> ThreadPool:
    """The process-wide CPU pool (created on first use)."""
    global _default_pool
    if _default_pool is None:
        with _pool_lock:
            if _default_pool is None:
                _default_pool = ThreadPool()
    return _default_pool


def set_num_threads(n: int | None) -> None:
    """Resize the shared CPU thread pool (None: the default size)."""
    global _default_pool
    new = ThreadPool(n)
    with _pool_lock:
        old, _default_pool = _default_pool, new
    if old is not None:
        old.shutdown()


def get_num_threads() -> int:
    """Number of threads in the shared CPU thread pool."""
    return default_thread_pool().num_threads
