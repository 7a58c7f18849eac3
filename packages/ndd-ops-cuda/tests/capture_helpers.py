"""Helpers of the GPU capture tests: a loop body run eagerly and captured with a split
pipeline whose GPU part replays as one device graph, and the checks on the two runs."""

from __future__ import annotations

import cv2
import numpy as np

import ndd
import ndd.types as types

B = 8  # the batch size of the GPU capture tests


def noisy_digits_lmdb(path, colour: bool = False) -> str:
    """A Caffe2 LMDB at ``path`` of 40 noisy 28x28 digits as JPEGs, labels 0-9 (in colour:
    the three channels differ)."""
    from ndd_readers import writers

    rng = np.random.default_rng(0)
    records = []
    for i in range(40):
        img = np.zeros((28, 28), np.uint8)
        cv2.putText(img, str(i % 10), (6, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.8, 255, 2)
        img = np.clip(img.astype(np.int16) + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
        if colour:
            img = cv2.merge([img, 255 - img, img // 2])
        records.append((cv2.imencode(".jpg", img)[1].tobytes(), i % 10))
    writers.write_caffe2_lmdb(str(path), records)
    return str(path)


def preprocess(jpegs, labels, rng):
    """The tutorial's body, verbatim apart from the batch size."""
    images = ndd.decoders.image(jpegs, device="gpu", output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=B, range=[-7.5, 7.5], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    images = ndd.crop_mirror_normalize(images, dtype=ndd.float32, output_layout="CHW",
                                       mean=[0.1307 * 255], std=[0.3081 * 255])
    labels = labels.gpu()
    labels = ndd.squeeze(labels, axes=0)
    labels = ndd.cast(labels, dtype=ndd.int64)
    return images.torch(), labels.torch()


def graph_of(reader):
    """The device graph runner of a reader's split capture pipeline."""
    from ndd_capture._device_graph import DeviceGraph

    worker = reader._capture_loop.worker
    compute = worker._compute
    return getattr(compute, "__self__", None) if isinstance(getattr(compute, "__self__", None), DeviceGraph) \
        else None


def graphed_run(path, body, graphs=True, epochs=2, processes=2):
    """``body(jpegs, labels, rng)`` over ``epochs`` epochs in capture mode with a split
    pipeline: (outputs as NumPy, the RNG's final state, the device graph runner or None,
    the capture report)."""
    ndd.capture.set_worker_processes(processes)
    ndd.capture.set_device_graphs(graphs)
    try:
        reader = ndd.readers.Caffe2(path=path, random_shuffle=True, seed=1)
        rng = ndd.random.RNG(5)
        out = []
        for _ in range(epochs):
            for jpegs, labels in reader.next_epoch(batch_size=B, capture=True):
                out.append([t.cpu().numpy().copy() for t in body(jpegs, labels, rng)])
        return out, str(rng.get_state()), graph_of(reader), ndd.capture.report()
    finally:
        ndd.capture.set_worker_processes(None)
        ndd.capture.set_device_graphs(True)


def eager_run(path, body, epochs=2):
    reader = ndd.readers.Caffe2(path=path, random_shuffle=True, seed=1)
    rng = ndd.random.RNG(5)
    out = []
    for _ in range(epochs):
        for jpegs, labels in reader.next_epoch(batch_size=B):
            out.append([t.cpu().numpy().copy() for t in body(jpegs, labels, rng)])
    return out, str(rng.get_state())


def assert_same(a, b):
    assert a[1] == b[1]
    assert len(a[0]) == len(b[0])
    for xs, ys in zip(a[0], b[0]):
        for x, y in zip(xs, ys):
            np.testing.assert_array_equal(x, y)


def assert_replays_from_a_graph(path, body):
    """``body`` in capture mode gives eager mode's results, and at least 8 of its 10 steps
    replay from the device graph (1 traced, 1 reference)."""
    eager = eager_run(path, body)
    captured = graphed_run(path, body)
    assert_same(eager, captured)
    assert captured[2] is not None and captured[2].stats.replayed >= 8, ndd.capture.report().worker


def assert_the_graph_takes_every_call(path, body):
    """:func:`assert_replays_from_a_graph`, with every call of ``body`` captured (none fell
    back to eager mode, which would leave it out of the graph) and the whole GPU part in the
    graph."""
    assert_replays_from_a_graph(path, body)
    report = ndd.capture.report()
    assert not report.fallbacks and report.worker.endswith("; the GPU part replayed as one device graph"), \
        report.summary()


def digits_lmdb(path, sides) -> str:
    """An unshuffled Caffe2 LMDB whose record ``i`` is a digit of side ``sides[i]``."""
    from ndd_readers import writers

    records = []
    for i, side in enumerate(sides):
        img = np.zeros((side, side), np.uint8)
        cv2.putText(img, str(i % 10), (6, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.8, 255, 2)
        records.append((cv2.imencode(".jpg", img)[1].tobytes(), i % 10))
    writers.write_caffe2_lmdb(str(path), records)
    return str(path)


def unshuffled(path, capture, epochs=3):
    """The tutorial's body over ``epochs`` epochs of an unshuffled reader: (outputs as NumPy,
    the RNG's final state, the reader)."""
    reader = ndd.readers.Caffe2(path=path, random_shuffle=False)
    rng = ndd.random.RNG(5)
    out = []
    for _ in range(epochs):
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            out.append([t.cpu().numpy().copy() for t in preprocess(jpegs, labels, rng)])
    return out, str(rng.get_state()), reader


def split(fn, *args):
    """``fn(*args)`` with the host part in 2 worker processes."""
    ndd.capture.set_worker_processes(2)
    try:
        return fn(*args)
    finally:
        ndd.capture.set_worker_processes(None)


def assert_resumes_exactly(path, stop_after):
    """The tutorial's body over two epochs in capture mode with a split pipeline, stopped
    after ``stop_after`` steps, its reader and RNG states saved and loaded into a fresh
    reader and RNG that go on, gives the 10 steps of one eager run without a break. Returns
    the capture report's worker line."""
    def steps(reader, rng, capture, stop=None):
        out = []
        for _ in range(2):
            for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
                images, targets = preprocess(jpegs, labels, rng)
                out.append((images.cpu().numpy().copy(), targets.cpu().numpy().copy()))
                if len(out) == stop:
                    return out, reader.get_state(), rng.get_state()
        return out

    def reader():
        return ndd.readers.Caffe2(path=path, random_shuffle=True, seed=4, enable_checkpointing=True)

    ref = steps(reader(), ndd.random.RNG(8), False)
    ndd.capture.set_worker_processes(2)
    try:
        first, reader_state, rng_state = steps(reader(), ndd.random.RNG(8), True, stop=stop_after)
        resumed = reader()
        resumed.set_state(reader_state)
        rng = ndd.random.RNG(0)
        rng.set_state(rng_state)
        rest = steps(resumed, rng, True)  # the rest of epoch 0, then epoch 1
        worker = ndd.capture.report().worker
    finally:
        ndd.capture.set_worker_processes(None)
    got = first + rest
    assert len(got) == len(ref) == 10
    for (ia, la), (ib, lb) in zip(ref, got):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)
    return worker
