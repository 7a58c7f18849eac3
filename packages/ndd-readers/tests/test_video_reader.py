"""ndd.experimental.readers.Video: sequences, padding, labels, frame numbers, timestamps and
pixels, checked against PyAV's own sequential decode and the documented enumeration rule."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

import ndd

av = pytest.importorskip("av")

# (relative path, frames, width, height, codec, pixel format, fps, gop)
VIDEOS = [
    ("a/x.webm", 19, 32, 24, "libvpx-vp9", "yuv420p", 25, 6),
    ("a/y.mkv", 11, 40, 32, "mjpeg", "yuvj420p", 25, None),
    ("b/z.webm", 14, 24, 16, "libvpx-vp9", "yuv420p", 30, 5),
]


def _encode(path: str, n: int, w: int, h: int, codec: str, pix: str, fps: int, gop: int | None) -> None:
    with av.open(path, "w") as c:
        s = c.add_stream(codec, rate=fps)
        s.width, s.height, s.pix_fmt = w, h, pix
        if gop:
            s.codec_context.gop_size = gop
        for i in range(n):  # every frame looks different: a moving ramp and a per-frame level
            img = np.zeros((h, w, 3), np.uint8)
            img[..., 0] = (np.arange(w) * 6 + i * 17) % 256
            img[..., 1] = (np.arange(h)[:, None] * 7) % 256
            img[..., 2] = (i * 23) % 256
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def _reference(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PyAV's sequential decode (RGB by swscale, Y planes) and the frames' pts in seconds."""
    with av.open(path) as c:
        s = c.streams.video[0]
        rgb, luma, ts = [], [], []
        for f in c.decode(s):
            rgb.append(f.to_ndarray(format="rgb24"))
            p = f.planes[0]
            luma.append(np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width].copy())
            ts.append(float(f.pts * s.time_base))
    return np.stack(rgb), np.stack(luma), np.array(ts)


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("videos")
    refs = {}
    for rel, *spec in VIDEOS:
        path = str(root / rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _encode(path, *spec)
        refs[path] = _reference(path)
    (root / "top.webm").write_bytes(open(str(root / "a/x.webm"), "rb").read())  # outside the label dirs
    return {"root": str(root), "refs": refs, "paths": [str(root / rel) for rel, *_ in VIDEOS]}


def expected_starts(n: int, length: int, stride: int, step: int, padded: bool) -> list[int]:
    """The documented rule: a sequence starts every `step` frames while length*stride frames
    fit; with padding one more if it starts inside the video."""
    out = [s for s in range(0, n, step) if s + length * stride <= n]
    nxt = out[-1] + step if out else 0
    if padded and nxt < n:
        out.append(nxt)
    return out


def epoch(reader: ndd.Reader, batch_size: int = 1) -> list[list[np.ndarray]]:
    rows = []
    for out in reader.next_epoch(batch_size=batch_size):
        for i in range(out[0].batch_size):
            rows.append([np.asarray(o.tensors[i]) for o in out])
    return rows


def identify(frames: np.ndarray, ref: np.ndarray) -> list[int]:
    """Which reference frame each decoded frame is (closest by mean abs difference); checks
    that it is close (swscale's RGB differs from DALI's BT.601 by ~3.5 levels on average) and
    that every other frame is much further (consecutive frames differ by tens of levels)."""
    out = []
    for f in frames:
        d = np.abs(ref.astype(np.int16) - f.astype(np.int16)).mean(axis=(1, 2, 3))
        k = int(np.argmin(d))
        assert d[k] < 6 and np.partition(d, 1)[1] > 3 * d[k], d
        out.append(k)
    return out


def test_signature_matches_dali() -> None:
    names = list(inspect.signature(ndd.experimental.readers.Video).parameters)
    assert names == [
        "max_batch_size", "name", "device", "num_inputs", "dont_use_mmap", "enable_frame_num",
        "enable_timestamps", "file_list", "file_list_format", "file_list_include_end", "file_list_rounding",
        "file_root", "filenames", "fill_value", "image_type", "initial_fill", "labels", "lazy_init",
        "num_shards", "pad_last_batch", "pad_mode", "prefetch_queue_depth", "random_shuffle", "read_ahead",
        "seed", "sequence_length", "shard_id", "skip_cached_images", "step", "stick_to_shard", "stride",
        "tensor_init_bytes", "uniform_sample", "enable_checkpointing"]
    p = inspect.signature(ndd.experimental.readers.Video).parameters
    assert p["sequence_length"].default is inspect.Parameter.empty
    assert (p["step"].default, p["stride"].default, p["pad_mode"].default) == (-1, 1, "none")
    assert "Video" in dir(ndd.experimental.readers) and "readers" in dir(ndd.experimental)


@pytest.mark.parametrize("length,stride,step", [(4, 1, -1), (3, 2, 2), (1, 3, 1), (5, 1, 4)])
def test_sequences_frames_and_timestamps(videos: dict, length: int, stride: int, step: int) -> None:
    r = ndd.experimental.readers.Video(filenames=videos["paths"], sequence_length=length, stride=stride,
                                       step=step, enable_frame_num="sequence", enable_timestamps=True)
    rows = epoch(r)
    want = []
    for path in videos["paths"]:
        n = len(videos["refs"][path][0])
        for s in expected_starts(n, length, stride, step if step > 0 else length * stride, False):
            want.append((path, [s + j * stride for j in range(length)]))
    assert len(rows) == len(want) == r.get_metadata()["epoch_size"]
    for (path, idx), (video, frame_num, ts) in zip(want, rows):
        rgb, _, stamps = videos["refs"][path]
        assert video.dtype == np.uint8 and video.shape == (length,) + rgb.shape[1:]
        assert frame_num.dtype == np.int32 and frame_num.tolist() == idx
        assert ts.dtype == np.float64 and np.array_equal(ts, stamps[idx])
        assert identify(video, rgb) == idx


def test_outputs_layout_labels_and_source_info(videos: dict) -> None:
    r = ndd.experimental.readers.Video(file_root=videos["root"], sequence_length=5, enable_frame_num=True)
    out = next(iter(r.next_epoch(batch_size=3)))
    assert len(out) == 3 and out[0].layout == "FHWC"
    assert out[1].dtype == ndd.int32 and np.asarray(out[1].tensors[0]).shape == (1,)
    assert np.asarray(out[2].tensors[0]).shape == (1,)  # enable_frame_num=True: the first frame
    info = ndd.get_property(out[0], key="source_info")
    assert bytes(np.asarray(info.tensors[0])).decode() == videos["paths"][0]
    # file_root: the sub-directories' files, labelled by sorted directory; top.webm is not read
    rows = epoch(ndd.experimental.readers.Video(file_root=videos["root"], sequence_length=5,
                                                enable_frame_num="scalar"))
    got = [(int(lab[0]), int(fn[0])) for _, lab, fn in rows]
    assert got == [(0, 0), (0, 5), (0, 10), (0, 0), (0, 5), (1, 0), (1, 5)]
    # filenames: a label output only when labels are given
    rows = epoch(ndd.experimental.readers.Video(filenames=videos["paths"][1:], labels=[7, -2], sequence_length=6))
    assert [int(lab[0]) for _, lab in rows] == [7, -2, -2]
    assert len(epoch(ndd.experimental.readers.Video(filenames=videos["paths"][1], sequence_length=6))[0]) == 1


@pytest.mark.parametrize("mode,expect", [
    ("constant", lambda i, n: -1), ("edge", lambda i, n: n - 1), ("repeat", lambda i, n: n - 1),
    ("reflect_1001", lambda i, n: 2 * n - 1 - i), ("symmetric", lambda i, n: 2 * n - 1 - i),
    ("reflect_101", lambda i, n: 2 * n - 2 - i), ("reflect", lambda i, n: 2 * n - 2 - i)])
def test_padding(videos: dict, mode: str, expect) -> None:
    path = videos["paths"][1]  # 11 frames
    rgb, _, stamps = videos["refs"][path]
    n = len(rgb)
    r = ndd.experimental.readers.Video(filenames=[path], sequence_length=5, step=4, pad_mode=mode,
                                       fill_value=[10, 20, 30], enable_frame_num="sequence", enable_timestamps=True)
    rows = epoch(r)
    assert [fn[0] for _, fn, _ in rows] == expected_starts(n, 5, 1, 4, True) == [0, 4, 8]
    video, fn, ts = rows[-1]
    idx = [i if i < n else expect(i, n) for i in range(8, 13)]
    assert fn.tolist() == idx
    assert np.array_equal(ts, [stamps[i] if i >= 0 else -1.0 for i in idx])
    for k, i in enumerate(idx):
        if i < 0:
            assert (video[k] == [10, 20, 30]).all()
        else:
            assert identify(video[k:k + 1], rgb) == [i]


def test_uniform_sample(videos: dict) -> None:
    rows = epoch(ndd.experimental.readers.Video(filenames=videos["paths"], sequence_length=15, uniform_sample=True,
                                                stride=4, pad_mode="edge", enable_frame_num="sequence"))
    assert len(rows) == 3
    for path, (video, fn) in zip(videos["paths"], rows):
        n = len(videos["refs"][path][0])
        want = [int(np.floor(x + 0.5)) for x in np.linspace(0, n - 1, 15)]  # round half up
        assert fn.tolist() == want and identify(video, videos["refs"][path][0]) == want


def test_file_list(videos: dict, tmp_path) -> None:
    x, y, z = videos["paths"]
    lst = tmp_path / "list.txt"
    # frames: [start, end), negative counts from the end; start without end: empty (skipped, as DALI)
    lst.write_text(f"{y} 3\n{z} 4 2 9\n{x} 1 -8 -2\n{x} 2 5\n")
    with pytest.warns(UserWarning, match="empty frame range"):
        r = ndd.experimental.readers.Video(file_list=str(lst), file_list_format="frames", sequence_length=2,
                                           enable_frame_num=True)
    got = [(int(lab[0]), int(fn[0])) for _, lab, fn in epoch(r)]
    assert got == [(3, 0), (3, 2), (3, 4), (3, 6), (3, 8), (4, 2), (4, 4), (4, 6), (1, 11), (1, 13), (1, 15)]
    # timestamps (z at 30 fps, pts in ms: 0, 33, 67, 100, ...): start rounds down, end up (exclusive)
    lst.write_text(f"{z} 0 0.05 0.21\n{z} 1 0.1 0.3\n")
    for rounding, want in [("start_down_end_up", [1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 8]),
                           ("start_up_end_down", [2, 3, 4, 5, 3, 4, 5, 6, 7, 8]),
                           ("all_up", [2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 8]),
                           ("all_down", [1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8])]:
        r = ndd.experimental.readers.Video(file_list=str(lst), sequence_length=1, file_list_rounding=rounding,
                                           enable_frame_num=True)
        assert [int(fn[0]) for _, _, fn in epoch(r)] == want, rounding


def test_ycbcr(videos: dict) -> None:
    path = videos["paths"][0]
    _, luma, _ = videos["refs"][path]
    (video, fn), = epoch(ndd.experimental.readers.Video(filenames=[path], sequence_length=3, step=30,
                                                       image_type=ndd.types.YCbCr, enable_frame_num="sequence"))
    assert np.array_equal(video[..., 0], luma[fn])  # the Y plane as decoded


def test_shards_and_checkpoint(videos: dict) -> None:
    def make(**kw):
        return ndd.experimental.readers.Video(filenames=videos["paths"], sequence_length=3, enable_frame_num=True,
                                              **kw)
    everything = [int(fn[0]) for _, fn in epoch(make())]
    shards = [[int(fn[0]) for _, fn in epoch(make(num_shards=2, shard_id=k))]
              for k in range(2)]
    assert shards[0] + shards[1] == everything
    r = make(random_shuffle=True, seed=5, enable_checkpointing=True)
    it = r.next_epoch(batch_size=2)
    next(it)
    state = r.get_state()
    rest = [np.asarray(o[1].tensors[0]).tolist() for o in it]
    r2 = make(random_shuffle=True, seed=5)
    r2.set_state(state)
    assert [np.asarray(o[1].tensors[0]).tolist() for o in r2.next_epoch(batch_size=2)] == rest


def test_call_pad_mode(videos: dict) -> None:
    r = ndd.experimental.readers.Video(filenames=[videos["paths"][1]], sequence_length=4, step=8, pad_mode="constant",
                                       enable_frame_num="sequence")
    out = r(batch_size=2, pad_mode=["none", "edge"])
    assert [np.asarray(t).tolist() for t in out[1].tensors] == [[0, 1, 2, 3], [8, 9, 10, 10]]


def test_errors(videos: dict, tmp_path) -> None:
    V = ndd.experimental.readers.Video
    x = videos["paths"][0]
    with pytest.raises(ValueError, match="exactly one of"):
        V(sequence_length=2)
    with pytest.raises(ValueError, match="exactly one of"):
        V(filenames=[x], file_root=videos["root"], sequence_length=2)
    with pytest.raises(ValueError, match="sequence_length"):
        V(filenames=[x], sequence_length=0)
    with pytest.raises(ValueError, match="pad_mode"):
        V(filenames=[x], sequence_length=2, pad_mode="wrap")
    with pytest.raises(ValueError, match="enable_frame_num"):
        V(filenames=[x], sequence_length=2, enable_frame_num="all")
    with pytest.raises(ValueError, match="fill_value"):
        V(filenames=[x], sequence_length=2, fill_value=[1, 2])
    with pytest.raises(ValueError, match="labels"):
        V(filenames=[x], labels=[1, 2], sequence_length=2)
    with pytest.raises(ValueError, match="no file holds a whole sequence"):
        V(filenames=[x], sequence_length=50)
    with pytest.warns(UserWarning, match="does not exist"), pytest.raises(ValueError, match="no file holds"):
        V(filenames=[str(tmp_path / "missing.webm")], sequence_length=2)  # skipped, as DALI does
    bad = tmp_path / "bad.webm"
    bad.write_bytes(b"not a video at all")
    with pytest.warns(UserWarning, match="skipping"):
        r = V(filenames=[str(bad), x], sequence_length=19)
    assert len(epoch(r)) == 1


# -- the legacy ndd.readers.Video (DALI: GPU only; here decoded on the host) -----------------

def legacy_starts(n: int, length: int, stride: int, step: int, pad: bool) -> list[int]:
    """The documented legacy rule: the sequence's span 1 + (length-1)*stride must fit; with
    pad_sequences, the later starts inside the video follow."""
    span = 1 + (length - 1) * stride
    full = [s for s in range(0, n, step) if s + span <= n]
    rest = [s for s in range(0, n, step) if s + span > n] if pad else []
    return full + rest


def test_legacy_signature() -> None:
    names = list(inspect.signature(ndd.readers.Video).parameters)
    assert names == [
        "max_batch_size", "name", "device", "num_inputs", "additional_decode_surfaces", "channels",
        "dont_use_mmap", "dtype", "enable_frame_num", "enable_timestamps", "file_list", "file_list_frame_num",
        "file_list_include_preceding_frame", "file_root", "filenames", "image_type", "initial_fill", "labels",
        "lazy_init", "normalized", "num_shards", "pad_last_batch", "pad_sequences", "prefetch_queue_depth",
        "random_shuffle", "read_ahead", "seed", "sequence_length", "shard_id", "skip_cached_images",
        "skip_vfr_check", "step", "stick_to_shard", "stride", "tensor_init_bytes", "enable_checkpointing"]


@pytest.mark.parametrize("length,stride,step,pad", [(4, 2, -1, True), (3, 3, 2, False), (5, 1, 3, True)])
def test_legacy_sequences(videos: dict, length: int, stride: int, step: int, pad: bool) -> None:
    r = ndd.readers.Video(filenames=videos["paths"], labels=[], sequence_length=length, stride=stride, step=step,
                          pad_sequences=pad, enable_frame_num="sequence", enable_timestamps=True)
    rows = epoch(r)
    want = []
    for f, path in enumerate(videos["paths"]):
        n = len(videos["refs"][path][0])
        for s in legacy_starts(n, length, stride, step if step > 0 else length * stride, pad):
            want.append((f, path, [s + j * stride if s + j * stride < n else -1 for j in range(length)]))
    assert len(rows) == len(want)
    for (f, path, idx), (video, label, fn, ts) in zip(want, rows):
        rgb, _, stamps = videos["refs"][path]
        assert label.tolist() == [f] and fn.tolist() == idx  # labels=[]: the files' indices
        assert np.array_equal(ts, [stamps[i] if i >= 0 else -1.0 for i in idx]) and ts.dtype == np.float64
        real = [i for i in idx if i >= 0]
        assert identify(video[:len(real)], rgb) == real and not video[len(real):].any()


def test_legacy_dtype_and_labels(videos: dict) -> None:
    path = videos["paths"][1]
    kw = dict(filenames=[path], sequence_length=3, step=4)
    (u8,), _, _ = epoch(ndd.readers.Video(**kw, enable_frame_num=True))  # no labels: the frames only
    (f32, lab), _, _ = epoch(ndd.readers.Video(**kw, labels=[4], dtype=ndd.types.FLOAT, normalized=True))
    assert u8.dtype == np.uint8 and f32.dtype == np.float32 and lab.tolist() == [4]
    np.testing.assert_allclose(f32, u8 / 255.0, rtol=1e-6)
    (raw, _), _, _ = epoch(ndd.readers.Video(**kw, labels=[4], dtype=ndd.types.FLOAT))
    assert np.array_equal(raw, u8.astype(np.float32))


def test_legacy_file_list(videos: dict, tmp_path) -> None:
    x, y, z = videos["paths"]  # z: 14 frames at 30 fps
    lst = tmp_path / "list.txt"
    lst.write_text(f"{z} 5 2 9\n{z} 6 -6 0\n{y} 7\n")
    r = ndd.readers.Video(file_list=str(lst), file_list_frame_num=True, sequence_length=2, enable_frame_num=True)
    got = [(int(lab[0]), int(fn[0])) for _, lab, fn in epoch(r)]
    assert got == [(5, 2), (5, 4), (5, 6), (6, 8), (6, 10), (6, 12), (7, 0), (7, 2), (7, 4), (7, 6), (7, 8)]
    lst.write_text(f"{z} 0 0.05 0.31\n")  # 1.5 and 9.3 frames: start rounds up, end down (or the other way)
    for preceding, want in [(False, [2, 3, 4, 5, 6, 7, 8]), (True, [1, 2, 3, 4, 5, 6, 7, 8, 9])]:
        r = ndd.readers.Video(file_list=str(lst), sequence_length=1, file_list_include_preceding_frame=preceding,
                              enable_frame_num=True)
        assert [int(fn[0]) for _, _, fn in epoch(r)] == want
    lst.write_text(f"{z} 0 5 3\n")
    with pytest.raises(ValueError, match="after the end"):
        ndd.readers.Video(file_list=str(lst), file_list_frame_num=True, sequence_length=1)
    lst.write_text(f"{z} 0 2 40\n")
    with pytest.raises(ValueError, match="past the end"):
        ndd.readers.Video(file_list=str(lst), file_list_frame_num=True, sequence_length=1)


def test_legacy_errors(videos: dict) -> None:
    x = videos["paths"][0]
    with pytest.raises(ValueError, match="channels"):
        ndd.readers.Video(filenames=[x], sequence_length=2, channels=4)
    with pytest.raises(ValueError, match="dtype"):
        ndd.readers.Video(filenames=[x], sequence_length=2, dtype=ndd.types.INT16)
    with pytest.raises(ValueError, match="no valid sequences"):
        ndd.readers.Video(filenames=[x], sequence_length=20)
    with pytest.raises(ValueError, match="exactly one of"):
        ndd.readers.Video(sequence_length=2)
    with pytest.raises(ValueError, match="does not exist"):
        ndd.readers.Video(filenames=[x + ".missing"], sequence_length=2)


def test_video_resize(videos: dict) -> None:
    dali_names = [
        "max_batch_size", "name", "device", "num_inputs", "additional_decode_surfaces", "antialias", "channels",
        "dont_use_mmap", "dtype", "enable_frame_num", "enable_timestamps", "file_list", "file_list_frame_num",
        "file_list_include_preceding_frame", "file_root", "filenames", "image_type", "initial_fill", "interp_type",
        "labels", "lazy_init", "mag_filter", "max_size", "min_filter", "minibatch_size", "mode", "normalized",
        "num_shards", "pad_last_batch", "pad_sequences", "prefetch_queue_depth", "random_shuffle", "read_ahead",
        "resize_longer", "resize_shorter", "resize_x", "resize_y", "resize_z", "roi_end", "roi_relative",
        "roi_start", "seed", "sequence_length", "shard_id", "size", "skip_cached_images", "skip_vfr_check", "step",
        "stick_to_shard", "stride", "subpixel_scale", "temp_buffer_hint", "tensor_init_bytes",
        "enable_checkpointing"]
    assert list(inspect.signature(ndd.readers.VideoResize).parameters) == dali_names
    kw = dict(filenames=videos["paths"][1:], labels=[], sequence_length=3, step=5, enable_frame_num=True)
    plain = epoch(ndd.readers.Video(**kw))
    resized = epoch(ndd.readers.VideoResize(**kw, resize_shorter=12, interp_type=ndd.types.INTERP_NN))
    assert len(plain) == len(resized) == 5
    for (v, lab, fn), (r, lab2, fn2) in zip(plain, resized):
        assert lab.tolist() == lab2.tolist() and fn.tolist() == fn2.tolist()
        frames = ndd.as_batch(list(v), layout="HWC")
        want = np.stack([np.asarray(t) for t in ndd.resize(frames, resize_shorter=12,
                                                           interp_type=ndd.types.INTERP_NN).tensors])
        assert r.shape[1] == 12 and np.array_equal(r, want)  # each frame resized as ndd.resize does
    out = next(iter(ndd.readers.VideoResize(**kw, size=[8, 10]).next_epoch(batch_size=2)))
    assert out[0].layout == "FHWC" and [np.asarray(t).shape for t in out[0].tensors] == [(3, 8, 10, 3)] * 2
    with pytest.raises(ValueError, match="mutually exclusive"):
        ndd.readers.VideoResize(**kw, resize_shorter=8, resize_longer=9)
