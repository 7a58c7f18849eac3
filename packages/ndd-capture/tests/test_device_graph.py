"""The host pass of a device graph as a capture worker process runs it
(``_device_graph.worker_host_pass``): on plain data, without a device."""

from __future__ import annotations

import numpy as np

from ndd._storage import BatchData
from ndd.random import RNG
from ndd_capture._device_graph import GRAPH_ARRAYS, GRAPH_DIFFERS, _signature, worker_host_pass


class _Plan:
    """A graphable call whose host stage uploads its input's first sample plus its random words."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: list = []

    def graph_host(self, inputs, batch_args, random_state=None):
        self.seen.append((inputs, random_state))
        if self.fail:
            raise RuntimeError("not graphable this step")
        x = np.asarray(inputs[0].sample(0))
        words = np.zeros(7, np.uint32) if random_state is None else np.asarray(random_state, np.uint32)
        return [x + 1, words], ("sig", tuple(inputs[0].shapes()[0]))


def _spec(plans, sigs, rng=None):
    """Node 1 reads the host value 0; node 2 (random) reads node 1's device output."""
    nodes = [(1, plans[0], [("ref", (0, 0))], {}, None, 0, None),
             (2, plans[1], [("ref", (1, 0))], {}, None if rng is None else 7, 3, None)]
    rngs = {} if rng is None else {7: (str(rng.get_state()), 10)}
    standin = BatchData(dense=np.zeros((4, 5), np.int32))  # shapes only, as a device value's stand-in
    return {"nodes": nodes, "rngs": rngs, "standins": {1: [standin]}, "sigs": sigs}, standin


def _host(k):
    return {0: [BatchData(dense=np.full((4, 3), k, np.int32))]}


def _captured_sigs(k, rng):
    a = np.full(3, k + 1, np.int32)
    words = np.asarray(_words(rng, k), np.uint32)
    return [_signature(("sig", (3,)), [a, np.zeros(7, np.uint32)]),
            _signature(("sig", (5,)), [np.ones(5, np.int32), words])]


def _words(rng, k):
    c = rng.clone()
    c.advance(k * 10 + 3)
    return c.draw_words(7)


def test_matching_steps_send_their_arrays_with_the_rng_placed_as_in_the_loop():
    rng = RNG(11)
    plans = [_Plan(), _Plan()]
    g, standin = _spec(plans, _captured_sigs(5, rng), rng)
    vals = _host(5)
    worker_host_pass(g, vals, 5)
    assert GRAPH_DIFFERS not in vals
    arrays = [bd.dense for bd in vals[GRAPH_ARRAYS]]
    np.testing.assert_array_equal(arrays[0], np.full(3, 6))
    np.testing.assert_array_equal(arrays[2], np.ones(5))  # the stand-in's zeros, plus one
    np.testing.assert_array_equal(arrays[3], np.asarray(_words(rng, 5), np.uint32))
    assert plans[1].seen[0][0][0] is standin  # device inputs are the stand-ins


def test_a_step_whose_signature_differs_is_flagged():
    rng = RNG(11)
    g, _ = _spec([_Plan(), _Plan()], _captured_sigs(5, rng), rng)
    vals = {0: [BatchData(dense=np.full((4, 6), 5, np.int32))]}  # wider samples: node 1's signature differs
    worker_host_pass(g, vals, 5)
    assert vals[GRAPH_DIFFERS] == [] and GRAPH_ARRAYS not in vals


def test_a_host_stage_that_raises_flags_the_step():
    rng = RNG(11)
    g, _ = _spec([_Plan(), _Plan(fail=True)], _captured_sigs(5, rng), rng)
    vals = _host(5)
    worker_host_pass(g, vals, 5)
    assert vals[GRAPH_DIFFERS] == [] and GRAPH_ARRAYS not in vals


def test_other_steps_draw_other_words():
    """The random words of step k are those of step k: a step-6 pass differs from the
    signatures of step 5 only in its arrays' contents, so it matches, with step 6's words."""
    rng = RNG(11)
    g, _ = _spec([_Plan(), _Plan()], _captured_sigs(5, rng), rng)
    vals = _host(6)
    worker_host_pass(g, vals, 6)
    words = vals[GRAPH_ARRAYS][3].dense
    np.testing.assert_array_equal(words, np.asarray(_words(rng, 6), np.uint32))
    assert not np.array_equal(words, np.asarray(_words(rng, 5), np.uint32))
