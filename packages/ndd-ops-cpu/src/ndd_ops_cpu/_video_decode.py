"""CPU kernel of ``decoders.video``: FFmpeg (PyAV) through core's :class:`ndd.plugins.VideoFile`.

DALI's CPU decoder takes VP8, VP9 and MJPEG only; this one takes every codec and container
FFmpeg decodes (H.264, HEVC, MPEG-4, AV1, ...), an extension.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndd._schemas_video import frame_indices
from ndd.plugins import BatchData, KernelArgs, KernelContext, VideoFile

from ._common import map_samples, sample_name


def _optional_int(v: Any) -> int | None:
    return None if v is None else int(np.asarray(v).reshape(()))


def _decode_one(ctx: KernelContext, bd: BatchData, args: KernelArgs, i: int) -> np.ndarray:
    op, s = ctx.op, bd.samples[i]
    where = sample_name(ctx, bd, i)
    if s.size == 0:
        raise ValueError(f"Operator `{op}`: {where} is empty (expected an encoded video)")
    frames = args.sample("frames", i)
    try:
        with VideoFile(s, where) as video:
            idx, fill = frame_indices(
                op, where, video.num_frames,
                None if frames is None else np.asarray(frames, np.int64).reshape(-1),
                *(_optional_int(args.sample(k, i)) for k in ("start_frame", "end_frame", "sequence_length", "stride")),
                args["pad_mode"])
            out = np.empty((len(idx), video.height, video.width, 3), np.uint8)
            out[fill] = np.asarray(args["fill_value"], np.uint8)
            if not fill.all():
                out[~fill] = video.decode(idx[~fill])
    except ValueError as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith("Operator `") else f"Operator `{op}`: {msg}") from None
    return out


def video_decoder_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> list[np.ndarray]:
    """``decoders.video``: each encoded video's selected frames, (F, H, W, 3) uint8 RGB."""
    bd = inputs[0]
    return map_samples(ctx, lambda i: _decode_one(ctx, bd, args, i), len(bd.samples))
