"""Affine transforms (``transforms.*``) and ``coord_transform`` (package ndd-core, NumPy only).

A transform is a float32 matrix of shape (n, n + 1): the linear part and, in the last
column, the offset; ``y = M[:, :n] @ x + M[:, n]``. Each ``transforms.*`` op makes one from
its arguments (per sample when they are batches). Given a matrix as input, it combines the
two: by default the new transform applies after the input's (``new @ input``), with
``reverse_order=True`` before it. ``combine`` composes its inputs in the order listed.
The matrices feed ``warp_affine`` (``matrix=``) and ``coord_transform`` (``MT=``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._dispatch import KernelArgs, KernelContext
from ._saturate import saturate_cast
from ._schema import BOOL, DTYPE, FLOAT, FLOATS, INT, Arg, OpSchema, OutMeta, given
from ._storage import BatchData


def _err(op: str, name: str, what: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {what}")


def _vec(v: Any) -> np.ndarray:
    return np.asarray(v, np.float64).reshape(-1)


def _fit(op: str, name: str, v: np.ndarray, n: int) -> np.ndarray:
    """``v`` with n entries (one value is repeated)."""
    if v.size == 1:
        return np.full(n, v[0])
    if v.size != n:
        raise _err(op, name, f"has {v.size} values for {n} dimension(s)")
    return v


def _homogeneous(m: np.ndarray) -> np.ndarray:
    n = m.shape[0]
    h = np.eye(n + 1)
    h[:n] = m
    return h


def _about(lin: np.ndarray, center: Any, op: str) -> np.ndarray:
    """The (n, n + 1) matrix of ``lin`` applied about ``center`` (the origin when None)."""
    n = lin.shape[0]
    c = np.zeros(n) if center is None else _fit(op, "center", _vec(center), n)
    return np.concatenate([lin, (c - lin @ c)[:, None]], axis=1)


def _translation(args: KernelArgs, i: int) -> np.ndarray:
    off = _vec(args.sample("offset", i))
    if not off.size:
        raise _err("transforms.translation", "offset", "is empty: give one value per dimension")
    return np.concatenate([np.eye(off.size), off[:, None]], axis=1)


def _scale(args: KernelArgs, i: int) -> np.ndarray:
    s = _vec(args.sample("scale", i))
    ndim = args["ndim"]
    if ndim is not None:
        if ndim < 1:
            raise _err("transforms.scale", "ndim", f"must be at least 1, got {ndim}")
        s = _fit("transforms.scale", "scale", s, ndim)
    return _about(np.diag(s), args.sample("center", i), "transforms.scale")


def _rotation(args: KernelArgs, i: int) -> np.ndarray:
    a = math.radians(float(args.sample("angle", i)))
    c, s = math.cos(a), math.sin(a)
    axis = args.sample("axis", i)
    if axis is None:
        lin = np.array([[c, -s], [s, c]])
    else:
        k = _vec(axis)
        norm = float(np.linalg.norm(k))
        if k.size != 3 or norm == 0.0:
            raise _err("transforms.rotation", "axis", f"must be a non-zero 3D vector, got {k.tolist()}")
        k = k / norm
        cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        lin = c * np.eye(3) + s * cross + (1 - c) * np.outer(k, k)  # Rodrigues' formula
    return _about(lin, args.sample("center", i), "transforms.rotation")


def _shear(args: KernelArgs, i: int) -> np.ndarray:
    op = "transforms.shear"
    shear, angles = args.sample("shear", i), args.sample("angles", i)
    if (shear is None) == (angles is None):
        raise ValueError(f"Operator `{op}`: give exactly one of 'shear' and 'angles'")
    if angles is not None:
        deg = _vec(angles)
        if np.any(np.abs(deg) >= 90):
            raise _err(op, "angles", f"must lie in (-90, 90) degrees, got {deg.tolist()}")
        k = np.tan(np.radians(deg))
    else:
        k = _vec(shear)
    if k.size == 2:
        lin = np.array([[1, k[0]], [k[1], 1]])
    elif k.size == 6:
        lin = np.array([[1, k[0], k[1]], [k[2], 1, k[3]], [k[4], k[5], 1]])
    else:
        raise _err(op, "shear" if shear is not None else "angles",
                   f"must have 2 values (2D) or 6 values (3D), got {k.size}")
    return _about(lin, args.sample("center", i), op)


def _crop(args: KernelArgs, i: int) -> np.ndarray:
    op = "transforms.crop"
    names = ("from_start", "from_end", "to_start", "to_end")
    vals = {n: _vec(args.sample(n, i)) for n in names}
    n = max(v.size for v in vals.values())
    fs, fe, ts, te = (_fit(op, k, vals[k], n) for k in names)
    if args["absolute"]:
        fs, fe = np.minimum(fs, fe), np.maximum(fs, fe)
        ts, te = np.minimum(ts, te), np.maximum(ts, te)
    if np.any(fe == fs):
        raise _err(op, "from_end", f"must differ from from_start in every dimension, got {fs.tolist()} and "
                                   f"{fe.tolist()}")
    scale = (te - ts) / (fe - fs)
    return np.concatenate([np.diag(scale), (ts - fs * scale)[:, None]], axis=1)


def _matrix_input(op: str, m: Any, i: int) -> np.ndarray:
    m = np.asarray(m, np.float64)
    if m.ndim != 2 or m.shape[1] != m.shape[0] + 1:
        raise ValueError(f"Operator `{op}`: input sample {i} must be an affine matrix of shape (n, n + 1), "
                         f"got shape {m.shape}")
    return m


def _output(ctx: KernelContext, mats: list[np.ndarray]) -> Any:
    mats = [m.astype(np.float32) for m in mats]
    if len({m.shape for m in mats}) == 1:
        return np.stack(mats) if mats else np.zeros((0, 1, 2), np.float32)
    return mats


def _transform_kernel(op: str, make: Callable[[KernelArgs, int], np.ndarray]) -> Callable:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        matrix_in = inputs[0] if inputs and inputs[0] is not None else None
        out = []
        for i in range(ctx.batch_size):
            t = make(args, i)
            if matrix_in is not None:
                m = _matrix_input(op, matrix_in.sample(i), i)
                if m.shape != t.shape:
                    raise ValueError(f"Operator `{op}`: the input is a {m.shape[0]}D transform, this one "
                                     f"{t.shape[0]}D (sample {i})")
                a, b = (_homogeneous(m), _homogeneous(t))
                t = (a @ b if args["reverse_order"] else b @ a)[:-1]
            out.append(t)
        return _output(ctx, out)

    return kernel


def _combine_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    out = []
    for i in range(ctx.batch_size):
        mats = [_homogeneous(_matrix_input("transforms.combine", bd.sample(i), i)) for bd in inputs]
        if len({m.shape for m in mats}) != 1:
            raise ValueError(f"Operator `transforms.combine`: the inputs of sample {i} have different "
                             f"dimensions: {[m.shape[0] - 1 for m in mats]}")
        acc = mats[0]
        for m in mats[1:]:  # default: the first listed applies first
            acc = acc @ m if args["reverse_order"] else m @ acc
        out.append(acc[:-1])
    return _output(ctx, out)


def _matrix_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    return [OutMeta(_dtype.float32, 2, None)]


_REVERSE = Arg(BOOL, False, doc="apply the input's transform after this one instead of before")
_CENTER = Arg(FLOATS, per_sample=True, doc="the point the transform keeps fixed (default: the origin)")


def _transform_schema(name: str, args: dict, doc: str) -> OpSchema:
    return OpSchema(f"transforms.{name}", inputs=("input",), min_inputs=0,
                    args={**args, "reverse_order": _REVERSE}, infer=_matrix_infer, doc=doc)


TRANSLATION = _transform_schema(
    "translation", {"offset": Arg(FLOATS, required=True, per_sample=True, doc="the translation vector")},
    "A translation matrix (n, n + 1).")
SCALE = _transform_schema(
    "scale", {"scale": Arg(FLOATS, required=True, per_sample=True, doc="the scale factor per dimension"),
              "center": _CENTER,
              "ndim": Arg(INT, doc="number of dimensions, when one scale value is given for all")},
    "A scaling matrix (n, n + 1).")
ROTATION = _transform_schema(
    "rotation", {"angle": Arg(FLOAT, required=True, per_sample=True, doc="angle in degrees, counter-clockwise"),
                 "axis": Arg(FLOATS, per_sample=True, doc="the rotation axis of a 3D rotation"),
                 "center": _CENTER},
    "A rotation matrix: 2D, or 3D about ``axis``.")
SHEAR = _transform_schema(
    "shear", {"shear": Arg(FLOATS, per_sample=True, doc="shear factors: (sx, sy) in 2D, six values in 3D"),
              "angles": Arg(FLOATS, per_sample=True, doc="shear angles in degrees, instead of the factors"),
              "center": _CENTER},
    "A shear matrix (2D or 3D).")
CROP = _transform_schema(
    "crop", {"from_start": Arg(FLOATS, (0.0,), per_sample=True, doc="lower corner of the source space"),
             "from_end": Arg(FLOATS, (1.0,), per_sample=True, doc="upper corner of the source space"),
             "to_start": Arg(FLOATS, (0.0,), per_sample=True, doc="lower corner of the destination space"),
             "to_end": Arg(FLOATS, (1.0,), per_sample=True, doc="upper corner of the destination space"),
             "absolute": Arg(BOOL, False, doc="order each start/end pair (start <= end) first")},
    "The matrix mapping one box onto another (from_* to to_*).")
COMBINE = OpSchema("transforms.combine", inputs=("input_0", "input_1"), variadic=True,
                   args={"reverse_order": Arg(BOOL, False, doc="compose in the reverse order")},
                   infer=_matrix_infer, doc="Compose affine matrices: the first listed applies first.")


# -- coord_transform ------------------------------------------------------------------


def _coord_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    dt = args["dtype"] if args["dtype"] is not None else _dtype.float32
    if dt not in (_dtype.float32, m.dtype):
        raise _err("coord_transform", "dtype", f"must be float32 or the input's type ({m.dtype}), got {dt}")
    passed = {k for k in ("MT", "M", "T") if given(args, k)}
    if "MT" in passed and passed & {"M", "T"}:
        raise ValueError("Operator `coord_transform`: 'MT' cannot be combined with 'M' or 'T'")
    return [OutMeta(dt, m.ndim, m.layout)]


def coord_transform_params(args: KernelArgs, i: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(M, T) for sample i and d-dimensional points. A flat M has out x d values, MT out x
    (d + 1) (one value for either: a multiple of the identity, as DALI), T out values (or one)."""
    mt, m, t = (args.sample(k, i) for k in ("MT", "M", "T"))
    if mt is not None:
        v = _vec(mt)
        if v.size == 1:
            return v[0] * np.eye(d), np.zeros(d)
        if v.size % (d + 1):
            raise _err("coord_transform", "MT", f"has {v.size} values: not a matrix of {d + 1} columns for "
                                                f"{d}D points")
        full = v.reshape(-1, d + 1)
        return full[:, :d], full[:, d]
    if m is None:
        lin = np.eye(d)
    else:
        v = _vec(m)
        if v.size == 1:
            lin = v[0] * np.eye(d)
        elif v.size % d == 0:
            lin = v.reshape(-1, d)
        else:
            raise _err("coord_transform", "M", f"has {v.size} values: not a matrix of {d} columns for {d}D points")
    off = np.zeros(lin.shape[0]) if t is None else _fit("coord_transform", "T", _vec(t), lin.shape[0])
    return lin, off


def transform_points(x: Any, lin: Any, off: Any) -> Any:
    """``x @ lin.T + off`` for points ``x`` (..., d), as a sum of products in a fixed order:
    NumPy arrays or torch tensors alike, with no fused multiply-add in either (one operation
    at a time), so the GPU kernel's values equal these exactly. (A matrix product's
    rounding depends on its BLAS.)"""
    y = off
    for k in range(x.shape[-1]):
        y = y + x[..., k:k + 1] * lin[..., k]
    return y


def check_points(i: int, shape: Sequence[int]) -> None:
    """``coord_transform``'s sample ``i`` must be points: shape (..., ndim)."""
    if len(shape) < 2 or shape[-1] == 0:
        raise ValueError(f"Operator `coord_transform`: sample {i} has shape {tuple(shape)}; expected points "
                         f"of shape (..., ndim), ndim at least 1")


def _coord_transform_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    npd = ctx.output_meta[0].dtype.numpy_dtype
    out = []
    for i, x in enumerate(inputs[0].samples):
        check_points(i, x.shape)
        lin, off = coord_transform_params(args, i, x.shape[-1])
        y = transform_points(x.astype(np.float64), lin, off)
        out.append(y.astype(np.float32) if npd == np.float32 else saturate_cast(y, npd))
    return out


COORD_TRANSFORM = OpSchema(
    "coord_transform",
    args={"M": Arg(FLOATS, per_sample=True, doc="the matrix (flat, row-major; one value: a multiple of I)"),
          "T": Arg(FLOATS, per_sample=True, doc="the offset vector"),
          "MT": Arg(FLOATS, per_sample=True, doc="M and T as one (out, in + 1) matrix, e.g. from transforms.*"),
          "dtype": Arg(DTYPE, doc="float32 (default) or the input's type (rounded, saturated)")},
    infer=_coord_infer, doc="Transform points (the last dimension): y = M x + T.",
)

TRANSFORM_OPS = (
    (TRANSLATION, _transform_kernel("transforms.translation", _translation)),
    (SCALE, _transform_kernel("transforms.scale", _scale)),
    (ROTATION, _transform_kernel("transforms.rotation", _rotation)),
    (SHEAR, _transform_kernel("transforms.shear", _shear)),
    (CROP, _transform_kernel("transforms.crop", _crop)),
    (COMBINE, _combine_cpu),
    (COORD_TRANSFORM, _coord_transform_cpu),
)
