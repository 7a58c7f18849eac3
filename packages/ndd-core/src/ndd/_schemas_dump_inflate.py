"""Schemas of ``dump_image`` (a debugging aid that writes each image to a PPM/PGM file and
passes its input through) and ``decoders.inflate`` (LZ4 block decompression, GPU only, as
in DALI 2.4), with the argument logic both devices' kernels share: the file names and
bytes of a dump, and the chunks of an inflate sample.

``dump_image`` has a side effect, so its schema says so (``side_effects=True``): a call
runs at once, in the caller's thread and in call order, whatever the EvalMode (DALI writes
the files at the call even when the output is not used), and capture mode never captures
it (a captured call would be replayed ahead of the loop, in worker processes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._schema import BOOL, DTYPE, INTS, STR, Arg, OpSchema, OutMeta, given
from ._shape_ops import _given_length

# -- dump_image --------------------------------------------------------------------------------


def _dump_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    if m.dtype != _dtype.uint8:
        raise TypeError(f"Operator `dump_image`: input type {m.dtype} is not supported; only uint8 images "
                        "are written")
    if m.ndim != 3:
        raise ValueError(f"Operator `dump_image`: input images must have three dimensions (HWC), "
                         f"got {m.ndim}")
    return [m]


def _dump_validate(args: dict) -> None:
    if args["input_layout"] != "HWC":
        raise ValueError(f"Operator `dump_image`: argument 'input_layout' must be 'HWC' (DALI writes no other "
                         f"layout), got {args['input_layout']!r}")


DUMP_IMAGE = OpSchema(
    "dump_image",
    args={
        "input_layout": Arg(STR, "HWC", doc="layout of the images; only HWC is supported"),
        "suffix": Arg(STR, "", doc="put in the file names: <sample>-<suffix>-0.ppm"),
    },
    infer=_dump_infer, validate=_dump_validate, side_effects=True,
    doc="Write each image of the batch to ``<sample index>-<suffix>-0.ppm`` in the working directory "
        "(ASCII PPM for 3 channels, PGM for 1) and return the input unchanged. A debugging aid.",
)


def dump_file_name(i: int, suffix: str) -> str:
    """The file ``dump_image`` writes sample ``i`` to (in the working directory)."""
    return f"{i}-{suffix}-0.ppm"


def ppm_bytes(img: np.ndarray) -> bytes:
    """An (H, W, C) uint8 image as an ASCII PPM (C = 3, "P3") or PGM (C = 1, "P2") file:
    the header, then one line per image row, each value followed by a space."""
    h, w, c = img.shape
    head = f"{'P3' if c == 3 else 'P2'}\n{w} {h}\n255\n"
    rows = ("".join(f"{v} " for v in row) + "\n" for row in img.reshape(h, w * c).tolist())
    return (head + "".join(rows)).encode("ascii")


def write_dump(op: str, samples: Sequence[np.ndarray], suffix: str) -> None:
    """Write each host sample to its dump file; every sample is checked (1 or 3 channels)
    before the first file is written."""
    for i, x in enumerate(samples):
        if x.shape[2] not in (1, 3):
            raise ValueError(f"Operator `{op}`: only 3-channel and 1-channel (gray) images can be written; "
                             f"sample {i} has {x.shape[2]} channels")
    for i, x in enumerate(samples):
        name = dump_file_name(i, suffix)
        try:
            with open(name, "wb") as f:
                f.write(ppm_bytes(x))
        except OSError as e:
            raise RuntimeError(f"Operator `{op}`: cannot write sample {i} to {name!r}: {e}") from e


# -- decoders.inflate ------------------------------------------------------------------------------

_OP = "decoders.inflate"
# The output types DALI's inflate supports.
INFLATE_DTYPES = (_dtype.bool, _dtype.int8, _dtype.uint8, _dtype.int16, _dtype.uint16, _dtype.int32,
                  _dtype.uint32, _dtype.int64, _dtype.uint64, _dtype.float32, _dtype.float16)


def is_sequence(args: Any) -> bool:
    """Whether the samples are sequences of chunks: chunk_offsets or chunk_sizes given."""
    return given(args, "chunk_offsets") or given(args, "chunk_sizes")


def _inflate_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    m = inputs[0]
    if m.dtype != _dtype.uint8:
        raise TypeError(f"Operator `{_OP}`: the input must hold bytes (uint8), got {m.dtype}")
    if m.ndim != 1:
        raise ValueError(f"Operator `{_OP}`: the input samples must be 1-D (bytes), got {m.ndim}-D")
    if args["dtype"] not in INFLATE_DTYPES:
        raise TypeError(f"Operator `{_OP}`: argument 'dtype' {args['dtype']} is not supported; expected one of "
                        f"{', '.join(str(d) for d in INFLATE_DTYPES)}")
    per_sample = args.batch_args.get("shape")
    if per_sample is not None and per_sample.ndim > 1:
        raise ValueError(f"Operator `{_OP}`: argument 'shape' takes a scalar or a 1-D list per sample, got "
                         f"{per_sample.ndim}-D samples")
    ndim = _given_length(_OP, args, "shape")
    seq = is_sequence(args)
    layout = args["layout"]
    if layout and len(layout) != ndim:
        raise ValueError(f"Operator `{_OP}`: argument 'layout' {layout!r} must name the {ndim} dimension(s) "
                         "of an inflated chunk (argument 'shape')")
    if layout and seq:
        layout = args["sequence_axis_name"] + layout
    return [OutMeta(args["dtype"], ndim + seq, layout or None)]


def _inflate_validate(args: dict) -> None:
    if args["algorithm"].lower() != "lz4":
        raise ValueError(f"Operator `{_OP}`: argument 'algorithm' must be 'LZ4' (the only algorithm), "
                         f"got {args['algorithm']!r}")
    if len(args["sequence_axis_name"]) != 1:
        raise ValueError(f"Operator `{_OP}`: argument 'sequence_axis_name' must be one character, "
                         f"got {args['sequence_axis_name']!r}")
    shape = args["shape"]
    if shape is not None and min(shape, default=0) < 0:
        raise ValueError(f"Operator `{_OP}`: argument 'shape' must have non-negative extents, got {list(shape)}")


INFLATE = OpSchema(
    _OP,
    args={
        "algorithm": Arg(STR, "LZ4", doc="the compression: only LZ4 (block format, any letter case)"),
        "check_output_size": Arg(BOOL, False, doc="accepted as DALI does; a chunk that inflates to more "
                                                  "than its shape holds is always an error"),
        "chunk_offsets": Arg(INTS, per_sample=True, doc="where each chunk of a sample begins (bytes)"),
        "chunk_sizes": Arg(INTS, per_sample=True, doc="the compressed size of each chunk (bytes)"),
        "dtype": Arg(DTYPE, _dtype.uint8, doc="type of the inflated data"),
        "layout": Arg(STR, "", doc="layout of an inflated chunk"),
        "sequence_axis_name": Arg(STR, "F", doc="name of the chunk axis, put before 'layout' when the "
                                                "samples have chunks and a layout is given"),
        "shape": Arg(INTS, required=True, per_sample=True, doc="shape of an inflated chunk"),
    },
    infer=_inflate_infer, validate=_inflate_validate, provided_by="ndd-ops-cuda",
    doc="Decompress LZ4 block-format data (no frame header, no stored size): each 1-D uint8 sample is one "
        "chunk, or several (chunk_offsets / chunk_sizes) stacked along a new outer axis; each chunk "
        "becomes an array of 'shape' and 'dtype' (zero-filled where the data inflate to less). GPU only.",
)


def inflate_chunks(nbytes: int, offsets: Any, sizes: Any, i: int) -> list[tuple[int, int]]:
    """(start, size) of each compressed chunk of sample ``i`` (``nbytes`` long), from its
    chunk_offsets and/or chunk_sizes (None when not given; neither: the whole sample), checked."""
    def err(msg: str) -> ValueError:
        return ValueError(f"Operator `{_OP}`: {msg} (sample {i})")

    if nbytes == 0:
        raise err("an input sample cannot be empty")
    if offsets is None and sizes is None:
        return [(0, nbytes)]
    offs = None if offsets is None else [int(v) for v in np.asarray(offsets).ravel()]
    szs = None if sizes is None else [int(v) for v in np.asarray(sizes).ravel()]
    for o in offs or ():
        if not 0 <= o < nbytes:
            raise err(f"argument 'chunk_offsets' has {o}, outside the sample's {nbytes} bytes")
    for s in szs or ():
        if not 0 < s <= nbytes:
            raise err(f"argument 'chunk_sizes' has {s}; a chunk size must be positive and at most the "
                      f"sample's {nbytes} bytes")
    if offs is not None and szs is not None:
        if len(offs) != len(szs):
            raise err(f"arguments 'chunk_offsets' and 'chunk_sizes' give {len(offs)} and {len(szs)} chunks")
        for j, (o, s) in enumerate(zip(offs, szs)):
            if o + s > nbytes:
                raise err(f"chunk {j} (offset {o}, size {s}) ends past the sample's {nbytes} bytes")
        return list(zip(offs, szs))
    if offs is not None:  # each chunk ends where the next begins, the last at the sample's end
        ends = offs[1:] + [nbytes]
        if any(e <= o for o, e in zip(offs, ends)):
            raise err(f"argument 'chunk_offsets' {offs} must be strictly increasing when 'chunk_sizes' is "
                      "not given")
        return [(o, e - o) for o, e in zip(offs, ends)]
    starts = np.concatenate([[0], np.cumsum(szs, dtype=np.int64)]).tolist()
    if starts[-1] > nbytes:
        raise err(f"argument 'chunk_sizes' {szs} adds up to {starts[-1]} bytes, more than the sample's {nbytes}")
    return list(zip(starts[:-1], szs))


def chunk_shape(shape: Any, i: int) -> tuple[int, ...]:
    """The shape of an inflated chunk of sample ``i``, checked (non-negative extents)."""
    s = tuple(int(v) for v in np.asarray(shape).ravel())
    if min(s, default=0) < 0:
        raise ValueError(f"Operator `{_OP}`: argument 'shape' must have non-negative extents, got {list(s)} "
                         f"(sample {i})")
    return s


DUMP_INFLATE_SCHEMAS = (DUMP_IMAGE, INFLATE)
