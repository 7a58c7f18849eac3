"""Helpers shared by the GPU kernels: torch devices and dtypes, casts, uploads, windows."""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ndd.plugins import BatchData, KernelContext, Window

# The signed type of each unsigned one wider than a byte: kernels compute in it where torch
# lacks an operation for the unsigned type (the same bits; wrapping arithmetic agrees).
SIGNED_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def flipped(x: torch.Tensor, dims: Any, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``x.flip(dims)`` (where ``mask`` holds, when given); torch flips no uint16/32/64:
    those as their signed twin, the same bits."""
    twin = SIGNED_TWIN.get(x.dtype)
    v = x if twin is None else x.view(twin)
    out = v.flip(dims) if mask is None else torch.where(mask, v.flip(dims), v)
    return out if twin is None else out.view(x.dtype)


def torch_dtype(dt: Any) -> torch.dtype:
    """The torch dtype of a NumPy dtype (or an ndd DType)."""
    return _torch_dtype(np.dtype(getattr(dt, "numpy_dtype", dt)))


@functools.cache
def _torch_dtype(dt: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dt)).dtype


def numpy_dtype(dt: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype."""
    return _numpy_dtype(dt)


@functools.cache
def _numpy_dtype(dt: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dt).numpy().dtype


def out_dtype(ctx: KernelContext, k: int = 0) -> torch.dtype:
    """The torch dtype of output ``k`` as the schema inferred it."""
    return torch_dtype(ctx.output_meta[k].dtype.numpy_dtype)


def device_of(ctx: KernelContext, inputs: list[BatchData | None]) -> torch.device:
    """The torch device of the call: that of the first input tensor, else the context's GPU.

    Without inputs, ``NDD_CUDA_EMULATE=cpu`` (the CPU emulation of the GPU backend used
    by the tests on machines without CUDA) means torch's CPU device.
    """
    for bd in inputs:
        if bd is not None and len(bd):
            return bd.sample(0).device
    if os.environ.get("NDD_CUDA_EMULATE") == "cpu":
        return torch.device("cpu")
    return torch.device("cuda", ctx.device.device_id or 0)


def upload(a: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A small host array (per-sample parameters) as a tensor on ``device`` (no sync)."""
    from .._backend import BACKEND

    BACKEND.check_not_capturing()
    t = torch.from_numpy(np.ascontiguousarray(a))
    if dtype is not None:
        t = t.to(dtype)
    if device.type != "cuda":
        return t.to(device)
    # From pinned memory (torch's caching host allocator) the copy is asynchronous on the stream.
    return t.pin_memory().to(device, non_blocking=True)


_CONSTANTS: OrderedDict = OrderedDict()
_CONSTANTS_MAX = 32
_CONSTANTS_LOCK = threading.Lock()


def call_stream(ctx: KernelContext) -> Any:
    """The stream the call's kernels run on (ndd's stream of its EvalContext; None under the
    emulation)."""
    from .._backend import BACKEND

    return BACKEND.stream(ctx.eval_context, ctx.device.device_id)


def cached_constant(key: Any, stream: Any, make: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``make()`` (run on ``stream``, the current one), made once per ``key`` and stream,
    a few kept (least recently used out first): constant tensors that many calls read,
    e.g. coordinate grids and normalisation coefficients, without kernels or an upload
    each time. ``key`` must name the device.

    Per stream: a tensor is only read on the stream that wrote it (no cross-stream race),
    and once evicted its memory is reused only after that stream's queued reads. A device
    graph being captured keeps the constants it reads (``CudaBackend.graph_keeps``).
    """
    from .._backend import BACKEND

    k = (key, BACKEND.graph_home(stream))  # a graph capture's stream counts as the one it replays on
    with _CONSTANTS_LOCK:
        t = _CONSTANTS.get(k)
        made = t is None
        if made:
            BACKEND.graph_keeps(None, True)  # raises inside a capture, before making anything
            t = _CONSTANTS[k] = make()
            if len(_CONSTANTS) > _CONSTANTS_MAX:
                _CONSTANTS.popitem(last=False)
        else:
            _CONSTANTS.move_to_end(k)
    BACKEND.graph_keeps(t, False)
    return t


def graph_shape(ctx: KernelContext, bd: BatchData) -> tuple[int, ...]:
    """The one sample shape of a batch that a device graph takes (graph stages); raises for
    an empty or ragged batch, which then runs kernel by kernel."""
    shapes = bd.shapes()
    if not shapes or any(sh != shapes[0] for sh in shapes):
        raise RuntimeError(f"Operator `{ctx.op}`: a graph takes samples of one shape")
    return shapes[0]


def to_host(x: torch.Tensor | np.ndarray) -> np.ndarray:
    """A tensor as a NumPy array (a device-to-host copy: synchronises); host data as they are."""
    if isinstance(x, np.ndarray):
        return x
    return x.detach().cpu().numpy()


def host_batch(bd: BatchData | None) -> BatchData | None:
    """``bd`` with NumPy samples (copied to the host; an input on the CPU, such as a
    per-sample matrix batch, is taken as it is)."""
    if bd is None:
        return None
    if bd.dense is not None:
        return BatchData(dense=to_host(bd.dense))
    return BatchData(samples=[to_host(s) for s in bd.samples])


def device_batch(bd: BatchData, device: torch.device) -> BatchData:
    """``bd`` with its host samples uploaded to ``device`` (device samples as they are)."""
    if bd.dense is not None:
        return bd if isinstance(bd.dense, torch.Tensor) else BatchData(dense=upload(bd.dense, device))
    return BatchData(samples=[s if isinstance(s, torch.Tensor) else upload(s, device) for s in bd.samples])


def stacked(bd: BatchData) -> torch.Tensor | None:
    """The batch as one tensor with a leading batch dim (stacked once), None when ragged."""
    if bd.dense is not None:
        return bd.dense
    if len(bd) and bd.is_uniform():
        return bd.stacked(torch)
    return None


def cast_to(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Convert ``x`` to ``dtype`` as the CPU kernels do (DALI's ConvertSat: floats going to
    integers rounded half away from zero and saturated, integers saturated)."""
    if x.dtype == dtype:
        return x.contiguous()
    if dtype.is_floating_point or dtype == torch.bool:
        # contiguous in the same kernel (``.to`` alone keeps a permuted view's strides)
        return x.to(dtype, memory_format=torch.contiguous_format)
    from ._core import _saturate_cast  # (that module imports this one)

    return _saturate_cast(x, numpy_dtype(dtype), dtype).contiguous()


def window_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``crop``/``slice``'s conversion, as DALI's (and the CPU kernels'): floats going to
    integers truncated, then saturated like every integer target."""
    if x.dtype == dtype:
        return x
    if x.is_floating_point() and not dtype.is_floating_point and dtype != torch.bool:
        x = torch.trunc(x)
    return cast_to(x, dtype)


def as_float(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32 (no copy when it already is)."""
    return x if x.dtype == torch.float32 else x.to(torch.float32)


def window_indices(wins: list[Window], hw: list[tuple[int, int]], mirror: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Row and column indices (n, h) and (n, w) of windows of one size, clamped to the
    images, with the columns reversed where ``mirror``; plus the mask (n, h, w) of window
    pixels that fall on the image (None when all do)."""
    (_, _), (h, w) = wins[0]
    y0 = np.array([win[0][0] for win in wins], np.int64)[:, None]
    x0 = np.array([win[0][1] for win in wins], np.int64)[:, None]
    ys = y0 + np.arange(h)
    xs = x0 + np.arange(w)
    if mirror is not None and mirror.any():
        xs[mirror] = xs[mirror, ::-1]
    H = np.array([s[0] for s in hw], np.int64)[:, None]
    W = np.array([s[1] for s in hw], np.int64)[:, None]
    vy, vx = (ys >= 0) & (ys < H), (xs >= 0) & (xs < W)
    valid = None if vy.all() and vx.all() else vy[:, :, None] & vx[:, None, :]
    return np.clip(ys, 0, H - 1), np.clip(xs, 0, W - 1), valid


def gather_windows(x: torch.Tensor, ys: np.ndarray | torch.Tensor, xs: np.ndarray | torch.Tensor) -> torch.Tensor:
    """``out[i] = x[i][ys[i]][:, xs[i]]`` for x of shape (n, H, W, ...): one gather (indices
    on the host are uploaded; on the device, e.g. a device graph's inputs, taken as they are)."""
    n = x.shape[0]
    dev = x.device
    if not (x.shape[1] and x.shape[2]):  # empty images: every window pixel is padding, which the
        x = x.new_zeros((n, max(x.shape[1], 1), max(x.shape[2], 1)) + x.shape[3:])  # caller's mask fills
    rows = (ys if isinstance(ys, torch.Tensor) else upload(ys, dev))[:, :, None]
    cols = (xs if isinstance(xs, torch.Tensor) else upload(xs, dev))[:, None, :]
    return x[torch.arange(n, device=dev)[:, None, None], rows, cols]
