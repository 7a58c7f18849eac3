"""``ndd.experimental.readers.Video``: sequences of frames decoded from video files."""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ndd.plugins import VideoFile
from ndd.types import DALIImageType

from ._base import Column, Dataset, StreamReader, flag, integer, path_list
from ._file import int_labels

PAD_MODES = {"none": "none", "constant": "constant", "edge": "edge", "repeat": "edge",
             "reflect_1001": "reflect_1001", "symmetric": "reflect_1001",
             "reflect_101": "reflect_101", "reflect": "reflect_101"}
FRAME_NUM_MODES = {"none": "none", "scalar": "scalar", "sequence": "sequence"}
ROUNDINGS = ("start_down_end_up", "start_up_end_down", "all_up", "all_down")
LIST_FORMATS = ("timestamps", "frames")


def canonical_pad_mode(value: Any, arg: str = "pad_mode") -> str:
    """The canonical name of a padding mode (aliases resolved); ValueError otherwise."""
    if not isinstance(value, str) or value.lower() not in PAD_MODES:
        raise ValueError(f"`{arg}` must be one of {sorted(PAD_MODES)}, got {value!r}")
    return PAD_MODES[value.lower()]


def sequence_starts(n: int, length: int, stride: int, step: int, padded: bool) -> list[int]:
    """The first frames of the sequences of a range of ``n`` frames: every ``step`` frames
    while ``length * stride`` frames fit from the start; with padding, one more sequence
    after those when it starts inside the range (as DALI 2.4 enumerates them)."""
    starts, s = [], 0
    while s + length * stride <= n:
        starts.append(s)
        s += step
    if padded and s < n:
        starts.append(s)
    return starts


def uniform_indices(n: int, length: int) -> np.ndarray:
    """``length`` frames spread evenly over ``n``: ``floor(linspace(0, n - 1, length) + 0.5)``."""
    return np.floor(np.linspace(0, n - 1, length) + 0.5).astype(np.int64)


def padded_indices(local: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Frame positions (within a range of ``n`` frames) for positions ``local`` that may
    run past its end, padded as ``mode`` says; -1 marks a constant (fill) frame."""
    out = local.copy()
    over = local >= n
    if not over.any():
        return out
    if mode == "constant":
        out[over] = -1
    elif mode == "edge":
        out[over] = n - 1
    elif mode == "reflect_1001":
        r = local[over] % (2 * n)
        out[over] = np.where(r < n, r, 2 * n - 1 - r)
    elif mode == "reflect_101":
        if n == 1:
            out[over] = 0
        else:
            r = local[over] % (2 * n - 2)
            out[over] = np.where(r < n, r, 2 * n - 2 - r)
    else:  # "none": the sequences were enumerated so that this cannot happen
        raise AssertionError(mode)
    return out


def _time_to_frame(vf: VideoFile, t: float, up: bool) -> int:
    """The frame a file_list time lands on, as DALI 2.4 finds it: the time (read as a
    float32) in the stream's time units, floored, then the first frame at or after it
    (``up``) or the last one at or before it; 0 when there is none or the time is past the
    last frame."""
    pts, tb = vf.pts, vf.time_base
    if pts is not None and tb > 0:
        p = math.floor(float(np.float32(t)) / tb)
    else:  # a stream without timestamps: compare seconds
        pts, p = vf.timestamps, float(np.float32(t))
    if p > pts[-1]:
        return 0
    if up:
        return int(np.searchsorted(pts, p, side="left"))
    return max(int(np.searchsorted(pts, p, side="right")) - 1, 0)


class ListEntry:
    """One file to read and its label; ``span`` (start, end) from a file_list line, if any."""

    __slots__ = ("label", "line", "path", "span")

    def __init__(self, path: str, label: int | None, span: tuple[float, float] | None = None,
                 line: str | None = None) -> None:
        self.path, self.label, self.span, self.line = path, label, span, line


def parse_video_list(file_list: str) -> list[ListEntry]:
    """``file label [start [end]]`` lines (paths as written); ValueError naming the line."""
    try:
        with open(file_list, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"file_list {file_list!r} cannot be read: {e.strerror or e}") from None
    out = []
    for lineno, line in enumerate(lines, 1):
        parts = line.split()
        if not parts:
            continue
        where = f"{file_list}:{lineno}"
        if not 2 <= len(parts) <= 4:
            raise ValueError(f"{where}: expected 'file label [start [end]]', got {line!r}")
        try:
            label = int(parts[1])
            nums = [float(v) for v in parts[2:]]
        except ValueError:
            raise ValueError(f"{where}: expected an integer label and numeric start/end, got {line!r}") from None
        span = None if not nums else (nums[0], nums[1] if len(nums) > 1 else 0.0)
        out.append(ListEntry(parts[0], label, span, where))
    return out


def frame_range(vf: VideoFile, span: tuple[float, float] | None, fmt: str, rounding: str) -> tuple[int, int]:
    """The frames ``[start, end)`` of a file_list line (the whole video without a span)."""
    n = vf.num_frames
    if span is None:
        return 0, n
    s, e = span
    if fmt == "frames":
        a, b = int(s), int(e)
        a = a + n if a < 0 else a
        b = b + n if b < 0 else b
        return a, min(b, n)
    start_up = rounding in ("start_up_end_down", "all_up")
    end_up = rounding in ("start_down_end_up", "all_up")
    return _time_to_frame(vf, s, start_up), _time_to_frame(vf, e, end_up)


def list_sources(op: str, file_root: str, file_list: str, filenames: list[str], labels: list[int] | None,
                 parse: Any) -> list[ListEntry]:
    """The files to read (with labels and file_list spans) from exactly one of ``file_root``
    (the files of its sub-directories, labelled by sorted directory), ``file_list`` (read by
    ``parse``) and ``filenames`` (with ``labels``, if given)."""
    given = [a for a, v in (("file_root", file_root), ("file_list", file_list), ("filenames", filenames)) if v]
    if len(given) != 1:
        raise ValueError(f"{op} reader needs exactly one of `file_root`, `file_list` and `filenames`"
                         + (f"; got {' and '.join(given)}" if given else ""))
    if labels is not None and not filenames:
        raise ValueError("`labels` needs `filenames`")
    if filenames:
        if labels is not None and len(labels) != len(filenames):
            raise ValueError(f"`labels` has {len(labels)} entries but `filenames` has {len(filenames)}")
        return [ListEntry(p, None if labels is None else labels[k]) for k, p in enumerate(filenames)]
    if file_list:
        return parse(file_list)
    if not os.path.isdir(file_root):
        raise ValueError(f"file_root {file_root!r} is not a directory")
    out = []
    for label, d in enumerate(sorted(e.name for e in os.scandir(file_root) if e.is_dir())):
        full = os.path.join(file_root, d)
        out.extend(ListEntry(os.path.join(full, n), label)
                   for n in sorted(e.name for e in os.scandir(full) if e.is_file()))
    return out


class VideoDataset(Dataset):
    """One sample per sequence: ``(file, first frame)``; outputs the frames (F, H, W, 3)
    uint8, then the label, frame numbers and timestamps as asked."""

    def __init__(self, files: list[str], names: list[str], labels: list[int] | None,
                 ranges: list[tuple[int, int]], timestamps: list[np.ndarray], seqs: list[tuple[int, int]],
                 opts: dict[str, Any]) -> None:
        self.files, self.names_given, self.file_labels = files, names, labels
        self.ranges, self.file_ts, self.seqs = ranges, timestamps, seqs
        self.opts = opts
        n_out = 1 + (labels is not None) + (opts["frame_num"] != "none") + opts["timestamps"]
        self.layouts = ("FHWC",) + (None,) * (n_out - 1)
        self.groups = None
        self._lock = threading.Lock()
        self._open: tuple[int, VideoFile] | None = None  # the last video read (sequences of a file are adjacent)

    def __len__(self) -> int:
        return len(self.seqs)

    def describe(self, i: int) -> str:
        f, s = self.seqs[i]
        return f"{self.files[f]} (sequence {i}, from frame {s})"

    def source_info(self, i: int, output: int) -> str:
        return self.names_given[self.seqs[i][0]] if output == 0 else ""

    def identity(self, i: int) -> bytes:
        f, s = self.seqs[i]
        with open(self.files[f], "rb") as fh:
            return f"{os.fstat(fh.fileno()).st_size}:{s}:".encode() + fh.read(1 << 16)

    def frame_indices(self, i: int, mode: str | None = None) -> np.ndarray:
        """The frames of sequence ``i`` in the file (-1: a constant padding frame)."""
        f, s = self.seqs[i]
        a, b = self.ranges[f]
        o = self.opts
        if o["uniform_sample"]:
            return a + uniform_indices(b - a, o["sequence_length"])
        local = s - a + np.arange(o["sequence_length"], dtype=np.int64) * o["stride"]
        idx = padded_indices(local, b - a, mode or o["pad_mode"])
        return np.where(idx >= 0, idx + a, -1)

    def _video(self, f: int) -> VideoFile:
        if self._open is not None and self._open[0] == f:
            return self._open[1]
        if self._open is not None:
            self._open[1].close()
            self._open = None
        vf = VideoFile(self.files[f])
        self._open = (f, vf)
        return vf

    def read(self, i: int, mode: str | None = None) -> tuple[np.ndarray, ...]:
        o = self.opts
        f = self.seqs[i][0]
        idx = self.frame_indices(i, mode)
        real = idx[idx >= 0]
        with self._lock:
            try:
                frames = self._video(f).decode(real.tolist(), o["image_type"])
            except (ValueError, IndexError) as e:
                raise ValueError(f"{self.describe(i)}: {e}") from None
        if len(real) == len(idx):
            video = frames
        else:
            video = np.empty((len(idx),) + frames.shape[1:], np.uint8)
            video[idx >= 0] = frames
            video[idx < 0] = o["fill_value"]
        if o.get("dtype") == np.float32:  # the legacy reader's FLOAT output, 0..1 when normalized
            video = video.astype(np.float32) * np.float32(1 / 255) if o.get("normalized") \
                else video.astype(np.float32)
        out = [video]
        if self.file_labels is not None:
            out.append(np.array([self.file_labels[f]], np.int32))
        if o["frame_num"] == "scalar":
            out.append(np.array([idx[0]], np.int32))
        elif o["frame_num"] == "sequence":
            out.append(idx.astype(np.int32))
        if o["timestamps"]:
            ts = self.file_ts[f]
            out.append(np.where(idx >= 0, ts[np.maximum(idx, 0)], -1.0))
        return tuple(out)

    def close(self) -> None:
        with self._lock:
            if self._open is not None:
                self._open[1].close()
                self._open = None


def _image_type(value: Any) -> str:
    names = {DALIImageType.RGB: "RGB", DALIImageType.YCbCr: "YCbCr"}
    if isinstance(value, str):
        for k, v in names.items():
            if value.lower() in (v.lower(), k.name.lower()):
                return v
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) in names:
        return names[DALIImageType(int(value))]
    raise ValueError(f"`image_type` must be DALIImageType.RGB or DALIImageType.YCbCr, got {value!r}")


def _fill_value(value: Any) -> np.ndarray:
    vals = [value] if isinstance(value, (int, np.integer)) else list(value) \
        if isinstance(value, (list, tuple, np.ndarray)) else None
    if not vals or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= 255
                       for v in vals):
        raise ValueError(f"`fill_value` must be an integer or a list of integers in [0, 255], got {value!r}")
    if len(vals) not in (1, 3):
        raise ValueError(f"`fill_value` must have 1 value or one per channel (3), got {len(vals)}")
    return np.array(vals, np.uint8)


def _frame_num_mode(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "scalar" if value else "none"
    if isinstance(value, str) and value.lower() in FRAME_NUM_MODES:
        return FRAME_NUM_MODES[value.lower()]
    raise ValueError(f"`enable_frame_num` must be 'none', 'scalar', 'sequence' or a bool, got {value!r}")


class _DeviceOutputs(StreamReader):
    """Decodes on the host; with ``device="gpu"`` (DALI's GPU backend) the outputs are then
    copied to the GPU (which needs ndd's CUDA plugin)."""

    _out_device = "cpu"

    @staticmethod
    def _host_device(device: str) -> str:
        if device not in ("cpu", "gpu"):
            raise ValueError(f'`device` must be "cpu" or "gpu", got {device!r}')
        return "cpu"

    def _post(self, outputs: Any) -> Any:
        """The outputs as the loop receives them (a hook run on the loop's thread)."""
        return outputs

    def _moved(self, outputs: Any) -> Any:
        if outputs is None:
            return outputs
        outputs = self._post(outputs)
        if self._out_device != "gpu":
            return outputs
        return tuple(o.gpu() for o in outputs)

    def _deliver(self, fetch: Any) -> Any:
        for outputs in super()._deliver(fetch):
            yield self._moved(outputs)

    def _run(self, batch_size: int | None, **args: Any) -> Any:
        return self._moved(super()._run(batch_size, **args))


class Video(_DeviceOutputs):
    """Reads sequences of ``sequence_length`` frames from video files (any codec FFmpeg
    decodes, through PyAV): yields ``video`` (F, H, W, 3) uint8 "FHWC", then ``labels``
    (int32 (1,); with ``file_root``, ``file_list``, or ``labels`` given with ``filenames``),
    ``frame_num`` (int32, (1,) or (F,), per ``enable_frame_num``) and ``timestamps``
    (float64 seconds (F,), with ``enable_timestamps``).

    A sample is one sequence; sequences never cross files. In a range of ``n`` frames a
    sequence starts every ``step`` frames (default ``sequence_length * stride``) while
    ``sequence_length * stride`` frames fit; with ``pad_mode`` other than 'none', one more
    sequence follows, its frames past the end padded (constant frames have frame number and
    timestamp -1). ``uniform_sample`` gives one sequence per file instead. ``file_root``
    reads the files of its sub-directories (labels 0, 1, ... in sorted order); relative
    paths are taken from the working directory; missing files, files FFmpeg cannot open
    and empty file_list ranges are skipped with a warning. ``file_list`` lines are
    ``file label [start [end]]``: frames ``[start, end)`` ('frames'; negative from the end)
    or seconds ('timestamps', with ``file_list_rounding``); a start without an end reads
    nothing, and ``file_list_include_end`` has no effect, both as in DALI 2.4. With
    ``device="gpu"`` the outputs are copied to the GPU. See :class:`StreamReader` for the
    epoch, shard, shuffle and state rules.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        dont_use_mmap: bool = False,
        enable_frame_num: str | bool = "none",
        enable_timestamps: bool = False,
        file_list: str | os.PathLike = "",
        file_list_format: str = "timestamps",
        file_list_include_end: bool = True,
        file_list_rounding: str = "start_down_end_up",
        file_root: str | os.PathLike = "",
        filenames: Sequence[str | os.PathLike] | str = (),
        fill_value: int | Sequence[int] = (0,),
        image_type: Any = DALIImageType.RGB,
        initial_fill: int = 1024,
        labels: Sequence[int] | int | None = None,
        lazy_init: bool = False,
        num_shards: int = 1,
        pad_last_batch: bool = False,
        pad_mode: str = "none",
        prefetch_queue_depth: int = 1,
        random_shuffle: bool = False,
        read_ahead: bool = False,
        seed: int = -1,
        sequence_length: int,
        shard_id: int = 0,
        skip_cached_images: bool = False,
        step: int = -1,
        stick_to_shard: bool = False,
        stride: int = 1,
        tensor_init_bytes: int = 1048576,
        uniform_sample: bool = False,
        enable_checkpointing: bool = False,
    ) -> None:
        length = integer(sequence_length, "sequence_length", 1)
        stride = integer(stride, "stride", 1)
        step = integer(step, "step")
        if step == 0:
            raise ValueError("`step` must be positive (or negative for `sequence_length * stride`), got 0")
        self._file_root = os.fspath(file_root)
        self._file_list = os.fspath(file_list)
        self._filenames = [] if isinstance(filenames, (list, tuple)) and not filenames \
            else path_list(filenames, "filenames")
        self._labels = None if labels is None else int_labels(labels)
        if file_list_format not in LIST_FORMATS:
            raise ValueError(f"`file_list_format` must be one of {LIST_FORMATS}, got {file_list_format!r}")
        if file_list_rounding not in ROUNDINGS:
            raise ValueError(f"`file_list_rounding` must be one of {ROUNDINGS}, got {file_list_rounding!r}")
        flag(file_list_include_end, "file_list_include_end")  # (no effect, as measured in DALI 2.4)
        self._list_format, self._rounding = file_list_format, file_list_rounding
        self._opts = dict(
            sequence_length=length, stride=stride, step=step if step > 0 else length * stride,
            pad_mode=canonical_pad_mode(pad_mode), fill_value=_fill_value(fill_value),
            image_type=_image_type(image_type), frame_num=_frame_num_mode(enable_frame_num),
            timestamps=flag(enable_timestamps, "enable_timestamps"),
            uniform_sample=flag(uniform_sample, "uniform_sample"),
        )
        self._out_device = device
        super().__init__(
            max_batch_size, name, self._host_device(device), num_inputs, initial_fill=initial_fill,
            lazy_init=lazy_init, pad_last_batch=pad_last_batch, prefetch_queue_depth=prefetch_queue_depth,
            random_shuffle=random_shuffle, read_ahead=read_ahead, seed=seed, shard_id=shard_id,
            num_shards=num_shards, stick_to_shard=stick_to_shard, skip_cached_images=skip_cached_images,
            dont_use_mmap=dont_use_mmap, tensor_init_bytes=tensor_init_bytes,
            enable_checkpointing=enable_checkpointing,
        )

    _CALL_ARGS = ("pad_mode",)

    def _call_reader(self, indices: list[int], args: dict[str, Any]) -> Any:
        if "pad_mode" not in args:
            return None
        given = args["pad_mode"]
        modes = [canonical_pad_mode(m) for m in given] if isinstance(given, (list, tuple)) else \
            [canonical_pad_mode(given)] * len(indices)
        if len(modes) != len(indices):
            raise ValueError(f"`pad_mode` has {len(modes)} values for a batch of {len(indices)}")
        ds = self._ds

        def read_many(idx: list[int]) -> list[Column]:
            return [list(c) for c in zip(*[ds.read(i, m if m != "none" else None) for i, m in zip(idx, modes)])]
        return read_many

    def _open(self) -> Dataset:
        o = self._opts
        entries = list_sources("Video", self._file_root, self._file_list, self._filenames, self._labels,
                               parse_video_list)

        def starts(n: int) -> list[int]:
            if o["uniform_sample"]:
                return [0]
            return sequence_starts(n, o["sequence_length"], o["stride"], o["step"], o["pad_mode"] != "none")
        ds = build_dataset("Video", entries, bool(self._file_root or self._file_list or self._labels is not None),
                           o, lambda vf, e: frame_range(vf, e.span, self._list_format, self._rounding), starts,
                           skip_unreadable=True)
        if not len(ds):
            raise ValueError("Video reader: no file holds a whole sequence of "
                             f"{o['sequence_length']} frames (stride {o['stride']}); "
                             "pass a pad_mode to read shorter videos")
        return ds


def build_dataset(op: str, entries: list[ListEntry], has_labels: bool, opts: dict[str, Any],
                  range_of: Any, starts_of: Any, skip_unreadable: bool) -> VideoDataset:
    """Index the files of ``entries``: each one's frame range ``range_of(video, entry)`` and
    its sequences, starting at ``starts_of(range length)`` within the range. Files FFmpeg
    cannot open (or that do not exist) are skipped with a warning when ``skip_unreadable``,
    empty ranges always."""
    files, labels, ranges, stamps, seqs = [], [], [], [], []
    for e in entries:
        where = f" ({e.line})" if e.line else ""
        if not os.path.isfile(e.path):
            if not skip_unreadable:
                raise ValueError(f"{op} reader: {e.path}: video file does not exist{where}")
            warnings.warn(f"{op} reader: skipping {e.path}: the file does not exist{where}", stacklevel=3)
            continue
        try:
            vf = VideoFile(e.path)
        except ValueError as err:
            if not skip_unreadable:
                raise ValueError(f"{op} reader: {err}{where}") from None
            warnings.warn(f"{op} reader: skipping {e.path}: {err}", stacklevel=3)
            continue
        with vf:
            a, b = range_of(vf, e)
            if a < 0:
                raise ValueError(f"{op} reader: {e.line}: the start frame is before the beginning of {e.path} "
                                 f"({vf.num_frames} frames)")
            ts = vf.timestamps
        if b <= a:
            warnings.warn(f"{op} reader: empty frame range [{a}, {b}) for {e.path}{where}; skipping it",
                          stacklevel=3)
            continue
        f = len(files)
        files.append(e.path)
        labels.append(e.label)
        ranges.append((a, b))
        stamps.append(ts)
        seqs.extend((f, a + s) for s in starts_of(b - a))
    return VideoDataset(files, list(files), labels if has_labels else None, ranges, stamps, seqs, opts)
