"""Kernels of the paste family: ``coord_flip``, ``paste``, ``bbox_paste``, ``bbox_rotate``,
``multi_paste``.

Coordinates are computed in float32 in DALI 2.4's order, so the results match it to the bit
(observed on random inputs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndd.plugins import (
    MULTI_PASTE_REGION_ARGS,
    BatchData,
    KernelArgs,
    KernelContext,
    bbox_rotate_sizes,
    coord_flip_axes,
    paste_geometry,
    rotated_size,
)

from ._common import batch_nbytes, cast_to, map_samples, sample_name

_F32 = np.float32


def _floats(args: KernelArgs, name: str, n: int) -> np.ndarray:
    """Per-sample float32 values of a scalar argument, shape (n,)."""
    if args.is_per_sample(name):
        return args[name].array().reshape(n).astype(_F32)
    return np.full(n, args[name], _F32)


# -- coord_flip -------------------------------------------------------------------


def coord_flip_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``coord_flip``: a flipped coordinate v becomes 2 * center - v."""
    bd = inputs[0]
    n = len(bd)
    flips = [(args.per_sample(f"flip_{c}"), _floats(args, f"center_{c}", n)) for c in "xyz"]
    samples = bd.samples
    if bd.dense is not None:
        shapes = [bd.dense.shape[1:]]
    else:
        shapes = [s.shape for s in samples]
    cols_of = {sh[1]: coord_flip_axes(ctx.op, args["layout"], sh[1]) for sh in set(shapes)}
    if bd.dense is not None and n:
        out = bd.dense.copy()
        for col, (flip, center) in zip(cols_of[shapes[0][1]], flips):
            on = np.array([bool(f) for f in flip])
            out[on, :, col] = _F32(2) * center[on, None] - out[on, :, col]
        return out
    outs = []
    for i, s in enumerate(samples):
        o = s.copy()
        for col, (flip, center) in zip(cols_of[s.shape[1]], flips):
            if flip[i]:
                o[:, col] = _F32(2) * center[i] - o[:, col]
        outs.append(o)
    return outs


# -- paste ------------------------------------------------------------------------


def paste_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``paste``: each image on a canvas of fill_value (see ``paste_geometry``)."""
    bd = inputs[0]
    fill = np.asarray(args["fill_value"], np.int64).astype(np.uint8)  # wraps modulo 256, as DALI
    n_channels = args["n_channels"]

    def one(i: int) -> np.ndarray:
        img = bd.samples[i]
        h, w, c = img.shape
        if len(fill) > 1 and c != n_channels:
            raise ValueError(f"Operator `paste`: {sample_name(ctx, bd, i)} has {c} channels, but "
                             f"'fill_value' gives {len(fill)} (n_channels = {n_channels})")
        ch, cw, y, x = paste_geometry(ctx.op, h, w, args.sample("ratio", i), args.sample("paste_x", i),
                                      args.sample("paste_y", i), args.sample("min_canvas_size", i),
                                      sample_name(ctx, bd, i))
        out = np.empty((ch, cw, c), np.uint8)
        out[...] = fill
        out[y:y + h, x:x + w] = img
        return out

    return map_samples(ctx, one, len(bd), batch_nbytes(bd.samples))


# -- bbox_paste -------------------------------------------------------------------


def bbox_paste_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``bbox_paste``: corners c * (1 / ratio) + paste * ((ratio - 1) / ratio), sizes
    w * (1 / ratio) (float32, DALI's order of operations)."""
    bd = inputs[0]
    n = len(bd)
    ratio = _floats(args, "ratio", n)
    bad = np.flatnonzero(~(ratio >= 1))
    if bad.size:  # (DALI gives boxes that ignore paste_x and paste_y there)
        i = int(bad[0])
        raise ValueError(f"Operator `bbox_paste`: argument 'ratio' must be at least 1, got {ratio[i]} "
                         f"({sample_name(ctx, bd, i)})")
    scale = _F32(1) / ratio
    move = (ratio - _F32(1)) / ratio
    shift = np.stack([_floats(args, "paste_x", n) * move, _floats(args, "paste_y", n) * move], axis=1)
    shift = np.concatenate([shift, shift if args["ltrb"] else np.zeros_like(shift)], axis=1)
    samples = bd.samples
    for i, s in enumerate(samples):
        if s.size % 4:
            raise ValueError(f"Operator `bbox_paste`: {sample_name(ctx, bd, i)} holds {s.size} values, "
                             "not a multiple of 4 (boxes of 4 coordinates)")
    if bd.dense is not None and n:
        d = bd.dense.reshape(n, -1, 4)
        return (d * scale[:, None, None] + shift[:, None, :]).reshape(bd.dense.shape)
    return [(s.reshape(-1, 4) * scale[i] + shift[i]).reshape(s.shape) for i, s in enumerate(samples)]


# -- bbox_rotate ------------------------------------------------------------------


def _rotate_boxes(boxes: np.ndarray, angle: float, hw: tuple[int, int], out_hw: tuple[int, int],
                  args: KernelArgs) -> tuple[np.ndarray, np.ndarray]:
    """Boxes (N, 4) of an (h, w) image rotated by ``angle`` degrees onto an ``out_hw`` canvas
    (counter-clockwise on screen, about the centres), clipped to it; and which to keep."""
    (h, w), (oh, ow) = hw, out_hw
    b = boxes.astype(np.float64)
    if args["bbox_layout"] == "xyWH":
        b[:, 2:] += b[:, :2]
    if args["bbox_normalized"]:
        b *= (w, h, w, h)
    b -= (w / 2, h / 2, w / 2, h / 2)
    a = float(np.float32(np.radians(angle)))  # (float32 radians, as DALI: sin(180 deg) is -8.7e-8)
    c, s = np.cos(a), np.sin(a)
    xs, ys = b[:, [0, 2, 2, 0]], b[:, [1, 1, 3, 3]]
    xr, yr = xs * c + ys * s, ys * c - xs * s
    lo, hi = np.stack([xr.min(1), yr.min(1)], 1), np.stack([xr.max(1), yr.max(1)], 1)
    mode = args["mode"]
    if mode != "expand":
        # the kept size takes the orientation of the enclosing box: width and height swap
        # when the rotation is nearer a quarter turn (ties, at odd multiples of 45 degrees, keep)
        centre, size = (lo + hi) / 2, b[:, 2:] - b[:, :2]
        if abs(s) - abs(c) > 1e-6:
            size = size[:, ::-1]
        if mode == "halfway":
            size = (size + hi - lo) / 2
        lo, hi = centre - size / 2, centre + size / 2
    out = np.concatenate([lo, hi], 1) + (ow / 2, oh / 2, ow / 2, oh / 2)
    if args["bbox_normalized"]:
        out /= (ow, oh, ow, oh)
        limit = (1.0, 1.0)
    else:
        limit = (ow, oh)
    area = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])
    out[:, 0::2] = np.clip(out[:, 0::2], 0, limit[0])
    out[:, 1::2] = np.clip(out[:, 1::2], 0, limit[1])
    inside = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = inside / area >= args["remove_threshold"]  # (an empty box, 0 / 0, is removed)
    if args["bbox_layout"] == "xyWH":
        out[:, 2:] -= out[:, :2]
    return out.astype(_F32), keep


def bbox_rotate_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``bbox_rotate``: boxes follow ``rotate``; those left mostly outside are removed, with
    their labels."""
    boxes = inputs[0]
    labels = inputs[1] if len(inputs) > 1 else None
    out_boxes, out_labels = [], []
    for i, b in enumerate(boxes.samples):
        where = sample_name(ctx, boxes, i)
        if b.shape[1] != 4:
            raise ValueError(f"Operator `bbox_rotate`: input 'bboxes' must be (N, 4), got {b.shape} ({where})")
        sizes = bbox_rotate_sizes(ctx.op, args, i, where)
        angle = float(args.sample("angle", i))
        hw = sizes[:2]
        if len(sizes) == 4:
            out_hw = sizes[2:]
        elif args["keep_size"]:
            out_hw = hw
        else:
            oh, ow = rotated_size(np.array([hw[0]]), np.array([hw[1]]), np.array([angle]))
            out_hw = (int(oh[0]), int(ow[0]))
        res, keep = _rotate_boxes(b, angle, hw, out_hw, args)
        out_boxes.append(res[keep])
        if labels is not None:
            lab = labels.samples[i]
            if lab.ndim == 2 and lab.shape[1] != 1:
                raise ValueError(f"Operator `bbox_rotate`: input 'labels' must be (N,) or (N, 1), got {lab.shape} "
                                 f"({where})")
            if len(lab) != len(b):
                raise ValueError(f"Operator `bbox_rotate`: {where} has {len(b)} boxes but {len(lab)} labels")
            out_labels.append(lab[keep])
    return (out_boxes, out_labels) if labels is not None else out_boxes


# -- multi_paste ------------------------------------------------------------------


def _region_values(args: KernelArgs, name: str, i: int, n: int, where: str) -> np.ndarray | None:
    """Argument ``name`` for output sample ``i`` as an (n, 2) array (None: not given)."""
    if args[name] is None:
        return None
    v = np.asarray(args.sample(name, i))
    if (args.is_per_sample(name) and v.ndim != 2) or v.size != 2 * n:
        raise ValueError(f"Operator `multi_paste`: argument '{name}' must be a ({n}, 2) array for {where} "
                         f"({n} pasted region(s)), got shape {v.shape}")
    v = v.reshape(n, 2)
    if v.dtype.kind == "f" and not ((v >= 0) & (v <= 1)).all():
        raise ValueError(f"Operator `multi_paste`: argument '{name}' must be in [0, 1], got {v.tolist()} ({where})")
    return v


def _scaled(rel: np.ndarray, size: Any, up: bool) -> np.ndarray:
    """Relative (n, 2) values times sizes (float32, as DALI), rounded up or down."""
    v = rel.astype(_F32) * np.asarray(size, _F32)
    return (np.ceil(v) if up else np.floor(v)).astype(np.int64)


def _canvas_size(inputs: list[BatchData], args: KernelArgs, i: int, where: str) -> tuple[int, int]:
    if args["output_size"] is not None:
        size = [int(v) for v in np.ravel(args.sample("output_size", i))]
        if len(size) not in (2, 3) or min(size[:2]) < 0:
            raise ValueError(f"Operator `multi_paste`: argument 'output_size' must be a non-negative (H, W), "
                             f"got {size} ({where})")
        return size[0], size[1]
    shapes = {s.shape[:2] for bd in inputs for s in bd.samples}
    if len(shapes) != 1:
        raise ValueError("Operator `multi_paste`: without 'output_size' all input samples must have the same "
                         f"shape, got {' and '.join(map(str, sorted(shapes)[:2]))}")
    return next(iter(shapes))


def multi_paste_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``multi_paste``: regions of input samples pasted, in order, into zero canvases."""
    out_dtype = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
    n_in = len(inputs[0])
    outs = []
    for i in range(ctx.batch_size):
        where = f"output sample {i}"
        if args["in_ids"] is not None:
            ids = [int(v) for v in np.ravel(args.sample("in_ids", i))]
            bad = [j for j in ids if not 0 <= j < n_in]
            if bad:
                raise ValueError(f"Operator `multi_paste`: argument 'in_ids' must be in [0, {n_in - 1}], got "
                                 f"{bad[0]} ({where})")
            sources = [inputs[0].samples[j] for j in ids]
        else:
            sources = [bd.samples[i] for bd in inputs]
        n = len(sources)
        oh, ow = _canvas_size(inputs, args, i, where)
        channels = {s.shape[2] for s in sources} or {inputs[0].samples[i].shape[2]}  # (none: as input sample i)
        if len(channels) != 1:
            raise ValueError(f"Operator `multi_paste`: the regions pasted into {where} have different numbers "
                             f"of channels: {sorted(channels)}")
        out = np.zeros((oh, ow, channels.pop()), out_dtype)
        given = {k: _region_values(args, k, i, n, where) for pair in MULTI_PASTE_REGION_ARGS for k in pair}
        src_hw = np.array([s.shape[:2] for s in sources], np.int64).reshape(n, 2)
        anchor = given["in_anchors"]
        if anchor is None:
            rel = given["in_anchors_rel"]
            anchor = np.zeros((n, 2), np.int64) if rel is None else _scaled(rel, src_hw, False)
        shape = given["shapes"]
        if shape is None:
            rel = given["shapes_rel"]
            shape = src_hw - anchor if rel is None else _scaled(rel, src_hw, True)
        at = given["out_anchors"]
        if at is None:
            rel = given["out_anchors_rel"]
            at = np.zeros((n, 2), np.int64) if rel is None else _scaled(rel, (oh, ow), False)
        for k, src in enumerate(sources):
            (y, x), (h, w), (oy, ox) = anchor[k], shape[k], at[k]
            if min(y, x, h, w) < 0 or y + h > src.shape[0] or x + w > src.shape[1]:
                raise ValueError(f"Operator `multi_paste`: region {k} of {where} (anchor {y} x {x}, shape {h} x {w}) "
                                 f"is not within its input of shape {src.shape[0]} x {src.shape[1]}")
            if min(oy, ox) < 0 or oy + h > oh or ox + w > ow:
                raise ValueError(f"Operator `multi_paste`: region {k} of {where} (output anchor {oy} x {ox}, shape "
                                 f"{h} x {w}) is not within the output of shape {oh} x {ow}")
            out[oy:oy + h, ox:ox + w] = cast_to(src[y:y + h, x:x + w], out_dtype)
        outs.append(out)
    return outs
