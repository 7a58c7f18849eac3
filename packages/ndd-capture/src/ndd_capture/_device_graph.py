"""The GPU part of a split pipeline's steps replayed as one device graph (ours; DALI has none).

In a split pipeline (see ``_processes.SplitWorker``) one thread of the loop's process runs
the GPU operators of each step. Launched kernel by kernel, their host cost competes with
the training step; a device graph (a CUDA graph, from the device backend's
``graph_session``) replays them all at once. Every operator of that part must be
graphable (core's ``Plan.graph_host``); then each step:

1. The *host pass* runs every operator's graph host stage: the host arrays the step
   uploads (decoded images, rotation matrices, labels) and a signature of everything
   else the launches depend on (output sizes, input shapes).
2. If the signatures and array shapes are those of the captured step, the arrays go into
   the graph's input buffers and the graph is replayed; otherwise the step runs kernel by
   kernel, with the same results.

In a split pipeline the worker processes take over the host pass once the first step has
run (they get the device values' shapes as stand-ins, and the captured signatures): each
sends the arrays of its steps that match the captured one, so this process only fills
the buffers and replays (the host pass is Python that would compete with the training
step for the interpreter lock). Such a step comes without the host stages' data of the
staged operators (the decoded pixels, say, which its arrays hold already): should it run
kernel by kernel after all (the graph dropped meanwhile), those operators run whole here.
Steps computed before, or by a worker that could not run the host pass, get it here as
before.

The first step runs kernel by kernel (it fills the kernels' caches, e.g. constant grids, and
gives the reference signatures with real input shapes); the next step with the same
signatures is captured. A graph that cannot be captured (an operator that reads device
data back, say) is switched off and the report says why.
"""

from __future__ import annotations

from typing import Any

from ndd._storage import BatchData

from ._report import DeviceGraphStats

# After this many steps in a row whose signature differs from the captured one, the graph is
# dropped and the loop runs kernel by kernel (a loop whose shapes keep changing gains
# nothing). In a row, so that an occasional odd step (a short last batch of each epoch)
# never drops it.
MAX_MISSES = 8

# Keys of a worker process's host pass among a step's values: the arrays of a step whose
# signatures are the captured ones, or (empty) a step that differs.
GRAPH_ARRAYS = ("graph", "arrays")
GRAPH_DIFFERS = ("graph", "differs")


class DeviceGraph:
    """``compute(item, k)`` for a :class:`~._processes.SplitWorker`: the device nodes of
    ``loop`` on top of the host values a worker process computed for step ``k``."""

    def __init__(self, loop: Any, session: Any, processes: Any = None, steps: int = 1) -> None:
        self.loop = loop
        self.session = session
        self.processes = processes  # the ProcessWorker feeding this graph, which may run the host pass
        self.nodes = loop.device_nodes
        self.ids = [n.id for n in self.nodes]
        self.steps = steps  # copies of a step in the graph: steps computed by one replay
        self.staged = loop.staged_ids
        self.state = "reference"  # -> "capture" -> "replay"; "off" once given up
        self.sigs: list | None = None
        self.shapes: dict = {}  # device node outputs of the reference step (their shapes)
        self.staged_standins: dict = {}  # its staged data: a capture's device pass reads their shapes
        self.streak = 0  # steps unlike the captured one since the last replay
        self.slices: list[tuple[int, int]] = []  # each node's slice of a step's arrays
        self.kinds: list[tuple] | None = None  # (shape, dtype) of a step's arrays, once captured
        self.stats = loop.report.device_graph = DeviceGraphStats()

    def _off(self, why: str) -> None:
        self.state = "off"
        close = getattr(self.session, "close", None)
        if close is not None:  # its buffers and device memory are not needed any more
            close()
        self.shapes = {}
        self.loop.report.worker += f"; not as a device graph ({why})"
        if self.processes is not None and self.sigs is not None:
            self.processes.set_graph_host(None)  # the workers stop running the host pass

    def group_size(self) -> int:
        """How many steps the next ``compute_group`` takes at once: the steps of one replay
        once the graph is being captured or replayed, else one."""
        return self.steps if self.state in ("capture", "replay") else 1

    def compute(self, item: Any, k: int) -> Any:
        return self.compute_group([item], k)[0]

    def compute_group(self, items: list, k: int) -> list:
        """``compute`` of steps ``k``, ``k + 1``, ... (``items`` in order), as one replay
        where the graph takes several steps (``set_graph_steps``)."""
        group = []
        for i, (_, _, vals) in enumerate(items):
            pre = vals.pop(GRAPH_ARRAYS, None)
            if vals.pop(GRAPH_DIFFERS, None) is not None:
                pre = False
            group.append((vals, k + i, pre))
        if self.state == "reference":  # the first step alone, then the others as a group
            self._reference(*group[0][:2])
            group = group[1:]
        if self.state == "off":
            for vals, j, _ in group:
                self.stats.kernel_by_kernel += 1
                self._kernel_by_kernel(vals, j)
        elif group:
            self._graphed(group)
        return items

    def _reference(self, vals: dict, k: int) -> None:
        """Kernel by kernel, taking each operator's host pass on its real inputs."""
        self.stats.kernel_by_kernel += 1
        sigs = []
        for node, ins, batch_args, state, _ in self.loop._node_calls(self.nodes, vals, k, self.staged):
            try:
                arrays, sig = node.plan.graph_host(ins, batch_args, state)
            except Exception as e:  # noqa: BLE001 - not graphable, unless the kernel fails too (below)
                # A kernel error (a sample that does not decode) is the step's, not the graph's:
                # it propagates, and the next step is the reference again.
                self.loop._run_node(node, vals, ins, batch_args, state, self.staged)
                self._off(f"{type(e).__name__}: {e}")
                _finish_eagerly(self.loop, self.nodes, vals, k, self.staged)
                return
            sigs.append(_signature(sig, arrays))
            self.loop._run_node(node, vals, ins, batch_args, state, self.staged)
        self.sigs = sigs
        self.shapes = {n.id: vals[n.id] for n in self.nodes}
        self.staged_standins = {("staged", nid): vals[("staged", nid)] for nid in self.staged}
        at = 0
        for _, arrays in sigs:
            self.slices.append((at, at + len(arrays)))
            at += len(arrays)
        self.state = "capture"
        if self.processes is not None:
            self._hand_host_pass_to_processes()

    def _hand_host_pass_to_processes(self) -> None:
        from ._processes import graph_host_spec

        try:
            standins = {nid: [self.session.shape_only(bd) for bd in bds] for nid, bds in self.shapes.items()}
            payload = graph_host_spec(self.loop, self.nodes, self.staged, standins, self.sigs)
        except Exception:  # noqa: BLE001 - something does not pickle: the host pass stays here
            return
        self.processes.set_graph_host(payload)

    def _kernel_by_kernel(self, vals: dict, k: int) -> None:
        """The step's nodes kernel by kernel; staged ones whose host stage's data did not
        come (the worker ran the graph's host pass) run whole."""
        self.loop._run_nodes(self.nodes, vals, k, {nid for nid in self.staged if ("staged", nid) in vals})

    def _host_pass(self, vals: dict, k: int) -> tuple[list, list]:
        """(signatures, arrays of the step in order)."""
        view = {**vals, **self.shapes}  # device inputs: right shapes, stale data
        sigs, arrays = [], []
        for node, ins, batch_args, state, _ in self.loop._node_calls(self.nodes, view, k, self.staged):
            a, sig = node.plan.graph_host(ins, batch_args, state)
            sigs.append(_signature(sig, a))
            arrays.extend(a)
        return sigs, arrays

    def _step_arrays(self, vals: dict, k: int, pre: list[BatchData] | bool | None) -> list | None:
        """The arrays step ``k`` fills the graph's inputs with, or None when it differs from the
        captured step. ``pre``: a worker process's host pass of this step (its arrays, or
        False when the step differs), or None when this thread runs it."""
        if pre is None:
            try:
                sigs, arrays = self._host_pass(vals, k)
            except Exception:  # noqa: BLE001 - this step is not graphable: the eager run decides
                return None
            if sigs != self.sigs:
                return None
        else:
            self.stats.host_pass_in_workers += 1
            if pre is False:
                return None
            arrays = [bd.dense for bd in pre]
        if self.kinds is not None and (len(arrays) != len(self.kinds) or any(
                a.shape != shape or a.dtype != dt for a, (shape, dt) in zip(arrays, self.kinds))):
            return None
        return arrays

    def _graphed(self, group: list[tuple[dict, int, Any]]) -> None:
        """Steps ``(vals, k, pre)`` in order, in one replay (captured first if need be); a step
        that differs from the captured one runs kernel by kernel instead. The graph holds
        ``self.steps`` copies of a step: the copies of steps that differ, or missing from a
        short group, replay on a matching step's arrays, and their outputs are dropped."""
        arrays = [self._step_arrays(vals, k, pre) for vals, k, pre in group]
        for a in arrays:
            if a is not None:
                self.streak = 0
                continue
            self.stats.unlike += 1
            self.streak += 1
            if self.streak > MAX_MISSES and self.state != "off":
                self._off(f"{self.streak} steps in a row differed from the captured one")
        matched = {i for i, a in enumerate(arrays) if a is not None} if self.state != "off" else set()
        out = None
        if matched:
            first = min(matched)
            copies = [i if i in matched else first for i in range(len(group))]
            copies += [first] * (self.steps - len(copies))
            flat = [x for i in copies for x in arrays[i]]
            out = self._capture(group, copies, flat) if self.state == "capture" else self.session.replay(flat)
        if out is None:
            matched = set()
        for i, (vals, k, _) in enumerate(group):
            if i in matched:
                self.stats.replayed += 1
                vals.update({nid: out[(i, nid)] for nid in self.ids})
            else:
                self.stats.kernel_by_kernel += 1
                self._kernel_by_kernel(vals, k)

    def _capture(self, group: list, copies: list[int], flat: list) -> dict | None:
        """Capture the graph on ``flat`` (each copy's arrays in turn) and return its first
        outputs; None (the graph off) if the capture fails."""
        n = self.slices[-1][1] if self.slices else 0
        hosts = [({**self.staged_standins, **group[i][0]}, group[i][1]) for i in copies]

        def device_pass(uploaded: list) -> dict:
            out = {}
            for c, (host, k) in enumerate(hosts):
                d = dict(host)
                for (lo, hi), (node, ins, batch_args, state, stage) in zip(
                        self.slices, self.loop._node_calls(self.nodes, d, k, self.staged)):
                    d[node.id] = node.plan.graph_device(ins, batch_args, uploaded[c * n + lo:c * n + hi], state, stage)
                out.update({(c, nid): d[nid] for nid in self.ids})
            return out

        try:
            out = self.session.capture(flat, device_pass)
        except Exception as e:  # noqa: BLE001 - e.g. a kernel that synchronises
            self._off(f"capture failed: {type(e).__name__}: {e}")
            return None
        self.kinds = [(a.shape, a.dtype) for a in flat[:n]]
        self.state = "replay"
        self.loop.report.worker += "; the GPU part replayed as one device graph" + (
            f", {self.steps} steps a replay" if self.steps > 1 else "")
        return out


def _signature(sig: Any, arrays: list) -> tuple:
    return sig, tuple((a.shape, a.dtype.str) for a in arrays)


def _finish_eagerly(loop: Any, nodes: list, vals: dict, k: int, staged: set) -> None:
    """Run the nodes of ``nodes`` not computed yet (after a failed host pass)."""
    left = [n for n in nodes if n.id not in vals]
    loop._run_nodes(left, vals, k, staged)


def worker_host_pass(g: dict, vals: dict, k: int) -> None:
    """The host pass of step ``k`` in a worker process (``g`` from ``graph_host_spec``), on
    top of the step's host values ``vals``: the arrays go under ``GRAPH_ARRAYS`` when every
    signature is the captured one, else ``GRAPH_DIFFERS`` is set."""
    from ._processes import node_calls

    view = {**vals, **g["standins"]}  # device values: shapes only
    arrays: list = []
    try:
        for (_, plan, ins, batch_args, state, _), ref in zip(node_calls(g["nodes"], g["rngs"], view, k), g["sigs"]):
            a, sig = plan.graph_host(ins, batch_args, state)
            if _signature(sig, a) != ref:
                break
            arrays.extend(a)
        else:
            vals[GRAPH_ARRAYS] = [BatchData(dense=a) for a in arrays]
            for key in [key for key in vals if isinstance(key, tuple) and key[0] == "staged"]:
                del vals[key]  # (the arrays hold what the loop's process needs of them)
            return
    except Exception:  # noqa: BLE001 - not graphable this step: the loop's process runs it kernel by kernel
        pass
    vals[GRAPH_DIFFERS] = []
