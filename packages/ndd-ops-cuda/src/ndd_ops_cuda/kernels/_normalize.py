"""``crop_mirror_normalize`` and ``normalize`` on the GPU with torch.

crop_mirror_normalize folds ``(x - mean) / std * scale + shift`` into ``x * a + b``
per channel with the CPU's coefficients (``cmn_coefficients``, float32), so the
values are the CPU's bit for bit up to the order of float32 operations. A batch of
one shape takes one pass: the window is a slice (or, for per-sample windows or
padding, one gather whose column indices are reversed for mirrored samples), then
one multiply-add with per-sample (n, C) coefficients, the channel padding and the
layout permutation, and one cast.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    batch_windows,
    cmn_coefficients,
    fill_vector,
    image_layout,
    reduced_axes,
    shaped_param,
)

from ._common import as_float, cast_to, gather_windows, out_dtype, stacked, upload, window_indices


def _cmn_batch(op: str, x: torch.Tensor, wins: list, mirror: np.ndarray, coefs: list, args: KernelArgs,
               lay: str, dt: torch.dtype) -> torch.Tensor:
    """crop_mirror_normalize of a batch (n, ...) in layout ``lay`` with windows of one size."""
    n = x.shape[0]
    dev = x.device
    ha, wa, ca = lay.index("H"), lay.index("W"), lay.find("C")
    hw_first = x.movedim((ha + 1, wa + 1), (1, 2))  # (n, H, W, rest...)
    H, W = hw_first.shape[1:3]
    (y0, x0), (h, w) = wins[0]
    valid = None
    if all(win == wins[0] for win in wins) and y0 >= 0 and x0 >= 0 and y0 + h <= H and x0 + w <= W:
        src = hw_first[:, y0:y0 + h, x0:x0 + w]
        if mirror.all():
            src = src.flip(2)
        elif mirror.any():
            m = upload(mirror, dev).reshape((n,) + (1,) * (src.ndim - 1))
            src = torch.where(m, src.flip(2), src)
    else:
        ys, xs, valid = window_indices(wins, [(H, W)] * n, mirror)
        src = gather_windows(hw_first, ys, xs)
    if ca < 0:
        src = src[..., None]  # a channel axis of 1 (last of rest)
        cpos = src.ndim - 1
        c = 1
    else:
        others = [ch for ch in lay if ch not in "HW"]
        cpos = 3 + others.index("C")
        c = src.shape[cpos]
    a = np.stack([co[0] for co in coefs]).astype(np.float32)
    b = np.stack([co[1] for co in coefs]).astype(np.float32)
    shape = [n] + [1] * (src.ndim - 1)
    shape[cpos] = c
    if all(co is coefs[0] for co in coefs):
        a, b = a[:1], b[:1]
        shape[0] = 1
    ta = upload(np.stack([a, b]), dev)
    out = as_float(src) * ta[0].reshape(shape) + ta[1].reshape(shape)
    if valid is not None:
        f = upload(fill_vector(op, args["fill_values"], c), dev, torch.float32)
        fshape = [1] * out.ndim
        fshape[cpos] = c
        mask = upload(valid, dev).reshape(valid.shape + (1,) * (out.ndim - 3))
        out = torch.where(mask, out, f.reshape(fshape))
    if ca >= 0 and args["pad_output"] and c < 4:
        pad = [0] * (2 * (out.ndim - 1 - cpos)) + [0, 4 - c]
        out = torch.nn.functional.pad(out, pad)
    if ca < 0:
        out = out[..., 0]
    out = out.movedim((1, 2), (ha + 1, wa + 1))  # back to the input layout
    perm = [0] + [1 + lay.index(ch) for ch in args["output_layout"]]
    return cast_to(out.permute(perm), dt)


def cmn_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Crop, mirror, ``(x - mean) / std * scale + shift``, pad channels, permute, cast."""
    op = ctx.op
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    samples = bd.samples
    lay = image_layout(ctx, samples[0].ndim)
    ha, wa, ca = lay.index("H"), lay.index("W"), lay.find("C")
    dt = out_dtype(ctx)
    chans = [s.shape[ca] if ca >= 0 else 1 for s in samples]
    wins = batch_windows(op, args, [(s.shape[ha], s.shape[wa]) for s in samples], args["out_of_bounds_policy"])
    mirror = np.asarray(args.per_sample("mirror"), bool).reshape(n)
    coefs = cmn_coefficients(op, args, chans)
    x = stacked(bd)
    if x is not None and len({win[1] for win in wins}) == 1:
        return _cmn_batch(op, x, wins, mirror, coefs, args, lay, dt)
    return [_cmn_batch(op, s[None], [wins[i]], mirror[i:i + 1], [coefs[i]], args, lay, dt)[0]
            for i, s in enumerate(samples)]


def normalize_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``scale * (x - mean) / sqrt(var + epsilon) + shift``; ``var = stddev**2`` when given.

    Statistics in float64 like the CPU kernel; a batch of one shape in one pass over
    (n, ...), a ragged batch sample by sample.
    """
    op = ctx.op
    bd = inputs[0]
    samples = bd.samples
    n = len(samples)
    if n == 0:
        return []
    ndim = samples[0].ndim
    axes = reduced_axes(op, args, ctx.input_layouts[0], ndim)
    dt = out_dtype(ctx)
    eps, ddof, scale, shift = args["epsilon"], args["ddof"], args["scale"], args["shift"]
    dev = samples[0].device

    def red_shape(shape: tuple) -> tuple[int, ...]:
        return tuple(1 if d in axes else shape[d] for d in range(len(shape)))

    def given(name: str) -> list | None:
        vals = [args.sample(name, i) for i in range(n)]
        if any(v is None for v in vals):
            return None
        return [shaped_param(op, name, v, red_shape(tuple(s.shape)), i) for i, (v, s) in enumerate(zip(vals, samples))]

    means, stds = given("mean"), given("stddev")
    x = stacked(bd)
    if args["batch"]:
        shapes = {red_shape(tuple(s.shape)) for s in samples}
        if len(shapes) != 1:
            raise ValueError(f"Operator `{op}`: with batch=True the non-reduced extents of all samples must match, "
                             f"got {sorted(shapes)}")
    if x is not None:
        return _normalize_dense(as_float(x), axes, means, stds, args, dt)
    if args["batch"]:  # ragged: batch statistics from per-sample sums
        dims = list(axes)
        count = sum(int(np.prod([s.shape[d] for d in axes])) for s in samples)
        if means is None:
            total = sum(s.to(torch.float64).sum(dim=dims, keepdim=True) for s in samples)
            m = total / count
            means_t = [m.to(torch.float32)] * n
        else:
            means_t = [upload(m, dev) for m in means]
        if stds is None:
            ss = sum(((as_float(s) - means_t[0]) ** 2).sum(dim=dims, dtype=torch.float64, keepdim=True)
                     for s in samples)
            var = [ss / max(count - ddof, 1)] * n
        else:
            var = [upload(v, dev).to(torch.float64) ** 2 for v in stds]
        return [_apply(as_float(s), means_t[i], var[i], eps, scale, shift, dt) for i, s in enumerate(samples)]
    out = []
    for i, s in enumerate(samples):
        y = _normalize_dense(as_float(s)[None], axes, None if means is None else [means[i]],
                             None if stds is None else [stds[i]], args, dt)
        out.append(y[0])
    return out


def _apply(x: torch.Tensor, m: torch.Tensor, var: torch.Tensor, eps: float, scale: float, shift: float,
           dt: torch.dtype) -> torch.Tensor:
    k = scale / torch.sqrt(var + eps)
    k = torch.where(torch.isfinite(k), k, torch.zeros_like(k)).to(torch.float32)  # constant slice -> shift
    return cast_to((x - m.to(torch.float32)) * k + shift, dt)


def _normalize_dense(x: torch.Tensor, axes: tuple[int, ...], means: list | None, stds: list | None,
                     args: KernelArgs, dt: torch.dtype) -> torch.Tensor:
    """normalize of a float32 batch (n, ...) whose samples share a shape."""
    dev = x.device
    eps, ddof, scale, shift = args["epsilon"], args["ddof"], args["scale"], args["shift"]
    dims = [a + 1 for a in axes]
    if args["batch"]:
        dims = [0] + dims
    count = int(np.prod([x.shape[d] for d in dims]))
    if means is not None:
        m = upload(np.stack(means), dev)
    else:
        m = x.to(torch.float64).sum(dim=dims, keepdim=True) / count
        if args["batch"]:
            m = m.to(torch.float32)  # the CPU keeps the batch mean in float32
    if stds is not None:
        var = upload(np.stack(stds), dev).to(torch.float64) ** 2
    else:
        diff = x - m if m.dtype == torch.float32 else x.to(torch.float64) - m
        var = (diff ** 2).sum(dim=dims, dtype=torch.float64, keepdim=True) / max(count - ddof, 1)
    return _apply(x, m, var, eps, scale, shift, dt)
