"""Enumerations shared with DALI (``import ndd.types as types``).

``types.GRAY``, ``types.INTERP_LINEAR``, ``types.FLOAT`` and the enum classes
``DALIDataType``, ``DALIImageType`` and ``DALIInterpType`` work as in DALI.
"""

from __future__ import annotations

import enum


class _DALIEnum(enum.IntEnum):
    """An int enum that prints as ``Class.MEMBER``, as DALI's do (Python 3.11's IntEnum
    prints the number)."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class DALIDataType(_DALIEnum):
    """Type ids of tensor element types (values follow DALI's numbering)."""

    NO_TYPE = -1
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    UINT64 = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    FLOAT16 = 8
    FLOAT = 9
    FLOAT64 = 10
    BOOL = 11
    STRING = 12
    IMAGE_TYPE = 20
    DATA_TYPE = 21
    INTERP_TYPE = 22
    TENSOR_LAYOUT = 23
    PYTHON_OBJECT = 24


class DALIImageType(_DALIEnum):
    """Colour spaces of decoded images."""

    RGB = 0
    BGR = 1
    GRAY = 2
    YCbCr = 3
    ANY_DATA = 4


class DALIInterpType(_DALIEnum):
    """Interpolation methods of geometric operators."""

    INTERP_NN = 0
    INTERP_LINEAR = 1
    INTERP_CUBIC = 2
    INTERP_LANCZOS3 = 3
    INTERP_TRIANGULAR = 4
    INTERP_GAUSSIAN = 5


# Module-level aliases, as ``nvidia.dali.types`` provides them.
for _enum in (DALIDataType, DALIImageType, DALIInterpType):
    globals().update(_enum.__members__)
del _enum
