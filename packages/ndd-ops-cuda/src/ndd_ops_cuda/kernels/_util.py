"""GPU kernels of core's data-movement operators (``copy``, ``per_frame``, ``element_extract``,
``sequence_rearrange``, ``reinterpret``, ``permute_batch``): the CPU kernels' steps, with
core's own argument checks, on torch tensors. No arithmetic: the results are the CPU
kernels' bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ndd._shape_ops import _RESHAPE_ARGS
from ndd._util_ops import (  # core's argument helpers (the CPU kernels' own)
    _err,
    _frame_index,
    _order,
    _permute_indices,
    _reinterpret_shape,
    _with_origin,
)
from ndd.plugins import BatchData, KernelArgs, KernelContext

from ._common import to_host, torch_dtype, upload


def copy_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """New buffers with the input's values."""
    bd = inputs[0]
    return _with_origin(bd, bd.dense.clone() if bd.dense is not None else [s.clone() for s in bd.samples])


def per_frame_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The data as they are (only the layout changes)."""
    bd = inputs[0]
    return _with_origin(bd, bd.dense if bd.dense is not None else bd.samples)


def element_extract_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple:
    """One output per index of ``element_map``: that frame of every sequence, copied."""
    bd = inputs[0]
    emap = args["element_map"]
    if bd.dense is not None:
        d = bd.dense
        return tuple(d[:, _frame_index(ctx.op, "element_map", e, d.shape[1], 0)].contiguous() for e in emap)
    return tuple([s[_frame_index(ctx.op, "element_map", e, len(s), i)].clone() for i, s in enumerate(bd.samples)]
                 for e in emap)


def sequence_rearrange_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The frames of each sequence in ``new_order`` (one gather per sample, or one for a
    dense batch with one order)."""
    bd = inputs[0]
    if bd.dense is not None and not args.is_per_sample("new_order"):
        d = bd.dense
        return d.index_select(1, upload(_order(ctx, args, 0, d.shape[1]), d.device))
    return [s.index_select(0, upload(_order(ctx, args, i, len(s)), s.device)) for i, s in enumerate(bd.samples)]


def _as_bytes(x: torch.Tensor, dtype: torch.dtype, lead: tuple, out: tuple) -> torch.Tensor:
    """The bytes of ``x`` (a leading ``lead`` kept) as ``dtype`` with the shape ``lead + out``."""
    if not x.numel():
        return torch.empty(lead + out, dtype=dtype, device=x.device)
    flat = x.contiguous().reshape(lead + (-1,))
    if flat.dtype.itemsize != dtype.itemsize:
        flat = flat.view(torch.uint8)
    return flat.view(dtype).reshape(lead + out)


def reinterpret_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each sample's bytes viewed with the output's type and shape (a view where the input is
    contiguous); the shape input, if given, is read on the host."""
    bd = inputs[0]
    shp_in = inputs[1] if len(inputs) > 1 else None
    dt = torch_dtype(ctx.output_meta[0].dtype.numpy_dtype)
    want = ctx.output_meta[0].ndim

    def one(x: torch.Tensor, i: int, lead: tuple) -> torch.Tensor:
        shape = to_host(shp_in.sample(i)) if shp_in is not None else args.sample("shape", i)
        out = _reinterpret_shape(ctx.op, tuple(x.shape[len(lead):]), x.dtype.itemsize, dt.itemsize, shape,
                                 args.sample("rel_shape", i), args.sample("src_dims", i), i)
        if len(out) != want:
            raise _err(ctx.op, f"the result of sample {i} has {len(out)} dimension(s), but {want} were "
                               "expected from the call's arguments")
        return _as_bytes(x, dt, lead, tuple(out))

    if shp_in is None and bd.dense is not None and not any(args.is_per_sample(n) for n in _RESHAPE_ARGS):
        return one(bd.dense, 0, tuple(bd.dense.shape[:1]))
    return _with_origin(bd, [one(s, i, ()) for i, s in enumerate(bd.samples)])


def permute_batch_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``out[i] = in[indices[i]]``: one gather for a dense batch, copies of the samples otherwise."""
    bd = inputs[0]
    idx = _permute_indices(ctx, args)
    if bd.dense is not None:
        return bd.dense.index_select(0, upload(np.asarray(idx, np.int64), bd.dense.device))
    return [bd.samples[j].clone() for j in idx]
