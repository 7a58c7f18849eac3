"""Pipeline worker *processes* for reader-driven capture loops (ours; DALI has none).

A thread pipeline shares the interpreter lock with the Python loop, so on small images
(where most of a step is Python) it cannot run much faster than eager mode. Here each
worker process builds its own copy of the reader from the reader's constructor call
(in the directory it was made in) and the state the loop's stream started from, reads
only its own steps of that stream (worker ``j`` of ``K`` takes the steps ``k`` with
``k % K == j``, skipping the others unread), and computes them with the same prepared
plans and RNG placement as the thread pipeline, so the results are identical. The parent
hands out credit (a slot per step) to bound how far each process runs ahead, takes the
results strictly in step order through shared memory (see "How a step's results travel"
below), and turns them back into batches.
Idle workers park and are restarted where the loop stands. Used for reader loops without
feeders whose constants pickle and whose reader class a new process can import; otherwise
threads are used.

A graph with GPU operators is split (:class:`SplitWorker`): the processes read and run the
CPU operators that depend only on the reader, and a thread of this process runs the GPU
operators (and whatever depends on them) on top, so only host data cross processes. When
that GPU part replays as a device graph (``_device_graph``), the processes also run its host
pass once the graph's first step has run (:meth:`ProcessWorker.set_graph_host`).
"""

from __future__ import annotations

import collections
import importlib
import inspect
import itertools
import math
import mmap
import os
import pickle
import platform
import select
import socket
import subprocess
import sys
import time
import traceback
import weakref
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ndd._batch import Batch
from ndd._device import CPU
from ndd._storage import BatchData, LazyBatchData

from ._pipeline import EagerStep, Failure, Worker

_POLL_S = 0.1
# A worker process waiting this long for the loop to consume its results exits ("parks");
# the next get() starts the processes again from the loop's position (about half a second).
# Long enough that a validation pass between epochs does not cost a restart; idle workers
# use no CPU, only memory.
PARK_AFTER_S = 60.0


def _node_specs(nodes: list, staged: set[int], stage: str) -> list:
    """Each node as a worker process computes it: those in ``staged`` run stage ``stage``."""
    return [(("staged", n.id) if n.id in staged else n.id, n.plan, n.inputs, n.kwargs,
             id(n.rng) if n.rng is not None else None, n.offset, stage if n.id in staged else None)
            for n in nodes]


def _rng_bases(loop: Any, nodes: list) -> dict:
    """The RNG clone bases (state, draws per step) of the random ones among ``nodes``."""
    used = {id(n.rng) for n in nodes if n.rng is not None}
    return {key: (str(tr.clone.get_state()), tr.period) for key, tr in loop.rng_tracks.items() if key in used}


def graph_spec(loop: Any, nodes: list, staged: set[int]) -> dict:
    """What a worker process needs to compute ``nodes`` each step, of which those in
    ``staged`` only their host stage (raises if something cannot pickle)."""
    reader = loop.reader
    cls = type(reader)
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise ValueError(f"the reader class {cls.__qualname__} is defined in "
                         f"{'__main__' if cls.__module__ == '__main__' else 'a function'}, "
                         "which a worker process cannot import")
    state, taken = loop.source.origin()
    spec = {"module": cls.__module__, "qualname": cls.__qualname__, "ctor": reader._ctor_args, "cwd": reader._ctor_cwd,
            "state": state, "taken": taken, "batch_size": loop.batch_size,
            "nodes": _node_specs(nodes, staged, "host"), "rngs": _rng_bases(loop, nodes), "graph": None}
    pickle.dumps(spec)  # fail here, in the parent, when something cannot travel
    return spec


def graph_host_spec(loop: Any, nodes: list, staged: set[int], standins: dict, sigs: list) -> bytes:
    """What a worker process needs to run the host pass of a device graph over ``nodes``
    (see ``_device_graph``), pickled: device values are ``standins`` (shapes only), and a
    step whose signatures differ from ``sigs`` is reported as such."""
    return pickle.dumps({"nodes": _node_specs(nodes, staged, "device"), "rngs": _rng_bases(loop, nodes),
                         "standins": standins, "sigs": sigs})


def node_calls(nodes: list, rngs: dict, vals: dict, k: int) -> Iterator[tuple]:
    """``(key, plan, inputs, batch args, random state, stage)`` of each node spec for step
    ``k`` (the thread pipeline's rule, on plain data), resolved from ``vals`` as each is
    taken; a staged node's device stage takes its host stage's data (``("staged", id)``)."""
    from ndd.random import RNG

    clones: dict = {}
    for key, plan, inputs, kwargs, rng_key, offset, stage in nodes:
        if stage == "device":
            ins = vals[key]
        else:
            ins = [None if s is None else (vals[s[1][0]][s[1][1]] if s[0] == "ref" else s[1]) for s in inputs]
        batch_args = {name: vals[s[1][0]][s[1][1]] for name, s in kwargs.items() if s[0] == "ref"}
        state = None
        if rng_key is not None:
            slot = clones.get(rng_key)
            if slot is None:
                base, period = rngs[rng_key]
                c = RNG(state=base)
                c.advance(k * period)
                slot = clones[rng_key] = [c, 0]
            slot[0].advance(offset - slot[1])
            slot[1] = offset + 7
            state = slot[0].draw_words(7)
        yield key, plan, ins, batch_args, state, stage


# Key of a step's values that a worker process could not compute (a captured call failed on
# its data): only the source's values come, with each sample's file or record (the names
# its errors give in the loop's process, where the step runs eagerly).
EAGER = ("eager",)


def _origins(src: list[BatchData]) -> list[BatchData]:
    """What the reader's batch says of each sample's file or record, as one array of text
    (a reader's outputs share one origin); none when it says nothing."""
    bd = next((b for b in src if b.origin is not None), None)
    if bd is None:
        return []
    return [BatchData(dense=np.array([bd.origin(i) for i in range(len(bd))]))]


def run_step(nodes: list, rngs: dict, src: list, k: int) -> dict:
    """Compute every node for step ``k``; a staged node's host stage goes under the key
    ``("staged", id)``."""
    vals = {0: src}
    for key, plan, ins, batch_args, state, stage in node_calls(nodes, rngs, vals, k):
        vals[key] = plan.run(ins, batch_args, state, stage)
    return vals


def child_main(conn: Any, j: int, workers: int, shm_fd: int) -> None:
    """Body of worker process ``j`` of ``workers`` (run by ``python -m ndd_capture._worker``);
    ``shm_fd`` is its shared-memory file (-1: results travel through ``conn`` alone)."""
    step_extra = None  # the tag of the step being computed (sent with its error)
    try:
        spec = pickle.loads(conn.recv_bytes())
        link = _ChildLink(conn, shm_fd, spec["slots"], spec["counters"], spec["park_s"],
                          None if spec["graph"] is None else pickle.loads(spec["graph"]))
        import ndd

        from ._device_graph import worker_host_pass
        from ._loop import _continuous, _flatten

        cls: Any = importlib.import_module(spec["module"])
        for part in spec["qualname"].split("."):
            cls = getattr(cls, part)
        args, kwargs = spec["ctor"]
        os.chdir(spec["cwd"])  # relative paths mean what they meant when the reader was made
        try:
            reader = cls(*args, **kwargs)
            reader.set_state(ndd.ReaderState.from_dict(spec["qualname"], spec["state"]))
        except ValueError as e:  # the same arguments found another dataset
            raise ValueError(
                f"capture's worker process could not make the {spec['qualname']} reader again from its "
                f"arguments as the loop's process has it ({e}): did its files change after the reader "
                "was made?"
            ) from None
        taken = spec["taken"]  # the parent took these steps itself (the traced step)
        start = spec["start"]  # steps counted from the first pipeline step: after a restart, > 0
        counter = itertools.count(-taken)

        def skip() -> bool:  # read only this worker's steps
            k = next(counter)
            return k < start or k % workers != j

        takes_skip = "skip" in inspect.signature(reader._epoch).parameters
        stream = _continuous(reader, spec["batch_size"], skip if takes_skip else None)
        for k, item in enumerate(stream, start=-taken):
            if isinstance(item, Failure):  # a read failed: sent tagged with its epoch
                step_extra = item.extra
                raise item.error
            if k < start or k % workers != j:
                continue
            extra, outs = item
            if not link.take():  # stopped, or parked (nobody consumes: the parent restarts us)
                return
            step_extra = extra
            flat, _ = _flatten(outs)
            src = [b._batch_data() for b in flat]
            try:
                vals = run_step(spec["nodes"], spec["rngs"], src, k)
            except Exception:  # noqa: BLE001 - the loop's process runs this step eagerly (EagerStep)
                vals = {0: src, EAGER: _origins(src)}
            else:
                if link.graph is not None:
                    worker_host_pass(link.graph, vals, k)
            link.publish(extra, vals)
            step_extra = None
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    except BaseException as e:  # noqa: BLE001 - sent to the parent
        text = traceback.format_exc()
        try:
            try:
                conn.send(("err", e, text, step_extra))
            except (OSError, EOFError):
                raise
            except Exception:  # noqa: BLE001 - the exception itself does not pickle
                conn.send(("err", RuntimeError(f"{type(e).__name__}: {e}"), text, step_extra))
        except (OSError, EOFError):  # the loop has gone (torn down by another worker's error)
            pass


# How a step's results travel. Each worker process has a shared-memory file (Linux's
# memfd_create): control words, then one slot per step in flight, which holds the step's
# pickled header (the reader's state; each batch's kind, dtype and shapes) and the raw bytes
# of each array (a ragged batch's samples concatenated into one buffer). The parent copies
# a slot out into fresh arrays. The first step sizes every slot (twice its bytes); a later
# step that does not fit its slot gets a new region, twice its size, at the end of the file
# (the old one is left unused: the regions at most double the memory). A step larger than
# _SLOT_MAX_BYTES, and every step where there is no memfd_create, goes through the socket.
# (Pickling the arrays themselves cost ~360 µs a step on the MNIST-like loop, the socket
# ~190 µs, shared memory ~86 µs.)
#
# On x86-64 the two sides also count through the control words: the child publishes a step
# by raising its count of steps made, and takes credit from the parent's count of steps
# taken, so a step in steady state costs the loop's thread no system call (on the
# MNIST-like loop here the credit byte, the notice and the poll for it cost ~50 µs of the
# ~100 µs the loop's thread spent per step receiving). This relies on x86's ordering of
# stores (a step's bytes are visible before the count that publishes them). Elsewhere a
# message on the socket publishes each step and a byte gives each credit.
#
# A side that must wait for the other says so in a control word and sleeps on the socket;
# the other wakes it with a byte. Each also looks at the counts again after a timeout: the
# store of a waiting flag and the load of a count after it may pass each other (x86 lets a
# load overtake an earlier store), which loses that byte (rarely, at a cost of one timeout).
SHARED_COUNTERS = platform.machine().lower() in ("x86_64", "amd64")
# Control words (int64) at the start of the file, each written by one side only.
_MADE, _TAKEN, _PARENT_WAITS, _CHILD_WAITS, _MESSAGES, _DATA_BYTES = range(6)  # _DATA_BYTES: after them
# Then three words per slot: its header's bytes (-1: on the socket), its data's bytes, and
# where its region starts (bytes after the control words).
_SLOT_WORDS, _PER_SLOT = 8, 3
_SLOT_MAX_BYTES = 256 << 20  # a step larger than this goes through the socket (see above)
_WAKE = b"!"  # child to parent: a step is published (the parent was waiting for it)
_CREDIT = b"+"  # parent to child: a credit (socket mode); a wake-up (counter mode)
_WAIT_S = 0.01  # a waiting side looks at the counts again after this long (counter mode)
_NAP_MIN_S, _NAP_MAX_S = 5e-5, 2e-3  # a child waiting for credit looks this often (see _ChildLink.take)
_IDLE_AFTER_S, _IDLE_NAP_S = 0.1, 0.02  # ... and this often once the loop has paused this long
_SELECT_FDS = 1024  # select() takes descriptors below this (FD_SETSIZE)


def _control_bytes(slots: int) -> int:
    """Bytes of the control words, rounded up so that the slots can be mapped after them."""
    grain = mmap.ALLOCATIONGRANULARITY
    return -(-(_SLOT_WORDS + _PER_SLOT * slots) * 8 // grain) * grain


def _pack(bd: BatchData) -> tuple[tuple, np.ndarray | None]:
    d = bd.dense
    if isinstance(d, np.ndarray) and not d.dtype.hasobject:
        return ("d", d.dtype.str, d.shape), np.ascontiguousarray(d).reshape(-1).view(np.uint8)
    s = bd.samples if d is None else None
    if s and all(type(x) is np.ndarray for x in s) and not s[0].dtype.hasobject \
            and all(x.dtype == s[0].dtype for x in s):
        if all(x.ndim == 1 for x in s):
            # Encoded files and the like: their sizes go ahead of their bytes, as an array,
            # where a list of shapes in the pickled header cost the loop's thread ~3 µs a step.
            sizes = np.fromiter((x.size for x in s), np.int64, len(s))
            flat = np.concatenate([sizes.view(np.uint8), *(np.ascontiguousarray(x).view(np.uint8) for x in s)])
            return ("b", s[0].dtype.str, len(s), flat.size), flat
        flat = np.concatenate([x.reshape(-1) for x in s]).view(np.uint8)
        return ("s", s[0].dtype.str, [x.shape for x in s], flat.size), flat
    return ("p", bd), None


def _unpack(head: tuple, read: Any) -> BatchData:
    """Rebuild a BatchData from its header; ``read(nbytes)`` gives its bytes (a fresh array)."""
    kind, dt = head[0], head[1]
    if kind == "p":
        return dt
    dtype = np.dtype(dt)
    if kind == "d":
        shape = head[2]
        return BatchData(dense=read(math.prod(shape) * dtype.itemsize).view(dtype).reshape(shape))
    if kind == "b":
        n = head[2]
        raw = read(head[3])

        def split() -> list:  # the samples, when something reads them
            ends = np.cumsum(raw[:8 * n].view(np.int64)).tolist()
            data = raw[8 * n:].view(dtype)
            return [data[a:b] for a, b in zip([0, *ends], ends)]
        return LazyBatchData(n, split)
    shapes = head[2]
    flat = read(head[3]).view(dtype)

    def make() -> list:  # the per-sample views, when something reads them
        if shapes[0] and shapes.count(shapes[0]) == len(shapes):  # same-shape samples: one reshape
            return list(flat.reshape(len(shapes), *shapes[0]))
        out, at = [], 0
        for sh in shapes:
            n = math.prod(sh)
            x = flat[at:at + n]
            out.append(x if len(sh) == 1 else x.reshape(sh))
            at += n
        return out
    return LazyBatchData(len(shapes), make)


def _control(fd: int, slots: int) -> tuple[mmap.mmap, np.ndarray]:
    """The control words of shared-memory file ``fd`` (sized by the parent), mapped."""
    mem = mmap.mmap(fd, _control_bytes(slots))
    return mem, np.frombuffer(mem, np.int64)


class _ChildLink:
    """A worker process's end of its link to the loop's process: the socket, and the
    shared-memory file ``fd`` (-1: none) with ``slots`` slots of one size, set (with room to
    spare) by the first step. ``graph`` is the device graph's host pass to run on each step,
    or None (the parent changes it with a message)."""

    def __init__(self, conn: Connection, fd: int, slots: int, counters: bool, park_s: float,
                 graph: Any) -> None:
        self.conn, self.fd, self.slots, self.park_s, self.graph = conn, fd, slots, park_s, graph
        self.counters = counters and fd >= 0
        self.made = 0  # steps published
        self.credit = 0  # credits received and not used (socket mode)
        self.seen = 0  # the parent's messages read (counter mode)
        self.last_wait = 0.0  # seconds the last wait for credit took (counter mode)
        self.regions: list[tuple[int, int]] = []  # each slot's (start, bytes) after the control words
        self.data_bytes = 0  # the file's bytes after the control words
        self.mem: mmap.mmap | None = None
        self.ctrl_mem, self.ctrl = _control(fd, slots) if fd >= 0 else (None, None)
        self._poll = select.poll()
        self._poll.register(conn.fileno(), select.POLLIN)

    def _readable(self, seconds: float) -> bool:
        """Whether a message (or the end of the connection) arrives within ``seconds``:
        select's microseconds where the descriptor fits its set, poll's milliseconds beyond."""
        fd = self.conn.fileno()
        if fd < _SELECT_FDS:
            return bool(select.select([fd], [], [], seconds)[0])
        return bool(self._poll.poll(seconds * 1000))

    def _handle(self, msg: bytes) -> bool:
        """A message from the parent (False: stop)."""
        if not msg:
            return False
        if msg[:1] == b"G":  # from now on, also the host pass of the device graph (or no more)
            self.graph = pickle.loads(msg[1:]) if len(msg) > 1 else None
        elif not self.counters:
            self.credit += len(msg)  # b"+" per step it may compute
        return True

    def take(self) -> bool:
        """Wait until the parent allows one more step; False: stop (the parent said so, or
        nobody took a step for ``park_s`` seconds: this process parks)."""
        if self.counters:
            return self._take_counted()
        while True:  # read what the parent sent (credit, or a message that applies from this step on)
            if not self._readable(0 if self.credit else self.park_s):
                if self.credit:
                    break
                self.conn.send(("parked",))
                return False
            if not self._handle(self.conn.recv_bytes()):
                return False
        self.credit -= 1
        return True

    def _take_counted(self) -> bool:
        ctrl = self.ctrl
        assert ctrl is not None
        while ctrl[_MESSAGES] > self.seen:  # the parent sent a message (found with no system call)
            msg = self.conn.recv_bytes()
            if msg != _CREDIT:  # not a wake-up the parent sent earlier
                self.seen += 1
                if not self._handle(msg):
                    return False
        if self.made - ctrl[_TAKEN] < self.slots:
            return True
        # No credit: look again every quarter of the last wait. In steady state a worker ahead
        # of the loop waits about as long as its slack once the credit comes, so it notices in
        # time, with a few wake-ups a step; the parent wakes it when it waits for it. A loop
        # that pauses (validation, a checkpoint) gets fewer looks.
        nap = min(max(self.last_wait / 4, _NAP_MIN_S), _NAP_MAX_S)
        t0 = time.monotonic()
        ctrl[_CHILD_WAITS] = 1
        try:
            while self.made - ctrl[_TAKEN] >= self.slots:
                waited = time.monotonic() - t0
                if waited > self.park_s:
                    self.conn.send(("parked",))
                    return False
                if waited > _IDLE_AFTER_S:
                    nap = _IDLE_NAP_S
                if self._readable(nap):
                    msg = self.conn.recv_bytes()
                    if msg != _CREDIT:
                        self.seen += 1
                        if not self._handle(msg):
                            return False
        finally:
            ctrl[_CHILD_WAITS] = 0
        self.last_wait = time.monotonic() - t0
        return True

    def publish(self, extra: Any, vals: dict[int, list[BatchData]]) -> None:
        """Hand a step's values to the parent (read back by :meth:`_Receiver.receive`)."""
        heads, bufs = [], []
        for nid, bds in vals.items():
            packed = [_pack(bd) for bd in bds]
            heads.append((nid, [h for h, _ in packed]))
            bufs.extend(b for _, b in packed if b is not None and b.size)
        s = self.made % self.slots
        ctrl = self.ctrl
        if ctrl is not None and self._write(s, pickle.dumps((extra, heads), protocol=5), bufs):
            self.made += 1
            if not self.counters:
                self.conn.send(("slot",))
                return
            ctrl[_MADE] = self.made
            if ctrl[_PARENT_WAITS]:
                self.conn.send_bytes(_WAKE)
            return
        if ctrl is not None:
            ctrl[_SLOT_WORDS + _PER_SLOT * s] = -1
        self.conn.send(("ok", extra, heads))
        for b in bufs:
            self.conn.send_bytes(b)
        self.made += 1
        if self.counters:
            ctrl[_MADE] = self.made

    def _write(self, s: int, head: bytes, bufs: list[np.ndarray]) -> bool:
        """Copy the header and ``bufs`` into slot ``s`` (growing it if they do not fit);
        False if they are larger than _SLOT_MAX_BYTES."""
        room = -(-len(head) // 64) * 64  # the data starts aligned after the header
        total = room + sum(b.size for b in bufs)
        if not self.regions or total > self.regions[s][1]:
            if total > _SLOT_MAX_BYTES:
                return False
            self._grow(s, max(1 << 16, (2 * total + 4095) & ~4095))  # twice the step, in pages
        base = self.regions[s][0]
        assert self.mem is not None and self.ctrl is not None
        self.mem[base:base + len(head)] = head
        at = base + room
        for b in bufs:
            self.mem[at:at + b.size] = b
            at += b.size
        w = _SLOT_WORDS + _PER_SLOT * s
        self.ctrl[w] = len(head)
        self.ctrl[w + 1] = total - room
        return True

    def _grow(self, s: int, size: int) -> None:
        """Give slot ``s`` (every slot, on the first step) a region of ``size`` bytes at the
        end of the file, and map the file again. Only the child writes the regions' words;
        the parent reads a slot's start with its step and maps the file again if needed."""
        grown = range(self.slots) if not self.regions else [s]
        if not self.regions:
            self.regions = [(0, 0)] * self.slots
        for k in grown:
            self.regions[k] = (self.data_bytes, size)
            self.data_bytes += size
        os.ftruncate(self.fd, _control_bytes(self.slots) + self.data_bytes)
        if self.mem is not None:
            self.mem.close()  # nothing holds a view of it: writes go through slices
        self.mem = mmap.mmap(self.fd, self.data_bytes, offset=_control_bytes(self.slots))
        assert self.ctrl is not None
        self.ctrl[_DATA_BYTES] = self.data_bytes
        for k in grown:
            self.ctrl[_SLOT_WORDS + _PER_SLOT * k + 2] = self.regions[k][0]


class _Receiver:
    """The parent's end of one worker's link (see :class:`_ChildLink`); it sizes the control
    words of the shared-memory file ``fd`` (-1: none) before the child starts."""

    def __init__(self, conn: Connection, fd: int, slots: int, counters: bool) -> None:
        self.conn, self.fd, self.slots = conn, fd, slots
        self.counters = counters and fd >= 0
        self.taken = 0  # steps received
        self.mem: mmap.mmap | None = None
        if fd >= 0:
            os.ftruncate(fd, _control_bytes(slots))
        self.ctrl_mem, self.ctrl = _control(fd, slots) if fd >= 0 else (None, None)
        # One poll object for the connection's life: Connection.poll builds a selector per call.
        self._poll = select.poll()
        self._poll.register(conn.fileno(), select.POLLIN)
        # This side never blocks sending: a child may itself be blocked sending a step too large
        # for its slot through the socket, and would wait for this side to read it (both
        # stuck). What finds no room waits here, sent once there is (see _flush).
        self._room = select.poll()
        self._room.register(conn.fileno(), select.POLLOUT)
        self._outbox: collections.deque[tuple[bytes, bool]] = collections.deque()

    def has_step(self) -> bool:
        """Whether the child's next step (or message) is there already."""
        if self.counters:
            return bool(self.ctrl[_MADE] > self.taken)
        return bool(self._poll.poll(0))

    def tell(self, msg: bytes) -> None:
        """Send the child a message: the device graph's host pass (b"G" + pickle, or b"G":
        none), or b"" (stop)."""
        self._outbox.append((msg, True))
        self._flush()

    def _flush(self) -> None:
        """Send what waits in the outbox while the socket has room (a small message then goes
        in whole: a stream socket is writable with most of its buffer free)."""
        while self._outbox and self._room.poll(0):
            msg, counted = self._outbox.popleft()
            self.conn.send_bytes(msg)
            if counted and self.counters:
                self.ctrl[_MESSAGES] += 1

    def receive(self, proc: subprocess.Popen) -> tuple:
        """The child's next step, ``("ok", extra, vals)``, or what it said instead
        (``("err", ...)``, ``("parked",)``), or ``("exited", code)`` if it died."""
        if self.counters:
            ctrl = self.ctrl
            while ctrl[_MADE] <= self.taken:
                msg = self._wait(proc)
                if msg is not None:
                    return msg
            s = self.taken % self.slots
            if ctrl[_SLOT_WORDS + _PER_SLOT * s] >= 0:
                return self._from_slot(s)
            while True:  # the step went through the socket, after any wake-ups left there
                msg = self._message()
                if msg is not None:
                    return msg
        self._flush()
        while not self._poll.poll(_POLL_S * 1000):
            if proc.poll() is not None:
                return ("exited", proc.returncode)
            self._flush()
        return self._message()

    def _wait(self, proc: subprocess.Popen) -> tuple | None:
        """Sleep until the child wakes this side or a timeout passes (counter mode); a message
        it sent meanwhile (a step through the socket, an error), or None."""
        ctrl = self.ctrl
        ctrl[_PARENT_WAITS] = 1
        try:
            if ctrl[_MADE] > self.taken:
                return None
            try:
                self._flush()
                if ctrl[_CHILD_WAITS] and not self._outbox and self._room.poll(0):  # it has not seen its
                    self.conn.send_bytes(_CREDIT)  # credit yet: wake it (it also looks by itself)
            except OSError:  # it parked: the socket says so
                pass
            if self._poll.poll(_WAIT_S * 1000):
                return self._message()
            if proc.poll() is not None and ctrl[_MADE] <= self.taken:
                return ("exited", proc.returncode)
            return None
        finally:
            ctrl[_PARENT_WAITS] = 0

    def _message(self) -> tuple | None:
        """The child's next message on the socket, a step read in full; None for a wake-up."""
        data = self.conn.recv_bytes()
        if data == _WAKE:
            return None
        msg = pickle.loads(data)
        if msg[0] == "slot":
            return self._from_slot(self.taken % self.slots)
        if msg[0] != "ok":
            return msg

        def read(n: int) -> np.ndarray:
            buf = np.empty(n, np.uint8)
            if n:
                self.conn.recv_bytes_into(buf)
            return buf
        return self._took(msg[1], msg[2], read)

    def _from_slot(self, s: int) -> tuple:
        ctrl = self.ctrl
        w = _SLOT_WORDS + _PER_SLOT * s
        head, size, base = int(ctrl[w]), int(ctrl[w + 1]), int(ctrl[w + 2])
        end = base + -(-head // 64) * 64 + size
        if self.mem is None or len(self.mem) < end:  # the first step, or the child grew the file
            # The old mapping goes with its last reference: a copy below holds no view of it.
            self.mem = mmap.mmap(self.fd, int(ctrl[_DATA_BYTES]), offset=_control_bytes(self.slots))
        extra, heads = pickle.loads(self.mem[base:base + head])
        step = np.frombuffer(self.mem, np.uint8, size, end - size).copy()  # one copy
        at = 0

        def read(n: int) -> np.ndarray:
            nonlocal at
            at += n
            return step[at - n:at]
        return self._took(extra, heads, read)

    def _took(self, extra: Any, heads: list, read: Any) -> tuple:
        """The step's values; its slot (or its credit) goes back to the child."""
        vals = {nid: [_unpack(h, read) for h in hs] for nid, hs in heads}
        self.taken += 1
        if self.counters:
            self.ctrl[_TAKEN] = self.taken
        else:
            try:
                self._outbox.append((_CREDIT, False))
                self._flush()
            except OSError:  # it parked meanwhile: its next message says so
                pass
        return "ok", extra, vals

    def close(self) -> None:
        # The mappings go with their last reference (a thread still in receive() keeps them
        # until it leaves): closing them here could pull memory from under that thread.
        self.mem = self.ctrl_mem = self.ctrl = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


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
        self._spec = spec
        self._processes = processes
        self._allowance = max(1, -(-depth // processes))
        # Filled and emptied in place: the finalizer below closes whatever they hold when
        # this worker is garbage-collected with its loop (a dropped reader).
        self._receivers: list[_Receiver] = []
        self._procs: list[subprocess.Popen] = []
        weakref.finalize(self, _shutdown, self._procs, self._receivers)
        self._next = 0
        self.report: Any = None  # the loop's CaptureReport, which counts the waits of get()
        self._start()

    def count_waits(self, report: Any) -> None:
        """Count in ``report`` each get() that had to wait (the loop calls this worker)."""
        self.report = report

    def _start(self) -> None:
        """Start the processes at step ``self._next`` (counted from the first pipeline step)."""
        counters = SHARED_COUNTERS
        payload = pickle.dumps(dict(self._spec, slots=self._allowance, start=self._next, park_s=PARK_AFTER_S,
                                    counters=counters))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        for j in range(self._processes):
            ours, theirs = socket.socketpair()
            shm = os.memfd_create(f"ndd-capture-{j}") if hasattr(os, "memfd_create") else -1
            receiver = _Receiver(Connection(ours.detach()), shm, self._allowance, counters)
            fds = [theirs.fileno()] + ([shm] if shm >= 0 else [])
            proc = subprocess.Popen(
                [sys.executable, "-m", "ndd_capture._worker", str(theirs.fileno()), str(j),
                 str(self._processes), str(shm)],
                pass_fds=fds, env=env, stdin=subprocess.DEVNULL,
            )
            theirs.close()
            self._receivers.append(receiver)
            self._procs.append(proc)
            receiver.conn.send_bytes(payload)
            if not receiver.counters:
                receiver.conn.send_bytes(_CREDIT * self._allowance)

    def get(self) -> Any:
        j = self._next % len(self._receivers)
        receiver = self._receivers[j]
        t0 = time.perf_counter() if self.report is not None and not receiver.has_step() else None
        try:
            msg = receiver.receive(self._procs[j])
        except (EOFError, OSError) as e:
            return Failure(RuntimeError(f"capture worker process {j} closed its connection ({e})"))
        finally:
            if t0 is not None:
                self.report.waited(time.perf_counter() - t0)
        if msg[0] == "parked":  # the loop was idle: start again where it stands
            self.close()
            self._start()
            return self.get()
        if msg[0] == "exited":
            return Failure(RuntimeError(f"capture worker process {j} exited unexpectedly (exit code {msg[1]})"))
        if msg[0] == "err":
            err = msg[1]
            err.__cause__ = RuntimeError(f"in capture worker process {j}:\n{msg[2]}")
            return Failure(err, msg[3])
        _, extra, vals = msg
        self._next += 1
        outs = self._rebuild([Batch._wrap(bd, m.dtype, m.layout, CPU, m.ndim, self._batch_size)
                              for bd, m in zip(vals[0], self._meta)])
        if EAGER in vals:
            if vals[EAGER]:  # the samples' files or records, for the errors of the eager calls
                origin = vals[EAGER][0].dense.tolist().__getitem__
                for bd in vals[0]:
                    bd.origin = origin
            return EagerStep(extra, outs, {0: vals[0]})
        return extra, outs, vals

    def set_graph_host(self, payload: bytes | None) -> None:
        """From their next steps on, the processes also run the host pass of the device graph
        (``payload`` from :func:`graph_host_spec`), or no longer (None); restarted ones too."""
        self._spec["graph"] = payload
        for r in list(self._receivers):
            try:
                r.tell(b"G" + (payload or b""))
            except (OSError, ValueError):  # it parked or was closed meanwhile: a restart sends the spec
                pass

    def close(self) -> None:
        _shutdown(self._procs, self._receivers)


def _shutdown(procs: list[subprocess.Popen], receivers: list[_Receiver]) -> None:
    """Tell the processes to stop, wait for them (kill after 2 s) and empty the lists."""
    for r in receivers:
        try:
            r.tell(b"")
            r.conn.close()
        except OSError:
            pass
    for p in procs:
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=2)
    for r in receivers:
        r.close()
    procs.clear()
    receivers.clear()


class SplitWorker:
    """A pipeline in two stages: worker processes compute the host part of each step, and
    one thread here computes the rest with ``compute(item, k)`` (the GPU part, which needs
    this process's CUDA context and streams). Same interface as the other workers.

    A thread of its own rather than the loop's thread: torch releases the interpreter lock
    while it launches kernels, so the GPU part overlaps the training step (tutorial loop on
    an H200, kernel by kernel: 24.0k samples/s against 18.4k on the loop's thread; as one
    device graph the two were level, see ``ndd.capture.set_gpu_thread``)."""

    def __init__(self, processes: ProcessWorker, compute: Any, depth: int) -> None:
        self._processes = processes
        self._compute = compute

        def step(item: Any, k: int) -> Any:
            if type(item) is EagerStep:  # the processes could not compute it: nor can this part
                return item
            try:
                return compute(item, k)
            except Exception:  # noqa: BLE001 - the body's eager call raises it, if the body makes that call
                return EagerStep.of(item)
        self._thread = Worker(_host_steps(processes), step, depth, 1)

    def get(self) -> Any:
        return self._thread.get()

    def count_waits(self, report: Any) -> None:
        self._thread.count_waits(report)

    def close(self) -> None:
        self._thread.close()
        self._processes.close()


class OnLoopThread:
    """A split pipeline whose GPU part runs on the thread that takes each step (see
    ``ndd.capture.set_gpu_thread``): ``get`` computes ``compute(item, k)`` on the next
    result of the processes. With a device ``graph`` that replays several steps at once
    (``ndd.capture.set_graph_steps``), it takes that many results and computes them together,
    then hands them out one by one. Same interface as the other workers."""

    def __init__(self, processes: ProcessWorker, compute: Any, graph: Any = None) -> None:
        self._processes = processes
        self._compute = compute
        self._graph = graph
        self._ready: collections.deque = collections.deque()  # computed steps not handed out yet
        self._k = 0

    def get(self) -> Any:
        if self._ready:
            return self._ready.popleft()
        item = self._processes.get()
        if isinstance(item, Failure):
            return item
        if type(item) is EagerStep:  # (it takes a step's place: its random values are the body's)
            self._k += 1
            return item
        k = self._k
        n = self._graph.group_size() if self._graph is not None else 1
        if n == 1:
            self._k += 1
            try:
                return self._compute(item, k)
            except Exception:  # noqa: BLE001 - the body's eager call raises it, if the body makes that call
                return EagerStep.of(item)
        items, tail = [item], None
        while len(items) < n:
            item = self._processes.get()
            if isinstance(item, (Failure, EagerStep)):
                tail = item  # handed out after the steps before it
                break
            items.append(item)
        self._k += len(items) + (type(tail) is EagerStep)
        try:
            self._ready.extend(self._graph.compute_group(items, k))
        except Exception:  # noqa: BLE001 - which step failed is not known: each runs eagerly
            self._ready.extend(EagerStep.of(it) for it in items)
        if tail is not None:
            self._ready.append(tail)
        return self._ready.popleft()

    def count_waits(self, report: Any) -> None:
        self._processes.count_waits(report)

    def close(self) -> None:
        self._ready.clear()
        self._processes.close()


def _host_steps(processes: ProcessWorker) -> Any:
    """The processes' steps as an iterator; a failure is the last item (the thread that
    reads it hands it to the loop as it is)."""
    while True:
        item = processes.get()
        yield item
        if isinstance(item, Failure):
            return
