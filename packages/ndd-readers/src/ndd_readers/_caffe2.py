"""Caffe2 LMDB format: record parsing, an LMDB record source, and writers.

Each LMDB value is a serialized ``TensorProtos { repeated TensorProto protos = 1; }``
(``caffe2.proto``).  The layout of the protos inside a record, and the meaning of
``image_available``, ``label_type``, ``num_labels``, ``additional_inputs`` and
``bbox``, follow DALI's Caffe2 reader (reference section 5):

* ``protos[0]`` is the image when ``image_available``: ``STRING`` gives the encoded
  file from ``string_data[0]`` as uint8 1-D; ``BYTE`` gives raw pixels from
  ``byte_data`` shaped ``(H, W, C)`` from ``dims`` (C defaults to 1).
* The next proto is the label unless ``label_type == 4``.  Its ``data_type`` must be
  ``INT32`` (values from ``int32_data``, outputs int32) or ``FLOAT`` (values from
  ``float_data``, outputs float32); the output dtype follows the label proto for
  label types 0, 1 and 2, and is always float32 for type 3 (weighted sparse).
* For label types 1 and 3 one proto after the label is skipped before the
  additional inputs (for type 3 it holds the weights; for type 1 DALI skips it too).
* ``additional_inputs`` protos follow (FLOAT, INT32 or INT64 vectors).
* With ``bbox=True`` exactly one more proto must follow: INT32 with 4 values.
  With ``bbox=False`` any trailing protos are ignored.

Where DALI would read out of bounds or leave an output uninitialised, this module
raises ``ValueError`` naming the record instead.

Only numpy, lmdb and the standard library are used; the protobuf wire format is
decoded by the hand-written :mod:`._protowire`.
"""

from __future__ import annotations

import bisect
import gc
import os
import struct
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import lmdb
import numpy as np

from . import _protowire as pw

FLOAT = 1
INT32 = 2
BYTE = 3
STRING = 4
INT64 = 10

DATA_TYPES: dict[str, int] = {
    "UNDEFINED": 0,
    "FLOAT": 1,
    "INT32": 2,
    "BYTE": 3,
    "STRING": 4,
    "BOOL": 5,
    "UINT8": 6,
    "INT8": 7,
    "UINT16": 8,
    "INT16": 9,
    "INT64": 10,
    "FLOAT16": 12,
    "DOUBLE": 13,
}
_TYPE_NAMES = {v: k for k, v in DATA_TYPES.items()}

SINGLE_LABEL = 0
MULTI_LABEL_SPARSE = 1
MULTI_LABEL_DENSE = 2
MULTI_LABEL_WEIGHTED_SPARSE = 3
NO_LABEL = 4

PathArg = str | os.PathLike


def _type_name(data_type: int) -> str:
    return _TYPE_NAMES.get(data_type, str(data_type))


_NO_F32 = np.empty(0, np.float32)
_NO_I32 = np.empty(0, np.int32)
_NO_I64 = np.empty(0, np.int64)
for _a in (_NO_F32, _NO_I32, _NO_I64):
    _a.flags.writeable = False


class TensorProto:
    """The fields of a decoded ``caffe2.TensorProto`` that the parser uses.

    Absent numeric fields share read-only empty arrays, and ``byte_data`` and
    ``string_data`` are views into the record, so copy before handing out.
    """

    __slots__ = (
        "byte_data",
        "data_type",
        "dims",
        "float_data",
        "int32_data",
        "int64_data",
        "string_data",
    )

    def __init__(self) -> None:
        self.dims: list[int] = []
        self.data_type: int = FLOAT
        self.float_data: np.ndarray = _NO_F32
        self.int32_data: np.ndarray = _NO_I32
        self.int64_data: np.ndarray = _NO_I64
        self.byte_data: memoryview | bytes = b""
        self.string_data: list[memoryview] = []


def decode_tensor_proto(buf: bytes, start: int = 0, end: int | None = None) -> TensorProto:
    """Decode the ``TensorProto`` in ``buf[start:end]``.

    Raises ``_protowire.DecodeError`` for malformed wire data.
    """
    fields: dict[int, list[pw.Field]] = {}
    for f in pw.scan(buf, start, end):
        if f[0] in fields:
            fields[f[0]].append(f)
        else:
            fields[f[0]] = [f]
    t = TensorProto()
    if 1 in fields:
        t.dims = pw.repeated_varints(buf, fields[1], np.int64).tolist()
    if 2 in fields:
        _, wt, v, _ = fields[2][-1]
        pw.expect_varint(2, wt)
        t.data_type = v - (1 << 64) if v >= 1 << 63 else v
    if 3 in fields:
        t.float_data = pw.repeated_fixed(buf, fields[3], "<f4")
    if 4 in fields:
        t.int32_data = pw.repeated_varints(buf, fields[4], np.int32)
    if 5 in fields:
        _, wt, a, b = fields[5][-1]
        pw.expect_len(5, wt)
        t.byte_data = memoryview(buf)[a:b]
    if 6 in fields:
        view = memoryview(buf)
        for _, wt, a, b in fields[6]:
            pw.expect_len(6, wt)
            t.string_data.append(view[a:b])
    if 10 in fields:
        t.int64_data = pw.repeated_varints(buf, fields[10], np.int64)
    return t


def decode_tensor_protos(buf: pw.Buffer) -> list[TensorProto]:
    """Decode a serialized ``TensorProtos`` into its list of protos."""
    data = bytes(buf)
    protos = []
    for num, wt, a, b in pw.scan(data):
        if num == 1:
            pw.expect_len(1, wt)
            try:
                protos.append(decode_tensor_proto(data, a, b))
            except pw.DecodeError as e:
                raise pw.DecodeError(f"protos[{len(protos)}]: {e}") from None
    return protos


def _values(p: TensorProto) -> np.ndarray:
    """The label values of ``p``: int32_data for INT32, float_data for FLOAT."""
    return p.int32_data if p.data_type == INT32 else p.float_data


def _indices(values: np.ndarray, num_labels: int, what: str) -> np.ndarray:
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise ValueError(f"{what} contains a non-finite label index")
    idx = values.astype(np.int64)
    bad = (idx < 0) | (idx >= num_labels)
    if bad.any():
        raise ValueError(f"{what} has label index {int(idx[bad][0])} outside [0, num_labels={num_labels})")
    return idx


_decode_varint = pw.decode_varint


def fast_image_label(buf: bytes) -> tuple[int, int, int] | None:
    """Slice the overwhelmingly common record layout without decoding it generally.

    The layout is exactly two protos and nothing else: ``protos[0]`` = optional
    unpacked ``dims`` varints, ``data_type=STRING`` and one ``string_data``, in that
    order; ``protos[1]`` = ``data_type=INT32`` and one ``int32_data`` value, packed or
    unpacked.  For such a record, returns ``(a, b, label)``: the image is ``buf[a:b]``
    and ``label`` the int32 label, exactly what :func:`parse_caffe2_record` yields with
    ``image_available=True, label_type=0`` and no additional inputs or bbox.  For
    anything else (other field orders, names, float labels, extra protos, malformed
    data) returns None, and the caller uses the general parser, which produces the
    outputs or the error.  Every field boundary is checked against its message's end,
    so a record accepted here is one the general parser decodes the same way.
    """
    end = len(buf)
    try:
        if buf[0] != 0x0A:  # protos[0], length-delimited
            return None
        n = buf[1]
        p = 2
        if n >= 0x80:  # two-byte lengths inline, longer ones by the general decoder
            if buf[2] < 0x80:
                n = (n & 0x7F) | (buf[2] << 7)
                p = 3
            else:
                n, p = _decode_varint(buf, 1, end)
        e0 = p + n
        if e0 > end:
            return None
        t = buf[p]
        while t == 0x08:  # dims, unpacked varint: skip it
            q = p = p + 1
            while buf[p] >= 0x80:
                p += 1
            p += 1
            if p - q > 10 or p > e0:
                return None
            t = buf[p]
        # data_type = STRING, then string_data (field 6, length-delimited)
        if t != 0x10 or buf[p + 1] != STRING or buf[p + 2] != 0x32:
            return None
        n = buf[p + 3]
        p += 4
        if n >= 0x80:
            if buf[p] < 0x80:
                n = (n & 0x7F) | (buf[p] << 7)
                p += 1
            else:
                n, p = _decode_varint(buf, p - 1, e0)
        a = p
        if p + n != e0 or buf[e0] != 0x0A:  # the image fills protos[0]; protos[1] follows
            return None
        n = buf[e0 + 1]
        p = e0 + 2
        # protos[1] ends the record and starts with data_type = INT32
        if n >= 0x80 or p + n != end or buf[p] != 0x10 or buf[p + 1] != INT32:
            return None
        t = buf[p + 2]
        if t == 0x22:  # packed int32_data holding exactly one varint
            n = buf[p + 3]
            p += 4
            if n >= 0x80 or p + n != end:
                return None
        elif t == 0x20:  # one unpacked int32_data value
            p += 3
        else:
            return None
        v = buf[p]
        if v >= 0x80 or p + 1 != end:
            v, p = _decode_varint(buf, p, end)
            if p != end:
                return None
            v = ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000  # int64 -> int32, as astype
        return a, e0, v
    except (IndexError, pw.DecodeError):
        return None


def _check_args(label_type: int, num_labels: int, additional_inputs: int) -> None:
    if label_type not in (0, 1, 2, 3, 4):
        raise ValueError(f"label_type must be 0..4, got {label_type}")
    if label_type in (MULTI_LABEL_SPARSE, MULTI_LABEL_WEIGHTED_SPARSE) and num_labels < 1:
        raise ValueError(f"num_labels must be >= 1 for label_type {label_type}, got {num_labels}")
    if additional_inputs < 0:
        raise ValueError(f"additional_inputs must be >= 0, got {additional_inputs}")


def parse_caffe2_record(
    value: pw.Buffer,
    *,
    image_available: bool = True,
    label_type: int = 0,
    num_labels: int = 1,
    additional_inputs: int = 0,
    bbox: bool = False,
    source: str = "record",
) -> tuple[np.ndarray, ...]:
    """Parse one LMDB value into the reader outputs.

    Returns, in order: image (if ``image_available``), label (unless
    ``label_type == 4``), ``additional_inputs`` arrays, then bbox (if ``bbox``).
    ``source`` names the record in error messages.  Malformed records raise
    ``ValueError``.
    """
    _check_args(label_type, num_labels, additional_inputs)
    if image_available and label_type == SINGLE_LABEL and not additional_inputs and not bbox \
            and type(value) is bytes:
        fast = fast_image_label(value)
        if fast is not None:
            a, b, label = fast
            return np.frombuffer(value, np.uint8, b - a, a).copy(), np.array([label], np.int32)
    return parse_caffe2_record_general(
        value, image_available=image_available, label_type=label_type, num_labels=num_labels,
        additional_inputs=additional_inputs, bbox=bbox, source=source)


def parse_caffe2_record_general(
    value: pw.Buffer,
    *,
    image_available: bool = True,
    label_type: int = 0,
    num_labels: int = 1,
    additional_inputs: int = 0,
    bbox: bool = False,
    source: str = "record",
) -> tuple[np.ndarray, ...]:
    """:func:`parse_caffe2_record` without the fast path: decodes every proto."""
    _check_args(label_type, num_labels, additional_inputs)
    try:
        protos = decode_tensor_protos(value)
    except pw.DecodeError as e:
        raise ValueError(f"{source}: malformed Caffe2 TensorProtos: {e}") from None

    def proto(i: int, role: str) -> TensorProto:
        if i >= len(protos):
            raise ValueError(
                f"{source}: record has {len(protos)} protos, but the {role} is expected at protos[{i}]"
            )
        return protos[i]

    outputs: list[np.ndarray] = []
    pos = 0
    if image_available:
        outputs.append(_parse_image(proto(0, "image"), source))
        pos = 1

    if label_type != NO_LABEL:
        lab = proto(pos, "label")
        what = f"{source}: label protos[{pos}]"
        if lab.data_type not in (INT32, FLOAT):
            raise ValueError(f"{what} has data_type {_type_name(lab.data_type)}; expected INT32 or FLOAT")
        vals = _values(lab)
        if label_type == SINGLE_LABEL:
            if vals.size != 1:
                raise ValueError(f"{what} holds {vals.size} values; label_type 0 needs exactly 1")
            outputs.append(vals.copy())
        elif label_type == MULTI_LABEL_SPARSE:
            dense = np.zeros(num_labels, dtype=vals.dtype)
            dense[_indices(vals, num_labels, what)] = 1
            outputs.append(dense)
        elif label_type == MULTI_LABEL_DENSE:
            outputs.append(vals.copy())
        else:
            w = proto(pos + 1, "label weights")
            wwhat = f"{source}: label weights protos[{pos + 1}]"
            if w.data_type != FLOAT:
                raise ValueError(f"{wwhat} has data_type {_type_name(w.data_type)}; expected FLOAT")
            if w.float_data.size != vals.size:
                raise ValueError(f"{wwhat} holds {w.float_data.size} weights for {vals.size} label indices")
            dense = np.zeros(num_labels, dtype=np.float32)
            dense[_indices(vals, num_labels, what)] = w.float_data
            outputs.append(dense)
        pos += 1
        if label_type in (MULTI_LABEL_SPARSE, MULTI_LABEL_WEIGHTED_SPARSE):
            pos += 1

    for k in range(additional_inputs):
        p = proto(pos, f"additional input {k}")
        if p.data_type == FLOAT:
            outputs.append(p.float_data.copy())
        elif p.data_type == INT32:
            outputs.append(p.int32_data.copy())
        elif p.data_type == INT64:
            outputs.append(p.int64_data.copy())
        else:
            raise ValueError(
                f"{source}: additional input {k} (protos[{pos}]) has data_type "
                f"{_type_name(p.data_type)}; expected FLOAT, INT32 or INT64"
            )
        pos += 1

    if bbox:
        if len(protos) != pos + 1:
            raise ValueError(
                f"{source}: bbox=True needs exactly one proto after protos[{pos - 1}], "
                f"but the record has {len(protos)} protos"
            )
        b = protos[pos]
        if b.data_type != INT32 or b.int32_data.size != 4:
            raise ValueError(
                f"{source}: bbox protos[{pos}] must be INT32 with 4 values, got "
                f"{_type_name(b.data_type)} with {b.int32_data.size} int32 values"
            )
        outputs.append(b.int32_data.copy())
    return tuple(outputs)


def _parse_image(p: TensorProto, source: str) -> np.ndarray:
    if p.data_type == STRING:
        if not p.string_data:
            raise ValueError(f"{source}: STRING image protos[0] has no string_data")
        return np.frombuffer(p.string_data[0], dtype=np.uint8).copy()
    if p.data_type == BYTE:
        if len(p.dims) not in (2, 3):
            raise ValueError(f"{source}: BYTE image protos[0] needs dims (H, W) or (H, W, C), got {p.dims}")
        h, w = p.dims[0], p.dims[1]
        c = p.dims[2] if len(p.dims) == 3 else 1
        if min(h, w, c) < 0 or h * w * c != len(p.byte_data):
            raise ValueError(
                f"{source}: BYTE image protos[0] has dims {p.dims} but {len(p.byte_data)} bytes of byte_data"
            )
        return np.frombuffer(p.byte_data, dtype=np.uint8).reshape(h, w, c).copy()
    raise ValueError(
        f"{source}: image protos[0] has data_type {_type_name(p.data_type)}; "
        "expected STRING (encoded) or BYTE (raw HWC)"
    )


class Caffe2Source:
    """Random access to the values of one or several LMDB environments.

    Records are listed in key order, environment 0 first.  ``read`` opens one
    read-only transaction per call, so it is safe to call from many threads.
    """

    def __init__(self, paths: PathArg | Sequence[PathArg]) -> None:
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.paths: list[str] = [os.fspath(p) for p in paths]
        if not self.paths:
            raise ValueError("Caffe2Source needs at least one LMDB path")
        self._envs: list[lmdb.Environment] = []
        self._keys: list[list[bytes]] = []
        self._starts: list[int] = []
        total = 0
        try:
            for path in self.paths:
                env = _open_env(path)
                self._envs.append(env)
                try:
                    with env.begin() as txn:
                        keys = list(txn.cursor().iternext(keys=True, values=False))
                except lmdb.Error as e:
                    raise ValueError(f"{path}: corrupt LMDB database, listing its keys failed: {e}") from None
                if not keys:
                    raise ValueError(f"{path}: the LMDB database is empty")
                self._keys.append(keys)
                self._starts.append(total)
                total += len(keys)
        except BaseException:
            self.close()
            raise
        self._len = total

    def __len__(self) -> int:
        return self._len

    def _locate(self, i: int) -> tuple[int, int]:
        if not 0 <= i < self._len:
            raise IndexError(f"record index {i} out of range [0, {self._len})")
        e = bisect.bisect_right(self._starts, i) - 1
        return e, i - self._starts[e]

    def key(self, i: int) -> bytes:
        """The LMDB key of global record ``i``."""
        e, j = self._locate(i)
        return self._keys[e][j]

    def describe(self, i: int) -> str:
        """A short description of record ``i`` for error messages."""
        e, j = self._locate(i)
        return f"{self.paths[e]}: record {i} (key {self._keys[e][j]!r})"

    def source_info(self, i: int) -> str:
        """Record ``i`` as DALI's ``source_info`` names it: ``<path> at key <key>``."""
        e, j = self._locate(i)
        return f"{self.paths[e]} at key {self._keys[e][j].decode('utf-8', 'surrogateescape')}"

    def read(self, i: int) -> bytes:
        """Return the value of global record ``i``."""
        if not self._envs:
            raise RuntimeError("Caffe2Source is closed")
        e, j = self._locate(i)
        key = self._keys[e][j]
        try:
            with self._envs[e].begin() as txn:
                value = txn.get(key)
        except lmdb.Error as err:
            raise self._read_error(i, err) from None
        if value is None:
            raise RuntimeError(f"{self.describe(i)} is no longer in the database")
        return value

    def read_many(self, indices: Sequence[int]) -> list[bytes | None]:
        """The values of global records ``indices``, None for a key no longer stored.

        Uses one read-only transaction per environment for the whole call (safe from
        many threads, like :meth:`read`).  ``IndexError`` for an index out of range.
        """
        if not self._envs:
            raise RuntimeError("Caffe2Source is closed")
        if not indices:
            return []
        try:
            if len(self._envs) == 1 and 0 <= min(indices) and max(indices) < self._len:
                keys = self._keys[0]
                with self._envs[0].begin() as txn:
                    get = txn.get
                    return [get(keys[i]) for i in indices]
            txns: dict[int, lmdb.Transaction] = {}
            try:
                out = []
                for i in indices:
                    e, j = self._locate(i)
                    txn = txns.get(e)
                    if txn is None:
                        txn = txns[e] = self._envs[e].begin()
                    out.append(txn.get(self._keys[e][j]))
                return out
            finally:
                for txn in txns.values():
                    txn.abort()
        except lmdb.Error as err:
            for i in indices:  # one by one: the failing record's own error names it
                self.read(i)
            raise self._read_error(indices[0], err) from None

    def _read_error(self, i: int, err: lmdb.Error) -> ValueError:
        return ValueError(f"{self.describe(i)}: reading the record failed (corrupt LMDB database?): {err}")

    def close(self) -> None:
        """Let go of the environments; further reads raise ``RuntimeError``. An environment
        closes when no source refers to it any more."""
        self._envs = []

    def __enter__(self) -> Caffe2Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# LMDB allows one open environment per path and process, so sources over the same
# database (two readers, or a throwaway reader for metadata) share it. The cache holds
# the environments weakly: one closes when its last source is gone, never while a source
# (or a thread reading through one) still holds it, and no finalizer has to take a lock
# (a garbage-collected source used to release its environment from ``__del__``, which
# deadlocked when the collection ran inside an open on the same thread). The references
# have no callback (a WeakValueDictionary's runs Python code in the middle of the
# environment's deallocation, where another thread could find it gone but still open).
_ENVS: dict[str, weakref.ref] = {}
_ENVS_LOCK = threading.Lock()
# How long an open waits for an environment of the same path that is unreachable but not
# closed yet (garbage in a reference cycle that another thread's collection is freeing).
_CLOSING_WAIT_S = 2.0


def _open_env(path: str) -> lmdb.Environment:
    key = os.path.realpath(path)
    with _ENVS_LOCK:
        ref = _ENVS.get(key)
        env = ref() if ref is not None else None
        if env is None:
            env = _open_new_env(path)
            _ENVS[key] = weakref.ref(env)
        _check_size(path, env)  # also for a cached environment: the file may have shrunk since
        return env


def _open_new_env(path: str) -> lmdb.Environment:
    if not os.path.exists(path):
        raise ValueError(f"{path}: LMDB path does not exist")
    if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, "data.mdb")):
        raise ValueError(f"{path}: not an LMDB environment (expected a directory with data.mdb)")
    deadline = None
    while True:
        try:
            return lmdb.open(path, readonly=True, lock=False, readahead=False, create=False, max_dbs=0)
        except lmdb.Error as e:
            # py-lmdb refuses a path it has open: here only one that is being freed (see _ENVS).
            if "already open" not in str(e):
                raise ValueError(f"{path}: not a readable LMDB environment: {e}") from None
            now = time.monotonic()
            if deadline is None:
                deadline = now + _CLOSING_WAIT_S
                gc.collect()  # garbage that no collection has reached yet
            elif now > deadline:
                raise ValueError(f"{path}: the LMDB environment is still open in this process through "
                                 f"a handle ndd does not own ({e})") from None
            time.sleep(0.001)


# Page 0 of data.mdb: a 16-byte page header, then the meta (magic, version, address, map
# size, then the free-pages database, whose first field holds the page size).
_PSIZE_AT = 40
_META_END = _PSIZE_AT + 4


def _check_size(path: str, env: lmdb.Environment) -> None:
    """Raise ``ValueError`` when data.mdb is shorter than the pages the database uses.

    LMDB reads pages through a memory map: touching a page past the end of a truncated
    file kills the process with SIGBUS, and a page cut short reads as zeros.  LMDB itself
    refuses page numbers above ``last_pgno``, so a file of ``last_pgno + 1`` pages is safe.
    Reading ``last_pgno`` touches the two meta pages, so a shorter file is refused first
    (it matters for a cached environment whose file shrank after it was mapped).
    """
    data = os.path.join(path, "data.mdb")
    try:
        with open(data, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = os.pread(f.fileno(), _META_END, 0)
        # The database's own page size, read (not mapped) from the first meta page: it need
        # not be this machine's (a 4 KiB-page database on a 64 KiB-page host).
        psize = struct.unpack_from("<I", head, _PSIZE_AT)[0] if len(head) == _META_END else 0
        if size < 2 * psize or psize == 0:
            raise ValueError(f"{data} is {size} bytes, too short to hold an LMDB database (truncated?)")
        need = (env.info()["last_pgno"] + 1) * psize
    except (OSError, lmdb.Error) as e:
        raise ValueError(f"{path}: not a readable LMDB environment: {e}") from None
    if size < need:
        raise ValueError(
            f"{data} is {size} bytes, but the database needs {need} bytes "
            "(the file is truncated or was copied incompletely)"
        )


# ---------------------------------------------------------------- writers


def _data_type(value: int | str) -> int:
    if isinstance(value, str):
        try:
            return DATA_TYPES[value.upper()]
        except KeyError:
            raise ValueError(f"unknown Caffe2 data_type {value!r}") from None
    return int(value)


def _as_bytes(v: Any) -> bytes:
    return v.encode() if isinstance(v, str) else bytes(v)


_PROTO_KEYS = {
    "dims",
    "data_type",
    "float_data",
    "int32_data",
    "byte_data",
    "string_data",
    "name",
    "int64_data",
}


def encode_tensor_proto(proto: dict[str, Any]) -> bytes:
    """Serialize one ``TensorProto`` from a dict.

    Keys: ``dims``, ``data_type`` (int or name such as ``"STRING"``),
    ``float_data``, ``int32_data``, ``byte_data``, ``string_data``, ``name``,
    ``int64_data``.  ``dims`` is written unpacked, numeric data packed.
    """
    unknown = set(proto) - _PROTO_KEYS
    if unknown:
        raise ValueError(f"unknown TensorProto keys: {sorted(unknown)}")
    out = [pw.field_varint(1, d) for d in proto.get("dims", ())]
    if "data_type" in proto:
        out.append(pw.field_varint(2, _data_type(proto["data_type"])))
    if "float_data" in proto:
        out.append(pw.field_packed_floats(3, proto["float_data"]))
    if "int32_data" in proto:
        out.append(pw.field_packed_varints(4, (int(v) for v in proto["int32_data"])))
    if "byte_data" in proto:
        out.append(pw.field_bytes(5, _as_bytes(proto["byte_data"])))
    for s in proto.get("string_data", ()):
        out.append(pw.field_bytes(6, _as_bytes(s)))
    if "name" in proto:
        out.append(pw.field_bytes(7, _as_bytes(proto["name"])))
    if "int64_data" in proto:
        out.append(pw.field_packed_varints(10, (int(v) for v in proto["int64_data"])))
    return b"".join(out)


def encode_tensor_protos(protos: list[dict[str, Any]]) -> bytes:
    """Serialize a ``TensorProtos`` message from a list of proto dicts."""
    return b"".join(pw.field_bytes(1, encode_tensor_proto(p)) for p in protos)


def write_lmdb(path: PathArg, values: Iterable[bytes], map_size: int = 1 << 30) -> int:
    """Write ``values`` to a new LMDB at ``path`` under keys ``b"00000000"``, ...

    The map grows automatically when it fills up.  Returns the record count.
    """
    path = os.fspath(path)
    if os.path.exists(os.path.join(path, "data.mdb")):
        raise ValueError(f"{path}: an LMDB environment already exists there")
    env = lmdb.open(path, map_size=map_size, subdir=True, create=True)
    count = 0
    try:
        chunk: list[bytes] = []
        for v in values:
            chunk.append(bytes(v))
            if len(chunk) == 256:
                _put_chunk(env, count, chunk)
                count += len(chunk)
                chunk = []
        if chunk:
            _put_chunk(env, count, chunk)
            count += len(chunk)
    finally:
        env.close()
    return count


def _put_chunk(env: lmdb.Environment, first: int, chunk: list[bytes]) -> None:
    while True:
        try:
            with env.begin(write=True) as txn:
                for k, v in enumerate(chunk, first):
                    txn.put(b"%08d" % k, v)
            return
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)


def write_caffe2_lmdb(path: PathArg, records: Iterable[tuple[bytes, int]], map_size: int = 1 << 30) -> int:
    """Write ``(encoded_image, label)`` records in the Caffe2 format.

    The image is a STRING proto with ``dims=[len]`` and the label an INT32 proto.
    Returns the record count.
    """
    values = (
        encode_tensor_protos(
            [
                {"data_type": STRING, "dims": [len(img)], "string_data": [img]},
                {"data_type": INT32, "int32_data": [int(label)]},
            ]
        )
        for img, label in records
    )
    return write_lmdb(path, values, map_size)
