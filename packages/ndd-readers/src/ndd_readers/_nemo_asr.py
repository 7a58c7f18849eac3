"""``ndd.readers.NemoAsr``: speech data listed in NeMo JSON-lines manifests."""

from __future__ import annotations

import json
import math
import os
import struct
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ndd._dtype import dtype as as_dtype
from ndd.plugins import convert_decoded, decode_wav, resample_window

from ._base import Dataset, StreamReader, flag, path_list, read_bytes
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED

_F = np.float32
_AUDIO_DTYPES = (np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.float32))


class Entry:
    """One manifest line: where it is, the audio file, its text and its time window."""

    __slots__ = ("audio", "duration", "index", "line", "manifest", "offset", "text")

    def __init__(self, manifest: str, line: int, audio: str, text: bytes, offset: float, duration: float | None,
                 index: int) -> None:
        self.manifest, self.line, self.audio, self.text = manifest, line, audio, text
        self.offset, self.duration, self.index = offset, duration, index


def _seconds(obj: dict, key: str, where: str) -> float | None:
    """A time field of a manifest line: a number, None when absent or null."""
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}: `{key}` must be a number of seconds, got {v!r}")
    return float(v)


def parse_manifest(path: str, min_duration: float, max_duration: float) -> list[Entry]:
    """The entries of one manifest whose ``duration`` passes the filters (compared with the
    float32 thresholds, as DALI does; a line without ``duration`` counts as 0 s). Blank lines
    are skipped; ValueError naming the manifest and line for anything else that is not an
    object with a string ``audio_filepath`` (and, when present, a string ``text`` and numeric
    ``offset`` and ``duration``)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"manifest {path!r} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    entries: list[Entry] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{where}: not a JSON object ({e})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        audio = obj.get("audio_filepath")
        if not isinstance(audio, str) or not audio:
            raise ValueError(f"{where}: missing the `audio_filepath` field (a non-empty string)"
                             if audio is None else f"{where}: `audio_filepath` must be a non-empty string, "
                             f"got {audio!r}")
        text = obj.get("text", "")
        if not isinstance(text, str):
            raise ValueError(f"{where}: `text` must be a string, got {text!r}")
        offset, duration = _seconds(obj, "offset", where) or 0.0, _seconds(obj, "duration", where)
        length = duration or 0.0
        if (min_duration > 0 and length < min_duration) or (max_duration > 0 and length > max_duration):
            continue
        if not os.path.isfile(audio):
            raise ValueError(f"{where}: audio file {audio!r} does not exist")
        entries.append(Entry(path, lineno, audio, text.encode("utf-8"), offset, duration, len(entries)))
    return entries


def crop_frames(n: int, rate: float, offset: float, duration: float | None) -> tuple[int, int]:
    """The frames ``[start, stop)`` of a file of ``n`` frames that an entry covers: from
    ``offset * rate`` (when positive), ``duration * rate`` of them (truncated; to the end of
    the file when ``duration`` is absent, negative or reaches past the end)."""
    start = int(offset * rate) if offset > 0 else 0
    count = int(duration * rate) if duration is not None else -1
    return start, n if count < 0 else min(start + count, n)


class NemoAsrDataset(Dataset):
    """Decoded audio of the manifests' entries, with the outputs the reader asks for."""

    def __init__(self, entries: list[Entry], outputs: tuple[bool, bool, bool], dtype: np.dtype, downmix: bool,
                 sample_rate: float, quality: float) -> None:
        self.entries = entries
        self.outputs = outputs  # (sample rate, text, index)
        self.layouts = (None,) * (1 + sum(outputs))
        self.dtype, self.downmix, self.sample_rate = dtype, downmix, sample_rate
        self.window = resample_window(quality)

    def __len__(self) -> int:
        return len(self.entries)

    def describe(self, i: int) -> str:
        e = self.entries[i]
        return f"{e.manifest}:{e.line} ({e.audio})"

    def _decode(self, i: int) -> tuple[np.ndarray, float, bool]:
        """The entry's frames of its file, the file's rate and whether the samples are floats."""
        e = self.entries[i]
        data = read_bytes(e.audio, f"the audio of {e.manifest}:{e.line}")
        try:
            x, rate, is_float = decode_wav(data.tobytes())
        except (ValueError, struct.error) as err:
            raise ValueError(f"{self.describe(i)}: cannot decode the audio: {err}") from None
        start, stop = crop_frames(len(x), rate, e.offset, e.duration)
        if start > len(x):
            raise ValueError(f"{self.describe(i)}: `offset` {e.offset} s is past the end of the audio "
                             f"({len(x)} samples at {rate:g} Hz)")
        return x[start:stop], rate, is_float

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        x, rate, is_float = self._decode(i)
        audio, _ = convert_decoded(x, rate, is_float, self.dtype, self.downmix, self.sample_rate, self.window)
        out = [np.ascontiguousarray(audio)]
        e = self.entries[i]
        want_rate, want_text, want_index = self.outputs
        if want_rate:  # the file's rate, also when the audio was resampled (as DALI)
            out.append(np.array(rate, _F))
        if want_text:
            out.append(np.frombuffer(e.text, np.uint8).copy())
        if want_index:
            out.append(np.array([e.index], np.int64))
        return tuple(out)

    def identity(self, i: int) -> bytes:
        e = self.entries[i]
        return read_bytes(e.audio, f"the audio of {e.manifest}:{e.line}").tobytes() + e.text


def _threshold(value: Any, arg: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{arg}` must be a number, got {value!r}")
    return float(_F(value))


class NemoAsr(StreamReader):
    """Reads speech data listed in NeMo manifests (JSON lines with ``audio_filepath`` and
    optional ``text``, ``offset`` and ``duration``): yields the decoded audio (WAV), then, as
    asked, the file's sampling rate (float32 scalar), the text (UTF-8 bytes, uint8 1-D) and
    the entry's index among its manifest's kept entries (int64, shape (1,)).

    ``offset`` and ``duration`` cut the audio before it is resampled; ``min_duration`` and
    ``max_duration`` drop entries by their manifest ``duration``. Relative audio paths are
    taken from the working directory, as in DALI. See :class:`StreamReader` for the epoch,
    shard, shuffle and state rules.
    """

    _SHUFFLES_LIST = True

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        manifest_filepaths: Sequence[str | os.PathLike],
        read_sample_rate: bool = True,
        read_text: bool = True,
        read_idxs: bool = False,
        sample_rate: float = -1.0,
        downmix: bool = True,
        dtype: Any = "float32",
        quality: float = 50.0,
        min_duration: float = 0.0,
        max_duration: float = 0.0,
        normalize_text: bool | None = None,
        shuffle_after_epoch: bool = False,
        shuffle_after_epoch_seed: int = DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
        initial_fill: int = 1024,
        lazy_init: bool = False,
        pad_last_batch: bool = False,
        prefetch_queue_depth: int = 1,
        random_shuffle: bool = False,
        read_ahead: bool = False,
        seed: int = -1,
        shard_id: int = 0,
        num_shards: int = 1,
        stick_to_shard: bool = False,
        skip_cached_images: bool = False,
        dont_use_mmap: bool = False,
        tensor_init_bytes: int = 1048576,
        enable_checkpointing: bool = False,
    ) -> None:
        if normalize_text is not None:
            warnings.warn("The argument `normalize_text` is no longer used and will be removed in a future "
                          "release.", DeprecationWarning, stacklevel=2)
        self._manifests = path_list(manifest_filepaths, "manifest_filepaths")
        self._outputs = (flag(read_sample_rate, "read_sample_rate"), flag(read_text, "read_text"),
                         flag(read_idxs, "read_idxs"))
        self._downmix = flag(downmix, "downmix")
        npd = as_dtype(dtype).numpy_dtype
        if npd not in _AUDIO_DTYPES:
            raise ValueError(f"NemoAsr: unsupported `dtype` {as_dtype(dtype)}; supported are int16, int32 "
                             "and float32")
        self._dtype = npd
        self._sample_rate = _threshold(sample_rate, "sample_rate")
        self._quality = _threshold(quality, "quality")
        if not 0 <= self._quality <= 100:
            raise ValueError(f"`quality` must be in [0, 100], got {quality}")
        self._min_duration = _threshold(min_duration, "min_duration")
        self._max_duration = _threshold(max_duration, "max_duration")
        super().__init__(
            max_batch_size, name, device, num_inputs, initial_fill=initial_fill, lazy_init=lazy_init,
            pad_last_batch=pad_last_batch, prefetch_queue_depth=prefetch_queue_depth,
            random_shuffle=random_shuffle, read_ahead=read_ahead, seed=seed, shard_id=shard_id,
            num_shards=num_shards, stick_to_shard=stick_to_shard, skip_cached_images=skip_cached_images,
            dont_use_mmap=dont_use_mmap, tensor_init_bytes=tensor_init_bytes,
            shuffle_after_epoch=shuffle_after_epoch, shuffle_after_epoch_seed=shuffle_after_epoch_seed,
            enable_checkpointing=enable_checkpointing,
        )

    def _open(self) -> Dataset:
        entries = [e for m in self._manifests for e in parse_manifest(m, self._min_duration, self._max_duration)]
        if not entries:
            raise ValueError(f"NemoAsr: no entries in {self._manifests} pass the duration filters "
                             f"(min_duration={self._min_duration}, max_duration={self._max_duration})"
                             if self._min_duration > 0 or self._max_duration > 0
                             else f"NemoAsr: the manifests {self._manifests} list no audio")
        return NemoAsrDataset(entries, self._outputs, self._dtype, self._downmix, self._sample_rate,
                              self._quality)
