"""Device graphs for capture mode (ours): the GPU part of a captured step as one CUDA graph.

Launching the GPU part of a step kernel by kernel costs host time per launch (on the
H200 sandbox the ~15 launches of the tutorial loop cost more than the whole CPU part of
a step). A :class:`GraphSession` captures that work once as a ``torch.cuda.CUDAGraph``
and replays it: each step only copies its host arrays into the graph's pinned input
buffers, replays the graph and copies the outputs out (a replay rewrites the same output
memory, and the loop may still hold the previous step's batches). The graph itself ends by
gathering every output into one buffer (its *arena*), so the copy out is one copy, and the
step's outputs are views of that copy.

What varies per step enters only through the input buffers; capture mode checks each
step's signature against the captured one (``Plan.graph_host`` in core) and runs a
step that differs kernel by kernel instead.

Under the test emulation (``NDD_CUDA_EMULATE=cpu``) there is no CUDA graph: a replay runs
the captured function again on the refilled buffers, which checks everything around the
graph (buffers, signatures, output copies) on machines without a GPU.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ndd import EvalContext
from ndd.plugins import BatchData, LazyBatchData

from ._backend import BACKEND, OnStream

# What a CUDA graph capture refuses because it would synchronise: reading a device value
# back (.item(), bool(), int() of a tensor), and outputs whose size depends on device values.
_SYNCING_OPS = frozenset({"aten::_local_scalar_dense", "aten::equal", "aten::nonzero", "aten::nonzero_static",
                          "aten::masked_select", "aten::_unique", "aten::_unique2", "aten::unique_dim",
                          "aten::unique_consecutive", "aten::repeat_interleave"})
# Indexing with a boolean mask also synchronises (its size depends on the mask's values).
_BOOL_INDEXED = frozenset({"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"})


def _to_host(func_name: str, args: tuple, kwargs: dict) -> bool:
    """True for a copy from a device to the host (``.cpu()``, ``.tolist()`` of device data)."""
    if func_name == "aten::_to_copy":
        dev = kwargs.get("device")
        return dev is not None and dev.type == "cpu" and args[0].device.type != "cpu"
    if func_name == "aten::copy_":
        return args[0].device.type == "cpu" and args[1].device.type != "cpu"
    return False


def _refusing_device_reads() -> Any:
    """A context (this thread) in which those operations, and copies to the host, raise with
    the operation's name. On CUDA they would invalidate the capture, and a failed capture
    leaves torch's allocator believing a capture is still under way; under the emulation
    they would pass unnoticed, and the graph would fail only on CUDA."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Refuse(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            name = func._schema.name
            kwargs = kwargs or {}
            if name in _SYNCING_OPS or _to_host(name, args, kwargs) or (name in _BOOL_INDEXED and any(
                    isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else ()))):
                raise RuntimeError(f"a kernel read device data back inside a device graph ({name})")
            return func(*args, **kwargs)

    return Refuse()


# One capture at a time in the process: captures share the capture stream (below), and two
# at once on one stream would record each other's kernels.
_capture_lock = threading.Lock()
_capture_streams: dict[int, Any] = {}


def _capture_stream(device_id: int) -> Any:
    """The stream device graphs are captured on, one per device for the process.

    torch hands streams out from a small pool per device and priority, round robin, so a
    stream made for each capture would sooner or later be one that other work uses (the
    EvalContext's own, a user's, a collective's), and that work would join the capture
    instead of running. Made once, at the high priority that the usual users of the pool
    (ndd's contexts, NCCL) do not ask for.
    """
    import torch

    s = _capture_streams.get(device_id)
    if s is None:  # under _capture_lock
        s = _capture_streams[device_id] = torch.cuda.Stream(device=device_id, priority=-1)
    return s


_ALIGN = 256  # bytes between output offsets in the arena: a view of any dtype is aligned


class _Arena:
    """The layout of a graph's outputs in one flat byte buffer: each tensor (a dense batch,
    or each sample of a ragged one) at its own aligned offset."""

    def __init__(self, outputs: dict) -> None:
        at = 0

        def place(t: Any) -> tuple:
            """(dtype, shape, contiguous strides, offset in elements): what a view needs, made
            once here rather than on each step."""
            nonlocal at
            off = at
            at += -(-t.numel() * t.element_size() // _ALIGN) * _ALIGN
            strides, step = [], 1
            for n in reversed(t.shape):
                strides.append(step)
                step *= n
            return t.dtype, tuple(t.shape), tuple(reversed(strides)), off // t.element_size()

        self.layout = {key: [(True, place(bd.dense)) if bd.dense is not None else (False, [place(x) for x in bd.samples])
                             for bd in bds] for key, bds in outputs.items()}
        self.nbytes = max(at, _ALIGN)

    @staticmethod
    def _view(buf: Any, views: dict, slot: tuple) -> Any:
        dt, shape, strides, offset = slot
        flat = views.get(dt)
        if flat is None:
            flat = views[dt] = buf.view(dt)
        return flat.as_strided(shape, strides, offset)

    def pack(self, buf: Any, outputs: dict) -> None:
        """Copy ``outputs`` into their places in ``buf`` (inside the graph: replays do it).

        One ``torch._foreach_copy_`` over the bytes of every output: on CUDA that is one or
        a few kernels for all of them (a step's outputs include every intermediate batch), so
        each replay launches fewer graph nodes than one copy per output would."""
        import torch

        dst, src = [], []

        def add(x: Any, slot: tuple) -> None:
            n = x.numel() * x.element_size()
            if n:
                at = slot[3] * x.element_size()  # the slot's offset, in elements
                dst.append(buf[at:at + n])
                src.append(x.contiguous().view(-1).view(torch.uint8))

        for key, bds in outputs.items():
            for bd, (dense, slots) in zip(bds, self.layout[key]):
                if dense:
                    add(bd.dense, slots)
                else:
                    for x, slot in zip(bd.samples, slots):
                        add(x, slot)
        if dst:
            torch._foreach_copy_(dst, src)

    def unpack(self, buf: Any) -> dict:
        """``{key: [BatchData]}`` of views of ``buf`` (a copy of the arena), each made when
        something reads it: a step's outputs include every intermediate batch of the graph,
        which the loop usually only passes on (a view of a torch tensor costs several µs)."""
        views: dict = {}

        def one(dense: bool, slots: Any) -> BatchData:
            if dense:
                return LazyBatchData(slots[1][0], lambda: self._view(buf, views, slots), dense=True)
            return LazyBatchData(len(slots), lambda: [self._view(buf, views, slot) for slot in slots])

        return {key: [one(dense, slots) for dense, slots in lay] for key, lay in self.layout.items()}


class GraphSession:
    """One device graph of a capture loop: captured on a private stream, replayed on the
    stream of its EvalContext, or with ``on_caller_stream`` on the stream current on the
    replaying thread (when the loop's own thread replays it as it takes each step: its
    training consumes the outputs there, so they need no wait between streams and their
    memory no cross-stream bookkeeping). A stream set for the context
    (``EvalContext(cuda_stream=...)``, ``ndd.set_current_stream``) is used either way."""

    def __init__(self, device_id: int, ctx: EvalContext, on_caller_stream: bool = False) -> None:
        self.device_id = device_id
        self.ctx = ctx
        self.on_caller_stream = on_caller_stream
        self.emulated = BACKEND.emulated
        self._graph: Any = None
        self._fn: Callable[[list], Any] | None = None
        self._pinned: Any = None  # the inputs' pinned host buffer: one copy uploads them all
        self._layout: list[tuple] = []  # (byte offset, torch dtype, shape) of each input in it
        self._host: list[np.ndarray] = []  # NumPy views of the pinned buffers (made once)
        self._device: Any = None  # the pinned buffer's copy on the device, which the graph reads
        self._static: list[Any] = []  # ... as each input's tensor
        self._arena: _Arena | None = None
        self._buf: Any = None  # the arena, written by each replay
        self._done: Any = None  # event after the last replay: its input copies have been read
        self._kept: list[Any] = []

    def _host_buffers(self, arrays: list[np.ndarray]) -> None:
        import torch

        at, self._layout = 0, []
        for a in arrays:
            self._layout.append((at, BACKEND.torch_dtype(a.dtype), a.shape))
            at += -(-a.nbytes // _ALIGN) * _ALIGN
        self._pinned = torch.empty(max(at, _ALIGN), dtype=torch.uint8, pin_memory=not self.emulated)
        self._host = [p.numpy() for p in self._views(self._pinned)]

    def _views(self, buf: Any) -> list[Any]:
        """Each input's tensor in ``buf`` (the pinned buffer or its copy on the device)."""
        return [buf[at:].view(dt)[:math.prod(shape)].view(shape) for at, dt, shape in self._layout]

    def _fill(self, arrays: list[np.ndarray]) -> None:
        if self._done is not None:
            self._done.synchronize()  # the last replay's copies have read the buffers
        for a, h in zip(arrays, self._host):
            if a.size:
                np.copyto(h, a, casting="no")

    def capture(self, arrays: list[np.ndarray], fn: Callable[[list], Any]) -> Any:
        """Capture ``fn(uploaded)`` (device work only) with ``arrays`` as the graph's inputs,
        run it once for these arrays and return its outputs, copied out."""
        import torch

        self._host_buffers(arrays)
        self._fill(arrays)
        self._fn = fn
        if self.emulated:
            self._device = self._pinned.clone()
            self._static = self._views(self._device)
            with _refusing_device_reads():
                return self._gather(self._run(fn))
        home = BACKEND.stream(self.ctx, self.device_id)
        dev = torch.device("cuda", self.device_id)
        # Captured on a stream of its own, which the kernels of this thread use meanwhile
        # (CudaBackend.stream): the EvalContext's stream is shared with other threads (the
        # training loop's hand-offs record events on it), and whatever any thread enqueues on
        # a capturing stream joins the capture instead of running. Replays run on ``home``.
        graph = torch.cuda.CUDAGraph()
        err: BaseException | None = None
        # capture_begin/end rather than torch.cuda.graph, whose entry synchronises the whole
        # device and empties the allocator's caches (on this thread, while the training loop
        # runs), and fails if any other capture is under way. The graph needs neither: it
        # reads no earlier work, and its constants exist before the capture. The stream
        # context is the outer one, so this thread's current stream is restored even when
        # CUDA rejects the capture at its end.
        try:
            with _capture_lock:  # the capture stream is shared
                capture = _capture_stream(self.device_id)
                with torch.cuda.device(dev), torch.cuda.stream(capture):
                    # thread_local: the training loop's own CUDA calls on other threads stay legal
                    # while this thread captures.
                    graph.capture_begin(capture_error_mode="thread_local")
                    BACKEND._graph.stream, BACKEND._graph.home = capture, home
                    try:
                        # All inputs in one copy: one node of the graph, not one per input.
                        self._device = torch.empty_like(self._pinned, device=dev)
                        self._device.copy_(self._pinned, non_blocking=True)
                        self._static = self._views(self._device)
                        with _refusing_device_reads():
                            self._gather(self._run(fn))
                    except Exception as e:  # noqa: BLE001 - raised below, not ending the capture's error
                        err = e
                    finally:
                        BACKEND._graph.stream = BACKEND._graph.home = None
                        graph.capture_end()
        except Exception:
            if err is None:
                raise
        if err is not None:  # the kernel's own error, rather than the invalidated capture's
            raise err
        self._graph = graph
        if self.on_caller_stream:  # constants the graph reads were made on `home`
            home.synchronize()
        # The replays' copies from the pinned inputs are not known to torch's host allocator
        # (it tracks copies by events, which a capture cannot record), so the buffers must not
        # go back to it before the last replay has read them.
        self._done = torch.cuda.Event()
        weakref.finalize(self, _wait_quietly, self._done)
        return self._replay()

    def _run(self, fn: Callable[[list], Any], capture: bool = True) -> Any:
        """``fn`` on the static inputs, with host-to-device copies refused (see
        ``CudaBackend.check_not_capturing``); a capture keeps the cached constants it reads
        (see ``CudaBackend.graph_keeps``), an emulated replay only reruns ``fn``."""
        BACKEND._graph.capturing = True
        kept: list[Any] | None = [] if capture else None
        BACKEND._graph.kept = kept
        try:
            return fn(self._static)
        finally:
            BACKEND._graph.capturing = False
            BACKEND._graph.kept = None
            if kept is not None:
                self._kept = kept

    def replay(self, arrays: list[np.ndarray]) -> Any:
        """This step's outputs: ``arrays`` into the input buffers, the graph replayed, the
        outputs copied out."""
        self._fill(arrays)
        if self.emulated:
            self._device.copy_(self._pinned)
            assert self._fn is not None
            return self._gather(self._run(self._fn, capture=False))
        return self._replay()

    def _gather(self, outputs: dict) -> dict | None:
        """The outputs into the arena (made at the first call); under the emulation, also
        copied out as a replay would."""
        import torch

        if self._arena is None:
            self._arena = _Arena(outputs)
            dev = "cpu" if self.emulated else torch.device("cuda", self.device_id)
            self._buf = torch.empty(self._arena.nbytes, dtype=torch.uint8, device=dev)
        self._arena.pack(self._buf, outputs)
        return self._arena.unpack(self._buf.clone()) if self.emulated else None

    def _replay_stream(self) -> Any:
        if self.on_caller_stream and self.ctx._explicit_stream(self.device_id) is None:
            return BACKEND.caller_stream(self.device_id, note=True)
        return BACKEND.stream(self.ctx, self.device_id)

    def _replay(self) -> Any:
        stream = self._replay_stream()
        with OnStream(stream):
            self._graph.replay()
            assert self._arena is not None
            out = self._arena.unpack(self._buf.clone())
            self._done.record(stream)
        return out

    def close(self) -> None:
        """Drop the graph and its buffers (after the last replay has read its inputs)."""
        if self._done is not None:
            self._done.synchronize()
        self._graph = self._fn = self._arena = self._buf = None
        self._pinned = self._device = None
        self._layout, self._host, self._static, self._kept = [], [], [], []

    @staticmethod
    def shape_only(bd: BatchData) -> BatchData:
        """A stand-in for device batch ``bd`` with its shapes and dtypes and no data (torch
        "meta" tensors): it pickles in a few bytes, so a capture worker process can run the
        graph's host pass, which reads only the shapes of device inputs."""
        import torch

        def meta(t: Any) -> Any:
            return torch.empty(t.shape, dtype=t.dtype, device="meta")

        if bd.dense is not None:
            return BatchData(dense=meta(bd.dense))
        return BatchData(samples=[meta(s) for s in bd.samples])


def _wait_quietly(done: Any) -> None:
    """Wait for a dropped session's last replay (at exit, CUDA may already be shutting down)."""
    try:
        done.synchronize()
    except Exception:  # noqa: BLE001, S110 - nothing to protect once CUDA is gone
        pass
