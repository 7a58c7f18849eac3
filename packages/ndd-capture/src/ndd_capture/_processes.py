"""Pipeline worker *processes* for reader-driven capture loops (ours; DALI has none).

A thread pipeline shares the interpreter lock with the Python loop, so on small images
(where most of a step is Python) it cannot run much faster than eager mode. Here each
worker process builds its own copy of the reader from the reader's constructor call
and state, reads the same stream, and computes every ``K``-th step (worker ``j`` takes
steps ``k`` with ``k % K == j``) with the same prepared plans and RNG placement as the
thread pipeline, so the results are identical. The parent hands out allowance to bound
how far each process runs ahead, takes the results strictly in step order, and turns
them back into batches. Used only when the whole graph can be sent to another process
(reader loops without feeders, picklable constants); otherwise threads are used.
"""

from __future__ import annotations

import importlib
import os
import pickle
import socket
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from ndd._batch import Batch
from ndd._device import CPU

from ._pipeline import Failure

_POLL_S = 0.1


def graph_spec(loop: Any) -> dict:
    """What a worker process needs to compute steps (raises if something cannot pickle)."""
    reader = loop.reader
    cls = type(reader)
    state = reader._loop_state if reader._loop_state is not None else reader._state()
    nodes = [(n.id, n.plan, n.inputs, n.kwargs, id(n.rng) if n.rng is not None else None, n.offset)
             for n in loop.nodes]
    rngs = {key: (str(tr.clone.get_state()), tr.period) for key, tr in loop.rng_tracks.items()}
    spec = {"module": cls.__module__, "qualname": cls.__qualname__, "ctor": reader._ctor_args,
            "state": state, "batch_size": loop.batch_size, "nodes": nodes, "rngs": rngs}
    pickle.dumps(spec)  # fail here, in the parent, when something cannot travel
    return spec


def run_step(nodes: list, rngs: dict, src: list, k: int) -> dict:
    """Compute every node for step ``k`` (the thread pipeline's rule, on plain data)."""
    from ndd.random import RNG

    vals = {0: src}
    clones = {}
    for key, (state, period) in rngs.items():
        c = RNG(state=state)
        c.advance(k * period)
        clones[key] = [c, 0]
    for nid, plan, inputs, kwargs, rng_key, offset in nodes:
        ins = [None if s is None else (vals[s[1][0]][s[1][1]] if s[0] == "ref" else s[1]) for s in inputs]
        batch_args = {name: vals[s[1][0]][s[1][1]] for name, s in kwargs.items() if s[0] == "ref"}
        state = None
        if rng_key is not None:
            slot = clones[rng_key]
            slot[0].advance(offset - slot[1])
            slot[1] = offset + 7
            state = slot[0].draw_words(7)
        vals[nid] = plan.run(ins, batch_args, state)
    return vals


def child_main(conn: Any, j: int, workers: int) -> None:
    """Body of worker process ``j`` of ``workers`` (run by ``python -m ndd_capture._worker``)."""
    try:
        spec = pickle.loads(conn.recv_bytes())
        import ndd

        from ._loop import _continuous, _flatten

        cls: Any = importlib.import_module(spec["module"])
        for part in spec["qualname"].split("."):
            cls = getattr(cls, part)
        args, kwargs = spec["ctor"]
        reader = cls(*args, **kwargs)
        reader.set_state(ndd.ReaderState.from_dict(spec["qualname"], spec["state"]))
        allowance = 0
        for k, (extra, outs) in enumerate(_continuous(reader, spec["batch_size"])):
            if k % workers != j:
                continue
            while allowance == 0:
                msg = conn.recv()
                if msg is None:
                    return
                allowance += msg
            allowance -= 1
            flat, _ = _flatten(outs)
            src = [b._batch_data() for b in flat]
            conn.send(("ok", extra, src, run_step(spec["nodes"], spec["rngs"], src, k)))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    except BaseException as e:  # noqa: BLE001 - sent to the parent
        text = traceback.format_exc()
        try:
            conn.send(("err", e, text))
        except Exception:  # noqa: BLE001 - the exception itself does not pickle
            conn.send(("err", RuntimeError(f"{type(e).__name__}: {e}"), text))


class ProcessWorker:
    """The parent side: same interface as :class:`~._pipeline.Worker` (``get``, ``close``).

    The processes are started with ``python -m ndd_capture._worker`` rather than
    multiprocessing's spawn, which would re-run the user's main script in every worker
    (a script without an ``if __name__ == "__main__"`` guard would start its training
    loop again there).
    """

    def __init__(self, spec: dict, rebuild: Any, source_meta: list, depth: int, processes: int) -> None:
        self._rebuild = rebuild
        self._meta = source_meta
        self._batch_size = spec["batch_size"]
        self._conns: list[Connection] = []
        self._procs: list[subprocess.Popen] = []
        self._next = 0
        allowance = max(1, -(-depth // processes))
        payload = pickle.dumps(spec)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        for j in range(processes):
            ours, theirs = socket.socketpair()
            proc = subprocess.Popen(
                [sys.executable, "-m", "ndd_capture._worker", str(theirs.fileno()), str(j), str(processes)],
                pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
            )
            theirs.close()
            conn = Connection(ours.detach())
            conn.send_bytes(payload)
            conn.send(allowance)
            self._conns.append(conn)
            self._procs.append(proc)

    def get(self) -> Any:
        j = self._next % len(self._conns)
        conn, proc = self._conns[j], self._procs[j]
        try:
            while not conn.poll(_POLL_S):
                if proc.poll() is not None:
                    return Failure(RuntimeError(
                        f"capture worker process {j} exited unexpectedly (exit code {proc.returncode})"))
            msg = conn.recv()
        except (EOFError, OSError) as e:
            return Failure(RuntimeError(f"capture worker process {j} closed its connection ({e})"))
        if msg[0] == "err":
            err = msg[1]
            err.__cause__ = RuntimeError(f"in capture worker process {j}:\n{msg[2]}")
            return Failure(err)
        _, extra, src, vals = msg
        conn.send(1)
        self._next += 1
        outs = self._rebuild([Batch._wrap(bd, m.dtype, m.layout, CPU, m.ndim, self._batch_size)
                              for bd, m in zip(src, self._meta)])
        return extra, outs, vals

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
                conn.close()
            except OSError:
                pass
        for p in self._procs:
            try:
                p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=2)
        self._conns, self._procs = [], []
