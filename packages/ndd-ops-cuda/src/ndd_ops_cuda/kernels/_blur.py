"""``gaussian_blur`` on the GPU (torch): the CPU kernel's separable float32 filter, one
axis at a time over the whole batch when its samples share a shape. The taps and the
mirrored border (reflect-101) come from core's helpers, so both devices blur alike; the
sums run in another order, so float results agree to rounding and integer ones to 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd.plugins import BatchData, KernelArgs, KernelContext, blur_axes, gaussian_taps, reflect101

from ._common import cached_constant, call_stream, cast_to, out_dtype, stacked, upload


def _blur(x: torch.Tensor, axes: tuple[int, ...], taps: list[np.ndarray], stream: Any) -> torch.Tensor:
    """Blur float32 ``x`` along ``axes`` (dimensions of ``x``). The border indices are cached
    constants and the taps kernel arguments, so with constant arguments the launches depend
    only on the shapes (a device graph takes the call)."""
    dev = x.device
    for ax, w in zip(axes, taps):
        n, r = x.shape[ax], len(w) // 2
        border = cached_constant(("reflect101", n, r, str(dev)), stream,
                                 lambda n=n, r=r: upload(reflect101(n, r), dev, torch.int64))
        src = x.index_select(ax, border)
        acc = torch.zeros_like(x)
        for k, wk in enumerate(w.tolist()):
            acc.add_(src.narrow(ax, k, n), alpha=wk)
        x = acc
    return x


def gaussian_blur_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if not n:
        return []
    dt = out_dtype(ctx)
    stream = call_stream(ctx)
    layout = ctx.input_layouts[0]
    per_sample = [gaussian_taps(ctx.op, args, i, len(blur_axes(ctx.op, layout, s.ndim)))
                  for i, s in enumerate(bd.samples)]
    x = stacked(bd)
    same = all(len(t) == len(per_sample[0]) and all(np.array_equal(a, b) for a, b in zip(t, per_sample[0]))
               for t in per_sample)
    if x is not None and same:
        axes = blur_axes(ctx.op, layout, x.ndim - 1)
        return cast_to(_blur(x.float(), tuple(a + 1 for a in axes), per_sample[0], stream), dt)
    return [cast_to(_blur(s.float(), blur_axes(ctx.op, layout, s.ndim), t, stream), dt)
            for s, t in zip(bd.samples, per_sample)]
