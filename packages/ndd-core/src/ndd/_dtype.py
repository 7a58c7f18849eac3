"""Element types: :class:`DType`, the dtype constants and conversions to NumPy."""

from __future__ import annotations

import enum
import re
from typing import Any

import numpy as np

from .types import DALIDataType, DALIImageType, DALIInterpType


class DType:
    """An element type, described by its kind and bit widths.

    Equality compares kind and widths (and the type id for enum types).
    ``str()`` is a short name such as ``i32`` or ``f32``.
    """

    class Kind(enum.Enum):
        signed = "signed"
        unsigned = "unsigned"
        float = "float"
        bool = "bool"
        enum = "enum"

    __slots__ = ("kind", "bits", "exponent_bits", "significand_bits", "_type_id", "_name", "_np")

    def __init__(
        self,
        kind: DType.Kind,
        bits: int,
        *,
        exponent_bits: int | None = None,
        significand_bits: int | None = None,
        type_id: DALIDataType | None = None,
        name: str | None = None,
        numpy_dtype: Any = None,
    ) -> None:
        self.kind = kind
        self.bits = bits
        self.exponent_bits = exponent_bits
        self.significand_bits = significand_bits
        self._type_id = type_id
        self._name = name
        self._np = np.dtype(numpy_dtype) if numpy_dtype is not None else None

    @property
    def bytes(self) -> int:
        return (self.bits + 7) // 8

    @staticmethod
    def parse(name: str) -> DType:
        """The DType a type name stands for (``"f32"``, ``"u8"``, ``"float32"``, ...), as DALI's."""
        if not isinstance(name, str):
            raise TypeError(f"DType.parse takes a type name, got {type(name).__name__}")
        return _as_dtype(name)

    @staticmethod
    def from_type_id(type_id: DALIDataType) -> DType:
        """The DType of a :class:`DALIDataType` element type, as DALI's."""
        return _as_dtype(type_id)

    @staticmethod
    def from_fw_type(numpy_type: Any) -> DType:
        """The DType of a NumPy dtype (or type), as DALI's."""
        return _as_dtype(np.dtype(numpy_type))

    @property
    def name(self) -> str:
        return self._name or _short_name(self)

    @property
    def type_id(self) -> DALIDataType | None:
        return self._type_id

    @property
    def numpy_dtype(self) -> np.dtype:
        """The matching NumPy dtype (ours; TypeError when NumPy has none)."""
        if self._np is None:
            raise TypeError(f"dtype {self} has no NumPy equivalent")
        return self._np

    def _key(self) -> tuple:
        tid = self._type_id if self.kind is DType.Kind.enum else None
        return (self.kind, self.bits, self.exponent_bits, self.significand_bits, tid)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self._key() == other._key()
        if isinstance(other, (str, DALIDataType, np.dtype)):
            try:
                return self == dtype(other)
            except (TypeError, ValueError):
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        if self.kind is DType.Kind.float and self.exponent_bits is not None and self._np is None:
            return (
                f"DType(kind=Kind.float, bits={self.bits}, exponent_bits={self.exponent_bits}, "
                f"significand_bits={self.significand_bits})"
            )
        if self.kind is DType.Kind.enum:
            return f"DType(kind=Kind.enum, bits={self.bits}, type_id={self._type_id.name})"
        return f"DType(kind=Kind.{self.kind.value}, bits={self.bits})"


def _short_name(dt: DType) -> str:
    k = dt.kind
    if k is DType.Kind.bool:
        return "bool"
    if k is DType.Kind.signed:
        return f"i{dt.bits}"
    if k is DType.Kind.unsigned:
        return f"u{dt.bits}"
    return f"f{dt.bits}e{dt.exponent_bits}m{dt.significand_bits}"


_K = DType.Kind
int8 = DType(_K.signed, 8, type_id=DALIDataType.INT8, numpy_dtype=np.int8)
int16 = DType(_K.signed, 16, type_id=DALIDataType.INT16, numpy_dtype=np.int16)
int32 = DType(_K.signed, 32, type_id=DALIDataType.INT32, numpy_dtype=np.int32)
int64 = DType(_K.signed, 64, type_id=DALIDataType.INT64, numpy_dtype=np.int64)
uint8 = DType(_K.unsigned, 8, type_id=DALIDataType.UINT8, numpy_dtype=np.uint8)
uint16 = DType(_K.unsigned, 16, type_id=DALIDataType.UINT16, numpy_dtype=np.uint16)
uint32 = DType(_K.unsigned, 32, type_id=DALIDataType.UINT32, numpy_dtype=np.uint32)
uint64 = DType(_K.unsigned, 64, type_id=DALIDataType.UINT64, numpy_dtype=np.uint64)
float16 = DType(
    _K.float, 16, exponent_bits=5, significand_bits=10, type_id=DALIDataType.FLOAT16,
    name="f16", numpy_dtype=np.float16,
)
float32 = DType(
    _K.float, 32, exponent_bits=8, significand_bits=23, type_id=DALIDataType.FLOAT,
    name="f32", numpy_dtype=np.float32,
)
float64 = DType(
    _K.float, 64, exponent_bits=11, significand_bits=52, type_id=DALIDataType.FLOAT64,
    name="f64", numpy_dtype=np.float64,
)
bfloat16 = DType(_K.float, 16, exponent_bits=8, significand_bits=7, name="bfloat16")  # (DALI's str)
bool = DType(_K.bool, 8, type_id=DALIDataType.BOOL, name="bool", numpy_dtype=np.bool_)  # noqa: A001
DataType = DType(_K.enum, 32, type_id=DALIDataType.DATA_TYPE, name="DataType", numpy_dtype=np.int32)
ImageType = DType(_K.enum, 32, type_id=DALIDataType.IMAGE_TYPE, name="ImageType", numpy_dtype=np.int32)
InterpType = DType(
    _K.enum, 32, type_id=DALIDataType.INTERP_TYPE, name="InterpType", numpy_dtype=np.int32
)

_ALL = (int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64,
        bfloat16, bool, DataType, ImageType, InterpType)
_BY_TYPE_ID = {d.type_id: d for d in _ALL if d.type_id is not None}
_BY_NUMPY = {d._np: d for d in _ALL if d._np is not None and d.kind is not _K.enum}
_BY_NAME: dict[str, DType] = {}
for _d in _ALL:
    _BY_NAME[_d.name.lower()] = _d
for _alias, _d in {
    "int8": int8, "int16": int16, "int32": int32, "int64": int64, "uint8": uint8,
    "uint16": uint16, "uint32": uint32, "uint64": uint64, "float16": float16, "half": float16,
    "float32": float32, "float": float32, "float64": float64, "double": float64,
    "bfloat16": bfloat16, "bool_": bool, "f16e5m10": float16, "f32e8m23": float32,
    "f64e11m52": float64, "f16e8m7": bfloat16, "datatype": DataType, "imagetype": ImageType,
    "interptype": InterpType,
}.items():
    _BY_NAME[_alias] = _d
_ENUM_DTYPES = {DALIDataType: DataType, DALIImageType: ImageType, DALIInterpType: InterpType}
_FLOAT_RE = re.compile(r"^f(\d+)e(\d+)m(\d+)$")


def dtype(x: Any) -> DType:
    """Convert a DType, DALIDataType, name string, NumPy dtype or torch dtype to a DType."""
    if isinstance(x, DType):
        # A subclass instance (capture's invariant marker of a dtype) is the DType it equals.
        return x if type(x) is DType else next((d for d in _BY_NAME.values() if d == x), x)
    if isinstance(x, DALIDataType):
        try:
            return _BY_TYPE_ID[x]
        except KeyError:
            raise ValueError(f"DALIDataType.{x.name} is not an element type") from None
    if type(x).__name__ == "DALIDataType" and isinstance(getattr(x, "name", None), str) \
            and x.name in DALIDataType.__members__:
        return dtype(DALIDataType[x.name])  # DALI's own enum (nvidia.dali.types), by name
    if x is float:  # as DALI: a Python float is float32
        return _BY_NAME["float32"]
    if isinstance(x, str):
        key = x.lower()
        if key in _BY_NAME:
            return _BY_NAME[key]
        if key == "tf32":
            return DType(_K.float, 19, exponent_bits=8, significand_bits=10, name="tf32")
        m = _FLOAT_RE.match(key)
        if m:
            bits, e, s = (int(g) for g in m.groups())
            if 1 + e + s != bits:
                raise ValueError(f"Invalid float type name {x!r}: 1 + {e} + {s} != {bits}")
            return DType(_K.float, bits, exponent_bits=e, significand_bits=s)
        raise ValueError(f"Unknown data type name {x!r}")
    mod = type(x).__module__
    if mod == "torch":
        return dtype(str(x).removeprefix("torch."))
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError(f"Cannot interpret {x!r} as a data type") from None
    try:
        return _BY_NUMPY[npd]
    except KeyError:
        raise TypeError(f"NumPy dtype {npd} has no ndd equivalent") from None


def type_id(dtype: Any) -> DALIDataType:  # (DALI's argument name; the function is _as_dtype here)
    """Return the :class:`DALIDataType` of a dtype-like value."""
    d = _as_dtype(dtype)
    if d.type_id is None:
        raise ValueError(f"dtype {d} has no type id")
    return d.type_id


_as_dtype = dtype


def numpy_or_none(dt: DType) -> np.dtype | None:
    """``dt``'s NumPy dtype, or None when NumPy has none (bfloat16): for type checks."""
    return dt._np


def from_numpy(npd: np.dtype) -> DType:
    """The DType of a NumPy dtype (TypeError if unsupported)."""
    try:
        return _BY_NUMPY[npd]
    except KeyError:
        raise TypeError(f"Unsupported element type {npd}") from None


def enum_dtype(enum_cls: type) -> DType | None:
    """The enum dtype (DataType, ImageType, InterpType) for a DALI enum class, or None."""
    return _ENUM_DTYPES.get(enum_cls)
