"""Capture loops driven by ndd.ExternalSource, and feeders read inside a loop body."""

from __future__ import annotations

import itertools
import random
import threading
import time

import numpy as np
import pytest

import ndd
import ndd_capture._pipeline

# Capture mode is independent of EvalMode: every test here runs under all four.
pytestmark = pytest.mark.usefixtures("eval_mode")

B = 4


def batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.integers(0, 255, (6, 5), dtype=np.uint8) for _ in range(B)] for _ in range(n)]


def body(x, rng):
    y = ndd.flip(x, horizontal=1)
    noise = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], shape=[6, 5], rng=rng)
    return ndd.cast(y, dtype=ndd.float32), noise


def collect(loop_iter, rng):
    out = []
    for x in loop_iter:
        y, noise = body(x, rng)
        out.append((np.asarray(ndd.as_tensor(y)), np.asarray(ndd.as_tensor(noise))))
    return out


def test_parity_and_epochs():
    data = batches(5)
    rng_e, rng_c = ndd.random.RNG(1), ndd.random.RNG(1)
    eager = [collect((ndd.as_batch(b) for b in data), rng_e) for _ in range(3)]
    es = ndd.ExternalSource(data, cycle="raise")
    captured = [collect(es.captured(batch_size=B), rng_c) for _ in range(3)]
    for e, c in zip(eager, captured):
        assert len(e) == len(c) == 5
        for (a1, b1), (a2, b2) in zip(e, c):
            np.testing.assert_array_equal(a1, a2)
            np.testing.assert_array_equal(b1, b2)
    assert str(rng_e.get_state()) == str(rng_c.get_state())
    assert all(s.captured for s in ndd.capture.report().sites)


@pytest.mark.parametrize("move", ["seed", "draws"])
def test_an_rng_moved_between_epochs_draws_from_there_as_in_eager_mode(move):
    """Between epochs the RNG is reseeded or drawn from: the next epoch's random values
    come from where it now stands, as in eager mode (ours: DALI raises)."""
    data = batches(3)

    def epochs(loop_iter, rng):
        out = []
        for epoch in range(3):
            out += collect(loop_iter(), rng)
            if move == "seed":
                rng.seed = 20 + epoch
            else:
                rng()
        return out

    rng_e, rng_c = ndd.random.RNG(1), ndd.random.RNG(1)
    eager = epochs(lambda: (ndd.as_batch(b) for b in data), rng_e)
    es = ndd.ExternalSource(data, cycle="raise")
    captured = epochs(lambda: es.captured(batch_size=B), rng_c)
    assert len(eager) == len(captured) == 9 and str(rng_e.get_state()) == str(rng_c.get_state())
    for (a1, b1), (a2, b2) in zip(eager, captured):
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(b1, b2)
    assert not np.array_equal(eager[0][1], eager[3][1])  # the epochs' draws differ


def test_tensor_items_are_broadcast():
    es = ndd.ExternalSource([np.arange(3, dtype=np.int32)] * 2)
    for x in es.captured(batch_size=B):
        assert isinstance(x, ndd.Batch) and x.batch_size == B
        ndd.cast(x, dtype=ndd.float32)


def test_batch_size_mismatch():
    es = ndd.ExternalSource(batches(2))
    with pytest.raises(ValueError, match="Expected batch size 3, got 4"):
        for _ in es.captured(batch_size=3):
            pass


def test_role_errors():
    es = ndd.ExternalSource(batches(3))
    it = es.captured(batch_size=B)
    next(it)
    with pytest.raises(RuntimeError, match="already used in a capture-mode loop|already used through .captured"):
        es()
    it.close()
    es2 = ndd.ExternalSource(batches(3))
    es2()
    with pytest.raises(RuntimeError, match="already used eagerly"):
        es2.captured(batch_size=B)


def test_feeder_parity_and_rules():
    data, extra = batches(4, 0), batches(4, 1)
    feeder = ndd.ExternalSource(extra)
    reader_es = ndd.ExternalSource(data)
    got = []
    for x in reader_es.captured(batch_size=B):
        f = feeder()
        got.append(np.asarray(ndd.as_tensor(ndd.cast(f, dtype=ndd.int32))))
        ndd.flip(x)
    assert len(got) == 4
    for g, e in zip(got, extra):
        np.testing.assert_array_equal(g, np.stack(e).astype(np.int32))
    with pytest.raises(RuntimeError, match="already used in a capture-mode loop|Already bound"):
        feeder()


@pytest.mark.parametrize("rule,match", [
    ("twice", "may be read only once per capture-mode step"),
    ("skip", "was not consumed this step"),
    ("late", "wasn't seen during tracing"),
    ("short", "exhausted before the iteration ended"),
])
def test_feeder_errors(rule, match):
    feeder = ndd.ExternalSource(batches(2 if rule == "short" else 5, 1))
    root = ndd.ExternalSource(batches(5))
    with pytest.raises(RuntimeError, match=match):
        for i, x in enumerate(root.captured(batch_size=B)):
            ndd.flip(x)
            if rule == "late" and i == 0:
                continue
            if rule == "skip" and i == 2:
                continue
            feeder()
            if rule == "twice":
                feeder()


def _first(x):
    return int(np.asarray(ndd.as_tensor(x)).ravel()[0])


@pytest.mark.parametrize("where", ["end", "top"])
@pytest.mark.parametrize("then", ["eager", "captured"])
def test_break_gives_back_the_items_read_ahead(where, then):
    """The pipeline reads the root and the feeder ahead of the body; a ``break`` gives the
    items no step used back to their sources, so they go on where eager mode would: after
    the last item the body took (ours: DALI loses them). ``top``: the third step breaks
    before reading the feeder, whose item for that step is given back too."""
    root = ndd.ExternalSource([np.full((2, 2), i, np.uint8) for i in range(10)])
    feeder = ndd.ExternalSource([np.full((2, 2), 100 + i, np.uint8) for i in range(10)])
    seen = []
    for x in root.captured(batch_size=B):
        if where == "top" and len(seen) == 2:
            break
        seen.append((_first(ndd.flip(x)), _first(feeder())))
        if where == "end" and len(seen) == 2:
            break
    assert seen == [(0, 100), (1, 101)]
    next_root = 2 if where == "end" else 3
    if then == "eager":
        assert [_first(root()) for _ in range(3)] == [next_root, next_root + 1, next_root + 2]
        assert _first(feeder()) == 102
        return
    rest = [(_first(ndd.flip(x)), _first(feeder())) for x in root.captured(batch_size=B)]
    assert rest == [(next_root + i, 102 + i) for i in range(10 - next_root)]


def test_a_loop_left_with_its_iterator_kept_ends_when_captured_again():
    """``it = root.captured(...)``, left with ``break`` while ``it`` lives: a later
    ``captured()`` ends that loop as a ``break`` does (the items read ahead go back) and
    traces afresh; an eager read after the old loop is not taken for a body's read."""
    root = ndd.ExternalSource([np.full((2, 2), i, np.uint8) for i in range(8)])
    feeder = ndd.ExternalSource([np.full((2, 2), 100 + i, np.uint8) for i in range(8)])
    it = root.captured(batch_size=B)
    seen = []
    for x in it:
        seen.append((_first(ndd.flip(x)), _first(feeder())))
        if len(seen) == 3:
            break
    with pytest.raises(RuntimeError, match="already used in a capture-mode loop"):
        feeder()  # still bound to the loop left with break, which read it ahead
    seen += [(_first(ndd.flip(x)), _first(feeder())) for x in root.captured(batch_size=B)]
    assert seen == [(i, 100 + i) for i in range(8)]
    assert list(it) == []


def test_a_pass_end_read_ahead_is_given_back_too():
    """With ``cycle="raise"`` the pipeline may read the end of the pass ahead; after a
    ``break`` the source still ends its pass there (StopIteration once), then starts over."""
    root = ndd.ExternalSource([np.full((2, 2), i, np.uint8) for i in range(4)], cycle="raise")
    for x in root.captured(batch_size=B):
        if _first(ndd.flip(x)) == 1:  # the step after the traced one: the pipeline read 2, 3, the end
            break
    assert [_first(root()) for _ in range(2)] == [2, 3]
    with pytest.raises(StopIteration):
        root()
    assert _first(root()) == 0


def test_co_exhaustion_ends_cleanly():
    root, feeder = ndd.ExternalSource(batches(3)), ndd.ExternalSource(batches(3, 1))
    n = 0
    for x in root.captured(batch_size=B):
        feeder()
        ndd.flip(x)
        n += 1
    assert n == 3


def test_feeders_are_read_in_step_order_by_several_pipeline_threads(monkeypatch):
    """Several pipeline threads compute steps at once (heavy steps); each step's feeder item
    is read with its source item, under the read lock, so step k gets item k (read outside it,
    two threads could swap them)."""
    monkeypatch.setattr(ndd_capture._pipeline, "HEAVY_STEP_S", 0.0)  # every step counts as heavy
    ndd.capture.set_prefetch_depth(4)
    counter, delays = itertools.count(), random.Random(0)

    def numbered():
        time.sleep(delays.random() * 0.002)  # (lets another thread in while this one reads)
        return np.full((2, 2), next(counter), np.int32)

    try:
        root = ndd.ExternalSource([np.full((2, 2), i, np.uint8) for i in range(40)])
        feeder = ndd.ExternalSource(numbered)
        seen = [(_first(ndd.flip(x)), _first(feeder()))
                for x in root.captured(batch_size=B, ctx=ndd.EvalContext(num_threads=4))]
    finally:
        ndd.capture.set_prefetch_depth(2)
    assert seen == [(i, i) for i in range(40)]


def _items(base, n, cycle=None):
    return ndd.ExternalSource([np.full((2, 2), base + i, np.int32) for i in range(n)], cycle=cycle)


def _steps(root, capture):
    """The root's batches: captured, or read eagerly until it ends."""
    return root.captured(batch_size=B) if capture else iter(lambda: root(batch_size=B), None)


@pytest.mark.parametrize("draw_first", [False, True])
def test_a_feeder_running_out_raises_at_its_read_as_in_eager_mode(draw_first):
    """Feeder ``b`` runs out on the third step: the pipeline reads it ahead, and the body's
    read of it raises there (a StopIteration, as eager mode's read; a RuntimeError with DALI's
    message, naming the read), after the random draw and the read of ``a`` before it, which
    count as in eager mode; ``a`` then goes on with the item after. A body that leaves before
    that read does not see the error (it used to be raised before the step)."""
    def run(capture, leave_early=False):
        root, a, b = _items(0, 6), _items(100, 10), _items(200, 2)
        rng = ndd.random.RNG(0)
        seen, err = [], None
        try:
            for i, x in enumerate(_steps(root, capture)):
                if leave_early and i == 2:
                    break
                ndd.flip(x)
                if draw_first:
                    ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
                seen.append((_first(a(batch_size=B)), _first(b(batch_size=B))))
                if not draw_first:
                    ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
        except StopIteration as e:
            err = e
        return seen, err, str(rng.get_state()), _first(a(batch_size=B))

    eager, captured = run(False), run(True)
    assert captured[0] == eager[0] == [(100, 200), (101, 201)]
    assert captured[2:] == eager[2:] and eager[3] == 103
    assert isinstance(eager[1], StopIteration) and isinstance(captured[1], RuntimeError)
    assert "exhausted before the iteration ended: the ExternalSource read at" in str(captured[1])
    assert __file__ in str(captured[1])
    assert run(True, leave_early=True)[:2] == run(False, leave_early=True)[:2] == ([(100, 200), (101, 201)], None)


def test_a_feeders_pass_end_read_ahead_goes_back_after_a_break():
    """The pipeline reads a ``cycle="raise"`` feeder's end of pass ahead; after a ``break``
    the feeder still ends its pass there (it used to skip it)."""
    ended = threading.Event()

    def one_pass():
        yield from (np.full((2, 2), 100 + i, np.int32) for i in range(3))
        ended.set()  # the next read, the end of the pass, is under way

    root, feeder = _items(0, 10), ndd.ExternalSource(one_pass, cycle="raise")
    ndd.capture.set_prefetch_depth(4)
    try:
        for i, x in enumerate(root.captured(batch_size=B)):
            ndd.flip(x)
            feeder(batch_size=B)
            if i == 1:
                assert ended.wait(10)
                break
    finally:
        ndd.capture.set_prefetch_depth(2)
    assert _first(feeder(batch_size=B)) == 102
    with pytest.raises(StopIteration):
        feeder(batch_size=B)
    assert _first(feeder(batch_size=B)) == 100


def test_a_feeder_that_raises_on_the_traced_step_and_then_gives_items():
    """A feeder whose read on the first (traced) step raises StopIteration, which the body
    catches, and which gives items later: those reach the body as in eager mode (capture mode
    failed with a KeyError: it learns the items' types from the first one it reads)."""
    def run(capture):
        calls = itertools.count()

        def late():
            if next(calls) == 0:
                raise StopIteration
            return np.full((2, 2), 100 + next(counter), np.int32)

        counter = itertools.count()
        root, feeder = _items(0, 5), ndd.ExternalSource(late)
        seen = []
        for x in _steps(root, capture):
            ndd.flip(x)
            try:
                seen.append(_first(feeder(batch_size=B)))
            except StopIteration:
                seen.append("ran out")
        return seen

    assert run(True) == run(False) == ["ran out", 100, 101, 102, 103]


def test_sources_that_change_type_layout_or_dimensions():
    """A root item of another type, layout or number of dimensions than the traced one runs
    its step as in eager mode (its results carry its own metadata; they had the traced
    step's: flip of float data said int32); a feeder that changes raises, naming where it
    is read (DALI raises for both)."""
    z = np.zeros((2, 3, 1), np.int32) + np.arange(3, dtype=np.int32)[None, :, None]
    items = [ndd.batch([z] * 2, layout="HWC"), ndd.batch([z.astype(np.float32) + 0.5] * 2, layout="HWC"),
             ndd.batch([z] * 2, layout="WHC"), ndd.batch([z[None]] * 2, layout="FHWC"), ndd.batch([z] * 2, layout="HWC")]
    got = []
    for x in ndd.ExternalSource(items).captured(batch_size=2):
        y = ndd.flip(x, horizontal=1)
        got.append((y.dtype, y.layout, np.asarray(y.tensors[0])))
    eager = [ndd.flip(b, horizontal=1) for b in items]
    assert [(d, lay) for d, lay, _ in got] == [(e.dtype, e.layout) for e in eager]
    for (_, _, a), e in zip(got, eager):
        np.testing.assert_array_equal(a, np.asarray(e.tensors[0]))
    assert ndd.capture.report().eager_steps == 3
    feeder = ndd.ExternalSource([ndd.batch([z] * 2)] * 2 + [ndd.batch([z.astype(np.float32)] * 2)] * 2)
    with pytest.raises(RuntimeError, match=r"ExternalSource read at .*gave f32 data.*traced step had i32"):
        for x in ndd.ExternalSource([ndd.batch([z] * 2)] * 4).captured(batch_size=2):
            ndd.flip(x + feeder(), horizontal=1)


def test_captured_again_inside_its_own_step_raises():
    """A second .captured() of a root whose loop is in a step (from its body, or beside a
    loop driven with next()) is an error, as in DALI (it failed inside ndd before); after
    leaving the loop with break it starts anew."""
    items = [ndd.batch([np.full((2, 3, 1), i, np.int32)] * 2, layout="HWC") for i in range(4)]
    es = ndd.ExternalSource(items)
    g1 = es.captured(batch_size=2)
    ndd.flip(next(g1), horizontal=1)
    with pytest.raises(RuntimeError, match="already used through .captured"):
        next(es.captured(batch_size=2))
    g1.close()
    es = ndd.ExternalSource(items)
    it = es.captured(batch_size=2)
    for x in it:
        ndd.flip(x, horizontal=1)
        with pytest.raises(RuntimeError, match="already used through .captured"):
            es.captured(batch_size=2)
        break
    assert len([ndd.flip(x, horizontal=1) for x in es.captured(batch_size=2)]) == 3
