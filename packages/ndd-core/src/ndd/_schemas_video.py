"""Schema of ``decoders.video`` and :func:`frame_indices`, the frame selection and padding
its kernels share (the CPU kernel in ndd-ops-cpu; ndd-ops-cuda's uploads the CPU kernel's
result).

Argument names and defaults follow DALI 2.4. ``start_frame``, ``end_frame``,
``sequence_length``, ``stride`` and ``frames`` are per-sample (DALI's tensor arguments);
their default None means "not set", as in DALI.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._schema import BOOL, INT, INTS, STR, Arg, OpSchema, OutMeta, given

_PKG = "ndd-ops-cpu"
OP = "decoders.video"

# pad_mode values: DALI's names and their aliases.
PAD_MODES = ("none", "constant", "edge", "repeat", "reflect_1001", "symmetric", "reflect_101", "reflect")
_RANGE_ARGS = ("start_frame", "sequence_length", "stride", "end_frame")


def _err(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


def frame_indices(op: str, where: str, num_frames: int, frames: Sequence[int] | None,
                  start_frame: int | None, end_frame: int | None, sequence_length: int | None,
                  stride: int | None, pad_mode: str) -> tuple[np.ndarray, np.ndarray]:
    """The frames to output for a video of ``num_frames`` frames: ``(index, fill)``, where
    ``index`` (int64) gives for each output frame the video frame it shows, and ``fill``
    (bool) marks the output frames that are ``fill_value`` instead (``pad_mode="constant"``).

    Without ``frames``: ``start_frame`` (0), advancing by ``stride`` (1), for
    ``sequence_length`` frames, up to ``end_frame`` (exclusive), or to the end of the video.
    Indices outside the video: "none" drops those past the end of a range and rejects the
    others, "constant" fills them, "edge"/"repeat" take the nearest frame,
    "reflect_1001"/"symmetric" and "reflect_101"/"reflect" reflect the index at the ends
    with and without repeating the end frame (as NumPy's symmetric and reflect pads).
    ``where`` names the sample in errors.
    """
    n = num_frames
    if frames is not None:
        idx = np.asarray(frames, np.int64).reshape(-1)
    else:
        start = 0 if start_frame is None else int(start_frame)
        step = 1 if stride is None else int(stride)
        if step <= 0:
            raise _err(op, "stride", f"must be positive, got {step} for {where}")
        if start >= n:
            raise _err(op, "start_frame", f"is {start}, out of bounds for {where}: "
                                          f"expected [0, {n}) (the video has {n} frames)")
        if sequence_length is not None:
            if sequence_length < 0:
                raise _err(op, "sequence_length", f"must not be negative, got {sequence_length} for {where}")
            idx = start + step * np.arange(int(sequence_length), dtype=np.int64)
        elif end_frame is not None:
            if end_frame <= start:
                raise _err(op, "end_frame", f"({end_frame}) must be greater than start_frame "
                                            f"({start}) for {where}")
            idx = np.arange(start, int(end_frame), step, dtype=np.int64)
        else:
            idx = np.arange(start, n, step, dtype=np.int64)
    if pad_mode == "none":
        if frames is None:
            idx = idx[idx < n]
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            raise ValueError(f"Operator `{op}`: frame {int(bad[0])} is out of bounds for {where} "
                             f"(the video has {n} frames) and pad_mode is 'none'; choose another "
                             "pad_mode to pad the sequence")
    elif pad_mode == "constant":
        fill = (idx < 0) | (idx >= n)
        return np.where(fill, 0, idx), fill
    elif pad_mode in ("edge", "repeat"):
        idx = np.clip(idx, 0, n - 1)
    elif pad_mode in ("reflect_1001", "symmetric"):
        m = idx % (2 * n)
        idx = np.where(m >= n, 2 * n - 1 - m, m)
    elif n == 1:  # reflect_101, reflect
        idx = np.zeros_like(idx)
    else:
        m = idx % (2 * n - 2)
        idx = np.where(m >= n, 2 * n - 2 - m, m)
    return idx, np.zeros(idx.shape, bool)


def _infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    if m.dtype != _dtype.uint8:
        raise ValueError(f"Operator `{OP}`: expects encoded videos as uint8, got {m.dtype}")
    if m.ndim != 1:
        raise ValueError(f"Operator `{OP}`: expects encoded videos as 1-D uint8 tensors, got a {m.ndim}-D input")
    return [OutMeta(_dtype.uint8, 4, "FHWC")]


def _validate(args: Any) -> None:
    if given(args, "frames"):
        both = [k for k in _RANGE_ARGS if given(args, k)]
        if both:
            raise _err(OP, "frames", f"cannot be combined with '{both[0]}' (frames selects the frames "
                                     "alone; start_frame, end_frame, sequence_length and stride select a range)")
    if given(args, "sequence_length") and given(args, "end_frame"):
        raise _err(OP, "sequence_length", "cannot be combined with 'end_frame'")
    fill = args["fill_value"]
    if len(fill) not in (1, 3):
        raise _err(OP, "fill_value", f"must have 1 value or one per channel (3), got {len(fill)}")
    if not all(0 <= v <= 255 for v in fill):
        raise _err(OP, "fill_value", f"values must be in [0, 255], got {list(fill)}")


DECODE_VIDEO = OpSchema(
    OP,
    inputs=("encoded",),
    args={
        "frames": Arg(INTS, None, per_sample=True,
                      doc="indices of the frames to output, in any order, repeats allowed (not set: a range)"),
        "start_frame": Arg(INT, None, per_sample=True, doc="first frame of the range (not set: 0)"),
        "end_frame": Arg(INT, None, per_sample=True,
                         doc="end of the range, exclusive (not set: the end of the video)"),
        "sequence_length": Arg(INT, None, per_sample=True, doc="number of frames in the range"),
        "stride": Arg(INT, None, per_sample=True, doc="step between the frames of the range (not set: 1)"),
        "pad_mode": Arg(STR, "constant", choices=PAD_MODES,
                        doc="frames outside the video: none, constant (fill_value), edge/repeat, "
                            "reflect_1001/symmetric, reflect_101/reflect"),
        "fill_value": Arg(INTS, (0,), doc="padding value for pad_mode='constant': one, or one per channel, in 0..255"),
        "build_index": Arg(BOOL, True, doc="accepted for DALI compatibility; ndd always indexes the video"),
        "affine": Arg(BOOL, True, doc="accepted for DALI compatibility (thread pinning of DALI's mixed backend)"),
    },
    infer=_infer, validate=_validate, provided_by=_PKG, host_inputs=True,
    doc="Decode videos (a 1-D uint8 tensor each, any container and codec FFmpeg reads) to (F, H, W, 3) "
        "uint8 RGB frames, layout FHWC.",
)

VIDEO_SCHEMAS = (DECODE_VIDEO,)
