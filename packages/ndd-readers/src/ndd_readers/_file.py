"""``ndd.readers.File``: files and integer labels."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ._base import Column, Dataset, StreamReader, check_files, flag, matches, path_list, patterns, read_bytes
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED

DEFAULT_FILE_FILTERS = ("*.jpg", "*.jpeg", "*.png", "*.bmp", "*.tif", "*.tiff", "*.pnm", "*.ppm",
                        "*.pgm", "*.pbm", "*.jp2", "*.webp", "*.flac", "*.ogg", "*.wav")


class FileDataset(Dataset):
    """Files with int32 labels: outputs ``(bytes uint8 [n], label int32 [1])``."""

    layouts = (None, None)

    def __init__(self, paths: list[str], labels: list[int], names: list[str]) -> None:
        self.paths = paths
        self.names_given = names  # as DALI's source_info: relative to file_root, or as listed
        self.labels = [np.array([lab], dtype=np.int32) for lab in labels]
        # all labels as one (n, 1) array: a batch's labels are one fancy-indexing away
        self._label_column = np.array([lab[0] for lab in self.labels], np.int32).reshape(len(labels), 1)

    def __len__(self) -> int:
        return len(self.paths)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        return read_bytes(self.paths[i], f"sample {i}"), self.labels[i].copy()

    def read_many(self, indices: list[int]) -> list[Column]:
        paths = self.paths
        data = [read_bytes(paths[i], f"sample {i}") for i in indices]
        return [data, self._label_column[indices]]

    def describe(self, i: int) -> str:
        return f"{self.paths[i]} (sample {i})"

    def source_info(self, i: int, output: int) -> str:
        """The file's name as found under ``file_root`` or as listed (the data only; the label: empty)."""
        return self.names_given[i] if output == 0 else ""


def scan_root(file_root: str, file_filters: Sequence[str], dir_filters: Sequence[str] | None,
              case_sensitive: bool) -> tuple[list[str], list[int]]:
    """Files under ``file_root``'s sub-directories (their paths relative to it), labelled
    0..K-1 by the sorted sub-directory order, sorted by path."""
    if not os.path.isdir(file_root):
        raise ValueError(f"file_root {file_root!r} is not a directory")
    dirs = sorted(e.name for e in os.scandir(file_root) if e.is_dir())
    if dir_filters:
        dirs = [d for d in dirs if matches(d, dir_filters, case_sensitive)]
    pairs = []
    for label, d in enumerate(dirs):
        full = os.path.join(file_root, d)
        for e in os.scandir(full):
            if e.is_file() and matches(e.name, file_filters, case_sensitive):
                pairs.append((os.path.join(d, e.name), label))
    pairs.sort()
    return [p for p, _ in pairs], [lab for _, lab in pairs]


_LABEL = re.compile(r"[+-]?[0-9]+")


def parse_file_list(file_list: str) -> tuple[list[str], list[int]]:
    """The names and labels of ``name label`` lines (names may contain spaces, and are
    relative to ``file_root`` or to the list file's directory)."""
    names, labels = [], []
    try:
        with open(file_list, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"file_list {file_list!r} cannot be read: {e.strerror or e}") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.strip().rsplit(None, 1)
        try:
            if len(parts) != 2 or not _LABEL.fullmatch(parts[1]):  # (int() also takes "1_0")
                raise ValueError
            label = int(parts[1])
        except ValueError:
            raise ValueError(f"{file_list}:{lineno}: expected '<name> <label>', got {line!r}") from None
        if not -2**31 <= label < 2**31:
            raise ValueError(f"{file_list}:{lineno}: label {label} does not fit in int32 (the labels' type)")
        names.append(parts[0])
        labels.append(label)
    return names, labels


def int_labels(labels: Any) -> list[int]:
    """``labels`` as int32 values (one number is a list of one, as in DALI): ints, NumPy
    integers and integral floats; ValueError naming the first other entry."""
    if isinstance(labels, np.ndarray):
        labels = labels.tolist()
    if isinstance(labels, (int, float, np.number)):
        labels = [labels]
    if isinstance(labels, (str, bytes, Mapping)) or not isinstance(labels, Iterable):
        raise TypeError(f"`labels` must be a list of integers, got {type(labels).__name__}")
    labels = list(labels)  # (a generator, a dict's values, a pandas Series: any iterable)
    for i, v in enumerate(labels):
        integral = isinstance(v, (int, np.integer)) or (isinstance(v, (float, np.floating)) and float(v).is_integer())
        if not integral or not -2**31 <= v < 2**31:
            raise ValueError(f"`labels` must be integers (int32): entry {i} is {v!r}")
    return [int(v) for v in labels]


class File(StreamReader):
    """Reads files and labels: yields ``(data, label)``, the raw bytes (uint8 1-D, no
    layout) and an int32 label of shape (1,).

    Give one of ``file_root`` (sub-directories are labels 0..K-1 in sorted order; files
    matching ``file_filters``), ``file_list`` (``name label`` lines) or ``files`` (a list
    of paths, or one path, as in DALI; with integer ``labels``, by default 0, 1, 2, ...).
    See :class:`StreamReader` for the epoch, read-ahead and state rules.
    """

    _SHUFFLES_LIST = True

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        file_root: str | os.PathLike | None = None,
        file_list: str | os.PathLike | None = None,
        files: Sequence[str | os.PathLike] | None = None,
        labels: Sequence[int] | None = None,
        file_filters: Sequence[str] = DEFAULT_FILE_FILTERS,
        dir_filters: Sequence[str] | None = None,
        case_sensitive_filter: bool = False,
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
        self._file_list = None if file_list is None else os.fspath(file_list)
        self._files = None if files is None else path_list(files, "files")
        self._labels = None if labels is None else int_labels(labels)
        self._filters = patterns(file_filters, "file_filters")
        self._dir_filters = patterns(dir_filters, "dir_filters") if dir_filters is not None else None
        self._dir_filters = self._dir_filters or None
        self._case = flag(case_sensitive_filter, "case_sensitive_filter")
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
        root, lst, files, labels = self._file_root, self._file_list, self._files, self._labels
        if lst is not None and files is not None:
            raise ValueError("Give either `file_list` or `files`, not both")
        if labels is not None and files is None:
            raise ValueError("`labels` needs `files`")
        if files is not None:
            if labels is None:
                labels = list(range(len(files)))
            elif len(labels) != len(files):
                raise ValueError(f"`labels` has {len(labels)} entries but `files` has {len(files)}")
            names = list(files)
            paths = [os.path.join(root, f) for f in files] if root is not None else names
            check_files(paths, "files")
        elif lst is not None:
            names, labels = parse_file_list(lst)
            if not names:
                raise ValueError(f"file_list {lst!r} lists no files")
            base = root if root is not None else os.path.dirname(os.path.abspath(lst))
            paths = [os.path.join(base, n) for n in names]
            check_files(paths, "file_list")
        elif root is not None:
            names, labels = scan_root(root, self._filters, self._dir_filters, self._case)
            paths = [os.path.join(root, n) for n in names]
            if not paths:
                raise ValueError(
                    f"file_root {root!r} holds no files matching {self._filters} in its sub-directories"
                )
        else:
            raise ValueError("File reader needs `file_root`, `file_list` or `files`")
        return FileDataset(paths, labels, names)
