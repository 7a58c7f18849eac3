"""The "gpu" device backend: storage as torch CUDA tensors, one CUDA stream per EvalContext.

Why torch tensors and not CuPy arrays: ``.torch()`` hands out the stored tensor itself
(no DLPack round trip), torch is what the models use anyway, torchvision's
``decode_jpeg(list, device="cuda")`` is nvJPEG's batched decoder, and the same kernel
code runs on torch CPU tensors, so the emulation below tests it on machines without a GPU.

Streams: every EvalContext gets its own CUDA stream per device (``stream_for``), unless it
has one set (``EvalContext(cuda_stream=...)``, ``ndd.set_current_stream`` or
``ndd.set_default_stream``: an ``ndd.Stream``, run on as a torch stream made once). Kernels and copies run on it; whatever
hands data out (``to_torch``, ``dlpack``, ``cuda_array_interface``, ``to_host``) makes
the consumer wait for the stream of the *current* EvalContext first.

Host-to-device copies go through pinned staging buffers from torch's caching host
allocator, asynchronously on the context's stream.

Test emulation (ours, a testing aid only): with ``NDD_CUDA_EMULATE=cpu`` in the environment
the backend is available without CUDA; "GPU" data are then torch CPU tensors, device ids
are still ``gpu:N``, and streams and pinned memory are no-ops.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from typing import Any

import numpy as np

from ndd import Device, EvalContext
from ndd.plugins import Registry

EMULATE_ENV = "NDD_CUDA_EMULATE"


# _emulated() runs a few times per operator call and reads the variable every time (tests
# switch it at runtime), so it reads os.environ's backing dict (POSIX CPython): one dict
# lookup instead of os.environ.get's three Python calls, and parses a value only when it
# changed. Elsewhere it falls back to os.environ.get.
_ENV = getattr(os.environ, "_data", None)
if os.name == "posix" and isinstance(_ENV, dict):
    _ENV_KEY: Any = os.environ.encodekey(EMULATE_ENV)  # type: ignore[attr-defined]
else:
    _ENV, _ENV_KEY = os.environ, EMULATE_ENV
_last_env: list = [None, False]  # the last value read and whether it means "cpu"


def _emulated() -> bool:
    raw = _ENV.get(_ENV_KEY)
    if raw is None:
        return False
    last = _last_env
    if raw is not last[0]:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        last[:] = [raw, text.strip().lower() == "cpu"]
    return last[1]


class CudaBackend:
    """What core's device-backend protocol needs, implemented on torch."""

    name = "gpu"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._checked: tuple[bool, str | None] | None = None
        self._streams: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # The torch streams of user streams (ndd.Stream) run on, and of the streams device
        # graphs replayed on (caller_stream), per device, by raw handle: consumers wait for
        # them too (see _ready_stream). Few: one per distinct stream a program uses.
        self._user_streams: dict[int, dict[int, Any]] = {}
        self._np2t: dict[np.dtype, Any] = {}
        self._t2np: dict[Any, np.dtype] = {}
        self._device_count = 0  # CUDA devices seen (checked again only for a higher id)
        # This thread's device-graph capture (see ``_graph``): .capturing, .kept (the cached
        # constants it reads), .stream (its private capture stream) and .home (the stream it
        # stands in for).
        self._graph = threading.local()
        # This thread's events for stream waits (.events) and torch Streams of raw handles
        # (.streams); see _wait and _consumer_waits.
        self._waits = threading.local()

    # -- availability ------------------------------------------------------------
    @property
    def emulated(self) -> bool:
        """True when running on torch CPU tensors (``NDD_CUDA_EMULATE=cpu``, tests only)."""
        return _emulated()

    def _check(self) -> tuple[bool, str | None]:
        if _emulated():  # read every time: tests switch the variable on and off
            try:
                import torch  # noqa: F401
            except ImportError as e:
                return (False, f"ndd-ops-cuda needs torch, which cannot be imported ({e})")
            return (True, None)
        if self._checked is None:
            try:
                import torch
            except ImportError as e:
                self._checked = (False, f"ndd-ops-cuda needs torch, which cannot be imported ({e})")
                return self._checked
            if torch.version.cuda is None:
                self._checked = (False, f"ndd-ops-cuda: the installed torch {torch.__version__} is a "
                                        "CPU-only build; install a CUDA build of torch")
            elif not torch.cuda.is_available():
                self._checked = (False, "ndd-ops-cuda: no CUDA device is visible "
                                        "(torch.cuda.is_available() is False)")
            else:
                self._checked = (True, None)
        return self._checked

    def available(self) -> bool:
        """True when GPU data can be made (a CUDA device, or the test emulation)."""
        return self._check()[0]

    def unavailable_reason(self) -> str | None:
        """Why :meth:`available` is False (None when it is True)."""
        return self._check()[1]

    def require(self) -> None:
        """Raise a RuntimeError saying why the GPU cannot be used, if it cannot."""
        ok, why = self._check()
        if not ok:
            raise RuntimeError(f"The GPU backend is unusable: {why}")

    # -- streams -----------------------------------------------------------------
    def stream(self, ctx: EvalContext | None = None, device_id: int | None = None) -> Any:
        """The ``torch.cuda.Stream`` of ``ctx`` (current context by default) on a device.

        None under the emulation.
        """
        if _emulated():
            return None
        capture = getattr(self._graph, "stream", None)
        if capture is not None:  # this thread captures a device graph: onto its private stream
            return capture
        import torch

        ctx = EvalContext.current() if ctx is None else ctx
        dev = device_id if device_id is not None else (ctx.device_id or 0)
        user = ctx._explicit_stream(dev)
        if user is not None:
            return user._torch if user._torch is not None else self._torch_stream(user)
        # Fast path without the lock (a few times per operator call): entries are only ever
        # added, and a dict read racing with an insert is safe under the GIL.
        per_dev = self._streams.get(ctx)
        if per_dev is not None:
            s = per_dev.get(dev)
            if s is not None:
                return s
        with self._lock:
            per_dev = self._streams.get(ctx)
            if per_dev is None:
                per_dev = self._streams[ctx] = {}
            s = per_dev.get(dev)
            if s is None:
                s = per_dev[dev] = torch.cuda.Stream(device=dev)
        return s

    def _torch_stream(self, s: Any) -> Any:
        """The torch stream for an ``ndd.Stream`` (kept on it: made once per stream)."""
        import torch

        obj = s._obj
        ts = obj if isinstance(obj, torch.cuda.Stream) else torch.cuda.ExternalStream(s.handle, device=s.device_id)
        with self._lock:
            self._user_streams.setdefault(s.device_id, {}).setdefault(ts.cuda_stream, ts)
        s._torch = ts
        return ts

    def new_stream(self, device_id: int | None) -> tuple[Any, int]:
        """A new torch CUDA stream and its device (``ndd.stream()``; the current GPU by default)."""
        if _emulated():
            raise RuntimeError("ndd.stream() needs a real GPU: the GPU emulation (NDD_CUDA_EMULATE) "
                               "has no CUDA streams")
        import torch

        dev = torch.cuda.current_device() if device_id is None else device_id
        if not 0 <= dev < torch.cuda.device_count():
            raise ValueError(f"Invalid GPU device id {dev}: this machine has "
                             f"{torch.cuda.device_count()} GPU(s)")
        return torch.cuda.Stream(device=dev), dev

    def current_device(self) -> int:
        """torch's current CUDA device (0 on the emulation)."""
        if _emulated():
            return 0
        import torch

        return torch.cuda.current_device()

    def synchronize_stream(self, s: Any) -> None:
        """Wait for an ``ndd.Stream`` (a no-op on the emulation)."""
        if _emulated():
            return
        (s._torch if s._torch is not None else self._torch_stream(s)).synchronize()

    def stream_for(self, ctx: EvalContext | None = None, device_id: int | None = None) -> Any:
        """A context manager that makes the context's stream current (a no-op under emulation)."""
        s = self.stream(ctx, device_id)
        if s is None:
            return contextlib.nullcontext()
        return OnStream(s)

    def synchronize(self, ctx: EvalContext | None = None) -> None:
        """Wait until everything queued on the context's streams has run."""
        if _emulated():
            return
        ctx = EvalContext.current() if ctx is None else ctx
        if ctx._explicit_stream(ctx.device_id or 0) is not None:
            self.stream(ctx).synchronize()
            return
        with self._lock:
            streams = list(self._streams.get(ctx, {}).values())
        for s in streams:
            s.synchronize()

    def graph_session(self, device_id: int, ctx: EvalContext, on_caller_stream: bool = False) -> Any:
        """A device graph for capture mode (ours; see ``_graph``), replayed on ``ctx``'s stream,
        or with ``on_caller_stream`` on the stream current on the replaying thread."""
        from ._graph import GraphSession

        return GraphSession(device_id, ctx, on_caller_stream)

    def _ndd_streams(self, dev: int) -> list:
        """Every stream ndd has run on on ``dev``: the contexts' own, and those the program
        set (``ndd.Stream``) or a device graph replayed on (see ``caller_stream``)."""
        with self._lock:  # another thread may add a context's streams meanwhile
            every = [per_dev.get(dev) for per_dev in self._streams.values()]
            every += list(self._user_streams.get(dev, {}).values())
        return [s for s in every if s is not None]

    def caller_stream(self, dev: int, note: bool = False) -> Any:
        """torch's current stream on ``dev`` on this thread, as a torch Stream kept per raw
        handle (``torch.cuda.current_stream()`` builds a new object on every call). With
        ``note``, also kept among the streams consumers wait for: ndd work is about to run
        on it."""
        import torch

        raw = torch._C._cuda_getCurrentRawStream(dev)
        streams = getattr(self._waits, "streams", None)
        if streams is None:
            streams = self._waits.streams = {}
        s = streams.get((dev, raw))
        if s is None:
            s = streams[(dev, raw)] = torch.cuda.current_stream(dev)
        if note and raw not in self._user_streams.get(dev, ()):
            with self._lock:
                self._user_streams.setdefault(dev, {}).setdefault(raw, s)
        return s

    def _ready_stream(self, dev: int) -> Any:
        """The current context's stream on ``dev``, made to wait for ndd's other streams there.

        Data may have been computed under another EvalContext than the one current now
        (made inside ``with ndd.EvalContext(...)``, or by a capture pipeline thread), or on a
        stream the program set (``ndd.Stream``), so a consumer waits for every stream ndd has
        run on on the device, not only the current one's (usually there is just one).
        """
        mine = self.stream(None, dev)
        for other in self._ndd_streams(dev):
            if other.cuda_stream != mine.cuda_stream:
                self._wait(mine, other, only_new=True)
        return mine

    def _wait(self, waiter: Any, waited: Any, only_new: bool = False) -> None:
        """``waiter.wait_stream(waited)`` through an event kept per pair of streams and thread.

        ``wait_stream`` makes an event each time, whose Python object and CUDA event cost more
        than the wait itself (twice a step when a loop hands out images and labels). Recording
        the kept event again is safe: a wait already queued keeps the point it was given.

        ``only_new``: skip the wait when ndd has run nothing on ``waited`` since this thread's
        last wait for the pair (see :class:`OnStream`), as when a loop hands out the images and
        then the labels of one step. Only for streams whose work that matters is ndd's own:
        work the program queues itself leaves no mark.
        """
        import torch

        key = (waiter.cuda_stream, waited.cuda_stream)
        if only_new:
            stamp = _last_block.get(key[1])  # read before the event is recorded (see OnStream)
            seen = getattr(self._waits, "seen", None)
            if seen is None:
                seen = self._waits.seen = {}
            if stamp is not None and seen.get(key) is stamp:
                return
            seen[key] = stamp
        events = getattr(self._waits, "events", None)
        if events is None:
            events = self._waits.events = {}
        ev = events.get(key)
        if ev is None:
            ev = events[key] = torch.cuda.Event()
        ev.record(waited)
        waiter.wait_event(ev)

    def _consumer_waits(self, arr: Any) -> None:
        """Make torch's current stream wait for ndd's streams before it touches ``arr``: each
        of them directly (see ``_ready_stream`` for which), and only for what ndd ran there
        since this thread's last wait (``_wait``'s ``only_new``): handing out the labels after
        the images of one step costs no second wait."""
        dev = arr.device.index
        current = self.caller_stream(dev)
        for other in self._ndd_streams(dev):
            if other.cuda_stream != current.cuda_stream:
                self._wait(current, other, only_new=True)
        arr.record_stream(current)  # the allocator must not reuse it while `current` reads it

    # -- dtypes ------------------------------------------------------------------
    def torch_dtype(self, npd: Any) -> Any:
        """The torch dtype of a NumPy dtype."""
        npd = np.dtype(npd)
        t = self._np2t.get(npd)
        if t is None:
            import torch

            t = self._np2t[npd] = torch.from_numpy(np.zeros(1, npd)).dtype
        return t

    def dtype_of(self, arr: Any) -> np.dtype:
        """The NumPy dtype of a stored tensor (TypeError for dtypes NumPy lacks)."""
        d = self._t2np.get(arr.dtype)
        if d is None:
            import torch

            try:
                d = torch.zeros(1, dtype=arr.dtype).numpy().dtype
            except TypeError:
                raise TypeError(f"torch dtype {arr.dtype} has no ndd equivalent") from None
            self._t2np[arr.dtype] = d
        return d

    # -- copies ------------------------------------------------------------------
    def check_not_capturing(self) -> None:
        """Raise while this thread captures a device graph: a graph would replay the copy
        from a staging buffer that is reused after the copy (per-step data enter a graph
        only through its input buffers, see ``_graph``)."""
        if getattr(self._graph, "capturing", False):
            raise RuntimeError("a kernel copied host data to the GPU inside a device graph")

    def graph_home(self, stream: Any) -> Any:
        """The stream a capture's private stream stands in for (where the graph replays);
        any other stream as it is."""
        if stream is not None and stream is getattr(self._graph, "stream", None):
            return self._graph.home
        return stream

    def graph_keeps(self, t: Any, made: bool) -> None:
        """A cached constant tensor ``t`` read by a kernel (``made``: just made): while this
        thread captures a device graph, the graph keeps it alive, since its replays read it
        by address after the cache may have dropped it. Raises for one made inside the
        capture: capturing runs no kernel, so its contents would not exist yet."""
        kept = getattr(self._graph, "kept", None)
        if kept is None:
            return
        if made:
            raise RuntimeError("a kernel made a cached constant inside a device graph")
        kept.append(t)

    def to_device(self, arr: Any, device_id: int, ctx: EvalContext | None = None) -> Any:
        """Copy a NumPy array (or a tensor on another GPU) to GPU ``device_id``.

        Host data are staged in pinned memory and copied asynchronously on the stream
        of ``ctx`` (kernels pass theirs; by default the current EvalContext).
        """
        self.require()
        emulated = _emulated()  # read once: this runs for every upload
        if not emulated:
            self._check_device_id(device_id)
        import torch

        if isinstance(arr, torch.Tensor):
            if emulated or arr.device.index == device_id:
                return self.copy(arr)
            with self.stream_for(ctx, device_id):
                torch.cuda.current_stream(device_id).wait_stream(self.stream(ctx, arr.device.index))
                return arr.to(f"cuda:{device_id}", non_blocking=True)
        self.check_not_capturing()
        a = np.asarray(arr)
        if emulated:
            return torch.from_numpy(np.array(a, copy=True))
        host = torch.empty(a.shape, dtype=self.torch_dtype(a.dtype), pin_memory=True)
        if a.size:
            host.numpy()[...] = a
        with self.stream_for(ctx, device_id):
            return host.to(f"cuda:{device_id}", non_blocking=True)

    def to_host(self, arr: Any) -> np.ndarray:
        """A NumPy copy of a stored tensor (waits for the current context's stream)."""
        self.dtype_of(arr)  # a clear TypeError for bfloat16 and the like
        if _emulated() or arr.device.type == "cpu":
            return arr.detach().numpy().copy()
        with self.stream_for(None, arr.device.index):
            self._ready_stream(arr.device.index)  # it may have been made under another context
            return arr.detach().cpu().numpy()

    def from_external(self, data: Any) -> Any:
        """Wrap GPU data from another library (torch CUDA tensor, CuPy, DLPack) without a copy."""
        self.require()
        import torch

        if isinstance(data, torch.Tensor):
            t = data.detach()
        elif hasattr(data, "__cuda_array_interface__"):
            t = torch.as_tensor(data, device="cuda")  # syncs the interface's stream with torch's
        else:
            t = torch.from_dlpack(data)
        if t.device.type == "cuda" and not _emulated():  # ndd's kernels must see what torch's current stream wrote
            dev = t.device.index
            mine = self.stream(None, dev)
            self._wait(mine, torch.cuda.current_stream(dev))
            # The caller may drop its tensor while ndd's kernels still read it: the allocator
            # must not hand its memory out again before ndd's stream is done with it.
            t.record_stream(mine)
        return t

    def device_of(self, arr: Any) -> Device:
        """The ndd Device of external GPU data."""
        index = getattr(getattr(arr, "device", None), "index", None)
        return Device("gpu", index or 0)

    def _check_device_id(self, device_id: int) -> None:
        if _emulated():
            return
        n = self._device_count
        if device_id < n:
            return
        import torch

        n = self._device_count = torch.cuda.device_count()
        if device_id >= n:
            raise RuntimeError(f"Invalid device gpu:{device_id}: this machine has {n} CUDA device(s)")

    # -- array operations core needs on GPU data -----------------------------------
    def _on(self, arr: Any) -> Any:
        return self.stream_for(None, arr.device.index if arr.device.type == "cuda" else None)

    def astype(self, arr: Any, npd: Any, copy: bool) -> Any:
        """``arr`` converted to NumPy dtype ``npd`` (a copy when ``copy``), with the ``cast``
        operator's rounding and saturation, as core converts host data."""
        from .kernels._core import _saturate_cast

        dt = self.torch_dtype(npd)
        with self._on(arr):
            if arr.dtype == dt:
                return arr.clone() if copy else arr
            return _saturate_cast(arr, np.dtype(npd), dt)

    def copy(self, arr: Any) -> Any:
        with self._on(arr):
            return arr.clone()

    def stack(self, arrays: list, axis: int = 0) -> Any:
        import torch

        with self._on(arrays[0]):
            return torch.stack(arrays, dim=axis)

    def concatenate(self, arrays: list, axis: int = 0) -> Any:
        import torch

        with self._on(arrays[0]):
            return torch.cat(arrays, dim=axis)

    def full(self, shape: tuple, value: Any, npd: Any, device_id: int, ctx: EvalContext | None = None) -> Any:
        """``shape`` filled with ``value`` (NumPy dtype ``npd``) on GPU ``device_id``."""
        import torch

        dev = "cpu" if _emulated() else f"cuda:{device_id}"
        with self.stream_for(ctx, None if _emulated() else device_id):
            return torch.full(tuple(shape), value, dtype=self.torch_dtype(npd), device=dev)

    def pad_stack(self, samples: list, npd: Any) -> Any:
        """``samples`` zero-padded to their largest extent per axis and stacked (NumPy dtype
        ``npd``): one new tensor, filled on ndd's stream like the samples were."""
        import torch

        first = samples[0]
        shape = (len(samples),) + tuple(max(d) for d in zip(*(x.shape for x in samples)))
        with self._on(first):
            out = torch.zeros(shape, dtype=self.torch_dtype(npd), device=first.device)
            for i, x in enumerate(samples):
                out[(i,) + tuple(slice(0, d) for d in x.shape)] = x
        return out

    def broadcast(self, arr: Any, shape: tuple) -> Any:
        """``arr`` broadcast to ``shape``, as new contiguous memory."""
        import torch

        with self._on(arr):
            return arr.expand(shape).clone(memory_format=torch.contiguous_format)

    # -- handing data out --------------------------------------------------------
    def to_torch(self, arr: Any) -> Any:
        """The stored tensor itself, safe to use on torch's current stream (zero copy)."""
        if not _emulated() and arr.device.type == "cuda":
            self._consumer_waits(arr)
        return arr

    def dlpack(self, arr: Any, stream: Any = None, **kwargs: Any) -> Any:
        """``__dlpack__`` with the consumer's ``stream`` made to wait for ndd's stream."""
        if _emulated() or arr.device.type != "cuda":
            return arr.__dlpack__(**kwargs)
        self._ready_stream(arr.device.index)
        with self.stream_for(None, arr.device.index):
            # torch syncs `stream` with its current stream, which is now ndd's.
            return arr.__dlpack__(stream=stream, **kwargs)

    def dlpack_device(self, arr: Any) -> tuple[int, int]:
        dev_type, dev_id = arr.__dlpack_device__()
        return int(dev_type), int(dev_id)

    def cuda_array_interface(self, arr: Any) -> dict:
        """Version 3 of the interface, naming ndd's stream as the one to synchronise with."""
        if _emulated() or arr.device.type != "cuda":
            raise AttributeError("emulated GPU data (NDD_CUDA_EMULATE=cpu) live in host memory and "
                                 "have no __cuda_array_interface__")
        d = dict(arr.__cuda_array_interface__)
        d["version"] = 3
        d["stream"] = self._ready_stream(arr.device.index).cuda_stream
        return d


# The mark of the last OnStream block left on each stream (by raw handle): a fresh object per
# block, so a wait can tell whether ndd ran anything on a stream since (CudaBackend._wait).
# Set when a block ends, after its work was queued: a consumer that reads the mark before
# recording its event has that work behind the event. Written from several threads: each
# write is one dict store under the interpreter lock, and a fresh object never equals an
# older mark.
_last_block: dict[int, object] = {}


class OnStream:
    """``torch.cuda.stream(s)``: ``s`` current on this thread for a block, then the thread's
    device and streams as they were.

    Hand-written because it runs for every operator call and device-graph replay, and torch's
    context manager makes about twenty Python calls per use (device lookups, Stream and device
    objects), tens of µs on a busy host. This makes three or four calls to the functions of
    torch's C module that torch.cuda's own stream functions call; setting a stream also makes
    its device current. Every block leaves a mark on its stream (``_last_block``).
    """

    __slots__ = ("_s", "_src", "_dst")

    def __init__(self, s: Any) -> None:
        self._s = s
        self._src: tuple = ()
        self._dst: tuple | None = None

    def __enter__(self) -> None:
        import torch

        c, s = torch._C, self._s
        dev, cur = s.device_index, c._cuda_getDevice()
        self._src = c._cuda_getCurrentStream(cur)  # (stream_id, device_index, device_type)
        self._dst = c._cuda_getCurrentStream(dev) if dev != cur else None
        c._cuda_setStream(stream_id=s.stream_id, device_index=dev, device_type=s.device_type)

    def __exit__(self, *exc: Any) -> None:
        import torch

        _last_block[self._s.cuda_stream] = object()
        for sid, dev, kind in ((self._dst, self._src) if self._dst is not None else (self._src,)):
            torch._C._cuda_setStream(stream_id=sid, device_index=dev, device_type=kind)


BACKEND = CudaBackend()


def register(reg: Registry) -> None:
    """Entry point (group ``ndd.devices``): install the "gpu" backend."""
    reg.add_device("gpu", BACKEND)
