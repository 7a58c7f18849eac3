"""A device graph session (``_graph.GraphSession``) on the CPU emulation: what a CUDA graph
capture refuses fails the capture here too, instead of passing unnoticed on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ndd
from ndd.plugins import BatchData

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the emulation (CUDA refuses by itself)")


@pytest.fixture()
def session(monkeypatch):
    monkeypatch.setenv("NDD_CUDA_EMULATE", "cpu")
    from ndd_ops_cuda._backend import BACKEND

    return BACKEND.graph_session(0, ndd.EvalContext.current())


def test_a_plain_device_pass_is_captured_and_replayed(session):
    out = session.capture([np.arange(6, dtype=np.float32)], lambda up: {1: [BatchData(dense=up[0] * 2)]})
    np.testing.assert_array_equal(out[1][0].dense.numpy(), np.arange(6) * 2)
    again = session.replay([np.arange(6, dtype=np.float32) + 1])
    np.testing.assert_array_equal(again[1][0].dense.numpy(), (np.arange(6) + 1) * 2)


def test_inputs_of_every_kind_travel_in_one_buffer(session):
    """Inputs of several dtypes and shapes (odd byte counts, a scalar, an empty one) sit at
    aligned places of one buffer, uploaded by one copy: each replay's values come through
    unchanged, and the graph reads them from one device buffer."""
    rng = np.random.default_rng(0)

    def step():
        return [rng.integers(0, 255, (3, 5, 7), dtype=np.uint8), rng.random((4, 2)), np.array(rng.random() < 0.5),
                rng.random(3).astype(np.float32) < 0.5, np.zeros((0, 3), np.int64), rng.integers(-9, 9, 5, dtype=np.int16)]

    def fn(up):  # each input as a batch of one sample
        return {i: [BatchData(dense=u.reshape(1, *u.shape).clone())] for i, u in enumerate(up)}

    for k in range(3):
        arrays = step()
        out = session.capture(arrays, fn) if k == 0 else session.replay(arrays)
        for i, a in enumerate(arrays):
            got = out[i][0].dense.numpy()[0]
            assert got.dtype == a.dtype and got.shape == a.shape
            np.testing.assert_array_equal(got, a)
    assert len({t.untyped_storage().data_ptr() for t in session._static}) == 1
    assert all(t.storage_offset() * t.element_size() % 256 == 0 for t in session._static)


@pytest.mark.parametrize("read", [
    lambda x: x.sum().item(),                # a value read back
    lambda x: bool((x > 2).any()),           # a device condition in Python
    lambda x: x[x > 2],                      # boolean-mask indexing: a data-dependent size
    lambda x: torch.nonzero(x),
    lambda x: torch.masked_select(x, x > 2),
    lambda x: x.__setitem__(x > 2, 0.0),     # boolean-mask assignment
    lambda x: torch.equal(x, x + 1),         # a comparison answered on the host
])
def test_reading_device_data_inside_a_capture_fails_it(session, read):
    def fn(up):
        read(up[0])
        return {1: [BatchData(dense=up[0])]}

    with pytest.raises(RuntimeError, match="a kernel read device data back inside a device graph"):
        session.capture([np.arange(6, dtype=np.float32)], fn)
    # only inside the capture: the same reads work outside it
    assert torch.arange(6.0).sum().item() == 15.0


def test_copying_host_data_inside_a_capture_fails_it(session):
    """A graph would replay the copy from a staging buffer that is reused afterwards: per-step
    data enter a graph only through its input buffers."""
    from ndd_ops_cuda._backend import BACKEND

    def fn(up):
        return {1: [BatchData(dense=up[0] + BACKEND.to_device(np.ones(6, np.float32), 0))]}

    with pytest.raises(RuntimeError, match="a kernel copied host data to the GPU inside a device graph"):
        session.capture([np.arange(6, dtype=np.float32)], fn)


def test_copies_to_the_host_inside_a_capture_are_refused():
    """``.cpu()`` of device data inside a capture would synchronise (CUDA then rejects the
    capture). Device data are torch "meta" tensors here; host-to-host copies pass."""
    from ndd_ops_cuda._graph import _refusing_device_reads

    dev = torch.empty(3, device="meta")
    with _refusing_device_reads():
        for copy in (lambda: dev.to("cpu"), lambda: torch.empty(3).copy_(dev)):
            with pytest.raises(RuntimeError, match=r"read device data back inside a device graph \(aten::"):
                copy()
        host = torch.arange(3.0)
        assert torch.empty(3).copy_(host).tolist() == [0.0, 1.0, 2.0]
        assert host.to(torch.float64).tolist() == [0.0, 1.0, 2.0]
