"""``ndd.capture.set_graph_steps``: the device graph of a split capture pipeline replays
several steps at once on the loop's thread. Results, errors and resumed runs equal eager
mode's; steps unlike the captured one, and groups cut short, run kernel by kernel. Runs on
the CPU emulation of the GPU here, on CUDA where there is one."""

from __future__ import annotations

import os
import sys

import cv2
import numpy as np
import pytest

import ndd

pytest.importorskip("ndd_capture", reason="needs the ndd-capture package")
writers = pytest.importorskip("ndd_readers.writers", reason="needs the ndd-readers package")

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from capture_helpers import (  # noqa: E402
    B,
    assert_resumes_exactly,
    assert_same,
    digits_lmdb,
    eager_run,
    graph_of,
    graphed_run,
    noisy_digits_lmdb,
    preprocess,
    split,
    unshuffled,
)


@pytest.fixture(scope="module")
def lmdb_path(tmp_path_factory) -> str:
    return noisy_digits_lmdb(tmp_path_factory.mktemp("digits_graph_steps"))


@pytest.fixture
def graph_steps():
    """``set(n)``: graphs of ``n`` steps for the test; back to 1 after it."""
    yield ndd.capture.set_graph_steps
    ndd.capture.set_graph_steps(1)


def _counting_replays(monkeypatch) -> list:
    """The number of arrays each replay of a graph session got, in order."""
    from ndd_ops_cuda._graph import GraphSession

    calls: list = []
    replay = GraphSession.replay

    def counted(self, arrays):
        calls.append(len(arrays))
        return replay(self, arrays)

    monkeypatch.setattr(GraphSession, "replay", counted)
    return calls


@pytest.mark.parametrize("steps", [2, 3])
def test_one_replay_computes_several_steps(lmdb_path, graph_steps, monkeypatch, steps):
    """The tutorial's body over two epochs of 5 steps: eager results; after the traced and
    the reference step, the graph is captured on a group of ``steps`` steps, and each replay
    fills ``steps`` copies of a step's arrays and computes that many steps."""
    eager = eager_run(lmdb_path, preprocess)
    replays = _counting_replays(monkeypatch)
    graph_steps(steps)
    captured = graphed_run(lmdb_path, preprocess)
    assert_same(eager, captured)
    graph, report = captured[2], captured[3]
    assert graph is not None and graph.state == "replay" and graph.steps == steps
    assert report.worker.endswith(f"; the GPU part replayed as one device graph, {steps} steps a replay")
    assert not report.fallbacks
    per_step = len(graph.kinds)
    assert per_step > 0 and replays and all(n == steps * per_step for n in replays)
    # 10 steps: 1 traced, 1 reference (kernel by kernel), the rest from the graph, in groups
    # of `steps` (the group being computed when the loop ended may be counted too)
    assert graph.stats.kernel_by_kernel == 1 and graph.stats.unlike == 0
    assert 8 <= graph.stats.replayed <= 8 + steps
    assert len(replays) + 1 == -(-graph.stats.replayed // steps)  # (the capture computed one group)


def test_the_workers_keep_two_groups_ready(lmdb_path, graph_steps):
    """With graphs of 4 steps the worker processes hold at least 8 steps between them."""
    graph_steps(4)
    ndd.capture.set_worker_processes(2)
    try:
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng = ndd.random.RNG(1)
        for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            preprocess(jpegs, labels, rng)
            if i == 1:
                processes = reader._capture_loop.worker._processes
                assert processes._allowance * len(processes._receivers) >= 8
                break
    finally:
        ndd.capture.set_worker_processes(None)


def test_unlike_steps_inside_a_group_run_kernel_by_kernel(tmp_path, graph_steps):
    """Batches alternate between 28x28 and 32x32 digits, so every group of 4 holds steps of
    both kinds: the unlike ones run kernel by kernel (their copies in the graph replay on a
    matching step's arrays, and are dropped), the others come from the graph; eager results."""
    path = digits_lmdb(tmp_path, [28 if (i // B) % 2 == 0 else 32 for i in range(6 * B)])
    eager = unshuffled(path, False)
    graph_steps(4)
    captured = split(unshuffled, path, True)
    assert_same(eager, captured)
    graph = graph_of(captured[2])
    stats = graph.stats
    assert graph.state == "replay" and stats.replayed >= 6 and stats.unlike >= 7, stats
    assert stats.kernel_by_kernel == stats.unlike + 1  # and the reference step


def test_a_failing_step_inside_a_group_comes_after_the_steps_before_it(tmp_path, graph_steps):
    """Record 53 (sample 5 of step 6) is cut short. With graphs of 3 steps, the steps before
    it reach the loop as in eager mode; that step's calls run eagerly and its decoder raises
    the eager error, which the body catches; the steps after it replay from the graph again,
    with the same random values as in eager mode."""
    rng = np.random.default_rng(1)
    records = []
    for i in range(80):
        img = rng.integers(0, 255, (28, 28), np.uint8)
        data = cv2.imencode(".jpg", img)[1].tobytes()
        records.append((data[:40] if i == 53 else data, i % 10))
    writers.write_caffe2_lmdb(str(tmp_path), records)

    def body(capture):
        reader = ndd.readers.Caffe2(path=str(tmp_path))
        rng = ndd.random.RNG(0)
        done = []
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            try:
                images, _ = preprocess(jpegs, labels, rng)
            except ValueError as e:
                done.append(f"{type(e).__name__}: {e} <- {e.__cause__}")
                continue
            done.append(images.cpu().numpy().copy())
        return done, str(rng.get_state())

    eager, eager_rng = body(False)
    graph_steps(3)
    ndd.capture.set_worker_processes(2)
    try:
        captured, captured_rng = body(True)
        report = ndd.capture.report()
    finally:
        ndd.capture.set_worker_processes(None)
    assert len(captured) == len(eager) == 10 and captured_rng == eager_rng
    assert isinstance(eager[6], str) and "record 53" in eager[6] and captured[6] == eager[6]
    for k, (a, b) in enumerate(zip(eager, captured)):
        if k != 6:
            np.testing.assert_array_equal(a, b)
    assert report.eager_steps == 1 and "1 step run eagerly after a pipeline error" in report.summary()
    assert report.device_graph.replayed >= 6  # the steps after the failed one too


def test_resume_from_a_state_saved_inside_a_group(lmdb_path, graph_steps):
    """Reader and RNG states saved after step 3 (inside the first group of 3 replayed steps);
    a fresh reader and RNG loaded with them continue exactly as the uninterrupted eager run."""
    graph_steps(3)
    worker = assert_resumes_exactly(lmdb_path, 3)
    assert worker.endswith(", 3 steps a replay"), worker


def test_a_gpu_thread_of_its_own_replays_one_step_at_a_time(lmdb_path, graph_steps):
    """set_graph_steps applies on the loop's thread only: with set_gpu_thread(True) the graph
    holds one step."""
    graph_steps(3)
    ndd.capture.set_gpu_thread(True)
    try:
        captured = graphed_run(lmdb_path, preprocess)
    finally:
        ndd.capture.set_gpu_thread(None)
    assert_same(eager_run(lmdb_path, preprocess), captured)
    assert captured[2].steps == 1 and captured[3].worker.endswith("; the GPU part replayed as one device graph")


@pytest.mark.parametrize("bad", [0, -2, True, 2.0, "3"])
def test_set_graph_steps_takes_a_positive_integer(bad):
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        ndd.capture.set_graph_steps(bad)


def test_a_break_inside_a_group_then_the_next_epochs(lmdb_path, graph_steps):
    """The loop leaves epoch 0 after step 3, inside a group of 3 replayed steps (the steps
    after it computed already), then runs two whole epochs: every step equals eager mode's,
    where the next epoch also starts where the reader stands."""
    def run(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path, random_shuffle=True, seed=2)
        rng = ndd.random.RNG(3)
        out = []
        for epoch in range(3):
            for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=B, capture=capture)):
                out.append([t.cpu().numpy().copy() for t in preprocess(jpegs, labels, rng)])
                if epoch == 0 and i == 3:
                    break
        return out, str(rng.get_state())

    eager = run(False)
    graph_steps(3)
    captured = split(run, True)
    worker = ndd.capture.report().worker
    assert worker.endswith(", 3 steps a replay"), worker
    assert_same(eager, captured)
