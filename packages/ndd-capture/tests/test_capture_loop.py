"""Capture mode end to end: parity with eager mode, the report, errors, teardown."""

from __future__ import annotations

import gc
import threading
import time
import warnings

import numpy as np
import pytest

import ndd
import ndd.types as types
from ndd.capture import CaptureError, invariant

# Capture mode is independent of EvalMode: every test here runs under all four.
pytestmark = pytest.mark.usefixtures("eval_mode")

B = 8


def body(jpegs, labels, rng):
    images = ndd.decoders.image(jpegs, output_type=types.GRAY)
    angles = ndd.random.uniform(batch_size=B, range=[-30.0, 30.0], rng=rng)
    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
    images = ndd.crop_mirror_normalize(images, dtype=ndd.float32, output_layout="CHW",
                                       mean=[0.1307 * 255], std=[0.3081 * 255])
    labels = ndd.squeeze(labels, axes=0)
    labels = ndd.cast(labels, dtype=ndd.int64)
    return images, labels


def run(path, capture, epochs=3, rng_seed=0, **reader_args):
    reader = ndd.readers.Caffe2(path=path, **reader_args)
    rng = ndd.random.RNG(rng_seed)
    out = []
    for _ in range(epochs):
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            images, targets = body(jpegs, labels, rng)
            out.append((np.array(ndd.as_tensor(images)), np.array(ndd.as_tensor(targets))))
    return out, str(rng.get_state())


def assert_same(a, b):
    assert len(a[0]) == len(b[0])
    for (ia, la), (ib, lb) in zip(a[0], b[0]):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)
    assert a[1] == b[1]


def test_parity_with_eager(lmdb_path):
    assert_same(run(lmdb_path, False), run(lmdb_path, True))


@pytest.mark.parametrize("shards", [dict(num_shards=3, shard_id=1), dict(num_shards=3, shard_id=2,
                                                                          pad_last_batch=True),
                                    dict(random_shuffle=True, seed=5, initial_fill=16)])
def test_parity_shards_padding_shuffle(lmdb_path, shards):
    assert_same(run(lmdb_path, False, epochs=4, **shards), run(lmdb_path, True, epochs=4, **shards))


def test_report_names_sites_and_counts(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    rng = ndd.random.RNG(1)
    for jpegs, labels in reader.next_epoch(batch_size=B, capture=True):
        body(jpegs, labels, rng)
    rep = ndd.capture.report()
    ops = [s.op for s in rep.sites]
    assert ops == ["decoders.image", "random.uniform", "rotate", "crop_mirror_normalize", "squeeze", "cast"]
    assert all(s.captured and s.code is None for s in rep.sites)
    steps = 40 // B
    assert all(s.replayed == steps - 1 and s.eager == 1 for s in rep.sites)
    assert rep.sites[0].filename == __file__ and rep.sites[0].lineno == body.__code__.co_firstlineno + 1
    assert rep.sites[4].lineno == rep.sites[5].lineno - 1
    assert rep.fallbacks == []
    d = rep.to_dict()
    assert d["sites"][2]["op"] == "rotate" and "6/6 call sites captured" in str(rep)


def test_local_list_is_not_captured_and_says_why(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        size = [14, 14]
        ndd.resize(images, size=size)
        ndd.resize(images, size=(14, 14))
    sites = ndd.capture.report().sites
    assert [s.captured for s in sites] == [True, False, True]
    assert sites[1].code is not None and "size" in sites[1].reason
    assert sites[1].eager == 40 // B and sites[1].replayed == 0


def test_stale_batch_falls_back(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    previous = None
    results = []
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        target = previous if previous is not None else images
        flipped = ndd.flip(target, horizontal=1)
        results.append(np.asarray(ndd.as_tensor(flipped)))
        previous = images
    rep = ndd.capture.report()
    flip = [s for s in rep.sites if s.op == "flip"][0]
    assert flip.captured and flip.replayed == 0 and flip.eager == 40 // B
    assert {f.code for f in rep.fallbacks} == {"NDD-C202"}


def test_changed_keyword_arguments_fall_back_with_eager_results(lmdb_path):
    """A replayed site checks its keyword arguments on every step: one given as None that
    was not when traced, or one given that was None then, runs that call eagerly (NDD-C204)
    with the eager result; ``device=`` as a string or a Device object is the same device."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    got, want = [], []
    one = invariant(1)  # (one call per line: Python 3.10 tells call sites apart by line)
    for step, (jpegs, _) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
        device = "cpu" if step % 2 else ndd.Device("cpu")
        images = ndd.decoders.image(jpegs, output_type=types.GRAY, device=device)
        both = ndd.flip(images, horizontal=1, vertical=None if step == 2 else one)
        upright = ndd.flip(images, vertical=0, horizontal=one if step == 3 else None)
        got.append((np.asarray(ndd.as_tensor(both)), np.asarray(ndd.as_tensor(upright))))
        plain = ndd.decoders.image(jpegs, output_type=types.GRAY)
        plain = np.asarray(ndd.as_tensor(plain))
        want.append((plain[:, :, ::-1] if step == 2 else plain[:, ::-1, ::-1], plain[:, :, ::-1]))
    assert len(got) == 40 // B
    for (g1, g2), (w1, w2) in zip(got, want):
        np.testing.assert_array_equal(g1, w1)
        np.testing.assert_array_equal(g2, w2)
    rep = ndd.capture.report()
    both, upright = [s for s in rep.sites if s.op == "flip"]
    assert both.captured and both.eager == 2 and both.replayed == 40 // B - 2
    assert upright.captured and upright.eager == 2 and upright.replayed == 40 // B - 2
    assert [(f.site, f.step, f.code, f.reason) for f in rep.fallbacks] == [
        (both, 2, "NDD-C204", "the keyword arguments changed"),
        (upright, 3, "NDD-C204", "the keyword arguments changed")]
    decode = [s for s in rep.sites if s.op == "decoders.image"][0]
    assert decode.replayed == 40 // B - 1


def test_slice_and_arithmetic_not_captured(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        brighter = images + 1
        ndd.flip(brighter, horizontal=1)
    sites = {s.op: s for s in ndd.capture.report().sites}
    assert sites["decoders.image"].captured
    assert not sites["_arithm"].captured and sites["_arithm"].code == "NDD-C101"
    assert not sites["flip"].captured and sites["flip"].code == "NDD-C104"


def test_invariant_global_captured_and_marker_must_stay(lmdb_path):
    cfg = invariant(type("Cfg", (), {"size": (10, 10)})())
    reader = ndd.readers.Caffe2(path=lmdb_path)
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        ndd.resize(images, size=cfg.size)
    assert all(s.captured for s in ndd.capture.report().sites)
    reader = ndd.readers.Caffe2(path=lmdb_path)
    with pytest.raises(RuntimeError, match="must remain marked"):
        for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            size = cfg.size if i == 0 else (10, 10)
            images = ndd.decoders.image(jpegs, output_type=types.GRAY)
            ndd.resize(images, size=size)


def test_strict_mode(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    with pytest.raises(CaptureError, match=r"resize at .*test_capture_loop.py:\d+ was not captured"):
        for jpegs, _ in reader.next_epoch(batch_size=B, capture="strict"):
            size = [4, 4]
            ndd.resize(ndd.decoders.image(jpegs), size=size)
    assert issubclass(CaptureError, RuntimeError)


def test_empty_graph_warns_and_runs_eagerly(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    with pytest.warns(UserWarning, match="no operators were captured"):
        n = sum(1 for _ in reader.next_epoch(batch_size=B, capture=True))
    assert n == 40 // B


def labels_of(batches):
    return [np.array(ndd.as_tensor(lab)).ravel().tolist() for _, lab in batches]


def test_loop_that_only_reads_a_feeder_runs_eagerly(lmdb_path):
    """A reader loop whose trace read a feeder but captured no operator runs eagerly, the
    feeder read as a plain call on every step (its second step raised 'already used in a
    capture-mode loop')."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    feeder = ndd.ExternalSource(iter([[np.full(2, i, np.int32)] * B for i in range(100)]))
    with pytest.warns(UserWarning, match="no operators were captured"):
        got = [np.array(ndd.as_tensor(feeder())) for _ in reader.next_epoch(batch_size=B, capture=True)]
    assert [int(a.ravel()[0]) for a in got] == list(range(40 // B))


@pytest.mark.parametrize("then", ["capture", "eager"])
def test_empty_graph_frees_the_reader_for_the_next_epoch(lmdb_path, then):
    """After an epoch that captured nothing, the reader is free again (as in DALI): the next
    capture=True epoch traces anew and captures, or an eager epoch runs; the samples go on
    exactly as in an eager run."""
    eager = ndd.readers.Caffe2(path=lmdb_path, random_shuffle=True, seed=3)
    want = labels_of(b for _ in range(2) for b in eager.next_epoch(batch_size=B))
    reader = ndd.readers.Caffe2(path=lmdb_path, random_shuffle=True, seed=3)
    with pytest.warns(UserWarning, match="no operators were captured"):
        got = labels_of(reader.next_epoch(batch_size=B, capture=True))
    second = []
    for jpegs, labels in reader.next_epoch(batch_size=B, capture=then == "capture"):
        ndd.decoders.image(jpegs)
        second.append((jpegs, labels))
    assert got + labels_of(second) == want
    if then == "capture":
        rep = ndd.capture.report()
        assert rep.sites[0].captured and rep.sites[0].replayed == 40 // B - 1


def test_mode_stickiness(lmdb_path):
    r = ndd.readers.Caffe2(path=lmdb_path)
    next(iter(r.next_epoch(batch_size=B)))
    with pytest.raises(RuntimeError, match="previously used without capture=True"):
        r.next_epoch(batch_size=B, capture=True)
    r2 = ndd.readers.Caffe2(path=lmdb_path)
    for jpegs, _ in r2.next_epoch(batch_size=B, capture=True):
        ndd.decoders.image(jpegs)
    with pytest.raises(RuntimeError, match="previously used with capture=True"):
        r2.next_epoch(batch_size=B)
    with pytest.raises(ValueError, match="Cannot change batch_size from 8 to 4"):
        r2.next_epoch(batch_size=4, capture=True)


def test_nested_loops_raise(lmdb_path):
    a, b = ndd.readers.Caffe2(path=lmdb_path), ndd.readers.Caffe2(path=lmdb_path)
    with pytest.raises(RuntimeError, match="Only one capture-mode loop can be active at a time"):
        for jpegs, _ in a.next_epoch(batch_size=B, capture=True):
            ndd.decoders.image(jpegs)
            for _inner in b.next_epoch(batch_size=B, capture=True):
                pass


@pytest.mark.parametrize("change_at", [1, 3])  # at the first replay, or after replays with the traced device
def test_conflicting_batch_size_and_device(lmdb_path, change_at):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    with pytest.raises(RuntimeError, match="Cannot change batch size to 4, the capture-mode loop uses 8"):
        for i, _ in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            ndd.random.uniform(batch_size=B if i < change_at else 4)
    # a call that conflicts from the traced step on is not captured, and raises at the
    # first replayed step (DALI 2.4 does); so does a site first reached later
    for conflict_from in (0, change_at):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        steps = []
        with pytest.raises(RuntimeError, match="Cannot change batch size to 5, the capture-mode loop uses 8"):
            for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
                steps.append(i)
                ndd.decoders.image(jpegs)
                if i >= conflict_from:
                    ndd.random.uniform(batch_size=5)
        assert steps[-1] == max(conflict_from, 1)
    reader = ndd.readers.Caffe2(path=lmdb_path)
    steps = []
    with pytest.raises(RuntimeError, match="traced with device=cpu but called with device=gpu"):
        for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            steps.append(i)
            ndd.decoders.image(jpegs, device="cpu" if i < change_at else "gpu")
    assert steps[-1] == change_at


@pytest.mark.parametrize("change", ["extra", "dropped", "reseed"])
def test_rng_pattern_changes_raise(lmdb_path, change):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    rng = ndd.random.RNG(0)
    with pytest.raises(RuntimeError, match="The RNG of a captured operator was used unexpectedly"):
        for i, _ in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            if change == "reseed" and i == 2:
                rng.seed = 0
            if not (change == "dropped" and i == 2):
                ndd.random.uniform(batch_size=B, rng=rng)
            if change == "extra" and i == 2:
                rng()


@pytest.mark.parametrize("processes", [0, 2])
@pytest.mark.parametrize("move", ["set_state", "seed", "draws", "restore"])
def test_an_rng_moved_between_epochs_draws_from_there_as_in_eager_mode(lmdb_path, move, processes):
    """Between two epochs the RNG is set, restored, reseeded or drawn from: the next epoch's
    random values come from where it now stands, as in eager mode (ours: DALI raises), not
    from the steps the pipeline computed ahead."""
    def loop(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng = ndd.random.RNG(0)
        saved = rng.get_state()
        out = []
        for epoch in range(3):
            for jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
                images, targets = body(jpegs, labels, rng)
                out.append((np.array(ndd.as_tensor(images)), np.array(ndd.as_tensor(targets))))
            if move == "set_state":
                rng.set_state(ndd.random.RNG(10 + epoch).get_state())
            elif move == "seed":
                rng.seed = 20 + epoch
            elif move == "draws":
                rng()
            else:  # back to the RNG's state before the first epoch (as a checkpoint restores it)
                rng.set_state(saved)
        return out, str(rng.get_state())

    eager = loop(False)
    ndd.capture.set_worker_processes(processes)
    try:
        assert_same(eager, loop(True))
    finally:
        ndd.capture.set_worker_processes(None)
    # the second epoch (40 samples: from step 5) draws anew, or as the first after the restore
    assert np.array_equal(eager[0][0][0], eager[0][5][0]) == (move == "restore")


@pytest.mark.parametrize("move", ["rng", "reader"])
def test_with_a_feeder_an_rng_or_reader_moved_between_epochs_goes_on_as_eager(lmdb_path, move):
    """A body that reads an ExternalSource: moving the RNG or the reader between epochs
    drops the steps computed ahead, and the source's items read ahead for them go back to
    the source, so every step gets the item and the random values eager mode gives it
    (ours: DALI raises the RNG error, or loses the items)."""
    def loop(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path, enable_checkpointing=True)
        feed = ndd.ExternalSource(np.full((B,), i, np.float32) for i in range(1000))
        rng = ndd.random.RNG(0)
        seen = []
        for epoch in range(3):
            for _jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
                x = ndd.cast(feed(), dtype=ndd.float32)
                u = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
                seen.append((float(np.asarray(ndd.as_tensor(x)).ravel()[0]), np.asarray(ndd.as_tensor(u)).tolist(),
                             np.asarray(ndd.as_tensor(labels)).tolist()))
            if move == "rng":
                rng.seed = 5 + epoch
            else:
                reader.set_state(reader.get_state())
        return seen

    _assert_fed_in_order_as_eager(loop)


def _assert_fed_in_order_as_eager(run):
    """``run(capture)`` gives a list of steps, each starting with the feeder's item: eager
    mode reads the items in order, and capture mode gives every step the same."""
    eager = run(False)
    assert [s[0] for s in eager] == list(range(len(eager)))
    assert run(True) == eager


@pytest.mark.parametrize("change", ["extra", "dropped"])
def test_rng_pattern_change_on_an_epochs_last_step_raises_after_that_step(lmdb_path, change):
    """Checked at the end of each step, not only when the next one begins: the last step of
    the last epoch cannot skip or add a draw unnoticed (DALI raises there too)."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    rng = ndd.random.RNG(0)
    steps = []
    with pytest.raises(RuntimeError, match="The RNG of a captured operator was used unexpectedly"):
        for i, _ in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            steps.append(i)
            if not (change == "dropped" and i == 4):
                ndd.random.uniform(batch_size=B, rng=rng)
            if change == "extra" and i == 4:
                rng()
    assert steps == [0, 1, 2, 3, 4]  # 40 samples: step 4 is the epoch's last


def _progress(it):  # a tqdm-style wrapper: the loop drives this generator, not the reader's
    yield from it


class _Wrapper:
    def __init__(self, it):
        self.it = iter(it)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.it)


@pytest.mark.parametrize("wrap", ["generator", "class", "helper"])
def test_wrapped_reader_iterator_is_captured(lmdb_path, wrap):
    """Wrapping the epoch's iterator (a progress bar, a helper calling next()) keeps capture:
    the body's calls are found through the loop that drives the wrapper."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    rng = ndd.random.RNG(0)
    out = []
    for _ in range(2):
        epoch = reader.next_epoch(batch_size=B, capture=True)
        if wrap == "generator":
            steps = _progress(epoch)
        elif wrap == "class":
            steps = _Wrapper(epoch)
        else:
            it = iter(epoch)

            def take(it=it):
                return next(it)

            steps = iter(take, None)
        try:
            for jpegs, labels in steps:
                images, targets = body(jpegs, labels, rng)
                out.append((np.array(ndd.as_tensor(images)), np.array(ndd.as_tensor(targets))))
        except StopIteration:  # iter(take, None) lets the reader's StopIteration through
            pass
    rep = ndd.capture.report()
    assert all(site.captured for site in rep.sites) and len(rep.sites) == 6
    assert sum(site.replayed for site in rep.sites) == 6 * (2 * 40 // B - 1)
    assert_same((out, str(rng.get_state())), run(lmdb_path, False, epochs=2))


def test_bare_draws_and_uncaptured_random_share_rng(lmdb_path):
    def loop(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng = ndd.random.RNG(3)
        got = []
        for _ in range(2):
            for _ in reader.next_epoch(batch_size=B, capture=capture):
                p = [0.5]
                a = ndd.random.uniform(batch_size=B, rng=rng)
                extra = rng()
                c = ndd.random.coin_flip(batch_size=B, probability=p[0], rng=rng)  # uncapturable argument
                got.append((np.asarray(ndd.as_tensor(a)), extra, np.asarray(ndd.as_tensor(c))))
        return got, str(rng.get_state())

    eager, captured = loop(False), loop(True)
    assert eager[1] == captured[1]
    for x, y in zip(eager[0], captured[0]):
        np.testing.assert_array_equal(x[0], y[0])
        assert x[1] == y[1]
        np.testing.assert_array_equal(x[2], y[2])


def test_an_rng_made_in_the_traced_step_with_bare_draws_before_the_call(lmdb_path):
    """An RNG created inside the first step counts every draw of the step, the bare ones
    before the captured call too (it was anchored at that call and failed the next step)."""
    def loop(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng, got = None, []
        for _ in range(2):
            for _jpegs, _labels in reader.next_epoch(batch_size=B, capture=capture):
                if rng is None:
                    rng = ndd.random.RNG(9)
                bare = rng()
                a = ndd.random.uniform(batch_size=B, range=[-10, 10], rng=rng)
                got.append((bare, np.asarray(ndd.as_tensor(a))))
        return got, str(rng.get_state())

    eager, captured = loop(False), loop(True)
    assert eager[1] == captured[1] and len(eager[0]) == len(captured[0])
    for (b0, a0), (b1, a1) in zip(eager[0], captured[0]):
        assert b0 == b1
        np.testing.assert_array_equal(a0, a1)
    assert [s.replayed > 0 for s in ndd.capture.report().sites if s.op == "random.uniform"] == [True]


@pytest.mark.parametrize("feeder", [False, True])
@pytest.mark.parametrize("leave", ["break", "exception"])
def test_leaving_a_replayed_step_before_its_random_calls(lmdb_path, leave, feeder):
    """A step left before its random calls (``if step == n: break`` at the top of the body, or
    an exception the caller catches) drew nothing, as in eager mode: the steps computed ahead
    are computed again from there, and later epochs give eager mode's values. With a feeder
    read in the body, the item that step did not read goes back to it (it used to be lost:
    the next step got the item after it)."""
    def loop(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng = ndd.random.RNG(4)
        feed = ndd.ExternalSource(np.full((B,), i, np.float32) for i in range(100))
        got, fed = [], []
        for epoch in range(3):
            try:
                for step, (jpegs, _labels) in enumerate(reader.next_epoch(batch_size=B, capture=capture)):
                    if epoch == 0 and step == 2:
                        if leave == "break":
                            break
                        raise KeyError("left")
                    images = ndd.decoders.image(jpegs, output_type=ndd.types.GRAY)
                    angles = ndd.random.uniform(batch_size=B, range=[-10, 10], rng=rng)
                    images = ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)
                    got.append(np.asarray(ndd.as_tensor(images)))
                    if feeder:
                        fed.append(float(np.asarray(ndd.as_tensor(ndd.cast(feed(), dtype=ndd.float32))).ravel()[0]))
            except KeyError:
                pass
        return got, str(rng.get_state()), fed

    eager, captured = loop(False), loop(True)
    assert eager[1] == captured[1]
    assert eager[2] == captured[2] == (list(range(len(eager[0]))) if feeder else [])
    assert len(eager[0]) == len(captured[0]) > 4
    for x, y in zip(eager[0], captured[0]):
        np.testing.assert_array_equal(x, y)
    assert [s.replayed > 0 for s in ndd.capture.report().sites if s.op == "random.uniform"] == [True]


def _wait_threads(baseline, timeout=5.0):
    deadline = time.time() + timeout
    while threading.active_count() > baseline and time.time() < deadline:
        time.sleep(0.05)
    return threading.active_count()


def test_break_continues_without_loss_and_threads_park(lmdb_path):
    baseline = threading.active_count()
    reader = ndd.readers.Caffe2(path=lmdb_path)
    seen = []
    for i, (jpegs, labels) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
        ndd.decoders.image(jpegs)
        seen.append(np.asarray(ndd.as_tensor(labels)).ravel().tolist())
        if i == 1:
            break
    assert _wait_threads(baseline) <= baseline
    for jpegs, labels in reader.next_epoch(batch_size=B, capture=True):
        ndd.decoders.image(jpegs)
        seen.append(np.asarray(ndd.as_tensor(labels)).ravel().tolist())
    flat = [x for s in seen for x in s]
    assert flat == [i % 10 for i in range(40)]


def test_exception_in_body_and_gc_leave_no_threads(lmdb_path):
    baseline = threading.active_count()

    def failing():
        reader = ndd.readers.Caffe2(path=lmdb_path)
        for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            ndd.decoders.image(jpegs)
            if i == 2:
                raise KeyError("boom")

    with pytest.raises(KeyError):
        failing()
    gc.collect()
    assert _wait_threads(baseline) <= baseline


def test_soak_flat_memory(lmdb_path):
    import tracemalloc

    reader = ndd.readers.Caffe2(path=lmdb_path)
    rng = ndd.random.RNG(0)
    tracemalloc.start()
    sizes = []
    for epoch in range(50):
        for jpegs, labels in reader.next_epoch(batch_size=B, capture=True):
            body(jpegs, labels, rng)
        if epoch in (10, 49):
            gc.collect()
            sizes.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    assert sizes[1] - sizes[0] < 2_000_000, sizes


def test_tracing_keeps_no_locals_of_the_loops_function_alive(lmdb_path):
    # Tracing reads the caller's locals (frame.f_locals); on Python 3.10-3.12 that leaves a
    # copy on the frame, which kept the traced step's objects alive until the function
    # returned. A local the user kept with locals() still sees every name.
    import weakref

    class Marker:
        pass

    def loop(keep_locals):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        marker = Marker()
        ref = weakref.ref(marker)
        kept = locals() if keep_locals else None
        alive = []
        for step, (jpegs, _) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            images = ndd.decoders.image(jpegs)
            ndd.cast(images, dtype=types.FLOAT)  # alone on its line: located on Python 3.10 too
            if step == 0:
                del marker
                gc.collect()
            alive.append(ref() is not None)
            break
        it = reader.next_epoch(batch_size=B, capture=True)  # an iterator kept after its break
        for jpegs, _ in it:
            ndd.decoders.image(jpegs)
            break
        iref = weakref.ref(it)
        del it
        gc.collect()
        return alive, iref() is None, kept

    alive, iterator_freed, _ = loop(False)
    assert alive == [False] and iterator_freed
    alive, _, kept = loop(True)
    assert alive == [True] and "marker" in kept  # the user's dict is left as it is


def test_no_warnings_in_a_clean_loop(lmdb_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(lmdb_path, True, epochs=1)


def test_report_printed_with_env(lmdb_path, monkeypatch, capsys):
    monkeypatch.setenv("NDD_CAPTURE_REPORT", "1")
    reader = ndd.readers.Caffe2(path=lmdb_path)
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        ndd.decoders.image(jpegs)
    err = capsys.readouterr().err
    assert err.count("1/1 call sites captured") == 2  # after tracing and at the end of the loop


def test_prefetch_depth_setting(lmdb_path):
    with pytest.raises(ValueError, match="positive integer"):
        ndd.capture.set_prefetch_depth(0)
    ndd.capture.set_prefetch_depth(5)
    try:
        assert_same(run(lmdb_path, False, epochs=2), run(lmdb_path, True, epochs=2))
        assert ndd.readers.Caffe2(path=lmdb_path) is not None
    finally:
        ndd.capture.set_prefetch_depth(2)


def test_eval_context_is_fixed_for_the_loop_but_the_body_may_enter_one(lmdb_path):
    """As in DALI: the body may run its calls inside ``with ctx:`` (on some steps or all) and
    still be captured, with eager mode's values; the loop's own context is fixed for its
    lifetime, so the next epoch in another context raises."""
    ctx = ndd.EvalContext(num_threads=1)
    reader = ndd.readers.Caffe2(path=lmdb_path)
    out = []
    for i, (jpegs, _) in enumerate(reader.next_epoch(batch_size=B, capture=True)):
        with ctx if i % 2 else ndd.EvalContext.current():
            images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        out.append([np.array(t) for t in images.tensors])
    assert ndd.capture.report().sites[0].replayed == 40 // B - 1
    eager = [[np.array(t) for t in ndd.decoders.image(j, output_type=types.GRAY).tensors]
             for j, _ in ndd.readers.Caffe2(path=lmdb_path).next_epoch(batch_size=B)]
    assert all(np.array_equal(a, b) for e, o in zip(eager, out) for a, b in zip(e, o))
    with pytest.raises(RuntimeError, match="Cannot change EvalContext for a capture-mode loop"):
        reader.next_epoch(batch_size=B, ctx=ctx, capture=True)
    with pytest.raises(RuntimeError, match="Cannot change EvalContext for a capture-mode loop"):
        with ctx:
            reader.next_epoch(batch_size=B, capture=True)


def test_ctx_argument_is_the_body_context(lmdb_path):
    """next_epoch(ctx=X) and captured(ctx=X): each step's body runs in X (the ops see it as
    current and the loop replays), X is left after the step, and the next epoch without X
    is an error (the loop's context is fixed)."""
    ctx = ndd.EvalContext(num_threads=1)
    reader = ndd.readers.Caffe2(path=lmdb_path)
    seen, out = [], []
    for jpegs, _ in reader.next_epoch(batch_size=B, ctx=ctx, capture=True):
        seen.append(ndd.EvalContext.current() is ctx)
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)  # alone on its line: Python 3.10 too
        out.append([np.array(t) for t in images.tensors])
        assert ndd.EvalContext.current() is ctx
    assert seen and all(seen) and ndd.EvalContext.current() is not ctx
    assert ndd.capture.report().sites[0].replayed == len(out) - 1
    eager = [[np.array(t) for t in ndd.decoders.image(j, output_type=types.GRAY).tensors]
             for j, _ in ndd.readers.Caffe2(path=lmdb_path).next_epoch(batch_size=B)]
    assert len(eager) == len(out) and all(np.array_equal(a, b) for e, o in zip(eager, out) for a, b in zip(e, o))

    es = ndd.ExternalSource(iter([[np.full(3, i, np.float32)] * 2 for i in range(4)]))
    got = []
    for x in es.captured(batch_size=2, ctx=ctx):
        y = ndd.cast(x, dtype=ndd.int32)
        got.append([np.array(t).tolist() for t in y.tensors])
    assert got == [[[i] * 3] * 2 for i in range(4)] and ndd.EvalContext.current() is not ctx
    assert ndd.capture.report().sites[0].replayed == 3

    # A loop whose trace captured nothing runs eagerly, still in ctx
    reader = ndd.readers.Caffe2(path=lmdb_path)
    with pytest.warns(UserWarning, match="no operators were captured"):
        inside = [ndd.EvalContext.current() is ctx for _ in reader.next_epoch(batch_size=B, ctx=ctx, capture=True)]
    assert len(inside) == 40 // B and all(inside)

    reader = ndd.readers.Caffe2(path=lmdb_path)
    for jpegs, _ in reader.next_epoch(batch_size=B, ctx=ctx, capture=True):
        ndd.decoders.image(jpegs)
    with pytest.raises(RuntimeError, match="Cannot change EvalContext for a capture-mode loop"):
        reader.next_epoch(batch_size=B, capture=True)


def test_set_state_inside_the_body_ends_the_epoch_as_in_eager_mode(lmdb_path):
    steps = {}
    for capture in (False, True):
        reader = ndd.readers.Caffe2(path=lmdb_path, enable_checkpointing=True)
        n, saved = 0, None
        for jpegs, _ in reader.next_epoch(batch_size=B, capture=capture):
            ndd.decoders.image(jpegs)
            n += 1
            if n == 1:
                saved = reader.get_state()
            if n == 3:
                reader.set_state(saved)
        first = [np.asarray(ndd.as_tensor(lab)).ravel().tolist()
                 for _, lab in reader.next_epoch(batch_size=B, capture=capture)][0]
        steps[capture] = (n, first)
    assert steps[False] == steps[True] and steps[True][0] == 3
    assert steps[True][1] == [i % 10 for i in range(B, 2 * B)]


def test_several_calls_on_one_line_3_10_vs_3_11(lmdb_path):
    import sys

    reader = ndd.readers.Caffe2(path=lmdb_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
            ndd.flip(ndd.decoders.image(jpegs, output_type=types.GRAY), horizontal=1)
    empty_graph = [w for w in caught if "no operators were captured" in str(w.message)]
    assert len(empty_graph) == (1 if sys.version_info < (3, 11) else 0)
    sites = ndd.capture.report().sites
    assert [s.op for s in sites] == ["decoders.image", "flip"]
    if sys.version_info >= (3, 11):  # PEP 657 positions tell the two calls apart
        assert all(s.captured for s in sites) and sites[0].col > sites[1].col
    else:  # one line, several calls: constants are unprovable, as the capture rules say
        assert not sites[0].captured and sites[0].code == "NDD-C003"


@pytest.mark.parametrize("processes", [0, 1, 2])
def test_threads_and_worker_processes_give_identical_results(lmdb_path, processes):
    ndd.capture.set_worker_processes(processes)
    try:
        eager = run(lmdb_path, False, epochs=2, random_shuffle=True, seed=3)
        captured = run(lmdb_path, True, epochs=2, random_shuffle=True, seed=3)
        worker = ndd.capture.report().worker
    finally:
        ndd.capture.set_worker_processes(None)
    assert worker == (f"{processes} process(es)" if processes else "threads")
    assert_same(eager, captured)
    with pytest.raises(ValueError, match="non-negative integer"):
        ndd.capture.set_worker_processes(-1)


@pytest.mark.parametrize("leave_at", ["end", "top"])
def test_a_loop_left_with_its_iterator_kept_is_no_longer_active(lmdb_path, leave_at):
    """``it = reader.next_epoch(...)``; ``for ... in it: ... break``: the generator is not
    closed while ``it`` lives, yet the code after the loop is not its body. Its calls run
    eagerly (not reported, strict mode does not refuse them), another capture loop may
    start, and the next ``next_epoch`` of the reader goes on as eager mode does, also when
    the step was left before its random call; resuming the old iterator then just ends it."""
    def run(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng = ndd.random.RNG(3)
        seen = []
        it = reader.next_epoch(batch_size=B, capture=capture)
        for step, (jpegs, labels) in enumerate(it):
            last = jpegs
            if leave_at == "top" and step == 2:
                break
            u = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
            seen.append((np.asarray(ndd.as_tensor(labels)).ravel().tolist(), np.asarray(ndd.as_tensor(u)).tolist()))
            if step == 2:
                break
        after = ndd.flip(ndd.decoders.image(last, output_type=types.GRAY))  # eager, outside the loop
        if capture:
            rep = ndd.capture.report()
            assert [s.op for s in rep.sites] == ["random.uniform"] and rep.fallbacks == []
        other = ndd.readers.Caffe2(path=lmdb_path)
        firsts = []
        for _, lb in other.next_epoch(batch_size=B, capture=capture):
            lb = ndd.cast(lb, dtype=ndd.int32)  # (alone on its line: a call site on Python 3.10 too)
            firsts.append(np.asarray(ndd.as_tensor(lb)).ravel().tolist())
        for _jpegs, labels in reader.next_epoch(batch_size=B, capture=capture):
            u = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
            seen.append((np.asarray(ndd.as_tensor(labels)).ravel().tolist(), np.asarray(ndd.as_tensor(u)).tolist()))
        assert list(it) == []
        return seen, firsts, np.asarray(ndd.as_tensor(after)).tolist(), str(rng.get_state())

    eager = run(False)
    assert len(eager[0]) == 40 // B - (leave_at == "top")
    assert run(True) == eager


def test_a_loop_torn_down_by_an_error_frees_its_feeders(lmdb_path):
    """A reader loop torn down by an error (the RNG rule broken on its third step) is replaced
    at the next ``next_epoch`` by a new loop, which reads the same feeder (it stayed bound to
    the old loop: "Already bound to a different capture context") from the item after the
    last one a step read: the items the old pipeline read ahead went back to it."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    feeder = ndd.ExternalSource(np.full((B,), i, np.int32) for i in range(100))
    rng = ndd.random.RNG(0)
    with pytest.raises(RuntimeError, match="The RNG of a captured operator was used unexpectedly"):
        for step, _ in enumerate(reader.next_epoch(batch_size=B, capture=True)):
            feeder()
            if step != 2:
                ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
    later = []
    for _, labels in reader.next_epoch(batch_size=B, capture=True):
        item = feeder()
        labels = ndd.cast(labels, dtype=ndd.int32)  # (alone on its line: a call site on Python 3.10 too)
        later.append((int(np.asarray(ndd.as_tensor(item)).ravel()[0]), np.asarray(ndd.as_tensor(labels)).ravel().tolist()))
    eager = [np.asarray(ndd.as_tensor(labels)).ravel().tolist()
             for _, labels in ndd.readers.Caffe2(path=lmdb_path).next_epoch(batch_size=B)]
    assert later == [(3, eager[3]), (4, eager[4])]


def test_calls_in_an_except_block_or_a_nested_loop_of_the_body_are_the_bodys(lmdb_path):
    """The body is told by the lines of its ``for`` statement: code the compiler moves out of
    line (an ``except`` block, from Python 3.12 at the end of the function) and a nested loop
    are still the body, so their calls are captured."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        try:
            raise KeyError("in the body")
        except KeyError:
            images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        for _ in range(1):
            ndd.flip(images, horizontal=1)
    rep = ndd.capture.report()
    assert [s.op for s in rep.sites] == ["decoders.image", "flip"]
    assert all(s.captured and s.replayed == 40 // B - 1 for s in rep.sites)


def test_strict_loop_left_with_its_iterator_kept_lets_eager_calls_run(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    it = reader.next_epoch(batch_size=B, capture="strict")
    for jpegs, _ in it:
        ndd.decoders.image(jpegs, output_type=types.GRAY)
        break
    out = ndd.flip(ndd.as_batch([np.zeros((2, 3), np.uint8)] * B), horizontal=1, vertical=1)
    assert np.asarray(ndd.as_tensor(out)).shape == (B, 2, 3)
    for jpegs, _ in ndd.readers.Caffe2(path=lmdb_path).next_epoch(batch_size=B, capture=True):
        ndd.decoders.image(jpegs, output_type=types.GRAY)
    rep = ndd.capture.report()
    del it, jpegs
    gc.collect()  # the left loop's generator is closed now: it forgets its partial trace, and
    assert ndd.capture.report() is rep  # leaves the report of the loop that ran after it alone


def test_break_during_the_traced_step_traces_again(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    rng = ndd.random.RNG(0)
    for jpegs, labels in reader.next_epoch(batch_size=B, capture=True):
        body(jpegs, labels, rng)
        break
    got = []
    for jpegs, labels in reader.next_epoch(batch_size=B, capture=True):
        images, _ = body(jpegs, labels, rng)
        got.append(np.array(ndd.as_tensor(images)))
    rep = ndd.capture.report()
    assert rep.traced and all(s.captured and s.replayed == len(got) - 1 for s in rep.sites)
    eager_reader, eager_rng = ndd.readers.Caffe2(path=lmdb_path), ndd.random.RNG(0)
    first = next(iter(eager_reader.next_epoch(batch_size=B)))
    body(*first, eager_rng)
    ref = [np.array(ndd.as_tensor(body(j, lab, eager_rng)[0]))
           for j, lab in eager_reader.next_epoch(batch_size=B)]
    assert len(ref) == len(got) and all(np.array_equal(a, b) for a, b in zip(ref, got))


def test_abandoned_iterator_during_the_traced_step_is_closed_by_next_epoch(lmdb_path):
    reader = ndd.readers.Caffe2(path=lmdb_path)
    it = reader.next_epoch(batch_size=B, capture=True)
    jpegs, _ = next(it)  # the traced step; the iterator stays referenced, never exhausted
    ndd.decoders.image(jpegs)
    n = 0
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        ndd.decoders.image(jpegs)
        n += 1
    assert n == 40 // B - 1  # the epoch continues after the sample the loop already received
    assert ndd.capture.report().sites[0].replayed == n - 1
    with pytest.raises(StopIteration):
        next(it)


def test_a_constant_positional_input_is_replayed(lmdb_path):
    """A constant given as an input (``full_like``'s fill value) is part of the graph: every
    later step replays it (it used to be compared with its broadcast batch, so each step fell
    back with NDD-C203)."""
    reader = ndd.readers.Caffe2(path=lmdb_path)
    out = []
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        filled = ndd.full_like(images, 3)
        out.append(np.array(ndd.as_tensor(filled)))
    report = ndd.capture.report()
    site = report.sites[1]
    assert site.op == "full_like" and site.captured, str(report)
    assert site.replayed == len(out) - 1 and not report.fallbacks, str(report)
    assert all(o.shape == (B, 28, 28, 1) and (o == 3).all() for o in out)


def test_random_site_run_twice_a_step_warns_at_the_users_line(lmdb_path):
    """The second run of a random call site in a step runs eagerly (NDD-C106), with one
    warning that names the line of the call; the values stay eager mode's."""
    def angles(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        rng = ndd.random.RNG(4)
        out = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in reader.next_epoch(batch_size=B, capture=capture):
                for _ in range(2):
                    a = ndd.random.uniform(batch_size=B, range=[-10, 10], rng=rng)  # the line
                    out.append(np.array(ndd.as_tensor(a)))
        return out, [w for w in caught if "runs more than once" in str(w.message)]

    eager, _ = angles(False)
    got, caught = angles(True)
    assert len(got) == len(eager) and all(np.array_equal(a, b) for a, b in zip(got, eager))
    assert caught and caught[0].filename == __file__
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1) if text.endswith("# the line"))
    assert caught[0].lineno == line
    assert any(f.code == "NDD-C106" for f in ndd.capture.report().fallbacks)


def test_wrapped_reader_iterator_captures_feeder_reads(lmdb_path):
    """An ExternalSource read in the body of a wrapped loop is a feeder (captured) too."""
    def feeder_values(capture):
        reader = ndd.readers.Caffe2(path=lmdb_path)
        feeder = ndd.ExternalSource(iter([[np.full(2, i, np.int32)] * B for i in range(100)]))
        out = []
        for _ in _progress(reader.next_epoch(batch_size=B, capture=capture)):
            f = feeder()
            y = ndd.cast(f, dtype=ndd.int64)  # alone on its line: Python 3.10 too
            out.append(np.array(ndd.as_tensor(y)))
        return out

    eager = feeder_values(False)
    got = feeder_values(True)
    assert all(np.array_equal(a, b) for a, b in zip(got, eager)) and len(got) == len(eager)
    site = ndd.capture.report().sites[0]
    assert site.op == "cast" and site.captured and site.replayed == 40 // B - 1


def test_dump_image_runs_at_each_step_and_is_not_captured(lmdb_path, tmp_path, monkeypatch):
    """dump_image writes files: it is never captured (a replay would write ahead of the loop);
    it runs once per step, in order, so after each step its file holds that step's image."""
    monkeypatch.chdir(tmp_path)
    reader = ndd.readers.Caffe2(path=lmdb_path)
    steps = 0
    for jpegs, _ in reader.next_epoch(batch_size=B, capture=True):
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        ndd.dump_image(images, suffix="d")
        first = np.asarray(images.tensors[0])
        h, w, _ = first.shape
        rows = "".join("".join(f"{v} " for v in row) + "\n" for row in first[..., 0].tolist())
        assert (tmp_path / "0-d-0.ppm").read_bytes() == f"P2\n{w} {h}\n255\n{rows}".encode()
        steps += 1
    assert steps > 2
    sites = {s.op: s for s in ndd.capture.report().sites}
    assert sites["decoders.image"].captured
    dump = sites["dump_image"]
    assert not dump.captured and dump.code == "NDD-C101" and "side effects" in dump.reason
    assert dump.eager == steps
