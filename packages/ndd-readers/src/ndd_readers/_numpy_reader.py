"""``ndd.readers.Numpy``: ``.npy`` files, whole or a region of interest."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ndd import Batch, Tensor
from ndd._dtype import from_numpy
from ndd._saturate import saturate_cast
from ndd._threads import AST_LOCK

from ._base import Dataset, StreamReader, check_files, columns, matches, path_list
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED

_START_ARGS = ("roi_start", "rel_roi_start")
_END_ARGS = ("roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape")
_POLICIES = ("error", "pad", "trim_to_shape")


def _llround(x: float) -> int:
    """Round half away from zero (C's ``llround``), as DALI rounds ROI coordinates."""
    r = math.floor(abs(x) + 0.5)
    return int(-r if x < 0 else r)


def _roi_values(name: str, value: Any) -> tuple[float, ...] | tuple[int, ...] | None:
    """A constructor-given ROI argument as a tuple of numbers (one per ROI axis).

    Accepts a number, a sequence, a NumPy array or a CPU ``Tensor`` (0-d: a scalar);
    a ``Batch`` raises ValueError. ``roi_*`` are integers, ``rel_roi_*`` fractions.
    """
    if value is None:
        return None
    if isinstance(value, Batch):
        raise ValueError(
            f"`{name}`: a Batch cannot be given in the reader's constructor; constructor arguments "
            "are broadcast to every sample (give a number, a list or a Tensor)"
        )
    if isinstance(value, Tensor):
        if value.device.device_type != "cpu":
            raise ValueError(f"`{name}`: reader arguments must be CPU tensors, got one on {value.device}")
        value = np.asarray(value)
    try:
        a = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`{name}` must be a number or a list of numbers, got {value!r}: {e}") from None
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1 or a.dtype.kind not in "iuf":
        raise ValueError(f"`{name}` must be a number or a flat list of numbers, got {value!r}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"`{name}` must hold finite numbers, got {value!r}")
    if name.startswith("rel_"):
        return tuple(float(v) for v in a)
    if a.dtype.kind == "f" and not np.all(a == np.round(a)):
        raise ValueError(f"`{name}` holds absolute coordinates (integers), got {value!r}; "
                         f"use `rel_{name}` for fractions of the extent")
    return tuple(int(v) for v in a)


class Roi:
    """A region of interest in DALI's terms (``roi_*`` / ``rel_roi_*``, ``roi_axes``,
    ``out_of_bounds_policy``, ``fill_value``), resolved per array shape by :meth:`window`."""

    def __init__(self, args: dict[str, Any], roi_axes: Any, out_of_bounds_policy: str, fill_value: Any) -> None:
        values = {k: _roi_values(k, v) for k, v in args.items()}
        given = {k: v for k, v in values.items() if v is not None}
        starts = [k for k in _START_ARGS if k in given]
        ends = [k for k in _END_ARGS if k in given]
        if len(starts) > 1:
            raise ValueError("`roi_start` and `rel_roi_start` are mutually exclusive")
        if len(ends) > 1:
            raise ValueError(" and ".join(f"`{k}`" for k in ends) + " are mutually exclusive (give one of "
                             "`roi_end`, `rel_roi_end`, `roi_shape`, `rel_roi_shape`)")
        if out_of_bounds_policy not in _POLICIES:
            raise ValueError(f"out_of_bounds_policy must be one of 'error', 'pad', 'trim_to_shape', "
                             f"got {out_of_bounds_policy!r}")
        try:
            self.fill_value = float(fill_value)
        except (TypeError, ValueError):
            raise ValueError(f"`fill_value` must be a number, got {fill_value!r}") from None
        if isinstance(roi_axes, Batch):
            raise ValueError("`roi_axes`: a Batch cannot be given in the reader's constructor")
        if roi_axes is None:
            axes: tuple[int, ...] | None = None
        else:
            a = np.asarray(roi_axes).reshape(-1) if not isinstance(roi_axes, (list, tuple)) \
                else np.asarray(list(roi_axes))
            if a.size and a.dtype.kind not in "iu":
                raise ValueError(f"`roi_axes` must be a list of axis indices, got {roi_axes!r}")
            axes = tuple(int(v) for v in a) or None
            if axes is not None and len(set(axes)) != len(axes):
                raise ValueError(f"`roi_axes` names an axis twice: {list(axes)}")
        if axes is not None:
            for k, v in given.items():
                if len(v) != len(axes):
                    raise ValueError(f"`{k}` has {len(v)} values but `roi_axes` names {len(axes)} axes")
        self.axes = axes
        self.policy = out_of_bounds_policy
        self.start = (starts[0], given[starts[0]]) if starts else None
        self.end = (ends[0], given[ends[0]]) if ends else None
        self.active = bool(given)

    def window(self, shape: tuple[int, ...], where: str) -> tuple[list[int], list[int]]:
        """``(anchor, end)`` per axis of an array of ``shape`` (end exclusive), after the
        out-of-bounds policy; ValueError naming ``where`` and the argument otherwise."""
        ndim = len(shape)
        if self.axes is None:
            axes = list(range(ndim))
            what = f"the array has {ndim} dims (give `roi_axes` to set fewer)"
        else:
            axes = []
            for d in self.axes:
                if not -ndim <= d < ndim:
                    raise ValueError(f"{where}: `roi_axes` {list(self.axes)} names axis {d}, but the array "
                                     f"has {ndim} dims (shape {tuple(shape)})")
                axes.append(d % ndim)
            if len(set(axes)) != len(axes):
                raise ValueError(f"{where}: `roi_axes` {list(self.axes)} names an axis twice for a {ndim}-D array")
            what = f"`roi_axes` names {len(axes)} axes"
        for arg in (self.start, self.end):
            if arg is not None and len(arg[1]) != len(axes):
                raise ValueError(f"{where}: `{arg[0]}` has {len(arg[1])} values but {what}")
        anchor, end = [0] * ndim, list(shape)
        start_name = self.start[0] if self.start else None
        end_name = self.end[0] if self.end else None
        for i, d in enumerate(axes):
            ext = shape[d]
            a: float = 0
            if start_name == "roi_start":
                a = self.start[1][i]
            elif start_name == "rel_roi_start":
                a = self.start[1][i] * ext
            e: float = ext
            if end_name == "roi_end":
                e = self.end[1][i]
            elif end_name == "rel_roi_end":
                e = self.end[1][i] * ext
            elif end_name in ("roi_shape", "rel_roi_shape"):
                s = self.end[1][i]
                if s < 0:
                    raise ValueError(f"{where}: `{end_name}` {list(self.end[1])} is negative on axis {d}")
                if end_name == "roi_shape":
                    e = a + s
                elif start_name == "rel_roi_start":  # DALI: one multiplication after the sum
                    e = (self.start[1][i] + s) * ext
                else:
                    e = a + s * ext
            if e < a:
                names = " and ".join(f"`{n}`" for n in (start_name, end_name) if n)
                raise ValueError(f"{where}: the region of interest ends before it starts on axis {d} "
                                 f"(start {a:g}, end {e:g}; from {names})")
            lo, hi = _llround(a), _llround(e)
            if self.policy == "trim_to_shape":
                lo, hi = min(max(lo, 0), ext), min(max(hi, 0), ext)
            elif self.policy == "error" and (lo < 0 or hi > ext):
                names = " and ".join(f"`{n}`" for n in (start_name, end_name) if n)
                raise ValueError(
                    f"{where}: the region of interest [{lo}, {hi}) on axis {d} is out of bounds of the "
                    f"array's shape {tuple(shape)} (from {names}); pass out_of_bounds_policy='pad' or "
                    f"'trim_to_shape' to allow it"
                )
            anchor[d], end[d] = lo, hi
        return anchor, end

    def read(self, arr: np.ndarray, where: str) -> np.ndarray:
        """The region of ``arr`` (possibly a read-only memory map) as a new writable,
        C-contiguous array; only the part inside ``arr`` is touched."""
        anchor, end = self.window(arr.shape, where)
        src, dst, inside = [], [], True
        for lo, hi, ext in zip(anchor, end, arr.shape):
            a, b = max(lo, 0), min(hi, ext)
            b = max(a, b)
            src.append(slice(a, b))
            dst.append(slice(a - lo, b - lo))
            inside = inside and lo >= 0 and hi <= ext
        if inside:
            return np.array(arr[tuple(src)], order="C", copy=True)
        # as DALI: the float32 argument converted with ConvertSat (rounded, clamped)
        with np.errstate(over="ignore"):  # float16: beyond its range is inf, no warning
            fill = saturate_cast(np.array([self.fill_value], np.float32), arr.dtype)[0]
        out = np.full([hi - lo for lo, hi in zip(anchor, end)], fill, dtype=arr.dtype)
        out[tuple(dst)] = arr[tuple(src)]
        return out


def _why_unreadable(path: str, error: Exception) -> str:
    """np.load's reason, except for a file that is no .npy at all (np.load takes any file
    without the magic string for a pickle, and would say it holds pickled data)."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return str(error)
    if head != b"\x93NUMPY" and not head.startswith(b"PK"):
        return f"it does not start with the .npy magic string (b'\\x93NUMPY'), it starts with {head!r}"
    return str(error)


class NumpyDataset(Dataset):
    """``.npy`` files: one output keeping each file's dtype (and shape, without a ROI)."""

    layouts = (None,)

    def __init__(self, paths: list[str], names: list[str], roi: Roi | None = None, use_mmap: bool = True) -> None:
        self.paths = paths
        self.names_given = names  # as DALI's source_info: as listed, or ./file and dir/file under file_root
        self.roi = roi if roi is not None and roi.active else None
        self.use_mmap = use_mmap

    def __len__(self) -> int:
        return len(self.paths)

    def _load(self, path: str, i: int, mmap: bool) -> np.ndarray:
        """The array of ``path``, memory-mapped when ``mmap``, else read whole. np.load runs
        under ``AST_LOCK`` (it parses the header with ast.literal_eval); a mapped file's data
        is read after it, so reader threads still read in parallel."""
        try:
            with AST_LOCK:
                arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            if mmap:  # e.g. a layout numpy cannot map: read the file whole
                return self._load(path, i, False)
            raise ValueError(f"{path} (sample {i}): not a readable .npy file: {_why_unreadable(path, e)}") from None
        if not isinstance(arr, np.ndarray):
            if hasattr(arr, "close"):
                arr.close()
            raise ValueError(f"{path} (sample {i}): holds an archive, not one array")
        return arr

    def read(self, i: int, roi: Roi | None = None) -> tuple[np.ndarray, ...]:
        """Sample ``i`` (its region ``roi``, by default the reader's)."""
        path = self.paths[i]
        roi = self.roi if roi is None else roi if roi.active else None
        if roi is None:  # (mapped unless dont_use_mmap: the whole array is copied out of the map)
            arr = self._load(path, i, self.use_mmap)
            dt = _native_dtype(arr, path, i)
            if isinstance(arr, np.memmap):
                return (np.array(arr, dt, order="C"),)
            return (arr.astype(dt, order="C", copy=False),)
        # Memory-map the file and copy out only the region: pages outside it are never read.
        arr = self._load(path, i, self.use_mmap)
        try:
            dt = _native_dtype(arr, path, i)
            return (roi.read(arr, f"{path} (sample {i})").astype(dt, copy=False),)
        finally:
            del arr

    def describe(self, i: int) -> str:
        return f"{self.paths[i]} (sample {i})"

    def source_info(self, i: int, output: int) -> str:
        return self.names_given[i]

    def identity(self, i: int) -> bytes:
        """The file's size and first 64 KiB (its header and leading data), whatever region
        the reader cuts: enough to tell datasets apart without reading large files whole."""
        with open(self.paths[i], "rb") as f:
            return str(os.fstat(f.fileno()).st_size).encode() + f.read(1 << 16)


def _native_dtype(arr: np.ndarray, path: str, i: int) -> np.dtype:
    """The dtype of ``arr`` in native byte order (big-endian files are converted);
    ValueError naming the file for an element type ndd does not have."""
    dt = arr.dtype.newbyteorder("=")
    try:
        from_numpy(dt)
    except TypeError:
        raise ValueError(f"{path} (sample {i}): element type {arr.dtype} is not supported") from None
    return dt


def _walk(root: str, pattern: str) -> tuple[list[str], list[str]]:
    """The paths and names of the files matching ``pattern`` in ``root`` and in its
    sub-directories, one level down (not deeper), as DALI lists them: the root's files
    first, then each sub-directory in sorted order, each directory's files sorted. A name is
    ``./file`` for a file of the root, ``dir/file`` in a sub-directory (DALI's source_info)."""
    if not os.path.isdir(root):
        raise ValueError(f"file_root {root!r} is not a directory")
    found, names = [], []
    with os.scandir(root) as entries:
        entries = sorted(entries, key=lambda e: e.name)
    for d in [None] + [e.name for e in entries if e.is_dir()]:
        where = root if d is None else os.path.join(root, d)
        with os.scandir(where) as inner:
            files = sorted(e.name for e in inner if e.is_file() and matches(e.name, [pattern], True))
        found.extend(os.path.join(where, n) for n in files)
        names.extend(f"{d or '.'}/{n}" for n in files)
    return found, names


def list_files(root: str | os.PathLike | None, file_filter: str, files: Sequence[str | os.PathLike] | None,
               file_list: str | os.PathLike | None, reader: str) -> tuple[list[str], list[str]]:
    """The paths and names of a file reader's files, as DALI's file readers list them: ``files``
    (relative to ``root`` if given), the lines of ``file_list`` (relative to ``root`` or to
    the list's directory) or the files of ``root`` matching ``file_filter`` (:func:`_walk`).
    ValueError naming ``reader`` and the argument when there are none or one is missing."""
    root = None if root is None else os.fspath(root)
    files = None if files is None else path_list(files, "files")
    lst = None if file_list is None else os.fspath(file_list)
    if files is not None and lst is not None:
        raise ValueError("Give either `file_list` or `files`, not both")
    if files is not None:
        names = list(files)
        paths = [os.path.join(root, f) for f in files] if root is not None else names
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
        paths, names = _walk(root, file_filter)
        if not paths:
            raise ValueError(f"file_root {root!r} holds no files matching {file_filter!r}")
    else:
        raise ValueError(f"{reader} reader needs `file_root`, `files` or `file_list`")
    return paths, names


class Numpy(StreamReader):
    """Reads ``.npy`` files: yields a 1-tuple ``(data,)`` with each file's dtype and shape.

    Give ``file_root`` (the files matching ``file_filter`` in it and in its sub-directories,
    one level down, as DALI lists them), ``files``
    (relative to ``file_root`` if given) or ``file_list`` (one name per line, relative to
    ``file_root`` or to the list's directory). See :class:`StreamReader` for the epoch,
    read-ahead and state rules.

    **Regions of interest** (DALI's arguments and rules): ``roi_start`` or
    ``rel_roi_start`` (default 0), and one of ``roi_end``, ``rel_roi_end`` (exclusive),
    ``roi_shape`` or ``rel_roi_shape`` (default: to the end of the axis). ``roi_*`` are
    integer coordinates, ``rel_roi_*`` fractions of each sample's extent; coordinates are
    rounded half away from zero. They give one value per axis of ``roi_axes`` (default:
    every axis, in order). ``out_of_bounds_policy`` decides what a region reaching
    outside the array does: ``"error"`` (ValueError naming the file and the argument),
    ``"pad"`` (filled with ``fill_value``, a float32 rounded and clamped to the file's dtype) or
    ``"trim_to_shape"`` (cut to the array). The file is memory-mapped and only the
    region is copied out (``dont_use_mmap=True`` reads the file whole first); the output
    is a writable C-contiguous array with the file's dtype (in native byte order), also
    for Fortran-order files.
    The ROI arguments are given in the constructor (a number, list, array or CPU
    ``Tensor``; a 0-d Tensor is a scalar; a ``Batch`` raises ValueError) and apply to
    every sample; ndd's readers take no per-call arguments.
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
        file_filter: str = "*.npy",
        files: Sequence[str | os.PathLike] | None = None,
        file_list: str | os.PathLike | None = None,
        cache_header_information: bool = False,
        register_buffers: bool = True,
        use_o_direct: bool = False,
        roi_start: Any = None,
        rel_roi_start: Any = None,
        roi_end: Any = None,
        rel_roi_end: Any = None,
        roi_shape: Any = None,
        rel_roi_shape: Any = None,
        roi_axes: Any = None,
        fill_value: float = 0.0,
        out_of_bounds_policy: str = "error",
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
        if not isinstance(file_filter, str):
            raise TypeError(f"`file_filter` must be a pattern (a string), got {file_filter!r}")
        self._file_filter = file_filter
        self._files = None if files is None else path_list(files, "files")
        self._file_list = None if file_list is None else os.fspath(file_list)
        self._roi_args = dict(roi_start=roi_start, rel_roi_start=rel_roi_start, roi_end=roi_end,
                              rel_roi_end=rel_roi_end, roi_shape=roi_shape, rel_roi_shape=rel_roi_shape)
        self._roi_rest = (roi_axes, out_of_bounds_policy, fill_value)
        self._roi = Roi(self._roi_args, *self._roi_rest)
        self._use_mmap = not dont_use_mmap
        super().__init__(
            max_batch_size, name, device, num_inputs, initial_fill=initial_fill, lazy_init=lazy_init,
            pad_last_batch=pad_last_batch, prefetch_queue_depth=prefetch_queue_depth,
            random_shuffle=random_shuffle, read_ahead=read_ahead, seed=seed, shard_id=shard_id,
            num_shards=num_shards, stick_to_shard=stick_to_shard, skip_cached_images=skip_cached_images,
            dont_use_mmap=dont_use_mmap, tensor_init_bytes=tensor_init_bytes,
            shuffle_after_epoch=shuffle_after_epoch, shuffle_after_epoch_seed=shuffle_after_epoch_seed,
            enable_checkpointing=enable_checkpointing,
        )

    _CALL_ARGS = _START_ARGS + _END_ARGS  # a direct call may give the region (per sample: a Batch)

    def _call_reader(self, indices: list[int], args: dict[str, Any]) -> Any:
        if not args:
            return None
        both = [k for k in args if self._roi_args[k] is not None]
        if both:
            raise ValueError(f"`{both[0]}` was given both to the reader's constructor and to the call")
        rois = []
        for j in range(len(indices)):
            given = dict(self._roi_args)
            for k, v in args.items():
                if isinstance(v, Batch):
                    if v.batch_size != len(indices):
                        raise ValueError(f"`{k}` has {v.batch_size} samples for a batch of {len(indices)}")
                    v = v.cpu().tensors[j]
                given[k] = v
            rois.append(Roi(given, *self._roi_rest))
        ds = self._ds

        def read_many(idx: list[int]) -> list:
            return columns([ds.read(i, roi) for i, roi in zip(idx, rois)])
        return read_many

    def _open(self) -> Dataset:
        paths, names = list_files(self._file_root, self._file_filter, self._files, self._file_list, "Numpy")
        return NumpyDataset(paths, names, self._roi, self._use_mmap)
