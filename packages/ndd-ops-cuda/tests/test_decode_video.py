"""decoders.video(device="gpu"): decoded on the CPU (FFmpeg) and uploaded, so the frames equal
the CPU decoder's exactly, for every frame selection argument and ragged batches."""

from __future__ import annotations

import numpy as np
import pytest

# PyAV is a dependency of ndd-ops-cpu; only the offline GPU machine may lack it (see
# scripts/gpu-check.sh for fetching its wheel).
av = pytest.importorskip("av")

import ndd  # noqa: E402


def _video(path, n: int, w: int, h: int, codec: str, pix: str) -> np.ndarray:
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=25)
        s.width, s.height, s.pix_fmt = w, h, pix
        for i in range(n):
            img = np.zeros((h, w, 3), np.uint8)
            img[..., 0] = (np.arange(w) * 4 + i * 8) % 256
            img[..., 2] = i * 16
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return np.fromfile(path, np.uint8)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu_videos")
    return ndd.as_batch([_video(d / "a.webm", 10, 48, 32, "libvpx-vp9", "yuv420p"),
                         _video(d / "b.avi", 6, 40, 24, "mjpeg", "yuvj420p")])


@pytest.mark.parametrize("kw", [
    {},
    {"frames": [5, 0, 5, 30]},
    {"start_frame": 2, "sequence_length": 9, "stride": 2, "fill_value": [9, 8, 7]},
    {"start_frame": 2, "sequence_length": 9, "stride": 2, "pad_mode": "reflect"},
])
def test_video_on_the_gpu_matches_the_cpu(videos, kw):
    gpu = ndd.decoders.video(videos, device="gpu", **kw)
    cpu = ndd.decoders.video(videos, **kw)
    assert gpu.device.device_type == "gpu" and gpu.layout == "FHWC" and gpu.shape == cpu.shape
    for g, c in zip(gpu.cpu(), cpu):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(c))


def test_video_on_the_gpu_names_a_bad_sample(videos):
    bad = ndd.as_batch([np.asarray(videos.tensors[0]), np.arange(300, dtype=np.uint8)])
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match="sample 1.*not a video"):
        ndd.decoders.video(bad, device="gpu")
