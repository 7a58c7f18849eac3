"""``ndd.readers.Caffe2``: Caffe2 LMDB databases."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ._base import Column, Dataset, StreamReader, columns, flag, integer, path_list
from ._caffe2 import Caffe2Source, fast_image_label, parse_caffe2_record


class Caffe2Dataset(Dataset):
    """The records of one or several Caffe2 LMDBs, in key order."""

    def __init__(self, paths: list[str], **parse_args: object) -> None:
        self.source = Caffe2Source(paths)
        self.args = parse_args
        # the layout fast_image_label recognises yields exactly (image, single label)
        self._fast = (parse_args["image_available"] and parse_args["label_type"] == 0
                      and not parse_args["additional_inputs"] and not parse_args["bbox"])
        try:
            first = self.read(0)  # fails early for a database that is not Caffe2
        except BaseException:
            self.source.close()
            raise
        self.layouts = tuple("HWC" if k == 0 and parse_args["image_available"] and a.ndim == 3 else None
                             for k, a in enumerate(first))

    def __len__(self) -> int:
        return len(self.source)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        return self._parse(i, self.source.read(i))

    def identity(self, i: int) -> bytes:
        return bytes(self.source.read(i))  # the record, whatever layout it is read with

    def _parse(self, i: int, value: bytes) -> tuple[np.ndarray, ...]:
        try:
            return parse_caffe2_record(value, **self.args)
        except ValueError:  # parse again to name the record (kept off the fast path)
            return parse_caffe2_record(value, source=self.source.describe(i), **self.args)

    def read_many(self, indices: list[int]) -> list[Column]:
        """One LMDB transaction for the batch. Records of the common layout (see
        :func:`fast_image_label`) are sliced directly and their labels gathered into one
        ``(n, 1)`` int32 array; any other record goes through the general parser, in
        order, so errors (and which record raises first) are those of :meth:`read`."""
        values = self.source.read_many(indices)
        fast = fast_image_label if self._fast else None
        frombuffer, u8 = np.frombuffer, np.uint8
        images: list[np.ndarray] = []
        labels: list[int] = []
        general: dict[int, tuple[np.ndarray, ...]] | None = None
        for j, value in enumerate(values):
            if value is None:
                raise RuntimeError(f"{self.source.describe(indices[j])} is no longer in the database")
            r = fast(value) if fast is not None else None
            if r is not None:
                a, b, label = r
                images.append(frombuffer(value, u8, b - a, a).copy())
                labels.append(label)
                continue
            if general is None:
                general = {}
            general[j] = self._parse(indices[j], value)
        if general is None:
            return [images, np.array(labels, np.int32).reshape(len(labels), 1)]
        samples = []
        k = 0
        for j in range(len(values)):
            s = general.get(j)
            if s is None:
                s = (images[k], np.array([labels[k]], np.int32))
                k += 1
            samples.append(s)
        return columns(samples)

    def describe(self, i: int) -> str:
        return self.source.describe(i)

    def source_info(self, i: int, output: int) -> str:
        return self.source.source_info(i) if self.args["image_available"] and output == 0 else ""  # (the image only)

    def close(self) -> None:
        self.source.close()


class Caffe2(StreamReader):
    """Reads Caffe2 LMDBs of serialized ``TensorProtos``.

    Yields, in order: the image (when ``image_available``; encoded bytes as uint8 1-D, or
    raw pixels uint8 HWC), the label (unless ``label_type=4``; int32 or float32 as stored,
    shape (1,) for ``label_type=0``, a ``num_labels`` vector for 1 and 3, the stored
    vector for 2), ``additional_inputs`` extra arrays, then the bbox (int32 [4]) when
    ``bbox``. Records are read in key order, database by database. See
    :class:`StreamReader` for the epoch, read-ahead and state rules.
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
        label_type: int = 0,
        num_labels: int = 1,
        additional_inputs: int = 0,
        bbox: bool = False,
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
            raise ValueError("Caffe2 reader needs `path` (an LMDB directory or a list of them)")
        self._paths = path_list(path, "path")
        label_type, num_labels = integer(label_type, "label_type"), integer(num_labels, "num_labels")
        if label_type not in (0, 1, 2, 3, 4):
            raise ValueError(f"label_type must be 0, 1, 2, 3 or 4, got {label_type!r}")
        if label_type in (1, 3) and num_labels < 1:
            raise ValueError(f"num_labels must be >= 1 for label_type {label_type}, got {num_labels!r}")
        additional_inputs = integer(additional_inputs, "additional_inputs", 0)
        self._parse = dict(image_available=flag(image_available, "image_available"), label_type=label_type,
                           num_labels=num_labels, additional_inputs=additional_inputs, bbox=flag(bbox, "bbox"))
        super().__init__(
            max_batch_size, name, device, num_inputs, initial_fill=initial_fill, lazy_init=lazy_init,
            pad_last_batch=pad_last_batch, prefetch_queue_depth=prefetch_queue_depth,
            random_shuffle=random_shuffle, read_ahead=read_ahead, seed=seed, shard_id=shard_id,
            num_shards=num_shards, stick_to_shard=stick_to_shard, skip_cached_images=skip_cached_images,
            dont_use_mmap=dont_use_mmap, tensor_init_bytes=tensor_init_bytes,
            enable_checkpointing=enable_checkpointing,
        )

    def _open(self) -> Dataset:
        return Caffe2Dataset(self._paths, **self._parse)
