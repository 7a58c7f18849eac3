"""Geometry on the GPU with torch: ``crop``, ``flip``, ``rotate``, ``warp_affine``,
``resize`` and ``random_resized_crop``.

Arguments go through the same functions as the CPU kernels (``ndd.plugins``): the
windows, matrices, output sizes and filter taps are computed on the host in NumPy and
uploaded once per call as small tensors; the pixels never leave the device.

* crop: one slice of the dense batch when every window is the same and inside the
  images; else one gather with per-sample row / column indices (padding: a mask).
* rotate / warp_affine: ``F.affine_grid`` + ``F.grid_sample`` over the whole batch.
  The pixel-corner matrices of DALI are folded with grid_sample's normalised
  coordinates (``align_corners=False``); without ``fill_value`` the border repeats
  (``padding_mode="border"``), with it a ones channel sampled with zero padding tells
  how much of each output pixel came from outside: ``out + fill * (1 - ones)``.
* resize: separable resampling with the CPU's filter taps (``axis_taps``): per axis one
  gather of ``taps`` input rows and a weighted sum, batched over samples (per-sample
  taps when the plans differ; ragged inputs are zero-padded to a common size first).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ndd.plugins import (
    RESIZE_FILTER_ARGS,
    BatchData,
    KernelArgs,
    KernelContext,
    ResizePlan,
    axis_kinds,
    axis_taps,
    batch_windows,
    check_hw_layout,
    check_not_empty,
    fill_vector,
    image_layout,
    pil_edge_pads,
    pil_vertical_first,
    pixel_maps,
    random_windows,
    random_words,
    resize_filters,
    resize_plans,
    rotate_params,
    shared_args,
    spatial_axes,
    warp_affine_params,
    warp_fill,
)
from ndd.types import DALIInterpType

from .._backend import BACKEND
from ._common import (
    SIGNED_TWIN,
    as_float,
    cached_constant,
    call_stream,
    cast_to,
    device_of,
    flipped,
    gather_windows,
    graph_shape,
    host_batch,
    out_dtype,
    stacked,
    upload,
    window_cast,
    window_indices,
)

# -- crop -------------------------------------------------------------------------------


def _hw_first(x: torch.Tensor, ha: int, wa: int) -> torch.Tensor:
    """(n, ...) with the H and W axes of the sample moved to 1 and 2."""
    return x.movedim((ha + 1, wa + 1), (1, 2))


def _hw_back(x: torch.Tensor, ha: int, wa: int) -> torch.Tensor:
    return x.movedim((1, 2), (ha + 1, wa + 1))


def _channel_fill(op: str, fill: Any, x: torch.Tensor, layout: str) -> torch.Tensor:
    """The fill values broadcastable against (n, h, w, rest...) (channels last of ``rest``)."""
    c = x.shape[1 + layout.index("C")] if "C" in layout else 1
    f = fill_vector(op, fill, c)
    rest = x.ndim - 3  # axes after (n, h, w) once H and W are moved to the front
    t = window_cast(upload(f, x.device), x.dtype)  # (as the CPU kernel: truncated, saturated)
    if "C" in layout:
        others = [ch for ch in layout if ch not in "HW"]
        shape = [1] * rest
        shape[others.index("C")] = c
        return t.reshape(shape)
    return t.reshape([1] * rest if rest else [])


def _crop_uniform(op: str, x: torch.Tensor, wins: list, layout: str, fill: Any, dt: torch.dtype) -> torch.Tensor:
    """Crop windows of one size out of a dense batch (n, ...)."""
    ha, wa = spatial_axes(layout)
    H, W = x.shape[1 + ha], x.shape[1 + wa]
    (y0, x0), (h, w) = wins[0]
    if all(win == wins[0] for win in wins) and y0 >= 0 and x0 >= 0 and y0 + h <= H and x0 + w <= W:
        idx = [slice(None)] * x.ndim
        idx[1 + ha], idx[1 + wa] = slice(y0, y0 + h), slice(x0, x0 + w)
        return window_cast(x[tuple(idx)], dt)
    ys, xs, valid = window_indices(wins, [(H, W)] * len(wins), None)
    out = gather_windows(_hw_first(x, ha, wa), ys, xs)
    if valid is not None:
        mask = upload(valid, x.device)
        mask = mask.reshape(mask.shape + (1,) * (out.ndim - 3))
        out = torch.where(mask, out, _channel_fill(op, fill, x, layout))
    return window_cast(_hw_back(out, ha, wa), dt)


def crop_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    if not len(bd):
        return []
    shapes = bd.shapes()
    layout = image_layout(ctx, len(shapes[0]))
    ha, wa = spatial_axes(layout)
    dt = out_dtype(ctx)
    wins = batch_windows(ctx.op, args, [(s[ha], s[wa]) for s in shapes], args["out_of_bounds_policy"])
    x = stacked(bd)
    if x is not None and len({win[1] for win in wins}) == 1:
        return _crop_uniform(ctx.op, x, wins, layout, args["fill_values"], dt)
    return [_crop_uniform(ctx.op, s[None], [win], layout, args["fill_values"], dt)[0]
            for s, win in zip(bd.samples, wins)]


def _crop_graph_plan(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple:
    """(input shape, layout, windows) of a graphed crop: windows of one size inside the
    images (a fill would need the outside pixels' mask per step)."""
    bd = inputs[0]
    shape = graph_shape(ctx, bd)
    layout = image_layout(ctx, len(shape))
    ha, wa = spatial_axes(layout)
    H, W = shape[ha], shape[wa]
    wins = batch_windows(ctx.op, args, [(H, W)] * len(bd), args["out_of_bounds_policy"])
    (_, (h, w)) = wins[0]
    if any(size != (h, w) or y0 < 0 or x0 < 0 or y0 + h > H or x0 + w > W for (y0, x0), size in wins):
        raise RuntimeError(f"Operator `{ctx.op}`: a graph takes windows of one size inside the images")
    return shape, layout, wins


def _crop_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """One window for all samples: a slice (its position in the signature); else the row and
    column indices of every sample's window, as input arrays."""
    shape, layout, wins = _crop_graph_plan(ctx, inputs, args)
    dtype = str(inputs[0].sample(0).dtype)
    if all(win == wins[0] for win in wins):
        return [], (shape, dtype, wins[0])
    ha, wa = spatial_axes(layout)
    ys, xs, _ = window_indices(wins, [(shape[ha], shape[wa])] * len(wins), None)
    return [ys, xs], (shape, dtype, wins[0][1])


def _crop_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    _, layout, wins = _crop_graph_plan(ctx, inputs, args)
    x = stacked(inputs[0])
    if not uploaded:
        return _crop_uniform(ctx.op, x, wins, layout, args["fill_values"], out_dtype(ctx))
    ha, wa = spatial_axes(layout)
    out = gather_windows(_hw_first(x, ha, wa), uploaded[0], uploaded[1])
    return window_cast(_hw_back(out, ha, wa), out_dtype(ctx))


# -- flip -------------------------------------------------------------------------------


def flip_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if not n:
        return []
    layout = image_layout(ctx, len(bd.shapes()[0]))
    axes = {"horizontal": layout.find("W"), "vertical": layout.find("H"), "depthwise": layout.find("D")}
    flags = {k: np.asarray(args.per_sample(k), bool).reshape(n) for k in axes}
    if axes["depthwise"] < 0:  # ignored without a D axis, as DALI
        flags["depthwise"] = np.zeros(n, bool)
    for k, ax in axes.items():
        if ax < 0 and flags[k].any():
            raise ValueError(f"Operator `{ctx.op}`: argument '{k}': the input layout {layout!r} has no "
                             f"{'WHD'[list(axes).index(k)]} dimension")
    x = stacked(bd)
    if x is None:
        return [flipped(s, [ax for k, ax in axes.items() if flags[k][i]]).contiguous() if any(
            flags[k][i] for k in axes) else s.clone() for i, s in enumerate(bd.samples)]
    for k, ax in axes.items():
        f = flags[k]
        if f.all():
            x = flipped(x, ax + 1)
        elif f.any():
            x = flipped(x, ax + 1, upload(f, x.device).reshape((n,) + (1,) * (x.ndim - 1)))
    return x.contiguous() if x is not bd.dense else x.clone()


# Graph stages (core's Plan.graph_host) of flip on a batch of one shape: a flag given per
# sample (a batch, e.g. random coin flips) goes up as a mask and always takes the masked
# path, so the launches depend only on the shape and the constant flags.
def _flip_plan(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[dict, dict]:
    n = len(inputs[0])
    layout = image_layout(ctx, len(graph_shape(ctx, inputs[0])))
    axes = {"horizontal": layout.find("W"), "vertical": layout.find("H"), "depthwise": layout.find("D")}
    flags = {k: np.asarray(args.per_sample(k), bool).reshape(n) for k in axes}
    if any(ax < 0 and flags[k].any() for k, ax in axes.items() if k != "depthwise"):  # (depthwise: ignored)
        raise RuntimeError(f"Operator `{ctx.op}`: a flag for an axis the layout lacks (the eager call says which)")
    modes = {k: "mask" if args.is_per_sample(k) else bool(flags[k].all())
             for k, ax in axes.items() if ax >= 0}
    return axes, {k: (m, flags[k]) for k, m in modes.items()}


def _flip_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    _, modes = _flip_plan(ctx, inputs, args)
    masks = [f for m, f in modes.values() if m == "mask"]
    return masks, (inputs[0].shapes()[0], tuple((k, m) for k, (m, _) in modes.items()))


def _flip_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    axes, modes = _flip_plan(ctx, inputs, args)
    bd = inputs[0]
    x = stacked(bd)
    masks = iter(uploaded)
    for k, (m, _) in modes.items():
        ax = axes[k]
        if m == "mask":
            x = flipped(x, ax + 1, next(masks).reshape((len(bd),) + (1,) * (x.ndim - 1)))
        elif m:
            x = flipped(x, ax + 1)
    return x.contiguous() if x is not bd.dense else x.clone()


# -- rotate and warp_affine ------------------------------------------------------------

_MODES = {DALIInterpType.INTERP_NN: "nearest", DALIInterpType.INTERP_LINEAR: "bilinear"}


def _grid_theta(mats: np.ndarray, in_hw: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """``affine_grid`` matrices (n, 2, 3) for DALI's output-to-input pixel-corner matrices:
    normalised output coordinates -> pixel coordinates -> matrix -> normalised input ones."""
    oh, ow = out_hw
    h, w = in_hw
    to_px = np.array([[ow / 2, 0, ow / 2], [0, oh / 2, oh / 2], [0, 0, 1]])
    to_norm = np.array([[2 / w, 0, -1], [0, 2 / h, -1]])
    full = np.zeros((len(mats), 3, 3))
    full[:, :2] = mats
    full[:, 2, 2] = 1
    return to_norm @ full @ to_px


_BASE_GRID_MAX_BYTES = 8 << 20  # cache affine_grid's base grid up to this size


def _base_grid(n: int, oh: int, ow: int, device: torch.device) -> torch.Tensor:
    """``F.affine_grid``'s base grid (n, oh * ow, 3) for ``align_corners=False``, made by the
    same torch ops as ATen's ``make_base_grid_4D``, so the same values."""
    def steps(k: int) -> torch.Tensor:
        if k <= 1:
            return torch.zeros((), dtype=torch.float32, device=device)
        return torch.linspace(-1, 1, k, dtype=torch.float32, device=device) * (k - 1) / k

    g = torch.empty((n, oh, ow, 3), dtype=torch.float32, device=device)
    g.select(-1, 0).copy_(steps(ow))
    g.select(-1, 1).copy_(steps(oh).unsqueeze_(-1))
    g.select(-1, 2).fill_(1)
    return g.view(n, oh * ow, 3)


def _affine_grid(theta: torch.Tensor, n: int, oh: int, ow: int, stream: Any) -> torch.Tensor:
    """``F.affine_grid(theta, [n, 1, oh, ow], align_corners=False)``: its one matrix product
    with a cached base grid, where ``affine_grid`` makes the grid anew (~10 kernels) each call."""
    if n * oh * ow * 12 > _BASE_GRID_MAX_BYTES:
        return F.affine_grid(theta, [n, 1, oh, ow], align_corners=False)
    dev = theta.device
    base = cached_constant(("affine_grid", n, oh, ow, dev), stream, lambda: _base_grid(n, oh, ow, dev))
    return torch.bmm(base, theta.transpose(1, 2)).view(n, oh, ow, 2)


_U8, _F32 = np.dtype(np.uint8), np.dtype(np.float32)


def _warp_matrices(mats: np.ndarray, in_hw: tuple[int, int], out_hw: tuple[int, int], interp: Any) -> np.ndarray:
    """What the device warp takes, float32 (n, 2, 3) (NumPy rounds like torch's cast: one
    upload, no cast kernel): ``affine_grid`` matrices, or for NN OpenCV's pixel-centre ones."""
    if interp == DALIInterpType.INTERP_NN:
        return _centre_matrices(mats).astype(np.float32)
    return _grid_theta(mats, in_hw, out_hw).astype(np.float32)


def _centre_matrices(mats: np.ndarray) -> np.ndarray:
    """OpenCV's pixel-centre matrices of DALI's pixel-corner ones."""
    mc = np.array(mats, np.float64)
    mc[:, :, 2] = mats[:, :, :2] @ [0.5, 0.5] + mats[:, :, 2] - 0.5
    return mc


def _warp_batch(x: torch.Tensor, mats: np.ndarray, out_hw: tuple[int, int], interp: Any,
                fill: float | None, dt: torch.dtype, stream: Any) -> torch.Tensor:
    """Warp (n, H, W[, C]) with output-to-input matrices (n, 2, 3) to (n, oh, ow[, C])."""
    if interp != DALIInterpType.INTERP_NN and pixel_maps(_centre_matrices(mats)).all():
        interp = DALIInterpType.INTERP_NN  # whole pixels (90 degrees): read each one as it is
    theta = upload(_warp_matrices(mats, tuple(x.shape[1:3]), out_hw, interp), x.device)
    return _warp_theta(x, theta, out_hw, interp, fill, dt, stream)


def _warp_nearest(x: torch.Tensor, mc: torch.Tensor, out_hw: tuple[int, int], fill: float | None,
                  dt: torch.dtype) -> torch.Tensor:
    """NN warp with OpenCV's pixel-centre matrices ``mc`` (n, 2, 3) as the CPU kernel does
    it: each source coordinate in float32 as warpAffine computes it, ``fma(M0, x,
    float(float(M1 * y) + M2))`` (the product-sum in float64, rounded once), and the pixel
    whose area holds it, ties up; the CPU kernel's pixels, also where a coordinate falls on
    a half pixel (``grid_sample`` round-trips it through normalised coordinates and rounds
    it either way)."""
    n, h, w = x.shape[:3]
    oh, ow = out_hw
    dev = x.device
    ys = torch.arange(oh, device=dev, dtype=torch.float32).view(1, oh, 1, 1)
    xs = torch.arange(ow, device=dev, dtype=torch.float64).view(1, 1, ow, 1)
    row = ys * mc[:, :, 1].view(n, 1, 1, 2) + mc[:, :, 2].view(n, 1, 1, 2)  # float32, (n, oh, 1, 2)
    xy = torch.floor((row.double() + xs * mc[:, :, 0].double().view(n, 1, 1, 2)).float().double() + 0.5)
    ix, iy = xy[..., 0], xy[..., 1]
    inside = None
    if fill is not None:
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
    ix = ix.clamp_(0, w - 1).long()
    iy = iy.clamp_(0, h - 1).long()
    u8 = x.dtype == torch.uint8 and dt == torch.uint8
    src = x if u8 else as_float(x)
    out = src[torch.arange(n, device=dev).view(n, 1, 1), iy, ix]  # (n, oh, ow[, C])
    if inside is not None:
        mask = inside.view(inside.shape + (1,) * (out.ndim - 3))
        out = torch.where(mask, out, torch.tensor(float(warp_fill(fill, _U8 if u8 else _F32)), dtype=out.dtype, device=dev))
    return out.contiguous() if u8 else cast_to(out, dt)


def _warp_theta(x: torch.Tensor, theta: torch.Tensor, out_hw: tuple[int, int], interp: Any,
                fill: float | None, dt: torch.dtype, stream: Any) -> torch.Tensor:
    """:func:`_warp_batch` with its matrices (see :func:`_warp_matrices`) already on the device."""
    mode = _MODES.get(interp)
    if mode is None:
        raise ValueError(f"Interpolation {interp!r} is not supported by rotate / warp_affine (NN or LINEAR)")
    if mode == "nearest":
        return _warp_nearest(x, theta, out_hw, fill, dt)
    n, h, w = x.shape[:3]
    oh, ow = out_hw
    gray = x.ndim == 3
    src = as_float(x).reshape(n, h, w, -1).permute(0, 3, 1, 2)  # NCHW view
    c = src.shape[1]
    if fill is not None and fill != 0:
        src = torch.cat([src, torch.ones_like(src[:, :1])], dim=1)
    grid = _affine_grid(theta, n, oh, ow, stream)
    pad = "border" if fill is None else "zeros"
    out = F.grid_sample(src, grid, mode=mode, padding_mode=pad, align_corners=False)
    u8 = x.dtype == torch.uint8 and dt == torch.uint8  # (a float output is computed from float input)
    if src.shape[1] > c:
        # The fill's share of each pixel, none inside the image (a NaN fill stays outside it).
        f, m = float(warp_fill(fill, _U8 if u8 else _F32)), out[:, c:]
        out = out[:, :c] + torch.where(m < 1, f * (1 - m), 0.0)
    out = out.permute(0, 2, 3, 1)
    out = out[..., 0] if gray else out
    if u8:  # OpenCV warps uint8 to uint8 (rounded half to even)
        out = torch.round(out).clamp_(0, 255)
        return out.to(dt, memory_format=torch.contiguous_format)
    return cast_to(out, dt)


def _warp_all(bd: BatchData, mats: np.ndarray, out_hw: np.ndarray, interp: Any, fill: float | None,
              dt: torch.dtype, stream: Any) -> Any:
    """One warp for a uniform batch (at the largest output size when they differ, then
    cut); one per sample for ragged batches or very different output sizes."""
    n = len(bd)
    x = stacked(bd)
    oh, ow = (int(v) for v in out_hw.max(axis=0))
    areas = out_hw[:, 0] * out_hw[:, 1]
    if x is not None and oh * ow * n <= 2 * int(areas.sum()):
        out = _warp_batch(x, mats, (oh, ow), interp, fill, dt, stream)
        if (areas == oh * ow).all():
            return out
        return [out[i, :int(out_hw[i, 0]), :int(out_hw[i, 1])].contiguous() for i in range(n)]
    return [_warp_batch(s[None], mats[i:i + 1], (int(out_hw[i, 0]), int(out_hw[i, 1])), interp, fill, dt,
                        stream)[0]
            for i, s in enumerate(bd.samples)]


def rotate_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    if not n:
        return []
    check_hw_layout(ctx, [bd.sample(0)])
    in_hw = np.array([s[:2] for s in bd.shapes()], np.int64).reshape(n, 2)
    mats, out_hw = rotate_params(ctx.op, args, in_hw)
    return _warp_all(bd, mats, out_hw, args["interp_type"], args["fill_value"], out_dtype(ctx), call_stream(ctx))


def warp_affine_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    check_hw_layout(ctx, [bd.sample(0)] if n else [])
    mtx = host_batch(inputs[1]) if len(inputs) > 1 else None  # the matrices are needed on the host
    mats, out_hw = warp_affine_params(ctx.op, args, mtx, [s[:2] for s in bd.shapes()])
    if not n:
        return []
    return _warp_all(bd, mats, out_hw, args["interp_type"], args["fill_value"], out_dtype(ctx), call_stream(ctx))


# Graph stages (core's Plan.graph_host): one warp of a uniform batch to one output size, its
# matrices computed on the host and uploaded; other batches run kernel by kernel.
def _warp_plan(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[np.ndarray, tuple[int, int]]:
    bd = inputs[0]
    n = len(bd)
    shape = graph_shape(ctx, bd)
    check_hw_layout(ctx, [bd.sample(0)])
    in_hw = np.tile(np.array(shape[:2], np.int64), (n, 1))
    if ctx.op == "rotate":
        mats, out_hw = rotate_params(ctx.op, args, in_hw)
    else:
        if len(inputs) > 1 and inputs[1] is not None and not isinstance(inputs[1].sample(0), np.ndarray):
            raise RuntimeError(f"Operator `{ctx.op}`: matrices on the device cannot enter a graph")
        mats, out_hw = warp_affine_params(ctx.op, args, inputs[1] if len(inputs) > 1 else None, in_hw)
    if (out_hw != out_hw[0]).any():
        raise RuntimeError(f"Operator `{ctx.op}`: a graph takes one output size per batch")
    return mats, (int(out_hw[0, 0]), int(out_hw[0, 1]))


def _warp_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    mats, out_hw = _warp_plan(ctx, inputs, args)
    in_shape = inputs[0].shapes()[0]
    return [_warp_matrices(mats, in_shape[:2], out_hw, args["interp_type"])], (ctx.op, in_shape, out_hw)


def _warp_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    _, out_hw = _warp_plan(ctx, inputs, args)
    return _warp_theta(stacked(inputs[0]), uploaded[0], out_hw, args["interp_type"], args["fill_value"],
                       out_dtype(ctx), call_stream(ctx))


# -- resize and random_resized_crop ------------------------------------------------------


NN, LINEAR, CUBIC, LANCZOS3, TRIANGULAR = (
    DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC,
    DALIInterpType.INTERP_LANCZOS3, DALIInterpType.INTERP_TRIANGULAR,
)


def _pil_filter(kind: DALIInterpType) -> tuple[Any, float]:
    """Pillow's filter and support (in input pixels at scale 1) for a DALI filter kind."""
    if kind == TRIANGULAR:
        return (lambda x: np.maximum(0.0, 1 - np.abs(x))), 1.0
    if kind == CUBIC:  # Pillow's bicubic, a = -0.5
        def cubic(x: np.ndarray) -> np.ndarray:
            x = np.abs(x)
            return np.where(x < 1, (1.5 * x - 2.5) * x * x + 1,
                            np.where(x < 2, (((x - 5) * x + 8) * x - 4) * -0.5, 0.0))
        return cubic, 2.0
    return (lambda x: np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)), 3.0


def _pil_taps(kind: DALIInterpType, n_in: int, n_out: int, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Pillow's taps (what the CPU kernel resamples with for antialiased TRIANGULAR, CUBIC and
    LANCZOS3) over the image padded with copies of its edge pixels, as the CPU kernel pads
    it: Pillow's window, never cut, reading the clamped pixels. ``hi < lo`` flips."""
    flip = hi < lo
    lo, hi = min(lo, hi), max(lo, hi)
    f, support = _pil_filter(kind)
    scale = (hi - lo) / n_out
    fscale = max(scale, 1.0)
    support *= fscale
    centre = lo + (np.arange(n_out) + 0.5) * scale
    xmin = np.floor(centre - support + 0.5).astype(np.int64)
    xmax = np.floor(centre + support + 0.5).astype(np.int64)
    taps = max(int(np.max(xmax - xmin)), 1)
    pos = xmin[:, None] + np.arange(taps)
    w = np.where(pos < xmax[:, None], f((pos - centre[:, None] + 0.5) / fscale), 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w)
    idx, w = np.clip(pos, 0, n_in - 1), w.astype(np.float32)
    return (idx[::-1], w[::-1]) if flip else (idx, w)


def _installed_pillow() -> tuple[int, ...]:
    """The version of the Pillow that the CPU kernel resamples with (not imported here);
    without one there is no CPU result to match: the newest behaviour."""
    try:
        return tuple(int(p) for p in importlib.metadata.version("pillow").split(".")[:2] if p.isdigit())
    except importlib.metadata.PackageNotFoundError:
        return (99,)


_PILLOW = _installed_pillow()


def _engine(plan: ResizePlan, filters: tuple, antialias: bool, in_hw: tuple[int, int]) -> tuple[str, tuple]:
    """Which CPU engine resamples this ``in_hw`` sample ("cv", "pil" or "numpy"; "pilv" for
    Pillow going rows first) and the filter of each axis, by the CPU kernel's rules
    (``ndd_ops_cpu._resize.resample``)."""
    k0, k1 = axis_kinds(plan, *filters, antialias)
    if k0 == k1 == LINEAR:
        return "cv", (k0, k1)
    if k0 == k1 == NN:  # indexing, exactly (the CPU's NumPy path)
        return "numpy", (k0, k1)
    tents = {k0, k1} == {LINEAR, TRIANGULAR}
    pil = TRIANGULAR if tents else k0
    if ((k0 == k1 or tents) and pil in (TRIANGULAR, CUBIC, LANCZOS3)
            and (antialias or all(plan.out[d] >= abs(plan.hi[d] - plan.lo[d]) for d in range(2)))):
        (t, b), (left, r) = pil_edge_pads(in_hw, plan, pil)  # Pillow sees the padded image
        rows_first = pil_vertical_first((in_hw[0] + t + b, in_hw[1] + left + r), plan.out, _PILLOW)
        return "pilv" if rows_first else "pil", (pil, pil)
    return "numpy", (k0, k1)


def _engine_taps(engine: str, key: tuple, antialias: bool, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and weights (out, taps) of one sample's axis ``axis`` as ``engine`` resamples it;
    ``key`` is (filter kind, input size, output size, lo, hi)."""
    return _pil_taps(*key) if engine in ("pil", "pilv") else axis_taps(*key, antialias, rows=axis == 0)


def _taps(plans: list[ResizePlan], kinds: list[tuple], engine: str, in_hw: list[tuple[int, int]],
          antialias: bool, axis: int, dev: torch.device, stream: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices and weights (n, out, taps) of one axis for every sample (fewer taps padded
    with weight 0), on ``dev``; (1, out, taps) when all samples share them, which are then
    cached constants (made by the first call, read by every later one and by a device
    graph: a resize of a uniform batch with constant arguments uploads nothing)."""
    keys = [(k[axis], hw[axis], p.out[axis], p.lo[axis], p.hi[axis]) for p, k, hw in zip(plans, kinds, in_hw)]

    def make(key: tuple) -> tuple[np.ndarray, np.ndarray]:
        return _engine_taps(engine, key, antialias, axis)

    distinct = set(keys)
    if len(distinct) == 1:  # a uniform batch: one row, broadcast over the samples
        (key,) = distinct
        made: list = []

        def part(j: int) -> torch.Tensor:
            def one() -> torch.Tensor:
                if not made:
                    made.extend(_padded_taps([make(key)]))
                return upload(made[j], dev)
            return cached_constant(("resize taps", j, key, engine, antialias, axis, str(dev)), stream, one)
        return part(0), part(1)
    rows = {key: make(key) for key in distinct}
    idx, wts = _padded_taps([rows[key] for key in keys])
    return upload(idx, dev), upload(wts, dev)


def _padded_taps(rows: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (indices, weights) as (n, out, taps) arrays, fewer taps padded with weight 0."""
    t = max(r[0].shape[1] for r in rows)
    m = rows[0][0].shape[0]
    idx = np.zeros((len(rows), m, t), np.int64)
    wts = np.zeros((len(rows), m, t), np.float32)
    for i, (ix, wt) in enumerate(rows):
        idx[i, :, :ix.shape[1]] = ix
        wts[i, :, :wt.shape[1]] = wt
    return idx, wts


def _resample_axis(x: torch.Tensor, ti: torch.Tensor, tw: torch.Tensor, axis: int) -> torch.Tensor:
    """Resample (n, H, W, C) float32 along spatial ``axis`` (0: H, 1: W) with taps (n, out, T)
    (or (1, out, T), shared by all samples):
    one gather and one multiply-add per tap, accumulated in tap order like the CPU."""
    n = x.shape[0]
    dev = x.device
    if axis == 1:
        x = x.transpose(1, 2)
    rows = torch.arange(n, device=dev)[:, None]
    y = None
    for k in range(ti.shape[2]):
        part = x[rows, ti[:, :, k]] * tw[:, :, k, None, None]  # (n, out, other, C)
        y = part if y is None else y + part
    return y.transpose(1, 2) if axis == 1 else y


def _round_u8(y: torch.Tensor) -> torch.Tensor:
    """Between two uint8 passes, as Pillow's fixed point rounds: half up, then clamped."""
    return torch.floor(y + 0.5).clamp_(0, 255)


def _resample_batch(x: torch.Tensor, plans: list[ResizePlan], kinds: list[tuple], engine: str,
                    in_hw: list[tuple[int, int]], antialias: bool, dt: torch.dtype, stream: Any) -> torch.Tensor:
    """Resample a batch (n, H, W, C) (samples possibly zero-padded beyond ``in_hw``) whose
    plans share the output size and the engine, in the CPU engine's order and rounding:
    Pillow goes columns first, and for uint8 in and out OpenCV and Pillow round between the
    passes (a float output is computed from float input on the CPU: no rounding)."""
    return _engine_passes(x, engine, dt, lambda axis: _taps(plans, kinds, engine, in_hw, antialias, axis, x.device,
                                                             stream))


def _engine_passes(x: torch.Tensor, engine: str, dt: torch.dtype, taps: Any) -> torch.Tensor:
    """``x`` (n, H, W, C) resampled as ``engine`` does, with ``taps(axis)`` -> (indices,
    weights) of each axis (see :func:`_resample_batch`)."""
    axes = (1, 0) if engine == "pil" else (0, 1)  # (OpenCV and "pilv": rows first)
    each = {axis: taps(axis) for axis in axes}
    if all(ti.shape[2] == 1 for ti, _ in each.values()):  # nearest neighbour: a copy, exact in any type
        twin = SIGNED_TWIN.get(x.dtype)  # (torch indexes no uint16/32/64)
        y = x if twin is None else x.view(twin)
        rows = torch.arange(x.shape[0], device=x.device)[:, None]
        for axis in axes:
            ti = each[axis][0][:, :, 0]
            y = y[rows, ti] if axis == 0 else y.transpose(1, 2)[rows, ti].transpose(1, 2)
        return cast_to(y if twin is None else y.view(x.dtype), dt)
    u8 = x.dtype == torch.uint8 and engine != "numpy" and dt == torch.uint8
    y = as_float(x)
    for axis in axes:
        y = _resample_axis(y, *each[axis], axis)
        if u8:
            y = _round_u8(y)
    return cast_to(y, dt)


def _padded(samples: list[torch.Tensor]) -> torch.Tensor:
    """Ragged (H, W, C) samples zero-padded into one (n, Hmax, Wmax, C) tensor."""
    h = max(s.shape[0] for s in samples)
    w = max(s.shape[1] for s in samples)
    out = samples[0].new_zeros((len(samples), h, w) + tuple(samples[0].shape[2:]))
    for i, s in enumerate(samples):
        out[i, :s.shape[0], :s.shape[1]] = s
    return out


def _resample_all(bd: BatchData, plans: list[ResizePlan], filters: list, antialias: bool, dt: torch.dtype,
                  stream: Any) -> Any:
    """Resample every sample; one batched call per (output shape, engine) group."""
    shapes = bd.shapes()
    gray = len(shapes[0]) == 2
    in_hw = [s[:2] for s in shapes]
    memo: dict = {}  # the engine once per distinct (plan, filters, size): once for a uniform batch
    choice = []
    for p, f, hw in zip(plans, filters, in_hw):
        k = (id(p), f, hw)
        if k not in memo:
            memo[k] = _engine(p, f, antialias, hw)
        choice.append(memo[k])
    groups: dict = {}
    for i, p in enumerate(plans):
        groups.setdefault((p.out, shapes[i][2:], choice[i][0]), []).append(i)
    res: list = [None] * len(shapes)
    if len(groups) > 1:  # (ragged outputs: gathered by host indices, which a device graph cannot take)
        BACKEND.check_not_capturing()
    dense = stacked(bd)
    for (_, _, engine), idx in groups.items():
        if len(groups) == 1:
            x = _padded(bd.samples) if dense is None else dense
            x = x[..., None] if gray else x
        elif dense is not None:  # one gather of the group's samples
            x = dense[idx]
            x = x[..., None] if gray else x
        else:
            samples = bd.samples
            sub = [samples[i] if not gray else samples[i][..., None] for i in idx]
            x = torch.stack(sub) if len({s.shape for s in sub}) == 1 else _padded(sub)
        out = _resample_batch(x, [plans[i] for i in idx], [choice[i][1] for i in idx], engine,
                              [in_hw[i] for i in idx], antialias, dt, stream)
        out = out[..., 0] if gray else out
        if len(groups) == 1:
            return out
        for k, i in enumerate(idx):
            res[i] = out[k]
    return res


def resize_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    n = len(bd)
    check_hw_layout(ctx, [bd.sample(0)] if n else [])
    shapes = [s[:2] for s in bd.shapes()]
    plans, filters = resize_plans(ctx.op, args, shapes)
    out = _resample_all(bd, plans, filters, args["antialias"], out_dtype(ctx), call_stream(ctx)) if n else []
    if not args["save_attrs"]:
        return out
    attrs = np.array(shapes, np.int32).reshape(n, 2)  # as DALI: each input's (H, W)
    dev = device_of(ctx, inputs)
    # a constant of the shapes, uploaded once (a device graph takes the call); the output is a
    # copy of it, which the caller may change
    cached = cached_constant(("resize attrs", attrs.tobytes(), n, str(dev)), call_stream(ctx),
                             lambda: upload(attrs, dev))
    return out, cached.clone()


def _rrc_size(args: KernelArgs) -> tuple[int, int]:
    size = args["size"]
    return int(round(size[0])), int(round(size[-1]))


def _rrc_plans(ctx: KernelContext, args: KernelArgs, in_hw: list[tuple[int, int]]) -> list[ResizePlan]:
    """Each sample's window (the CPU kernel's: same random words, same draw pattern) resized
    to ``size``."""
    out = _rrc_size(args)
    check_not_empty(ctx.op, in_hw)
    wins = random_windows(random_words(ctx, len(in_hw), args["num_attempts"]), in_hw, args)
    return [ResizePlan(out, (float(y0), float(x0)), (float(y0 + h), float(x0 + w))) for (y0, x0), (h, w) in wins]


def random_resized_crop_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """The CPU kernel's windows, resampled on the GPU."""
    bd = inputs[0]
    n = len(bd)
    check_hw_layout(ctx, [bd.sample(0)] if n else [])
    plans = _rrc_plans(ctx, args, [s[:2] for s in bd.shapes()])
    if n and shared_args(args, RESIZE_FILTER_ARGS):
        filters = [resize_filters(ctx.op, args, 0)] * n
    else:
        filters = [resize_filters(ctx.op, args, i) for i in range(n)]
    return _resample_all(bd, plans, filters, args["antialias"], out_dtype(ctx), call_stream(ctx)) if n else []


def _rrc_graph_plan(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple:
    """(input shape, filters, the engines a window of these images may take, the taps of each
    (engine, axis)) of a graphed random_resized_crop: a batch of one shape, one filter.

    The windows change every step, and with them each sample's engine (which depends on
    whether each axis shrinks) and number of taps; the graph runs every engine a window of
    these images can take over the whole batch, each with taps padded to the most any window
    needs (weight 0: the sums are unchanged), and picks each sample's result."""
    bd = inputs[0]
    shape = graph_shape(ctx, bd)
    check_hw_layout(ctx, [bd.sample(0)])
    if not shared_args(args, RESIZE_FILTER_ARGS):
        raise RuntimeError(f"Operator `{ctx.op}`: a graph takes one filter for the batch")
    filters = resize_filters(ctx.op, args, 0)
    antialias = args["antialias"]
    (H, W), out = shape[:2], _rrc_size(args)
    taps: dict[tuple[str, int], int] = {}
    # whether each axis shrinks decides the engine, and the largest window the most taps
    for eh in {H, 1}:
        for ew in {W, 1}:
            plan = ResizePlan(out, (0.0, 0.0), (float(eh), float(ew)))
            engine, kinds = _engine(plan, filters, antialias, (H, W))
            # Pillow's order of passes depends on each window's padded size: both orders
            engines = ("pil", "pilv") if engine in ("pil", "pilv") else (engine,)
            for axis, n_in in ((0, H), (1, W)):
                key = (kinds[axis], n_in, out[axis], 0.0, float(plan.hi[axis]))
                t = _engine_taps(engine, key, antialias, axis)[0].shape[1] + 1  # (+1: a window's offset)
                for e in engines:
                    taps[e, axis] = max(taps.get((e, axis), 0), t)
    return shape, filters, sorted({e for e, _ in taps}), taps


def _rrc_graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """The step's taps for each engine and axis (zeros for the samples another engine takes)
    and, with several engines, each sample's engine, as input arrays."""
    shape, filters, engines, taps = _rrc_graph_plan(ctx, inputs, args)
    n, (H, W) = len(inputs[0]), shape[:2]
    antialias = args["antialias"]
    plans = _rrc_plans(ctx, args, [(H, W)] * n)
    chosen = [_engine(p, filters, antialias, (H, W)) for p in plans]
    arrays = []
    for engine in engines:
        for axis, n_in in ((0, H), (1, W)):
            t, m = taps[engine, axis], plans[0].out[axis]
            idx, wts = np.zeros((n, m, t), np.int64), np.zeros((n, m, t), np.float32)
            for i, (p, (e, kinds)) in enumerate(zip(plans, chosen)):
                if e == engine:
                    ix, wt = _engine_taps(e, (kinds[axis], n_in, p.out[axis], p.lo[axis], p.hi[axis]), antialias, axis)
                    if ix.shape[1] > t:
                        raise RuntimeError(f"Operator `{ctx.op}`: a window needs more filter taps than the graph has")
                    idx[i, :, :ix.shape[1]], wts[i, :, :wt.shape[1]] = ix, wt
            arrays += [idx, wts]
    if len(engines) > 1:
        arrays.append(np.array([engines.index(e) for e, _ in chosen], np.int64))
    return arrays, (shape, str(inputs[0].sample(0).dtype), tuple(engines), tuple(sorted(taps.items())))


def _rrc_graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    shape, _, engines, _ = _rrc_graph_plan(ctx, inputs, args)
    x = stacked(inputs[0])
    gray = len(shape) == 2
    x = x[..., None] if gray else x
    dt = out_dtype(ctx)
    outs = [_engine_passes(x, engine, dt, lambda axis, t=uploaded[4 * j:4 * j + 4]: (t[2 * axis], t[2 * axis + 1]))
            for j, engine in enumerate(engines)]
    out = outs[0]
    if len(outs) > 1:
        which = uploaded[-1].view(-1, *([1] * (out.ndim - 1)))
        for j in range(1, len(outs)):
            out = torch.where(which == j, outs[j], out)
    return out[..., 0] if gray else out
