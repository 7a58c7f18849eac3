"""Operator schemas: inputs, arguments with types and defaults, output metadata."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from . import _dtype
from ._tensor import Tensor
from .types import DALIImageType, DALIInterpType


class OutMeta(NamedTuple):
    """Metadata of one output, known without running the operator."""

    dtype: _dtype.DType
    ndim: int
    layout: str | None


# Argument kinds and the Python values each accepts.
INT, FLOAT, BOOL, STR, DTYPE, IMAGE_TYPE, INTERP_TYPE, INTS, FLOATS, ANY = (
    "int", "float", "bool", "str", "dtype", "image_type", "interp_type", "ints", "floats", "any",
)
_PER_SAMPLE_NP = {INT: np.int32, FLOAT: np.float32, BOOL: np.bool_, INTS: np.int32,
                  FLOATS: np.float32, INTERP_TYPE: np.int32, IMAGE_TYPE: np.int32}


@dataclass(frozen=True)
class Arg:
    """One keyword argument of an operator.

    ``per_sample`` marks DALI's tensor arguments: they also accept a Batch with one
    value per sample.
    """

    kind: str
    default: Any = None
    per_sample: bool = False
    required: bool = False
    doc: str = ""
    choices: tuple | None = None

    @property
    def sample_dtype(self) -> Any:
        return _PER_SAMPLE_NP.get(self.kind, None)


def given(args: Any, name: str) -> bool:
    """Whether argument ``name`` was passed to a call: a constant, or a Batch of per-sample
    values (which sits in ``args.batch_args``, with None in ``args[name]``)."""
    return args.get(name) is not None or name in getattr(args, "batch_args", {})


def _type_error(op: str, name: str, expected: str, value: Any) -> TypeError:
    return TypeError(
        f"Operator `{op}`: argument '{name}' expects {expected}, got {type(value).__name__} {value!r}"
    )


# Float arguments that may be NaN or infinite (a fill value); every other one must be finite:
# a NaN size, angle or mean would give a raw error deep in a kernel, or NaN/black images.
NON_FINITE_OK = frozenset({"fill_value", "fill_values", "on_value", "off_value", "values"})


def _not_finite(op: str, name: str, value: Any, sample: int | None = None) -> ValueError:
    where = "" if sample is None else f" (sample {sample})"
    return ValueError(f"Operator `{op}`: argument '{name}' must be finite, got {value}{where}")


def check_finite(op: str, name: str, values: Any) -> None:
    """Raise ValueError when a per-sample float argument holds a NaN or an infinity
    (``values``: a PerSample's dense array or its list of arrays)."""
    if name in NON_FINITE_OK:
        return
    if isinstance(values, np.ndarray):
        if not np.isfinite(values).all():
            i = int(np.flatnonzero(~np.isfinite(values.reshape(len(values), -1)).all(axis=1))[0])
            raise _not_finite(op, name, values[i].tolist(), i)
        return
    for i, x in enumerate(values):
        if not np.isfinite(x).all():
            raise _not_finite(op, name, x.tolist(), i)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _flatten(op: str, name: str, v: list | tuple) -> list:
    """A list of values, or a rectangular nest of them (a matrix, a (1, 1, 3) mean) row by row."""
    if not any(isinstance(x, (list, tuple)) for x in v):
        return list(v)
    try:
        arr = np.asarray(v)
    except ValueError:  # ragged
        arr = np.empty(0, object)
    if arr.dtype == object:
        raise _type_error(op, name, "a list of numbers or a rectangular nest of them", v)
    return arr.ravel().tolist()


_PLAIN_INTS = frozenset({int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})
_PLAIN_FLOATS = _PLAIN_INTS | {float, np.float16, np.float32, np.float64}


def _plain_numbers(items: list, floats: bool, non_finite_ok: bool) -> tuple | None:
    """``items`` as the tuple ``convert_arg`` makes of them, when they are ints (and floats, for
    a float list; finite unless allowed), Python's or NumPy's: checked a whole list at a time,
    which for long lists (box_encoder's tens of thousands of anchor values) is ten times
    faster than value by value. None for anything else, which the value-by-value path checks
    and reports."""
    kinds = set(map(type, items))
    if floats and kinds <= _PLAIN_FLOATS:
        vals = tuple(map(float, items))
        return vals if non_finite_ok or all(map(math.isfinite, vals)) else None
    if not floats and kinds <= _PLAIN_INTS:
        return tuple(map(int, items))
    return None


def convert_arg(op: str, name: str, spec: Arg, v: Any) -> Any:
    """Check and normalise a constant (non-Batch) argument value."""
    if isinstance(v, Tensor):
        v = v._host()
    elif hasattr(v, "__dlpack__") and hasattr(v, "__array__") and not isinstance(v, (np.ndarray, np.generic)):
        v = np.asarray(v.cpu() if getattr(v, "is_cuda", False) else v)  # a torch tensor, as DALI takes it
    k = spec.kind
    if k == ANY:
        return v
    if isinstance(v, np.ndarray):
        if k in (INTS, FLOATS) or (spec.per_sample and v.ndim > 0):
            v = v.tolist()
        elif v.ndim == 0:
            v = v.item()
        else:
            raise _type_error(op, name, f"a scalar {k}", v)
    if k == INT:
        if _is_int(v) or isinstance(v, (bool, np.bool_)):  # True/False as 1/0 (mirror=True), as DALI
            return int(v)
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            return int(v)
        raise _type_error(op, name, "an int", v)
    if k == FLOAT:
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
            f = float(v)
            if not math.isfinite(f) and name not in NON_FINITE_OK:
                raise _not_finite(op, name, f)
            return f
        raise _type_error(op, name, "a float", v)
    if k == BOOL:
        if isinstance(v, (bool, np.bool_)) or (_is_int(v) and v in (0, 1)):
            return bool(v)
        raise _type_error(op, name, "a bool", v)
    if k == STR:
        if not isinstance(v, str):
            raise _type_error(op, name, "a string", v)
        if spec.choices is not None and v not in spec.choices:
            raise ValueError(
                f"Operator `{op}`: argument '{name}' must be one of {', '.join(map(repr, spec.choices))}; got {v!r}"
            )
        return v
    if k == DTYPE:
        if isinstance(v, str):
            raise ValueError(
                f"Operator `{op}`: argument '{name}' takes a dtype such as ndd.float32 or "
                f"types.DALIDataType.FLOAT, not the string {v!r}"
            )
        if v is int or v is float:
            raise ValueError(
                f"Operator `{op}`: argument '{name}' cannot be the Python type {v.__name__}; "
                "use ndd.int32 or ndd.float32"
            )
        try:
            return _dtype.dtype(v)
        except (TypeError, ValueError):
            raise _type_error(op, name, "a dtype", v) from None
    if k in (IMAGE_TYPE, INTERP_TYPE):
        cls = DALIImageType if k == IMAGE_TYPE else DALIInterpType
        if isinstance(v, cls):
            return v
        if type(v).__name__ == cls.__name__ and getattr(v, "name", None) in cls.__members__:
            return cls[v.name]  # DALI's own enum (nvidia.dali.types), by name
        if isinstance(v, enum.Enum) or not _is_int(v):
            raise _type_error(op, name, f"a {cls.__name__} value", v)
        try:
            return cls(int(v))
        except ValueError:
            raise ValueError(f"Operator `{op}`: argument '{name}': {v} is not a valid {cls.__name__}") from None
    if k in (INTS, FLOATS):
        scalar = FLOAT if k == FLOATS else INT
        items = _flatten(op, name, v) if isinstance(v, (list, tuple)) else [v]
        fast = _plain_numbers(items, k == FLOATS, name in NON_FINITE_OK)
        if fast is not None:
            return fast
        one = Arg(scalar)
        return tuple(convert_arg(op, name, one, x) for x in items)
    raise AssertionError(f"unknown argument kind {k}")


def _same_as_input(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    return [inputs[0]]


@dataclass
class OpSchema:
    """An operator: its public path, inputs, arguments and output inference.

    ``name`` is the dotted path under ``ndd`` (``"resize"``, ``"decoders.image"``).
    ``infer`` maps input metadata and arguments to output metadata; ``validate``
    checks argument values at call time (raise ValueError naming the argument).
    Kernels per device are attached by plugins through :class:`ndd.plugins.Registry`.
    """

    name: str
    inputs: tuple[str, ...] = ("input",)
    args: dict[str, Arg] = field(default_factory=dict)
    min_inputs: int | None = None
    variadic: bool = False
    infer: Callable[[Sequence[OutMeta], dict], list[OutMeta]] = _same_as_input
    validate: Callable[[dict], None] | None = None
    random: bool = False
    provided_by: str | None = None
    doc: str = ""
    internal: bool = False
    capturable: bool | None = None  # capture mode may replay its calls (default: not internal)
    # True for an operator with an effect outside its outputs (dump_image writes files): each
    # call runs at once, in the caller's thread and in call order, whatever the EvalMode, and
    # capture mode never replays it (capturable defaults to False).
    side_effects: bool = False
    device_inputs: int | None = None  # how many leading inputs decide the device (None: all)
    # True for DALI's "mixed" operators (the decoders): their GPU kernel reads host inputs. The
    # inputs of other operators called with device="gpu" are moved to the GPU first.
    host_inputs: bool = False
    # Inputs from this index on act as arguments: a GPU kernel reads them on the host, so they
    # may stay there when the operator runs on a GPU (slice's anchor, warp_affine's matrices).
    host_args_from: int | None = None
    # DALI's deprecated arguments, still accepted: name -> the argument it is an alias for, or
    # None for one no longer used (dropped). The dispatch path warns and renames.
    deprecated: dict[str, str | None] = field(default_factory=dict)
    kernels: dict[str, Callable] = field(default_factory=dict, repr=False)
    kernel_sources: dict[str, str] = field(default_factory=dict, repr=False)
    conflicts: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.min_inputs is None:
            self.min_inputs = len(self.inputs)
        if self.capturable is None:
            self.capturable = not self.internal and not self.side_effects
        self.defaults = {k: a.default for k, a in self.args.items()}

    @property
    def module(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def short_name(self) -> str:
        return self.name.rpartition(".")[2]
