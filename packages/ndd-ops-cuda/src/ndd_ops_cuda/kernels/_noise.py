"""GPU kernels of core's noise operators (``noise.gaussian``, ``noise.salt_and_pepper``,
``noise.shot``) in torch.

Same values as the CPU kernels for the same RNG state: the random values are made on the
host by core's own code (``ndd._noise``), from the same Philox words, and uploaded (the
gaussian noise, the salt-and-pepper decisions, and for shot noise each element's uniform
``u`` and normal ``z``). The device applies them with correctly rounded operations only (add,
multiply, divide by a device tensor, sqrt, floor, compare, core's saturating cast), in the
order of the CPU kernels, so the results are identical bit for bit. (A division by a host
scalar is avoided: torch's CUDA kernel multiplies by its reciprocal instead.)

Inputs of uint16, uint32 and uint64, for which torch has few operations, run the CPU kernel
on host copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd._noise import (  # core's host parts (the CPU kernels' own)
    PEPPER,
    POISSON_SHIFT,
    POISSON_SMALL,
    POISSON_STEPS,
    RECIPROCALS,
    SALT,
    batch_groups,
    exp_neg,
    gaussian_noise,
    group_arrays,
    group_result,
    param,
    salt_pepper_codes,
    salt_pepper_values,
    shot_randoms,
)
from ndd.plugins import BatchData, KernelArgs, KernelContext

from ._common import stacked, torch_dtype, upload
from ._core import _saturate_cast, via_host

_HOST_ONLY = {np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)}
_ON_HOST = {op: via_host(op) for op in ("noise.gaussian", "noise.salt_and_pepper", "noise.shot")}

# Steps of the Poisson inversion between two checks (each one a device-to-host sync) that
# some value is still searching.
_CHECK_EVERY = 8


def _out_type(ctx: KernelContext) -> np.dtype:
    return np.dtype(ctx.output_meta[0].dtype.numpy_dtype)


def _up(a: np.ndarray, dev: torch.device) -> torch.Tensor:
    """A host array on ``dev``, with its shape (0-d included)."""
    return upload(a, dev).reshape(a.shape)


def gaussian_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``ConvertSat(float64(x) + float64(noise))``, the noise made on the host."""
    npd = _out_type(ctx)
    if npd in _HOST_ONLY:
        return _ON_HOST[ctx.op](ctx, inputs, args)
    bd, dt = inputs[0], torch_dtype(npd)
    noise = gaussian_noise(ctx, args, batch_groups(bd))
    outs = [_saturate_cast(x.to(torch.float64) + _up(n, x.device).to(torch.float64), npd, dt)
            for x, n in zip(group_arrays(bd), noise)]
    return group_result(bd, outs)


def salt_and_pepper_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The host's decisions (uint8 codes) applied with ``torch.where``."""
    npd = _out_type(ctx)
    if npd in _HOST_ONLY:
        return _ON_HOST[ctx.op](ctx, inputs, args)
    bd = inputs[0]
    groups = batch_groups(bd)
    outs = []
    for x, code, (shape, idx) in zip(group_arrays(bd), salt_pepper_codes(ctx, args, groups), groups):
        salt, pepper = salt_pepper_values(ctx.op, args, npd, idx, len(shape))
        c = _up(code, x.device)
        outs.append(torch.where(c == SALT, _up(salt, x.device), torch.where(c == PEPPER, _up(pepper, x.device), x)))
    return group_result(bd, outs)


def _graph_input(ctx: KernelContext, bd: BatchData) -> tuple[np.dtype, list, tuple]:
    """A graphed noise call's output type, its input as one group (core's draws run in
    sample order, so one group of the whole batch draws what a group per sample does) and
    the input's signature. The input is a batch of one shape (dense, or uniform samples as
    an operator's per-sample path leaves them) of a type torch handles."""
    npd = _out_type(ctx)
    if npd in _HOST_ONLY or not len(bd) or not bd.is_uniform():
        raise RuntimeError(f"Operator `{ctx.op}`: a graph takes a batch of one shape of a type torch handles")
    shape = (len(bd), *bd.shapes()[0])
    x = bd.dense if bd.dense is not None else bd.sample(0)
    return npd, [(shape, tuple(range(len(bd))))], (shape, str(x.dtype), npd.str)


def _gaussian_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """The step's noise (made on the host, as always) is the graph's input array."""
    _, groups, sig = _graph_input(ctx, inputs[0])
    return gaussian_noise(ctx, args, groups), sig


def _gaussian_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    npd, _, _ = _graph_input(ctx, inputs[0])
    x = stacked(inputs[0])
    return _saturate_cast(x.to(torch.float64) + uploaded[0].to(torch.float64), npd, torch_dtype(npd))


def _salt_and_pepper_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs
                                ) -> tuple[list, Any]:
    """The step's decisions, salt and pepper values are the graph's input arrays."""
    npd, groups, sig = _graph_input(ctx, inputs[0])
    (code,) = salt_pepper_codes(ctx, args, groups)
    salt, pepper = salt_pepper_values(ctx.op, args, npd, groups[0][1], len(groups[0][0]))
    return [code, salt, pepper], sig


def _salt_and_pepper_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list,
                                  args: KernelArgs) -> Any:
    _graph_input(ctx, inputs[0])
    c, salt, pepper = uploaded
    return torch.where(c == SALT, salt, torch.where(c == PEPPER, pepper, stacked(inputs[0])))


def _poisson(lam: torch.Tensor, u: torch.Tensor, z: torch.Tensor, stop_early: bool = True) -> torch.Tensor:
    """``ndd._noise.poisson`` in torch: every value runs the inversion steps (those with a
    large rate, given rate 0, stop at once) until none is searching (``stop_early``, which
    reads the device), or all of them (a device graph: a count stops for good, so the later
    steps change nothing), then the normal approximation's count is taken where the rate is
    large."""
    small = lam < POISSON_SMALL
    rate = torch.where(small, lam, 0.0)
    p = exp_neg(rate)
    cdf = p.clone()
    k = torch.zeros_like(rate)
    for j in range(1, POISSON_STEPS + 1):
        searching = u >= cdf
        if stop_early and (j - 1) % _CHECK_EVERY == 0 and not bool(searching.any()):
            break
        k = k + searching.to(k.dtype)  # (a value stops for good: the CDF only grows)
        p = p * rate * RECIPROCALS[j - 1]
        cdf = cdf + p
    zz = z.to(torch.float64)
    s = torch.sqrt(torch.clamp(lam - POISSON_SHIFT, min=0.0))
    g = ((lam + s * zz) + (zz * zz - 1.0) * (1.0 / 6.0)) + 0.5
    return torch.where(small, k, torch.clamp(torch.floor(g), min=0.0))


def shot_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``ConvertSat(float32(Poisson(x / factor)) * factor)``, ``u`` and ``z`` made on the host."""
    npd = _out_type(ctx)
    if npd in _HOST_ONLY:
        return _ON_HOST[ctx.op](ctx, inputs, args)
    bd, dt = inputs[0], torch_dtype(npd)
    groups = batch_groups(bd)
    # The groups (the samples of a ragged batch) run the Poisson search as one flat tensor, so
    # that its checks for an early stop wait for the device once per call, not per sample.
    lams, us, zs, factors = [], [], [], []
    for x, (u, z), (shape, idx) in zip(group_arrays(bd), shot_randoms(ctx, groups), groups):
        dev = x.device
        factor = _up(param(ctx.op, args, "factor", idx, len(shape)), dev)  # a device tensor
        lams.append(_shot_rate(x, factor))
        us.append(_up(u, dev).reshape(-1))
        zs.append(_up(z, dev).reshape(-1))
        factors.append(factor)
    if not lams:
        return group_result(bd, [])
    k_all = _poisson(torch.cat([lam.reshape(-1) for lam in lams]), torch.cat(us), torch.cat(zs))
    outs, start = [], 0
    for lam, factor in zip(lams, factors):
        k = k_all[start:start + lam.numel()].reshape(lam.shape)
        start += lam.numel()
        outs.append(_saturate_cast(k.to(torch.float32) * factor, npd, dt))
    return group_result(bd, outs)


def _shot_rate(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """The Poisson rate ``float32(x) / factor``, 0 where negative, NaN or infinite (float64)."""
    lam = x.to(torch.float32) / factor
    return torch.where(torch.isfinite(lam) & (lam > 0), lam, 0.0).to(torch.float64)


def _shot_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """The step's uniform and normal draws (made on the host, as always) and the factors
    are the graph's input arrays."""
    _, groups, sig = _graph_input(ctx, inputs[0])
    ((u, z),) = shot_randoms(ctx, groups)
    shape, idx = groups[0]
    return [u, z, param(ctx.op, args, "factor", idx, len(shape))], sig


def _shot_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    npd, _, _ = _graph_input(ctx, inputs[0])
    u, z, factor = uploaded
    k = _poisson(_shot_rate(stacked(inputs[0]), factor), u, z, stop_early=False)
    return _saturate_cast(k.to(torch.float32) * factor, npd, torch_dtype(npd))
