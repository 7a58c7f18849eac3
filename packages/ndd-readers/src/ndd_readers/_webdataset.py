"""``ndd.readers.Webdataset``: samples stored as files in tar archives (the webdataset format).

An archive's regular files are grouped into samples by *key*: consecutive members whose
names agree up to the first dot of their last path element. The rest of the name is the
member's *extension*, which picks the output it goes to. The grouping and extension rules
are DALI 2.4's (checked against it, including its corner cases): a name whose last
element has no dot is both its own key and its own extension, and members with an empty
key (top-level names starting with a dot) are left out; when such a member is the first
file of an archive, the archive starts with a sample without files.
"""

from __future__ import annotations

import os
import re
import tarfile
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ndd._dtype import DType
from ndd._dtype import dtype as as_dtype

from ._base import Dataset, StreamReader, flag, path_list
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED

BLOCK = 512  # tar's block size: every member's data starts at a multiple of it
INDEX_VERSIONS = {"v1.1": 3, "v1.2": 4}  # fields per component: ext offset size [name]
DTYPES = tuple(np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
                                      "float16", "float32", "float64"))
_MISSING = {"": "empty", "empty": "empty", "skip": "skip", "error": "error"}
_DECIMAL = re.compile(r"[0-9]+")

Component = tuple[str, int, int, str | None]
"""One file of a sample: ``(extension, data offset in the archive, size, member name or None)``."""


def split_name(name: str) -> tuple[str, str]:
    """``(key, extension)`` of an archive member's name (see the module docstring)."""
    dot = name.find(".", name.rfind("/") + 1)
    if dot < 0:
        return name, name
    return name[:dot], name[dot + 1:]


def scan_archive(path: str) -> list[list[Component]]:
    """The samples of a tar archive, in archive order (ValueError naming the archive and
    member for a file that is not a tar archive, or is truncated or corrupt)."""
    try:
        size = os.path.getsize(path)
        tf = tarfile.open(path, "r:")  # noqa: SIM115 - closed below
    except OSError as e:
        raise ValueError(f"{path}: cannot read the archive: {e.strerror or e}") from None
    except tarfile.TarError as e:
        raise ValueError(f"{path}: not a tar archive ({e})") from None
    samples: list[list[Component]] = []
    last_key = None
    name = None
    with tf:
        try:
            for m in tf:
                name = m.name
                if not m.isreg():
                    continue
                if m.issparse():
                    raise ValueError(f"{path}: member {name!r} is a sparse file, which webdataset archives cannot hold")
                if m.offset_data + m.size > size:
                    raise ValueError(f"{path}: member {name!r} ({m.size} bytes at offset {m.offset_data}) runs past "
                                     f"the end of the {size}-byte archive: the archive is truncated")
                key, ext = split_name(name)
                if last_key is None:  # the first file opens a sample, even one left out (as DALI)
                    samples.append([])
                    last_key = key
                if not key:
                    continue
                if key != last_key:
                    samples.append([])
                    last_key = key
                samples[-1].append((ext, m.offset_data, m.size, name))
        except tarfile.TarError as e:
            after = f"after member {name!r}" if name is not None else "at its start"
            raise ValueError(f"{path}: corrupt or truncated tar archive {after}: {e}") from None
        end = tf.offset
    _check_tail(path, end, size, name)
    if last_key is None:  # no files: DALI reads the closing zero block as a file without a name
        samples.append([])
    return samples


def _check_tail(path: str, start: int, size: int, last: str | None) -> None:
    """What follows the last member must be the zero blocks that end an archive (tarfile
    stops quietly at a header it cannot read)."""
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        while pos < size:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                after = f"after member {last!r}" if last is not None else "at its start"
                raise ValueError(f"{path}: corrupt or truncated tar header at offset {start} ({after})")
            pos += len(chunk)


def read_index(index_path: str, archive: str, archive_size: int) -> list[list[Component]]:
    """The samples an index file lists (DALI's ``v1.1`` and ``v1.2`` formats); ValueError
    naming the index file and line for a malformed index or one that does not fit the archive."""
    try:
        with open(index_path, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise ValueError(f"{index_path}: cannot read the index file: {e.strerror or e}") from None
    head = lines[0].split()
    if not head or head[0] not in INDEX_VERSIONS:
        found = repr(head[0]) if head else "nothing"
        raise ValueError(f"{index_path}:1: expected the index version (v1.1 or v1.2), found {found}")
    if len(head) != 2 or not _DECIMAL.fullmatch(head[1]):
        raise ValueError(f"{index_path}:1: expected '{head[0]} <number of samples>', got {lines[0]!r}")
    width = INDEX_VERSIONS[head[0]]
    fields = "<ext> <offset> <size>" + (" <name>" if width == 4 else "")
    n = int(head[1])
    samples: list[list[Component]] = []
    for lineno in range(2, n + 2):
        tokens = lines[lineno - 1].split() if lineno - 1 < len(lines) else []
        if not tokens:
            raise ValueError(f"{index_path}:{lineno}: no components for sample {lineno - 2} (the header "
                             f"announces {n} samples)")
        if len(tokens) % width:
            raise ValueError(f"{index_path}:{lineno}: every component must be '{fields}', got {lines[lineno - 1]!r}")
        sample = []
        for c in range(0, len(tokens), width):
            ext, off, size = tokens[c:c + 3]
            name = tokens[c + 3] if width == 4 else None
            if not (_DECIMAL.fullmatch(off) and _DECIMAL.fullmatch(size)):
                raise ValueError(f"{index_path}:{lineno}: offset and size must be decimal integers: "
                                 f"'{fields}', got {' '.join(tokens[c:c + width])!r}")
            off, size = int(off), int(size)
            if off % BLOCK:
                raise ValueError(f"{index_path}:{lineno}: offset {off} is not a multiple of the tar block "
                                 f"size ({BLOCK})")
            if off + size > archive_size:
                raise ValueError(f"{index_path}:{lineno}: component {name or ext!r} ({size} bytes at offset {off}) "
                                 f"runs past the end of the {archive_size}-byte archive {archive} (a truncated "
                                 "archive, or the index of another one)")
            sample.append((ext, off, size, name))
        samples.append(sample)
    return samples


def write_index(archive: str | os.PathLike, index_path: str | os.PathLike) -> int:
    """Write a ``v1.2`` index file of ``archive`` (as DALI's ``wds2idx``, with this reader's
    grouping rules); returns the number of samples. ValueError for a member whose name holds
    whitespace or whose extension is empty: the index format cannot list it."""
    archive, index_path = os.fspath(archive), os.fspath(index_path)
    samples = [s for s in scan_archive(archive) if s]  # (an index cannot list a sample without files)
    for s in samples:
        for ext, _, _, name in s:
            if name.split() != [name] or not ext:
                what = "an empty extension" if not ext else "whitespace in its name"
                raise ValueError(f"{archive}: member {name!r}: an index file cannot list a member with {what}")
    with open(index_path, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(f"v1.2 {len(samples)}\n")
        for s in samples:
            f.write(" ".join(f"{e} {o} {n} {name}" for e, o, n, name in s) + "\n")
    return len(samples)


def alternatives(spec: str) -> list[str]:
    """The extensions of one ``ext`` entry: ``';'``-separated; a trailing ``';'`` adds none,
    an inner empty one matches members whose extension is empty (as DALI splits the entry)."""
    parts = spec.split(";")
    if parts[-1] == "":
        parts.pop()
    return parts


class WebdatasetDataset(Dataset):
    """The samples of tar archives: one output per ``ext`` entry."""

    def __init__(self, paths: list[str], index_paths: list[str] | None, ext: list[str], dtypes: list[DType],
                 missing: str, case_sensitive: bool) -> None:
        self.paths = paths
        self.layouts = (None,) * len(ext)
        self._np = [d.numpy_dtype for d in dtypes]
        fold = (lambda s: s) if case_sensitive else str.lower
        wanted: dict[str, list[int]] = {}
        for o, spec in enumerate(ext):
            for e in dict.fromkeys(fold(a) for a in alternatives(spec)):
                wanted.setdefault(e, []).append(o)
        outs = len(ext)
        archive_of, keys, offsets, sizes, spans, members = [], [], [], [], [], []
        self.groups = []
        for a, path in enumerate(paths):
            try:
                archive_size = os.path.getsize(path)
            except OSError as e:
                raise ValueError(f"{path}: archive #{a} of `paths` cannot be read: {e.strerror or e}") from None
            samples = scan_archive(path) if index_paths is None else read_index(index_paths[a], path, archive_size)
            where = path if index_paths is None else f"{path} (index {index_paths[a]})"
            warned = False
            count = 0
            for j, comps in enumerate(samples):
                slots: list[Component | None] = [None] * outs
                filled = 0  # the files that fill some output
                for comp in comps:
                    fills = False
                    for o in wanted.get(fold(comp[0]), ()):
                        if slots[o] is None:
                            slots[o] = comp
                            fills = True
                        elif not warned:
                            warnings.warn(f"{where}: sample {j} has several components for output {o} "
                                          f"(ext {ext[o]!r}); the first one is read (as in DALI)", stacklevel=2)
                            warned = True
                    filled += fills
                key = split_name(comps[0][3])[0] if comps and comps[0][3] is not None else None
                label = f"sample {j}" + (f" ({key!r})" if key is not None else "")
                for o, comp in enumerate(slots):
                    if comp is not None and comp[2] % self._np[o].itemsize:
                        raise ValueError(f"{where}: {label}: component {comp[3] or comp[0]!r} has {comp[2]} bytes, "
                                         f"not a multiple of the {self._np[o].itemsize}-byte dtype "
                                         f"{self._np[o]} of output {o}")
                # Complete: one file per output. As in DALI, a file that fills several outputs counts
                # once, so such a sample is incomplete (e.g. ext=["png", "png"]).
                if filled < outs and missing != "empty":
                    if missing == "skip":
                        continue
                    if None in slots:
                        o = slots.index(None)
                        why = f"no component for output {o} (ext {ext[o]!r})"
                    else:
                        why = f"files for only {filled} of the {outs} outputs (a file matching several outputs counts once)"
                    raise ValueError(f"{where}: {label} has {why}, and missing_component_behavior is 'error'")
                archive_of.append(a)
                keys.append(label)
                offsets.append([c[1] if c is not None else 0 for c in slots])
                sizes.append([c[2] if c is not None else -1 for c in slots])
                members.append([c[3] or "" if c is not None else None for c in slots])
                spans.append((min(c[1] for c in comps), max(c[1] + c[2] for c in comps)) if comps else (0, 0))
                count += 1
            self.groups.append(count)
        if not keys:
            why = " with a component for every output (missing_component_behavior is 'skip')" if missing == "skip" else ""
            raise ValueError(f"The archives {paths} hold no samples{why}")
        self._archive = np.asarray(archive_of, np.int64)
        self._labels = keys
        self._offsets = np.asarray(offsets, np.int64).reshape(len(keys), outs)
        self._sizes = np.asarray(sizes, np.int64).reshape(len(keys), outs)
        self._spans = np.asarray(spans, np.int64).reshape(len(keys), 2)
        self._members = members  # each output's member name ("": the index names none; None: no file)
        self._files = []
        try:
            for path in paths:
                self._files.append(open(path, "rb", buffering=0))  # noqa: SIM115 - closed by close()
        except OSError as e:
            self.close()
            raise ValueError(f"{e.filename}: cannot open the archive: {e.strerror or e}") from None

    def __len__(self) -> int:
        return len(self._labels)

    def _pread(self, i: int, offset: int, out: np.ndarray) -> None:
        fd = self._files[int(self._archive[i])].fileno()
        view = memoryview(out.view(np.uint8).reshape(-1))
        got = 0
        while got < len(view):
            k = os.preadv(fd, [view[got:]], offset + got)
            if not k:
                raise ValueError(f"{self.describe(i)}: the archive ends {len(view) - got} bytes short of the "
                                 f"component at offset {offset}: it was truncated after the reader opened it")
            got += k

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        if not self._files:
            raise RuntimeError("The Webdataset reader's archives are closed")
        out = []
        for o, (off, size) in enumerate(zip(self._offsets[i].tolist(), self._sizes[i].tolist())):
            dt = self._np[o]
            if size < 0:
                out.append(np.empty(0, dt))
                continue
            a = np.empty(size // dt.itemsize, dt)
            self._pread(i, off, a)
            out.append(a)
        return tuple(out)

    def identity(self, i: int) -> bytes:
        lo, hi = self._spans[i].tolist()
        a = np.empty(hi - lo, np.uint8)
        self._pread(i, lo, a)
        return a.tobytes()  # the sample's files, whatever outputs are read from them

    def describe(self, i: int) -> str:
        return f"{self.paths[int(self._archive[i])]}: {self._labels[i]} (sample {i} of the dataset)"

    def source_info(self, i: int, output: int) -> str:
        """``<archive>:<data offset>:<member name>`` of the output's file; empty when the sample has none."""
        name = self._members[i][output]
        if name is None:
            return ""
        return f"{self.paths[int(self._archive[i])]}:{int(self._offsets[i, output])}:{name}"

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files = []


def _ext_list(ext: Any) -> list[str]:
    items = [ext] if isinstance(ext, str) else ext
    if isinstance(items, (bytes, dict)) or not isinstance(items, Sequence) or not items:
        raise TypeError(f"`ext` must be a string or a non-empty list of strings (one per output), got {ext!r}")
    for k, e in enumerate(items):
        if not isinstance(e, str):
            raise TypeError(f"`ext`: entry {k} must be a string, got {type(e).__name__} {e!r}")
    return list(items)


def _dtype_list(dtypes: Any, n: int) -> list[DType]:
    if dtypes is None:
        return [as_dtype("uint8")] * n
    items = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes]
    if len(items) != n:
        raise ValueError(f"`dtypes` has {len(items)} entries but `ext` has {n}: give one dtype per output")
    out = []
    for k, d in enumerate(items):
        try:
            dt = as_dtype(d)
        except (TypeError, ValueError) as e:
            raise TypeError(f"`dtypes`: entry {k}: {e}") from None
        try:
            npd = dt.numpy_dtype
        except TypeError:
            npd = None
        if npd not in DTYPES:
            raise ValueError(f"`dtypes`: entry {k} is {npd or dt}; the Webdataset reader supports "
                             f"{', '.join(map(str, DTYPES))}")
        out.append(dt)
    return out


class Webdataset(StreamReader):
    """Reads webdataset tar archives: yields one uint8 1-D Batch (or Tensor) per ``ext``
    entry, the bytes of the sample's file with that extension (``"jpg;png"`` takes either;
    the first one in the archive when a sample has several), viewed as ``dtypes``.

    ``index_paths`` gives one index file per archive (DALI's ``wds2idx`` format, or
    :func:`write_index`); without it the archives are scanned when the reader opens.
    ``missing_component_behavior``: ``"empty"`` (the default, also ``""``) yields an empty
    array for a missing file, ``"skip"`` leaves such samples out, ``"error"`` raises.
    ``shuffle_after_epoch`` visits the archives in a fresh order each epoch, keeping each
    archive's samples in order. See :class:`StreamReader` for the epoch, read-ahead and
    state rules.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        paths: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        ext: str | Sequence[str] | None = None,
        index_paths: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        missing_component_behavior: str = "",
        dtypes: Any = None,
        case_sensitive_extensions: bool = True,
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
        if paths is None:
            raise ValueError("Webdataset reader needs `paths` (a tar archive or a list of them)")
        if ext is None:
            raise ValueError("Webdataset reader needs `ext` (the extensions of each output)")
        self._paths = path_list(paths, "paths")
        self._ext = _ext_list(ext)
        self._index_paths = None if index_paths is None else path_list(index_paths, "index_paths")
        if self._index_paths is not None and len(self._index_paths) != len(self._paths):
            raise ValueError(f"`index_paths` has {len(self._index_paths)} entries but `paths` has "
                             f"{len(self._paths)}: give one index file per archive")
        if not isinstance(missing_component_behavior, str) or \
                missing_component_behavior.lower() not in _MISSING:
            raise ValueError("missing_component_behavior must be 'empty', 'skip' or 'error', got "
                             f"{missing_component_behavior!r}")
        self._missing = _MISSING[missing_component_behavior.lower()]
        self._dtypes = _dtype_list(dtypes, len(self._ext))
        self._case = flag(case_sensitive_extensions, "case_sensitive_extensions")
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
        return WebdatasetDataset(self._paths, self._index_paths, self._ext, self._dtypes, self._missing,
                                 self._case)
