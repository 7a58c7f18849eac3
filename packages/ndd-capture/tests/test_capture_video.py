"""Capture mode over decoders.video: a loop over a File reader of encoded videos gives eager
mode's frames, and its call sites are captured."""

from __future__ import annotations

import av
import numpy as np

import ndd


def _write_video(path, n: int, w: int, h: int, shift: int) -> None:
    with av.open(str(path), "w") as c:
        s = c.add_stream("mjpeg", rate=25)
        s.width, s.height, s.pix_fmt = w, h, "yuvj420p"
        for i in range(n):
            img = np.full((h, w, 3), (i * 20 + shift) % 256, np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def test_captured_video_loop_gives_eager_frames(tmp_path):
    (tmp_path / "v").mkdir()  # (the File reader takes the files of file_root's sub-directories)
    for i in range(6):
        _write_video(tmp_path / "v" / f"{i}.avi", 4 + i, 32 + 8 * (i % 2), 24, 30 * i)

    def run(capture: bool) -> list:
        reader = ndd.readers.File(file_root=str(tmp_path), file_filters=["*.avi"])
        out = []
        for videos, _ in reader.next_epoch(batch_size=3, capture=capture):
            frames = ndd.decoders.video(videos, start_frame=1, sequence_length=5, stride=2, pad_mode="edge")
            firsts = ndd.decoders.video(videos, frames=[0], fill_value=[7])
            out.append([np.asarray(t) for t in frames] + [np.asarray(t) for t in firsts])
        return out

    eager, captured = run(False), run(True)
    assert len(eager) == len(captured) == 2
    for e, c in zip(eager, captured):
        assert [x.shape[0] for x in e] == [5, 5, 5, 1, 1, 1]
        for x, y in zip(e, c):
            np.testing.assert_array_equal(x, y)
    assert {x.shape[2] for e in eager for x in e} == {32, 40}  # ragged batches
    assert [s.op for s in ndd.capture.report().sites if s.captured] == ["decoders.video", "decoders.video"]
