"""Filter and warp operators on the CPU: ``laplacian``, ``filter``, ``water``, ``sphere``,
``experimental.warp_perspective``, ``resize_crop_mirror``, ``tensor_resize``.

``laplacian``: each partial derivative is a separable correlation in float32, one axis at a time from
the innermost spatial axis outwards, the border mirrored without repeating the edge
(reflect-101, again and again on axes shorter than the window); the partials are scaled
and summed in axis order and the sum converted with rounding and saturation. That order
gives DALI 2.4's float results to the bit. A dense batch with shared arguments is
filtered in one pass, with the batch as a leading axis.

``filter``: OpenCV's ``filter2D`` on each 2-D plane (frames and leading channels apart,
trailing channels together, up to 128), called as DALI 2.4's CPU operator calls it, so
the results are its own (rounding to integers included). Where DALI filters a region of a
padded image (``wrap``, ``constant`` with a non-zero fill, ``valid``) and Python cannot
hand OpenCV a region that knows its surroundings, the padded image is filtered whole with
the anchor at the origin: the same sums, but OpenCV's vector loop may split a row
elsewhere, so floats can differ in the last bit and integers, rarely, by 1.

``water`` and ``sphere``: per output pixel a source point from core (float32, as DALI), then
DALI's sampler in NumPy: NN takes the pixel under the point (floor); LINEAR blends the four
pixels around the point shifted by half a pixel, in float32 in DALI's order (rows first,
then the difference of the rows), pixels outside the image taking ``fill_value``.

``experimental.warp_perspective``: OpenCV's ``warpPerspective`` per 2-D plane, the matrix
moved to pixel centres in float32 as DALI 2.4's CPU operator does it.

``resize_crop_mirror``: ``resize``'s plan, narrowed to the crop window (its input ROI
rounded to float32, its ends swapped on flipped axes), and ``resize``'s resampling of that
ROI: one resampling, as DALI's fused operator (whose nearest-neighbour picks at ties follow
the narrowed ROI, not the whole resize).

``tensor_resize``: core's plan per axis, then a separable float32 resampling with
``resize``'s filter taps, one resized axis after the other (the last first).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from ndd._schemas_filters import (
    displacement_fill,
    filter_anchor,
    filter_axes,
    filter_layout,
    laplacian_windows,
    perspective_fill,
    perspective_layout,
    perspective_matrix,
    perspective_size,
    resized_block,
    sphere_coords,
    tensor_resize_axes,
    tensor_resize_plan,
    water_coords,
)
from ndd.plugins import (
    BatchData,
    KernelArgs,
    KernelContext,
    ResizePlan,
    axis_taps,
    crop_window,
    reflect101,
    resize_filters,
    resize_plans,
)
from ndd.types import DALIInterpType

from ._common import cast_to, map_samples, sample_name
from ._resize import resample


def _correlate_axis(y: np.ndarray, ax: int, w: np.ndarray) -> np.ndarray:
    """``y`` (float32) correlated with the centred taps ``w`` along axis ``ax``, reflect-101."""
    n, r = y.shape[ax], len(w) // 2
    src = np.take(y, reflect101(n, r), axis=ax)
    acc = np.zeros_like(y)
    sl = [slice(None)] * y.ndim
    for k, wk in enumerate(w):
        if wk:
            sl[ax] = slice(k, k + n)
            acc += wk * src[tuple(sl)]
    return acc


def laplacian_one(x: np.ndarray, axes: tuple[int, ...], windows: list[tuple[list[np.ndarray], float]],
                  dt: np.dtype) -> np.ndarray:
    """The Laplacian of ``x`` along ``axes`` with one sample's windows, as ``dt``."""
    if not x.size:
        return np.zeros(x.shape, dt)
    src = x.astype(np.float32)
    out = None
    for taps, scale in windows:
        y = src
        for ax, w in reversed(list(zip(axes, taps))):
            if len(w) > 1:
                y = _correlate_axis(y, ax, w)
        y = np.float32(scale) * y
        out = y if out is None else out + y
    return cast_to(out, dt)


_LAPLACIAN_ARGS = ("window_size", "smoothing_size", "scale")


def laplacian_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    dt = ctx.output_meta[0].dtype.numpy_dtype
    layout = ctx.input_layouts[0]
    axes = filter_axes(ctx.op, layout, samples[0].ndim if samples else 2)
    if bd.dense is not None and len(samples) > 1 and not any(args.is_per_sample(k) for k in _LAPLACIAN_ARGS):
        windows = laplacian_windows(ctx.op, args, 0, len(axes))
        return laplacian_one(bd.dense, tuple(a + 1 for a in axes), windows, dt)

    def one(i: int) -> np.ndarray:
        return laplacian_one(samples[i], axes, laplacian_windows(ctx.op, args, i, len(axes)), dt)

    return map_samples(ctx, one, len(samples), sum(s.nbytes for s in samples))


_CV_BORDER = {"reflect_101": cv2.BORDER_REFLECT_101, "reflect_1001": cv2.BORDER_REFLECT,
              "wrap": cv2.BORDER_WRAP, "clamp": cv2.BORDER_REPLICATE, "constant": cv2.BORDER_CONSTANT}
_FILTER_CPU_DTYPES = (np.uint8, np.uint16, np.int16, np.float32)
_FILTER_MAX_CHANNELS = 128


def _filter_plane(x: np.ndarray, f: np.ndarray, anchor: tuple[int, int], border: str, valid: bool,
                  fill: float, ddepth: int) -> np.ndarray:
    """One (H, W[, C]) plane filtered as DALI's CPU operator does it."""
    h, w = x.shape[:2]
    fh, fw = f.shape
    ay, ax = anchor
    if valid:
        return cv2.filter2D(x, ddepth, f, anchor=(0, 0))[:h - fh + 1, :w - fw + 1]
    if border == "wrap" or (border == "constant" and fill != 0):
        pads = (ay, fh - 1 - ay, ax, fw - 1 - ax)
        if border == "wrap":
            p = cv2.copyMakeBorder(x, *pads, cv2.BORDER_WRAP)
        else:  # DALI pads with cv::Scalar(fill, fill, fill): a 4th channel is padded with 0
            p = cv2.copyMakeBorder(x, *pads, cv2.BORDER_CONSTANT, value=(fill, fill, fill, 0))
        return cv2.filter2D(p, ddepth, f, anchor=(0, 0))[:h, :w]
    return cv2.filter2D(x, ddepth, f, anchor=(ax, ay), borderType=_CV_BORDER[border])


def filter_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd, filters = inputs[0], inputs[1].samples
    fills = inputs[2].samples if len(inputs) > 2 and inputs[2] is not None else None
    samples = bd.samples
    layout = ctx.input_layouts[0]
    dt = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
    valid = args["mode"] == "valid"
    border = args["border"]
    op = ctx.op
    if samples and samples[0].dtype not in _FILTER_CPU_DTYPES:
        raise ValueError(f"Operator `{op}`: the CPU operator does not support input type {samples[0].dtype} "
                         "(as DALI: uint8, uint16, int16, float32)")
    lead, n_sp, last = filter_layout(op, layout, samples[0].ndim if samples else 2)
    if n_sp != 2:
        raise ValueError(f"Operator `{op}`: the CPU operator filters 2 spatial axes only, got {n_sp} "
                         f"(layout {layout!r}); mark channels and frames in the layout (HWC, CHW, FHWC)")

    def one(i: int) -> np.ndarray:
        x, f = samples[i], np.ascontiguousarray(filters[i])
        hw = x.shape[lead:lead + 2]
        c = x.shape[-1] if last else 1
        if not x.size or not f.size:
            raise ValueError(f"Operator `{op}`: {sample_name(ctx, bd, i)} or its filter is empty "
                             f"(shapes {x.shape} and {f.shape})")
        if c > _FILTER_MAX_CHANNELS:
            raise ValueError(f"Operator `{op}`: at most {_FILTER_MAX_CHANNELS} channels, "
                             f"{sample_name(ctx, bd, i)} has {c}")
        if valid and (f.shape[0] > hw[0] or f.shape[1] > hw[1]):
            raise ValueError(f"Operator `{op}`: in 'valid' mode the filter {f.shape} must fit in the sample "
                             f"({sample_name(ctx, bd, i)} has spatial shape {hw})")
        anchor = filter_anchor(op, args, i, f.shape)
        fill = float(fills[i]) if fills is not None and border == "constant" else 0.0
        if fill != 0 and c > 4:
            raise ValueError(f"Operator `{op}`: a non-zero fill_value pads at most 4 channels (as DALI's "
                             f"OpenCV call), {sample_name(ctx, bd, i)} has {c}")
        ddepth = -1 if dt == x.dtype else cv2.CV_32F
        planes = x.reshape((-1,) + x.shape[lead:])
        out = [_filter_plane(p, f, anchor, border, valid, fill, ddepth) for p in planes]
        res = np.stack(out).reshape(x.shape[:lead] + out[0].shape[:2] + x.shape[lead + 2:])
        return res

    return map_samples(ctx, one, len(samples), sum(s.nbytes for s in samples))


def _taps(x: np.ndarray, xi: np.ndarray, yi: np.ndarray, fill: Any) -> np.ndarray:
    """Pixels (h, w, C) of ``x`` at integer coordinates ``xi``, ``yi``; ``fill`` outside."""
    h, w = x.shape[:2]
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    px = x[np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]
    return np.where(inside[..., None], px, fill)


def sample_points(x: np.ndarray, sx: np.ndarray, sy: np.ndarray, linear: bool, fill: Any) -> np.ndarray:
    """``x`` (HWC) sampled at the float32 points (``sx``, ``sy``) as DALI's 2-D sampler does."""
    if not linear:
        return _taps(x, np.floor(sx).astype(np.int64), np.floor(sy).astype(np.int64), fill)
    f32 = np.float32
    fx, fy = sx - f32(0.5), sy - f32(0.5)
    x0, y0 = np.floor(fx), np.floor(fy)
    qx, qy = (fx - x0)[..., None], (fy - y0)[..., None]
    px = f32(1) - qx
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    s00, s01 = _taps(x, x0, y0, fill), _taps(x, x0 + 1, y0, fill)
    s10, s11 = _taps(x, x0, y0 + 1, fill), _taps(x, x0 + 1, y0 + 1, fill)
    s0 = s00.astype(f32) * px + s01.astype(f32) * qx
    s1 = s10.astype(f32) * px + s11.astype(f32) * qx
    return cast_to(s0 + (s1 - s0) * qy, x.dtype)


def _displace(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs, coords: Any) -> Any:
    samples = inputs[0].samples
    linear = args["interp_type"] == DALIInterpType.INTERP_LINEAR

    def one(i: int) -> np.ndarray:
        x = samples[i]
        if not args.sample("mask", i) or not x.size:
            return x.copy()
        sx, sy = coords(x.shape[0], x.shape[1])
        return sample_points(x, sx, sy, linear, displacement_fill(args["fill_value"], x.dtype))

    return map_samples(ctx, one, len(samples), sum(s.nbytes for s in samples))


def water_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    return _displace(ctx, inputs, args, lambda h, w: water_coords(args, h, w))


def sphere_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    return _displace(ctx, inputs, args, sphere_coords)


_CV_WARP_BORDER = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
                   "reflect": cv2.BORDER_REFLECT, "reflect_101": cv2.BORDER_REFLECT_101, "wrap": cv2.BORDER_WRAP}
_CV_WARP_INTERP = {DALIInterpType.INTERP_NN: cv2.INTER_NEAREST, DALIInterpType.INTERP_LINEAR: cv2.INTER_LINEAR,
                   DALIInterpType.INTERP_CUBIC: cv2.INTER_CUBIC}


def warp_perspective_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    mats = inputs[1].samples if len(inputs) > 1 and inputs[1] is not None else None
    op = ctx.op
    _, lead, last = perspective_layout(op, ctx.input_layouts[0], samples[0].ndim if samples else 2)
    flags = _CV_WARP_INTERP[args["interp_type"]] | (cv2.WARP_INVERSE_MAP if args["inverse_map"] else 0)
    border = _CV_WARP_BORDER[args["border_mode"]]
    corner = args["pixel_origin"] == "corner"

    def one(i: int) -> np.ndarray:
        x = samples[i]
        c = x.shape[-1] if last else 1
        if c > 4:
            raise ValueError(f"Operator `{op}`: images with more than 4 channels are not supported "
                             f"({sample_name(ctx, bd, i)} has {c})")
        if not x.size:
            raise ValueError(f"Operator `{op}`: {sample_name(ctx, bd, i)} is empty (shape {x.shape})")
        m = perspective_matrix(op, mats[i] if mats is not None else args.sample("matrix", i), i, corner)
        fill = perspective_fill(op, args["fill_value"], c if last else 1)
        oh, ow = perspective_size(op, args, i, x.shape[lead:lead + 2])
        planes = x.reshape((-1,) + x.shape[lead:])
        out = [cv2.warpPerspective(p, m, (ow, oh), flags=flags, borderMode=border, borderValue=fill)
               for p in planes]
        return np.stack(out).reshape(x.shape[:lead] + (oh, ow) + x.shape[lead + 2:])

    return map_samples(ctx, one, len(samples), sum(s.nbytes for s in samples))


def _window_plan(plan: ResizePlan, win: tuple[tuple[int, int], tuple[int, int]], mirror: int) -> ResizePlan:
    """The resize plan of a window of ``plan``'s output: its input ROI (float32, as DALI), the
    ends swapped on the flipped axes (1: horizontal, 2: vertical)."""
    (y0, x0), (h, w) = win
    lo, hi = [], []
    for d, (a, n, flip) in enumerate(((y0, h, mirror & 2), (x0, w, mirror & 1))):
        scale = (plan.hi[d] - plan.lo[d]) / plan.out[d]
        start = float(np.float32(plan.lo[d] + a * scale))
        end = float(np.float32(plan.lo[d] + (a + n) * scale))
        lo.append(end if flip else start)
        hi.append(start if flip else end)
    return ResizePlan((h, w), (lo[0], lo[1]), (hi[0], hi[1]))


def resize_crop_mirror_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    samples = inputs[0].samples
    op = ctx.op
    dt = ctx.output_meta[0].dtype.numpy_dtype
    plans, filters = resize_plans(op, args, [s.shape[:2] for s in samples])
    aa = args["antialias"]

    def one(i: int) -> np.ndarray:
        win = crop_window(op, args, i, plans[i].out, "pad")
        plan = _window_plan(plans[i], win, int(args.sample("mirror", i)))
        return resample(samples[i], plan, *filters[i], aa, dt)

    return map_samples(ctx, one, len(samples), sum(s.nbytes for s in samples))


_LIN, _TRI = DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_TRIANGULAR
_MAX_RESIZED_SPAN = 3


def _axis_kind(n_out: int, lo: float, hi: float, filters: tuple[DALIInterpType, DALIInterpType],
               antialias: bool) -> DALIInterpType:
    shrink = n_out < abs(hi - lo)
    k = filters[0] if shrink else filters[1]
    if k == _LIN and antialias and shrink:
        return _TRI
    if k == _TRI and not (antialias and shrink):
        return _LIN
    return k


def tensor_resize_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    op = ctx.op
    dt = ctx.output_meta[0].dtype.numpy_dtype
    aa = args["antialias"]
    axes = tensor_resize_axes(op, args, ctx.input_layouts[0], samples[0].ndim if samples else 1)

    shapes = [s.shape for s in samples]
    plans = [tensor_resize_plan(op, args, i, sh, axes) for i, sh in enumerate(shapes)]
    block = resized_block(plans, shapes, len(shapes[0]) if shapes else 1)
    if len(block) > _MAX_RESIZED_SPAN:
        raise ValueError(f"Operator `{op}`: at most {_MAX_RESIZED_SPAN} consecutive axes can be resized; "
                         f"this batch changes axes {block[0]} to {block[-1]}")

    def one(i: int) -> np.ndarray:
        x, plan = samples[i], plans[i]
        if not x.size:
            return np.zeros([p[1] for p in plan], dt)
        filters = resize_filters(op, args, i)
        y = x
        for ax in reversed(block):
            _, n_out, lo, hi = plan[ax]
            kind = _axis_kind(n_out, lo, hi, filters, aa)
            idx, w = axis_taps(kind, y.shape[ax], n_out, lo, hi, aa, rows=ax != block[-1])
            if kind == DALIInterpType.INTERP_NN:
                y = np.take(y, idx[:, 0], axis=ax)
                continue
            src = y.astype(np.float32, copy=False)
            shape = [1] * y.ndim
            shape[ax] = -1
            acc = None
            for k in range(idx.shape[1]):
                part = np.take(src, idx[:, k], axis=ax) * w[:, k].reshape(shape)
                acc = part if acc is None else acc + part
            y = acc
        return cast_to(y, dt)

    return map_samples(ctx, one, len(samples), sum(s.nbytes for s in samples))
