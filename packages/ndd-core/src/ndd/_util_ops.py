"""Data-movement operators without pixel math (CPU, NumPy): ``copy``, ``element_extract``,
``reinterpret``, ``permute_batch``, ``batch_permutation``, ``per_frame``,
``sequence_rearrange``, ``get_property``, ``io.file.read`` and ``decoders.numpy``; and the
deprecated ``experimental.*`` decoder names, aliases of the main ones (:func:`alias_schemas`).
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._dispatch import KernelArgs, KernelContext
from ._saturate import saturate_cast
from ._schema import BOOL, DTYPE, FLOATS, INTS, STR, Arg, OpSchema, OutMeta
from ._shape_ops import _RESHAPE_ARGS, _reshape_meta, _target_shape
from ._storage import BatchData, SampleOrigins, keep_origin


def _err(op: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: {msg}")


def _numpy_type(dt: _dtype.DType) -> np.dtype | None:
    """``dt``'s NumPy dtype; None for a type NumPy lacks (bfloat16)."""
    try:
        return np.dtype(dt.numpy_dtype)
    except TypeError:
        return None




# -- copy ---------------------------------------------------------------------------


def _copy_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> BatchData:
    bd = inputs[0]
    return keep_origin(bd, bd.dense.copy() if bd.dense is not None else [s.copy() for s in bd.samples])


COPY = OpSchema("copy", doc="A copy of the input (new buffers, same dtype, shape and layout).")

# -- per_frame ----------------------------------------------------------------------


def _per_frame_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    if m.ndim == 0:
        raise _err("per_frame", "a 0-dimensional input cannot be marked as a sequence")
    if not m.layout:
        layout = "F" + "*" * (m.ndim - 1)
    elif m.layout[0] == "F":
        layout = m.layout
    elif args["replace"]:
        layout = "F" + m.layout[1:]
    else:
        raise _err("per_frame", f"the input layout {m.layout!r} does not start with 'F' (a sequence); "
                                "pass replace=True to make its first dimension the frames")
    return [OutMeta(m.dtype, m.ndim, layout)]


def _pass_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> BatchData:
    bd = inputs[0]
    return keep_origin(bd, bd.dense if bd.dense is not None else bd.samples)


PER_FRAME = OpSchema(
    "per_frame",
    args={"replace": Arg(BOOL, False, doc="replace the first layout name with 'F' instead of requiring it")},
    infer=_per_frame_infer,
    doc="Mark the input as a sequence (layout starting with 'F') so that it can be a per-frame "
        "argument; the data is not touched. Without a layout it becomes 'F' followed by '*'s.",
)

# -- element_extract / sequence_rearrange ---------------------------------------------


def _check_sequence(op: str, m: OutMeta) -> None:
    if m.ndim < 2:
        raise _err(op, f"the input has {m.ndim} dimension(s); a sequence needs at least two "
                       "(frames, then the dimensions of each frame)")
    if m.layout and m.layout[0] != "F":
        raise _err(op, f"the input layout {m.layout!r} must start with 'F' (a sequence)")


def _element_extract_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    emap = args["element_map"]
    if not emap:
        raise _err("element_extract", "argument 'element_map' must name at least one element")
    if min(emap) < 0:
        raise _err("element_extract", f"argument 'element_map' has a negative index ({min(emap)})")
    _check_sequence("element_extract", m)
    return [OutMeta(m.dtype, m.ndim - 1, m.layout[1:] if m.layout else None)] * len(emap)


def _frame_index(op: str, name: str, e: int, n: int, i: int) -> int:
    if not 0 <= e < n:
        raise _err(op, f"argument '{name}' has index {e}, out of range for sample {i} of {n} frame(s)")
    return e


def _element_extract_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> tuple:
    bd = inputs[0]
    emap = args["element_map"]
    if bd.dense is not None:
        d = bd.dense
        outs = [np.ascontiguousarray(d[:, _frame_index(ctx.op, "element_map", e, d.shape[1], 0)]) for e in emap]
    else:
        outs = [[s[_frame_index(ctx.op, "element_map", e, len(s), i)].copy() for i, s in enumerate(bd.samples)]
                for e in emap]
    return tuple(outs)


ELEMENT_EXTRACT = OpSchema(
    "element_extract",
    args={"element_map": Arg(INTS, required=True, doc="frames to extract, one output each")},
    infer=_element_extract_infer,
    doc="Extract frames of sequences: one output per index in ``element_map``, each with the "
        "outermost (frame) dimension removed.",
)


def _sequence_rearrange_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    _check_sequence("sequence_rearrange", inputs[0])
    return [inputs[0]]


def _order(ctx: KernelContext, args: KernelArgs, i: int, n: int) -> np.ndarray:
    order = np.asarray(args.sample("new_order", i), np.int64).reshape(-1)
    if order.size == 0:
        raise _err(ctx.op, f"argument 'new_order' is empty for sample {i}; an output sequence needs a frame")
    bad = order[(order < 0) | (order >= n)]
    if bad.size:
        _frame_index(ctx.op, "new_order", int(bad[0]), n, i)
    return order


def _sequence_rearrange_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    if bd.dense is not None and not args.is_per_sample("new_order"):
        d = bd.dense
        return d[:, _order(ctx, args, 0, d.shape[1])]
    return [s[_order(ctx, args, i, len(s))] for i, s in enumerate(bd.samples)]


SEQUENCE_REARRANGE = OpSchema(
    "sequence_rearrange",
    args={"new_order": Arg(INTS, required=True, per_sample=True,
                           doc="output frame j is input frame new_order[j] (repeats and omissions allowed)")},
    infer=_sequence_rearrange_infer,
    doc="Reorder, repeat or drop the frames (outermost dimension) of every sequence.",
)

# -- reinterpret --------------------------------------------------------------------


def _reinterpret_infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
    given = [n for n in ("shape", "rel_shape", "src_dims", "layout", "dtype")
             if args[n] is not None or n in args.batch_args]
    shape_in = len(inputs) > 1 and inputs[1] is not None
    if not given and not shape_in:
        raise _err("reinterpret", "nothing to do: give 'dtype', 'shape', 'rel_shape', 'src_dims', "
                                  "'layout' or a shape input")
    layout, ndim = args["layout"], inputs[0].ndim
    if layout and not shape_in and not {"shape", "rel_shape", "src_dims"} & set(given) and len(layout) != ndim:
        raise _err("reinterpret", f"argument 'layout' {layout!r} does not match the {ndim} dimension(s) "
                                  "of the input")
    m = _reshape_meta("reinterpret", inputs, args)[0]
    dt = args["dtype"]
    if dt is not None:
        if _numpy_type(dt) is None:
            raise _err("reinterpret", f"argument 'dtype': {dt} has no NumPy equivalent and is not supported")
        m = OutMeta(dt, m.ndim, m.layout)
    return [m]


def _reinterpret_shape(op: str, in_shape: tuple, in_size: int, out_size: int, shape: Any, rel: Any,
                       src: Any, i: int) -> tuple[int, ...]:
    """The output shape of one sample (``shape``: the shape argument or input, None if not given)."""
    nbytes = int(np.prod(in_shape, dtype=np.int64)) * in_size
    if shape is None and rel is None and src is None:
        if in_size == out_size:
            return tuple(in_shape)
        inner = in_shape[-1] * in_size if in_shape else 0
        if not in_shape or inner % out_size:
            raise _err(op, f"sample {i} of shape {tuple(in_shape)}: its innermost dimension holds {inner} "
                           f"byte(s), not a multiple of the {out_size}-byte output type")
        return tuple(in_shape[:-1]) + (inner // out_size,)
    target = _target_shape(tuple(in_shape), shape, rel, src)
    neg = [j for j, t in enumerate(target) if t < 0]
    if len(neg) > 1:
        raise _err(op, f"the shape {target} of sample {i} has more than one negative extent")
    rest = int(np.prod([t for t in target if t >= 0], dtype=np.int64)) * out_size
    if neg:
        if rest == 0 or nbytes % rest:
            raise _err(op, f"sample {i} of shape {tuple(in_shape)} ({nbytes} bytes) cannot take the shape {target}")
        target[neg[0]] = nbytes // rest
    elif rest != nbytes:
        raise _err(op, f"sample {i} of shape {tuple(in_shape)} holds {nbytes} bytes, but the shape {target} "
                       f"of {out_size}-byte elements holds {rest}")
    return tuple(target)


def _reinterpret_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    shp_in = inputs[1] if len(inputs) > 1 else None
    npd = np.dtype(ctx.output_meta[0].dtype.numpy_dtype)
    want = ctx.output_meta[0].ndim

    def one(x: np.ndarray, i: int, lead: tuple) -> np.ndarray:
        shape = shp_in.sample(i) if shp_in is not None else args.sample("shape", i)
        in_shape = x.shape[len(lead):]
        out = _reinterpret_shape(ctx.op, in_shape, x.dtype.itemsize, npd.itemsize, shape,
                                 args.sample("rel_shape", i), args.sample("src_dims", i), i)
        if len(out) != want:
            raise _err(ctx.op, f"the result of sample {i} has {len(out)} dimension(s), but {want} were "
                               "expected from the call's arguments")
        flat = np.ascontiguousarray(x).reshape(lead + (-1,)) if x.size else np.empty(lead + (0,), x.dtype)
        return flat.view(npd).reshape(lead + out)

    if shp_in is None and bd.dense is not None and not any(args.is_per_sample(n) for n in _RESHAPE_ARGS):
        return keep_origin(bd, one(bd.dense, 0, bd.dense.shape[:1]))
    return keep_origin(bd, [one(s, i, ()) for i, s in enumerate(bd.samples)])


REINTERPRET = OpSchema(
    "reinterpret",
    inputs=("data", "shape_input"),
    min_inputs=1,
    host_args_from=1,
    args={
        "dtype": Arg(DTYPE, doc="element type to view the bytes as (the innermost extent adapts)"),
        "shape": Arg(INTS, per_sample=True, doc="output shape; one extent may be -1"),
        "rel_shape": Arg(FLOATS, per_sample=True, doc="output shape relative to the input shape"),
        "src_dims": Arg(INTS, per_sample=True, doc="input dimensions to keep (-1 inserts a new one)"),
        "layout": Arg(STR, doc="layout of the output"),
    },
    infer=_reinterpret_infer,
    doc="View the bytes of every sample with another element type, shape and/or layout (no copy). "
        "The output must hold as many bytes as the input.",
)

# -- permute_batch / batch_permutation ------------------------------------------------


def _permute_indices(ctx: KernelContext, args: KernelArgs) -> list[int]:
    """``permute_batch``'s indices, one per output sample, checked (both devices' kernels)."""
    n = ctx.batch_size
    if args.is_per_sample("indices"):
        vals = args["indices"].values
        for i, v in enumerate(vals):
            if v.size != 1:
                raise _err(ctx.op, f"argument 'indices' takes one index per sample, but sample {i} has "
                                   f"shape {v.shape}")
        idx = [int(v.reshape(())) for v in vals]
    else:
        idx = list(args["indices"])
        if len(idx) != n:
            raise _err(ctx.op, f"argument 'indices' has {len(idx)} index(es) for a batch of {n} sample(s)")
    for i, j in enumerate(idx):
        if not 0 <= j < n:
            raise _err(ctx.op, f"argument 'indices' has index {j} (for output sample {i}), out of range "
                               f"for a batch of {n} sample(s)")
    return idx


def _permute_batch_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    idx = _permute_indices(ctx, args)
    out = BatchData.of(bd.dense[np.asarray(idx, np.intp)] if bd.dense is not None
                       else [bd.samples[j].copy() for j in idx])
    out.origin = SampleOrigins.pick(bd.origin, idx)  # (the source info follows the samples, as in DALI)
    return out


PERMUTE_BATCH = OpSchema(
    "permute_batch",
    args={"indices": Arg(INTS, required=True, per_sample=True,
                         doc="output sample i is input sample indices[i]: a list as long as the batch, "
                             "or a batch of scalars")},
    doc="Rearrange the samples of a batch: ``out[i] = in[indices[i]]`` (repeats and omissions allowed).",
)


def _batch_permutation_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> np.ndarray:
    if not ctx.is_batch:
        raise _err(ctx.op, "batch_size must be given: the operator has no input to take it from")
    n = ctx.batch_size
    gen = np.random.Generator(np.random.Philox(key=[int(x) for x in ctx.random_state[:2]],
                                               counter=[int(x) for x in ctx.random_state[2:6]]))
    no_fixed = args["no_fixed_points"] and n > 1
    if args["allow_repetitions"]:
        out = gen.integers(0, n - 1 if no_fixed else n, size=n)
        if no_fixed:  # uniform over the n - 1 indices other than i
            out += out >= np.arange(n)
    elif no_fixed:  # Sattolo's shuffle: a uniformly drawn single n-cycle (no fixed point)
        out = np.arange(n)
        for i in range(n - 1, 0, -1):
            j = int(gen.integers(0, i))
            out[i], out[j] = out[j], out[i]
    else:
        out = gen.permutation(n)
    return out.astype(np.int32)


BATCH_PERMUTATION = OpSchema(
    "batch_permutation",
    inputs=(),
    args={
        "allow_repetitions": Arg(BOOL, False, doc="draw each index independently (repeats and omissions)"),
        "no_fixed_points": Arg(BOOL, False, doc="never out[i] == i (ignored for a batch of one)"),
    },
    infer=lambda inputs, args: [OutMeta(_dtype.int32, 0, None)],
    random=True,
    doc="A random permutation of 0..batch_size-1, one int32 scalar per sample (indices for "
        "``permute_batch``). ``no_fixed_points`` draws a single cycle uniformly (Sattolo's shuffle).",
)

# -- get_property -------------------------------------------------------------------


def _get_property_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> list:
    bd = inputs[0]
    if args["key"] == "layout":
        value = np.frombuffer((ctx.input_layouts[0] or "").encode(), np.uint8)
        return [value.copy() for _ in range(ctx.batch_size)]
    # The reader's text for each sample (see BatchData's origin protocol); bytes that are not
    # UTF-8 (an LMDB key) come back as they were read.
    return [np.frombuffer(bd.source_info(i).encode("utf-8", "surrogateescape"), np.uint8).copy()
            for i in range(ctx.batch_size)]


GET_PROPERTY = OpSchema(
    "get_property",
    args={"key": Arg(STR, required=True, choices=("source_info", "layout"),
                     doc="'layout' (the layout string) or 'source_info' (where the sample came from)")},
    infer=lambda inputs, args: [OutMeta(_dtype.uint8, 1, None)],
    doc="A property of every sample as a 1-D uint8 array of characters: its ``layout``, or its "
        "``source_info``: where a reader read it (a file, or a file and record), kept by operators "
        "that pass the samples through (``copy``, ``reshape``, ``permute_batch``); empty otherwise.",
)

# -- io.file.read -------------------------------------------------------------------


def _byte_input(op: str, name: str, m: OutMeta) -> None:
    if m.dtype not in (_dtype.uint8, _dtype.int8):
        raise _err(op, f"input '{name}' must be uint8 or int8 bytes, got {m.dtype}")
    if m.ndim != 1:
        raise _err(op, f"input '{name}' must be 1-D (bytes), got {m.ndim} dimension(s)")


def _file_read_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    _byte_input("io.file.read", "filepaths", inputs[0])
    return [OutMeta(_dtype.uint8, 1, None)]


def _read_file(op: str, raw: np.ndarray, i: int) -> np.ndarray:
    path = raw.tobytes().split(b"\0", 1)[0]  # a C string: ends at the first NUL
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise _err(op, f"cannot read the file {path.decode(errors='replace')!r} of sample {i}: "
                       f"{e.strerror or e}") from None
    return np.frombuffer(data, np.uint8).copy()


def _file_read_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> list:
    samples = inputs[0].samples
    return ctx.thread_pool.map(lambda raw, i: _read_file(ctx.op, raw, i), samples, range(len(samples)))


FILE_READ = OpSchema(
    "io.file.read",
    inputs=("filepaths",),
    args={
        "dont_use_mmap": Arg(BOOL, False, doc="accepted for DALI compatibility; ndd reads with plain file I/O"),
        "use_o_direct": Arg(BOOL, False, doc="accepted for DALI compatibility; ndd reads through the page cache"),
    },
    infer=_file_read_infer,
    doc="Read whole files as 1-D uint8 arrays; each sample's path is a 1-D uint8 array of its UTF-8 "
        "bytes, e.g. ``np.frombuffer(path.encode(), np.uint8)`` (it ends at the first NUL byte, if any).",
)

# -- decoders.numpy -----------------------------------------------------------------


_HEADER_MAX = 1 << 20  # bytes of a .npy header read at most


def _npy_header(op: str, raw: np.ndarray, i: int) -> tuple[np.dtype, tuple, bool, int]:
    """``(dtype, shape, fortran_order, offset of the data)`` of a serialized .npy file."""
    f = io.BytesIO(raw[:_HEADER_MAX].tobytes())
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"format version {version[0]}.{version[1]} is not supported (only 1.0 and 2.0)")
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dt = read(f, max_header_size=_HEADER_MAX)
    except (ValueError, SyntaxError, TypeError) as e:
        raise _err(op, f"sample {i} is not a .npy file: {e}") from None
    if dt.hasobject or dt.fields is not None or dt.subdtype is not None or dt.kind not in "biuf":
        raise _err(op, f"sample {i} holds elements of type {dt}, which are not supported "
                       "(only booleans, integers and floats)")
    return dt, tuple(shape), fortran, f.tell()


def _headers(op: str, samples: list) -> list[tuple]:
    return [_npy_header(op, np.asarray(s).reshape(-1), i) for i, s in enumerate(samples)]


def _check_same(op: str, heads: list[tuple], want_dtype: bool) -> None:
    d0, s0 = heads[0][0], heads[0][1]
    for i, (dt, shape, _, _) in enumerate(heads):
        if len(shape) != len(s0):
            raise _err(op, f"sample {i} has {len(shape)} dimension(s), sample 0 has {len(s0)}; every "
                           "sample must have the same number")
        if want_dtype and dt.newbyteorder("=") != d0.newbyteorder("="):
            raise _err(op, f"sample {i} holds {dt.newbyteorder('=')}, sample 0 {d0.newbyteorder('=')}; "
                           "every sample must have the same type unless 'dtype' is given")


def _numpy_infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
    op = "decoders.numpy"
    _byte_input(op, "data", inputs[0])
    heads = _headers(op, args.inputs[0]._batch_data().samples)  # (waits for the input: the header has it)
    if not heads:
        return [OutMeta(args["dtype"] or _dtype.uint8, 0, None)]
    _check_same(op, heads, args["dtype"] is None)
    dt = args["dtype"] or _dtype.dtype(heads[0][0].newbyteorder("="))
    return [OutMeta(dt, len(heads[0][1]), None)]


def _decode_npy(op: str, raw: np.ndarray, head: tuple, npd: np.dtype, i: int) -> np.ndarray:
    dt, shape, fortran, offset = head
    raw = raw.reshape(-1).view(np.uint8)
    count = int(np.prod(shape, dtype=np.int64))
    if raw.size < offset + count * dt.itemsize:
        raise _err(op, f"sample {i} is truncated: {raw.size - offset} data byte(s) for {count} element(s) "
                       f"of {dt}")
    a = raw[offset:offset + count * dt.itemsize].view(dt)
    a = a.reshape(shape[::-1]).T if fortran else a.reshape(shape)
    if not dt.isnative:
        a = a.astype(dt.newbyteorder("="))
    a = saturate_cast(a, npd) if a.dtype != npd else a
    return a if a.flags.c_contiguous and a.base is not raw else a.copy()


def _numpy_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> list:
    samples = inputs[0].samples
    heads = _headers(ctx.op, samples)
    meta = ctx.output_meta[0]
    if heads:
        _check_same(ctx.op, heads, args["dtype"] is None)
        if len(heads[0][1]) != meta.ndim or (args["dtype"] is None and
                                              heads[0][0].newbyteorder("=") != meta.dtype.numpy_dtype):
            raise _err(ctx.op, f"the arrays have {len(heads[0][1])} dimension(s) of {heads[0][0]}, but this call "
                               f"was set up for {meta.ndim} of {meta.dtype}")
    npd = np.dtype(meta.dtype.numpy_dtype)
    return [_decode_npy(ctx.op, np.asarray(s), h, npd, i) for i, (s, h) in enumerate(zip(samples, heads))]


def _numpy_validate(args: dict) -> None:
    dt = args["dtype"]
    if dt is not None and (_numpy_type(dt) is None or _numpy_type(dt).kind not in "biuf"):
        raise _err("decoders.numpy", f"argument 'dtype' must be a numeric type, got {dt}")


DECODE_NUMPY = OpSchema(
    "decoders.numpy",
    inputs=("data",),
    args={"dtype": Arg(DTYPE, doc="convert the arrays to this type (default: the files' type)")},
    infer=_numpy_infer,
    validate=_numpy_validate,
    doc="Decode serialized .npy files (1-D uint8 arrays) to arrays of their shape and type; "
        "with ``dtype``, converted as ``cast`` does. The output type and dimensions are read "
        "from the headers when the operator is called (that waits for the input).",
)

UTIL_OPS = (
    (COPY, _copy_cpu), (PER_FRAME, _pass_cpu), (ELEMENT_EXTRACT, _element_extract_cpu),
    (SEQUENCE_REARRANGE, _sequence_rearrange_cpu), (REINTERPRET, _reinterpret_cpu),
    (PERMUTE_BATCH, _permute_batch_cpu), (BATCH_PERMUTATION, _batch_permutation_cpu),
    (GET_PROPERTY, _get_property_cpu), (FILE_READ, _file_read_cpu), (DECODE_NUMPY, _numpy_cpu),
)

# -- deprecated experimental aliases ----------------------------------------------------


def alias(target: OpSchema, name: str, inputs: tuple[str, ...] | None = None, since: str = "2.2") -> OpSchema:
    """A deprecated second name of ``target`` (DALI 2.4's ``experimental.decoders.image``
    etc.): the same arguments, and the same kernels, whichever plugin attaches them to
    ``target`` (the kernel tables are shared). Each call warns with a DeprecationWarning
    naming ``since``, the DALI version that deprecated the name."""
    message = (f"`ndd.{name}` is deprecated (DALI {since}): it is an alias of `ndd.{target.name}`; "
               "use that instead")
    check = target.validate

    def validate(args: dict) -> None:
        warnings.warn(message, DeprecationWarning, stacklevel=5)
        if check is not None:
            check(args)

    return dataclasses.replace(target, name=name, inputs=inputs or target.inputs, validate=validate,
                               doc=f"Deprecated alias of ``{target.name}``. " + target.doc)


def alias_schemas() -> tuple[OpSchema, ...]:
    """The ``experimental.*`` aliases of the image decoders and ``peek_image_shape``."""
    from ._schemas_image import DECODE, DECODE_CROP, DECODE_RANDOM_CROP, DECODE_SLICE, PEEK_IMAGE_SHAPE

    return (*(alias(t, "experimental." + t.name) for t in (DECODE, DECODE_CROP, DECODE_RANDOM_CROP, PEEK_IMAGE_SHAPE)),
            alias(DECODE_SLICE, "experimental.decoders.image_slice", ("input_0", "input_1", "input_2")))
