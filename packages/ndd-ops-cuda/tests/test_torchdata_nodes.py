"""ndd.pytorch.nodes with GPU data: ToTorch moves CPU entries to the GPU of the others."""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tn = pytest.importorskip("torchdata.nodes")
pytest.importorskip("ndd_readers")
Image = pytest.importorskip("PIL.Image")

import ndd  # noqa: E402
import ndd.types as types  # noqa: E402
from ndd.pytorch import nodes  # noqa: E402
from ndd_ops_cuda._backend import _emulated  # noqa: E402

EMULATED = _emulated()  # set by conftest.py when there is no CUDA device


@pytest.fixture
def tree(tmp_path):
    rng = np.random.default_rng(3)
    for i in range(6):
        d = tmp_path / f"c{i % 2}"
        d.mkdir(exist_ok=True)
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), np.uint8)).save(buf, format="JPEG")
        (d / f"{i}.jpg").write_bytes(buf.getvalue())
    return tmp_path


def _loader(tree, device: str):
    reader = nodes.Reader(ndd.readers.File, batch_size=3, file_root=str(tree))
    decoded = nodes.DictMapper(reader, lambda j: ndd.decoders.image(j, device=device, output_type=types.RGB))
    return tn.Loader(nodes.ToTorch(decoded))


def test_gpu_images_and_cpu_labels_come_out_on_one_device(tree, monkeypatch) -> None:
    moves = []
    real_gpu = ndd.Batch.gpu

    def spy(self, index=None):
        moves.append(index)
        return real_gpu(self, index)

    monkeypatch.setattr(ndd.Batch, "gpu", spy)
    gpu = list(_loader(tree, "gpu"))
    cpu = list(_loader(tree, "cpu"))
    assert moves == [0, 0]  # the labels of each of the two batches, to the images' GPU
    assert len(gpu) == len(cpu) == 2
    for (gi, gl), (ci, cl) in zip(gpu, cpu):
        assert gi.shape == ci.shape == (3, 16, 16, 3)
        assert torch.equal(gl.cpu(), cl)
        # nvJPEG and libjpeg-turbo may differ by a few levels; the emulation decodes on the CPU.
        assert (gi.cpu().int() - ci.int()).abs().max() <= (0 if EMULATED else 16)
        if not EMULATED:
            assert gi.device.type == gl.device.type == "cuda"


def test_entries_on_two_gpus_are_an_error(tree) -> None:
    reader = nodes.Reader(ndd.readers.File, batch_size=3, file_root=str(tree))
    split = nodes.DictMapper(nodes.DictMapper(reader, lambda j: j.gpu(0)), lambda lab: lab.gpu(1), key="label")
    if not EMULATED and torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the emulation)")
    with pytest.raises(ValueError, match="same device"):
        next(iter(tn.Loader(nodes.ToTorch(split))))
