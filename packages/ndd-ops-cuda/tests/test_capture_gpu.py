"""The capture-mode tutorial's GPU loop (decode on the GPU, ``labels.gpu()``) in capture
mode: every call is captured, the ``.gpu()`` copy included, and the results equal eager
mode, on threads and with the host part in worker processes. Runs on the CPU emulation of the GPU here, on CUDA where there is one."""

from __future__ import annotations

import os
import sys

import cv2
import numpy as np
import pytest

import ndd
import ndd.types as types

pytest.importorskip("ndd_capture", reason="needs the ndd-capture package")
writers = pytest.importorskip("ndd_readers.writers", reason="needs the ndd-readers package")

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from capture_helpers import (  # noqa: E402
    B,
    assert_replays_from_a_graph,
    assert_resumes_exactly,
    assert_same,
    assert_the_graph_takes_every_call,
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
    return noisy_digits_lmdb(tmp_path_factory.mktemp("digits_gpu"))


def run(path, capture):
    reader = ndd.readers.Caffe2(path=path, random_shuffle=True, seed=1)
    rng = ndd.random.RNG(5)
    out = []
    for _ in range(2):
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            images, targets = preprocess(jpegs, labels, rng)
            assert images.device == targets.device and images.device.type in ("cuda", "cpu")
            out.append((images.cpu().numpy().copy(), targets.cpu().numpy().copy()))
    return out, str(rng.get_state())


@pytest.mark.parametrize("processes", [0, 2])
def test_the_gpu_tutorial_loop_is_fully_captured(lmdb_path, processes):
    """On threads, and split: the reader, the decoding and the angles in 2 processes, the
    GPU part, one device graph, on the loop's thread (the default for a graph)."""
    eager = run(lmdb_path, False)
    ndd.capture.set_worker_processes(processes)
    try:
        captured = run(lmdb_path, True)
    finally:
        ndd.capture.set_worker_processes(None)
    report = ndd.capture.report()
    assert eager[1] == captured[1]
    assert len(eager[0]) == len(captured[0]) == 10
    for (ia, la), (ib, lb) in zip(eager[0], captured[0]):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)
    ops = [s.op for s in report.sites]
    assert ops == ["decoders.image", "random.uniform", "rotate", "crop_mirror_normalize", "_to_device",
                   "squeeze", "cast"]
    assert all(s.captured for s in report.sites), str(report)
    assert all(s.eager == 1 and s.replayed == 9 for s in report.sites), str(report)
    if processes:
        assert report.worker == ("2 process(es) for the reader, 1 host operator(s) and the host stage of 1 GPU "
                                 "operator(s); the 6 on the GPU on the loop's thread; the GPU part replayed "
                                 "as one device graph")
    else:
        assert report.worker == "threads"


@pytest.mark.parametrize("processes", [0, 2])
def test_device_gpu_on_host_images_is_captured_with_its_move(lmdb_path, processes):
    """An operator called with device="gpu" on host images (decoded on the CPU): the move to
    the GPU is its own captured call, and the loop replays both, with eager mode's values."""
    def loop(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        out = []
        for jpegs, _ in reader.next_epoch(batch_size=B, capture=capture):
            images = ndd.decoders.image(jpegs, output_type=types.GRAY)
            images = ndd.resize(images, size=[14, 14], device="gpu")
            assert images.device == ndd.Device("gpu:0")
            out.append(images.torch().cpu().numpy().copy())
        return out

    eager = loop(False)
    ndd.capture.set_worker_processes(processes)
    try:
        captured = loop(True)
    finally:
        ndd.capture.set_worker_processes(None)
    assert len(eager) == len(captured) == 5
    for a, b in zip(eager, captured):
        np.testing.assert_array_equal(a, b)
    sites = ndd.capture.report().sites
    assert [s.op for s in sites] == ["decoders.image", "_to_device", "resize"]
    assert all(s.captured and s.replayed == 4 for s in sites), str(ndd.capture.report())


def test_device_gpu_on_two_host_inputs_moves_them_in_one_captured_call(lmdb_path):
    """Two host inputs of one device="gpu" call move together (one call site, so strict
    capture mode takes it), and the loop replays with eager mode's values."""
    def loop(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        out = []
        for jpegs, _ in reader.next_epoch(batch_size=B, capture=capture):
            a = ndd.decoders.image(jpegs, output_type=types.GRAY)
            b = ndd.flip(a, horizontal=1)
            out.append(ndd.cat(a, b, axis=0, device="gpu").torch().cpu().numpy().copy())
        return out

    eager = loop(False)
    captured = loop("strict")
    assert len(eager) == len(captured) == 5
    for x, y in zip(eager, captured):
        np.testing.assert_array_equal(x, y)
    sites = ndd.capture.report().sites
    assert [s.op for s in sites] == ["decoders.image", "flip", "_to_device", "cat"]
    assert all(s.captured and s.replayed == 4 for s in sites)


def test_a_replayed_call_on_another_device_ends_the_loop(lmdb_path):
    """``device=`` is checked on every replayed call, whatever form it takes: "gpu",
    "gpu:0" and ``ndd.Device("gpu")`` are the traced device, ``.gpu(0)`` is ``.gpu()``; "cpu"
    raises."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    forms = ["gpu", "gpu:0", ndd.Device("gpu"), "gpu", "cpu"]
    with pytest.raises(RuntimeError, match="traced with device=gpu but called with device=cpu. Cannot change"):
        for step, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            images = ndd.decoders.image(jpegs, device=forms[step], output_type=types.GRAY)
            labels = labels.gpu(0 if step % 2 else None)
            assert images.device == labels.device == ndd.Device("gpu:0")
    assert step == 4
    sites = {s.op: s for s in ndd.capture.report().sites}
    assert sites["decoders.image"].replayed == 3 and sites["_to_device"].replayed == 3


def random_crops(path, capture):
    """A random decoder on the GPU: its host stage (windows and pixels) runs in the worker
    processes with the RNG placed as in eager mode."""
    reader = ndd.readers.Caffe2(path=path, random_shuffle=True, seed=2)
    rng = ndd.random.RNG(9)
    out = []
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=capture):
        images = ndd.decoders.image_random_crop(jpegs, device="gpu", output_type=types.GRAY, rng=rng)
        images = ndd.resize(images, size=[16, 16])
        out.append(images.torch().cpu().numpy().copy())
    return out, str(rng.get_state())


def test_a_random_gpu_decoder_in_worker_processes(lmdb_path):
    eager = random_crops(lmdb_path, False)
    ndd.capture.set_worker_processes(2)
    try:
        captured = random_crops(lmdb_path, True)
    finally:
        ndd.capture.set_worker_processes(None)
    assert "host stage of 1 GPU operator(s)" in ndd.capture.report().worker
    assert eager[1] == captured[1] and len(eager[0]) == len(captured[0]) == 5
    for a, b in zip(eager[0], captured[0]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", ["decoders.image", "decoders.image_crop", "decoders.image_random_crop"])
def test_staged_decoders_equal_their_kernel(lmdb_path, op):
    """The protocol of core's Plan.run: host stage then device stage equals the kernel."""
    from ndd._dispatch import Plan
    from ndd._plugins import schemas

    reader = ndd.readers.Caffe2(path=lmdb_path)
    jpegs, _ = next(iter(reader.next_epoch(batch_size=B)))
    extra = {"crop": [10, 12]} if op == "decoders.image_crop" else {}
    plan = Plan(schemas[op], {"output_type": types.GRAY, **extra}, [], [None], [], B, ndd.Device("gpu"),
                ndd.EvalContext.current())
    assert plan.staged
    state = ndd.random.RNG(4).draw_words(7) if op.endswith("random_crop") else None
    whole = plan.run([jpegs._batch_data()], {}, state)
    staged = plan.run([jpegs._batch_data()], {}, state, "host")
    assert all(isinstance(x, np.ndarray) for bd in staged for x in ([bd.dense] if bd.dense is not None
                                                                     else bd.samples))
    parts = plan.run(staged, {}, state, "device")
    for a, b in zip(whole[0].samples, parts[0].samples):
        assert torch_equal(a, b)


def torch_equal(a, b) -> bool:
    import torch

    return a.device == b.device and torch.equal(a, b)


def _gpu_steps(path, rng, capture, pause_at=None):
    """The tutorial body over 2 epochs; yields the worker's processes at ``pause_at``."""
    reader = ndd.readers.Caffe2(path=path, random_shuffle=True, seed=3)
    out = []
    for epoch in range(2):
        for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=B, capture=capture)):
            images, targets = preprocess(jpegs, labels, rng)
            out.append((images.cpu().numpy().copy(), targets.cpu().numpy().copy()))
            if (epoch, i) == pause_at:
                yield reader._capture_loop.worker._processes._procs[:]
    yield out


def test_a_split_pipeline_parks_and_restarts_where_the_loop_stands(lmdb_path, monkeypatch):
    import time

    from ndd_capture import _processes

    monkeypatch.setattr(_processes, "PARK_AFTER_S", 0.3)
    eager = list(_gpu_steps(lmdb_path, ndd.random.RNG(6), False))[-1]
    ndd.capture.set_worker_processes(2)
    try:
        run = _gpu_steps(lmdb_path, ndd.random.RNG(6), True, pause_at=(0, 2))
        procs = next(run)  # paused inside the loop body, mid-epoch
        deadline = time.time() + 10
        while any(p.poll() is None for p in procs) and time.time() < deadline:
            time.sleep(0.05)
        assert all(p.poll() is not None for p in procs), "idle worker processes did not park"
        captured = next(run)
    finally:
        ndd.capture.set_worker_processes(None)
    assert len(captured) == len(eager) == 10
    for (ia, la), (ib, lb) in zip(eager, captured):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)


def test_a_corrupt_record_fails_the_same_way_in_a_split_pipeline(tmp_path):
    rng = np.random.default_rng(1)
    records = []
    for i in range(24):
        img = rng.integers(0, 255, (28, 28), np.uint8)
        data = cv2.imencode(".jpg", img)[1].tobytes()
        records.append((data[:40] if i == 13 else data, i % 10))  # record 13: cut short
    writers.write_caffe2_lmdb(str(tmp_path), records)

    def body(capture):
        reader = ndd.readers.Caffe2(path=str(tmp_path))
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            preprocess(jpegs, labels, ndd.random.RNG(0))

    with pytest.raises(ValueError) as eager:
        body(False)
    ndd.capture.set_worker_processes(2)
    try:
        with pytest.raises(ValueError) as captured:
            body(True)
    finally:
        ndd.capture.set_worker_processes(None)
    def root(e):  # eager mode wraps it ("An error happened during asynchronous execution")
        while e.__cause__ is not None:
            e = e.__cause__
        return e

    # record 13 is sample 5 of the second batch; capture mode runs that step's calls eagerly
    # (the worker process could not compute it), and raises the same error, where eager mode does
    assert type(captured.value) is type(eager.value) and str(captured.value) == str(eager.value)
    assert str(root(captured.value)) == str(root(eager.value))
    root = root(eager.value)
    assert str(root).startswith(f"Operator `decoders.image`: cannot decode sample 5 (read from {tmp_path}: record 13 "
                                "(key ") and "corrupt or truncated JPEG" in str(root)


def test_a_bad_sample_on_the_graphs_first_step_leaves_the_graph_on(tmp_path):
    """The device graph takes its reference from the first pipeline step; a sample a GPU
    operator refuses there (an image reshape cannot take) fails that step (the body catches
    it), and the next step is the reference instead: the graph still replays the rest."""
    rng = np.random.default_rng(1)
    writers.write_caffe2_lmdb(str(tmp_path), [
        (cv2.imencode(".png", rng.integers(0, 255, (16 if i == 6 else 8, 11, 3), np.uint8))[1].tobytes(), i)
        for i in range(40)])  # record 6: step 1 (batch 4), the graph's first

    def body(capture):
        reader = ndd.readers.Caffe2(path=str(tmp_path))
        out = []
        for jpegs, _ in reader.next_epoch(batch_size=4, capture=capture):
            images = ndd.decoders.image(jpegs)
            try:
                y = ndd.reshape(images, shape=[8, 33], device="gpu")
                out.append(ndd.cast(y, dtype=ndd.float32).torch().cpu().numpy().copy())
            except ValueError as e:
                out.append(str(e))
        return out

    eager = body(False)
    ndd.capture.set_worker_processes(2)
    try:
        captured = body(True)
        report = ndd.capture.report()
    finally:
        ndd.capture.set_worker_processes(None)
    assert len(captured) == len(eager) == 10
    assert isinstance(eager[1], str) and captured[1] == eager[1]
    for k in [0, *range(2, 10)]:
        np.testing.assert_array_equal(captured[k], eager[k])
    assert "replayed as one device graph" in report.worker, report.worker
    assert report.device_graph.replayed >= 7 and report.eager_steps == 1  # (before: 0, the graph off for good)


def test_resume_a_split_gpu_loop_from_a_mid_epoch_state(lmdb_path):
    """Reader and RNG states saved after step 2 of a captured GPU loop; a fresh reader and RNG
    loaded with them continue, captured, exactly as the uninterrupted eager run."""
    worker = assert_resumes_exactly(lmdb_path, 2)
    assert "the 6 on the GPU on the loop's thread" in worker


@pytest.mark.parametrize("gpu_thread", [True, None])
def test_dropping_the_reader_of_a_split_loop_stops_its_thread_and_processes(lmdb_path, gpu_thread):
    """The pipeline outlives a ``break`` (the next epoch reuses it) but not its reader: once the
    reader is dropped, the pipeline thread (with a thread for the GPU part) parks and the
    worker processes are closed."""
    import gc
    import threading
    import time

    def pipeline_threads():
        return [t for t in threading.enumerate() if t.name == "ndd-capture-worker"]

    before = set(pipeline_threads())
    ndd.capture.set_worker_processes(2)
    ndd.capture.set_gpu_thread(gpu_thread)
    try:
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng = ndd.random.RNG(1)
        for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            preprocess(jpegs, labels, rng)
            if i == 2:
                procs = reader._capture_loop.worker._processes._procs[:]
                assert bool(set(pipeline_threads()) - before) == bool(gpu_thread)
                break
    finally:
        ndd.capture.set_worker_processes(None)
        ndd.capture.set_gpu_thread(None)
    del reader, jpegs, labels
    deadline = time.time() + 15
    while time.time() < deadline and (any(p.poll() is None for p in procs) or set(pipeline_threads()) - before):
        gc.collect()
        time.sleep(0.1)
    assert all(p.poll() is not None for p in procs), "worker processes outlived their reader"
    assert not set(pipeline_threads()) - before


def test_the_gpu_part_replays_as_one_device_graph(lmdb_path):
    """The first pipeline step runs kernel by kernel (the reference), the second is captured
    and every later one replayed: of 10 steps, 1 traced and 1 reference, so at least 8 from
    the graph (a few more computed ahead); the results equal eager mode's, with and
    without the graph."""
    eager = eager_run(lmdb_path, preprocess)
    with_graph = graphed_run(lmdb_path, preprocess)
    assert_same(eager, with_graph)
    graph = with_graph[2]
    assert graph is not None and graph.state == "replay"
    stats = graph.stats
    assert 8 <= stats.replayed <= 12 and stats.unlike == 0
    # The first step is the reference, run kernel by kernel; the report shows the same
    # numbers (live).
    assert stats.kernel_by_kernel == 1
    assert with_graph[3].device_graph is stats
    assert f"device graph: {stats.replayed} steps replayed, 1 kernel by kernel" in with_graph[3].summary()
    assert with_graph[3].to_dict()["device_graph"]["replayed"] == stats.replayed
    # The worker processes ran the host pass of every step they computed after the
    # reference step (those already in flight then got it in this process).
    assert stats.host_pass_in_workers >= stats.replayed - graph.loop.depth > 0
    without = graphed_run(lmdb_path, preprocess, graphs=False)
    assert_same(eager, without)
    assert without[2] is None
    assert "device graph" not in ndd.capture.report().worker


def test_steps_with_graph_arrays_leave_the_staged_pixels_behind(lmdb_path, monkeypatch):
    """A worker process that ran the graph's host pass sends the step's arrays (the decoded
    pixels among them) without the decoder's staged host data, which they duplicate; the
    steps before it send the staged data."""
    from ndd_capture import _processes

    took = _processes._Receiver._took
    keys: list[set] = []

    def record(self, extra, heads, read):
        keys.append({key for key, _ in heads})
        return took(self, extra, heads, read)

    monkeypatch.setattr(_processes._Receiver, "_took", record)
    assert_same(eager_run(lmdb_path, preprocess), graphed_run(lmdb_path, preprocess))
    graph_steps = [k for k in keys if ("graph", "arrays") in k]
    assert graph_steps and all(not any(isinstance(key, tuple) and key[0] == "staged" for key in k)
                               for k in graph_steps)
    assert any(("staged", 1) in k for k in keys if ("graph", "arrays") not in k)


def test_steps_unlike_the_captured_one_run_kernel_by_kernel(tmp_path):
    """Batches alternate between 28x28 and 32x32 digits: a step whose shapes differ from the
    captured step's is not replayed (the graph would compute the captured shapes) but runs
    kernel by kernel, with eager results; the others keep replaying."""
    path = digits_lmdb(tmp_path, [28 if (i // B) % 2 == 0 else 32 for i in range(6 * B)])
    eager = unshuffled(path, False)
    captured = split(unshuffled, path, True)
    assert_same(eager, captured)
    graph = graph_of(captured[2])
    stats = graph.stats
    assert graph.state == "replay" and stats.replayed >= 6 and stats.unlike >= 7, stats
    assert stats.kernel_by_kernel == stats.unlike + 1  # and the reference step
    # ... told apart by the worker processes' host passes, but for the steps in flight
    assert stats.host_pass_in_workers >= stats.replayed + stats.unlike - graph.loop.depth
    assert ndd.capture.report().worker.endswith("; the GPU part replayed as one device graph")


def test_a_graph_whose_steps_keep_differing_is_dropped(tmp_path, monkeypatch):
    """Two 28x28 batches, then 32x32 ones: after MAX_MISSES + 1 unlike steps in a row the
    graph is dropped and the report says why; results equal eager mode's throughout."""
    from ndd_capture import _device_graph

    path = digits_lmdb(tmp_path, [28] * (2 * B) + [32] * (4 * B))
    eager = unshuffled(path, False)
    monkeypatch.setattr(_device_graph, "MAX_MISSES", 3)
    captured = split(unshuffled, path, True)
    assert_same(eager, captured)
    graph = graph_of(captured[2])
    assert graph.state == "off" and graph.streak == 4
    # 3 epochs of 6 steps, the first traced: every later step either replayed or ran kernel
    # by kernel (a few more may have been computed ahead)
    assert graph.stats.replayed + graph.stats.kernel_by_kernel >= 3 * 6 - 1
    assert graph.processes._spec["graph"] is None  # the workers were told to stop the host pass
    assert ndd.capture.report().worker.endswith(
        "; not as a device graph (4 steps in a row differed from the captured one)")


def test_an_operator_that_cannot_be_graphed_is_named_in_the_report(lmdb_path):
    """bb_flip has no graph stage (boxes usually differ in number from step to step)."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        boxes = ndd.random.uniform(batch_size=B, range=[0.0, 0.5], shape=[3, 4], rng=rng)
        boxes = ndd.bb_flip(boxes.gpu(), horizontal=1)
        return images.torch(), boxes.torch()

    assert_same(eager_run(lmdb_path, body), graphed_run(lmdb_path, body))
    assert ndd.capture.report().worker.endswith("; not as a device graph (bb_flip cannot be)")


@pytest.mark.parametrize("where", ["random", "fixed"])
def test_erase_replays_from_a_graph(lmdb_path, where):
    """erase with random regions (the mask goes up each step) or fixed ones, one fill value
    or one per channel: eager results from the graph."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        if where == "random":
            at = ndd.random.uniform(batch_size=B, range=[0.0, 0.8], shape=[4], rng=rng)
            images = ndd.erase(images, anchor=at, shape=[0.3, 0.2, 0.1, 0.25], normalized=True,
                               axis_names="HW", fill_value=(10.0, 200.0, 30.0))
        else:
            images = ndd.erase(images, anchor=[4, 4, 20, 2], shape=[8, 8, 5, 30], axis_names="HW", fill_value=9)
        return (images.torch(),)

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_colour_conversions_and_tables_replay_from_a_graph(lmdb_path):
    """color_space_conversion (channel picks and fixed-point recipes) and lookup_table (its
    table a cached constant) are part of the graph."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        bgr = ndd.color_space_conversion(images, image_type=types.RGB, output_type=types.BGR)
        ycc = ndd.color_space_conversion(bgr, image_type=types.BGR, output_type=types.YCbCr)
        gray = ndd.color_space_conversion(images, image_type=types.RGB, output_type=types.GRAY)
        inverted = ndd.lookup_table(gray, keys=[0, 128, 255], values=[255.0, 127.0, 0.0], default_value=64.0,
                                    dtype=ndd.float32)
        return bgr.torch(), ycc.torch(), inverted.torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_gaussian_blur_replays_from_a_graph(lmdb_path):
    """A blur with constant arguments: taps as kernel arguments, border indices cached; with
    a random sigma: each sample's taps are input arrays."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        sigma = ndd.random.uniform(batch_size=B, range=[0.1, 2.0], rng=rng)
        return (ndd.gaussian_blur(images, sigma=1.5).torch(), ndd.gaussian_blur(images, window_size=3).torch(),
                ndd.gaussian_blur(images, sigma=sigma).torch())

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_resize_of_uniform_batches_replays_from_a_graph(lmdb_path):
    """resize's filter taps are cached constants: a uniform batch resized with constant
    arguments is part of the graph (attributes too); eager results."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        big, attrs = ndd.resize(images, resize_x=40, resize_y=36, save_attrs=True)
        small = ndd.resize(big, size=(20, 24), interp_type=types.INTERP_CUBIC, antialias=True)
        return small.torch(), attrs.torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_resize_of_ragged_batches_runs_kernel_by_kernel(tmp_path):
    """Digits of two sizes in every batch: the taps differ per sample (uploaded each call),
    which a graph cannot take; the loop runs kernel by kernel with eager results and the
    report says why."""
    path = digits_lmdb(tmp_path, [28 if i % 2 else 32 for i in range(4 * B)])

    def run(capture):  # unshuffled: every batch has the same sizes in the same places
        reader = ndd.readers.Caffe2(path=path, random_shuffle=False)
        out = []
        for _ in range(2):
            for jpegs, _labels in reader.next_epoch(batch_size=B, capture=capture):
                images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
                out.append([ndd.resize(images, size=(30, 30)).torch().cpu().numpy().copy()])
        return out, "", reader

    eager = run(False)
    captured = split(run, True)
    assert_same(eager, captured)
    graph = graph_of(captured[2])
    assert graph.state == "off" and graph.stats.replayed == 0
    assert ndd.capture.report().worker.endswith(
        "; not as a device graph (capture failed: RuntimeError: a kernel copied host data to the GPU inside a "
        "device graph)"), ndd.capture.report().worker


def test_windows_past_the_image_keep_the_loop_kernel_by_kernel(lmdb_path):
    """crop_mirror_normalize padding windows that reach past the image is not graphed (its
    fill goes up with each call): the loop runs kernel by kernel with eager results, and
    the report says why."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        images = ndd.crop_mirror_normalize(images, crop=(32, 32), out_of_bounds_policy="pad",
                                           fill_values=[7.0], dtype=ndd.float32)
        return (images.torch(),)

    eager = eager_run(lmdb_path, body)
    captured = graphed_run(lmdb_path, body)
    assert_same(eager, captured)
    assert captured[2].state == "off" and captured[2].stats.replayed == 0
    assert ndd.capture.report().worker.endswith(
        "; not as a device graph (RuntimeError: Operator `crop_mirror_normalize`: a graph takes windows of "
        "one size inside the images)"), ndd.capture.report().worker


@pytest.mark.parametrize("mean", ["shared", "per sample"])
def test_random_crops_and_mirrors_replay_from_a_graph(lmdb_path, mean):
    """crop_mirror_normalize with per-sample crop positions and mirror flags (and per-sample
    means): the gather indices and coefficients go up each step; eager results."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        px = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
        py = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
        coins = ndd.random.coin_flip(batch_size=B, probability=0.5, rng=rng)
        m = ndd.random.uniform(batch_size=B, range=[10.0, 50.0], rng=rng) if mean == "per sample" else 30.0
        images = ndd.crop_mirror_normalize(images, crop=(20, 24), crop_pos_x=px, crop_pos_y=py, mirror=coins,
                                           mean=m, std=60.0, dtype=ndd.float32, output_layout="CHW")
        return (images.torch(),)

    assert_replays_from_a_graph(lmdb_path, body)


@pytest.mark.parametrize("filt", ["linear", "cubic", "nearest"])
def test_random_resized_crops_replay_from_a_graph(lmdb_path, filt):
    """random_resized_crop's windows change every step, and with them each sample's taps and
    resampling engine (as the CPU's: whether an axis shrinks decides it): the graph runs each
    engine a window may take, with its taps as input arrays, and picks each sample's result."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        if filt == "linear":
            images = ndd.random_resized_crop(images, size=(20, 20), rng=rng)
        elif filt == "cubic":
            images = ndd.random_resized_crop(images, size=(24, 16), interp_type=types.INTERP_CUBIC, antialias=False,
                                             rng=rng)
        else:
            images = ndd.random_resized_crop(images, size=(30, 18), interp_type=types.INTERP_NN, dtype=ndd.float32,
                                             random_aspect_ratio=[0.5, 2.0], rng=rng)
        return (images.torch(),)

    assert_the_graph_takes_every_call(lmdb_path, body)


@pytest.mark.parametrize("policy", ["error", "pad"])
def test_slices_at_random_anchors_replay_from_a_graph(lmdb_path, policy):
    """slice with random anchors drawn on the host: the gather indices (and with padding the
    masks and the fill values) go up each step; a fixed window is a slice in the graph."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        if policy == "pad":
            at = ndd.random.uniform(batch_size=B, range=[-0.3, 0.5], shape=[2], rng=rng)
            cut = ndd.slice(images, at, [14, 12], axis_names="HW", normalized_shape=False, out_of_bounds_policy="pad",
                            fill_values=[5.0, 100.0, 200.0])
        else:
            at = ndd.random.uniform(batch_size=B, range=[0.0, 0.5], shape=[2], rng=rng)
            cut = ndd.slice(images, at, [14, 12], axis_names="HW", normalized_shape=False)
        fixed = ndd.slice(images, rel_start=[0.1, 0.2], rel_shape=[0.5, 0.5], axis_names="HW")
        return cut.torch(), fixed.torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_random_mirrors_of_one_window_replay_from_a_graph(lmdb_path):
    """A fixed window with per-sample mirror flags: the flags go up as a mask."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        coins = ndd.random.coin_flip(batch_size=B, probability=0.5, rng=rng)
        images = ndd.crop_mirror_normalize(images, crop=(24, 24), mirror=coins, mean=[30.0], std=[60.0],
                                           dtype=ndd.float16)
        return (images.torch(),)

    assert_replays_from_a_graph(lmdb_path, body)


def test_warp_affine_with_host_matrices_replays_from_a_graph(lmdb_path):
    """Per-sample matrices from a random op enter the graph through its input buffers."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        mtx = ndd.random.uniform(batch_size=B, range=[0.5, 1.0], shape=[2, 3], rng=rng)
        images = ndd.warp_affine(images, mtx, fill_value=0)
        return images.torch(), labels.gpu().torch()

    assert_replays_from_a_graph(lmdb_path, body)


def test_cat_and_stack_replay_from_a_graph(lmdb_path):
    """cat and stack of captured GPU batches are part of the graph."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        a = ndd.crop_mirror_normalize(images, mean=[30.0], std=[60.0], dtype=ndd.float32)
        b = ndd.flip(a, horizontal=1)
        return ndd.cat(a, b, axis=2).torch(), ndd.stack(a, b, axis=0).torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


@pytest.mark.parametrize("out", ["uint8", "float32"])
def test_colour_operators_with_random_values_replay_from_a_graph(lmdb_path, out):
    """brightness_contrast (uint8 tables or float gains), hsv and color_twist with random
    per-sample values: their tables and matrices enter the graph through its input buffers."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        gain = ndd.random.uniform(batch_size=B, range=[0.6, 1.4], rng=rng)
        if out == "float32":
            images = ndd.brightness_contrast(images, brightness=gain, contrast=1.3, dtype=ndd.float32)
        else:
            images = ndd.brightness_contrast(images, brightness=gain, contrast=1.3)
        hue = ndd.random.uniform(batch_size=B, range=[-30.0, 30.0], rng=rng)
        images = ndd.hsv(images, hue=hue, saturation=1.2)
        sat = ndd.random.uniform(batch_size=B, range=[0.5, 1.5], rng=rng)
        images = ndd.color_twist(images, saturation=sat, contrast=0.9, hue=hue)
        return (images.torch(),)

    assert_the_graph_takes_every_call(lmdb_path, body)


@pytest.mark.parametrize("where", ["random", "fixed"])
def test_crops_replay_from_a_graph(lmdb_path, where):
    """crop with per-sample random positions (index arrays go up each step) or one fixed
    window (a slice in the graph), cast to float: eager results from the graph."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        if where == "random":
            px = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
            py = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
            images = ndd.crop(images, crop=(20, 16), crop_pos_x=px, crop_pos_y=py, dtype=ndd.float32)
        else:
            images = ndd.crop(images, crop=(20, 16), crop_pos_x=0.25, crop_pos_y=0.75)
        return (images.torch(),)

    assert_the_graph_takes_every_call(lmdb_path, body)


@pytest.mark.parametrize("stats", ["computed", "given", "random"])
def test_normalize_replays_from_a_graph(lmdb_path, stats):
    """normalize with statistics computed on the device, given as constants, or random per
    sample (they go up as input arrays): eager results from the graph."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        if stats == "computed":
            out = ndd.normalize(images, axes=(0, 1), scale=2.0)
        elif stats == "given":
            out = ndd.normalize(images, mean=40.0, stddev=70.0, shift=1.0)
        else:
            m = ndd.random.uniform(batch_size=B, range=[20.0, 60.0], rng=rng)
            out = ndd.normalize(images, mean=m, stddev=64.0, dtype=ndd.float16)
        return (out.torch(),)

    assert_the_graph_takes_every_call(lmdb_path, body)


@pytest.mark.parametrize("after", ["decode", "erase"])
def test_noise_replays_from_a_graph(lmdb_path, after):
    """The noise of each step (gaussian, salt and pepper, shot noise's uniform and normal
    draws; made on the host from the call's random state, in the worker processes' host
    pass) enters the graph through its input buffers: eager values. Also after an operator
    that leaves its samples one by one (erase with per-sample regions)."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        if after == "erase":
            at = ndd.random.uniform(batch_size=B, range=[0.0, 0.7], shape=[2], rng=rng)
            images = ndd.erase(images, anchor=at, shape=[0.3, 0.2], normalized=True, axis_names="HW")
        noisy = ndd.noise.gaussian(images, stddev=12.0, rng=rng)
        sigma = ndd.random.uniform(batch_size=B, range=[0.0, 0.3], rng=rng)
        dotted = ndd.noise.salt_and_pepper(noisy, prob=sigma, salt_val=250, rng=rng)
        factor = ndd.random.uniform(batch_size=B, range=[0.5, 8.0], rng=rng)
        shot = ndd.noise.shot(dotted, factor=factor, rng=rng)
        return noisy.torch(), dotted.torch(), shot.torch(), ndd.noise.shot(images, factor=40.0, rng=rng).torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_one_hot_labels_and_padding_replay_from_a_graph(lmdb_path):
    """one_hot of the uploaded labels and pad with constant arguments are part of the graph."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        padded = ndd.pad(images, axis_names="HW", shape=(32, 30), fill_value=3)
        hot = ndd.one_hot(ndd.squeeze(labels.gpu(), axes=0), num_classes=10, dtype=ndd.float32)
        return padded.torch(), hot.torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_reshapes_replay_from_a_graph(lmdb_path):
    """reshape is a view: its output shapes are the signature (absolute, relative, from
    source dimensions, with a layout)."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        flat = ndd.reshape(images, shape=[-1])
        wide = ndd.reshape(images, rel_shape=[0.5, 2, 1], layout="HWC")
        chw = ndd.reshape(ndd.flip(images, horizontal=1), src_dims=[2, 0, 1])
        return flat.torch(), wide.torch(), chw.torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_reductions_replay_from_a_graph(lmdb_path):
    """Reductions of captured GPU batches (a standard deviation about a device mean too)."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.RGB)
        mean = ndd.reductions.mean(images, axis_names="HW")
        spread = ndd.reductions.std_dev(images, mean, axis_names="HW")
        return mean.torch(), spread.torch(), ndd.reductions.max(images).torch(), ndd.reductions.sum(images).torch()

    assert_the_graph_takes_every_call(lmdb_path, body)


def test_the_graph_keeps_the_cached_constants_it_reads(lmdb_path):
    """rotate's coordinate grid and crop_mirror_normalize's coefficients are cached constants
    that the graph reads by address: the graph holds them, so the cache may drop them."""
    captured = graphed_run(lmdb_path, preprocess)
    kept = captured[2].session._kept
    shapes = sorted(tuple(t.shape) for t in kept)
    assert shapes == [(2, 1, 1), (B, 28 * 28, 3)], shapes  # (a, b) for one channel; the base grid


def test_a_constant_made_inside_the_capture_switches_the_graph_off(lmdb_path, monkeypatch):
    """Capturing runs no kernel, so a constant first made inside it would be cached without
    its contents: with a cache that keeps nothing the capture fails, the loop runs kernel by
    kernel, with eager results, and the report says why."""
    from collections import OrderedDict

    from ndd_ops_cuda.kernels import _common

    monkeypatch.setattr(_common, "_CONSTANTS", OrderedDict())
    monkeypatch.setattr(_common, "_CONSTANTS_MAX", 0)
    eager = eager_run(lmdb_path, preprocess)
    captured = graphed_run(lmdb_path, preprocess)
    assert_same(eager, captured)
    assert captured[2].state == "off"
    assert ndd.capture.report().worker.endswith(
        "; not as a device graph (capture failed: RuntimeError: a kernel made a cached constant inside a "
        "device graph)"), ndd.capture.report().worker


@pytest.mark.parametrize(("gpu_thread", "graphs", "on_loops_thread"), [
    (False, True, True), (False, False, True), (True, True, False), (True, False, False),
    (None, True, True), (None, False, False)])
def test_the_gpu_part_on_the_loops_thread(lmdb_path, gpu_thread, graphs, on_loops_thread):
    """ndd.capture.set_gpu_thread: False, the loop's thread computes the GPU part of each step
    when it takes it (from the graph, or kernel by kernel); True, a thread of its own; None
    (the default), the loop's thread for a device graph and a thread kernel by kernel. Eager
    results in every case."""
    eager = eager_run(lmdb_path, preprocess)
    ndd.capture.set_gpu_thread(gpu_thread)
    try:
        captured = graphed_run(lmdb_path, preprocess, graphs=graphs)
        worker = ndd.capture.report().worker
    finally:
        ndd.capture.set_gpu_thread(None)
    assert_same(eager, captured)
    assert ("the 6 on the GPU on the loop's thread" in worker) == on_loops_thread, worker
    assert ("a thread for the 6 on the GPU" in worker) == (not on_loops_thread), worker
    assert worker.endswith("; the GPU part replayed as one device graph") == graphs, worker
    assert (captured[2] is not None and captured[2].stats.replayed >= 8) == graphs
    if graphs:
        assert captured[2].session.on_caller_stream == on_loops_thread


@pytest.mark.parametrize("bad", [1, "yes"])
def test_set_gpu_thread_takes_true_false_or_none(bad):
    with pytest.raises(ValueError, match="enabled must be True, False or None"):
        ndd.capture.set_gpu_thread(bad)


@pytest.mark.requires_cuda
@pytest.mark.parametrize("steps", [1, 3])
def test_on_the_loops_thread_the_graph_replays_on_the_loops_stream(lmdb_path, steps):
    """set_gpu_thread(False) with a device graph: each step replays on the stream current on
    the loop's thread, behind the work already queued there (a long sleep kernel before each
    step). A consumer on another stream still waits for the replay (it reads eager
    results), and the stream is among those consumers wait for. With graphs of 3 steps
    (``set_graph_steps``), the steps computed ahead in a replay too."""
    import torch

    from ndd_ops_cuda._backend import BACKEND

    other = torch.cuda.Stream()

    def body(jpegs, labels, rng):
        torch.cuda._sleep(20_000_000)  # queued on the loop's stream before this step's GPU work
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        labels = ndd.cast(ndd.squeeze(labels.gpu(), axes=0), dtype=ndd.int64)
        with torch.cuda.stream(other):
            late = images.torch().clone(), labels.torch().clone()
        other.synchronize()
        return images.torch(), labels.torch(), *late

    eager = eager_run(lmdb_path, body)
    ndd.capture.set_gpu_thread(False)
    ndd.capture.set_graph_steps(steps)
    try:
        captured = graphed_run(lmdb_path, body)
    finally:
        ndd.capture.set_gpu_thread(None)
        ndd.capture.set_graph_steps(1)
    assert_same(eager, captured)
    graph = captured[2]
    assert graph is not None and graph.stats.replayed >= 8 and graph.steps == steps and graph.session.on_caller_stream
    loops_stream = torch.cuda.current_stream().cuda_stream
    assert loops_stream in BACKEND._user_streams[0]


@pytest.mark.requires_cuda
def test_a_capture_leaves_other_threads_work_on_the_contexts_stream_alone():
    """While a pipeline thread captures a device graph, the training thread hands batches of
    the same EvalContext to torch (which records events on the context's stream) and runs
    kernels: the capture is on a stream of its own, so that work runs at once and does not
    join the graph; the graph computes what it captured."""
    import threading

    import torch

    from ndd_ops_cuda._backend import BACKEND

    ctx = ndd.EvalContext.current()
    session = BACKEND.graph_session(0, ctx)
    inside, release = threading.Event(), threading.Event()

    def fn(uploaded):
        inside.set()
        assert release.wait(10)
        return {1: [ndd.plugins.BatchData(dense=uploaded[0] * 2)]}

    first = np.arange(16, dtype=np.float32)
    out = []
    t = threading.Thread(target=lambda: out.append(session.capture([first], fn)), daemon=True)
    t.start()
    assert inside.wait(10)
    try:
        g = ndd.as_batch(np.full((4, 8), 3, np.float32)).gpu()
        total = (g.torch() + 1).sum().item()  # a hand-off (events on ctx's stream), kernels, a sync
    finally:
        release.set()
        t.join(20)
    assert total == 4 * 8 * 4
    np.testing.assert_array_equal(out[0][1][0].dense.cpu().numpy(), first * 2)
    again = session.replay([first + 1])
    np.testing.assert_array_equal(again[1][0].dense.cpu().numpy(), (first + 1) * 2)
    torch.cuda.synchronize()


def test_random_flips_replay_from_a_graph(lmdb_path):
    """flip with per-sample flags (random coin flips) uploads them as a mask; a constant
    flag is part of the graph: the loop replays from the graph with eager results."""
    def body(jpegs, labels, rng):
        images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
        coins = ndd.random.coin_flip(batch_size=B, probability=0.5, rng=rng)
        images = ndd.flip(images, horizontal=coins, vertical=1)
        return (images.torch(),)

    assert_replays_from_a_graph(lmdb_path, body)
