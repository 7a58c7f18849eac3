"""Reductions (``ndd.reductions``): sum, mean, mean_square, rms, min, max, std_dev and
variance of every sample over chosen axes (CPU kernels, NumPy).

The arithmetic follows DALI 2.4's CPU operators (observed, see the tests):

* the sum is accumulated in the output type: integer sums wrap around, float32 sums stay
  in float32;
* mean, mean_square, rms, variance and std_dev multiply that sum by the float32
  reciprocal of the count (a float32 product); rms and std_dev then take its float32
  square root; variance and std_dev take ``count - ddof`` as the count;
* an integer output of mean, mean_square or rms is that float32 value converted as C++
  converts on x86-64 (:func:`trunc_cast`): truncated, NaN and overflow giving the
  "integer indefinite" value (so the mean of an empty int32 reduction is -2**31);
* min and max ignore NaN, and an empty reduction gives the type's largest (min) or lowest
  (max) value; with no axis reduced they copy the input;
* variance and std_dev with an explicitly empty set of axes give zeros (the mean input is
  not read).

The number of elements of a sample's ``mean`` input must be that of its result (DALI
reads that many values without checking the shape).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._dispatch import KernelArgs, KernelContext
from ._schema import BOOL, DTYPE, INT, INTS, STR, Arg, OpSchema, OutMeta
from ._shape_ops import _arg_error, _dense, _names_to_axes, _norm_axis
from ._storage import BatchData

_D = _dtype
# input types DALI's reductions accept (bool, float16 and float64 are refused)
SUPPORTED = (_D.uint8, _D.int8, _D.uint16, _D.int16, _D.uint32, _D.int32, _D.uint64, _D.int64, _D.float32)

# -- axes, dtypes, output metadata ----------------------------------------------------


def _check_exclusive(op: str, args: Mapping) -> None:
    if args["axes"] is not None and args["axis_names"] is not None:
        raise ValueError(f"Operator `{op}`: arguments 'axes' and 'axis_names' are mutually exclusive")


def reduction_axes(op: str, args: Mapping, ndim: int, layout: str | None) -> tuple[int, ...]:
    """The sorted axes of a sample of ``ndim`` dimensions that a call reduces: those of
    'axes' or 'axis_names' (mutually exclusive), all when neither is given."""
    _check_exclusive(op, args)
    axes, names = args["axes"], args["axis_names"]
    if names is not None:
        found = _names_to_axes(op, names, layout) if names else ()
        name = "axis_names"
    elif axes is not None:
        found = tuple(_norm_axis(op, "axes", a, ndim) for a in axes)
        name = "axes"
    else:
        return tuple(range(ndim))
    for i, a in enumerate(found):
        if a in found[:i]:
            raise _arg_error(op, name, f"names axis {a} more than once")
    return tuple(sorted(found))


def explicitly_empty(args: Mapping) -> bool:
    """True when 'axes' or 'axis_names' is given and names no axis."""
    v = args["axes"] if args["axes"] is not None else args["axis_names"]
    return v is not None and len(v) == 0


def _wide(dt: _dtype.DType) -> _dtype.DType:
    """The 64-bit integer type of ``dt``'s signedness (float32 stays)."""
    if dt.kind is _D.DType.Kind.signed:
        return _D.int64
    if dt.kind is _D.DType.Kind.unsigned:
        return _D.uint64
    return dt


def _allowed(kind: str, dt: _dtype.DType) -> tuple[_dtype.DType, ...]:
    """The output types of reduction ``kind`` for input type ``dt``, the default first."""
    if kind == "sum":
        out = (_wide(dt), dt) + ((_D.float32,) if dt.bits < 64 else ())
    elif kind == "mean_square":
        out = (_D.float32, _wide(dt))
    elif kind in ("mean", "rms"):
        out = (_D.float32, dt)
    elif kind in ("min", "max"):
        out = (dt,)
    else:  # variance, std_dev
        out = (_D.float32,)
    return tuple(dict.fromkeys(out))


def _check_input(op: str, name: str, dt: _dtype.DType) -> None:
    if dt not in SUPPORTED:
        raise ValueError(f"Operator `{op}`: input '{name}' has dtype {dt}, which is not supported "
                         f"(supported: {', '.join(str(d) for d in SUPPORTED)})")


def out_dtype(op: str, kind: str, dt: _dtype.DType, requested: _dtype.DType | None) -> _dtype.DType:
    """The output type of reduction ``kind`` of an input of type ``dt`` (``requested``: the
    'dtype' argument, or None)."""
    allowed = _allowed(kind, dt)
    if requested is None:
        return allowed[0]
    if requested not in allowed:
        raise _arg_error(op, "dtype", f"must be one of {', '.join(str(d) for d in allowed)} for an "
                         f"input of {dt}, got {requested}")
    return requested


def _infer(kind: str) -> Callable[[Sequence[OutMeta], dict], list[OutMeta]]:
    def infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
        op = f"reductions.{kind}"
        m = inputs[0]
        _check_input(op, "data" if len(inputs) > 1 else "input", m.dtype)
        if len(inputs) > 1 and inputs[1].dtype != _D.float32:
            raise ValueError(f"Operator `{op}`: input 'mean' must be float32, got {inputs[1].dtype}")
        dt = out_dtype(op, kind, m.dtype, args.get("dtype"))
        axes = reduction_axes(op, args, m.ndim, m.layout)
        if args["keep_dims"]:
            return [OutMeta(dt, m.ndim, m.layout)]
        layout = "".join(c for i, c in enumerate(m.layout) if i not in axes) if m.layout else ""
        return [OutMeta(dt, m.ndim - len(axes), layout or None)]

    return infer


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keep: bool) -> tuple[int, ...]:
    """The shape of the result of reducing ``axes`` of ``shape``."""
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def count(shape: Sequence[int], axes: Sequence[int]) -> int:
    """The number of elements each result value reduces."""
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


# -- arithmetic -----------------------------------------------------------------------


def _cvt(f: np.ndarray, bits: int) -> np.ndarray:
    """float64 values converted to a signed integer of ``bits`` bits as x86-64's truncating
    conversion does: toward zero; NaN and values out of range give the lowest value."""
    lim = 2.0 ** (bits - 1)
    ok = (f > -lim - 1) & (f < lim)
    return np.where(ok, np.trunc(np.where(ok, f, 0.0)), -lim).astype(np.int64)


def trunc_cast(v: Any, npd: np.dtype) -> np.ndarray:
    """float32 values converted to integer type ``npd`` as C++'s ``static_cast`` does on
    x86-64 (DALI's CPU kernels): uint32 and 64-bit types through the 64-bit conversion, the
    others through the 32-bit one, keeping the low bits; uint64 values of 2**63 and over
    converted with 2**63 subtracted."""
    f = np.asarray(v, np.float64)
    npd = np.dtype(npd)
    if npd == np.uint64:
        hi = f >= 2.0**63
        bits = _cvt(np.where(hi, f - 2.0**63, f), 64).view(np.uint64)
        return np.asarray(bits ^ np.where(hi, np.uint64(1 << 63), np.uint64(0)))
    wide = npd.itemsize == 8 or npd == np.uint32
    return _cvt(f, 64 if wide else 32).astype(npd)


def reciprocal(n: int) -> np.float32:
    """The float32 reciprocal of a count (infinite for 0)."""
    with np.errstate(divide="ignore"):
        return np.float32(1) / np.float32(n)


def identity(kind: str, npd: np.dtype) -> Any:
    """The value of an empty min (the type's largest) or max (its lowest)."""
    info = np.iinfo(npd) if npd.kind in "iu" else np.finfo(npd)
    return info.max if kind == "min" else info.min


def _scaled(acc: Any, n: int, root: bool, npd: np.dtype) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.asarray(acc).astype(np.float32) * reciprocal(n)
        if root:
            v = np.sqrt(v)
    return np.asarray(v) if npd == np.float32 else trunc_cast(v, npd)


def _reduce(kind: str, x: np.ndarray, axes: tuple[int, ...], keep: bool, npd: np.dtype) -> np.ndarray:
    """Reduction ``kind`` (not variance/std_dev) of array ``x`` over ``axes``."""
    n = count(x.shape, axes)
    if kind in ("min", "max"):
        if not axes:
            return x.copy()
        fn = np.fmin if kind == "min" else np.fmax
        return np.asarray(fn.reduce(x, axis=axes, keepdims=keep, initial=identity(kind, npd)))
    if kind in ("sum", "mean"):
        acc = np.sum(x, axis=axes, dtype=npd, keepdims=keep)
        return np.asarray(acc) if kind == "sum" else _scaled(acc, n, False, npd)
    xa = x.astype(npd)
    with np.errstate(over="ignore"):
        acc = np.sum(xa * xa, axis=axes, dtype=npd, keepdims=keep)
    return _scaled(acc, n, kind == "rms", npd)


def _deviation(x: np.ndarray, mean: np.ndarray, axes: tuple[int, ...], keep: bool, ddof: int,
               root: bool) -> np.ndarray:
    """Variance (or std_dev) of ``x`` over ``axes`` about ``mean`` (shaped with kept axes)."""
    d = x.astype(np.float32) - mean
    acc = np.sum(d * d, axis=axes, dtype=np.float32, keepdims=keep)
    return _scaled(acc, count(x.shape, axes) - ddof, root, np.dtype(np.float32))


def mean_of(op: str, mean: Any, shape: Sequence[int], axes: Sequence[int], sample: int | None) -> tuple[int, ...]:
    """The shape to view a sample's mean with (the data's with the reduced axes kept): a
    ValueError unless it has as many elements as the result."""
    want = reduced_shape(shape, axes, True)
    size = int(np.prod(want, dtype=np.int64))
    if int(np.prod(mean.shape, dtype=np.int64)) != size:
        where = "" if sample is None else f" of sample {sample}"
        raise ValueError(
            f"Operator `{op}`: input 'mean'{where} has shape {tuple(mean.shape)}, but the reduction gives "
            f"{size} value(s) (shape {reduced_shape(shape, axes, False)}): the mean must have as many elements"
        )
    return want


# -- kernels --------------------------------------------------------------------------


def _kernel(kind: str) -> Callable[[KernelContext, list[BatchData], KernelArgs], Any]:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        bd = inputs[0]
        if not len(bd):
            return []
        npd = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
        layout, keep = ctx.input_layouts[0], args["keep_dims"]
        d = _dense(bd, args, ())
        if d is not None:
            axes = reduction_axes(ctx.op, args, d.ndim - 1, layout)
            return _reduce(kind, d, tuple(a + 1 for a in axes), keep, npd)
        return [_reduce(kind, s, reduction_axes(ctx.op, args, s.ndim, layout), keep, npd) for s in bd.samples]

    kernel.__name__ = kernel.__qualname__ = f"{kind}_cpu"
    return kernel


def _deviation_kernel(root: bool) -> Callable[[KernelContext, list[BatchData], KernelArgs], Any]:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        bd, mb = inputs
        if not len(bd):
            return []
        layout, keep, ddof = ctx.input_layouts[0], args["keep_dims"], args["ddof"]
        empty = explicitly_empty(args)
        d, m = _dense(bd, args, ()), _dense(mb, args, ())
        if d is not None and (m is not None or empty):
            axes = reduction_axes(ctx.op, args, d.ndim - 1, layout)
            if empty:
                return np.zeros(d.shape, np.float32)
            want = mean_of(ctx.op, m[0], d.shape[1:], axes, None)
            return _deviation(d, m.reshape((len(m),) + want), tuple(a + 1 for a in axes), keep, ddof, root)
        out = []
        for i, s in enumerate(bd.samples):
            axes = reduction_axes(ctx.op, args, s.ndim, layout)
            if empty:
                out.append(np.zeros(s.shape, np.float32))
                continue
            mean = mb.sample(i)
            want = mean_of(ctx.op, mean, s.shape, axes, i)
            out.append(_deviation(s, np.asarray(mean).reshape(want), axes, keep, ddof, root))
        return out

    kernel.__name__ = kernel.__qualname__ = f"{'std_dev' if root else 'variance'}_cpu"
    return kernel


# -- schemas --------------------------------------------------------------------------

_AXES = {
    "axes": Arg(INTS, doc="axes to reduce (negative counts from the end; default: all)"),
    "axis_names": Arg(STR, doc="layout names of the axes to reduce (not with 'axes')"),
}
_KEEP = {"keep_dims": Arg(BOOL, default=False, doc="keep the reduced axes with extent 1")}
_DTYPE = {"dtype": Arg(DTYPE, doc="output (and accumulation) type")}
_DOCS = {
    "sum": "Sum of the elements along the axes (integers: int64/uint64 by default; wraps in 'dtype').",
    "mean": "Mean of the elements along the axes (float32 by default, or the input type).",
    "mean_square": "Mean of the squares of the elements along the axes (float32 or int64/uint64).",
    "rms": "Root mean square of the elements along the axes (float32 by default, or the input type).",
    "min": "Smallest element along the axes (NaN is ignored).",
    "max": "Largest element along the axes (NaN is ignored).",
    "variance": "Variance of the elements along the axes about the given mean, divided by N - ddof (float32).",
    "std_dev": "Standard deviation of the elements along the axes about the given mean, over N - ddof (float32).",
}


def _schema(kind: str) -> OpSchema:
    deviation = kind in ("variance", "std_dev")
    args = {**_AXES}
    if kind in ("sum", "mean", "mean_square", "rms"):
        args.update(_DTYPE)
    if deviation:
        args["ddof"] = Arg(INT, default=0, doc="delta degrees of freedom: the divisor is N - ddof")
    args.update(_KEEP)
    op = f"reductions.{kind}"
    return OpSchema(
        op,
        inputs=("data", "mean") if deviation else ("input",),
        host_args_from=1 if deviation else None,  # the mean may be given on the host
        args=args,
        infer=_infer(kind),
        validate=lambda a: _check_exclusive(op, a),
        doc=_DOCS[kind],
    )


REDUCTION_OPS = tuple(
    (_schema(kind), _kernel(kind)) for kind in ("sum", "mean", "mean_square", "rms", "min", "max")
) + ((_schema("std_dev"), _deviation_kernel(True)), (_schema("variance"), _deviation_kernel(False)))
