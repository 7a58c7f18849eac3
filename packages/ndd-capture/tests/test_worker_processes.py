"""Where the capture pipeline runs: worker processes by default, threads when the graph
cannot travel to another process (ours; DALI has only its own executor)."""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import time

import numpy as np
import pytest

import ndd
from ndd_capture._processes import SHARED_COUNTERS as _SHARED_COUNTERS


def test_default_worker_processes(monkeypatch):
    monkeypatch.setenv("NDD_CAPTURE_PROCESSES", "3")
    assert ndd.capture.default_worker_processes() == 3
    monkeypatch.setenv("NDD_CAPTURE_PROCESSES", "two")
    with pytest.raises(ValueError, match="NDD_CAPTURE_PROCESSES.*'two'"):
        ndd.capture.default_worker_processes()
    monkeypatch.delenv("NDD_CAPTURE_PROCESSES")
    if sys.platform == "win32" or not hasattr(os, "sched_getaffinity"):
        return
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    for cores, expected in ((1, 0), (2, 2), (6, 3), (64, 4)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert ndd.capture.default_worker_processes() == expected
    # torchrun: the node's cores are shared among its ranks
    for ranks, cores, expected in (("2", 2, 0), ("2", 8, 2), ("8", 64, 4)):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", ranks)
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert ndd.capture.default_worker_processes() == expected


_MAIN_READER = """
import sys
import time
import ndd, ndd.types as types
ndd.capture.set_worker_processes(2)

class MyReader(ndd.readers.Caffe2):
    pass

reader = MyReader(path=sys.argv[1])
n = 0
for jpegs, labels in reader.next_epoch(batch_size=8, capture=True):
    images = ndd.decoders.image(jpegs, output_type=types.GRAY)
    n += len(ndd.as_tensor(images))
print(n, ndd.capture.report().worker)
"""


def test_reader_class_in_main_runs_on_threads(lmdb_path, tmp_path):
    script = tmp_path / "main_reader.py"
    script.write_text(_MAIN_READER)
    r = subprocess.run([sys.executable, str(script), lmdb_path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    n, worker = r.stdout.strip().split(" ", 1)
    assert n == "40"
    assert worker.startswith("threads (processes unavailable") and "MyReader is defined in __main__" in worker


@pytest.mark.parametrize("counters", sorted({_SHARED_COUNTERS, False}))  # both links where the CPU allows
def test_steps_that_outgrow_their_shared_memory_slot(tmp_path, monkeypatch, counters):
    """The slots are sized by the first step; later steps of larger images no longer fit
    (their slots grow), and come back in order with the same results as eager mode."""
    import cv2

    from ndd_capture import _processes
    from ndd_readers._caffe2 import write_caffe2_lmdb

    monkeypatch.setattr(_processes, "SHARED_COUNTERS", counters)
    rng = np.random.default_rng(3)
    records = []
    for i in range(40):
        side = 8 if i < 24 else 128  # each worker's first step small, the last two about 300 KB
        img = rng.integers(0, 255, (side, side), dtype=np.uint8)
        records.append((cv2.imencode(".jpg", img)[1].tobytes(), i))
    write_caffe2_lmdb(str(tmp_path), records)

    def run(capture):
        reader = ndd.readers.Caffe2(path=str(tmp_path))
        out = []
        for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=8, capture=capture)):
            if i % 2:
                time.sleep(0.02)  # the workers get ahead (and wait for credit) on some steps
            images = ndd.decoders.image(jpegs, output_type=ndd.types.GRAY)
            out.append((np.asarray(ndd.as_tensor(labels)).ravel().tolist(), np.array(ndd.as_tensor(images))))
        return out

    eager = run(False)
    ndd.capture.set_worker_processes(2)
    try:
        captured = run(True)
        worker = ndd.capture.report().worker
    finally:
        ndd.capture.set_worker_processes(None)
    assert worker == "2 process(es)"
    assert [c[0] for c in captured] == [e[0] for e in eager] == [list(range(k, k + 8)) for k in range(0, 40, 8)]
    for (_, a), (_, b) in zip(captured, eager):
        np.testing.assert_array_equal(a, b)


@pytest.mark.usefixtures("eval_mode")  # capture is independent of EvalMode
def test_large_steps_stay_on_threads(lmdb_path, monkeypatch):
    """Steps with large results (big images) run on threads: their kernels release the
    interpreter lock, and copying the results back from processes would cost more."""
    from ndd_capture import _loop

    def loop(limit):
        monkeypatch.setattr(_loop, "PROCESS_MAX_STEP_BYTES", limit)
        reader = ndd.readers.Caffe2(path=lmdb_path)
        out = []
        for jpegs, _ in reader.next_epoch(batch_size=8, capture=True):
            images = ndd.decoders.image(jpegs, output_type=ndd.types.GRAY)
            images = ndd.resize(images, size=[64, 64])  # one call a line: Python 3.10 too
            out.append(np.array(ndd.as_tensor(images)))
        return out, ndd.capture.report().worker

    ndd.capture.set_worker_processes(2)
    try:
        small, small_worker = loop(1 << 30)
        large, large_worker = loop(16 * 1024)  # a step here: 8 x 64 x 64 resized + the decoded images
    finally:
        ndd.capture.set_worker_processes(None)
    assert small_worker == "2 process(es)"
    assert large_worker.startswith("threads (a step's results are large")
    assert len(small) == len(large) == 5
    for a, b in zip(small, large):
        np.testing.assert_array_equal(a, b)


@pytest.mark.usefixtures("eval_mode")  # capture is independent of EvalMode
def test_worker_processes_exit_after_an_exception_and_gc(lmdb_path, monkeypatch):
    """A loop left by an exception is still referenced by the traceback: its worker
    processes park (exit) once nobody consumes their results."""
    from ndd_capture import _processes

    monkeypatch.setattr(_processes, "PARK_AFTER_S", 0.3)
    ndd.capture.set_worker_processes(2)
    procs = []

    def failing():
        reader = ndd.readers.Caffe2(path=lmdb_path)
        for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=8, capture=True)):
            ndd.decoders.image(jpegs)
            if i == 2:
                procs.extend(reader._capture_loop.worker._procs)
                raise KeyError("boom")

    try:
        with pytest.raises(KeyError):
            failing()
    finally:
        ndd.capture.set_worker_processes(None)
    assert len(procs) == 2
    gc.collect()
    deadline = time.time() + 10
    while any(p.poll() is None for p in procs) and time.time() < deadline:
        time.sleep(0.05)
    assert all(p.poll() is not None for p in procs), "worker processes outlived their reader"


def _steps(reader, rng, capture, pause_at=None):
    out = []
    for epoch in range(2):
        for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=8, capture=capture)):
            images = ndd.decoders.image(jpegs, output_type=ndd.types.GRAY)
            angles = ndd.random.uniform(batch_size=8, range=[-30.0, 30.0], rng=rng)
            images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
            out.append((np.array(ndd.as_tensor(labels)).ravel().tolist(), np.array(ndd.as_tensor(images))))
            if (epoch, i) == pause_at:
                yield reader._capture_loop.worker._procs[:]
    yield out


@pytest.mark.parametrize("counters", sorted({_SHARED_COUNTERS, False}))  # both links where the CPU allows
@pytest.mark.usefixtures("eval_mode")  # capture is independent of EvalMode
def test_idle_worker_processes_park_and_restart_where_the_loop_stands(lmdb_path, monkeypatch, counters):
    from ndd_capture import _processes

    monkeypatch.setattr(_processes, "PARK_AFTER_S", 0.3)
    monkeypatch.setattr(_processes, "SHARED_COUNTERS", counters)
    eager = list(_steps(ndd.readers.Caffe2(path=lmdb_path), ndd.random.RNG(4), False))[-1]
    ndd.capture.set_worker_processes(2)
    try:
        run = _steps(ndd.readers.Caffe2(path=lmdb_path), ndd.random.RNG(4), True, pause_at=(0, 2))
        first = next(run)  # paused inside the loop body, mid-epoch
        deadline = time.time() + 10
        while any(p.poll() is None for p in first) and time.time() < deadline:
            time.sleep(0.05)
        assert all(p.poll() is not None for p in first), "idle worker processes did not park"
        captured = next(run)
    finally:
        ndd.capture.set_worker_processes(None)
    assert [c[0] for c in captured] == [e[0] for e in eager]
    for (_, a), (_, b) in zip(captured, eager):
        np.testing.assert_array_equal(a, b)


@pytest.mark.usefixtures("eval_mode")  # capture is independent of EvalMode
def test_relative_paths_mean_what_they_meant_when_the_reader_was_made(lmdb_path, tmp_path, monkeypatch):
    """A reader made with a relative path, then the working directory changes: the worker
    processes open the same dataset."""
    parent, name = os.path.split(lmdb_path)
    monkeypatch.chdir(parent)
    reader = ndd.readers.Caffe2(path=name)
    monkeypatch.chdir(tmp_path)
    ndd.capture.set_worker_processes(2)
    try:
        labels = []
        for _, lab in reader.next_epoch(batch_size=8, capture=True):
            lab = ndd.cast(lab, dtype=ndd.int64)  # alone on its line: Python 3.10 too
            labels.extend(np.array(ndd.as_tensor(lab)).ravel().tolist())
        worker = ndd.capture.report().worker
    finally:
        ndd.capture.set_worker_processes(None)
    assert worker == "2 process(es)"
    assert labels == [i % 10 for i in range(40)]


def test_lists_refilled_after_the_reader_was_made_do_not_change_the_data(tmp_path):
    """The worker processes rebuild the reader from its constructor's arguments: a list the
    caller refills after making the reader must not change what they read."""
    files = []
    for i in range(12):
        files.append(str(tmp_path / f"{i}.bin"))
        (tmp_path / f"{i}.bin").write_bytes(bytes([i]) * 4)
    labels = list(range(12))
    reader = ndd.readers.File(files=files, labels=labels)
    labels[:] = [-1] * 12
    files.reverse()
    ndd.capture.set_worker_processes(2)
    try:
        got, data = [], []
        for raw, lab in reader.next_epoch(batch_size=4, capture=True):
            lab = ndd.cast(lab, dtype=ndd.int64)  # alone on its line: Python 3.10 too
            got.extend(np.array(ndd.as_tensor(lab)).ravel().tolist())
            data.extend(int(np.asarray(t)[0]) for t in raw.tensors)
        worker = ndd.capture.report().worker
    finally:
        ndd.capture.set_worker_processes(None)
    assert worker == "2 process(es)"
    assert got == list(range(12)) and data == list(range(12))


@pytest.mark.parametrize("processes", [0, 2])
def test_a_dropped_reader_is_collected_and_its_pipeline_stops(lmdb_path, processes):
    """Loop and reader refer to each other, and nothing else holds them once the caller
    drops the reader: both are collected, and the worker processes are closed then, not
    only when they park."""
    import weakref

    ndd.capture.set_worker_processes(processes)
    try:
        reader = ndd.readers.Caffe2(path=lmdb_path)
        for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=8, capture=True)):
            ndd.decoders.image(jpegs)
            if i == 2:
                procs = list(getattr(reader._capture_loop.worker, "_procs", []))
                break
    finally:
        ndd.capture.set_worker_processes(None)
    assert len(procs) == processes
    ref = weakref.ref(reader)
    del reader, jpegs
    deadline = time.time() + 10
    while ref() is not None and time.time() < deadline:
        gc.collect()  # the pipeline thread (threads mode) lets go once it parks (0.5 s)
        time.sleep(0.05)
    assert ref() is None, f"the reader of a dropped capture loop was not collected; held by: {_holders(ref())}"
    assert all(p.poll() is not None for p in procs)


def _holders(obj, depth=3):
    """What refers to ``obj``, a few levels up (for the failure message)."""
    import sys

    seen = {id(sys._getframe())}

    def describe(o, level):
        out = []
        for r in gc.get_referrers(o):
            if id(r) in seen or r is seen:
                continue
            seen.add(id(r))
            name = type(r).__qualname__
            if hasattr(r, "f_code"):
                name += f" {r.f_code.co_name} ({r.f_code.co_filename}:{r.f_lineno})"
            elif isinstance(r, dict):
                name += f" keys={list(r)[:8]}"
            out.append("  " * (depth - level) + name)
            if level > 1:
                out += describe(r, level - 1)
        return out

    return "\n" + "\n".join(describe(obj, depth))


def test_pipeline_threads_are_stopped_at_exit(lmdb_path):
    """At interpreter exit every live pipeline is stopped (a thread left inside a kernel
    while the interpreter shuts down can abort the process), also a loop left mid-epoch."""
    import threading

    from ndd_capture import _pipeline

    ndd.capture.set_worker_processes(0)
    try:
        reader = ndd.readers.Caffe2(path=lmdb_path)
        for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=8, capture=True)):
            ndd.decoders.image(jpegs)
            if i == 2:
                break  # the pipeline keeps computing ahead
    finally:
        ndd.capture.set_worker_processes(None)
    worker = reader._capture_loop.worker
    assert worker in _pipeline._LIVE
    _pipeline._stop_live_workers()  # what atexit runs
    assert not [t for t in threading.enumerate() if t.name == "ndd-capture-worker"]


# How a step travels between a worker process and the loop's (see _processes): the
# control words of the shared-memory file (x86-64), messages on the socket with the data in
# shared memory, and the socket alone (no memfd_create).
_LINKS = {"counters": (True, True), "socket-notices": (True, False), "socket-only": (False, False)}


class _Alive:
    """A stand-in for the worker's Popen: running, or exited with ``code``."""

    def __init__(self, code=None):
        self.returncode = code

    def poll(self):
        return self.returncode


@pytest.fixture
def link_pair(request):
    """``make(slots, park_s)`` -> (the parent's receiver, the child's link) over one socket
    pair and, for the shared modes, one memfd; closed after the test."""
    import socket
    from multiprocessing.connection import Connection

    from ndd_capture import _processes as P

    shared, counters = _LINKS[request.param]
    made = []

    def make(slots=1, park_s=5.0):
        a, b = socket.socketpair()
        parent, child = Connection(a.detach()), Connection(b.detach())
        fd = os.memfd_create("ndd-test") if shared else -1
        rec = P._Receiver(parent, fd, slots, counters)  # sizes the control words first
        link = P._ChildLink(child, os.dup(fd) if shared else -1, slots, counters, park_s, None)
        if not counters:
            parent.send_bytes(P._CREDIT * slots)  # the first credits, as ProcessWorker gives them
        made.append((rec, link))
        return rec, link

    yield make
    for rec, link in made:
        rec.close()
        link.conn.close()
        if link.fd >= 0:  # the child's copy of the file (a worker process's closes at its exit)
            os.close(link.fd)


def _step_values(rng, n=16, big=False):
    from ndd._storage import BatchData

    ragged = [rng.integers(0, 255, int(k), dtype=np.uint8) for k in rng.integers(1, 900, n)]
    same = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(5)]
    dense = rng.integers(-9, 9, (n, 4, 3) if not big else (n, 256, 64), dtype=np.int64)
    return {0: [BatchData(samples=ragged), BatchData(dense=dense)], 1: [BatchData(samples=same)],
            2: [BatchData(samples=[np.array("text")])]}  # a dtype that does not travel as bytes


def _assert_same_values(out, vals):
    assert len(out[0][0]) == len(vals[0][0].samples)
    assert [s.tolist() for s in out[0][0].samples] == [s.tolist() for s in vals[0][0].samples]
    np.testing.assert_array_equal(out[0][1].dense, vals[0][1].dense)
    assert [s.tolist() for s in out[1][0].samples] == [s.tolist() for s in vals[1][0].samples]
    assert out[2][0].samples[0] == np.array("text")


@pytest.mark.parametrize("slot_max", [1 << 30, 100_000], ids=["grown", "socket"])
@pytest.mark.parametrize("link_pair", list(_LINKS), indirect=True)
def test_step_transport_round_trip(link_pair, slot_max, monkeypatch):
    """A worker's step values come back equal: dense batches, ragged and same-shape sample
    lists (cut into samples only when read), other values (pickled), and a step too large
    for its shared-memory slot (sized by the first step), which grows the slot, or takes
    the socket when over _SLOT_MAX_BYTES. The slot is reused, so each step must come back
    as a fresh copy."""
    import threading

    from ndd_capture import _processes as P

    monkeypatch.setattr(P, "_SLOT_MAX_BYTES", slot_max)
    rec, link = link_pair(slots=1)
    rng = np.random.default_rng(0)
    steps = [_step_values(rng), _step_values(rng), _step_values(rng, big=True), _step_values(rng)]

    def child():  # a thread: a large step blocks on the socket until the parent reads it
        for k, vals in enumerate(steps):
            assert link.take()
            link.publish(("extra", k), vals)

    t = threading.Thread(target=child)
    t.start()
    got = [rec.receive(_Alive()) for _ in steps]
    t.join(10)
    assert not t.is_alive()
    for k, (msg, vals) in enumerate(zip(got, steps)):
        assert msg[0] == "ok" and msg[1] == ("extra", k)
        _assert_same_values(msg[2], vals)
    if link.fd >= 0:  # the large step grew the slot, or went through the socket
        assert (link.regions[0][1] > 4 * 100_000) == (slot_max > 100_000)
        assert rec.mem is not None and len(rec.mem) == link.data_bytes


@pytest.mark.parametrize("link_pair", list(_LINKS), indirect=True)
def test_a_worker_computes_no_further_ahead_than_its_slots(link_pair):
    """With every slot full, the child waits until the parent takes a step, and then goes
    on at once (the parent's count, or its credit byte); the parent, waiting for a step, is
    woken when it comes."""
    import threading

    rec, link = link_pair(slots=2)
    vals = _step_values(np.random.default_rng(1))
    for k in range(2):
        assert link.take()
        link.publish(k, vals)
    third = threading.Event()
    t = threading.Thread(target=lambda: (link.take(), third.set(), time.sleep(0.2), link.publish(2, vals)))
    t.start()
    assert not third.wait(0.3), "the child went past its slots"
    assert rec.receive(_Alive())[1] == 0
    assert third.wait(2), "the child did not see the slot it was given"
    assert rec.receive(_Alive())[1] == 1
    t0 = time.monotonic()
    assert rec.receive(_Alive())[1] == 2  # waited for: published about 0.2 s after its credit
    assert time.monotonic() - t0 < 2
    t.join(2)


def test_a_step_on_the_socket_after_a_wake_up_left_there(monkeypatch):
    """Counter mode: a wake-up the parent no longer needed stays on the socket; a later
    step too large for shared memory follows it there, and the parent reads past the wake-up."""
    import socket
    import threading
    from multiprocessing.connection import Connection

    from ndd._storage import BatchData
    from ndd_capture import _processes as P

    monkeypatch.setattr(P, "_SLOT_MAX_BYTES", 100_000)

    a, b = socket.socketpair()  # its buffer holds the large step: the child does not block
    parent, child = Connection(a.detach()), Connection(b.detach())
    fd = os.memfd_create("ndd-test")
    rec = P._Receiver(parent, fd, 1, True)
    link = P._ChildLink(child, os.dup(fd), 1, True, 5.0, None)
    try:
        small = {0: [BatchData(dense=np.arange(8, dtype=np.int32))]}
        big = {0: [BatchData(dense=np.arange(40_000, dtype=np.int32))]}  # 160 KB: over the limit
        rec.ctrl[P._PARENT_WAITS] = 1  # as if the parent were waiting: the child sends a wake-up
        assert link.take()
        link.publish("small", small)
        rec.ctrl[P._PARENT_WAITS] = 0
        assert parent.poll(1)  # the wake-up is on the socket
        msg = rec.receive(_Alive())
        assert msg[1] == "small" and msg[2][0][0].dense.tolist() == list(range(8))
        t = threading.Thread(target=lambda: (link.take(), link.publish("big", big)))
        t.start()
        t.join(5)  # published before the parent looks: it finds the count raised, the step on the socket
        assert rec.ctrl[P._MADE] == 2 and rec.ctrl[P._SLOT_WORDS] == -1
        msg = rec.receive(_Alive())
        assert msg[1] == "big"
        np.testing.assert_array_equal(msg[2][0][0].dense, big[0][0].dense)
    finally:
        rec.close()
        parent.close()
        child.close()
        os.close(link.fd)


@pytest.mark.parametrize("select_fds", [1024, 0], ids=["select", "poll"])  # poll: a descriptor >= FD_SETSIZE
@pytest.mark.parametrize("link_pair", list(_LINKS), indirect=True)
def test_link_messages_parking_and_exit(link_pair, select_fds, monkeypatch):
    """The parent's messages reach a child that has credit (a new device graph host pass,
    then stop); a child nobody takes steps from parks and says so after the steps it made;
    a child that died is reported with its exit code."""
    from ndd_capture import _processes as P

    monkeypatch.setattr(P, "_SELECT_FDS", select_fds)
    rec, link = link_pair(slots=1, park_s=0.2)
    rec.tell(b"G" + pickle.dumps({"graph": 1}))
    assert link.take() and link.graph == {"graph": 1}
    link.publish("a", _step_values(np.random.default_rng(2)))
    t0 = time.monotonic()
    assert not link.take()  # nobody took the step: parked
    assert 0.15 < time.monotonic() - t0 < 3
    assert rec.receive(_Alive())[1] == "a"
    assert rec.receive(_Alive()) == ("parked",)
    rec.tell(b"G")
    rec.tell(b"")
    assert not link.take() and link.graph is None  # the graph's host pass dropped, then stop
    assert rec.receive(_Alive(3)) == ("exited", 3)


@pytest.mark.parametrize("processes", [0, 2, "2, socket notices"])
def test_after_a_failed_step_the_next_epoch_goes_on_as_in_eager_mode(tmp_path, processes, monkeypatch):
    """A corrupt record fails its step mid-epoch; the caller catches the error and calls
    next_epoch again: capture mode goes on after the failed batch, as eager mode does
    (neither from the traced step nor past the pipeline's read-ahead), with the failed
    step's random values drawn, as by an eager body that reads its images after them."""
    import cv2

    from ndd_readers._caffe2 import write_caffe2_lmdb

    jpeg = cv2.imencode(".jpg", np.full((8, 8), 128, np.uint8))[1].tobytes()
    write_caffe2_lmdb(str(tmp_path), [(b"not a jpeg" if i == 21 else jpeg, i) for i in range(48)])
    runs = {}
    if processes == "2, socket notices":  # the link that CPUs other than x86-64 use
        from ndd_capture import _processes

        monkeypatch.setattr(_processes, "SHARED_COUNTERS", False)
        processes = 2
    ndd.capture.set_worker_processes(processes)
    try:
        for capture in (False, True):
            reader = ndd.readers.Caffe2(path=str(tmp_path))
            rng = ndd.random.RNG(7)
            firsts, errors, angles = [], [], []
            for _ in range(2):
                try:
                    for jpegs, labels in reader.next_epoch(batch_size=4, capture=capture):
                        a = ndd.random.uniform(batch_size=4, range=[-5.0, 5.0], rng=rng)
                        ndd.decoders.image(jpegs).evaluate()
                        lab = ndd.cast(labels, dtype=ndd.int64)  # alone on its line: Python 3.10 too
                        firsts.append(int(np.array(ndd.as_tensor(lab)).ravel()[0]))
                        angles.append(float(np.asarray(a.tensors[0])))
                except ValueError as e:
                    errors.append(str(e) + str(e.__cause__))
            runs[capture] = firsts, errors, angles, str(rng.get_state())
    finally:
        ndd.capture.set_worker_processes(None)
    assert runs[False][0] == [0, 4, 8, 12, 16, 24, 28, 32, 36, 40, 44]
    assert runs[True][0] == runs[False][0]
    assert runs[True][2] == runs[False][2] and runs[True][3] == runs[False][3]  # angles, RNG state
    for capture in (False, True):  # the error names the record the bad sample came from
        assert len(runs[capture][1]) == 1
        assert f"cannot decode sample 1 (read from {tmp_path}: record 21 (key " in runs[capture][1][0]


@pytest.mark.parametrize("body", ["skips the failing call", "catches its error", "catches, then draws no angles"])
@pytest.mark.parametrize("processes", [0, 2])
def test_a_step_the_pipeline_cannot_compute_runs_as_in_eager_mode(tmp_path, processes, body):
    """Record 6 does not decode. The pipeline cannot compute its step, so that step's calls
    run eagerly: a body that does not decode on that step goes on, and one that catches
    the decoder's error gets it from the call, as in eager mode (also when it then skips its
    random call: the pipeline computes the later steps again from there); the steps after
    it replay."""
    import cv2

    from ndd_readers._caffe2 import write_caffe2_lmdb

    rng = np.random.default_rng(11)
    records = [(b"\x89PNG garbage" if i == 6 else cv2.imencode(".png", rng.integers(0, 255, (24, 24, 3), np.uint8))[1]
                .tobytes(), i) for i in range(16)]
    write_caffe2_lmdb(str(tmp_path), records)

    def run(capture):
        reader = ndd.readers.Caffe2(path=str(tmp_path))
        rng = ndd.random.RNG(3)
        seen = []
        for step, (jpegs, _) in enumerate(reader.next_epoch(batch_size=4, capture=capture)):
            if body != "catches, then draws no angles":
                angles = ndd.random.uniform(batch_size=4, range=[-20.0, 20.0], rng=rng)
            if body == "skips the failing call" and step == 1:
                seen.append("skipped")
                continue
            try:
                x = ndd.decoders.image(jpegs)
                if body == "catches, then draws no angles":  # after the call that fails
                    angles = ndd.random.uniform(batch_size=4, range=[-20.0, 20.0], rng=rng)
                x = ndd.rotate(x, angle=angles, keep_size=True)
                seen.append(np.array(ndd.as_tensor(ndd.resize(x, size=[8, 8]))))
            except ValueError as e:
                seen.append(f"{e} <- {e.__cause__}")
        return seen, str(rng.get_state()), ndd.capture.report() if capture else None

    eager, eager_rng, _ = run(False)
    ndd.capture.set_worker_processes(processes)
    try:
        captured, captured_rng, report = run(True)
    finally:
        ndd.capture.set_worker_processes(None)
    assert len(captured) == len(eager) == 4 and captured_rng == eager_rng
    assert isinstance(eager[1], str) and captured[1] == eager[1]
    if body != "skips the failing call":
        assert f"cannot decode sample 2 (read from {tmp_path}: record 6 (key " in eager[1]
    for k in (0, 2, 3):
        np.testing.assert_array_equal(captured[k], eager[k])
    assert report.eager_steps == 1
    decode = next(s for s in report.sites if s.op == "decoders.image")  # eager: traced, and the failed step's
    assert decode.replayed == 2 and decode.eager == 1 + (body != "skips the failing call")


def test_a_dataset_changed_on_disk_is_named_as_such(tmp_path, capfd):
    """Files removed after the reader was made: the worker processes, which make the reader
    again, say so (not a state mismatch the user never caused), and print no tracebacks."""
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        for i in range(6):
            (tmp_path / d / f"{i}.jpg").write_bytes(bytes([i]) * 4)  # (not read as images here)
    reader = ndd.readers.File(file_root=str(tmp_path))
    (tmp_path / "a" / "3.jpg").unlink()
    ndd.capture.set_worker_processes(2)
    try:
        with pytest.raises(ValueError, match="could not make the File reader again from its arguments as "
                                             r"the loop's process has it \(.*size=12.*size=11\): did its "
                                             "files change"):
            for raw, _ in reader.next_epoch(batch_size=2, capture=True):
                ndd.cast(raw, dtype=ndd.int32)
    finally:
        ndd.capture.set_worker_processes(None)
    assert "Traceback" not in capfd.readouterr().err


def test_a_failed_read_is_raised_in_its_epoch_and_the_reader_reads_on(tmp_path):
    """Pipeline on threads, a file that cannot be read for a while: the error comes in the
    epoch the batch belongs to, also when the read-ahead hits it during the previous epoch,
    and a later next_epoch reads on as eager mode does (also after a failed traced step)."""
    files = []
    for i in range(24):
        files.append(str(tmp_path / f"{i:02d}.bin"))
        (tmp_path / f"{i:02d}.bin").write_bytes(bytes([i]) * 4)

    def run(capture, gone, back_after):
        reader = ndd.readers.File(files=files, num_shards=2, shard_id=0)
        os.rename(files[gone], files[gone] + ".x")
        log = []
        try:
            for ep in range(3):
                if ep == back_after:
                    os.rename(files[gone] + ".x", files[gone])
                try:
                    for raw, _ in reader.next_epoch(batch_size=4, capture=capture):
                        x = ndd.cast(raw, dtype=ndd.int32)  # alone on its line: Python 3.10 too
                        log.append((ep, int(np.asarray(x.tensors[0])[0])))
                    log.append((ep, "end"))
                except ValueError as e:
                    assert f"{gone:02d}.bin" in str(e)
                    log.append((ep, "error"))
        finally:
            if os.path.exists(files[gone] + ".x"):
                os.rename(files[gone] + ".x", files[gone])
        return log

    ndd.capture.set_worker_processes(0)
    try:
        logs = {}
        for gone, back_after in ((12, 3), (1, 1)):  # the next epoch's first batch; the traced step's
            logs[gone] = run(False, gone, back_after)
            assert run(True, gone, back_after) == logs[gone]
    finally:
        ndd.capture.set_worker_processes(None)
    assert logs[12] == [(0, 0), (0, 4), (0, 8), (0, "end"), (1, "error"), (2, "error")]
    assert logs[1] == [(0, "error"), (1, 0), (1, 4), (1, 8), (1, "end"), (2, 12), (2, 16), (2, 20), (2, "end")]


def test_the_report_counts_the_steps_the_loop_waited_for():
    """A get() whose result is not computed yet counts as a wait, with its time; one that
    finds its result ready (the pipeline ran ahead while the loop was busy) does not."""
    from ndd_capture._pipeline import Worker
    from ndd_capture._report import CaptureReport

    report = CaptureReport(1)
    w = Worker(iter(range(4)), lambda item, k: (time.sleep(0.05), item)[1], depth=1)
    w.count_waits(report)
    try:
        assert [w.get(), w.get()] == [0, 1]
        assert report.waits == 2 and report.waited_s >= 0.08
        time.sleep(0.3)  # the loop is busy: the next step is computed meanwhile
        assert w.get() == 2 and report.waits == 2
        assert w.get() == 3 and report.waits == 3
    finally:
        w.close()
    assert "the loop waited for it on 3 steps" in CaptureReport(1, worker="threads", waits=3).summary()


@pytest.mark.usefixtures("eval_mode")  # capture is independent of EvalMode
def test_worker_processes_ahead_of_a_slow_loop_are_not_waited_for(lmdb_path):
    """Worker processes keep ahead of a loop whose body takes 30 ms: the loop waits for
    their start (the first pipeline step) and then hardly ever."""
    ndd.capture.set_worker_processes(2)
    try:
        reader = ndd.readers.Caffe2(path=lmdb_path)
        for _ in range(2):
            for jpegs, _labels in reader.next_epoch(batch_size=8, capture=True):
                ndd.decoders.image(jpegs, output_type=ndd.types.GRAY)
                time.sleep(0.03)
        report = ndd.capture.report()
    finally:
        ndd.capture.set_worker_processes(None)
    assert report.worker == "2 process(es)" and report.steps == 10
    assert 1 <= report.waits <= 3 and report.waited_s > 0, report.summary()
    assert report.to_dict()["waits"] == report.waits


@pytest.mark.parametrize("kind", ["dense", "files", "int16 samples", "strided samples", "2-d samples", "objects"])
def test_a_steps_values_travel_intact(kind):
    """What a worker process packs for each value (a dense array; 1-D samples such as encoded
    files, their sizes ahead of their bytes; samples of other shapes; anything else pickled)
    unpacks to the same samples, from bytes at any offset of the step."""
    from ndd._storage import BatchData
    from ndd_capture._processes import _pack, _unpack

    rng = np.random.default_rng(3)
    values = {
        "dense": BatchData(dense=rng.random((4, 3, 2), dtype=np.float32)),
        "files": BatchData(samples=[rng.integers(0, 255, k, dtype=np.uint8) for k in (5, 0, 700, 3)]),
        "int16 samples": BatchData(samples=[rng.integers(-9, 9, k).astype(np.int16) for k in (5, 1, 7)]),
        "strided samples": BatchData(samples=[rng.random(k, dtype=np.float32)[::2] for k in (10, 4)]),
        "2-d samples": BatchData(samples=[rng.integers(0, 9, (3, 4)).astype(np.uint8),
                                          rng.integers(0, 9, (2, 5)).astype(np.uint8)]),
        "objects": BatchData(samples=[np.array(["a", None], object)]),
    }
    bd = values[kind]
    head, flat = _pack(bd)
    step = np.concatenate([np.zeros(3, np.uint8), flat if flat is not None else np.zeros(0, np.uint8)])[3:]
    got = _unpack(pickle.loads(pickle.dumps(head)), lambda n: step[:n])
    want = bd.samples if bd.dense is None else list(bd.dense)
    assert len(got) == len(want)
    for a, b in zip(want, got.samples if got.dense is None else list(got.dense)):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b) if kind != "objects" else list(a) == list(b)


@pytest.mark.parametrize("counters", [False, True])
def test_the_parent_never_blocks_sending_to_a_child_that_reads_nothing(counters):
    """A worker sending a step too large for its slot through the socket reads nothing until
    the parent reads that step; a parent blocked sending it a message (a credit, the device
    graph's host pass) at that moment hung both. The parent's messages wait for room."""
    import socket
    import threading
    from multiprocessing.connection import Connection

    from ndd_capture._processes import _CREDIT, _MESSAGES, _Receiver

    ours, theirs = socket.socketpair()
    fd = os.memfd_create("ndd-test") if counters else -1
    try:
        r = _Receiver(Connection(ours.detach()), fd, 2, counters)
        child = Connection(theirs.detach())
        filled = 0
        while r._room.poll(0):  # the child reads nothing: its socket fills up
            r.conn.send_bytes(b"x" * 65536)
            filled += 1
        messages = [b"G" + b"spec" * 100, b"G"]
        done = threading.Thread(target=lambda: [r.tell(m) for m in messages])
        done.start()
        done.join(timeout=5)
        blocked = done.is_alive()
        got = [child.recv_bytes() for _ in range(filled)]  # the child reads (frees a blocked tell too)
        done.join(timeout=5)
        assert not blocked, "tell() blocked on a child whose socket was full"
        r._flush()
        assert [child.recv_bytes() for _ in messages] == messages and len(got) == filled
        if counters:
            assert r.ctrl[_MESSAGES] == len(messages)  # counted once each was sent
        else:
            r._outbox.append((_CREDIT, False))
            r._flush()
            assert child.recv_bytes() == _CREDIT
    finally:
        if fd >= 0:
            os.close(fd)
