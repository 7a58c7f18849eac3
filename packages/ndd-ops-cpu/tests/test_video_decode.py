"""decoders.video on the CPU.

Pixels: the test's own ITU-R BT.601 conversion (written here) of the YUV planes PyAV decodes
sequentially, frame i being the i-th frame in presentation order; ndd is within 1 level (its
float rounding). Frame selection and padding: ndd's output for each argument set equals the
all-frames decode indexed by hand-worked frame lists (exactly: random access and sequential
decoding give the same pixels).
"""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

import ndd

N = 12  # frames of the main test video


def _encode(path, n, w, h, codec, pix, gop=None) -> np.ndarray:
    """A video whose frame i has a ramp shifted by i, and its bytes."""
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=25)
        s.width, s.height, s.pix_fmt = w, h, pix
        if gop:
            s.codec_context.gop_size = gop
        for i in range(n):
            img = np.zeros((h, w, 3), np.uint8)
            img[..., 0] = (np.arange(w) * 4 + i * 8) % 256
            img[..., 1] = (np.arange(h)[:, None] * 5) % 256
            img[..., 2] = i * 16 % 256
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return np.fromfile(path, np.uint8)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("videos")
    return {
        "vp9": _encode(d / "a.webm", N, 64, 48, "libvpx-vp9", "yuv420p", gop=4),
        "mjpeg": _encode(d / "b.avi", 7, 40, 32, "mjpeg", "yuvj420p"),
        "odd": _encode(d / "c.webm", 5, 41, 31, "libvpx-vp9", "yuv420p"),
        "h264": _encode(d / "d.mp4", 9, 48, 32, "libx264", "yuv420p", gop=3),  # not in DALI's CPU decoder
    }


def _bilinear_up(c: np.ndarray, h: int, w: int) -> np.ndarray:
    """Chroma plane to (h, w): linear interpolation, pixel centres aligned, edges clamped."""
    def axis(n_in, n_out):
        x = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        i0 = np.floor(x).astype(int)
        return i0, np.minimum(i0 + 1, n_in - 1), x - i0
    r0, r1, fr = axis(c.shape[0], h)
    c0, c1, fc = axis(c.shape[1], w)
    c = c.astype(np.float64)
    rows = c[r0] * (1 - fr[:, None]) + c[r1] * fr[:, None]
    return rows[:, c0] * (1 - fc) + rows[:, c1] * fc


def _reference(data: np.ndarray) -> np.ndarray:
    """Every frame of ``data``, decoded in order by PyAV and converted to RGB here (BT.601)."""
    out = []
    with av.open(io.BytesIO(data.tobytes())) as c:
        for f in c.decode(video=0):
            h, w = f.height, f.width
            y = np.frombuffer(f.planes[0], np.uint8).reshape(h, -1)[:, :w].astype(np.float64)
            u, v = (np.frombuffer(f.planes[k], np.uint8).reshape(f.planes[k].height, -1)[:, :f.planes[k].width]
                    for k in (1, 2))
            u, v = _bilinear_up(u, h, w) - 128, _bilinear_up(v, h, w) - 128
            if not f.format.name.startswith("yuvj"):  # limited range: Y 16..235, chroma 16..240
                y, u, v = (y - 16) * 255 / 219, u * 255 / 224, v * 255 / 224
            r = y + 1.402 * v
            b = y + 1.772 * u
            g = y - 0.344136 * u - 0.714136 * v
            out.append(np.clip(np.rint(np.stack([r, g, b], -1)), 0, 255).astype(np.uint8))
    return np.stack(out)


def _np(x) -> np.ndarray:
    return np.asarray(x)


# -- pixels ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vp9", "mjpeg", "odd", "h264"])
def test_all_frames_match_the_bt601_reference(videos, name):
    out = ndd.decoders.video(ndd.tensor(videos[name]))
    ref = _reference(videos[name])
    assert out.dtype == ndd.uint8 and out.layout == "FHWC" and out.shape == ref.shape
    assert np.abs(_np(out).astype(int) - ref).max() <= 1


def test_random_access_equals_sequential_decode(videos):
    full = _np(ndd.decoders.video(ndd.tensor(videos["vp9"])))
    order = [11, 0, 7, 7, 3, 10, 1, 11, 5]  # backwards jumps across keyframes, repeats
    assert np.array_equal(_np(ndd.decoders.video(ndd.tensor(videos["vp9"]), frames=order)), full[order])
    h264 = videos["h264"]
    assert np.array_equal(_np(ndd.decoders.video(ndd.tensor(h264), frames=[8, 2, 5, 0])),
                          _np(ndd.decoders.video(ndd.tensor(h264)))[[8, 2, 5, 0]])


# -- frame selection and padding (a 12-frame video; frame lists worked out by hand) -------

F = -1  # a fill frame in the expected lists
CASES = [
    (dict(), list(range(12))),
    (dict(frames=[0, 11, 5, 5, 3]), [0, 11, 5, 5, 3]),
    (dict(frames=[]), []),
    (dict(frames=[-1, 2, 12, 30]), [F, 2, F, F]),
    (dict(start_frame=5), [5, 6, 7, 8, 9, 10, 11]),
    (dict(start_frame=-2, stride=5), [F, 3, 8]),
    (dict(stride=4), [0, 4, 8]),
    (dict(end_frame=5), [0, 1, 2, 3, 4]),
    (dict(sequence_length=0), []),
    (dict(start_frame=4, end_frame=20, stride=5), [4, 9, F, F]),
    (dict(start_frame=8, sequence_length=6), [8, 9, 10, 11, F, F]),
    (dict(start_frame=8, sequence_length=6, pad_mode="none"), [8, 9, 10, 11]),
    (dict(start_frame=10, end_frame=20, pad_mode="none"), [10, 11]),
    (dict(start_frame=3, sequence_length=6, stride=3, pad_mode="edge"), [3, 6, 9, 11, 11, 11]),
    (dict(start_frame=-2, sequence_length=3, pad_mode="repeat"), [0, 0, 0]),
    (dict(frames=[-5, 14], pad_mode="edge"), [0, 11]),
    (dict(start_frame=8, sequence_length=8, pad_mode="reflect_1001"), [8, 9, 10, 11, 11, 10, 9, 8]),
    (dict(start_frame=3, sequence_length=8, stride=3, pad_mode="symmetric"), [3, 6, 9, 11, 8, 5, 2, 0]),
    (dict(start_frame=8, sequence_length=8, pad_mode="reflect_101"), [8, 9, 10, 11, 10, 9, 8, 7]),
    (dict(start_frame=3, sequence_length=8, stride=3, pad_mode="reflect"), [3, 6, 9, 10, 7, 4, 1, 2]),
    (dict(start_frame=-3, sequence_length=4, pad_mode="reflect"), [3, 2, 1, 0]),
    (dict(frames=[0, 23, 24], pad_mode="reflect_1001"), [0, 0, 0]),
]


@pytest.mark.parametrize("kw,expected", CASES)
def test_frame_selection(videos, kw, expected):
    full = _np(ndd.decoders.video(ndd.tensor(videos["vp9"])))
    out = _np(ndd.decoders.video(ndd.tensor(videos["vp9"]), **kw))
    assert out.shape == (len(expected), 48, 64, 3)
    for got, i in zip(out, expected):
        assert np.array_equal(got, np.zeros_like(got) if i == F else full[i])


def test_fill_value_per_channel_and_shared(videos):
    v = ndd.tensor(videos["vp9"])
    out = _np(ndd.decoders.video(v, start_frame=11, sequence_length=2, fill_value=[118, 185, 0]))
    assert (out[1] == [118, 185, 0]).all() and not (out[0] == [118, 185, 0]).all()
    assert (_np(ndd.decoders.video(v, frames=[40], fill_value=[7])) == 7).all()


def test_ragged_batch_and_per_sample_arguments(videos):
    vids = ndd.batch([videos["vp9"], videos["mjpeg"], videos["odd"]])
    full = [_np(ndd.decoders.video(ndd.tensor(videos[k]))) for k in ("vp9", "mjpeg", "odd")]
    out = ndd.decoders.video(vids)
    assert out.layout == "FHWC" and [t.shape for t in out] == [(12, 48, 64, 3), (7, 32, 40, 3), (5, 31, 41, 3)]
    assert all(np.array_equal(_np(t), f) for t, f in zip(out, full))
    starts = ndd.batch([np.int32(1), np.int32(3), np.int32(4)])
    out = ndd.decoders.video(vids, start_frame=starts, sequence_length=2, pad_mode="edge")
    assert all(np.array_equal(_np(t), f[[s, min(s + 1, len(f) - 1)]]) for t, f, s in zip(out, full, (1, 3, 4)))
    frames = ndd.batch([np.array([2, 0], np.int32), np.array([6], np.int32), np.array([], np.int32)])
    out = ndd.decoders.video(vids, frames=frames)
    assert [t.shape[0] for t in out] == [2, 1, 0]
    assert np.array_equal(_np(out.tensors[0]), full[0][[2, 0]]) and np.array_equal(_np(out.tensors[1]), full[1][[6]])


def test_compatibility_arguments_are_accepted(videos):
    v = ndd.tensor(videos["odd"])
    out = ndd.decoders.video(v, build_index=False, affine=False, frames=[2])
    assert np.array_equal(_np(out), _np(ndd.decoders.video(v, frames=[2])))


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("kw,match", [
    (dict(frames=[1], start_frame=0), "'frames' cannot be combined with 'start_frame'"),
    (dict(frames=[1], stride=2), "'frames' cannot be combined with 'stride'"),
    (dict(end_frame=5, sequence_length=3), "'sequence_length' cannot be combined with 'end_frame'"),
    (dict(fill_value=[1, 2]), "'fill_value' must have 1 value or one per channel"),
    (dict(fill_value=[256]), r"'fill_value' values must be in \[0, 255\]"),
    (dict(pad_mode="wrap"), "'pad_mode' must be one of"),
    (dict(stride=0), "'stride' must be positive"),
    (dict(start_frame=12), r"'start_frame' is 12, out of bounds for the input: expected \[0, 12\)"),
    (dict(start_frame=5, end_frame=5), r"'end_frame' \(5\) must be greater than start_frame \(5\)"),
    (dict(sequence_length=-1), "'sequence_length' must not be negative"),
    (dict(frames=[3, 12], pad_mode="none"), "frame 12 is out of bounds for the input"),
    (dict(start_frame=-1, sequence_length=3, pad_mode="none"), "frame -1 is out of bounds"),
])
def test_argument_errors(videos, kw, match):
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=match):
        ndd.decoders.video(ndd.tensor(videos["vp9"]), **kw)


@pytest.fixture
def sync():
    with ndd.EvalMode.sync_cpu:
        yield


def test_input_errors_name_the_sample(videos, sync):
    with pytest.raises(ValueError, match=r"decoders.video.*sample 1.*not a video file"):
        ndd.decoders.video(ndd.batch([videos["vp9"], np.arange(500, dtype=np.uint8)]))
    with pytest.raises(ValueError, match="the input is empty"):
        ndd.decoders.video(ndd.tensor(np.zeros(0, np.uint8)))
    with pytest.raises(ValueError, match="expects encoded videos as uint8"):
        ndd.decoders.video(ndd.tensor(videos["vp9"].astype(np.float32)))
    with pytest.raises(ValueError, match="1-D uint8"):
        ndd.decoders.video(ndd.tensor(videos["vp9"][:100].reshape(2, 50)))
    with pytest.raises(RuntimeError, match="'stride' must be positive"):  # (DALI's type for all of these)
        ndd.decoders.video(ndd.tensor(videos["vp9"]), stride=-2)
