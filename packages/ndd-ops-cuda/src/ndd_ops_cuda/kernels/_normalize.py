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
    windows_per_sample,
)

from ._common import (
    as_float,
    cached_constant,
    call_stream,
    cast_to,
    flipped,
    gather_windows,
    graph_shape,
    out_dtype,
    stacked,
    upload,
    window_indices,
)


def _per_sample_coefficients(coefs: list) -> np.ndarray:
    """``a`` and ``b`` of every sample as one float32 array (2, n, C)."""
    return np.stack([np.stack([co[0] for co in coefs]), np.stack([co[1] for co in coefs])]).astype(np.float32)


def _coefficients(coefs: list, shape: list, dev: torch.device, stream: Any,
                  uploaded: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` as float32 tensors of ``shape`` (the batch dim: n, or 1 when all samples
    share them: then uploaded once and cached, the usual case of constant mean and std).
    Per-sample ones are uploaded, or given already on the device (a device graph's input)."""
    if all(co is coefs[0] for co in coefs):
        shape[0] = 1
        ab = np.stack(coefs[0]).astype(np.float32)[:, None]  # (2, 1, C)
        key = ("cmn", ab.tobytes(), ab.shape, dev)
        ta = cached_constant(key, stream, lambda: upload(ab, dev))
    else:
        ta = uploaded if uploaded is not None else upload(_per_sample_coefficients(coefs), dev)
    return ta[0].reshape(shape), ta[1].reshape(shape)


def _hw_first(x: torch.Tensor, lay: str) -> torch.Tensor:
    """(n, H, W, rest...) view of a batch in layout ``lay``."""
    return x.movedim((lay.index("H") + 1, lay.index("W") + 1), (1, 2))


def _cmn_batch(op: str, x: torch.Tensor, wins: list, mirror: np.ndarray, coefs: list, args: KernelArgs,
               lay: str, dt: torch.dtype, stream: Any) -> torch.Tensor:
    """crop_mirror_normalize of a batch (n, ...) in layout ``lay`` with windows of one size."""
    n = x.shape[0]
    dev = x.device
    hw_first = _hw_first(x, lay)
    H, W = hw_first.shape[1:3]
    (y0, x0), (h, w) = wins[0]
    valid = None
    if all(win == wins[0] for win in wins) and y0 >= 0 and x0 >= 0 and y0 + h <= H and x0 + w <= W:
        src = hw_first[:, y0:y0 + h, x0:x0 + w]
        if mirror.all():
            src = flipped(src, 2)
        elif mirror.any():
            src = flipped(src, 2, upload(mirror, dev).reshape((n,) + (1,) * (src.ndim - 1)))
    else:
        ys, xs, valid = window_indices(wins, [(H, W)] * n, mirror)
        src = gather_windows(hw_first, ys, xs)
    return _cmn_window(op, src, valid, coefs, args, lay, dt, stream)


def _cmn_window(op: str, src: torch.Tensor, valid: np.ndarray | None, coefs: list, args: KernelArgs, lay: str,
                dt: torch.dtype, stream: Any, ab: torch.Tensor | None = None) -> torch.Tensor:
    """The rest of crop_mirror_normalize on the windows ``src`` (n, h, w, rest...): the
    multiply-add (``ab``: per-sample coefficients already on the device), the fill of
    ``valid``'s outside pixels, channel padding, the output layout and the cast."""
    n = src.shape[0]
    dev = src.device
    ha, wa, ca = lay.index("H"), lay.index("W"), lay.find("C")
    if ca < 0:
        src = src[..., None]  # a channel axis of 1 (last of rest)
        cpos = src.ndim - 1
        c = 1
    else:
        others = [ch for ch in lay if ch not in "HW"]
        cpos = 3 + others.index("C")
        c = src.shape[cpos]
    shape = [n] + [1] * (src.ndim - 1)
    shape[cpos] = c
    a, b = _coefficients(coefs, shape, dev, stream, ab)
    # The multiply converts integer and half inputs to float32 itself (exactly as .to(float32)
    # would): no conversion kernel; float64 is converted first, as before.
    xf = src.to(torch.float32) if src.dtype == torch.float64 else src
    pad = ca >= 0 and args["pad_output"] and c == 3  # RGB -> RGBA, as the CPU
    perm = [0] + [1 + lay.index(ch) for ch in args["output_layout"]]

    def to_output(t: torch.Tensor) -> torch.Tensor:  # views: (n, h, w, rest...) -> the output layout
        t = t[..., 0] if ca < 0 else t
        return t.movedim((1, 2), (ha + 1, wa + 1)).permute(perm)

    if valid is None and not pad:
        # The usual case: multiply straight into the output layout, then add in place (two
        # kernels, no layout copy; the same float32 operations element by element).
        out = torch.empty(to_output(src).shape, dtype=torch.float32, device=dev)
        torch.mul(to_output(xf), to_output(a), out=out)
        out.add_(to_output(b))
        return cast_to(out, dt)
    out = xf * a + b
    if valid is not None:
        f = upload(fill_vector(op, args["fill_values"], c), dev, torch.float32)
        fshape = [1] * out.ndim
        fshape[cpos] = c
        mask = upload(valid, dev).reshape(valid.shape + (1,) * (out.ndim - 3))
        out = torch.where(mask, out, f.reshape(fshape))
    if pad:
        pad_widths = [0] * (2 * (out.ndim - 1 - cpos)) + [0, 4 - c]
        out = torch.nn.functional.pad(out, pad_widths)
    return cast_to(to_output(out), dt)


def cmn_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Crop, mirror, ``(x - mean) / std * scale + shift``, pad channels, permute, cast."""
    op = ctx.op
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    shapes = bd.shapes()
    lay = image_layout(ctx, len(shapes[0]))
    ha, wa, ca = lay.index("H"), lay.index("W"), lay.find("C")
    dt = out_dtype(ctx)
    chans = [s[ca] if ca >= 0 else 1 for s in shapes]
    wins = batch_windows(op, args, [(s[ha], s[wa]) for s in shapes], args["out_of_bounds_policy"])
    mirror = np.asarray(args.per_sample("mirror"), bool).reshape(n)
    coefs = cmn_coefficients(op, args, chans)
    x = stacked(bd)
    stream = call_stream(ctx)
    if x is not None and len({win[1] for win in wins}) == 1:
        return _cmn_batch(op, x, wins, mirror, coefs, args, lay, dt, stream)
    return [_cmn_batch(op, s[None], [wins[i]], mirror[i:i + 1], [coefs[i]], args, lay, dt, stream)[0]
            for i, s in enumerate(bd.samples)]


# Graph stages (core's Plan.graph_host) of crop_mirror_normalize on a batch of one shape with
# windows of one size inside the images. What may change per step goes up as arrays: the
# gather indices when the windows are given per sample (mirroring folded in), else the mirror
# flags when given per sample, and the coefficients when mean or std are; so the launches
# depend only on the shapes and on which arguments are per sample.
def _cmn_graph_plan(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> dict:
    op = ctx.op
    n = len(inputs[0])
    shape = graph_shape(ctx, inputs[0])
    lay = image_layout(ctx, len(shape))
    ha, wa, ca = lay.index("H"), lay.index("W"), lay.find("C")
    H, W = shape[ha], shape[wa]
    wins = batch_windows(op, args, [(H, W)] * n, args["out_of_bounds_policy"])
    (_, (h, w)) = wins[0]
    if any(size != (h, w) or y0 < 0 or x0 < 0 or y0 + h > H or x0 + w > W for (y0, x0), size in wins):
        raise RuntimeError(f"Operator `{op}`: a graph takes windows of one size inside the images")
    mirror = np.asarray(args.per_sample("mirror"), bool).reshape(n)
    coefs = cmn_coefficients(op, args, [shape[ca] if ca >= 0 else 1] * n)
    return {"lay": lay, "H": H, "W": W, "wins": wins, "mirror": mirror, "coefs": coefs,
            "gather": windows_per_sample(args),
            "mirror_mode": "mask" if args.is_per_sample("mirror") else bool(mirror.all()),
            "shared": all(co is coefs[0] for co in coefs)}


def _cmn_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    p = _cmn_graph_plan(ctx, inputs, args)
    n = len(p["wins"])
    arrays: list[np.ndarray] = []
    if p["gather"]:
        ys, xs, _ = window_indices(p["wins"], [(p["H"], p["W"])] * n, p["mirror"])
        arrays += [ys, xs]
    elif p["mirror_mode"] == "mask":
        arrays.append(p["mirror"])
    if not p["shared"]:
        arrays.append(_per_sample_coefficients(p["coefs"]))
    window = None if p["gather"] else p["wins"][0]
    return arrays, (inputs[0].shapes()[0], window, p["wins"][0][1], p["gather"], p["mirror_mode"], p["shared"])


def _cmn_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    p = _cmn_graph_plan(ctx, inputs, args)
    x = stacked(inputs[0])
    n = x.shape[0]
    hw_first = _hw_first(x, p["lay"])
    up = iter(uploaded)
    if p["gather"]:
        src = gather_windows(hw_first, next(up), next(up))
    else:
        (y0, x0), (h, w) = p["wins"][0]
        src = hw_first[:, y0:y0 + h, x0:x0 + w]
        if p["mirror_mode"] == "mask":
            src = flipped(src, 2, next(up).reshape((n,) + (1,) * (src.ndim - 1)))
        elif p["mirror_mode"]:
            src = flipped(src, 2)
    ab = None if p["shared"] else next(up)
    return _cmn_window(ctx.op, src, None, p["coefs"], args, p["lay"], out_dtype(ctx), call_stream(ctx), ab)


def _normalize_params(ctx: KernelContext, bd: BatchData, args: KernelArgs) -> tuple:
    """(reduced axes, the given means, the given standard deviations): each a list of
    per-sample arrays shaped like the statistics, or None when computed."""
    op = ctx.op
    n = len(bd)
    shapes = bd.shapes()
    axes = reduced_axes(op, args, ctx.input_layouts[0], len(shapes[0]))

    def red_shape(shape: tuple) -> tuple[int, ...]:
        return tuple(1 if d in axes else shape[d] for d in range(len(shape)))

    def given(name: str) -> list | None:
        if not args.is_per_sample(name):
            v = args[name]
            if v is None:
                return None
            if bd.dense is not None:  # one shape: shaped once
                return [shaped_param(op, name, v, red_shape(shapes[0]), 0)] * n
        vals = [args.sample(name, i) for i in range(n)]
        if any(v is None for v in vals):
            return None
        return [shaped_param(op, name, v, red_shape(s), i) for i, (v, s) in enumerate(zip(vals, shapes))]

    if args["batch"]:
        red = {red_shape(s) for s in set(shapes)}
        if len(red) != 1:
            raise ValueError(f"Operator `{op}`: with batch=True the non-reduced extents of all samples must match, "
                             f"got {sorted(red)}")
    return axes, given("mean"), given("stddev")


def _stacked_param(values: list | None, dev: torch.device) -> torch.Tensor | None:
    return None if values is None else upload(np.stack(values), dev)


def normalize_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``scale * (x - mean) / sqrt(var + epsilon) + shift``; ``var = stddev**2`` when given.

    Statistics in float64 like the CPU kernel; a batch of one shape in one pass over
    (n, ...), a ragged batch sample by sample.
    """
    bd = inputs[0]
    n = len(bd)
    if n == 0:
        return []
    axes, means, stds = _normalize_params(ctx, bd, args)
    dt = out_dtype(ctx)
    eps, ddof, scale, shift = args["epsilon"], args["ddof"], args["scale"], args["shift"]
    x = stacked(bd)
    if x is not None:
        dev = x.device
        return _normalize_dense(as_float(x), axes, _stacked_param(means, dev), _stacked_param(stds, dev), args, dt)
    samples = bd.samples
    dev = samples[0].device
    if args["batch"]:  # ragged: batch statistics from per-sample sums
        dims = list(axes)
        count = sum(int(np.prod([s.shape[d] for d in axes])) for s in samples)
        if means is None:
            total = sum(_sum(s.to(torch.float64), dims) for s in samples)
            m = total / count
            means_t = [m.to(torch.float32)] * n
        else:
            means_t = [upload(m, dev) for m in means]
        if stds is None:
            ss = sum(_sum(((as_float(s) - means_t[0]) ** 2).to(torch.float64), dims) for s in samples)
            var = [ss / (count - ddof) if count > ddof else ss * 0] * n
        else:
            var = [upload(v, dev).to(torch.float64) ** 2 for v in stds]
        return [_apply(as_float(s), means_t[i], var[i], eps, scale, shift, dt) for i, s in enumerate(samples)]
    out = []
    for i, s in enumerate(samples):
        y = _normalize_dense(as_float(s)[None], axes, _stacked_param(None if means is None else [means[i]], dev),
                             _stacked_param(None if stds is None else [stds[i]], dev), args, dt)
        out.append(y[0])
    return out


def _normalize_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """The given means and standard deviations (stacked) as input arrays; computed ones are
    device work."""
    bd = inputs[0]
    shape = graph_shape(ctx, bd)
    axes, means, stds = _normalize_params(ctx, bd, args)
    arrays = [np.stack(v) for v in (means, stds) if v is not None]
    return arrays, (shape, str(bd.sample(0).dtype), axes, means is None, stds is None)


def _normalize_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    bd = inputs[0]
    axes, means, stds = _normalize_params(ctx, bd, args)
    up = iter(uploaded)
    m = None if means is None else next(up)
    sd = None if stds is None else next(up)
    return _normalize_dense(as_float(stacked(bd)), axes, m, sd, args, out_dtype(ctx))


def _sum(t: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """``t`` summed over ``dims``, kept as size-1 dimensions; no dims: ``t`` itself (torch's
    ``sum(dim=[])`` would sum over every dimension)."""
    return t.sum(dim=dims, keepdim=True) if dims else t


def _apply(x: torch.Tensor, m: torch.Tensor, var: torch.Tensor, eps: float, scale: float, shift: float,
           dt: torch.dtype) -> torch.Tensor:
    k = scale / torch.sqrt(var + eps)
    # constant slice -> shift: non-finite factors become 0 (one kernel, not isfinite + zeros + where)
    k = torch.nan_to_num(k, nan=0.0, posinf=0.0, neginf=0.0).to(torch.float32)
    return cast_to((x - m.to(torch.float32)) * k + shift, dt)


def _normalize_dense(x: torch.Tensor, axes: tuple[int, ...], means: torch.Tensor | None,
                     stds: torch.Tensor | None, args: KernelArgs, dt: torch.dtype) -> torch.Tensor:
    """normalize of a float32 batch (n, ...) whose samples share a shape; ``means`` and
    ``stds``: the given statistics, stacked on the device (None: computed)."""
    eps, ddof, scale, shift = args["epsilon"], args["ddof"], args["scale"], args["shift"]
    dims = [a + 1 for a in axes]
    if args["batch"]:
        dims = [0] + dims
    count = int(np.prod([x.shape[d] for d in dims]))
    if means is not None:
        m = means
    else:
        m = _sum(x.to(torch.float64), dims) / count
        if args["batch"]:
            m = m.to(torch.float32)  # the CPU keeps the batch mean in float32
    if stds is not None:
        var = stds.to(torch.float64) ** 2
    else:
        diff = x - m if m.dtype == torch.float32 else x.to(torch.float64) - m
        ss = _sum((diff ** 2).to(torch.float64), dims)
        var = ss / (count - ddof) if count > ddof else ss * 0  # no degrees of freedom left: 0, as the CPU
    return _apply(x, m, var, eps, scale, shift, dt)
