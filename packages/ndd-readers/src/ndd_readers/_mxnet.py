"""``ndd.readers.MXNet``: MXNet RecordIO files (``.rec``) and their index (``.idx``).

A RecordIO file is a sequence of records: a little-endian uint32 magic ``0xced7230a``, a
uint32 whose low 29 bits are the payload length and top 3 bits the part flag (0: whole
record; 1, 2, 3: first, middle and last part of a record split where its payload held
the magic number, which is put back between the parts), the payload, and zero padding
to 4 bytes. An image record's payload starts with MXNet's ``IRHeader`` (uint32 ``flag``,
float32 ``label``, uint64 ``id``, uint64 ``id2``); ``flag > 0`` is the number of float32
labels that follow it, in place of ``label``; the encoded image is the rest.

As in DALI 2.4, the one index file lists ``<key> <offset>`` lines whose offsets are into
the concatenation of the ``.rec`` files; records are read in offset order (keys are not
used).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Sequence

import numpy as np

from ._base import Dataset, StreamReader, path_list
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_RECORD = struct.Struct("<II")  # magic, part flag << 29 | length
IR_HEADER = struct.Struct("<IfQQ")  # flag, label, id, id2
_DECIMAL = re.compile(r"[0-9]+")


def read_index(path: str) -> np.ndarray:
    """The record offsets an index lists, sorted (ValueError naming the file and line for a
    malformed line, a repeated offset or an empty index)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"{path}: cannot read the index file: {e.strerror or e}") from None
    offsets, where = [], {}
    for lineno, line in enumerate(lines, 1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 2 or not all(_DECIMAL.fullmatch(t) for t in tokens):
            raise ValueError(f"{path}:{lineno}: expected '<key> <offset>' (decimal integers), got {line!r}")
        off = int(tokens[1])
        if off in where:
            raise ValueError(f"{path}:{lineno}: offset {off} is listed twice (also on line {where[off]})")
        where[off] = lineno
        offsets.append(off)
    if not offsets:
        raise ValueError(f"{path}: the index lists no records")
    return np.sort(np.asarray(offsets, np.int64))


def parse_image_record(payload: bytes, source: str) -> tuple[np.ndarray, np.ndarray]:
    """``(image bytes uint8 [n], labels float32 [k])`` of an image record's payload."""
    if len(payload) < IR_HEADER.size:
        raise ValueError(f"{source}: the record has {len(payload)} bytes, less than the {IR_HEADER.size}-byte "
                         "image record header")
    flag, label, _, _ = IR_HEADER.unpack_from(payload)
    start = IR_HEADER.size + 4 * flag
    if start > len(payload):
        raise ValueError(f"{source}: the header announces {flag} labels ({4 * flag} bytes), but the record has "
                         f"{len(payload) - IR_HEADER.size} bytes after the header")
    if flag:
        labels = np.frombuffer(payload, "<f4", flag, IR_HEADER.size).astype(np.float32)
    else:
        labels = np.array([label], np.float32)
    return np.frombuffer(payload, np.uint8, len(payload) - start, start).copy(), labels


class MXNetDataset(Dataset):
    """The records of RecordIO files that one index lists."""

    layouts = (None, None)

    def __init__(self, paths: list[str], index_path: str) -> None:
        self.paths = paths
        sizes = []
        for k, p in enumerate(paths):
            try:
                sizes.append(os.path.getsize(p))
            except OSError as e:
                raise ValueError(f"{p}: RecordIO file #{k} of `path` cannot be read: {e.strerror or e}") from None
        self._starts = np.cumsum([0] + sizes)  # where each file begins in the concatenation
        total = int(self._starts[-1])
        offsets = read_index(index_path)
        if offsets[-1] >= total:
            raise ValueError(f"{index_path}: offset {offsets[-1]} is past the end of the RecordIO files "
                             f"({total} bytes in all): the index belongs to other files, or they are truncated")
        self._offsets = offsets
        self._file = np.searchsorted(self._starts, offsets, side="right") - 1
        # a record ends at the next listed offset, or at the end of its file
        ends = np.append(offsets[1:], total)
        self._ends = np.minimum(ends, self._starts[self._file + 1])
        self.groups = np.bincount(self._file, minlength=len(paths)).tolist()
        self._files = []
        try:
            for p in paths:
                self._files.append(open(p, "rb", buffering=0))  # noqa: SIM115 - closed by close()
            self.read(0)  # fails early for files that are not RecordIO
        except OSError as e:
            self.close()
            raise ValueError(f"{e.filename}: cannot open the RecordIO file: {e.strerror or e}") from None
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self._offsets)

    def _payload(self, i: int) -> bytes:
        """The payload of record ``i``, its parts joined."""
        if not self._files:
            raise RuntimeError("The MXNet reader's files are closed")
        f = int(self._file[i])
        fd, base = self._files[f].fileno(), int(self._starts[f])
        pos, end = int(self._offsets[i]) - base, int(self._ends[i]) - base
        parts: list[bytes] = []
        while True:
            head = os.pread(fd, _RECORD.size, pos) if pos + _RECORD.size <= end else b""
            if len(head) < _RECORD.size:
                raise ValueError(f"{self.describe(i)}: the record header at byte {pos} is cut off by the next "
                                 f"record or the end of the file (at byte {end})")
            magic, lrec = _RECORD.unpack(head)
            if magic != MAGIC:
                raise ValueError(f"{self.describe(i)}: wrong magic number 0x{magic:08x} at byte {pos} (expected "
                                 f"0x{MAGIC:08x}): not a RecordIO record, or the index does not point at one")
            part, n = lrec >> 29, lrec & ((1 << 29) - 1)
            pos += _RECORD.size
            if pos + n > end:
                raise ValueError(f"{self.describe(i)}: the record needs {n} bytes, but the next record or the end "
                                 f"of the file comes after {end - pos}")
            if (part in (0, 1)) != (not parts):
                raise ValueError(f"{self.describe(i)}: a record part with flag {part} at byte {pos - _RECORD.size} "
                                 "is out of sequence")
            if parts:
                parts.append(_MAGIC_BYTES)
            data = os.pread(fd, n, pos)
            if len(data) < n:
                raise ValueError(f"{self.describe(i)}: the file ends inside the record: it was truncated after "
                                 "the reader opened it")
            parts.append(data)
            pos += n + (-n % 4)
            if part in (0, 3):
                return b"".join(parts)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        return parse_image_record(self._payload(i), self.describe(i))

    def identity(self, i: int) -> bytes:
        return self._payload(i)

    def describe(self, i: int) -> str:
        f = int(self._file[i])
        return f"{self.paths[f]}: record at byte {int(self._offsets[i]) - int(self._starts[f])} (sample {i})"

    def source_info(self, i: int, output: int) -> str:
        """``<path> at index <byte offset in the file>`` for the image; empty for the label."""
        if output != 0:
            return ""
        f = int(self._file[i])
        return f"{self.paths[f]} at index {int(self._offsets[i]) - int(self._starts[f])}"

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files = []


class MXNet(StreamReader):
    """Reads MXNet RecordIO files: yields ``(image, label)``, the encoded image as uint8
    1-D bytes and the float32 labels (shape (1,), or the header's ``flag`` labels).

    ``index_path`` is one index file (``im2rec.py``'s ``.idx``) for all the files of
    ``path``, whose offsets count through the files one after the other.
    ``shuffle_after_epoch`` visits the files in a fresh order each epoch, keeping each
    file's records in order. See :class:`StreamReader` for the epoch, read-ahead and state
    rules.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        path: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        index_path: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
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
        if path is None:
            raise ValueError("MXNet reader needs `path` (a RecordIO file or a list of them)")
        if index_path is None:
            raise ValueError("MXNet reader needs `index_path` (the index file of the RecordIO files)")
        self._paths = path_list(path, "path")
        index = path_list(index_path, "index_path")
        if len(index) != 1:
            raise ValueError(f"`index_path` must list one index file (for all the RecordIO files), got {len(index)}")
        self._index = index[0]
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
        return MXNetDataset(self._paths, self._index)
