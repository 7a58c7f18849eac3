"""Arithmetic: one internal elementwise operator, and the Python operators on Tensor/Batch.

Every ``+ - * / // % ** & | ^ << >>``, unary ``- + abs ~``, comparison and ``ndd.math``
function is one call of the internal ``_arithm`` operator with an ``op`` name
(DALI's names: ``add``, ``fdiv``, ``div``, ``sqrt`` …).

Type rules (DALI's promotion table; the order of operands does not matter):

- equal types give that type; bool counts as a 1-bit unsigned integer;
- float with anything that is not a float gives that float; two floats give the wider;
- two signed (or two unsigned) integers give the wider;
- signed X with unsigned Y gives signed X when X > Y, else signed 2Y (at most int64);
- Python constants: ``int`` is int32 (``OverflowError`` outside int32), ``float`` is
  float32, ``bool`` is bool; NumPy scalars keep their dtype;
- ``/`` (``fdiv``) and the float functions (``sqrt``, ``exp``, ``floor``, ``atan2``,
  ``fpow`` …) give float32 when every operand is an integer or bool;
- ``//`` (``div``) truncates toward zero for integers (C semantics, like DALI) and is a
  true division for floats; ``%`` (``mod``) is C's remainder (``fmod``), so
  ``a == (a // b) * b + a % b``; integer division by zero raises ValueError on the CPU, as
  in DALI, and gives 0 on the GPU;
- comparisons give bool; bitwise operators and shifts reject floats (ValueError);
- arithmetic whose result type is bool is computed on integers and then converted
  (``True - True`` is False).

Operands broadcast NumPy-style; a Tensor or constant combined with a Batch applies to
every sample. CPU and GPU operands cannot be mixed (ValueError).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _dispatch, _dtype
from ._batch import Batch
from ._dispatch import KernelArgs, KernelContext
from ._dtype import DType
from ._schema import ANY, STR, Arg, OpSchema, OutMeta
from ._storage import BatchData
from ._tensor import Tensor

_K = DType.Kind
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# -- type promotion ------------------------------------------------------------------


def _int_bits(d: DType) -> int:
    return 1 if d.kind is _K.bool else d.bits


def promote(a: DType, b: DType) -> DType:
    """DALI's result type of a binary arithmetic operation on ``a`` and ``b``."""
    if a == b:
        return a
    fa, fb = a.kind is _K.float, b.kind is _K.float
    if fa or fb:
        if fa and fb:
            return a if a.bits >= b.bits else b
        return a if fa else b
    sa, sb = a.kind is _K.signed, b.kind is _K.signed
    if sa == sb:
        return a if _int_bits(a) >= _int_bits(b) else b
    s, u = (a, b) if sa else (b, a)
    if s.bits > _int_bits(u):
        return s
    return _SIGNED[min(2 * u.bits, 64)]


_SIGNED = {8: _dtype.int8, 16: _dtype.int16, 32: _dtype.int32, 64: _dtype.int64}

# Operation groups, by how the result type is formed.
_ARITH = {"add", "sub", "mul", "div", "mod", "pow", "min", "max", "clamp", "minus", "abs"}
_FLOAT = {"fdiv", "fpow", "atan2", "sqrt", "rsqrt", "cbrt", "exp", "log", "log2", "log10",
          "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
          "acosh", "atanh", "floor", "ceil", "fabs"}
_CMP = {"eq", "neq", "lt", "leq", "gt", "geq"}
_BIT = {"bitand", "bitor", "bitxor", "lshift", "rshift", "bitnot"}
_ARITY = {"minus": 1, "abs": 1, "bitnot": 1, "clamp": 3}
for _n in _FLOAT - {"fdiv", "fpow", "atan2"}:
    _ARITY[_n] = 1
OPS = frozenset(_ARITH | _FLOAT | _CMP | _BIT)


@functools.lru_cache(maxsize=1024)
def result_types(op: str, dtypes: tuple[DType, ...]) -> tuple[DType, np.dtype]:
    """``(output dtype, NumPy dtype the operands are computed in)`` for ``op``."""
    for d in dtypes:
        if d.kind is _K.enum:
            raise ValueError(f"Arithmetic `{op}`: operands of type {d} are not numbers")
    t = functools.reduce(promote, dtypes)
    if op in _CMP:
        return _dtype.bool, t.numpy_dtype
    if op in _BIT:
        if t.kind is _K.float:
            raise ValueError(f"Arithmetic `{op}`: bitwise operations need integer or bool operands, got {t}")
        return t, t.numpy_dtype
    if op in _FLOAT:
        if t.kind is not _K.float:
            t = _dtype.float32
        return t, t.numpy_dtype
    # Arithmetic with a bool result is done on integers, then converted.
    return t, (np.dtype(np.int32) if t.kind is _K.bool else t.numpy_dtype)


# -- NumPy implementations (operands already in the compute dtype) --------------------


class _ZeroDivisor(ValueError):
    pass


def _no_zero_divisor(b: Any) -> None:
    if not np.all(b):  # as DALI's CPU kernel (the GPU kernels give 0: a check would wait for the device)
        raise _ZeroDivisor("Integer division by zero.")


def _div(a: Any, b: Any) -> Any:
    if a.dtype.kind == "f":
        return np.true_divide(a, b)
    _no_zero_divisor(b)
    if a.dtype.kind == "u":
        return np.floor_divide(a, b)
    return np.floor_divide(a - np.fmod(a, b), b)  # exact: truncates toward zero


def _mod(a: Any, b: Any) -> Any:
    if a.dtype.kind != "f":
        _no_zero_divisor(b)
    return np.fmod(a, b)


def _pow(a: Any, b: Any) -> Any:
    if a.dtype.kind == "f" or not np.any(b < 0):
        return np.power(a, b)
    neg = b < 0
    r = np.power(a, np.where(neg, 0, b))
    # integer a ** -k truncates to 0 except for a = 1 and a = -1
    inv = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)).astype(a.dtype)
    return np.where(neg, inv, r)


_IMPL: dict[str, Callable[..., Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _div, "fdiv": np.true_divide,
    "mod": _mod, "pow": _pow, "fpow": np.power, "min": np.minimum, "max": np.maximum,
    "clamp": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "minus": np.negative, "abs": np.abs, "fabs": np.abs, "bitnot": np.invert,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
    "lshift": np.left_shift, "rshift": np.right_shift,
    "eq": np.equal, "neq": np.not_equal, "lt": np.less, "leq": np.less_equal,
    "gt": np.greater, "geq": np.greater_equal,
    "sqrt": np.sqrt, "rsqrt": lambda x: np.reciprocal(np.sqrt(x)), "cbrt": np.cbrt,
    "exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "floor": np.floor, "ceil": np.ceil,
}

# -- the operator -------------------------------------------------------------------


def _const_dtype(c: np.generic) -> DType:
    return _dtype.from_numpy(c.dtype)


def _operand_dtypes(inputs: Sequence[OutMeta], constants: tuple | None) -> tuple[DType, ...]:
    if constants is None:
        return tuple(m.dtype for m in inputs)
    it = iter(inputs)
    return tuple(next(it).dtype if c is None else _const_dtype(c) for c in constants)


def _infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = args["op"]
    dts = _operand_dtypes(inputs, args["constants"])
    want = _ARITY.get(op, 2)
    if len(dts) != want:
        raise ValueError(f"Arithmetic `{op}` takes {want} operand(s), got {len(dts)}")
    out, _ = result_types(op, dts)
    ndim = max(m.ndim for m in inputs)
    layout = next((m.layout for m in inputs if m.ndim == ndim and m.layout), None)
    return [OutMeta(out, ndim, layout)]


def _compute(op: str, operands: list, cdt: np.dtype, odt: np.dtype) -> Any:
    xs = [x.astype(cdt, copy=False) for x in operands]
    try:
        r = _IMPL[op](*xs)
    except _ZeroDivisor:
        raise
    except ValueError as e:  # shapes that do not broadcast
        shapes = ", ".join(str(np.shape(x)) for x in operands)
        raise ValueError(f"Arithmetic `{op}`: operands of shapes {shapes} cannot be combined ({e})") from None
    return r.astype(odt, copy=False) if r.dtype != odt else r


def _operands(consts: tuple | None, arrays: list) -> list:
    if consts is None:
        return arrays
    it = iter(arrays)
    return [next(it) if c is None else c for c in consts]


@functools.lru_cache(maxsize=1024)
def _compute_dtype(op: str, np_dtypes: tuple[np.dtype, ...]) -> np.dtype:
    return result_types(op, tuple(_dtype.from_numpy(d) for d in np_dtypes))[1]


def _arithm_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    op = args["op"]
    consts = args["constants"]
    odt = ctx.output_meta[0].dtype.numpy_dtype
    n = ctx.batch_size
    if n == 0:
        return BatchData(samples=[])
    firsts = [bd.sample(0) for bd in inputs]
    cdt = _compute_dtype(op, tuple(x.dtype for x in _operands(consts, firsts)))
    with np.errstate(all="ignore"):
        if not ctx.is_batch:
            return np.asarray(_compute(op, _operands(consts, firsts), cdt, odt))[None]
        vec = _vectorised(inputs, ctx.output_meta[0].ndim)
        if vec is not None:
            return _compute(op, _operands(consts, vec), cdt, odt)
        out = []
        for i in range(n):
            arrays = [bd.sample(i) for bd in inputs]
            out.append(np.asarray(_compute(op, _operands(consts, arrays), cdt, odt)))
        return out


def _vectorised(inputs: list[BatchData], ndim: int) -> list | None:
    """Operands with a leading batch dim (or none, for a broadcast Tensor), or None if ragged."""
    out = []
    dense_seen = False
    for bd in inputs:
        d = bd.dense
        if d is not None:
            if d.ndim - 1 < ndim:  # align per-sample dims to the right, after the batch dim
                d = d.reshape(d.shape[:1] + (1,) * (ndim + 1 - d.ndim) + d.shape[1:])
            out.append(d)
            dense_seen = True
            continue
        s = bd.samples
        if s and all(x is s[0] for x in s):  # one Tensor broadcast to the batch
            out.append(s[0])
        else:
            return None
    return out if dense_seen else None


ARITHM = OpSchema(
    "_arithm",
    inputs=("input_0",),
    variadic=True,
    args={"op": Arg(STR, required=True, choices=tuple(sorted(OPS)), doc="DALI name of the operation"),
          "constants": Arg(ANY, doc="one entry per operand: a NumPy scalar, or None for the next input")},
    infer=_infer,
    internal=True,
    doc="Elementwise arithmetic (the operators on Tensor and Batch, and ndd.math).",
)

# -- Python operators -----------------------------------------------------------------


def _constant(op: str, v: Any) -> Any:
    """A Python or NumPy scalar as a typed NumPy scalar; NotImplemented for other types."""
    if isinstance(v, np.generic):  # first: np.float64 is also a Python float (it keeps float64, as in DALI)
        return v if v.dtype.kind in "biuf" else NotImplemented
    if isinstance(v, bool):
        return np.bool_(v)
    if isinstance(v, int):
        if not _INT32_MIN <= v <= _INT32_MAX:
            raise OverflowError(
                f"Arithmetic `{op}`: the integer constant {v} does not fit in int32; "
                "wrap it in a tensor of a wider type (e.g. ndd.tensor(np.int64(v)))"
            )
        return np.int32(v)
    if isinstance(v, float):
        return np.float32(v)
    return NotImplemented


def apply(op: str, *operands: Any) -> Tensor | Batch:
    """Run arithmetic ``op`` on Tensors, Batches and scalar constants.

    Returns NotImplemented when an operand has an unsupported type.
    """
    ins = []
    consts: list | None = None
    gpu = cpu = False
    for i, x in enumerate(operands):
        if not isinstance(x, (Tensor, Batch)):
            if isinstance(x, (np.ndarray, list, tuple)):
                from ._construct import as_tensor

                x = as_tensor(x)
            else:
                c = _constant(op, x)
                if c is NotImplemented:
                    return NotImplemented
                if consts is None:
                    consts = [None] * i
                consts.append(c)
                continue
        if x._device.device_type == "cpu":
            cpu = True
        else:
            gpu = True
        ins.append(x)
        if consts is not None:
            consts.append(None)
    if cpu and gpu:
        raise ValueError(
            f"Arithmetic `{op}`: cannot mix CPU and GPU operands; move one of them with .cpu() or .gpu()"
        )
    if not ins:  # constants only (ndd.math on Python numbers): the first becomes a tensor
        from ._construct import as_tensor

        ins.append(as_tensor(operands[0]))
        consts[0] = None
    return _dispatch.call(ARITHM, tuple(ins), {"op": op, "constants": None if consts is None else tuple(consts)})


def _binary(op: str) -> tuple[Callable, Callable]:
    def forward(self: Any, other: Any) -> Any:
        if op in ("div", "mod") and isinstance(other, (int, np.integer)) and not isinstance(other, bool) \
                and other == 0 and self.dtype.kind is not _K.float:
            raise ValueError("Integer division by zero.")  # a constant zero, as DALI checks it
        return apply(op, self, other)

    def reflected(self: Any, other: Any) -> Any:
        return apply(op, other, self)

    return forward, reflected


def _unary(op: str) -> Callable:
    def method(self: Any) -> Any:
        return apply(op, self)

    return method


def _pos(self: Any) -> Any:
    return self


_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "fdiv", "floordiv": "div",
           "mod": "mod", "pow": "pow", "and": "bitand", "or": "bitor", "xor": "bitxor",
           "lshift": "lshift", "rshift": "rshift"}
_COMPARE = {"eq": "eq", "ne": "neq", "lt": "lt", "le": "leq", "gt": "gt", "ge": "geq"}


def install(cls: type) -> None:
    """Attach the arithmetic and comparison operators to ``cls`` (Tensor or Batch).

    ``==`` is elementwise, so instances stay hashable by identity.
    """
    for py, op in _BINARY.items():
        fwd, ref = _binary(op)
        fwd.__name__, ref.__name__ = f"__{py}__", f"__r{py}__"
        setattr(cls, fwd.__name__, fwd)
        setattr(cls, ref.__name__, ref)
    for py, op in _COMPARE.items():
        fwd, _ = _binary(op)
        fwd.__name__ = f"__{py}__"
        setattr(cls, fwd.__name__, fwd)
    for py, op in (("neg", "minus"), ("abs", "abs"), ("invert", "bitnot")):
        m = _unary(op)
        m.__name__ = f"__{py}__"
        setattr(cls, m.__name__, m)
    cls.__pos__ = _pos
    cls.__hash__ = object.__hash__


install(Tensor)
install(Batch)

ARITH_OPS = ((ARITHM, _arithm_cpu),)
