"""Argument handling shared by the CPU and GPU kernels of ``bb_flip`` and ``box_encoder``
(internal; exported through :mod:`ndd.plugins`).

Pure NumPy: the per-sample flags, the anchors and normalisation constants as float32, and
the checks of each sample's box and label shapes, so that both devices accept the same
inputs and reject the others with the same errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ._dispatch import KernelArgs, KernelContext
from ._storage import BatchData

_F32 = np.float32
_HALF = np.float32(0.5)


def _sample_name(ctx: KernelContext, bd: BatchData, i: int) -> str:
    return bd.describe(i) if ctx.is_batch else "the input"


def sample_flags(ctx: KernelContext, args: KernelArgs, name: str, n: int) -> np.ndarray:
    """One bool per sample: whether the int argument ``name`` is non-zero there."""
    out = np.empty(n, bool)
    for i, v in enumerate(args.per_sample(name)):  # (one value each: dispatch checked)
        out[i] = np.asarray(v).reshape(()) != 0
    return out


def bb_flip_flags(ctx: KernelContext, bd: BatchData, args: KernelArgs) -> tuple[np.ndarray, np.ndarray]:
    """``bb_flip``'s (horizontal, vertical) flags, one bool per sample, once every sample of
    ``bd`` is checked to hold whole boxes of 4 values."""
    shapes = [tuple(bd.dense.shape[1:])] * min(1, len(bd)) if bd.dense is not None else bd.shapes()
    for i, shape in enumerate(shapes):
        if not (shape[-1] == 4 or (len(shape) == 1 and shape[0] % 4 == 0)):
            raise ValueError(f"Operator `{ctx.op}`: {_sample_name(ctx, bd, i)} must hold boxes of 4 values, "
                             f"shape (N, 4) (3-D boxes are not supported), got shape {shape}")
    n = len(bd)
    return sample_flags(ctx, args, "horizontal", n), sample_flags(ctx, args, "vertical", n)


def check_box_encoder_sample(ctx: KernelContext, inputs: list[BatchData], i: int, boxes: Sequence[int],
                             labels: Sequence[int]) -> None:
    """``box_encoder``'s sample ``i``: boxes of shape (N, 4) and one label per box, (N,) or
    (N, 1) (``boxes`` and ``labels`` are the two shapes)."""
    boxes, labels = tuple(boxes), tuple(labels)
    if len(boxes) != 2 or boxes[1] != 4:
        raise ValueError(f"Operator `{ctx.op}`: bboxes of {_sample_name(ctx, inputs[0], i)} must have shape (N, 4), "
                         f"got {boxes}")
    if labels not in ((boxes[0],), (boxes[0], 1)):
        raise ValueError(f"Operator `{ctx.op}`: labels of {_sample_name(ctx, inputs[1], i)} must have shape "
                         f"({boxes[0]},) or ({boxes[0]}, 1), one per box, got {labels}")


def box_centers(b: np.ndarray) -> np.ndarray:
    """ltrb boxes (K, 4) as (cx, cy, w, h), float32."""
    return np.stack([(b[:, 0] + b[:, 2]) * _HALF, (b[:, 1] + b[:, 3]) * _HALF,
                     b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)


class BoxEncoding(NamedTuple):
    """``box_encoder``'s arguments, float32 as the kernels compute with them."""

    anchors: np.ndarray  # (A, 4) ltrb
    centers: np.ndarray  # (A, 4) the anchors as (cx, cy, w, h)
    criteria: np.float32
    scale: np.float32
    means: np.ndarray  # (4,)
    stds: np.ndarray  # (4,)
    offset: bool


def box_encoding(args: KernelArgs | dict[str, Any]) -> BoxEncoding:
    """The anchors and constants of a ``box_encoder`` call (the schema validated them)."""
    anchors = np.asarray(args["anchors"], _F32).reshape(-1, 4)
    return BoxEncoding(anchors, box_centers(anchors), _F32(args["criteria"]), _F32(args["scale"]),
                       np.asarray(args["means"], _F32), np.asarray(args["stds"], _F32), bool(args["offset"]))
