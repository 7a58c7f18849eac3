"""``ndd.readers.TFRecord``: TFRecord files of ``tf.train.Example`` with index files."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from ._base import Dataset, StreamReader, path_list
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED
from ._tfrecord import ExampleParser, Feature, TFRecordSource


class TFRecordDataset(Dataset):
    """The records of TFRecord files through their index files; outputs by feature name."""

    def __init__(self, paths: list[str], index_paths: list[str], features: Mapping[str, Feature]) -> None:
        self.source = TFRecordSource(paths, index_paths)
        self.parser = ExampleParser(features)
        self.names = tuple(features)
        self.layouts = (None,) * len(self.names)
        try:
            self.read(0)  # fails early for a file that does not hold Examples
        except BaseException:
            self.source.close()
            raise

    def __len__(self) -> int:
        return len(self.source)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        payload = self.source.read(i)
        try:
            out = self.parser(payload)
        except ValueError:  # parse again to name the record (kept off the fast path)
            out = self.parser(payload, source=self.source.describe(i))
        return tuple(out.values())

    def describe(self, i: int) -> str:
        return self.source.describe(i)

    def source_info(self, i: int, output: int) -> str:
        return self.source.source_info(i)  # (every feature)

    def identity(self, i: int) -> bytes:
        return bytes(self.source.read(i))  # the record, whatever features are read from it

    def close(self) -> None:
        self.source.close()


class TFRecord(StreamReader):
    """Reads TFRecord files: yields a dict ``{feature name: Batch}`` (or Tensors).

    ``index_path`` gives one index file per file of ``path`` (write them with
    ``ndd-tfrecord2idx`` or :func:`ndd.tfrecord.write_index`), listing every record of
    its file (an index that does not raises ValueError); ``features`` maps names to
    ``ndd.tfrecord.FixedLenFeature`` / ``VarLenFeature``. Strings come out as uint8
    bytes. CRCs are not checked (as in DALI). See :class:`StreamReader` for the epoch,
    read-ahead and state rules.
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
        features: Mapping[str, Feature] | None = None,
        use_o_direct: bool = False,
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
            raise ValueError("TFRecord reader needs `path` (a TFRecord file or a list of them)")
        if index_path is None:
            raise ValueError("TFRecord reader needs `index_path` (one index file per TFRecord file)")
        if not isinstance(features, Mapping) or not features:
            raise ValueError(f"TFRecord reader needs `features`, a non-empty dict, got {features!r}")
        self._paths = path_list(path, "path")
        self._index_paths = path_list(index_path, "index_path")
        self._features = dict(features)
        ExampleParser(self._features)  # type errors at construction
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
        return TFRecordDataset(self._paths, self._index_paths, self._features)
