"""``ndd.readers.Numpy``: ``.npy`` files."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ._base import Dataset, StreamReader, check_files, matches
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED


class NumpyDataset(Dataset):
    """``.npy`` files: one output keeping each file's dtype and shape."""

    layouts = (None,)

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        path = self.paths[i]
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise ValueError(f"{path} (sample {i}): not a readable .npy file: {e}") from None
        if not isinstance(arr, np.ndarray):
            raise ValueError(f"{path} (sample {i}): holds an archive, not one array")
        return (np.ascontiguousarray(arr),)

    def describe(self, i: int) -> str:
        return f"{self.paths[i]} (sample {i})"


def _walk(root: str, pattern: str) -> list[str]:
    if not os.path.isdir(root):
        raise ValueError(f"file_root {root!r} is not a directory")
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        found.extend(os.path.join(dirpath, f) for f in filenames if matches(f, [pattern], True))
    return sorted(found)


class Numpy(StreamReader):
    """Reads ``.npy`` files: yields a 1-tuple ``(data,)`` with each file's dtype and shape.

    Give ``file_root`` (all files matching ``file_filter`` below it, sorted), ``files``
    (relative to ``file_root`` if given) or ``file_list`` (one name per line, relative to
    ``file_root`` or to the list's directory). Regions of interest (``roi_*``) are not
    supported. See :class:`StreamReader` for the epoch, read-ahead and state rules.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        file_root: str | os.PathLike | None = None,
        file_filter: str = "*.npy",
        files: Sequence[str | os.PathLike] | None = None,
        file_list: str | os.PathLike | None = None,
        cache_header_information: bool = False,
        register_buffers: bool = True,
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
        self._file_root = None if file_root is None else os.fspath(file_root)
        self._file_filter = file_filter
        self._files = None if files is None else [os.fspath(f) for f in files]
        self._file_list = None if file_list is None else os.fspath(file_list)
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
        root, files, lst = self._file_root, self._files, self._file_list
        if files is not None and lst is not None:
            raise ValueError("Give either `file_list` or `files`, not both")
        if files is not None:
            if not files:
                raise ValueError("`files` is empty")
            paths = [os.path.join(root, f) for f in files] if root is not None else files
            check_files(paths, "files")
        elif lst is not None:
            base = root if root is not None else os.path.dirname(os.path.abspath(lst))
            try:
                with open(lst, encoding="utf-8") as f:
                    names = [line.strip() for line in f if line.strip()]
            except OSError as e:
                raise ValueError(f"file_list {lst!r} cannot be read: {e.strerror or e}") from None
            if not names:
                raise ValueError(f"file_list {lst!r} lists no files")
            paths = [os.path.join(base, n) for n in names]
            check_files(paths, "file_list")
        elif root is not None:
            paths = _walk(root, self._file_filter)
            if not paths:
                raise ValueError(f"file_root {root!r} holds no files matching {self._file_filter!r}")
        else:
            raise ValueError("Numpy reader needs `file_root`, `files` or `file_list`")
        return NumpyDataset(paths)
