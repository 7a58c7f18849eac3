"""EvalMode, EvalContext, lazy invocations and the background executor."""

from __future__ import annotations

import atexit
import enum
import sys
import threading
import types
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from . import _plugins, _stream
from ._device import Device
from ._threads import ThreadPool, default_thread_pool

_tls = threading.local()


class EvalMode(enum.Enum):
    """When operator calls run: ``deferred < eager < sync_cpu < sync_full``.

    Each member is a context manager that pushes itself on a thread-local stack.
    ``default`` is an alias of ``eager``.
    """

    deferred = 0
    eager = 1
    default = 1
    sync_cpu = 2
    sync_full = 3

    @staticmethod
    def current() -> EvalMode:
        stack = getattr(_tls, "modes", None)
        return stack[-1] if stack else EvalMode.eager

    def __enter__(self) -> EvalMode:
        stack = getattr(_tls, "modes", None)
        if stack is None:
            stack = _tls.modes = []
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _tls.modes.pop()

    def __lt__(self, other: EvalMode) -> bool:
        if not isinstance(other, EvalMode):
            return NotImplemented
        return self.value < other.value

    def __le__(self, other: EvalMode) -> bool:
        if not isinstance(other, EvalMode):
            return NotImplemented
        return self.value <= other.value

    def __gt__(self, other: EvalMode) -> bool:
        if not isinstance(other, EvalMode):
            return NotImplemented
        return self.value > other.value

    def __ge__(self, other: EvalMode) -> bool:
        if not isinstance(other, EvalMode):
            return NotImplemented
        return self.value >= other.value


_ASYNC_MESSAGE = {
    EvalMode.eager: "An error happened during asynchronous execution",
    EvalMode.deferred: "An error happened during deferred evaluation",
}


class Invocation:
    """One operator call: runs once, in order, and keeps its outputs or error."""

    __slots__ = ("_fn", "_claim", "_event", "outputs", "error", "mode", "_frame", "_lineno", "_lasti", "_ctx")

    def __init__(self, fn: Callable[[], list], mode: EvalMode, ctx: EvalContext | None) -> None:
        self._fn = fn
        self._claim = threading.Lock()
        self._event: threading.Event | None = None
        self.outputs: list | None = None
        self.error: BaseException | None = None
        self.mode = mode
        self._frame: types.FrameType | None = None
        self._lineno = 0
        self._lasti = 0
        self._ctx = ctx

    def remember_caller(self, frame: types.FrameType | None) -> None:
        """Record the user's frame so an asynchronous error points at the call line."""
        if frame is not None:
            self._frame = frame
            self._lineno = frame.f_lineno
            self._lasti = frame.f_lasti

    @property
    def done(self) -> bool:
        return self.outputs is not None or self.error is not None

    def run(self) -> None:
        """Run the call unless another thread is running it or it has run. The claim is
        held while it runs, so :meth:`_wait_claim` waits for another thread's run."""
        if not self._claim.acquire(blocking=False):
            return
        try:
            if self._fn is None:  # it has run
                return
            self.outputs = self._fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on access
            self.error = e
            if self._frame is not None:
                # Prepend the user's call line to the original traceback.
                e.__traceback__ = types.TracebackType(
                    e.__traceback__, self._frame, self._lasti, self._lineno
                )
        finally:
            self._fn = None
            self._frame = None
            self._claim.release()
            if self._event is not None:
                self._event.set()

    def result(self) -> list:
        """Wait for (or run) the call and return its outputs; re-raise its error."""
        if not self.done:
            if self.mode is EvalMode.eager and self._event is not None:
                ex = self._ctx._executor if self._ctx is not None else None
                if ex is not None and ex.is_worker_thread():
                    self.run()  # submitted from the worker itself: run inline
                if not self.done:
                    self._event.wait()
            else:
                self.run()
                if not self.done:  # another thread is running it
                    self._wait_claim()
        if self.error is not None:
            raise _wrap_async(self.error, self.mode)
        return self.outputs

    def _wait_claim(self) -> None:
        with self._claim:
            pass


def _wrap_async(err: BaseException, mode: EvalMode) -> BaseException:
    """The error of a deferred call as the caller sees it: the same type, saying that it
    happened during asynchronous execution, with the original as ``__cause__`` (also when
    it reached this call through an input's evaluation, already wrapped)."""
    msg = _ASYNC_MESSAGE.get(mode)
    if getattr(err, "_ndd_async", False) and err.__cause__ is not None:
        err = err.__cause__
    if msg is None:
        return err
    try:
        new = type(err)(msg)
    except Exception:  # an exception type with an unusual constructor
        return err
    new.__cause__ = err
    new._ndd_async = True  # type: ignore[attr-defined]
    return new


# Every executor, stopped at exit after running what was submitted: a thread left inside a
# kernel while the interpreter shuts down could abort the process. Weak: contexts die freely.
_EXECUTORS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_executors() -> None:
    for ex in list(_EXECUTORS):
        ex.stop()


class _Executor:
    """One daemon thread that runs submitted invocations in FIFO order."""

    def __init__(self) -> None:
        self._queue: SimpleQueue = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        _EXECUTORS.add(self)

    def is_worker_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, inv: Invocation) -> None:
        inv._event = threading.Event()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    t = threading.Thread(target=self._loop, name="ndd-executor", daemon=True)
                    t.start()
                    self._thread = t
        self._queue.put(inv)

    def _loop(self) -> None:
        q = self._queue
        while True:
            inv = q.get()
            if inv is None:
                return
            inv.run()

    def stop(self, timeout: float = 5.0) -> None:
        """Let the thread run what was submitted, then end it (a later submit starts another)."""
        with self._lock:
            t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            self._queue.put(None)
            t.join(timeout)

    def drain(self) -> None:
        """Wait until everything submitted so far has run."""
        if self._thread is None or self.is_worker_thread():
            return
        done = threading.Event()
        self._queue.put(Invocation(lambda: done.set() or [], EvalMode.eager, None))
        done.wait()


class EvalContext:
    """A device, a CPU thread pool, a CUDA stream and an executor for operator calls."""

    def __init__(
        self,
        *,
        num_threads: int | None = None,
        device_id: int | None = None,
        cuda_stream: Any = None,
        thread_pool: ThreadPool | None = None,
    ) -> None:
        if thread_pool is not None and num_threads is not None:
            raise ValueError("Pass either `thread_pool` or `num_threads`, not both.")
        if num_threads is not None:
            thread_pool = ThreadPool(num_threads)
        self._thread_pool = thread_pool
        self._device_id = device_id
        if cuda_stream is not None:
            cuda_stream = _stream.stream(stream=cuda_stream, device_id=device_id)
        else:  # the stream this thread set with set_current_stream, on this device
            mine = getattr(_tls, "default_contexts", {}).get(device_id)
            cuda_stream = mine._cuda_stream if mine is not None else None
        self._cuda_stream: _stream.Stream | None = cuda_stream
        self._own_stream: _stream.Stream | None = None  # the GPU backend's stream, as a Stream
        self._executor = _Executor()
        self._owner: int | None = None
        self._depth = 0
        self._checkpoint: Any = None

    @staticmethod
    def current() -> EvalContext:
        """The innermost active context on this thread, or the thread's default."""
        stack = getattr(_tls, "contexts", None)
        if stack:
            return stack[-1]
        return EvalContext.default()

    @staticmethod
    def _current_device_id() -> int | None:
        """``EvalContext.current().device_id`` without making the default context (capture
        mode checks it on every replayed call)."""
        stack = getattr(_tls, "contexts", None)
        return stack[-1]._device_id if stack else Device.current().device_id

    @staticmethod
    def default() -> EvalContext:
        """This thread's default context for the current device."""
        dev = Device.current()
        defaults = getattr(_tls, "default_contexts", None)
        if defaults is None:
            defaults = _tls.default_contexts = {}
        ctx = defaults.get(dev.device_id)
        if ctx is None:
            ctx = defaults[dev.device_id] = EvalContext(device_id=dev.device_id)
        return ctx

    def __enter__(self) -> EvalContext:
        me = threading.get_ident()
        if self._owner is not None and self._owner != me:
            raise RuntimeError("An EvalContext cannot be active in two threads simultaneously.")
        self._owner = me
        self._depth += 1
        stack = getattr(_tls, "contexts", None)
        if stack is None:
            stack = _tls.contexts = []
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        # By identity, not the top: a capture loop given ctx= holds it entered across its
        # yields, and the caller may enter another context before the loop resumes.
        stack = _tls.contexts
        if stack[-1] is self:
            stack.pop()
        else:
            del stack[len(stack) - 1 - next(i for i, c in enumerate(reversed(stack)) if c is self)]
        self._depth -= 1
        if self._depth == 0:
            self._owner = None

    @property
    def device_id(self) -> int | None:
        return self._device_id

    @property
    def thread_pool(self) -> ThreadPool:
        return self._thread_pool if self._thread_pool is not None else default_thread_pool()

    @property
    def num_threads(self) -> int:
        return self.thread_pool.num_threads

    @property
    def cuda_stream(self) -> Any:
        """The ``ndd.Stream`` GPU operators of this context run on: the one it was given,
        else the default stream of its device, else one the GPU backend made for it; None
        for a CPU context without one (and on the GPU emulation)."""
        if self._device_id is None:
            return self._cuda_stream
        s = self._explicit_stream(self._device_id)
        if s is not None:
            return s
        if self._own_stream is None:
            raw = _plugins.device_backend("gpu").stream(self, self._device_id)
            self._own_stream = None if raw is None else _stream.Stream(stream=raw)
        return self._own_stream

    def _explicit_stream(self, device_id: int) -> Any:
        """The stream set for this context on ``device_id`` (its own, else the device's
        default), or None when the GPU backend's own stream is to be used."""
        s = self._cuda_stream
        if s is None:
            if not _stream._defaults:
                return None
            s = _stream._defaults.get(device_id)
        return s if s is not None and s._device_id == device_id else None

    @property
    def checkpoint(self) -> Any:
        """This context's checkpoint (needs the ``ndd-checkpoint`` package)."""
        if self._checkpoint is None:
            from ._plugins import extension

            self._checkpoint = extension("checkpoint").Checkpoint()
        return self._checkpoint

    def evaluate_all(self) -> None:
        """Wait until every operator submitted to this context has run."""
        self._executor.drain()

    def submit(self, inv: Invocation) -> None:
        self._executor.submit(inv)


def caller_frame(depth: int = 2) -> types.FrameType | None:
    """The first frame outside ndd's own packages, starting ``depth`` frames up."""
    f = sys._getframe(depth)
    while f is not None and _is_internal(f.f_globals.get("__name__", "")):
        f = f.f_back
    return f


_INTERNAL_PREFIXES = ("ndd.", "ndd_ops_", "ndd_readers", "ndd_capture", "ndd_checkpoint")


def _is_internal(modname: str) -> bool:
    return modname == "ndd" or modname.startswith(_INTERNAL_PREFIXES)
