"""GPU kernels of ``dump_image`` and ``decoders.inflate`` (schemas and shared argument logic
in core's ``_schemas_dump_inflate``).

``dump_image`` copies each image to the host, writes it, and returns the device data as they
are. ``decoders.inflate`` decompresses on the host with the ``lz4`` package and uploads the
result: DALI uses nvCOMP's GPU LZ4 decoder, which ndd does not have; the LZ4 block format
and therefore the results are the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndd._schemas_dump_inflate import chunk_shape, inflate_chunks, is_sequence, write_dump
from ndd.plugins import BatchData, KernelArgs, KernelContext, keep_origin

from ._common import to_host, upload


def dump_image_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Write each image (copied to the host) to ``<i>-<suffix>-0.ppm``; the output is the
    input's device samples."""
    bd = inputs[0]
    write_dump(ctx.op, [to_host(bd.sample(i)) for i in range(len(bd))], args["suffix"])
    return keep_origin(bd, bd.dense if bd.dense is not None else bd.samples)


def _inflate_chunk(data: bytes, shape: tuple[int, ...], dtype: np.dtype, i: int, j: int,
                   where: tuple[int, int]) -> np.ndarray:
    """One LZ4 block inflated into an array of ``shape`` and ``dtype``; data that inflate to
    fewer bytes leave the rest zero (as DALI fills the tails)."""
    import lz4.block  # here, not at the top: the GPU plugin must load without lz4 installed

    out = np.zeros(shape, dtype)
    if not out.nbytes:
        return out
    try:
        raw = lz4.block.decompress(data, uncompressed_size=out.nbytes)
    except lz4.block.LZ4BlockError:
        raise ValueError(f"Operator `decoders.inflate`: chunk {j} of sample {i} (bytes {where[0]} to "
                         f"{where[0] + where[1]}) is not valid LZ4 block data, or inflates to more than the "
                         f"{out.nbytes} bytes of a {list(shape)} {dtype} chunk") from None
    out.reshape(-1).view(np.uint8)[:len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def inflate_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """Each sample's chunks inflated on the host, stacked (a sequence) or alone, uploaded."""
    bd = inputs[0]
    dtype = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
    seq = is_sequence(args)
    out = []
    for i in range(len(bd)):
        x = bd.sample(i)
        data = to_host(x).tobytes()
        shape = chunk_shape(args.sample("shape", i), i)
        chunks = inflate_chunks(len(data), args.sample("chunk_offsets", i), args.sample("chunk_sizes", i), i)
        arrays = [_inflate_chunk(data[o:o + s], shape, dtype, i, j, (o, s)) for j, (o, s) in enumerate(chunks)]
        host = np.stack(arrays) if arrays else np.zeros((0,) + shape, dtype)
        out.append(upload(host if seq else host[0], x.device))
    return out
