"""The capture-mode loop: trace the first step, then answer calls from a prefetching pipeline.

Flow of a reader loop (``reader.next_epoch(batch_size=B, capture=True)``):

1. **Trace** (first step ever): the reader's batch is read eagerly, wrapped as
   :class:`CapturedBatch` and yielded. While the body runs, every operator call on this
   thread reaches :meth:`CaptureLoop.on_call` through core's op-call hook; it runs
   eagerly and is recorded as a node when all its inputs and arguments are captured
   batches of this step, invariant-marked, or proven constant from the source.
2. **Build**: the nodes form the graph; a :class:`~._pipeline.Worker` pulls the next
   source items and computes every node ``depth`` steps ahead.
3. **Replay**: a call at a captured site with matching arguments returns the
   precomputed result; anything else runs eagerly (and is reported).

Call sites are identified by the chain of ``(code, instruction offset)`` pairs from
the calling frame up to the frame that runs the ``for`` loop, so one helper reached
by two paths gives two sites.
"""

from __future__ import annotations

import ast
import contextlib
import dis
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from ndd import Device, EvalContext
from ndd._batch import Batch
from ndd._dispatch import Plan, invoke
from ndd._eval import _is_internal
from ndd._external_source import PASS_END
from ndd._plugins import device_backend
from ndd._schema import OutMeta
from ndd._storage import BatchData
from ndd.random._rng import LIVE_RNGS, RNG, get_default_rng

from ._device_graph import DeviceGraph
from ._invariant import is_invariant, unwrap_invariants
from ._pipeline import END, EagerStep, Failure, Worker
from ._processes import OnLoopThread, ProcessWorker, SplitWorker, graph_spec
from ._report import CaptureReport, Fallback, SiteRecord
from ._source_analysis import _Module, _module_for, analyze_call

_tls = threading.local()
def default_worker_processes() -> int:
    """How many worker processes a capture pipeline uses unless told (ours).

    ``NDD_CAPTURE_PROCESSES`` when set; otherwise half the CPU cores this process may run
    on (shared among the ranks of this node under ``torchrun``: ``LOCAL_WORLD_SIZE``), at
    least 2 and at most 4; 0 (threads) with fewer than 2 cores and on Windows.
    """
    env = os.environ.get("NDD_CAPTURE_PROCESSES", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"NDD_CAPTURE_PROCESSES must be a non-negative integer, got {env!r}") from None
        if n < 0:
            raise ValueError(f"NDD_CAPTURE_PROCESSES must be a non-negative integer, got {env!r}")
        return n
    if sys.platform == "win32":
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        cores //= max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        pass
    return 0 if cores < 2 else min(max(cores // 2, 2), 4)


# gpu_thread None: chosen per pipeline (see set_gpu_thread)
_settings = {"depth": 2, "processes": default_worker_processes(), "graphs": True, "gpu_thread": None, "graph_steps": 1}
RNG_ERROR = ("The RNG of a captured operator was used unexpectedly: the number of random draws per "
             "iteration changed or the RNG was modified outside the loop")


def set_worker_processes(processes: int | None) -> None:
    """Run reader-driven capture pipelines in this many worker processes (ours).

    Processes escape the interpreter lock, so the pipeline uses several cores even where a
    step is mostly Python (small images): on the MNIST-like loop on 2 cores, 2 processes
    give about 1.7x the samples/s of the thread pipeline. Each process rebuilds the
    reader, reads only its own steps and computes them with the same plans and RNG
    placement, so results are identical. 0 runs the pipeline on threads in this process;
    None restores the default (:func:`default_worker_processes`). Loops with feeders,
    ExternalSource loops, GPU graphs, readers whose class a new process cannot import
    (defined in ``__main__`` or in a function) and graphs whose constants cannot be
    pickled always use threads; ``ndd.capture.report().worker`` says which ran and why.
    """
    if processes is None:
        processes = default_worker_processes()
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 0:
        raise ValueError(f"processes must be a non-negative integer, got {processes!r}")
    _settings["processes"] = processes


def set_device_graphs(enabled: bool) -> None:
    """Replay the GPU part of a split capture pipeline as one device graph (ours; default on).

    With worker processes, the GPU operators of a captured step run on a thread of the
    loop's process; when all of them are graphable, their kernels are captured once as a
    CUDA graph and replayed each step (see ``docs/capture-mode.md``), with the same results.
    ``ndd.capture.report().worker`` says whether a graph ran, and why not. Applies to loops
    whose pipeline starts afterwards.
    """
    if not isinstance(enabled, bool):
        raise ValueError(f"enabled must be True or False, got {enabled!r}")
    _settings["graphs"] = enabled


def set_gpu_thread(enabled: bool | None) -> None:
    """Run the GPU part of a split capture pipeline on a thread of its own (True), or on the
    loop's thread when it takes each step (False); None (the default) chooses per pipeline:
    the loop's thread when the GPU part replays as one device graph, a thread of its own
    when it runs kernel by kernel (ours).

    Its own thread computes steps ahead and overlaps the training step where that releases
    the interpreter lock (the backward pass), but shares the lock with it and hands each
    step over between threads. On the loop's thread a device graph replays on the loop's
    current stream, where the training reads its outputs, so no stream waits are needed;
    the GPU work stays asynchronous. On an H200 (tutorial loop, samples/s, pairs measured
    side by side): kernel by kernel the thread was faster (24.0k against 18.4k); as a
    device graph the loop's thread was ahead in 7 of 10 pairs (medians 37.7k against
    36.7k; that machine's speed varied by 25% between runs). Results are the same either
    way. Applies to loops whose pipeline starts afterwards.
    """
    if enabled is not None and not isinstance(enabled, bool):
        raise ValueError(f"enabled must be True, False or None, got {enabled!r}")
    _settings["gpu_thread"] = enabled


def set_graph_steps(steps: int) -> None:
    """Replay the device graph of a split capture pipeline for this many steps at once, on the
    loop's thread (ours; default 1).

    The graph then holds ``steps`` copies of a step's GPU work: the loop's thread takes that
    many steps from the worker processes, fills the graph's inputs, replays it and copies its
    outputs out once for all of them, and hands the steps out one by one. The host cost of a
    replay (filling, launching, copying out) is shared by the steps; the worker processes keep
    at least twice as many steps ready (the prefetch depth grows to match). Results are the
    same. Applies to loops whose pipeline starts afterwards, where the GPU part replays as
    one device graph on the loop's thread (``set_gpu_thread``).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    _settings["graph_steps"] = steps


def set_prefetch_depth(depth: int) -> None:
    """How many steps the pipeline computes ahead of the loop (ours; default 2).

    Applies to loops created afterwards. More depth hides more jitter and holds more
    batches in memory.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"prefetch depth must be a positive integer, got {depth!r}")
    _settings["depth"] = depth


def _print_report(loop: CaptureLoop) -> None:
    if os.environ.get("NDD_CAPTURE_REPORT") == "1":
        print(loop.report, file=sys.stderr)


class CaptureError(RuntimeError):
    """Raised in strict capture mode by a call the pipeline does not answer (ours)."""


class CapturedBatch(Batch):
    """A Batch produced in a capture-mode step; it remembers which node made it and when."""

    __slots__ = ("_ref", "_step")


def _captured(b: Batch, ref: tuple[int, int], step: int) -> CapturedBatch:
    cb = CapturedBatch._wrap(b._bd, b._dtype, b._layout, b._device, b._ndim, b._bs,
                             inv=b._inv, idx=b._idx, ext=b._ext)
    cb._ref = ref
    cb._step = step
    return cb


def _from_data(bd: Any, meta: Any, device: Device, batch_size: int, ref: tuple[int, int],
               step: int) -> CapturedBatch:
    cb = CapturedBatch._wrap(bd, meta.dtype, meta.layout, device, meta.ndim, batch_size)
    cb._ref = ref
    cb._step = step
    return cb


# Above this many bytes of results per step the pipeline stays on threads: such steps are
# large images whose C kernels release the interpreter lock (threads already use every
# core), and the copy back from a process would cost more than it saves (ImageNet-like
# 256->224 loop, ~60 MiB a step: 1,442 samples/s in 2 processes against 1,710 eager).
PROCESS_MAX_STEP_BYTES = 8 << 20


def _host_part(nodes: list[Node]) -> tuple[set[int], set[int]]:
    """How a worker process can share a step: the ids of the nodes it computes (CPU
    operators whose inputs come from the reader or from such nodes), and of the staged GPU
    nodes (see :meth:`ndd._dispatch.Plan.run`) on such inputs, whose host stage it runs.
    The rest (GPU operators and what depends on them) stay in this process."""
    host, staged = {0}, set()
    for n in nodes:
        refs = [s[1][0] for s in n.inputs if s is not None and s[0] == "ref"]
        refs += [s[1][0] for s in n.kwargs.values() if s[0] == "ref"]
        if all(r in host for r in refs):
            if n.plan.device.device_type == "cpu":
                host.add(n.id)
            elif n.plan.staged:
                staged.add(n.id)
    host.discard(0)
    return host, staged


def _computed_nbytes(b: Batch) -> int:
    """The bytes of a batch's data if it was computed (0 for a call still pending or failed)."""
    if b._bd is None and (b._inv is None or not b._inv.done):
        return 0
    try:
        bd = b._batch_data()
    except Exception:  # noqa: BLE001 - the call failed; the loop has reported it
        return 0
    if bd.dense is not None:
        return int(getattr(bd.dense, "nbytes", 0))
    return sum(int(getattr(x, "nbytes", 0)) for x in bd.samples)


def _meta(b: Batch) -> OutMeta:
    return OutMeta(b.dtype, b.ndim, b.layout)


def _describe(m: OutMeta) -> str:
    return f"{m.dtype} data of {m.ndim} dimension(s), layout {m.layout!r}"


class Node:
    """One captured call: its op, where it was called and how to rebuild its arguments."""

    __slots__ = ("id", "schema", "key", "inputs", "kwargs", "device", "explicit_device", "rng",
                 "offset", "n_out", "record", "out_meta", "in_layouts", "plan", "checks", "kw_names",
                 "device_ok")

    def __init__(self, nid: int, schema: Any, key: tuple, inputs: list, kwargs: dict, device: Device,
                 explicit_device: Device | None, rng: RNG | None, offset: int, n_out: int,
                 record: SiteRecord) -> None:
        self.id = nid
        self.schema = schema
        self.key = key
        self.inputs = inputs
        self.kwargs = kwargs
        self.device = device
        self.explicit_device = explicit_device
        self.rng = rng
        self.offset = offset
        self.n_out = n_out
        self.record = record
        self.out_meta: list[OutMeta] = []
        self.in_layouts: list = []
        self.plan: Plan | None = None
        self.checks: list[tuple[str, Any, bool]] = []  # (label, spec, is a keyword) of each input, then keyword (_replay)
        self.kw_names: frozenset[str] = frozenset()
        # The last ``device=`` object a replay accepted (a str or Device), compared by identity
        # first: a call site passes the same literal "gpu" on every step.
        self.device_ok: Any = None


class _RNGTrack:
    __slots__ = ("rng", "start", "version", "period", "clone")

    def __init__(self, rng: RNG, start: int) -> None:
        self.rng = rng
        self.start = start  # _draws at the start of the traced step
        self.version = rng._version
        self.period = 0
        self.clone: RNG | None = None


def _same_value(a: Any, b: Any) -> bool:
    try:
        eq = a == b
        if isinstance(eq, np.ndarray):
            return bool(np.all(eq))
        return bool(eq)
    except Exception:  # noqa: BLE001 - incomparable values are different
        return False


def _flatten(outs: Any) -> tuple[list, Any]:
    """Source outputs as a list plus a function rebuilding the user-facing structure."""
    if isinstance(outs, dict):
        keys = list(outs)
        return [outs[k] for k in keys], lambda vals: dict(zip(keys, vals))
    if isinstance(outs, tuple):
        return list(outs), tuple
    return [outs], lambda vals: vals[0]


class CaptureLoop:
    """The state of one capture-mode loop across its steps and epochs."""

    def __init__(self, batch_size: int, ctx: EvalContext, strict: bool, depth: int) -> None:
        self.batch_size = batch_size
        self.ctx = ctx
        self.given_ctx = False  # ctx came from the caller's ctx=: each step's body runs in it
        self.strict = strict
        self.depth = depth
        self.nodes: list[Node] = []
        self.sites: dict[tuple, Node] = {}
        self.records: dict[tuple, SiteRecord] = {}
        self.chain_codes: list[Any] = []  # the code objects the keys above name by id
        self.report = CaptureReport(batch_size)
        self.step = -1
        self.tracing = False
        self.eager_only = False
        self.invalid: str | None = None
        self.loop_frame: Any = None
        # The frames on the stack when the step was taken: a body call's chain ends at the
        # first of them it meets. That is the loop's frame itself, or, when the reader's
        # iterator is wrapped (a tqdm-style generator, a helper calling next()), the frame
        # of the loop that drives the wrapper, which the body's calls pass through.
        self.loop_stack: frozenset = frozenset()
        # For the frames of loop_stack that run a ``for`` over the loop (or over its wrapper):
        # the instruction offsets of that ``for``'s body. A frame outside them has left the
        # loop (a ``break`` while the iterator is still referenced): its calls are not the body's.
        self.bodies: dict[Any, frozenset[int]] = {}
        # The frames of loop_stack a body call may meet first: the loop's frame, the frames
        # running a ``for`` over it (above), and, for a helper that called next() and returned,
        # its caller. Meeting another (an outer frame of a loop left long ago) is not the body.
        self.anchors: frozenset = frozenset()
        self.in_step = False  # a step was handed to the body, which has not finished it
        self.iterator: object | None = None  # the token of the generator now driving the loop
        self.current: dict[int, list[Batch]] = {}
        self.rng_tracks: dict[int, _RNGTrack] = {}
        self.rng_start: dict[int, tuple[RNG, int]] = {}
        self.random_seen: set = set()
        self.worker: Worker | None = None
        self.source: Iterator | None = None
        self.carry: Any = None
        self.feeders: list[Any] = []  # ExternalSource instances read in the body, in trace order
        self.feeder_ids: dict[int, int] = {}  # id(es) -> node id of its outputs
        self.fed: set[int] = set()  # feeders read in the current step
        self.step_raws: tuple = ()  # the current step's (ExternalSource, item) pairs read ahead
        self.feeder_meta: dict[int, list[OutMeta]] = {}
        self.feeder_sites: dict[int, str] = {}  # node id -> "file:line" of the body's read
        self.root: Any = None  # the ExternalSource driving the loop, if any
        self.reader: Any = None  # the reader driving the loop, if any
        self.source_meta: list | None = None  # dtype/ndim/layout of the source outputs
        self.source_rebuild: Any = None
        self.trace_outs: list[tuple[int, Batch]] = []  # the traced step's results, by node (to size a step)
        self.device_nodes: list[Node] = []  # the nodes a split pipeline runs in this process
        self.staged_ids: set[int] = set()  # ... of which these run only their device stage here
        self.step_bytes = 0
        self.rebase = False
        self.generation = 0  # bumped by set_state: a running epoch iterator then ends (as in eager mode)
        _tls.last_report = self.report

    # -- call-site identity ---------------------------------------------------------------
    def _chain(self) -> tuple[Any, tuple | None]:
        f = sys._getframe(3)  # _hook <- ndd._dispatch.call <- the op function
        while f is not None and _is_internal(f.f_globals.get("__name__", "")):
            f = f.f_back
        site = f
        loop = self.loop_frame
        stack = self.loop_stack
        chain = []
        while f is not None:
            # By the code's id: a key is hashed several times per call, and a code object's hash
            # walks its constants (a whole script's, for a loop at module level). _record
            # keeps the codes of every recorded key alive, so their ids stay theirs.
            chain.append((id(f.f_code), f.f_lasti))
            if f is loop or f in stack:
                body = self.bodies.get(f)
                if f not in self.anchors or (body is not None and f.f_lasti not in body):
                    return site, None  # after the loop: it was left, its iterator kept
                return site, tuple(chain)
            f = f.f_back
        return site, None

    def _record(self, key: tuple, schema: Any, site: Any) -> SiteRecord:
        rec = self.records.get(key)
        if rec is None:
            code = site.f_code if site is not None else None
            rec = SiteRecord(schema.name, code.co_filename if code else "?",
                             site.f_lineno if site is not None else 0, _column(site), False)
            self.records[key] = rec
            self.report.sites.append(rec)
            f = site  # the frames of the key's chain (see _chain)
            while f is not None:
                self.chain_codes.append(f.f_code)
                if f is self.loop_frame or f in self.loop_stack:
                    break
                f = f.f_back
        return rec

    # -- the hook ---------------------------------------------------------------------------
    def on_call(self, schema: Any, inputs: tuple, kwargs: dict) -> Any:
        if self.invalid:
            raise RuntimeError("The capture-mode loop was invalidated and cannot continue.")
        site, chain = self._chain()
        if chain is None:  # not reached from the loop body (e.g. a leftover loop's context)
            return invoke(schema, inputs, kwargs)
        # A context the body enters itself (``with ctx:`` in the loop, as DALI allows) gives
        # the same values: the captured calls run in the pipeline's context. Not on another
        # device, where the pipeline's results are not.
        cur, mine = EvalContext._current_device_id(), self.ctx.device_id
        if cur != mine and cur is not None and mine is not None:
            self._teardown("Cannot change EvalContext for a capture-mode loop.")
            raise RuntimeError("Cannot change EvalContext for a capture-mode loop.")
        key = (schema.name, chain)
        if self.tracing:
            return self._trace(schema, inputs, kwargs, key, site)
        return self._replay(schema, inputs, kwargs, key, site)

    # -- tracing ----------------------------------------------------------------------------
    def _trace(self, schema: Any, inputs: tuple, kwargs: dict, key: tuple, site: Any) -> Any:
        raw_in = tuple(unwrap_invariants(x) for x in inputs)
        raw_kw = {k: unwrap_invariants(v) for k, v in kwargs.items()}
        rng = None
        offset = 0
        if schema.random:
            rng = raw_kw.get("rng")
            if rng is None:
                rng = get_default_rng()
            if isinstance(rng, RNG):
                if id(rng) not in self.rng_start:  # created during this step: all its draws are the step's
                    self.rng_start[id(rng)] = (rng, 0)
                offset = rng._draws - self.rng_start[id(rng)][1]
        result = invoke(schema, raw_in, dict(raw_kw))
        rec = self._record(key, schema, site)
        rec.eager += 1
        code, reason, spec = self._classify(schema, inputs, kwargs, raw_in, raw_kw, result, site, key)
        if code is not None:
            if not rec.captured:
                rec.code, rec.reason = code, reason
            if self.strict:
                raise CaptureError(f"{schema.name} at {rec.filename}:{rec.lineno} was not captured: "
                                   f"{code}: {reason}")
            return result
        in_spec, kw_spec, dev, explicit = spec
        node = self.sites.get(key)
        outs = result if isinstance(result, tuple) else (result,)
        if node is None:
            node = Node(len(self.nodes) + 1, schema, key, in_spec, kw_spec, dev, explicit,
                        rng if isinstance(rng, RNG) else None, offset, len(outs), rec)
            node.out_meta = [_meta(o) for o in outs]
            node.in_layouts = [x._layout if isinstance(x, Batch) else None for x in raw_in]
            self.nodes.append(node)
            self.sites[key] = node
            rec.captured, rec.code, rec.reason = True, None, None
            if node.rng is not None:
                self._track(node.rng)
                self.random_seen.add(key)
        self.trace_outs.extend((node.id, o) for o in outs)
        wrapped = tuple(_captured(o, (node.id, k), self.step) for k, o in enumerate(outs))
        return wrapped if isinstance(result, tuple) else wrapped[0]

    def _track(self, rng: RNG) -> None:
        if id(rng) not in self.rng_tracks:
            start = self.rng_start.get(id(rng))
            self.rng_tracks[id(rng)] = _RNGTrack(rng, start[1] if start else rng._draws)

    def _classify(self, schema: Any, inputs: tuple, kwargs: dict, raw_in: tuple, raw_kw: dict,
                  result: Any, site: Any, key: tuple) -> tuple[str | None, str | None, Any]:
        if not schema.capturable:
            if schema.side_effects:
                return "NDD-C101", f"`{schema.name}` has side effects (it writes files) and is never captured", None
            return "NDD-C101", f"`{schema.name}` (slicing, arithmetic or ndd.math) is not captured", None
        first = result[0] if isinstance(result, tuple) else result
        if not isinstance(first, Batch):
            return "NDD-C102", f"`{schema.name}` was called on single samples (it returned a Tensor)", None
        if first.batch_size != self.batch_size:
            return ("NDD-C103", f"`{schema.name}` made a batch of {first.batch_size}, the loop uses "
                                f"{self.batch_size}", None)
        if schema.random and key in self.random_seen:
            level, f = 1, sys._getframe()
            while f is not None and f is not site:  # the warning names the user's line
                f, level = f.f_back, level + 1
            warnings.warn(
                "A random operator call site runs more than once per iteration. Only the first call "
                "each iteration uses the captured pipeline; the rest run eagerly.",
                UserWarning, stacklevel=level if f is not None else 2,
            )
            return "NDD-C106", "this random call site runs more than once per step", None
        analysis = None

        def proof(kind: str, name: Any) -> tuple[str | None, str | None]:
            nonlocal analysis
            if site is None:
                return "NDD-C107", "the call site could not be found"
            if analysis is None:
                analysis = analyze_call(site, site.f_lasti)
            if analysis.code is not None:
                return analysis.code, analysis.reason
            p = analysis.positional(name) if kind == "input" else analysis.keyword(name)
            return (None, None) if p.constant else (p.code, p.reason)

        def spec_of(kind: str, name: Any, marked: Any, raw: Any) -> tuple[Any, str | None, str | None]:
            label = f"input {name}" if kind == "input" else f"argument '{name}'"
            if raw is None:
                return None, None, None
            if isinstance(raw, CapturedBatch) and raw._step == self.step:
                return ("ref", raw._ref), None, None
            if is_invariant(marked):
                return ("inv", raw), None, None
            if isinstance(raw, Batch):
                return None, "NDD-C104", (f"{label} is not a batch produced by a captured call in this "
                                          "step (slicing, arithmetic, a rebuilt or an earlier batch)")
            code, why = proof(kind, name)
            if code is not None:
                return None, code, f"{label}: {why}"
            return ("const", raw), None, None

        try:
            in_spec = []
            for i, (m, r) in enumerate(zip(inputs, raw_in)):
                s, code, why = spec_of("input", i, m, r)
                if code:
                    return code, why, None
                in_spec.append(s)
            kw_spec = {}
            explicit = None
            for k, m in kwargs.items():
                r = raw_kw[k]
                if k in ("batch_size", "rng") or r is None:
                    continue
                if k == "device":
                    explicit = r if isinstance(r, Device) else Device(r)
                    continue
                s, code, why = spec_of("kwarg", k, m, r)
                if code:
                    return code, why, None
                kw_spec[k] = s
            node = self.sites.get(key)
            if node is not None and not self._same_spec(node, in_spec, kw_spec, explicit):
                return "NDD-C105", "this call site was already captured in this step with other arguments", None
            return None, None, (in_spec, kw_spec, first.device, explicit)
        finally:
            if analysis is not None:
                analysis.release()

    @staticmethod
    def _same_spec(node: Node, in_spec: list, kw_spec: dict, explicit: Device | None) -> bool:
        if len(node.inputs) != len(in_spec) or set(node.kwargs) != set(kw_spec) or node.explicit_device != explicit:
            return False
        pairs = list(zip(node.inputs, in_spec)) + [(node.kwargs[k], kw_spec[k]) for k in kw_spec]
        for a, b in pairs:
            if (a is None) != (b is None):
                return False
            if a is not None and (a[0] != b[0] or not _same_value(a[1], b[1])):
                return False
        return True

    # -- replay -----------------------------------------------------------------------------
    def _fallback(self, schema: Any, inputs: tuple, kwargs: dict, rec: SiteRecord, code: str,
                  reason: str) -> Any:
        rec.eager += 1
        self.report.fallbacks.append(Fallback(rec, self.step, code, reason))
        if self.strict:
            raise CaptureError(f"{schema.name} at {rec.filename}:{rec.lineno} ran eagerly: {code}: {reason}")
        raw_in = tuple(unwrap_invariants(x) for x in inputs)
        raw_kw = {k: unwrap_invariants(v) for k, v in kwargs.items()}
        return invoke(schema, raw_in, raw_kw)

    def _replay(self, schema: Any, inputs: tuple, kwargs: dict, key: tuple, site: Any) -> Any:
        bs = kwargs.get("batch_size")
        if bs is not None and bs is not self.batch_size and unwrap_invariants(bs) != self.batch_size:
            # at any site, captured or not (as DALI from the first replayed step on)
            raise RuntimeError(f"Cannot change batch size to {unwrap_invariants(bs)}, the capture-mode "
                               f"loop uses {self.batch_size}.")
        node = self.sites.get(key)
        if node is None:
            rec = self._record(key, schema, site)
            if not rec.captured and rec.code is None:
                rec.code, rec.reason = "NDD-C201", "this call site was not reached on the traced step"
            return self._fallback(schema, inputs, kwargs, rec, rec.code or "NDD-C201",
                                  rec.reason or "not captured")
        rec = node.record
        dev = kwargs.get("device")
        if dev is not None and dev is not node.device_ok:
            self._check_device(node, dev)
        if len(inputs) != len(node.inputs):
            return self._fallback(schema, inputs, kwargs, rec, "NDD-C204", "the number of inputs changed")
        # The keyword names with a value, but batch_size, device and rng: the traced call's. The
        # usual call passes exactly those (compared in C); a None among them is caught below.
        if kwargs.keys() != node.kw_names:
            names = {k for k, v in kwargs.items() if v is not None and k not in ("batch_size", "device", "rng")}
            if names != node.kw_names:
                return self._fallback(schema, inputs, kwargs, rec, "NDD-C204", "the keyword arguments changed")
        step = self.step
        for (label, s, keyword), v in zip(node.checks, [*inputs, *map(kwargs.__getitem__, node.kwargs)]):
            if s is None:
                if v is not None:
                    return self._fallback(schema, inputs, kwargs, rec, "NDD-C204", f"{label} was None when traced")
                continue
            if v is None and keyword:
                return self._fallback(schema, inputs, kwargs, rec, "NDD-C204", "the keyword arguments changed")
            kind, val = s
            if kind == "ref":
                # The usual value, a batch of this step, is never an invariant marker: no unwrapping.
                raw = v if type(v) is CapturedBatch else unwrap_invariants(v)
                if not (isinstance(raw, CapturedBatch) and raw._ref == val and raw._step == step):
                    return self._fallback(schema, inputs, kwargs, rec, "NDD-C202",
                                          f"{label} is not the batch the traced call received in this step")
                continue
            if kind == "inv":
                if not is_invariant(v):
                    self._teardown("invariant marker dropped")
                    raise RuntimeError("An argument marked with ndd.capture.invariant when captured must "
                                       "remain marked.")
                continue
            if v is val:  # the traced object itself (a literal the compiler keeps, a named constant)
                continue
            raw = unwrap_invariants(v)
            if isinstance(raw, Batch) or not _same_value(raw, val):
                return self._fallback(schema, inputs, kwargs, rec, "NDD-C203",
                                      f"{label} changed from {val!r} to {raw!r}")
        outs = self.current.get(node.id)
        if node.rng is not None:
            rng = unwrap_invariants(kwargs.get("rng")) or get_default_rng()
            if rng is not node.rng:
                return self._fallback(schema, inputs, kwargs, rec, "NDD-C204", "a different RNG was passed")
            if key in self.random_seen:
                return self._fallback(schema, inputs, kwargs, rec, "NDD-C106",
                                      "this random call site already ran in this step")
            self.random_seen.add(key)
            tr = self.rng_tracks[id(rng)]
            expect = tr.start + self.rel_step * tr.period + node.offset
            if rng._version != tr.version or rng._draws != expect:
                self._teardown("rng")
                raise RuntimeError(RNG_ERROR)
            if outs is not None:
                rng._skip(7)  # advance(7) without its argument check (an eager call draws itself)
        if outs is None:  # a step the pipeline could not compute (EagerStep): as in eager mode
            rec.eager += 1
            result = invoke(schema, tuple(unwrap_invariants(x) for x in inputs),
                            {k: unwrap_invariants(v) for k, v in kwargs.items()})
            got = result if isinstance(result, tuple) else (result,)
            wrapped = tuple(_captured(o, (node.id, k), step) for k, o in enumerate(got))
            return wrapped if isinstance(result, tuple) else wrapped[0]
        rec.replayed += 1
        if node.n_out == 1:
            return _from_data(outs[0], node.out_meta[0], node.device, self.batch_size, (node.id, 0), step)
        return tuple(_from_data(bd, m, node.device, self.batch_size, (node.id, k), step)
                     for k, (bd, m) in enumerate(zip(outs, node.out_meta)))

    def _check_device(self, node: Node, arg: Any) -> None:
        """Raise (ending the loop) when a replayed call's ``device=`` is not the traced one."""
        dev = unwrap_invariants(arg)
        dev = dev if isinstance(dev, Device) else Device(dev)
        traced = node.explicit_device or node.device
        if dev != traced:
            self._teardown("device changed")
            raise RuntimeError(
                f"Captured operator was traced with device={traced.device_type} but called with "
                f"device={dev.device_type}. Cannot change device in capture mode.")
        if type(arg) is str or type(arg) is Device:
            node.device_ok = arg

    # -- steps ------------------------------------------------------------------------------
    @property
    def rel_step(self) -> int:
        return self.step - self.trace_step

    def begin_step(self, loop_frame: Any) -> None:
        self.step += 1
        self.report.steps += 1
        self.loop_frame = loop_frame
        self.random_seen = set()
        self.fed = set()
        stack = []
        f = loop_frame
        while f is not None:
            stack.append(f)
            f = f.f_back
        self.loop_stack = frozenset(stack)
        self.bodies = {}
        for f in stack:
            body = _for_body(f)
            if body is not None:
                self.bodies[f] = body
        anchors = {loop_frame, *self.bodies}
        if loop_frame is not None and loop_frame not in self.bodies and loop_frame.f_back is not None:
            anchors.add(loop_frame.f_back)
        self.anchors = frozenset(anchors)
        if self.tracing:
            self.trace_step = self.step
            self.rng_start = {id(r): (r, r._draws) for r in list(LIVE_RNGS)}
        elif self.rng_tracks:
            for tr in self.rng_tracks.values():
                if tr.rng._version != tr.version or tr.rng._draws != tr.start + self.rel_step * tr.period:
                    self._teardown("rng")
                    raise RuntimeError(RNG_ERROR)

    def end_trace(self) -> None:
        """After the traced step: compute RNG periods and start the pipeline."""
        self.tracing = False
        self.report.traced = True
        for tr in self.rng_tracks.values():
            if tr.rng._version != tr.version:
                self._teardown("rng")
                raise RuntimeError(RNG_ERROR)
            tr.period = tr.rng._draws - tr.start
            tr.clone = tr.rng.clone()
        self._build_plans()
        _print_report(self)

    def _build_plans(self) -> None:
        """Prepare every node once: constants converted, kernel chosen (the worker's fast path)."""
        for node in self.nodes:
            consts = {k: s[1] for k, s in node.kwargs.items() if s[0] != "ref"}
            refs = [k for k, s in node.kwargs.items() if s[0] == "ref"]
            node.plan = Plan(node.schema, consts, refs, node.in_layouts, node.out_meta, self.batch_size,
                             node.device, self.ctx)
            # What _replay compares each call against, with the labels its messages use
            # (made once here rather than on every call), from the traced values: a constant
            # input is compared with the value the user passed, not its batch below.
            node.checks = [(f"input {i}", s, False) for i, s in enumerate(node.inputs)]
            node.checks += [(f"argument '{k}'", s, True) for k, s in node.kwargs.items()]
            node.kw_names = frozenset(node.kwargs)
            node.inputs = [s if s is None or s[0] == "ref" else ("data", _broadcast(s[1], self.batch_size))
                           for s in node.inputs]

    def compute(self, item: Any, k: int) -> tuple[Any, Any, dict[int, list[BatchData]]] | EagerStep:
        """Worker side: run every node for the ``k``-th step after the worker started (an
        :class:`EagerStep` if one fails)."""
        extra, outs = item
        src, _ = _flatten(outs)
        vals: dict[int, list[BatchData]] = {0: [b._batch_data() for b in src]}
        # A root whose items changed type, dimensions or layout since the traced step: the
        # captured calls would be wrong for them, so the body runs this step as in eager mode
        changed = self.source_meta is not None and [_meta(b) for b in src] != self.source_meta
        if self.feeders:
            raws = {id(es): raw for es, raw in extra[2]}
            ran_out = False
            for es in self.feeders:
                if raws[id(es)] is PASS_END:  # the body's read of it raises (see feed): the step
                    ran_out = True             # runs as in eager mode
                    continue
                flat, _ = _flatten(es._convert(raws[id(es)], self.batch_size))
                nid = self.feeder_ids[id(es)]
                metas = [_meta(b) for b in flat]
                if nid not in self.feeder_meta:  # (its read on the traced step raised StopIteration)
                    self.feeder_meta[nid] = metas
                elif metas != self.feeder_meta[nid]:
                    raise RuntimeError(
                        f"The ExternalSource read at {self.feeder_sites.get(nid, '?')} gave "
                        f"{', '.join(map(_describe, metas))} where the traced step had "
                        f"{', '.join(map(_describe, self.feeder_meta[nid]))}: a capture-mode loop's sources must "
                        "keep their type, number of dimensions and layout")
                vals[nid] = [b._batch_data() for b in flat]
            if ran_out:
                return EagerStep(extra, outs, vals)
        if changed:
            return EagerStep(extra, outs, vals)
        try:
            self._run_nodes(self.nodes, vals, k)
        except Exception:  # noqa: BLE001 - the body's eager call raises it, if the body makes that call
            return EagerStep(extra, outs, {nid: v for nid, v in vals.items() if nid <= 0})
        return extra, outs, vals

    def compute_device_part(self, item: Any, k: int) -> tuple[Any, Any, dict[int, list[BatchData]]]:
        """Worker side of a split pipeline: the nodes left to this process, on top of the
        values a worker process computed for step ``k`` (for a staged node, its host
        stage's data under the key ``("staged", id)``)."""
        extra, outs, vals = item
        self._run_nodes(self.device_nodes, vals, k, self.staged_ids)
        return extra, outs, vals

    def _run_nodes(self, nodes: list[Node], vals: dict, k: int, staged: set[int] = frozenset()) -> None:
        """Compute ``nodes`` (in trace order) into ``vals``; those in ``staged`` run their
        device stage on their staged data."""
        for node, ins, batch_args, state, _ in self._node_calls(nodes, vals, k, staged):
            self._run_node(node, vals, ins, batch_args, state, staged)

    @staticmethod
    def _run_node(node: Node, vals: dict, ins: list, batch_args: dict, state: Any, staged: set[int]) -> None:
        vals[node.id] = node.plan.run(ins, batch_args, state, "device" if node.id in staged else None)

    def _node_calls(self, nodes: list[Node], vals: dict, k: int, staged: set[int]) -> Iterator:
        """``(node, inputs, batch args, random state, stage)`` of each node for step ``k``,
        each resolved from ``vals`` when the previous one has been taken (so a caller that
        stores each node's result into ``vals`` feeds the next).

        Random nodes take their 7 words from a private clone of their RNG placed where
        the live RNG will be at that call: ``k`` periods past the clone base, plus the
        call's offset.
        """
        clones: dict[int, list] = {}
        for node in nodes:
            stage = None
            if node.id in staged:
                ins, stage = vals[("staged", node.id)], "device"
            else:
                ins = [None if s is None else (vals[s[1][0]][s[1][1]] if s[0] == "ref" else s[1])
                       for s in node.inputs]
            batch_args = {name: vals[s[1][0]][s[1][1]] for name, s in node.kwargs.items() if s[0] == "ref"}
            state = None
            if node.rng is not None:
                slot = clones.get(id(node.rng))
                if slot is None:
                    c = self.rng_tracks[id(node.rng)].clone.clone()
                    c.advance(k * self.rng_tracks[id(node.rng)].period)
                    slot = clones[id(node.rng)] = [c, 0]
                slot[0].advance(node.offset - slot[1])
                slot[1] = node.offset + 7
                state = slot[0].draw_words(7)
            yield node, ins, batch_args, state, stage

    def _teardown(self, why: str) -> None:
        self.invalid = why
        self.stop_worker()

    def stop_worker(self, left_step: bool = False) -> None:
        """Stop the worker. The items it read ahead from ExternalSources (feeders, an
        ExternalSource driving the loop) for steps no body got go back to their sources,
        in order, and so do those of the current step's feeders the body did not read when
        it left the step early (``left_step``): each source then goes on where eager mode
        would (ours: DALI loses them)."""
        worker, self.worker = self.worker, None
        left = worker.close() if worker is not None else None
        if not (self.feeders or self.root is not None):
            return
        back: dict[int, tuple[Any, list]] = {}
        if left_step:
            for es, raw in self.step_raws:
                if es is not self.root and id(es) not in self.fed:
                    back.setdefault(id(es), (es, []))[1].append(raw)
        for r in ([self.carry] if self.carry is not None else []) + (left or []):
            if r is END:
                if self.root is not None:
                    back.setdefault(id(self.root), (self.root, []))[1].append(PASS_END)
                continue
            extra = r.extra if isinstance(r, (Failure, EagerStep)) else r[0]
            for es, raw in (extra[2] if extra is not None and len(extra) > 2 else ()):
                back.setdefault(id(es), (es, []))[1].append(raw)
        for es, raws in back.values():
            es._unread(raws)

    def _feeding(self, source: Iterator) -> Iterator:
        """``source``'s steps, each with the items of every feeder read along with it: read
        under the worker's read lock, so in step order, and kept with the step (its
        ``extra`` becomes ``(epoch, state, ((es, item), ...))``) so that :meth:`stop_worker`
        can give back those of the steps no body got."""
        for item in source:
            if isinstance(item, Failure):
                yield item
                return
            extra, outs = item
            raws = list(extra[2]) if len(extra) > 2 else []
            for es in self.feeders:
                try:
                    raws.append((es, es._next_item()))
                except StopIteration:  # ran out: where the body reads it on this step, that read
                    raws.append((es, PASS_END))  # raises (see feed), as eager mode's read does
            yield (extra[0], extra[1], tuple(raws)), outs

    def start_worker(self, source: Iterator) -> None:
        if self.feeders:
            source = self._feeding(source)
        for tr in self.rng_tracks.values():
            tr.clone = tr.rng.clone()  # the live state at the start of the next step
        procs = _settings["processes"]
        host, staged = _host_part(self.nodes)
        if self.trace_outs:  # sized once, after the traced step: what would travel between processes
            self.step_bytes = sum(_computed_nbytes(b) for nid, b in self.trace_outs if nid in host)
            self.trace_outs = []
        step_bytes = self.step_bytes
        eligible = procs and self.reader is not None and not self.feeders and self.source_meta is not None
        if eligible and step_bytes > PROCESS_MAX_STEP_BYTES:
            self.report.worker = (f"threads (a step's results are large, {step_bytes / 2**20:.1f} MiB: its "
                                  "kernels release the interpreter lock, and copying the results back from "
                                  "processes would cost more than they save)")
        elif eligible:
            host_nodes = [n for n in self.nodes if n.id in host or n.id in staged]
            try:
                processes = ProcessWorker(graph_spec(self, host_nodes, staged), self.source_rebuild,
                                          self.source_meta, max(self.depth, 2 * _settings["graph_steps"]), procs)
            except Exception as e:  # noqa: BLE001 - not everything can travel: use threads
                self.report.worker = f"threads (processes unavailable: {type(e).__name__}: {e})"
            else:
                self.device_nodes = [n for n in self.nodes if n.id not in host]
                self.staged_ids = staged
                if self.device_nodes:
                    chosen = _settings["gpu_thread"]
                    graph = self._device_graph(processes, on_thread=bool(chosen))
                    on_thread = chosen if chosen is not None else graph is None
                    compute = self.compute_device_part if graph is None else graph.compute
                    self.worker = SplitWorker(processes, compute, self.depth) if on_thread \
                        else OnLoopThread(processes, compute, graph)
                    self.report.worker = (
                        f"{procs} process(es) for the reader, {len(host)} host operator(s) and the host stage "
                        f"of {len(staged)} GPU operator(s); "
                        + (f"a thread for the {len(self.device_nodes)} on the GPU" if on_thread
                           else f"the {len(self.device_nodes)} on the GPU on the loop's thread"))
                    if graph is None and _settings["graphs"]:
                        not_graphable = sorted({n.schema.name for n in self.device_nodes if not n.plan.graphable})
                        if not_graphable:
                            self.report.worker += f"; not as a device graph ({', '.join(not_graphable)} cannot be)"
                else:
                    self.worker = processes
                    self.report.worker = f"{procs} process(es)"
                self.worker.count_waits(self.report)
                return
        self.worker = Worker(source, self.compute, self.depth, self.ctx.num_threads)
        self.worker.count_waits(self.report)
        self.report.worker = self.report.worker or "threads"

    def _device_graph(self, processes: ProcessWorker, on_thread: bool) -> DeviceGraph | None:
        """A device graph for the GPU part of a split pipeline, when every operator there is
        graphable and the device backend makes graphs (None otherwise). Without a thread of
        its own (``on_thread`` False) it replays on the loop thread's current stream, where
        the training consumes its outputs."""
        if not _settings["graphs"] or not all(n.plan.graphable for n in self.device_nodes):
            return None
        devices = {n.plan.device for n in self.device_nodes}
        if len(devices) != 1:
            return None
        dev = devices.pop()
        backend = device_backend(dev.device_type)
        make = getattr(backend, "graph_session", None)
        if make is None:
            return None
        return DeviceGraph(self, make(dev.device_id or 0, self.ctx, on_caller_stream=not on_thread), processes,
                           1 if on_thread else _settings["graph_steps"])

    def before_reader_restore(self) -> None:
        """``reader.set_state`` is about to move the reader: :meth:`restart_source`."""
        self.restart_source()

    def restart_source(self, left_step: bool = False) -> None:
        """The reader is about to be moved by ``set_state``: stop and drop the read-ahead
        (feeders get their items back, see :meth:`stop_worker`), and re-read from the new
        position with the same graph; RNG schedules are re-based at the next step."""
        self.stop_worker(left_step)
        old, self.source = self.source, _Source(self.reader, self.batch_size)
        if old is not None:
            old.close()
        self.carry = None
        self.rebase = True
        self.generation += 1

    def rebase_rngs(self) -> None:
        """Take the RNGs' current positions as the start of the next step."""
        for tr in self.rng_tracks.values():
            tr.version = tr.rng._version
            tr.start = tr.rng._draws - (self.rel_step + 1) * tr.period

    def rngs_moved(self) -> bool:
        """Whether a captured RNG is not where the next step starts (reseeded, restored or
        drawn from since the last step)."""
        return any(tr.rng._version != tr.version or tr.rng._draws != tr.start + (self.rel_step + 1) * tr.period
                   for tr in self.rng_tracks.values())

    def leave_step(self, reader: Any) -> None:
        """The body left the step it was given (``break``, an exception), seen when its
        iterator is closed, or when a newer ``next_epoch`` starts while it is still
        referenced: forget a partial trace (the next step traces again); a replayed step left
        before its random calls or feeder reads is recomputed from there (see
        :meth:`restart_after`)."""
        self.in_step = False
        if self.tracing:
            self.reset_trace()
        elif self.left_before_draws() or self.left_before_feeds():
            self.restart_after(reader, left_step=True)

    def left_before_feeds(self) -> bool:
        """Whether the replayed step being left had not read every feeder yet."""
        return any(id(es) not in self.fed for es in self.feeders)

    def left_before_draws(self) -> bool:
        """Whether the replayed step being left (``break``, or an exception the caller caught)
        had not made all of its random draws yet (a ``break`` at the top of the body)."""
        return any(tr.rng._version == tr.version and tr.rng._draws != tr.start + (self.rel_step + 1) * tr.period
                   for tr in self.rng_tracks.values())

    def restart_after(self, reader: Any, left_step: bool = False) -> None:
        """After :meth:`left_before_draws` (or :meth:`left_before_feeds`): the steps computed
        ahead took random values (feeder items) as if this step had drawn (read) its own,
        which eager mode would not have; compute them again from the reader's position
        after this step, with the RNGs where they stand now (and the feeders' items given
        back)."""
        state = reader._loop_state
        self.restart_source(left_step)
        if state is not None:
            reader._restore(state)
            reader._loop_state = None

    def reset_trace(self) -> None:
        """Drop an unfinished trace (the loop was left during its first step)."""
        self.nodes, self.sites, self.records = [], {}, {}
        self.trace_outs = []
        self.rng_tracks, self.rng_start = {}, {}
        old, self.report = self.report, CaptureReport(self.batch_size)
        if getattr(_tls, "last_report", None) is old:  # (not another loop's: this one may be an
            _tls.last_report = self.report              # abandoned iterator closed much later)
        self.step = -1
        self.tracing = False

    def _rebase(self) -> None:
        """Take the RNGs' current positions as the start of the next step (after a restore)."""
        self.rebase = False
        self.rebase_rngs()
        if self.nodes and not self.eager_only and self.step >= 0:
            self.start_worker(self.source)

    def end_step(self) -> None:
        """After a replayed step: each captured RNG has made this step's draws (checked here
        too, not only when the next step begins, so that the last step of an epoch cannot
        skip or add a random call unnoticed), and every feeder has been read."""
        for tr in self.rng_tracks.values():
            if tr.rng._version != tr.version or tr.rng._draws != tr.start + (self.rel_step + 1) * tr.period:
                self._teardown("rng")
                raise RuntimeError(RNG_ERROR)
        for es in self.feeders:
            if id(es) not in self.fed:
                self._teardown("feeder skipped")
                raise RuntimeError("An ExternalSource was not consumed this step")

    # -- feeders ----------------------------------------------------------------------------
    def feed(self, es: Any, batch_size: int | None) -> Any:
        """An ExternalSource read inside the body (a feeder)."""
        from ndd._external_source import FEEDER, ROOT, UNUSED

        if es._role == ROOT or es is self.root:
            raise RuntimeError("Instance already used through .captured() method")
        if es._owner is not None and es._owner is not self:
            raise RuntimeError("Already bound to a different capture context.")
        if id(es) in self.fed:
            raise RuntimeError("An ExternalSource may be read only once per capture-mode step")
        if batch_size is not None and batch_size != self.batch_size:
            raise RuntimeError(f"Cannot change batch size to {batch_size}, the capture-mode loop uses "
                               f"{self.batch_size}.")
        self.fed.add(id(es))
        if self.tracing:
            if es._role not in (UNUSED, FEEDER):
                raise RuntimeError("This ExternalSource was already used eagerly")
            es._role, es._owner = FEEDER, self
            nid = self.feeder_ids.get(id(es))
            if nid is None:
                nid = self.feeder_ids[id(es)] = -(len(self.feeders) + 1)
                self.feeders.append(es)
                site = sys._getframe(1)
                while site is not None and _is_internal(site.f_globals.get("__name__", "")):
                    site = site.f_back
                self.feeder_sites[nid] = f"{site.f_code.co_filename}:{site.f_lineno}" if site else "?"
            try:
                item = es._next_item()
            except StopIteration:  # (its outputs' types come with the first item the pipeline reads)
                raise self._exhausted(nid) from None
            flat, rebuild = _flatten(es._convert(item, self.batch_size))
            self.feeder_meta[nid] = [_meta(b) for b in flat]
            return rebuild([_captured(b, (nid, k), self.step) for k, b in enumerate(flat)])
        nid = self.feeder_ids.get(id(es))
        if nid is None:
            raise RuntimeError("ExternalSource wasn't seen during tracing")
        flat = self.current.get(nid)
        if flat is None:  # it ran out when the pipeline read this step ahead
            raise self._exhausted(nid)
        wrapped = [_from_data(bd, m, es._device, self.batch_size, (nid, k), self.step)
                   for k, (bd, m) in enumerate(zip(flat, self.feeder_meta[nid]))]
        return tuple(wrapped) if es.num_outputs > 1 else wrapped[0]

    def _exhausted(self, nid: int) -> SourceExhausted:
        return SourceExhausted(f"A source was exhausted before the iteration ended: the ExternalSource read "
                               f"at {self.feeder_sites[nid]} ran out")

    def release(self) -> None:
        """Unbind every ExternalSource (teardown of an ExternalSource-driven loop)."""
        from ndd._external_source import UNUSED

        for es in [*self.feeders, self.root]:
            if es is not None:
                es._role, es._owner = UNUSED, None


class SourceExhausted(StopIteration, RuntimeError):
    """A feeder that ran out before the loop's source, raised where the body reads it: a
    StopIteration, as eager mode's read raises, and a RuntimeError with DALI's message."""


def _broadcast(value: Any, batch_size: int) -> BatchData:
    """A constant input as this step's batch (the same sample for every entry)."""
    from ndd import as_tensor

    if isinstance(value, Batch):
        return value._batch_data()
    arr = as_tensor(value)._array()
    return BatchData(samples=[arr] * batch_size)


def _column(frame: Any) -> int:
    if frame is None or not hasattr(frame.f_code, "co_positions"):
        return 0
    try:
        pos = list(frame.f_code.co_positions())[frame.f_lasti // 2]
        return (pos[2] or 0) + 1
    except (IndexError, TypeError):
        return 0


# -- the hook and the loop drivers -----------------------------------------------------------
def hook(schema: Any, inputs: tuple, kwargs: dict) -> Any:
    """Core's op-call hook: route calls made inside a capture-mode body to its loop."""
    loop = getattr(_tls, "loop", None)
    if loop is None:
        return invoke(schema, inputs, kwargs)
    return loop.on_call(schema, inputs, kwargs)


def _enter(loop: CaptureLoop) -> None:
    active = getattr(_tls, "loop", None)
    if active is not None and active is not loop and _in_body(active):
        raise RuntimeError("Only one capture-mode loop can be active at a time")
    _tls.loop = loop


def _in_context(loop: CaptureLoop) -> Any:
    """The ``ctx=`` given to ``next_epoch``/``captured``, made current for the body of each
    step (as a ``with ctx:`` around the loop would); without one, the body's context must
    stay the one current when the loop started."""
    if not loop.given_ctx or EvalContext.current() is loop.ctx:
        return _NO_CONTEXT
    return loop.ctx


_NO_CONTEXT = contextlib.nullcontext()  # reusable: entered once per step of most loops


def _in_body(loop: CaptureLoop) -> bool:
    """Whether the caller runs inside ``loop``'s body: the frame it took its step from (or,
    for a wrapped iterator, a frame of the stack it was taken from) is on the stack, and
    within its ``for`` statement's body when it runs one."""
    frame, stack = loop.loop_frame, loop.loop_stack
    f = sys._getframe(1)
    while f is not None:
        if f is frame or f in stack:
            body = loop.bodies.get(f)
            return f in loop.anchors and (body is None or f.f_lasti in body)
        f = f.f_back
    return False


_BODIES: dict[tuple[int, int], tuple[Any, frozenset[int] | None]] = {}


def _for_body(frame: Any) -> frozenset[int] | None:
    """The instruction offsets of the body of the ``for`` statement whose FOR_ITER ``frame``
    is running (asking the loop for a step); None when it runs none (``next(it)``), or when
    its source cannot be read. Cached per instruction."""
    code, lasti = frame.f_code, frame.f_lasti
    hit = _BODIES.get((id(code), lasti))
    if hit is None or hit[0] is not code:
        hit = _BODIES[(id(code), lasti)] = (code, _find_for_body(frame))
    return hit[1]


def _find_for_body(frame: Any) -> frozenset[int] | None:
    code, lasti = frame.f_code, frame.f_lasti
    at = None
    for ins in dis.get_instructions(code):  # (3.12 reports an offset inside FOR_ITER's cache)
        if ins.offset > lasti:
            break
        at = ins
    if at is None or at.opname != "FOR_ITER":
        return None
    line = next((ln for start, end, ln in code.co_lines() if start <= at.offset < end), None)
    module = _module_for(frame)  # (source analysis's parse of the file, cached)
    if not isinstance(module, _Module):
        return None
    fors = [n for n in ast.walk(module.tree) if isinstance(n, (ast.For, ast.AsyncFor))
            and line is not None and n.lineno <= line <= n.body[0].lineno]
    if not fors:
        return None
    node = max(fors, key=lambda n: n.lineno)  # the innermost
    first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
    return frozenset(off for start, end, ln in code.co_lines() if ln is not None and first <= ln <= last
                     for off in range(start, end, 2))


class _Source:
    """A reader loop's :func:`_continuous` stream that remembers the reader state it started
    from and how many steps were taken, so that a worker process can rebuild the very same
    stream (the same epoch numbering too) and skip the steps this process took itself."""

    def __init__(self, reader: Any, batch_size: int) -> None:
        self.reader = reader
        self.start_state: dict | None = None
        self.taken = 0
        self._it = self._stream(batch_size)

    def _stream(self, batch_size: int) -> Iterator:
        self.start_state = self.reader._state()  # where _epoch starts reading
        yield from _continuous(self.reader, batch_size)

    def origin(self) -> tuple[dict, int]:
        """(the state the stream starts from, the steps taken from it so far)."""
        if self.start_state is None:  # not started yet: it will start where the reader is
            return self.reader._state(), 0
        return self.start_state, self.taken

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Any:
        item = next(self._it)
        self.taken += 1
        return item

    def close(self) -> None:
        self._it.close()


def _continuous(reader: Any, batch_size: int, skip: Any = None) -> Iterator:
    """The reader's batches across epochs, tagged with the epoch number and the reader's
    state after the batch (what ``get_state`` reports while the loop holds that batch).
    ``skip`` is handed to the reader (see core's ``Reader._epoch``). A read that fails
    ends the stream with a :class:`Failure` tagged ``(epoch, None)``, so that it is raised
    in the epoch it belongs to."""
    ep = 0
    while True:
        try:
            for outs in (reader._epoch(batch_size) if skip is None else reader._epoch(batch_size, skip)):
                yield (ep, reader._state()), outs
        except Exception as e:  # noqa: BLE001 - delivered in order, like a step's failure
            yield Failure(e, (ep, None))
            return
        ep += 1


def reader_epoch(reader: Any, batch_size: int, ctx: Any, capture: Any) -> Iterator:
    """``next_epoch(capture=True)`` of a reader (called by core's Reader)."""
    loop = getattr(reader, "_capture_loop", None)
    if loop is not None and loop.batch_size != batch_size:
        raise ValueError(f"Cannot change batch_size from {loop.batch_size} to {batch_size}")
    if loop is not None and not loop.invalid and (ctx or EvalContext.current()) is not loop.ctx:
        raise RuntimeError("Cannot change EvalContext for a capture-mode loop.")  # (its lifetime's)
    if loop is None or loop.invalid:
        if loop is not None:  # torn down by an error: go on after the last step it delivered
            _detach(reader, loop)
        loop = CaptureLoop(batch_size, ctx or EvalContext.current(), capture == "strict", _settings["depth"])
        loop.given_ctx = ctx is not None
        loop.reader = reader
        reader._capture_loop = loop
        loop.source = _Source(reader, batch_size)
        reader._before_restore.append(loop.before_reader_restore)
    return _reader_steps(reader, loop)


def _detach(reader: Any, loop: CaptureLoop) -> None:
    """Part the reader from ``loop``, positioned after the last step the loop delivered (the
    read-ahead moved it further)."""
    reader._before_restore.remove(loop.before_reader_restore)
    loop.release()  # the feeders it read are free again
    if loop.source is not None:
        loop.source.close()
    if reader._loop_state is not None:
        reader._restore(reader._loop_state)
        reader._loop_state = None
    if reader._capture_loop is loop:
        reader._capture_loop = None


def _end_epoch(reader: Any, loop: CaptureLoop) -> None:
    """At the end of an epoch: the report; and a loop that captured nothing frees the reader,
    so that the next epoch may trace again or run eagerly (as DALI frees it)."""
    _print_report(loop)
    if loop.eager_only:
        loop.carry = None
        _detach(reader, loop)
        reader._mode = None


def _reader_steps(reader: Any, loop: CaptureLoop) -> Iterator:
    _tls.last_report = loop.report
    if loop.in_step and not _in_body(loop):  # the last iterator was left inside a step, not closed
        loop.leave_step(reader)
    token = loop.iterator = object()  # an older iterator of this loop ends when it is resumed
    if loop.worker is not None and not loop.rebase and loop.rngs_moved():
        # An RNG moved between epochs (set_state, a checkpoint restore, eager draws): the steps
        # computed ahead drew from where it was; compute them again from where it is, as
        # eager mode would draw (ours: DALI raises).
        loop.restart_after(reader)
    epoch = None
    generation = loop.generation
    while True:
        # set_state moved the reader inside the body, or a newer iterator took the loop over
        if loop.generation != generation or loop.iterator is not token:
            return
        if loop.invalid:
            raise RuntimeError("The capture-mode loop was invalidated and cannot continue.")
        if loop.rebase:
            loop._rebase()
        direct = loop.step < 0 or loop.eager_only  # trace (or the eager fallback after an empty trace)
        item = loop.carry if loop.carry is not None else next(loop.source) if direct else loop.worker.get()
        loop.carry = None
        if isinstance(item, Failure):
            if item.extra is not None and epoch is not None and item.extra[0] != epoch:
                loop.carry = item  # a step of the next epoch failed: raised in that epoch
                _end_epoch(reader, loop)
                return
            if direct:  # a read failed: the next epoch reads again from where the reader stands,
                loop.source.close()  # as eager mode does
                loop.source = _Source(reader, loop.batch_size)
            else:
                loop._teardown("pipeline error")
                if item.extra is not None and item.extra[1] is not None:  # the failed step's batch
                    reader._loop_state = item.extra[1]                    # was read, as in eager mode
                    # ... and its random values drawn: an eager body meets a kernel's error when
                    # it reads a result, usually after its random calls (the tutorial's .torch())
                    for tr in loop.rng_tracks.values():
                        tr.rng.advance(tr.period)
            raise item.error
        if item is END:
            _end_epoch(reader, loop)
            return
        if direct:
            (extra, outs), vals = item, None
        elif type(item) is EagerStep:
            extra, outs, vals = item.extra, item.outs, item.vals
        else:
            extra, outs, vals = item
        ep = extra[0]
        if epoch is None:
            epoch = ep
        elif ep != epoch:
            loop.carry = item if type(item) is EagerStep else (extra, outs) if vals is None else (extra, outs, vals)
            _end_epoch(reader, loop)
            return
        eager_step = type(item) is EagerStep
        loop.report.eager_steps += eager_step
        tracing = loop.step < 0
        loop.tracing = tracing
        src, rebuild = _flatten(outs)
        frame = sys._getframe(1)
        loop.begin_step(frame)
        loop.current = vals or {}
        reader._loop_state = extra[1]
        loop.step_raws = extra[2] if len(extra) > 2 else ()
        if tracing:
            loop.source_meta = [_meta(b) for b in src]
            loop.source_rebuild = rebuild
        wrapped = rebuild([_captured(b, (0, k), loop.step) for k, b in enumerate(src)])
        if loop.eager_only:
            with _in_context(loop):
                yield outs
            continue
        _enter(loop)
        loop.in_step = True
        try:
            with _in_context(loop):
                yield wrapped
        except GeneratorExit:
            if loop.iterator is token and loop.in_step:
                loop.leave_step(reader)
            raise
        finally:
            if loop.iterator is token and getattr(_tls, "loop", None) is loop:
                _tls.loop = None
        if loop.iterator is not token:
            return
        loop.in_step = False
        if tracing:
            loop.end_trace()
            if not loop.nodes:
                warnings.warn("capture=True was specified but no operators were captured during tracing. "
                              "Falling back to dynamic mode.", UserWarning, stacklevel=2)
                loop.eager_only = True
                loop.release()  # feeders read in the trace are plain reads from now on
                continue
            loop.start_worker(loop.source)
        elif eager_step and loop.rngs_moved():
            # The body ran this step's calls eagerly and drew other than the pipeline planned
            # (it skipped a random call after catching the error): compute ahead again from here.
            loop.restart_after(reader)
            generation = loop.generation
        else:
            loop.end_step()


# -- ExternalSource-driven loops ----------------------------------------------------------------
def _es_stream(es: Any, batch_size: int) -> Iterator:
    """The root source's items until it raises StopIteration (one epoch)."""
    while True:
        try:
            item = es._next_item()
        except StopIteration:
            return
        yield (None, None, ((es, item),)), es._convert(item, batch_size)


def external_source_epoch(es: Any, batch_size: int, ctx: Any, strict: bool) -> Iterator:
    """``ExternalSource.captured(batch_size=B)``: one epoch, until the source ends."""
    from ndd._external_source import ROOT

    if es._owner is not None and es._role != ROOT:
        raise RuntimeError("Already bound to a different capture context.")
    loop = getattr(es, "_capture_loop", None)
    if loop is not None and loop.in_step:
        if _in_body(loop):  # (from the body of its own loop, or where that loop is driven)
            raise RuntimeError("Instance already used through .captured() method: its capture-mode loop "
                               "is in a step")
        # the last loop was left with its iterator still referenced (not closed): as a break
        loop.iterator = None
        _leave_es_loop(es, loop, finished=False)
        loop = None
    if loop is not None and loop.batch_size != batch_size:
        raise ValueError(f"Cannot change batch_size from {loop.batch_size} to {batch_size}")
    if loop is not None and not loop.invalid and (ctx or EvalContext.current()) is not loop.ctx:
        raise RuntimeError("Cannot change EvalContext for a capture-mode loop.")  # (its lifetime's)
    if loop is None or loop.invalid:
        loop = CaptureLoop(batch_size, ctx or EvalContext.current(), bool(strict), _settings["depth"])
        loop.given_ctx = ctx is not None
        loop.root = es
        es._capture_loop = loop
    return _es_steps(es, loop)


def _es_steps(es: Any, loop: CaptureLoop) -> Iterator:
    from ndd._external_source import ROOT

    _tls.last_report = loop.report
    token = loop.iterator = object()
    stream = _es_stream(es, loop.batch_size)
    if loop.step >= 0 and not loop.eager_only:
        loop.rebase_rngs()  # an RNG moved between epochs draws from where it is, as in eager mode (ours)
        loop.start_worker(stream)  # a later epoch: same graph, fresh worker, RNG clones re-based
    finished = False
    try:
        while True:
            if loop.invalid:
                raise RuntimeError("The capture-mode loop was invalidated and cannot continue.")
            if loop.step < 0 or loop.eager_only:
                try:
                    extra, outs = next(stream)
                except StopIteration:
                    finished = True
                    return
                vals = None
            else:
                item = loop.worker.get()
                if isinstance(item, Failure):
                    loop._teardown("pipeline error")
                    raise item.error
                if item is END:
                    finished = True
                    _print_report(loop)
                    return
                if type(item) is EagerStep:
                    extra, outs, vals = item.extra, item.outs, item.vals
                    loop.report.eager_steps += 1
                else:
                    extra, outs, vals = item
            es._role, es._owner = ROOT, loop
            loop.step_raws = extra[2]
            tracing = loop.step < 0
            loop.tracing = tracing
            src, rebuild = _flatten(outs)
            if tracing:
                loop.source_meta = [_meta(b) for b in src]
            loop.begin_step(sys._getframe(1))
            loop.current = vals or {}
            if loop.eager_only:
                with _in_context(loop):
                    yield outs
                continue
            _enter(loop)
            loop.in_step = True
            try:
                with _in_context(loop):
                    yield rebuild([_captured(b, (0, k), loop.step) for k, b in enumerate(src)])
            finally:
                if loop.iterator is token and getattr(_tls, "loop", None) is loop:
                    _tls.loop = None
            if loop.iterator is not token:
                return
            loop.in_step = False
            if tracing:
                loop.end_trace()
                for f in loop.feeders:
                    if id(f) not in loop.fed:
                        raise RuntimeError("An ExternalSource was not consumed this step")
                if not loop.nodes and not loop.feeders:
                    warnings.warn("capture=True was specified but no operators were captured during "
                                  "tracing. Falling back to dynamic mode.", UserWarning, stacklevel=2)
                    loop.eager_only = True
                    continue
                loop.start_worker(stream)
            else:
                loop.end_step()
    finally:
        if loop.iterator is token:  # (else a newer captured() already ended this one)
            loop.iterator = None
            _leave_es_loop(es, loop, finished)


def _leave_es_loop(es: Any, loop: CaptureLoop, finished: bool) -> None:
    """The end of an ExternalSource loop's epoch: what was read ahead goes back to the
    sources; a break, an error or an empty graph also unbinds them."""
    loop.stop_worker(left_step=not finished)
    loop.in_step = False
    if not finished or loop.eager_only or loop.invalid:
        loop.release()
        if getattr(es, "_capture_loop", None) is loop:
            es._capture_loop = None


def feed(es: Any, batch_size: int | None) -> Any:
    """Core's ExternalSource.__call__ asks here first; NotImplemented means "not a feeder read"."""
    loop = getattr(_tls, "loop", None)
    if loop is None or not _in_body(loop):
        if es._owner is not None:  # (its loop reads it ahead)
            raise RuntimeError("This ExternalSource is already used in a capture-mode loop")
        return NotImplemented
    return loop.feed(es, batch_size)
