"""DType, the dtype constants and ndd.types."""

import numpy as np
import pytest

import ndd
import ndd.types as types


def test_constants_and_properties():
    assert ndd.int32.kind is ndd.DType.Kind.signed and ndd.int32.bits == 32 and ndd.int32.bytes == 4
    assert ndd.uint8.kind is ndd.DType.Kind.unsigned
    assert ndd.float16.exponent_bits == 5 and ndd.float16.significand_bits == 10
    assert ndd.bfloat16.exponent_bits == 8 and ndd.bfloat16.significand_bits == 7
    assert ndd.bool.kind is ndd.DType.Kind.bool
    assert ndd.ImageType.kind is ndd.DType.Kind.enum


@pytest.mark.parametrize(
    "dt,short", [(ndd.int32, "i32"), (ndd.uint8, "u8"), (ndd.float32, "f32"), (ndd.float64, "f64"),
                 (ndd.bool, "bool"), (ndd.int64, "i64"), (ndd.float16, "f16"), (ndd.bfloat16, "bfloat16")]
)
def test_str(dt, short):
    assert str(dt) == short


def test_enums_print_as_dali_s():
    """str() and f-strings of the enums give ``Class.MEMBER`` as DALI's do (Python 3.11's
    IntEnum would print the number); they still are ints."""
    assert str(types.FLOAT) == f"{types.FLOAT}" == "DALIDataType.FLOAT"
    assert str(types.GRAY) == "DALIImageType.GRAY" and f"{types.INTERP_LINEAR}" == "DALIInterpType.INTERP_LINEAR"
    assert types.FLOAT == 9 and int(types.GRAY) == 2 and f"{types.FLOAT:>20}".strip() == "DALIDataType.FLOAT"


def test_repr_and_equality():
    assert repr(ndd.int32) == "DType(kind=Kind.signed, bits=32)"
    assert ndd.dtype("i32") == ndd.int32
    assert ndd.dtype("float32") is ndd.float32 and ndd.dtype("float") is ndd.float32
    assert ndd.dtype("bfloat16") is ndd.bfloat16
    assert ndd.dtype("f16e5m10") == ndd.float16
    assert ndd.dtype(np.dtype(np.uint16)) is ndd.uint16
    assert ndd.dtype(np.float64) is ndd.float64
    assert ndd.dtype(types.DALIDataType.FLOAT) is ndd.float32
    assert ndd.int32 != ndd.uint32 and ndd.ImageType != ndd.InterpType
    assert hash(ndd.dtype("i32")) == hash(ndd.int32)
    custom = ndd.dtype("f12e5m6")
    assert custom.bits == 12 and custom.exponent_bits == 5


def test_dtype_errors():
    with pytest.raises(ValueError, match="Unknown data type name"):
        ndd.dtype("int33")
    with pytest.raises(ValueError, match="1 \\+ 5 \\+ 6 != 13"):
        ndd.dtype("f13e5m6")
    with pytest.raises(TypeError):
        ndd.dtype(object())


def test_type_id():
    assert ndd.type_id(ndd.int32) is types.DALIDataType.INT32
    assert ndd.type_id("u8") is types.DALIDataType.UINT8
    with pytest.raises(ValueError, match="no type id"):
        ndd.type_id(ndd.bfloat16)


def test_types_module_aliases():
    assert types.GRAY is types.DALIImageType.GRAY and int(types.GRAY) == 2
    assert int(types.RGB) == 0 and int(types.BGR) == 1 and int(types.YCbCr) == 3 and int(types.ANY_DATA) == 4
    assert types.INTERP_LINEAR is types.DALIInterpType.INTERP_LINEAR
    assert types.FLOAT is types.DALIDataType.FLOAT
    assert {m.name for m in types.DALIInterpType} == {
        "INTERP_NN", "INTERP_LINEAR", "INTERP_CUBIC", "INTERP_LANCZOS3", "INTERP_TRIANGULAR", "INTERP_GAUSSIAN"}


class _ForeignEnum:
    """Stands for DALI's own (pybind11) enum values: a class of the same name, with .name."""

    def __init__(self, cls_name: str, name: str) -> None:
        self.__class__ = type(cls_name, (_ForeignEnum,), {})
        self.name = name


def test_dalis_own_enum_values_are_taken_by_name():
    """Code that keeps ``import nvidia.dali.types as types`` passes DALI's enum objects."""
    foreign_float = _ForeignEnum("DALIDataType", "FLOAT")
    assert ndd.dtype(foreign_float) == ndd.float32
    t = ndd.tensor(np.array([1.7, 300.0]), dtype=_ForeignEnum("DALIDataType", "UINT8"))
    assert t.dtype == ndd.uint8 and np.asarray(t).tolist() == [2, 255]
    assert ndd.cast(t, dtype=foreign_float).dtype == ndd.float32
    assert ndd.dtype(float) == ndd.float32  # a Python float is float32, as in DALI
