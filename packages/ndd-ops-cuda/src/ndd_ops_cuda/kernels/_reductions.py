"""The reductions (``ndd.reductions``) on the device with torch, with the arithmetic of
core's CPU kernels (``ndd._reductions``, which say what DALI computes).

* Integer sums are taken in int64, which wraps the same way as a sum in any narrower type
  of the output: the wrapped result is bit-identical to the CPU's, in any order.
* float32 sums are torch's (another summation order than NumPy's: equal to rounding).
* The scaling by the float32 reciprocal of the count, the square root (correctly rounded to
  float32) and the truncating conversion to an integer output (x86-64's, emulated in float64) are the CPU's.
* min and max ignore NaN and give the type's extreme value for an empty reduction, as on
  the CPU; torch has no min/max for uint16/32/64, which run as signed integers with the sign
  bit flipped (the same order).

``torch.sum(x, dim=())`` reduces every axis, so an empty set of axes is handled apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ndd._reductions import (  # core's helpers (the CPU kernels' own)
    count,
    explicitly_empty,
    identity,
    mean_of,
    reciprocal,
    reduced_shape,
    reduction_axes,
)
from ndd.plugins import BatchData, KernelArgs, KernelContext

from ._common import SIGNED_TWIN, device_of, torch_dtype, upload

_I64_MIN = -(2**63)

# -- conversions ----------------------------------------------------------------------


def _int64(x: torch.Tensor) -> torch.Tensor:
    """An integer tensor's values as int64 (uint64: its bits)."""
    return x.view(torch.int64) if x.dtype == torch.uint64 else x.to(torch.int64)


def _wrap(v: torch.Tensor, npd: np.dtype) -> torch.Tensor:
    """int64 values cut to their low bits as integer type ``npd``."""
    dt = torch_dtype(npd)
    signed = SIGNED_TWIN.get(dt)
    return v.to(dt) if signed is None else v.to(signed).view(dt)


def _as_float(v: torch.Tensor, npd: np.dtype) -> torch.Tensor:
    """float32 of int64 sums taken as values of integer type ``npd`` (wrapped), rounded to
    nearest as C converts them (uint64 through a halving that keeps the rounding bit)."""
    if npd == np.uint64:
        half = ((v >> 1) & (2**63 - 1)) | (v & 1)
        return torch.where(v < 0, half.to(torch.float32) * 2, v.to(torch.float32))
    if npd.kind == "u":
        return (v & ((1 << (8 * npd.itemsize)) - 1)).to(torch.float32)
    return _wrap(v, npd).to(torch.int64).to(torch.float32)


def _cvt(f: torch.Tensor, bits: int) -> torch.Tensor:
    """float64 values to a signed integer of ``bits`` bits as x86-64 truncates them (NaN and
    values out of range: the lowest value), as int64."""
    lim = 2.0 ** (bits - 1)
    ok = (f > -lim - 1) & (f < lim)
    return torch.where(ok, torch.trunc(torch.where(ok, f, 0.0)), -lim).to(torch.int64)


def _trunc_cast(v: torch.Tensor, npd: np.dtype) -> torch.Tensor:
    """float32 values to integer type ``npd`` as core's ``trunc_cast``."""
    f = v.to(torch.float64)
    if npd == np.uint64:
        hi = f >= 2.0**63
        bits = _cvt(torch.where(hi, f - 2.0**63, f), 64)
        return torch.where(hi, bits ^ _I64_MIN, bits).view(torch.uint64)
    wide = npd.itemsize == 8 or npd == np.uint32
    return _wrap(_cvt(f, 64 if wide else 32), npd)


# -- reductions of one tensor -----------------------------------------------------------


def _sum(x: torch.Tensor, axes: tuple[int, ...], keep: bool) -> torch.Tensor:
    return torch.sum(x, dim=axes, keepdim=keep) if axes else x.clone()  # never the input's storage


def _scaled(acc: torch.Tensor, n: int, root: bool, npd: np.dtype) -> torch.Tensor:
    v = acc * float(reciprocal(n))
    if root:  # correctly rounded, as NumPy's (torch's float32 sqrt may be 1 ulp off on the CPU)
        v = torch.sqrt(v.to(torch.float64)).to(torch.float32)
    return v if npd == np.float32 else _trunc_cast(v, npd)


def _extreme(kind: str, x: torch.Tensor, axes: tuple[int, ...], keep: bool, npd: np.dtype) -> torch.Tensor:
    if not axes:
        return x.clone()
    ident = np.asarray(identity(kind, npd), npd)
    dt = x.dtype
    signed = SIGNED_TWIN.get(dt)
    if count(x.shape, axes) == 0:
        bits = ident.view(np.dtype(f"i{npd.itemsize}")) if signed is not None else ident
        out = torch.full(reduced_shape(x.shape, axes, keep), bits.item(), dtype=signed or dt, device=x.device)
        return out.view(dt)
    fn = torch.amin if kind == "min" else torch.amax
    if dt.is_floating_point:
        x = torch.where(torch.isnan(x), ident.item(), x)
    if signed is None:
        return fn(x, dim=axes, keepdim=keep)
    flip = -(2 ** (8 * npd.itemsize - 1))  # the sign bit: unsigned order as signed order
    return (fn(x.view(signed) ^ flip, dim=axes, keepdim=keep) ^ flip).view(dt)


def _reduce(kind: str, x: torch.Tensor, axes: tuple[int, ...], keep: bool, npd: np.dtype) -> torch.Tensor:
    n = count(x.shape, axes)
    if kind in ("min", "max"):
        return _extreme(kind, x, axes, keep, npd)
    square = kind in ("mean_square", "rms")
    if npd == np.float32:
        xf = x.to(torch.float32)
        acc = _sum(xf * xf if square else xf, axes, keep)
        return acc if kind == "sum" else _scaled(acc, n, kind == "rms", npd)
    xi = _int64(x)
    acc = _sum(xi * xi if square else xi, axes, keep)
    if kind == "sum":
        return _wrap(acc, npd)
    return _scaled(_as_float(acc, npd), n, kind == "rms", npd)


def _deviation(x: torch.Tensor, mean: torch.Tensor, axes: tuple[int, ...], keep: bool, ddof: int,
               root: bool) -> torch.Tensor:
    d = x.to(torch.float32) - mean
    return _scaled(_sum(d * d, axes, keep), count(x.shape, axes) - ddof, root, np.dtype(np.float32))


# -- kernels --------------------------------------------------------------------------


def _device(ctx: KernelContext, inputs: Sequence[BatchData]) -> torch.device:
    """The device of the first input that holds tensors (an input may be a host array,
    e.g. a Python float mean)."""
    for bd in inputs:
        if len(bd) and isinstance(bd.sample(0), torch.Tensor):
            return bd.sample(0).device
    return device_of(ctx, [])


def _on(a: Any, dev: torch.device) -> torch.Tensor:
    """A host array (e.g. a Python float mean) uploaded to ``dev``; a tensor as it is."""
    return upload(a, dev).reshape(a.shape) if isinstance(a, np.ndarray) else a  # (upload makes 0-d 1-d)


def _stacked(bd: BatchData, dev: torch.device) -> torch.Tensor | None:
    """The batch as one tensor on ``dev`` (uniform samples stacked), None when ragged."""
    if bd.dense is not None:
        return _on(bd.dense, dev)
    if bd.is_uniform():
        return torch.stack([_on(s, dev) for s in bd.samples])
    return None


def _kernel(kind: str) -> Callable[[KernelContext, list[BatchData], KernelArgs], Any]:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        bd = inputs[0]
        if not len(bd):
            return []
        npd = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
        layout, keep = ctx.input_layouts[0], args["keep_dims"]
        dev = _device(ctx, inputs)
        d = _stacked(bd, dev)
        if d is not None:
            axes = reduction_axes(ctx.op, args, d.ndim - 1, layout)
            return _reduce(kind, d, tuple(a + 1 for a in axes), keep, npd)
        return [_reduce(kind, _on(s, dev), reduction_axes(ctx.op, args, s.ndim, layout), keep, npd)
                for s in bd.samples]

    return kernel


def _deviation_kernel(root: bool) -> Callable[[KernelContext, list[BatchData], KernelArgs], Any]:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        bd, mb = inputs
        if not len(bd):
            return []
        layout, keep, ddof = ctx.input_layouts[0], args["keep_dims"], args["ddof"]
        empty = explicitly_empty(args)
        dev = _device(ctx, inputs)
        d = _stacked(bd, dev)
        m = None if empty else _stacked(mb, dev)
        if d is not None and (m is not None or empty):
            axes = reduction_axes(ctx.op, args, d.ndim - 1, layout)
            if empty:
                return torch.zeros(d.shape, dtype=torch.float32, device=dev)
            want = mean_of(ctx.op, m[0], tuple(d.shape[1:]), axes, None)
            return _deviation(d, m.reshape((len(m),) + want), tuple(a + 1 for a in axes), keep, ddof, root)
        out = []
        for i, s in enumerate(bd.samples):
            axes = reduction_axes(ctx.op, args, s.ndim, layout)
            if empty:
                out.append(torch.zeros(tuple(s.shape), dtype=torch.float32, device=dev))
                continue
            mean = mb.sample(i)
            want = mean_of(ctx.op, mean, tuple(s.shape), axes, i)
            out.append(_deviation(_on(s, dev), _on(mean, dev).reshape(want), axes, keep, ddof, root))
        return out

    return kernel


REDUCTIONS: dict[str, Callable] = {
    **{f"reductions.{k}": _kernel(k) for k in ("sum", "mean", "mean_square", "rms", "min", "max")},
    "reductions.std_dev": _deviation_kernel(True),
    "reductions.variance": _deviation_kernel(False),
}
