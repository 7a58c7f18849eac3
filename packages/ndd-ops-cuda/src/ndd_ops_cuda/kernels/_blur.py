"""``gaussian_blur`` on the GPU (torch): the CPU kernel's separable float32 filter, one
axis at a time over the whole batch when its samples share a shape (samples whose taps
differ, e.g. a random sigma, with each sample's taps, centred and padded with zeros to the
longest). The taps and the mirrored border (reflect-101) come from core's helpers, so both
devices blur alike; the sums run in another order, so float results agree to rounding and
integer ones to 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd.plugins import BatchData, KernelArgs, KernelContext, blur_axes, gaussian_taps, reflect101

from ._common import cached_constant, call_stream, cast_to, graph_shape, out_dtype, stacked, upload


def _per_sample(args: KernelArgs) -> bool:
    """Whether the taps are given per sample (``sigma`` or ``window_size`` as a batch)."""
    return args.is_per_sample("sigma") or args.is_per_sample("window_size")


def _border(x: torch.Tensor, ax: int, r: int, stream: Any) -> tuple[torch.Tensor, int]:
    """``x`` extended by ``r`` mirrored positions at both ends of axis ``ax`` (reflect-101);
    the border indices are cached constants, so the launches depend only on the shapes."""
    n, dev = x.shape[ax], x.device
    border = cached_constant(("reflect101", n, r, str(dev)), stream,
                             lambda: upload(reflect101(n, r), dev, torch.int64))
    return x.index_select(ax, border), n


def _blur(x: torch.Tensor, axes: tuple[int, ...], taps: list[np.ndarray], stream: Any) -> torch.Tensor:
    """Blur float32 ``x`` along ``axes`` (dimensions of ``x``) with taps shared by the batch,
    as kernel arguments (a device graph takes the call when they are constant)."""
    for ax, w in zip(axes, taps):
        src, n = _border(x, ax, len(w) // 2, stream)
        acc = torch.zeros_like(x)
        for k, wk in enumerate(w.tolist()):
            acc.add_(src.narrow(ax, k, n), alpha=wk)
        x = acc
    return x


def _blur_each(x: torch.Tensor, axes: tuple[int, ...], weights: list[torch.Tensor], stream: Any) -> torch.Tensor:
    """Blur the float32 batch ``x`` (n, ...) along ``axes`` with each sample's taps:
    ``weights[j]`` is (n, taps) for axis ``axes[j]``, taps centred (zeros at the ends)."""
    for ax, w in zip(axes, weights):
        src, n = _border(x, ax, w.shape[1] // 2, stream)
        w = w.reshape(w.shape[:1] + (1,) * (x.ndim - 1) + w.shape[1:])
        acc = torch.zeros_like(x)
        for k in range(w.shape[-1]):
            acc.addcmul_(src.narrow(ax, k, n), w[..., k])
        x = acc
    return x


def _padded_weights(per_sample: list[list[np.ndarray]]) -> list[np.ndarray]:
    """Per axis, every sample's taps as one (n, taps) array, centred, padded with zeros to
    the next 2**k + 1 taps past the longest: with a random sigma (and no window size) the
    longest window of a batch changes from step to step, and the number of taps is part of a
    device graph's signature; the next size up changes far less often."""
    out = []
    for ax in range(len(per_sample[0])):
        k = max(len(t[ax]) for t in per_sample)
        k = (1 << (k - 2).bit_length()) + 1 if k > 1 else 1
        w = np.zeros((len(per_sample), k), np.float32)
        for i, t in enumerate(per_sample):
            pad = (k - len(t[ax])) // 2
            w[i, pad:pad + len(t[ax])] = t[ax]
        out.append(w)
    return out


def gaussian_blur_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if not n:
        return []
    dt = out_dtype(ctx)
    stream = call_stream(ctx)
    layout = ctx.input_layouts[0]
    per_sample = [gaussian_taps(ctx.op, args, i, len(blur_axes(ctx.op, layout, len(s))))
                  for i, s in enumerate(bd.shapes())]
    x = stacked(bd) if all(all(s) for s in bd.shapes()) else None  # (an empty image: as it is)
    if x is not None:  # (per-sample arguments take the path a device graph takes, whatever their values)
        axes = tuple(a + 1 for a in blur_axes(ctx.op, layout, x.ndim - 1))
        if not _per_sample(args):
            return cast_to(_blur(x.float(), axes, per_sample[0], stream), dt)
        weights = [upload(w, x.device) for w in _padded_weights(per_sample)]
        return cast_to(_blur_each(x.float(), axes, weights, stream), dt)
    return [cast_to(_blur(s.float(), blur_axes(ctx.op, layout, s.ndim), t, stream) if s.numel() else s, dt)
            for s, t in zip(bd.samples, per_sample)]


def _graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """Graph host stage: constant taps go into the signature (kernel arguments); per-sample
    ones (a random sigma, say) are input arrays, (n, taps) per axis, their lengths in the
    signature (with a random sigma and no window size, the longest of a batch of many samples
    rarely changes)."""
    bd = inputs[0]
    shape = graph_shape(ctx, bd)
    n_axes = len(blur_axes(ctx.op, ctx.input_layouts[0], len(shape)))
    sig = (len(bd), shape, str(bd.sample(0).dtype))
    if not _per_sample(args):
        return [], (sig, tuple(t.tobytes() for t in gaussian_taps(ctx.op, args, 0, n_axes)))
    weights = _padded_weights([gaussian_taps(ctx.op, args, i, n_axes) for i in range(len(bd))])
    return weights, sig


def _graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    x = stacked(inputs[0])
    axes = tuple(a + 1 for a in blur_axes(ctx.op, ctx.input_layouts[0], x.ndim - 1))
    stream = call_stream(ctx)
    if uploaded:
        y = _blur_each(x.float(), axes, uploaded, stream)
    else:
        y = _blur(x.float(), axes, gaussian_taps(ctx.op, args, 0, len(axes)), stream)
    return cast_to(y, out_dtype(ctx))
