"""GPU kernels of core's data-movement operators (``copy``, ``per_frame``, ``element_extract``,
``sequence_rearrange``, ``reinterpret``, ``permute_batch``) and of ``coord_flip`` and
``grid_mask``: the CPU kernels' steps, with core's own argument checks, on torch tensors.
The data-movement results are the CPU kernels' bytes; the two others use the same float32
operations, so they are identical too."""

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
)
from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    coord_flip_axes,
    grid_mask_keep,
    grid_mask_tile,
    keep_origin,
)

from ._common import to_host, torch_dtype, upload


def copy_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """New buffers with the input's values."""
    bd = inputs[0]
    return keep_origin(bd, bd.dense.clone() if bd.dense is not None else [s.clone() for s in bd.samples])


def per_frame_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The data as they are (only the layout changes)."""
    bd = inputs[0]
    return keep_origin(bd, bd.dense if bd.dense is not None else bd.samples)


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
    return keep_origin(bd, [one(s, i, ()) for i, s in enumerate(bd.samples)])


def permute_batch_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``out[i] = in[indices[i]]``: one gather for a dense batch, copies of the samples otherwise."""
    bd = inputs[0]
    idx = _permute_indices(ctx, args)
    if bd.dense is not None:
        return bd.dense.index_select(0, upload(np.asarray(idx, np.int64), bd.dense.device))
    return [bd.samples[j].clone() for j in idx]


# -- coord_flip ---------------------------------------------------------------------------------


def _per_sample_array(args: KernelArgs, name: str, n: int, dtype: Any) -> np.ndarray:
    """A one-value argument as an (n,) array (constants repeated)."""
    return np.asarray(args.per_sample(name), dtype).reshape(n)


def coord_flip_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """A flipped coordinate v becomes ``2 * center - v`` (one float32 subtraction, as on the
    CPU: ``2 * center`` is exact)."""
    bd = inputs[0]
    n = len(bd)
    if not n:
        return []
    flips = [(_per_sample_array(args, f"flip_{c}", n, np.int64) != 0, 2 * _per_sample_array(args, f"center_{c}", n,
                                                                                            np.float32))
             for c in "xyz"]

    def params(d: int, rows: slice | int) -> tuple[np.ndarray, np.ndarray]:
        """(flip mask, 2 * centre) per column of points with ``d`` coordinates, for samples ``rows``."""
        on = np.zeros((n, d), bool)
        twice = np.zeros((n, d), np.float32)
        for col, (flip, center2) in zip(coord_flip_axes(ctx.op, args["layout"], d), flips):
            on[:, col], twice[:, col] = flip, center2
        return on[rows], twice[rows]

    if bd.dense is not None:
        x = bd.dense
        on, twice = params(x.shape[2], slice(None))
        return torch.where(upload(on, x.device)[:, None], upload(twice, x.device)[:, None] - x, x)
    out = []
    for i, s in enumerate(bd.samples):
        on, twice = params(s.shape[1], i)
        out.append(torch.where(upload(on, s.device), upload(twice, s.device) - s, s))
    return out


# -- grid_mask ------------------------------------------------------------------------------------


_GM_ARGS = ("tile", "ratio", "angle", "shift_x", "shift_y")


def grid_mask_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each image times the mask of the pixels it keeps (``x * 0`` as on the CPU: NaN stays
    NaN), the mask made on the host by core's float32 arithmetic (the CPU kernel's own) and
    uploaded."""
    bd = inputs[0]

    def keep(i: int, h: int, w: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        where = f" ({bd.describe(i) if ctx.is_batch else 'the input'})" if args.is_per_sample("tile") else ""
        vals = [np.ravel(args.sample(k, i))[0] for k in _GM_ARGS]
        mask = grid_mask_keep(h, w, grid_mask_tile(ctx.op, vals[0], where), *(float(v) for v in vals[1:]))
        return upload(mask, device).to(dtype)[:, :, None]

    if bd.dense is not None and len(bd) and not any(args.is_per_sample(k) for k in _GM_ARGS):
        x = bd.dense
        return x * keep(0, x.shape[1], x.shape[2], x.dtype, x.device)[None]
    return [s * keep(i, s.shape[0], s.shape[1], s.dtype, s.device) for i, s in enumerate(bd.samples)]
