"""The output arena of a device graph (``_graph._Arena``): every output of a step in one
buffer, copied out at once and handed out as views. Plain torch tensors; on the GPU too
where there is one."""

from __future__ import annotations

import pytest
import torch

from ndd.plugins import BatchData
from ndd_ops_cuda._graph import _ALIGN, _Arena

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _outputs(dev: str) -> dict:
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (4, 5, 7, 1), dtype=torch.uint8, generator=g)
    normalized = torch.randn(4, 1, 5, 7, generator=g).permute(0, 2, 3, 1)  # not contiguous
    ragged = [torch.randn(3, 2, generator=g).double(), torch.randn(5, 1, generator=g).double()]
    return {
        1: [BatchData(dense=images.to(dev))],
        2: [BatchData(dense=normalized.to(dev)), BatchData(dense=(images > 128).to(dev))],
        3: [BatchData(samples=[x.to(dev) for x in ragged])],
        (4, "empty"): [BatchData(dense=torch.zeros((4, 0), dtype=torch.int64, device=dev))],
        5: [BatchData(dense=torch.arange(4, dtype=torch.int64, device=dev))],
    }


@pytest.mark.parametrize("dev", DEVICES)
def test_the_arena_round_trips_every_output(dev):
    """Each output (any dtype, ragged, empty, non-contiguous) comes back equal, with its own
    shape and dtype, contiguous, as a view of the copied buffer at an aligned offset."""
    outputs = _outputs(dev)
    arena = _Arena(outputs)
    buf = torch.full((arena.nbytes,), 0xAB, dtype=torch.uint8, device=dev)
    arena.pack(buf, outputs)
    copy = buf.clone()
    back = arena.unpack(copy)
    assert list(back) == list(outputs)
    for key, bds in outputs.items():
        for bd, got in zip(bds, back[key]):
            want = [bd.dense] if bd.dense is not None else bd.samples
            have = [got.dense] if got.dense is not None else got.samples
            assert (got.dense is None) == (bd.dense is None)
            for w, h in zip(want, have):
                assert h.dtype == w.dtype and h.shape == w.shape and h.is_contiguous()
                assert torch.equal(h, w)
                assert h.untyped_storage().data_ptr() == copy.untyped_storage().data_ptr()
                if h.numel():  # an empty tensor has no address
                    assert (h.data_ptr() - copy.data_ptr()) % _ALIGN == 0


@pytest.mark.parametrize("dev", DEVICES)
def test_views_of_one_copy_do_not_see_the_next_pack(dev):
    """A replay rewrites the arena; batches handed out before are views of their own copy."""
    outputs = _outputs(dev)
    arena = _Arena(outputs)
    buf = torch.empty(arena.nbytes, dtype=torch.uint8, device=dev)
    arena.pack(buf, outputs)
    first = arena.unpack(buf.clone())
    later = {k: [BatchData(dense=bd.dense + 1) if bd.dense is not None and bd.dense.dtype != torch.bool
                 else bd for bd in bds] for k, bds in outputs.items()}
    arena.pack(buf, later)
    assert torch.equal(first[1][0].dense, outputs[1][0].dense)
    assert torch.equal(arena.unpack(buf)[1][0].dense, outputs[1][0].dense + 1)


@pytest.mark.parametrize("dev", DEVICES)
def test_views_are_made_when_read(dev, monkeypatch):
    """A replay hands out every output of the graph, intermediates included; the loop reads
    few of them, so each view is made on first use, and only once."""
    outputs = _outputs(dev)
    arena = _Arena(outputs)
    buf = torch.empty(arena.nbytes, dtype=torch.uint8, device=dev)
    arena.pack(buf, outputs)
    made = []
    view = _Arena._view
    monkeypatch.setattr(_Arena, "_view", staticmethod(lambda *a: made.append(a[2]) or view(*a)))
    back = arena.unpack(buf.clone())
    assert made == [] and len(back[3][0]) == 2 and len(back[2][1]) == 4
    assert torch.equal(back[2][0].dense, outputs[2][0].dense) and len(made) == 1
    assert torch.equal(back[3][0].samples[1], outputs[3][0].samples[1]) and len(made) == 3
    assert back[2][0].dense is back[2][0].dense and len(made) == 3
