"""Windows and crops: ``crop``, ``flip`` and the window logic the decoders and
``crop_mirror_normalize`` / ``random_resized_crop`` share."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ndd.plugins import BatchData, KernelArgs, KernelContext
from ndd.random._philox import bounded_int, uniform

from ._common import cast_to, fill_vector, image_layout

Window = tuple[tuple[int, int], tuple[int, int]]  # ((y0, x0), (h, w))


def _round(x: float, mode: str) -> int:
    # DALI's "round" is std::round: halves away from zero.
    return int(math.trunc(x)) if mode == "truncate" else int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def crop_window(op: str, args: KernelArgs, i: int, hw: tuple[int, int], policy: str) -> Window:
    """The crop window of sample ``i`` for an image of spatial shape ``hw``.

    Shape: ``crop`` (H, W) or ``crop_h``/``crop_w`` (0: the whole extent), rounded
    to the nearest pixel. Anchor: ``crop_pos * (extent - window)`` rounded as
    ``rounding`` says. With ``policy`` "error" a window outside the image raises;
    "trim_to_shape" shrinks it to the image; "pad" returns it as is.
    """
    H, W = hw
    crop = args.sample("crop", i)
    if crop is not None and np.size(crop):
        c = [float(v) for v in np.ravel(crop)]
        if len(c) != 2:
            raise ValueError(f"Operator `{op}`: argument 'crop' must be (H, W), got {c} for sample {i}")
        ch, cw = c
    else:
        ch, cw = float(args.sample("crop_h", i)), float(args.sample("crop_w", i))
    if ch < 0 or cw < 0:
        raise ValueError(f"Operator `{op}`: the crop window of sample {i} must be non-negative, got {(ch, cw)}")
    h = _round(ch, "round") if ch else H
    w = _round(cw, "round") if cw else W
    mode = args["rounding"]
    y0 = _round(float(args.sample("crop_pos_y", i)) * (H - h), mode)
    x0 = _round(float(args.sample("crop_pos_x", i)) * (W - w), mode)
    inside = y0 >= 0 and x0 >= 0 and y0 + h <= H and x0 + w <= W
    if inside or policy == "pad":
        return (y0, x0), (h, w)
    if policy == "error":
        raise ValueError(
            f"Operator `{op}`: the crop window of sample {i} (anchor y={y0}, x={x0}, shape {h}x{w}) lies "
            f"outside the input of shape {H}x{W}; pass out_of_bounds_policy='pad' or 'trim_to_shape'"
        )
    ya, xa = max(y0, 0), max(x0, 0)
    return (ya, xa), (max(0, min(y0 + h, H) - ya), max(0, min(x0 + w, W) - xa))


_WINDOW_ARGS = ("crop", "crop_w", "crop_h", "crop_pos_x", "crop_pos_y")


def batch_windows(op: str, args: KernelArgs, shapes: list[tuple[int, int]], policy: str) -> list[Window]:
    """The windows of all samples; computed once when arguments and shapes are shared."""
    if shapes and len(set(shapes)) == 1 and not any(args.is_per_sample(k) for k in _WINDOW_ARGS):
        return [crop_window(op, args, 0, shapes[0], policy)] * len(shapes)
    return [crop_window(op, args, i, hw, policy) for i, hw in enumerate(shapes)]


def random_windows(words: np.ndarray, shapes: list[tuple[int, int]], args: KernelArgs) -> list[Window]:
    """Random crop windows, one per sample, from ``words`` of shape (n, attempts, 4).

    For attempt ``a`` of a sample the four words give: the area fraction
    (uniform in ``random_area``), the log aspect ratio (uniform in
    log ``random_aspect_ratio``), then the x and y anchors (uniform integers).
    The first attempt whose window fits the image wins; if none fits, the
    largest centred window with an aspect ratio in range is used.
    """
    amin, amax = args["random_area"]
    rmin, rmax = args["random_aspect_ratio"]
    hw = np.array(shapes, np.int64).reshape(-1, 2)
    H, W = hw[:, :1], hw[:, 1:]
    area = uniform(words[..., 0], amin, amax).astype(np.float64) * (H * W)
    ratio = np.exp(uniform(words[..., 1], math.log(rmin), math.log(rmax)).astype(np.float64))
    ws = np.floor(np.sqrt(area * ratio) + 0.5).astype(np.int64)
    hs = np.floor(np.sqrt(area / ratio) + 0.5).astype(np.int64)
    ok = (ws > 0) & (hs > 0) & (ws <= W) & (hs <= H)
    rows = np.arange(len(hw))
    first = ok.argmax(axis=1)
    found = ok[rows, first]
    w, h = ws[rows, first], hs[rows, first]
    x0 = bounded_int(words[rows, first, 2], np.where(found, W[:, 0] - w + 1, 1))
    y0 = bounded_int(words[rows, first, 3], np.where(found, H[:, 0] - h + 1, 1))
    out = []
    for i in range(len(hw)):
        if found[i]:
            out.append(((int(y0[i]), int(x0[i])), (int(h[i]), int(w[i]))))
            continue
        Hi, Wi = int(hw[i, 0]), int(hw[i, 1])
        fw, fh = Wi, Hi
        if Wi / Hi < rmin:
            fh = max(1, round(Wi / rmin))
        elif Wi / Hi > rmax:
            fw = max(1, round(Hi * rmax))
        out.append((((Hi - fh) // 2, (Wi - fw) // 2), (fh, fw)))
    return out


def spatial_axes(layout: str) -> tuple[int, int]:
    return layout.index("H"), layout.index("W")


def extract(img: np.ndarray, layout: str, win: Window, fill: np.ndarray | None) -> np.ndarray:
    """Copy window ``win`` out of ``img``; parts outside the image get ``fill`` (per channel)."""
    (y0, x0), (h, w) = win
    ha, wa = spatial_axes(layout)
    H, W = img.shape[ha], img.shape[wa]
    ys, ye = max(y0, 0), min(y0 + h, H)
    xs, xe = max(x0, 0), min(x0 + w, W)
    idx = [slice(None)] * img.ndim
    idx[ha], idx[wa] = slice(ys, ye), slice(xs, xe)
    if ys == y0 and xs == x0 and ye == y0 + h and xe == x0 + w:
        return np.ascontiguousarray(img[tuple(idx)])
    shape = list(img.shape)
    shape[ha], shape[wa] = h, w
    out = np.empty(shape, img.dtype)
    if "C" in layout:
        ca = layout.index("C")
        fshape = [1] * img.ndim
        fshape[ca] = -1
        out[...] = np.asarray(fill, np.float64).reshape(fshape).astype(img.dtype)
    else:
        out[...] = fill[0]
    if ye > ys and xe > xs:
        dst = [slice(None)] * img.ndim
        dst[ha], dst[wa] = slice(ys - y0, ye - y0), slice(xs - x0, xe - x0)
        out[tuple(dst)] = img[tuple(idx)]
    return out


def _channels(layout: str, shape: tuple[int, ...]) -> int:
    return shape[layout.index("C")] if "C" in layout else 1


def crop_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    layout = image_layout(ctx, samples[0].ndim) if samples else "HWC"
    ha, wa = spatial_axes(layout)
    policy = args["out_of_bounds_policy"]
    dt = ctx.output_meta[0].dtype.numpy_dtype
    wins = batch_windows(ctx.op, args, [(s.shape[ha], s.shape[wa]) for s in samples], policy)
    if bd.dense is not None and len(set(wins)) == 1:
        (y0, x0), (h, w) = wins[0]
        if y0 >= 0 and x0 >= 0 and y0 + h <= bd.dense.shape[ha + 1] and x0 + w <= bd.dense.shape[wa + 1]:
            idx = [slice(None)] * bd.dense.ndim
            idx[ha + 1], idx[wa + 1] = slice(y0, y0 + h), slice(x0, x0 + w)
            return cast_to(bd.dense[tuple(idx)], dt)
    fills: dict[int, np.ndarray] = {}
    out = []
    for s, win in zip(samples, wins):
        c = _channels(layout, s.shape)
        if c not in fills:
            fills[c] = fill_vector(ctx.op, args["fill_values"], c)
        out.append(cast_to(extract(s, layout, win, fills[c]), dt))
    return out


def flip_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    samples = bd.samples
    if not samples:
        return []
    layout = image_layout(ctx, samples[0].ndim)
    axes = {"horizontal": layout.find("W"), "vertical": layout.find("H"), "depthwise": layout.find("D")}
    n = len(samples)
    flags = {k: np.asarray(args.per_sample(k), bool).reshape(n) for k in axes}
    for k, ax in axes.items():
        if ax < 0 and flags[k].any():
            raise ValueError(f"Operator `{ctx.op}`: argument '{k}': the input layout {layout!r} has no "
                             f"{'WHD'[list(axes).index(k)]} dimension")
    if bd.dense is not None:
        # Whole batch: one copy, then flip the selected samples in place along each axis.
        out = bd.dense.copy()
        for k, ax in axes.items():
            sel = np.flatnonzero(flags[k])
            if sel.size:
                idx = [slice(None)] * out.ndim
                idx[ax + 1] = slice(None, None, -1)
                out[sel] = out[sel][tuple(idx)]
        return out
    out = []
    for i, s in enumerate(samples):
        idx = [slice(None)] * s.ndim
        for k, ax in axes.items():
            if flags[k][i]:
                idx[ax] = slice(None, None, -1)
        out.append(np.ascontiguousarray(s[tuple(idx)]))
    return out
