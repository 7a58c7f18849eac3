"""``ndd.readers.Video``: DALI's legacy (GPU-only in DALI) video reader, decoding on the host."""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ndd._dtype import dtype as as_dtype
from ndd.plugins import VideoFile
from ndd.types import DALIDataType, DALIImageType, DALIInterpType

from ._base import Dataset, flag, integer, path_list
from ._file import int_labels
from ._video_reader import (
    ListEntry,
    _DeviceOutputs,
    _frame_num_mode,
    _image_type,
    build_dataset,
    list_sources,
    parse_video_list,
)


def legacy_range(vf: VideoFile, entry: ListEntry, frame_num: bool, preceding: bool) -> tuple[int, int]:
    """The frames ``[start, end)`` of a file_list line as the legacy reader reads it: the
    whole video when start and end are both 0 (or absent); frame numbers (truncated,
    negative from the end, end 0 or less counts from the end) with ``file_list_frame_num``;
    otherwise seconds times the frame rate, start rounded up and end down (the other way
    round with ``file_list_include_preceding_frame``). ValueError for a range outside the
    video or ending before it starts."""
    n = vf.num_frames
    if entry.span is None:
        return 0, n
    start, end = (float(np.float32(v)) for v in entry.span)  # (DALI keeps them as float32)
    if start == 0 and end == 0:
        return 0, n
    if frame_num:
        a = int(start) if start >= 0 else int(n + start)
        b = int(end) if end > 0 else int(n + end)
        what = "frame number"
    else:
        fps = vf.frame_rate
        lo, hi = (math.floor, math.ceil) if preceding else (math.ceil, math.floor)
        a = lo(start * fps) if start >= 0 else n + lo(start * fps)
        b = hi(end * fps) if end > 0 else n + hi(end * fps)
        what = "time"
    where = f"{entry.line}: " if entry.line else ""
    if a > b:
        raise ValueError(f"Video reader: {where}the start {what} is after the end {what} for {entry.path}")
    if a > n or b > n:
        raise ValueError(f"Video reader: {where}the {'start' if a > n else 'end'} {what} is past the end of "
                         f"{entry.path} ({n} frames)")
    return a, b


def legacy_starts(n: int, length: int, stride: int, step: int, pad: bool) -> list[int]:
    """Sequence starts in a range of ``n`` frames: every ``step`` frames while the sequence's
    span (``1 + (length - 1) * stride`` frames) fits; with ``pad``, then every ``step``
    frames while inside the range (those sequences end in zero frames)."""
    span = 1 + (length - 1) * stride
    out, s = [], 0
    while s < n and s + span <= n:
        out.append(s)
        s += step
    while pad and s < n:
        out.append(s)
        s += step
    return out


class Video(_DeviceOutputs):
    """DALI's legacy video reader: sequences of ``sequence_length`` frames, ``(F, H, W, 3)``
    "FHWC" uint8 (or float32 with ``dtype=FLOAT``, divided by 255 when ``normalized``), then,
    when there are labels (``file_root``, ``file_list``, or ``filenames`` with ``labels``; an
    empty ``labels`` list numbers the files), the int32 label, the frame numbers
    (``enable_frame_num``) and the float64 timestamps (``enable_timestamps``).

    DALI runs it on the GPU only; here the frames are decoded on the host (PyAV) and
    ``device="gpu"`` copies the outputs to the GPU. A sequence starts every ``step`` frames
    (default ``sequence_length * stride``) while its ``1 + (sequence_length - 1) * stride``
    frames fit; ``pad_sequences`` adds the shorter ones at the end, their missing frames
    zero with frame number and timestamp -1. ``random_shuffle`` shuffles the list of
    sequences once (the same on every shard). ``skip_vfr_check`` and
    ``additional_decode_surfaces`` have no effect (variable frame rate videos decode here).
    """

    _SHUFFLES_LIST = True

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        additional_decode_surfaces: int = 2,
        channels: int = 3,
        dont_use_mmap: bool = False,
        dtype: Any = DALIDataType.UINT8,
        enable_frame_num: str | bool = "none",
        enable_timestamps: bool = False,
        file_list: str | os.PathLike = "",
        file_list_frame_num: bool = False,
        file_list_include_preceding_frame: bool = False,
        file_root: str | os.PathLike = "",
        filenames: Sequence[str | os.PathLike] | str = (),
        image_type: Any = DALIImageType.RGB,
        initial_fill: int = 1024,
        labels: Sequence[int] | int | None = None,
        lazy_init: bool = False,
        normalized: bool = False,
        num_shards: int = 1,
        pad_last_batch: bool = False,
        pad_sequences: bool = False,
        prefetch_queue_depth: int = 1,
        random_shuffle: bool = False,
        read_ahead: bool = False,
        seed: int = -1,
        sequence_length: int,
        shard_id: int = 0,
        skip_cached_images: bool = False,
        skip_vfr_check: bool = False,
        step: int = -1,
        stick_to_shard: bool = False,
        stride: int = 1,
        tensor_init_bytes: int = 1048576,
        enable_checkpointing: bool = False,
    ) -> None:
        length = integer(sequence_length, "sequence_length", 1)
        stride = integer(stride, "stride", 1)
        step = integer(step, "step")
        if step == 0:
            raise ValueError("`step` must be positive (or negative for `sequence_length * stride`), got 0")
        integer(additional_decode_surfaces, "additional_decode_surfaces")
        flag(skip_vfr_check, "skip_vfr_check")
        if integer(channels, "channels") != 3:
            raise ValueError(f"Video reader: only `channels=3` is supported, got {channels}")
        npd = as_dtype(dtype).numpy_dtype
        if npd not in (np.dtype(np.uint8), np.dtype(np.float32)):
            raise ValueError(f"Video reader: `dtype` must be UINT8 or FLOAT, got {as_dtype(dtype)}")
        self._file_root = os.fspath(file_root)
        self._file_list = os.fspath(file_list)
        self._filenames = [] if isinstance(filenames, (list, tuple)) and not filenames \
            else path_list(filenames, "filenames")
        if labels is not None and not isinstance(labels, (int, np.integer)) and len(labels) == 0:
            labels = list(range(len(self._filenames)))  # an empty list: the files' indices
        self._labels = None if labels is None else int_labels(labels)
        self._frame_num_list = flag(file_list_frame_num, "file_list_frame_num")
        self._preceding = flag(file_list_include_preceding_frame, "file_list_include_preceding_frame")
        pad = flag(pad_sequences, "pad_sequences")
        self._opts = dict(
            sequence_length=length, stride=stride, step=step if step > 0 else length * stride,
            pad_mode="constant" if pad else "none", fill_value=np.zeros(1, np.uint8),
            image_type=_image_type(image_type), frame_num=_frame_num_mode(enable_frame_num),
            timestamps=flag(enable_timestamps, "enable_timestamps"), uniform_sample=False,
            dtype=npd.type, normalized=flag(normalized, "normalized"),
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

    def _open(self) -> Dataset:
        o = dict(self._opts)
        entries = list_sources("Video", self._file_root, self._file_list, self._filenames, self._labels,
                               parse_video_list)
        has_labels = bool(self._file_root or self._file_list or self._labels is not None)
        if not has_labels:  # as DALI: frame numbers and timestamps come only with labels
            o["frame_num"], o["timestamps"] = "none", False
        ds = build_dataset(
            "Video", entries, has_labels, o,
            lambda vf, e: legacy_range(vf, e, self._frame_num_list, self._preceding),
            lambda n: legacy_starts(n, o["sequence_length"], o["stride"], o["step"], o["pad_mode"] != "none"),
            skip_unreadable=False)
        if not len(ds):
            raise ValueError("Video reader: there are no valid sequences in the dataset; check the length of "
                             "the videos and the requested `sequence_length` and `stride` (or pass "
                             "`pad_sequences=True`)")
        return ds


_RESIZE_ARGS = ("antialias", "interp_type", "mag_filter", "max_size", "min_filter", "minibatch_size", "mode",
                "resize_longer", "resize_shorter", "resize_x", "resize_y", "resize_z", "roi_end", "roi_relative",
                "roi_start", "size", "subpixel_scale", "temp_buffer_hint")


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False


class VideoResize(Video):
    """:class:`Video` whose frames are then resized by ``ndd.resize`` with the resize
    arguments given (DALI's ``readers.VideoResize``); every frame of a sequence is resized
    alike. The resize runs on the loop's thread, after the read-ahead."""

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        additional_decode_surfaces: int = 2,
        antialias: bool = True,
        channels: int = 3,
        dont_use_mmap: bool = False,
        dtype: Any = DALIDataType.UINT8,
        enable_frame_num: str | bool = "none",
        enable_timestamps: bool = False,
        file_list: str | os.PathLike = "",
        file_list_frame_num: bool = False,
        file_list_include_preceding_frame: bool = False,
        file_root: str | os.PathLike = "",
        filenames: Sequence[str | os.PathLike] | str = (),
        image_type: Any = DALIImageType.RGB,
        initial_fill: int = 1024,
        interp_type: Any = DALIInterpType.INTERP_LINEAR,
        labels: Sequence[int] | int | None = None,
        lazy_init: bool = False,
        mag_filter: Any = DALIInterpType.INTERP_LINEAR,
        max_size: Any = None,
        min_filter: Any = DALIInterpType.INTERP_LINEAR,
        minibatch_size: int = 32,
        mode: str = "default",
        normalized: bool = False,
        num_shards: int = 1,
        pad_last_batch: bool = False,
        pad_sequences: bool = False,
        prefetch_queue_depth: int = 1,
        random_shuffle: bool = False,
        read_ahead: bool = False,
        resize_longer: float = 0.0,
        resize_shorter: float = 0.0,
        resize_x: float = 0.0,
        resize_y: float = 0.0,
        resize_z: float = 0.0,
        roi_end: Any = None,
        roi_relative: bool = False,
        roi_start: Any = None,
        seed: int = -1,
        sequence_length: int,
        shard_id: int = 0,
        size: Any = None,
        skip_cached_images: bool = False,
        skip_vfr_check: bool = False,
        step: int = -1,
        stick_to_shard: bool = False,
        stride: int = 1,
        subpixel_scale: bool = True,
        temp_buffer_hint: int = 0,
        tensor_init_bytes: int = 1048576,
        enable_checkpointing: bool = False,
    ) -> None:
        given, defaults = dict(locals()), inspect.signature(VideoResize).parameters
        # (only the arguments given: ndd.resize tells "not given" from a default-valued one)
        self._resize = {k: given[k] for k in _RESIZE_ARGS if given[k] is not defaults[k].default
                        and not _same(given[k], defaults[k].default)}
        import ndd

        # Check the resize arguments now, on a tiny frame, so that mistakes surface here.
        ndd.resize(ndd.tensor(np.zeros((2, 2, 3), np.uint8), layout="HWC"), **self._resize)
        super().__init__(
            max_batch_size, name, device, num_inputs, additional_decode_surfaces=additional_decode_surfaces,
            channels=channels, dont_use_mmap=dont_use_mmap, dtype=dtype, enable_frame_num=enable_frame_num,
            enable_timestamps=enable_timestamps, file_list=file_list, file_list_frame_num=file_list_frame_num,
            file_list_include_preceding_frame=file_list_include_preceding_frame, file_root=file_root,
            filenames=filenames, image_type=image_type, initial_fill=initial_fill, labels=labels,
            lazy_init=lazy_init, normalized=normalized, num_shards=num_shards, pad_last_batch=pad_last_batch,
            pad_sequences=pad_sequences, prefetch_queue_depth=prefetch_queue_depth, random_shuffle=random_shuffle,
            read_ahead=read_ahead, seed=seed, sequence_length=sequence_length, shard_id=shard_id,
            skip_cached_images=skip_cached_images, skip_vfr_check=skip_vfr_check, step=step,
            stick_to_shard=stick_to_shard, stride=stride, tensor_init_bytes=tensor_init_bytes,
            enable_checkpointing=enable_checkpointing,
        )

    def _post(self, outputs: Any) -> Any:
        import ndd

        video = outputs[0]
        single = isinstance(video, ndd.Tensor)
        seqs = [np.asarray(video)] if single else [np.asarray(t) for t in video.tensors]
        frames = ndd.as_batch([f for s in seqs for f in s], layout="HWC")
        resized = [np.asarray(t) for t in ndd.resize(frames, **self._resize).tensors]
        out, k = [], 0
        for s in seqs:
            out.append(np.stack(resized[k:k + len(s)]))
            k += len(s)
        new = ndd.tensor(out[0], layout="FHWC") if single else ndd.as_batch(out, layout="FHWC")
        return (new,) + tuple(outputs[1:])
