"""``StreamReader``: the shared machinery of this package's readers.

A concrete reader describes its data with a :class:`Dataset` (built by ``_open``); this
class adds DALI's common arguments, the epoch/shard/shuffle rules of
:class:`._stream.SampleStream`, read-ahead on a background thread and the reader state.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ndd import Batch, Reader, Tensor
from ndd._device import CPU
from ndd._dtype import DType, from_numpy
from ndd._storage import BatchData

from ._prefetch import Prefetcher
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED, Cursor, SampleStream, check_sharding

_DTYPES: dict[np.dtype, DType] = {}


def _dt(a: np.ndarray) -> DType:
    d = _DTYPES.get(a.dtype)
    if d is None:
        d = _DTYPES[a.dtype] = from_numpy(a.dtype)
    return d


Column = list[np.ndarray] | np.ndarray
"""One output of a batch: the per-sample arrays, or one array stacking samples that
share dtype and shape along a new leading axis."""


def columns(samples: list[tuple[np.ndarray, ...]]) -> list[Column]:
    """Per-sample output tuples as per-output lists."""
    return [list(col) for col in zip(*samples)]


class Dataset:
    """Random access to a reader's samples.

    ``read(i)`` returns the outputs of sample ``i`` as a tuple of NumPy arrays (safe to
    call from a background thread); ``names`` (a tuple, or None) makes the reader yield
    dicts; ``layouts`` gives one layout (or None) per output.
    """

    names: tuple[str, ...] | None = None
    layouts: tuple[str | None, ...] = ()
    groups: list[int] | None = None
    """The samples of each source file, in order, for readers whose ``shuffle_after_epoch``
    reorders whole files (see ``_stream``); None: it reorders samples."""

    def __len__(self) -> int:
        raise NotImplementedError

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        raise NotImplementedError

    def read_many(self, indices: list[int]) -> list[Column]:
        """The outputs of samples ``indices``, one :data:`Column` per output.

        The default reads sample by sample; datasets override it to read a batch at
        once. A column may be a dense array only when every sample's array has the same
        dtype and shape; errors must be those ``read`` would raise, in the same order.
        """
        return columns([self.read(i) for i in indices])

    def describe(self, i: int) -> str:
        """Names sample ``i`` (file, record) for error messages."""
        return f"sample {i}"

    def source_info(self, i: int, output: int) -> str:
        """DALI's ``source_info`` of output ``output`` of sample ``i`` (what
        ``ndd.get_property(x, key="source_info")`` gives): by default empty."""
        return ""

    def identity(self, i: int) -> bytes:
        """Bytes that stand for sample ``i``'s data whatever the reader's options (the state's
        hash of a few samples, see ``StreamReader._fingerprint``): by default its first output."""
        a = self.read(i)[0]
        return f"{a.dtype.str}{a.shape}".encode() + (a.tobytes() if a.dtype != object else repr(a).encode())

    def close(self) -> None:
        """Release files and handles."""


class _Origin:
    """The origin (core's ``BatchData.origin`` protocol) of output ``output`` of a batch of
    samples ``indices``: ``origin(i)`` names sample ``i``'s file or record for error
    messages, ``origin.source_info(i)`` is its DALI ``source_info``; both asked only when
    needed."""

    __slots__ = ("ds", "indices", "output")

    def __init__(self, ds: Dataset, indices: list[int], output: int) -> None:
        self.ds, self.indices, self.output = ds, indices, output

    def __call__(self, i: int) -> str:
        return self.ds.describe(self.indices[i])

    def source_info(self, i: int) -> str:
        return self.ds.source_info(self.indices[i], self.output)


def build_outputs(ds: Dataset, indices: list[int], batch_mode: bool,
                  read_many: Callable[[list[int]], list[Column]] | None = None) -> Any:
    """Read ``indices`` (with ``read_many``, or as ``ds`` reads) and wrap them as a tuple
    (or dict) of Batches or of Tensors."""
    if not batch_mode:
        first = [ds.read(i) for i in indices][0] if read_many is None else [c[0] for c in read_many(indices)]
        layouts = ds.layouts or (None,) * len(first)
        outs = tuple(Tensor._wrap(a, _dt(a), lay, CPU, a.ndim, origin=_Origin(ds, indices[:1], k))
                     for k, (a, lay) in enumerate(zip(first, layouts)))
    else:
        cols = (read_many or ds.read_many)(indices)
        layouts = ds.layouts or (None,) * len(cols)
        outs = []
        for k, (col, lay) in enumerate(zip(cols, layouts)):
            if isinstance(col, np.ndarray):  # already dense (the dataset checked the samples)
                data = BatchData(dense=col)
                data.origin = _Origin(ds, indices, k)
                outs.append(Batch._wrap(data, _dt(col), lay, CPU, col.ndim - 1, len(col)))
                continue
            a0 = col[0]
            dtype, ndim, shape = a0.dtype, a0.ndim, a0.shape
            same_shape = True
            for j, a in enumerate(col):
                if a.dtype != dtype or a.ndim != ndim:
                    raise ValueError(
                        f"{ds.describe(indices[j])}: output {k} has dtype {a.dtype} and {a.ndim} dims, "
                        f"but {ds.describe(indices[0])} in the same batch has {a0.dtype} and {a0.ndim}"
                    )
                if same_shape and a.shape != shape:
                    same_shape = False
            # Samples of one shape (labels, fixed-size records) travel as one dense array,
            # stacked once here on the read-ahead thread, so kernels downstream take their
            # vectorised paths; ragged outputs (encoded images) stay a list.
            data = BatchData(dense=np.stack(col)) if same_shape else BatchData(samples=col)
            data.origin = _Origin(ds, indices, k)
            outs.append(Batch._wrap(data, _dt(a0), lay, CPU, ndim, len(col)))
        outs = tuple(outs)
    if ds.names is not None:
        return dict(zip(ds.names, outs))
    return outs


def _epoch_jobs(ds: Dataset, stream: SampleStream, cur: Cursor, batch_size: int | None,
                skip: Callable[[], bool] | None = None) -> Iterator:
    """Yield ``(outputs, cursor_after)`` for the rest of the epoch at ``cur``; outputs are
    None, unread, for the steps where ``skip()`` (asked once per step, in order) is True."""
    for indices, after in stream.epoch_steps(cur, batch_size or 1):
        if skip is not None and skip():
            yield None, after
        else:
            yield build_outputs(ds, indices, batch_size is not None), after


class StreamReader(Reader):
    """A reader over a :class:`Dataset` with DALI's epoch semantics.

    * ``next_epoch(batch_size=B)`` yields full batches: ``ceil(shard_size / B)`` of them.
      Without ``pad_last_batch`` the last batch is topped up from the continuing stream
      (the next epoch starts offset); with it the shard is padded with its last sample.
    * The reader reads ahead on a background thread, ``prefetch_queue_depth`` steps
      ahead of the loop.
    * The state (``get_state``) is the position of the next sample the loop will receive,
      not the read-ahead position. ``set_state`` also works after iteration has begun.
    * Leaving an epoch early (``break``) and calling ``next_epoch`` again continues the
      *same* epoch from the first sample the loop did not receive: samples read ahead but
      not yielded are dropped and read again, so nothing is skipped or repeated.
    * ``lazy_init`` defers opening the dataset (and its errors) to the first use;
      ``read_ahead``, ``skip_cached_images``, ``dont_use_mmap`` and ``tensor_init_bytes``
      are accepted for compatibility and have no effect.
    """

    def __init__(
        self,
        max_batch_size: int | None,
        name: str | None,
        device: str,
        num_inputs: int | None,
        *,
        initial_fill: int,
        lazy_init: bool,
        pad_last_batch: bool,
        prefetch_queue_depth: int,
        random_shuffle: bool,
        read_ahead: bool,
        seed: int,
        shard_id: int,
        num_shards: int,
        stick_to_shard: bool,
        skip_cached_images: bool,
        dont_use_mmap: bool,
        tensor_init_bytes: int,
        shuffle_after_epoch: bool = False,
        shuffle_after_epoch_seed: int = DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
        enable_checkpointing: bool,
    ) -> None:
        super().__init__(max_batch_size, name, device, num_inputs, enable_checkpointing=enable_checkpointing)
        check_sharding(shard_id, num_shards)
        shard_id, num_shards = int(shard_id), int(num_shards)  # (NumPy integers: the state is JSON)
        stick_to_shard = flag(stick_to_shard, "stick_to_shard")
        pad_last_batch = flag(pad_last_batch, "pad_last_batch")
        random_shuffle = flag(random_shuffle, "random_shuffle")
        shuffle_after_epoch = flag(shuffle_after_epoch, "shuffle_after_epoch")
        shuffle_after_epoch_seed = integer(shuffle_after_epoch_seed, "shuffle_after_epoch_seed")
        lazy_init = flag(lazy_init, "lazy_init")
        for arg, v in (("read_ahead", read_ahead), ("skip_cached_images", skip_cached_images),
                       ("dont_use_mmap", dont_use_mmap)):
            flag(v, arg)  # checked, though they have no effect here
        if isinstance(prefetch_queue_depth, (bool, np.bool_)) or not isinstance(prefetch_queue_depth, (int, np.integer)) \
                or prefetch_queue_depth < 1:
            raise ValueError(f"prefetch_queue_depth must be an integer >= 1, got {prefetch_queue_depth!r}")
        if isinstance(initial_fill, (bool, np.bool_)) or not isinstance(initial_fill, (int, np.integer)) \
                or initial_fill < 0:
            raise ValueError(f"initial_fill must be an integer >= 0, got {initial_fill!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, (bool, np.bool_)):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        prefetch_queue_depth, initial_fill, seed = int(prefetch_queue_depth), int(initial_fill), int(seed)
        self._stream_args = dict(
            shard_id=shard_id, num_shards=num_shards, stick_to_shard=stick_to_shard,
            pad_last_batch=pad_last_batch, random_shuffle=random_shuffle, initial_fill=initial_fill,
            seed=seed, shuffle_after_epoch=shuffle_after_epoch,
            shuffle_after_epoch_seed=shuffle_after_epoch_seed,
        )
        self._depth = prefetch_queue_depth
        self._ds: Dataset | None = None
        self._stream: SampleStream | None = None
        self._cursor = Cursor()
        self._data_hash: str | None = None  # see _fingerprint
        if not lazy_init:
            self._init()

    # -- hooks for the concrete readers ------------------------------------------------
    # True for readers of a list of files (File, Numpy, COCO): with random_shuffle, DALI
    # shuffles such a list once, the same on every shard, before cutting it into shards.
    _SHUFFLES_LIST = False

    def _open(self) -> Dataset:
        raise NotImplementedError

    # -- machinery ---------------------------------------------------------------------
    def _init(self) -> SampleStream:
        if self._stream is None:
            ds = self._open()
            try:
                self._stream = SampleStream(len(ds), shuffle_list=self._SHUFFLES_LIST, groups=ds.groups,
                                            **self._stream_args)
            except BaseException:
                ds.close()
                raise
            self._ds = ds
        return self._stream

    def get_metadata(self, batch_size: int | None = None) -> dict[str, Any]:
        """``epoch_size``, ``epoch_size_padded``, ``number_of_shards``, ``shard_id``,
        ``pad_last_batch``, ``stick_to_shard``. Works at any time and locks nothing."""
        return self._init().metadata()

    def _epoch(self, batch_size: int | None, skip: Callable[[], bool] | None = None) -> Iterator:
        """One epoch's outputs; ``skip`` (see core's ``Reader._epoch``) leaves steps unread."""
        stream = self._init()
        fetch = Prefetcher(_epoch_jobs(self._ds, stream, self._cursor, batch_size, skip), self._depth)
        return self._deliver(fetch)

    def _deliver(self, fetch: Prefetcher) -> Iterator:
        try:
            for outputs, after in fetch:
                self._cursor = after  # the loop has received this step
                yield outputs
        finally:
            fetch.close()

    def _run(self, batch_size: int | None, **args: Any) -> Any:
        stream = self._init()
        indices, after = stream.take(stream.normalize(self._cursor, batch_size or 1), batch_size or 1,
                                     batch_size or 1)
        out = build_outputs(self._ds, indices, batch_size is not None, self._call_reader(indices, args))
        self._cursor = after
        return out

    def _call_reader(self, indices: list[int], args: dict[str, Any]) -> Callable[[list[int]], list[Column]] | None:
        """How a direct call with arguments ``args`` (see ``_CALL_ARGS``) reads ``indices``, as
        ``Dataset.read_many`` does; None: as the dataset reads."""
        return None

    def _state(self) -> dict:
        return {**self._init().state(self._cursor), "data": self._fingerprint()}

    def _restore(self, state: dict) -> None:
        stream = self._init()
        saved, config = state.get("data"), state.get("config")  # (states written before the hash have none)
        same_size = isinstance(config, dict) and config.get("size") == stream.size  # (else restore says why)
        if saved is not None and same_size and saved != self._fingerprint():
            raise ValueError("The state was saved by a reader over other data of the same size: the samples "
                             f"at positions {', '.join(map(str, self._probes()))} (hashed into the state) are "
                             "not this reader's")
        self._cursor = stream.restore(state)

    def _probes(self) -> list[int]:
        n = self._init().size
        return sorted({0, n // 3, 2 * n // 3, n - 1}) if n else []

    def _fingerprint(self) -> str:
        """A hash of a few samples' data (ours, see ``Dataset.identity``): a state restored
        into a reader over other data of the same size is refused, where only the size,
        sharding and shuffling are in the state itself. Not of paths (a dataset moved
        elsewhere keeps its states), nor of what the reader's options change (labels,
        features read, regions)."""
        if self._data_hash is None:
            h = hashlib.blake2b(digest_size=8)
            for i in self._probes():
                try:
                    h.update(self._ds.identity(i))
                except Exception as e:  # noqa: BLE001 - a sample the epoch will report when it reads it
                    h.update(type(e).__name__.encode())
            self._data_hash = h.hexdigest()
        return self._data_hash


# -- helpers shared by the readers ------------------------------------------------------


def flag(value: Any, arg: str) -> bool:
    """A yes/no argument: a bool (NumPy's too) or the integer 0 or 1; TypeError naming
    ``arg`` for anything else (``"no"`` would otherwise count as true)."""
    if isinstance(value, (bool, np.bool_)) or (type(value) is int and value in (0, 1)):
        return bool(value)
    raise TypeError(f"`{arg}` must be True or False, got {value!r}")


def integer(value: Any, arg: str, least: int | None = None) -> int:
    """An integer argument (a Python or NumPy integer, not a bool), at least ``least``;
    TypeError or ValueError naming ``arg``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{arg}` must be an integer, got {value!r}")
    if least is not None and value < least:
        raise ValueError(f"`{arg}` must be at least {least}, got {value}")
    return int(value)


def patterns(value: Any, arg: str) -> list[str]:
    """One glob pattern or a list of them; TypeError naming ``arg`` (and the entry) otherwise."""
    items = [value] if isinstance(value, str) else value
    if isinstance(items, (bytes, Mapping)) or not isinstance(items, Iterable):
        raise TypeError(f"`{arg}` must be a pattern or a list of patterns, got {value!r}")
    items = list(items)
    for i, v in enumerate(items):
        if not isinstance(v, str):
            raise TypeError(f"`{arg}` must be a pattern or a list of patterns: entry {i} is {v!r}")
    return items


def path_list(value: Any, arg: str) -> list[str]:
    """A str/PathLike (one path, as DALI takes it) or an iterable of them (a list, an
    array, a generator such as ``Path.glob``) as a list of str: TypeError naming ``arg``
    (and the entry) for anything else, ValueError if empty."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"`{arg}` must be a path or a list of paths, got {type(value).__name__}")
    value = list(value)
    if not value:
        raise ValueError(f"`{arg}` must be a path or a non-empty list of paths, got {value!r}")
    for i, p in enumerate(value):
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"`{arg}`: entry {i} must be a path (str or os.PathLike), got {type(p).__name__} {p!r}")
    return [os.fspath(p) for p in value]


def matches(name: str, patterns: Sequence[str], case_sensitive: bool) -> bool:
    """Whether ``name`` matches any glob pattern."""
    if case_sensitive:
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)
    low = name.lower()
    return any(fnmatch.fnmatchcase(low, p.lower()) for p in patterns)


def read_bytes(path: str, what: str) -> np.ndarray:
    """The bytes of a file as a writable uint8 1-D array (ValueError naming the file)."""
    # open + fstat + readinto a preallocated array: about half the cost of np.fromfile
    # for small files (which seeks and tells), and the array owns its memory.
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            out = np.empty(size, np.uint8)
            got = f.readinto(out)
            while got < size:  # a short read: keep reading until the end of the file
                k = f.readinto(memoryview(out)[got:])
                if not k:
                    return out[:got].copy()
                got += k
            return out
    except OSError as e:
        raise ValueError(f"{path}: cannot read {what}: {e.strerror or e}") from None


def check_files(paths: Sequence[str], arg: str) -> None:
    """ValueError naming the first path that is not a readable file."""
    for i, p in enumerate(paths):
        if not os.path.isfile(p) or not os.access(p, os.R_OK):
            raise ValueError(f"{p}: file #{i} of `{arg}` does not exist or is not readable")
