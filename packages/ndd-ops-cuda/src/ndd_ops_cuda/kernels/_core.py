"""GPU kernels of core's own operators: ``cast``, arithmetic (``_arithm``), subscripts
(``_subscript``), ``transpose`` in torch; the reshaping, joining and filling ops run core's
CPU kernel on the device tensors (:func:`on_device`); ``pad``, ``one_hot`` and ``slice``
are in ``_shape``; the random ops run core's CPU kernel on host copies and upload the
result (:func:`via_host`).

Random ops draw exactly as on the CPU (same words, same values): the values are
drawn on the host by the CPU kernel and uploaded, which is the cheap part for the
small per-sample values they usually produce.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import ndd
from ndd.plugins import BatchData, KernelArgs, KernelContext, arithm_result_types, cast_plan

from ._common import SIGNED_TWIN, device_batch, device_of, host_batch, numpy_dtype, stacked, torch_dtype

# -- running core's CPU kernel on the host -------------------------------------------------


def _to_device(out: Any, dev: torch.device) -> Any:
    if isinstance(out, tuple):
        return tuple(_to_device(o, dev) for o in out)
    if isinstance(out, BatchData):
        if out.dense is not None:
            return BatchData(dense=_to_device(out.dense, dev))
        return BatchData(samples=[_to_device(s, dev) for s in out.samples])
    if isinstance(out, list):
        return [_to_device(s, dev) for s in out]
    a = np.asarray(out)
    if not a.flags.writeable or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a).copy()
    return torch.from_numpy(a).to(dev)


def via_host(op: str, host_inputs: tuple[int, ...] | None = None) -> Callable:
    """A GPU kernel for core operator ``op`` that runs its CPU kernel on host copies of
    the inputs (all, or only those in ``host_inputs``; the others are only read for
    their shapes) and uploads the result to the inputs' device."""
    cpu: list = []

    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        if not cpu:
            cpu.append(ndd.plugins.schemas()[op].kernels["cpu"])
        dev = device_of(ctx, inputs)
        ins = [host_batch(bd) if host_inputs is None or i in host_inputs else bd for i, bd in enumerate(inputs)]
        return _to_device(cpu[0](ctx, ins, args), dev)

    kernel.__name__ = kernel.__qualname__ = f"{op.replace('.', '_')}_gpu_via_host"
    return kernel


def on_device(op: str, host_inputs: tuple[int, ...] = (), uploaded: tuple[int, ...] = ()) -> Callable:
    """Core's CPU kernel of ``op`` run on the device tensors themselves: for operators whose
    kernel only reshapes (a view, no copy); inputs in ``host_inputs`` (shapes given as a
    batch) are read on the host, those in ``uploaded`` (full_like's fill value, which may
    stay on the host) are copied to the device of the others."""
    cpu: list = []

    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        if not cpu:
            cpu.append(ndd.plugins.schemas()[op].kernels["cpu"])
        ins = [host_batch(bd) if i in host_inputs and bd is not None else bd for i, bd in enumerate(inputs)]
        if uploaded:
            dev = device_of(ctx, inputs[:1])
            ins = [device_batch(bd, dev) if i in uploaded else bd for i, bd in enumerate(ins)]
        return cpu[0](ctx, ins, args)

    kernel.__name__ = kernel.__qualname__ = f"{op}_gpu"
    return kernel


# -- cast ----------------------------------------------------------------------------------


# torch cannot compare or clamp uint16/32/64: clamp them as a wider signed type (uint64 as
# its int64 bits, where the values past 2**63 read negative).
_WIDER = {torch.uint16: torch.int32, torch.uint32: torch.int64}


def _saturate_cast(x: torch.Tensor, dst: np.dtype, dt: torch.dtype) -> torch.Tensor:
    """``x`` converted to ``dt`` by core's :func:`ndd.plugins.cast_plan`, the CPU kernel's
    own rules (DALI's ConvertSat, rounding half away from zero), so the values are identical:
    only device operations, no value is read back (``cast`` stays graph-pure)."""
    plan = cast_plan(numpy_dtype(x.dtype), dst)
    if plan[0] == "plain":
        return x.to(dt, copy=True)
    if plan[0] == "bool":  # rounded first: True where |x| >= 0.5 or NaN
        return ~(x.abs() < 0.5)
    if plan[0] == "clip":
        _, lo, hi = plan
        if x.dtype == torch.uint64:  # lo is 0 and hi below 2**63 here
            s = x.view(torch.int64)
            return torch.where(s < 0, hi, s.clamp(max=hi)).to(dt)
        return x.to(_WIDER.get(x.dtype, x.dtype)).clamp(lo, hi).to(dt)
    _, work, half, lo, hi, big, top = plan
    x = x.to(torch_dtype(work))  # no copy unless float16
    r = x.clamp(float(lo), float(hi))  # NaN stays NaN; lo and hi are integers
    r.add_(torch.full_like(r, float(half)).copysign_(r) if lo < 0 else float(half))
    out = r.trunc_().nan_to_num_(nan=0.0).to(dt)
    if big is not None:  # dst's maximum is no ``work`` float: clamped below it, set here
        bits = SIGNED_TWIN.get(dt)
        top_bits = int(np.array(top, dst).view(numpy_dtype(bits))) if bits is not None else top
        (out if bits is None else out.view(bits)).masked_fill_(x >= float(big), top_bits)
    return out


def cast_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Core's ``cast`` (and ``cast_like``) in torch: a saturating conversion to the inferred
    output type (see :func:`_saturate_cast`)."""
    dst = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
    dt = torch_dtype(dst)
    bd = inputs[0]
    if bd.dense is not None:
        return _saturate_cast(bd.dense, dst, dt)
    return [_saturate_cast(s, dst, dt) for s in bd.samples]


# -- arithmetic ----------------------------------------------------------------------------


def _where_nonzero(b: torch.Tensor) -> torch.Tensor:
    return torch.where(b == 0, torch.ones_like(b), b)


def _div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point():
        return torch.true_divide(a, b)
    q = torch.div(a, _where_nonzero(b), rounding_mode="trunc")
    return torch.where(b == 0, torch.zeros_like(q), q)  # integer division by zero gives 0


def _mod(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point():
        return torch.fmod(a, b)
    r = torch.fmod(a, _where_nonzero(b))
    return torch.where(b == 0, torch.zeros_like(r), r)


def _pow(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point():
        return torch.pow(a, b)
    neg = b < 0
    r = torch.pow(a, torch.where(neg, torch.zeros_like(b), b))
    # integer a ** -k truncates to 0 except for a = 1 and a = -1
    one, zero = torch.ones_like(r), torch.zeros_like(r)
    odd = torch.remainder(b, 2) != 0
    inv = torch.where(a == 1, one, torch.where(a == -1, torch.where(odd, -one, one), zero))
    return torch.where(neg, inv, r)


def _cbrt(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.abs(x).pow(1.0 / 3.0)


_IMPL: dict[str, Callable[..., torch.Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": _div, "fdiv": torch.true_divide,
    "mod": _mod, "pow": _pow, "fpow": torch.pow, "min": torch.minimum, "max": torch.maximum,
    "clamp": lambda x, lo, hi: torch.minimum(torch.maximum(x, lo), hi),
    "minus": torch.neg, "abs": torch.abs, "fabs": torch.abs, "bitnot": torch.bitwise_not,
    "bitand": torch.bitwise_and, "bitor": torch.bitwise_or, "bitxor": torch.bitwise_xor,
    "lshift": torch.bitwise_left_shift, "rshift": torch.bitwise_right_shift,
    "eq": torch.eq, "neq": torch.ne, "lt": torch.lt, "leq": torch.le, "gt": torch.gt, "geq": torch.ge,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "cbrt": _cbrt, "exp": torch.exp, "log": torch.log,
    "log2": torch.log2, "log10": torch.log10, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "atan2": torch.atan2,
    "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "floor": torch.floor, "ceil": torch.ceil,
}

# torch has only copies and a few operations for these; arithmetic on them runs on the host.
_HOST_ONLY = {np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)}
_arithm_host = via_host("_arithm")


def _operand_dtype(x: Any) -> np.dtype:
    return numpy_dtype(x.dtype) if isinstance(x, torch.Tensor) else np.dtype(x.dtype)


def _operands(consts: tuple | None, arrays: list) -> list:
    if consts is None:
        return arrays
    it = iter(arrays)
    return [next(it) if c is None else c for c in consts]


def _compute(op: str, operands: list, cdt: torch.dtype, odt: torch.dtype) -> torch.Tensor:
    # Constants become 0-d host tensors: torch combines them with device tensors without a copy.
    if cdt == torch.bool and op in ("lshift", "rshift"):  # torch shifts no bool: as 0/1 bytes
        cdt = torch.uint8
    xs = [x.to(cdt) if isinstance(x, torch.Tensor) else torch.tensor(x.item(), dtype=cdt) for x in operands]
    try:
        r = _IMPL[op](*xs)
    except RuntimeError as e:  # shapes that do not broadcast
        shapes = ", ".join(str(tuple(np.shape(x))) for x in operands)
        raise ValueError(f"Arithmetic `{op}`: operands of shapes {shapes} cannot be combined ({e})") from None
    return r.to(odt) if r.dtype != odt else r


def _vectorised(inputs: list[BatchData], ndim: int) -> list | None:
    """Operands with a leading batch dim (or none, for a broadcast Tensor), or None if ragged."""
    out = []
    dense_seen = False
    for bd in inputs:
        s = bd.samples if bd.dense is None else None
        if s and all(x is s[0] for x in s):  # one Tensor broadcast to the batch
            out.append(s[0])
            continue
        d = stacked(bd)
        if d is None:
            return None
        if d.ndim - 1 < ndim:  # align per-sample dims to the right, after the batch dim
            d = d.reshape(d.shape[:1] + (1,) * (ndim + 1 - d.ndim) + d.shape[1:])
        out.append(d)
        dense_seen = True
    return out if dense_seen else None


def arithm_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    op = args["op"]
    consts = args["constants"]
    n = ctx.batch_size
    if n == 0:
        return BatchData(samples=[])
    firsts = [bd.sample(0) for bd in inputs]
    np_dts = tuple(_operand_dtype(x) for x in _operands(consts, firsts))
    _, cdt_np = arithm_result_types(op, tuple(ndd.dtype(d) for d in np_dts))
    odt_np = ctx.output_meta[0].dtype.numpy_dtype
    if _HOST_ONLY & {cdt_np, odt_np, *np_dts}:
        return _arithm_host(ctx, inputs, args)
    cdt, odt = torch_dtype(cdt_np), torch_dtype(odt_np)
    if not ctx.is_batch:
        return _compute(op, _operands(consts, firsts), cdt, odt)[None]
    vec = _vectorised(inputs, ctx.output_meta[0].ndim)
    if vec is not None:
        return _compute(op, _operands(consts, vec), cdt, odt)
    return [_compute(op, _operands(consts, [bd.sample(i) for bd in inputs]), cdt, odt) for i in range(n)]


# -- subscript and transpose ---------------------------------------------------------------


def _expand(template: tuple, ndim: int) -> tuple:
    used = sum(1 for c in template if c[0] in "is")
    out = []
    for c in template:
        if c[0] == "e":
            out.extend([("s", None, None, None)] * (ndim - used))
        else:
            out.append(c)
    if not any(c[0] == "e" for c in template):
        out.extend([("s", None, None, None)] * (ndim - used))
    return tuple(out)


def _value(v: Any, extras: list[BatchData], i: int) -> Any:
    if isinstance(v, tuple):  # ("$", k): the per-sample value of extra input k (read on the host)
        x = extras[v[1] - 1].sample(i)
        return int(x.item() if isinstance(x, torch.Tensor) else x)
    return v


def _index(x: torch.Tensor, comps: tuple, extras: list[BatchData], i: int, lead: int) -> torch.Tensor:
    """``x[comps]`` for the sample axes after ``lead`` leading axes (negative steps included)."""
    dim = lead
    for c in _expand(comps, x.ndim - lead):
        if c[0] == "n":
            x = x.unsqueeze(dim)
            dim += 1
        elif c[0] == "i":
            k = _value(c[1], extras, i)
            size = x.shape[dim]
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for axis {dim - lead} with size {size}")
            x = x.select(dim, k)
        else:
            start, stop, step = (_value(v, extras, i) for v in c[1:])
            if step is not None and step < 0:
                idx = range(*slice(start, stop, step).indices(x.shape[dim]))
                pos = torch.arange(idx.start, idx.stop, idx.step, device=x.device)
                x = x.index_select(dim, pos)
            else:
                x = x[(slice(None),) * dim + (slice(start, stop, step),)]
            dim += 1
    return x


def subscript_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd, extras = inputs[0], inputs[1:]
    comps = args["index"]
    # contiguous results, as the CPU kernel's (and DALI's)
    if not ctx.is_batch:
        return _index(bd.sample(0), comps, extras, 0, 0)[None].contiguous()
    if not extras and bd.dense is not None:
        return _index(bd.dense, comps, extras, 0, 1).contiguous()
    return [_index(s, comps, extras, i, 0).contiguous() for i, s in enumerate(bd.samples)]


def transpose_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    ndim = ctx.output_meta[0].ndim
    perm = tuple(args["perm"]) if args["perm"] is not None else tuple(range(ndim - 1, -1, -1))
    if bd.dense is not None:
        return bd.dense.permute((0,) + tuple(p + 1 for p in perm)).contiguous()
    return [s.permute(perm).contiguous() for s in bd.samples]


# Core operators whose kernels also take the backend's tensors (reshaping, joining, filling)
# run them on the device; the random ops run core's CPU kernel on host copies.
HOST_KERNELS: dict[str, Callable] = {
    "reshape": on_device("reshape", host_inputs=(1,)),
    "full_like": on_device("full_like", uploaded=(1,)),
    **{op: on_device(op) for op in ("squeeze", "expand_dims", "cat", "stack", "full", "ones",
                                    "ones_like", "zeros", "zeros_like")},
    "random.uniform": via_host("random.uniform", ()),
    "random.normal": via_host("random.normal", ()),
    "random.coin_flip": via_host("random.coin_flip", ()),
    "random.beta": via_host("random.beta", ()),
    "random.choice": via_host("random.choice", (0,)),
}
