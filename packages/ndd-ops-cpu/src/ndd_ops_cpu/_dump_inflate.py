"""CPU kernel of ``dump_image`` (``decoders.inflate`` runs only on the GPU, in ndd-ops-cuda):
the files are written by core's ``write_dump``, shared with the GPU kernel."""

from __future__ import annotations

from typing import Any

from ndd._schemas_dump_inflate import write_dump
from ndd.plugins import BatchData, KernelArgs, KernelContext, keep_origin


def dump_image_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Write each image to ``<i>-<suffix>-0.ppm``; the output is the input's samples."""
    bd = inputs[0]
    write_dump(ctx.op, [bd.sample(i) for i in range(len(bd))], args["suffix"])
    return keep_origin(bd, bd.dense if bd.dense is not None else bd.samples)
