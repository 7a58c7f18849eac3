"""``ndd.readers.Caffe``: Caffe LMDB databases of ``Datum`` records.

Each LMDB value is a serialized Caffe ``Datum``: ``channels = 1``, ``height = 2``,
``width = 3`` (int32), ``data = 4`` (bytes), ``label = 5`` (int32), ``float_data = 6``
(not read) and ``encoded = 7`` (bool). As in DALI 2.4, the image is ``data`` as uint8
1-D bytes unless the record says ``encoded: false``; then it is raw pixels reshaped to
``(height, width, channels)`` as stored. A record without a label gives an empty label.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from . import _protowire as pw
from ._base import Column, Dataset, StreamReader, columns, flag, path_list
from ._caffe2 import Caffe2Source

_VARINT_FIELDS = {1: "channels", 2: "height", 3: "width", 5: "label", 7: "encoded"}


def _int32(v: int) -> int:
    """A varint as protobuf's int32 (the low 32 bits, signed)."""
    return ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def parse_datum(value: bytes, image: bool, label: bool, source: str) -> tuple[np.ndarray, ...]:
    """The outputs of one ``Datum`` record: the image (when ``image``) then the label (when
    ``label``); ValueError naming ``source`` for a record that is not a Datum or whose raw
    image does not fit its dimensions."""
    try:
        fields = pw.scan(value)
    except pw.DecodeError as e:
        raise ValueError(f"{source}: not a Caffe Datum: {e}") from None
    ints: dict[int, int] = {}
    data = (0, 0)
    for num, wt, a, b in fields:  # (a repeated field: the last one counts, as in protobuf)
        if num in _VARINT_FIELDS:
            if wt != pw.VARINT:
                raise ValueError(f"{source}: not a Caffe Datum: field {num} ({_VARINT_FIELDS[num]}) has wire type "
                                 f"{pw.wire_type_name(wt)}, expected varint")
            ints[num] = a
        elif num == 4:
            if wt != pw.LEN:
                raise ValueError(f"{source}: not a Caffe Datum: field 4 (data) has wire type "
                                 f"{pw.wire_type_name(wt)}, expected length-delimited")
            data = (a, b)
    out = []
    if image:
        img = np.frombuffer(value, np.uint8, data[1] - data[0], data[0]).copy()
        if ints.get(7, 1) == 0:  # encoded: false
            c, h, w = (_int32(ints.get(k, 0)) for k in (1, 2, 3))
            if min(c, h, w) < 0 or h * w * c != img.size:
                raise ValueError(f"{source}: the raw image has {img.size} bytes, but its height x width x channels "
                                 f"is {h} x {w} x {c}")
            img = img.reshape(h, w, c)
        out.append(img)
    if label:
        out.append(np.array([_int32(ints[5])], np.int32) if 5 in ints else np.empty(0, np.int32))
    return tuple(out)


class CaffeDataset(Dataset):
    """The records of one or several Caffe LMDBs, in key order."""

    def __init__(self, paths: list[str], image: bool, label: bool) -> None:
        self.source = Caffe2Source(paths)
        self.image, self.label = image, label
        self.layouts = (None,) * (image + label)
        try:
            self.read(0)  # fails early for a database that is not Caffe's
        except BaseException:
            self.source.close()
            raise

    def __len__(self) -> int:
        return len(self.source)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        return parse_datum(self.source.read(i), self.image, self.label, self.source.describe(i))

    def read_many(self, indices: list[int]) -> list[Column]:
        """One LMDB transaction for the batch."""
        samples = []
        for i, value in zip(indices, self.source.read_many(indices)):
            if value is None:
                raise RuntimeError(f"{self.source.describe(i)} is no longer in the database")
            samples.append(parse_datum(value, self.image, self.label, self.source.describe(i)))
        return columns(samples)

    def identity(self, i: int) -> bytes:
        return bytes(self.source.read(i))  # the record, whatever outputs are read from it

    def describe(self, i: int) -> str:
        return self.source.describe(i)

    def source_info(self, i: int, output: int) -> str:
        return self.source.source_info(i) if self.image and output == 0 else ""  # (the image only)

    def close(self) -> None:
        self.source.close()


class Caffe(StreamReader):
    """Reads Caffe LMDBs of ``Datum`` records: yields ``(image, label)``, or one of them
    with ``image_available=False`` / ``label_available=False``.

    The image is uint8: the encoded file as 1-D bytes, or for a record with ``encoded:
    false`` the raw pixels shaped ``(height, width, channels)`` (no layout, as in DALI);
    the label is int32 of shape (1,) (empty for a record without one). Records are read in
    key order, database by database. See :class:`StreamReader` for the epoch, read-ahead
    and state rules.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        path: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        image_available: bool = True,
        label_available: bool = True,
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
            raise ValueError("Caffe reader needs `path` (an LMDB directory or a list of them)")
        self._paths = path_list(path, "path")
        self._image = flag(image_available, "image_available")
        self._label = flag(label_available, "label_available")
        if not (self._image or self._label):
            raise ValueError("Caffe reader needs image_available or label_available: with neither it has no outputs")
        super().__init__(
            max_batch_size, name, device, num_inputs, initial_fill=initial_fill, lazy_init=lazy_init,
            pad_last_batch=pad_last_batch, prefetch_queue_depth=prefetch_queue_depth,
            random_shuffle=random_shuffle, read_ahead=read_ahead, seed=seed, shard_id=shard_id,
            num_shards=num_shards, stick_to_shard=stick_to_shard, skip_cached_images=skip_cached_images,
            dont_use_mmap=dont_use_mmap, tensor_init_bytes=tensor_init_bytes,
            enable_checkpointing=enable_checkpointing,
        )

    def _open(self) -> Dataset:
        return CaffeDataset(self._paths, self._image, self._label)
