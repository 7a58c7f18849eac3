"""Shape and construction operators (CPU, NumPy): reshape, squeeze, expand_dims, transpose,
cat, stack, slice, pad, one_hot, zeros/ones/full and their ``*_like`` variants.

Output metadata is inferred from input metadata and arguments. Where the number of output
dimensions is set by a shape-like value that is a Tensor or a per-sample Batch (the
``shape_input`` or ``shape``/``rel_shape``/``src_dims`` of ``reshape``, the ``axes`` of
``squeeze``, the ``shape`` of ``zeros``/``ones``/``full``), it is that value's number of
elements, the same in every sample (reading it waits for the value to be computed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _convert, _dtype
from ._dispatch import KernelArgs, KernelContext
from ._saturate import saturate_cast
from ._schema import BOOL, DTYPE, FLOAT, FLOATS, INT, INTS, STR, Arg, OpSchema, OutMeta
from ._storage import BatchData, keep_origin

# -- helpers ------------------------------------------------------------------------


def _arg_error(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


def _arg_length(op: str, name: str, v: Any) -> int:
    """The number of elements of a shape-like Tensor, or of every sample of a Batch (an
    error names the argument when the samples disagree)."""
    shapes = v.shape if isinstance(v.shape, list) else [v.shape]
    lengths = sorted({int(np.prod(s, dtype=np.int64)) for s in shapes})
    if len(lengths) > 1:
        raise _arg_error(op, name, f"has samples of {lengths} elements; every sample must give the "
                         "same number of output dimensions")
    return lengths[0] if lengths else 0


def _given_length(op: str, args: KernelArgs, name: str) -> int | None:
    """The number of elements of argument ``name``: its constant's, or its per-sample
    Batch's (None when not given)."""
    b = args.batch_args.get(name)
    if b is not None:
        return _arg_length(op, name, b)
    v = args[name]
    return None if v is None else len(v)


def _norm_axis(op: str, name: str, a: int, ndim: int) -> int:
    if not -ndim <= a < ndim:
        raise _arg_error(op, name, f"has axis {a}, out of range for {ndim} dimension(s)")
    return a % ndim


def _names_to_axes(op: str, names: str, layout: str | None, name: str = "axis_names") -> tuple[int, ...]:
    if not layout:
        raise _arg_error(op, name, f"{names!r} needs an input with a layout, but it has none")
    out = []
    for ch in names:
        if ch not in layout:
            raise _arg_error(op, name, f"names axis {ch!r}, which is not in the layout {layout!r}")
        out.append(layout.index(ch))
    return tuple(out)


def _check_layout(op: str, layout: str | None, ndim: int, name: str = "layout") -> str | None:
    if layout and len(layout) != ndim:
        raise _arg_error(op, name, f"{layout!r} does not match the {ndim} output dimension(s)")
    return layout or None


def _uniform(ctx: KernelContext, bd: BatchData, args: KernelArgs, names: Sequence[str]) -> bool:
    """True when one NumPy call on ``bd.dense`` can serve every sample."""
    return bd.dense is not None and not any(args.is_per_sample(n) for n in names)


def _dense(bd: BatchData, args: KernelArgs, names: Sequence[str]) -> np.ndarray | None:
    """The batch as one array with a leading batch dimension when one NumPy call can serve
    every sample (none of ``names`` is per sample); None otherwise.

    A dense batch is used as it is (the result is a zero-copy view); a list of samples
    that share a shape (e.g. a reader's per-sample labels) is stacked once, which is
    ~10x cheaper than a per-sample loop for 64 small samples."""
    if any(args.is_per_sample(n) for n in names):
        return None
    if bd.dense is not None:
        return bd.dense
    samples = bd.samples
    if samples and bd.is_uniform():
        if isinstance(samples[0], np.ndarray):
            return np.stack(samples)
        return _convert.gpu_backend().stack(samples)
    return None


def _checked(ctx: KernelContext, samples: list) -> list:
    """Per-sample results; ValueError when their ndim differs from the inferred one."""
    want = ctx.output_meta[0].ndim
    for i, s in enumerate(samples):
        if s.ndim != want:
            raise ValueError(
                f"Operator `{ctx.op}`: the result of sample {i} has {s.ndim} dimension(s), but {want} "
                "were expected from the call's arguments; every sample's result must have the same "
                "number of dimensions"
            )
    return samples


def _ints(v: Any) -> tuple[int, ...]:
    """A per-sample value (NumPy array) or a constant tuple as a tuple of ints."""
    return tuple(int(x) for x in np.asarray(v).reshape(-1))


def _floats(v: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in np.asarray(v).reshape(-1))


def _llround(x: float) -> int:
    """Round half away from zero (C's llround)."""
    return int(np.sign(x) * np.floor(abs(x) + 0.5))


# -- reshape ------------------------------------------------------------------------


def _reshape_infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
    return _reshape_meta("reshape", inputs, args)


def _reshape_meta(op: str, inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
    """The output of ``reshape`` (and ``reinterpret``, whose shape arguments are the same),
    with errors naming ``op``."""
    m = inputs[0]
    layout = args["layout"]
    shape, rel, src = (_given_length(op, args, n) for n in _RESHAPE_ARGS)
    shape_input = args.inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
    if shape is not None and rel is not None:
        raise ValueError(f"Operator `{op}`: arguments 'shape' and 'rel_shape' are mutually exclusive")
    if shape_input is not None and (shape is not None or rel is not None):
        raise ValueError(f"Operator `{op}`: 'shape_input' cannot be combined with 'shape' or 'rel_shape'")
    if shape_input is not None:
        shape = _arg_length(op, "shape_input", shape_input)
    const = args["shape"]
    if const is not None and sum(1 for s in const if s < 0) > 1:
        raise _arg_error(op, "shape", f"{list(const)} has more than one negative extent")
    ndim = next((n for n in (shape, src, rel) if n is not None), len(layout) if layout else m.ndim)
    if src is not None:
        for d in args["src_dims"] or ():
            if d != -1:
                _norm_axis(op, "src_dims", d, m.ndim)
        if d_len := (shape if shape is not None else rel):
            if d_len != src:
                raise _arg_error(op, "src_dims", "must have as many elements as 'shape'/'rel_shape'")
    # one extra trailing extent is allowed when it is negative (it takes the rest of the volume)
    const_rel = args["rel_shape"]
    extra_ok = rel == m.ndim + 1 and (const_rel is None or const_rel[-1] < 0)
    if rel is not None and src is None and rel > m.ndim and not extra_ok:
        raise _arg_error(op, "rel_shape", f"has {rel} elements for {m.ndim} input dimension(s)")
    if layout:
        out_layout = _check_layout(op, layout, ndim)
    elif src is not None:
        dims = args["src_dims"]  # None when per sample: no layout
        out_layout = "".join(m.layout[d] for d in dims) if dims and m.layout and -1 not in dims else None
    else:
        out_layout = m.layout if ndim == m.ndim else None
    return [OutMeta(m.dtype, ndim, out_layout)]


def _target_shape(in_shape: tuple, shape: Any, rel: Any, src: Any) -> list:
    if shape is not None:
        return list(_ints(shape))
    src = None if src is None else _ints(src)
    if rel is not None:
        rel = _floats(rel)
        base = ([1 if d == -1 else in_shape[d] for d in src] if src is not None
                else list(in_shape[:len(rel)]) + [1] * (len(rel) - len(in_shape)))
        return [-1 if r < 0 else _llround(b * r) for b, r in zip(base, rel)]
    if src is not None:
        return [1 if d == -1 else in_shape[d] for d in src]
    return list(in_shape)


def _fill_negative(in_shape: tuple, target: list) -> tuple[int, ...]:
    vol = int(np.prod(in_shape, dtype=np.int64))
    neg = [i for i, t in enumerate(target) if t < 0]
    if len(neg) > 1:
        raise _arg_error("reshape", "shape", f"{target} has more than one negative extent")
    if neg:
        rest = int(np.prod([t for t in target if t >= 0], dtype=np.int64))
        if rest == 0 or vol % rest:
            raise ValueError(f"Operator `reshape`: cannot reshape a sample of shape {tuple(in_shape)} "
                             f"({vol} elements) to {target}")
        target[neg[0]] = vol // rest
    out_vol = int(np.prod(target, dtype=np.int64))
    if out_vol != vol:
        raise ValueError(f"Operator `reshape`: cannot reshape a sample of shape {tuple(in_shape)} ({vol} elements) "
                         f"to {target} ({out_vol} elements)")
    return tuple(target)


_RESHAPE_ARGS = ("shape", "rel_shape", "src_dims")


# reshape, squeeze and expand_dims only call ``.reshape`` on the data (and stack samples
# of one shape): the GPU plugin registers these same kernels for its tensors.
def _reshape_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    shp_in = inputs[1] if len(inputs) > 1 else None
    d = _dense(bd, args, _RESHAPE_ARGS) if shp_in is None else None
    if d is not None:
        in_shape = d.shape[1:]
        target = _target_shape(in_shape, args["shape"], args["rel_shape"], args["src_dims"])
        return keep_origin(bd, d.reshape(d.shape[:1] + _fill_negative(in_shape, target)))
    return keep_origin(bd, _checked(ctx, [s.reshape(_reshaped(args, i, s.shape, shp_in))
                                          for i, s in enumerate(bd.samples)]))


def _reshaped(args: KernelArgs, i: int, in_shape: tuple, shp_in: BatchData | None) -> tuple[int, ...]:
    """The shape sample ``i`` (of shape ``in_shape``) takes (``shp_in``: the shapes given as
    an input, on the host)."""
    shape = shp_in.sample(i) if shp_in is not None else args.sample("shape", i)
    target = _target_shape(in_shape, shape, args.sample("rel_shape", i), args.sample("src_dims", i))
    return _fill_negative(in_shape, target)


RESHAPE = OpSchema(
    "reshape",
    inputs=("data", "shape_input"),
    min_inputs=1,
    host_args_from=1,
    args={
        "shape": Arg(INTS, per_sample=True, doc="output shape; one extent may be -1"),
        "rel_shape": Arg(FLOATS, per_sample=True, doc="output shape relative to the input shape"),
        "src_dims": Arg(INTS, per_sample=True, doc="input dimensions to keep (-1 inserts a new one)"),
        "layout": Arg(STR, doc="layout of the output"),
    },
    infer=_reshape_infer,
    doc="Give the data a new shape with the same number of elements (no copy).",
)

# -- squeeze ------------------------------------------------------------------------


def _squeeze_axes(op: str, args: dict, ndim: int, layout: str | None, axes: Any) -> tuple[int, ...]:
    names = args["axis_names"]
    if names:
        if axes is not None:
            raise ValueError(f"Operator `{op}`: arguments 'axes' and 'axis_names' are mutually exclusive")
        return _names_to_axes(op, names, layout)
    if axes is None:
        return ()
    return tuple(sorted({_norm_axis(op, "axes", a, ndim) for a in _ints(axes)}))


def _squeeze_infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
    m = inputs[0]
    b = args.batch_args.get("axes")
    if b is not None:  # per-sample axes: as many dimensions go as each sample names
        n = _arg_length("squeeze", "axes", b)
        return [OutMeta(m.dtype, m.ndim - n, None)]
    axes = _squeeze_axes("squeeze", args, m.ndim, m.layout, args["axes"])
    layout = "".join(c for i, c in enumerate(m.layout) if i not in axes) if m.layout else None
    return [OutMeta(m.dtype, m.ndim - len(axes), layout or None)]


def _squeeze_shape(shape: tuple, axes: tuple[int, ...]) -> tuple[int, ...]:
    for a in axes:
        if shape[a] != 1:
            raise _arg_error("squeeze", "axes", f"names dimension {a} of extent {shape[a]} "
                             f"(sample shape {shape}); only extent-1 dimensions can be removed")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _squeeze_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    layout = ctx.input_layouts[0]
    d = _dense(bd, args, ("axes",))
    if d is not None:
        axes = _squeeze_axes("squeeze", args, d.ndim - 1, layout, args["axes"])
        return keep_origin(bd, d.reshape(d.shape[:1] + _squeeze_shape(d.shape[1:], axes)))
    out = []
    for i, s in enumerate(bd.samples):
        axes = _squeeze_axes("squeeze", args, s.ndim, layout, args.sample("axes", i))
        out.append(s.reshape(_squeeze_shape(s.shape, axes)))
    return keep_origin(bd, _checked(ctx, out))


SQUEEZE = OpSchema(
    "squeeze",
    inputs=("data",),
    args={
        "axes": Arg(INTS, per_sample=True, doc="dimensions (of extent 1) to remove"),
        "axis_names": Arg(STR, doc="layout names of the dimensions to remove"),
    },
    infer=_squeeze_infer,
    doc="Remove dimensions of extent 1 (and their layout names).",
)
# -- expand_dims --------------------------------------------------------------------


def _expand_axes(axes: tuple[int, ...], out_ndim: int) -> tuple[int, ...]:
    norm = tuple(sorted(_norm_axis("expand_dims", "axes", a, out_ndim) for a in axes))
    if len(set(norm)) != len(norm):
        raise _arg_error("expand_dims", "axes", f"{list(axes)} repeats an axis")
    return norm


def _expand_dims_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    axes, names = args["axes"], args["new_axis_names"]
    ndim = m.ndim + len(axes)
    order = _expand_axes(axes, ndim)
    if names and len(names) != len(axes):
        raise _arg_error("expand_dims", "new_axis_names", f"{names!r} must have one name per axis in 'axes'")
    layout = None
    if names and (m.layout or m.ndim == 0):
        by_axis = dict(zip([_norm_axis("expand_dims", "axes", a, ndim) for a in axes], names))
        old = iter(m.layout or "")
        layout = "".join(by_axis[i] if i in order else next(old) for i in range(ndim))
    return [OutMeta(m.dtype, ndim, layout)]


def _expand_dims_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    axes = _expand_axes(args["axes"], ctx.output_meta[0].ndim)
    bd = inputs[0]
    d = _dense(bd, args, ())
    if d is not None:
        return keep_origin(bd, _with_new_axes(d, tuple(a + 1 for a in axes)))
    return keep_origin(bd, [_with_new_axes(s, axes) for s in bd.samples])


def _with_new_axes(x: Any, axes: tuple[int, ...]) -> Any:
    """``x`` with extent-1 dimensions at output positions ``axes``: a reshape, so that the
    same kernel serves NumPy arrays and the GPU plugin's tensors."""
    shape = list(x.shape)
    for a in sorted(axes):
        shape.insert(a, 1)
    return x.reshape(tuple(shape))


EXPAND_DIMS = OpSchema(
    "expand_dims",
    inputs=("data",),
    args={
        "axes": Arg(INTS, required=True, doc="positions of the new extent-1 dimensions in the output"),
        "new_axis_names": Arg(STR, default="", doc="layout names of the new dimensions"),
    },
    infer=_expand_dims_infer,
    doc="Insert dimensions of extent 1.",
)

# -- transpose ----------------------------------------------------------------------


def _perm(args: dict, ndim: int) -> tuple[int, ...]:
    perm = args["perm"]
    if perm is None:
        return tuple(range(ndim - 1, -1, -1))
    if sorted(perm) != list(range(ndim)):
        raise _arg_error("transpose", "perm", f"{list(perm)} is not a permutation of the {ndim} input dimensions")
    return tuple(perm)


def _transpose_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    perm = _perm(args, m.ndim)
    if args["output_layout"]:
        layout = _check_layout("transpose", args["output_layout"], m.ndim, "output_layout")
    elif args["transpose_layout"] and m.layout:
        layout = "".join(m.layout[p] for p in perm)
    else:
        layout = m.layout
    return [OutMeta(m.dtype, m.ndim, layout)]


def _transpose_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    perm = _perm(args, ctx.output_meta[0].ndim)
    if bd.dense is not None:
        return np.ascontiguousarray(bd.dense.transpose((0,) + tuple(p + 1 for p in perm)))
    out = [s.transpose(perm) for s in bd.samples]
    return [t if t.flags.c_contiguous else np.ascontiguousarray(t) for t in out]  # (it would make 0-d 1-d)


TRANSPOSE = OpSchema(
    "transpose",
    args={
        "perm": Arg(INTS, doc="output dimension i is input dimension perm[i] (default: reversed)"),
        "output_layout": Arg(STR, doc="layout of the output (overrides transpose_layout)"),
        "transpose_layout": Arg(BOOL, default=True, doc="permute the layout names with the data"),
    },
    infer=_transpose_infer,
    doc="Permute the dimensions of every sample.",
)

# -- cat and stack ------------------------------------------------------------------


def _join_axis(op: str, inputs: Sequence[OutMeta], args: dict, ndim: int) -> int:
    m = inputs[0]
    for i, x in enumerate(inputs[1:], 1):
        if x.dtype != m.dtype:
            raise ValueError(f"Operator `{op}`: input {i} has dtype {x.dtype}, input 0 has {m.dtype}")
        if x.ndim != m.ndim:
            raise ValueError(f"Operator `{op}`: input {i} has {x.ndim} dimension(s), input 0 has {m.ndim}")
        if x.layout and m.layout and x.layout != m.layout:
            raise ValueError(f"Operator `{op}`: input {i} has layout {x.layout!r}, input 0 has {m.layout!r}")
    name = args["axis_name"]
    if name and op == "cat":
        return _names_to_axes(op, name, _joined_layout(inputs), "axis_name")[0]
    return _norm_axis(op, "axis", args["axis"], ndim)


def _joined_layout(inputs: Sequence[OutMeta]) -> str | None:
    return next((x.layout for x in inputs if x.layout), None)


def _cat_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    if m.ndim == 0:
        raise ValueError("Operator `cat`: scalars cannot be concatenated; use `stack`")
    _join_axis("cat", inputs, args, m.ndim)
    return [OutMeta(m.dtype, m.ndim, _joined_layout(inputs))]


def _stack_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    axis = _join_axis("stack", inputs, args, m.ndim + 1)
    layout = _joined_layout(inputs)
    name = args["axis_name"]
    if name:
        if len(name) != 1:
            raise _arg_error("stack", "axis_name", f"must be one character, got {name!r}")
        layout = (layout or "")[:axis] + name + (layout or "")[axis:] if layout or m.ndim == 0 else None
    else:
        layout = None
    return [OutMeta(m.dtype, m.ndim + 1, layout)]


def _join_cpu(fn: Callable, op: str) -> Callable:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        metas = [OutMeta(ctx.output_meta[0].dtype, ctx.output_meta[0].ndim - (op == "stack"), lay)
                 for lay in ctx.input_layouts]
        axis = _join_axis(op, metas, args, ctx.output_meta[0].ndim)
        first = inputs[0].dense if inputs[0].dense is not None else next(iter(inputs[0].samples), None)
        join = fn if first is None or _on_host(first) else getattr(
            _convert.gpu_backend(), "concatenate" if op == "cat" else "stack")
        try:
            if all(bd.dense is not None for bd in inputs):
                return join([bd.dense for bd in inputs], axis=axis + 1)
            return [join([bd.sample(i) for bd in inputs], axis=axis) for i in range(ctx.batch_size)]
        except (ValueError, RuntimeError) as e:  # RuntimeError: torch's word for it (GPU data)
            raise ValueError(f"Operator `{op}`: the inputs' shapes do not fit along axis {axis} ({e})") from None

    return kernel


CAT = OpSchema(
    "cat",
    inputs=("input_0",),
    variadic=True,
    args={"axis": Arg(INT, default=0, doc="the axis to join along"),
          "axis_name": Arg(STR, doc="layout name of the axis to join along")},
    infer=_cat_infer,
    doc="Join the inputs along an existing axis (sample by sample).",
)
STACK = OpSchema(
    "stack",
    inputs=("input_0",),
    variadic=True,
    args={"axis": Arg(INT, default=0, doc="position of the new axis in the output"),
          "axis_name": Arg(STR, doc="layout name of the new axis")},
    infer=_stack_infer,
    doc="Join the inputs along a new axis (sample by sample).",
)

# -- zeros, ones, full and *_like -----------------------------------------------------


def _shape_ndim(op: str, args: KernelArgs) -> int:
    shape, layout = _given_length(op, args, "shape"), args.get("layout")
    if shape is not None:
        return shape
    return len(layout) if layout else 0


def _const_infer(op: str) -> Callable:
    def infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
        ndim = _shape_ndim(op, args)
        return [OutMeta(args["dtype"], ndim, _check_layout(op, args["layout"], ndim))]

    return infer


def _full_infer(inputs: Sequence[OutMeta], args: KernelArgs) -> list[OutMeta]:
    f = inputs[0]
    given = args["shape"] is not None or "shape" in args.batch_args or args["layout"]
    ndim = _shape_ndim("full", args) if given else f.ndim
    return [OutMeta(f.dtype, ndim, _check_layout("full", args["layout"], ndim))]


def _like_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    dt = inputs[1].dtype if len(inputs) > 1 else args["dtype"] or m.dtype  # as DALI: like's type
    return [OutMeta(dt, m.ndim, m.layout)]


def _full_like_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m, f = inputs
    if f.ndim > m.ndim:
        raise ValueError(f"Operator `full_like`: fill_value has {f.ndim} dimension(s), more than data_like's {m.ndim}")
    return [OutMeta(m.dtype, m.ndim, m.layout)]  # data_like's type, as DALI 2.4


def _shape_of(op: str, v: Any) -> tuple[int, ...]:
    shape = () if v is None else _ints(v)
    if any(d < 0 for d in shape):
        raise _arg_error(op, "shape", f"{list(shape)} has a negative extent")
    return shape


def _on_host(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def _filler(ctx: KernelContext) -> Callable:
    """``full(shape, value, numpy_dtype)`` on the kernel's device (NumPy, or the GPU backend)."""
    if ctx.device.device_type == "cpu":
        return np.full
    be, dev = _convert.gpu_backend(), ctx.device.device_id
    return lambda shape, value, npd: be.full(shape, value, npd, dev, ctx.eval_context)


def _broadcast(x: Any, shape: tuple) -> Any:
    """``x`` broadcast to ``shape`` as new memory (ValueError when it does not fit)."""
    if _on_host(x):
        return np.array(np.broadcast_to(x, shape))
    try:
        return _convert.gpu_backend().broadcast(x, shape)
    except RuntimeError as e:
        raise ValueError(str(e)) from None


# zeros/ones/full and *_like, cat and stack run on NumPy arrays and, through the GPU
# backend's full/broadcast/concatenate/stack, on the GPU plugin's tensors (it registers
# these same kernels for the GPU).
def _fill_cpu(value: Any) -> Callable:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        npd = ctx.output_meta[0].dtype.numpy_dtype
        full = _filler(ctx)
        if not args.is_per_sample("shape"):
            shape = _shape_of(ctx.op, args["shape"])
            return full((ctx.batch_size,) + shape, value, npd)
        return _checked(ctx, [full(_shape_of(ctx.op, s), value, npd) for s in args.per_sample("shape")])

    return kernel


def _full_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    fill = inputs[0]
    out = []
    for i in range(ctx.batch_size):
        f = fill.sample(i)
        shape = _shape_of("full", args.sample("shape", i)) if args["shape"] is not None else f.shape
        try:
            out.append(_broadcast(f, shape))
        except ValueError:
            raise _arg_error("full", "shape", f"{list(shape)} is incompatible with a fill_value "
                             f"of shape {f.shape}") from None
    return _checked(ctx, out)


def _like_cpu(value: Any) -> Callable:
    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        npd = ctx.output_meta[0].dtype.numpy_dtype
        bd = inputs[0]
        full = _filler(ctx)
        if bd.dense is not None:
            return full(tuple(bd.dense.shape), value, npd)
        return [full(tuple(s.shape), value, npd) for s in bd.samples]

    return kernel


def _full_like_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    like, fill = inputs
    dt = ctx.output_meta[0].dtype
    if fill.dense is not None:  # the fill converted to data_like's type (rounded, saturated)
        fill = BatchData(dense=_convert.cast_array(fill.dense, dt, copy=False))
    else:
        fill = BatchData(samples=[_convert.cast_array(x, dt, copy=False) for x in fill.samples])
    try:
        if like.dense is not None and fill.dense is not None:
            f = fill.dense.reshape(fill.dense.shape[:1] + (1,) * (like.dense.ndim - fill.dense.ndim)
                                   + fill.dense.shape[1:])
            return _broadcast(f, tuple(like.dense.shape))
        return [_broadcast(fill.sample(i), tuple(s.shape)) for i, s in enumerate(like.samples)]
    except ValueError:
        raise ValueError("Operator `full_like`: fill_value cannot be broadcast to the shape of data_like") from None


_SHAPE_ARG = Arg(INTS, per_sample=True, doc="shape of the output")
_LAYOUT_ARG = Arg(STR, doc="layout of the output")
_DTYPE_ARG = Arg(DTYPE, default=_dtype.int32, doc="element type of the output")
ZEROS = OpSchema("zeros", inputs=(), args={"shape": _SHAPE_ARG, "dtype": _DTYPE_ARG, "layout": _LAYOUT_ARG},
                 infer=_const_infer("zeros"), doc="Data of the given shape filled with zeros.")
ONES = OpSchema("ones", inputs=(), args={"shape": _SHAPE_ARG, "dtype": _DTYPE_ARG, "layout": _LAYOUT_ARG},
                infer=_const_infer("ones"), doc="Data of the given shape filled with ones.")
FULL = OpSchema("full", inputs=("fill_value",), args={"shape": _SHAPE_ARG, "layout": _LAYOUT_ARG},
                infer=_full_infer, doc="Data of the given shape filled with (broadcast) fill_value.")
_LIKE_DTYPE_ARG = Arg(DTYPE, default=None, doc="element type of the output (default: data_like's)")
ZEROS_LIKE = OpSchema("zeros_like", inputs=("data_like",), args={"dtype": _LIKE_DTYPE_ARG}, infer=_like_infer,
                      doc="Zeros with the shape (and, by default, the type) of data_like.")
ONES_LIKE = OpSchema("ones_like", inputs=("data_like",), args={"dtype": _LIKE_DTYPE_ARG}, infer=_like_infer,
                     doc="Ones with the shape (and, by default, the type) of data_like.")
FULL_LIKE = OpSchema("full_like", inputs=("data_like", "fill_value"), infer=_full_like_infer, host_args_from=1,
                     doc="fill_value (broadcast) with the shape of data_like.")

# -- pad ----------------------------------------------------------------------------


def _pad_axes(args: KernelArgs, i: int, ndim: int, layout: str | None) -> tuple[int, ...]:
    axes, names = args.sample("axes", i), args["axis_names"]
    if names:
        if axes is not None:
            raise ValueError("Operator `pad`: arguments 'axes' and 'axis_names' are mutually exclusive")
        return _names_to_axes("pad", names, layout)
    if axes is None:
        return tuple(range(ndim))
    return tuple(_norm_axis("pad", "axes", a, ndim) for a in _ints(axes))


def _per_axis(name: str, v: Any, n: int) -> tuple[int, ...]:
    vals = _ints(v)
    if len(vals) == 1 and n != 1:
        return vals * n
    if len(vals) != n:
        raise _arg_error("pad", name, f"has {len(vals)} values for {n} padded axis/axes")
    return vals


def _pad_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    if args["axis_names"]:
        _names_to_axes("pad", args["axis_names"], m.layout)
    return [inputs[0]]


def _pad_target(args: KernelArgs, i: int, shape: tuple, axes: tuple, batch_max: Sequence[int]) -> list[int]:
    target = list(shape)
    want = args.sample("shape", i)
    want = None if want is None else _per_axis("shape", want, len(axes))
    align = args.sample("align", i)
    align = None if align is None else _per_axis("align", align, len(axes))
    for j, a in enumerate(axes):
        t = batch_max[a] if want is None or want[j] < 0 else max(shape[a], want[j])
        if align is not None:
            if align[j] <= 0:
                raise _arg_error("pad", "align", f"must be positive, got {align[j]}")
            t = -(-t // align[j]) * align[j]
        target[a] = t
    return target


def _pad_to(x: np.ndarray, target: tuple, fill: Any) -> np.ndarray:
    if x.shape == target:
        return x
    out = np.full(target, fill, x.dtype)
    out[tuple(slice(0, d) for d in x.shape)] = x
    return out


def _pad_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    layout = ctx.input_layouts[0]
    ndim = ctx.output_meta[0].ndim
    if ctx.batch_size == 0:
        return []
    if _uniform(ctx, bd, args, ("fill_value", "shape", "align", "axes")):
        d = bd.dense
        target = _pad_target(args, 0, d.shape[1:], _pad_axes(args, 0, ndim, layout), d.shape[1:])
        return _pad_to(d, d.shape[:1] + tuple(target), args["fill_value"])
    samples = bd.samples
    batch_max = [max(s.shape[a] for s in samples) for a in range(ndim)]
    return [_pad_to(s, tuple(_pad_target(args, i, s.shape, _pad_axes(args, i, ndim, layout), batch_max)),
                    args.sample("fill_value", i))
            for i, s in enumerate(samples)]


PAD = OpSchema(
    "pad",
    args={
        "fill_value": Arg(FLOAT, default=0.0, per_sample=True, doc="value of the padding"),
        "shape": Arg(INTS, per_sample=True, doc="output extents in the padded axes (-1: the batch maximum)"),
        "align": Arg(INTS, per_sample=True, doc="round the padded extents up to a multiple of this"),
        "axes": Arg(INTS, per_sample=True, doc="axes to pad (default: all)"),
        "axis_names": Arg(STR, doc="layout names of the axes to pad"),
    },
    infer=_pad_infer,
    doc="Pad every sample at the end of the chosen axes (by default to the largest extent in the batch).",
)

# -- one_hot ------------------------------------------------------------------------


def _one_hot_axis(args: dict, in_ndim: int) -> int:
    axis = args["axis"]
    if axis == -1:
        return in_ndim
    if not 0 <= axis <= in_ndim:
        raise _arg_error("one_hot", "axis", f"{axis} is out of range for an input of {in_ndim} dimension(s)")
    return axis


def _one_hot_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    if args["num_classes"] < 1:
        raise _arg_error("one_hot", "num_classes", f"must be positive, got {args['num_classes']}")
    axis = _one_hot_axis(args, m.ndim)
    name = args["axis_name"]
    layout = None
    if name:
        if len(name) != 1:
            raise _arg_error("one_hot", "axis_name", f"must be one character, got {name!r}")
        if m.layout or m.ndim == 0:
            lay = m.layout or ""
            layout = lay[:axis] + name + lay[axis:]
    return [OutMeta(args["dtype"], m.ndim + 1, layout)]


def _one_hot_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    npd = ctx.output_meta[0].dtype.numpy_dtype
    classes = np.arange(args["num_classes"])
    on, off = np.asarray(args["on_value"]).astype(npd), np.asarray(args["off_value"]).astype(npd)
    axis = _one_hot_axis(args, ctx.output_meta[0].ndim - 1)

    def encode(x: np.ndarray, ax: int) -> np.ndarray:
        if x.dtype.kind == "f":  # float labels lose their fraction, as DALI converts them (1.7 is 1)
            x = np.trunc(x)
        return np.moveaxis(np.where(x[..., None] == classes, on, off), -1, ax)

    bd = inputs[0]
    if bd.dense is not None:
        return encode(bd.dense, axis + 1)
    return [encode(s, axis) for s in bd.samples]


ONE_HOT = OpSchema(
    "one_hot",
    args={
        "num_classes": Arg(INT, default=0, doc="number of classes (length of the new axis)"),
        "axis": Arg(INT, default=-1, doc="position of the new axis (-1: last)"),
        "axis_name": Arg(STR, doc="layout name of the new axis"),
        "dtype": Arg(DTYPE, default=_dtype.float32, doc="element type of the output"),
        "on_value": Arg(FLOAT, default=1.0, doc="value where the label matches"),
        "off_value": Arg(FLOAT, default=0.0, doc="value elsewhere"),
    },
    infer=_one_hot_infer,
    doc="One-hot encode integer labels along a new axis.",
)

# -- slice --------------------------------------------------------------------------

_SLICE_ARGS = ("start", "end", "shape", "rel_start", "rel_end", "rel_shape", "axes")


def _slice_axes(names: str, axes: Any, ndim: int, layout: str | None) -> tuple[int, ...]:
    axes = (1, 0) if axes is None else _ints(axes)
    if names != "WH" or (axes == (1, 0) and layout and "W" in layout and "H" in layout):
        return _names_to_axes("slice", names, layout)
    return tuple(_norm_axis("slice", "axes", a, ndim) for a in axes)


def _slice_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    has_inputs = any(x is not None for x in inputs[1:])
    per_sample = getattr(args, "batch_args", None) or {}
    given = [n for n in _SLICE_ARGS[:6] if args[n] is not None or n in per_sample]
    if has_inputs and given:
        raise _arg_error("slice", given[0], "cannot be combined with the anchor and shape inputs")
    if not has_inputs and not given:  # (DALI raises too: a slice of nothing is a mistake, not a copy)
        raise ValueError("Operator `slice`: give the window as arguments (start/end, start/shape, "
                         "rel_start/rel_shape, ...) or as the anchor and shape inputs")
    if args["start"] is not None and args["rel_start"] is not None:
        raise ValueError("Operator `slice`: arguments 'start' and 'rel_start' are mutually exclusive")
    if sum(args[n] is not None for n in ("end", "rel_end", "shape", "rel_shape")) > 1:
        raise ValueError("Operator `slice`: only one of 'end', 'rel_end', 'shape' and 'rel_shape' can be given")
    if args["axes"] is not None:
        _slice_axes(args["axis_names"], args["axes"], m.ndim, m.layout)
    dt = args["dtype"] if args["dtype"] is not None else m.dtype
    return [OutMeta(dt, m.ndim, m.layout)]


def _coords(name: str, v: Any, k: int) -> tuple[float, ...]:
    vals = _floats(v)
    if len(vals) == 1 and k != 1:
        return vals * k
    if len(vals) != k:
        raise _arg_error("slice", name, f"has {len(vals)} values for {k} sliced axis/axes")
    return vals


def _slice_box(args: KernelArgs, i: int, shape: tuple, axes: tuple, anchor: Any, sh: Any) -> list:
    """(start, end) for every dimension of a sample."""
    k = len(axes)
    box = [(0, d) for d in shape]
    if anchor is not None or sh is not None:
        na, ns = args["normalized_anchor"], args["normalized_shape"]
        a = _coords("anchor", anchor, k) if anchor is not None else (0.0,) * k
        s = _coords("shape_input", sh, k) if sh is not None else None
        for j, ax in enumerate(axes):
            ext = shape[ax]
            start = a[j] * ext if na else a[j]
            # the end is rounded, not the extent (as DALI: start 4.59 + extent 5.61 gives rows 5..10)
            en = ext if s is None else _llround(start + (s[j] * ext if ns else s[j]))
            box[ax] = (_llround(start), en)
        return box
    v = {n: args.sample(n, i) for n in _SLICE_ARGS[:6]}
    # float32 values, multiplied in double, as DALI (0.05 + 0.45 of 37 rows ends at 18, not 19)
    v = {n: (None if x is None else tuple(float(np.float32(c)) for c in _coords(n, x, k))) for n, x in v.items()}
    # Absolute values are truncated (start 1.5, shape 3.5 give rows 1..4; -1.5 starts at -1);
    # relative ones are scaled, and the start and end rounded, as DALI 2.4 does
    for j, ax in enumerate(axes):
        ext = shape[ax]
        if v["start"] is not None:
            start = float(math.trunc(v["start"][j]))
        else:
            start = v["rel_start"][j] * ext if v["rel_start"] is not None else 0.0
        if v["end"] is not None:
            en = math.trunc(v["end"][j])
        elif v["rel_end"] is not None:
            en = _llround(v["rel_end"][j] * ext)
        elif v["shape"] is not None:
            en = _llround(start) + math.trunc(v["shape"][j])
        elif v["rel_shape"] is not None:  # the end is rounded, not the extent (as DALI)
            en = _llround(start + v["rel_shape"][j] * ext)
        else:
            en = ext
        box[ax] = (_llround(start), en)
    return box


def slice_box(args: KernelArgs, i: int, shape: tuple, layout: str | None, anchor: Any = None,
              shape_input: Any = None) -> list[tuple[int, int]]:
    """The (start, end) of every dimension of sample ``i`` that ``slice``'s window arguments or
    anchor/shape inputs select (not yet checked against the sample; shared with
    ``decoders.image_slice``)."""
    axes = _slice_axes(args["axis_names"], args.sample("axes", i), len(shape), layout)
    return _slice_box(args, i, shape, axes, anchor, shape_input)


def _slice_window(box: list, shape: tuple, policy: str) -> tuple[list, bool]:
    """A sample's window checked and adjusted for ``policy`` (shared with the GPU kernel):
    the window, and whether it needs padding."""
    for ax, (st, en) in enumerate(box):
        if en < st:
            raise ValueError(f"Operator `slice`: the slice on axis {ax} has a negative extent ({st}..{en})")
    if policy == "trim_to_shape":
        box = [(min(max(st, 0), d), min(max(en, 0), d)) for (st, en), d in zip(box, shape)]
    elif policy == "error":
        for ax, ((st, en), d) in enumerate(zip(box, shape)):
            if st < 0 or en > d:
                raise ValueError(
                    f"Operator `slice`: the slice [{st}, {en}) on axis {ax} is out of bounds for extent {d} "
                    "(out_of_bounds_policy='error'); use 'pad' or 'trim_to_shape'"
                )
    return box, policy == "pad" and not all(st >= 0 and en <= d for (st, en), d in zip(box, shape))


def _slice_one(x: np.ndarray, box: list, lead: int, policy: str, fill: Any, layout: str | None,
               npd: np.dtype) -> np.ndarray:
    shape = x.shape[lead:]
    box, pad = _slice_window(box, shape, policy)
    # clamped at both ends: a window wholly outside an axis selects nothing (a negative stop
    # would count from the end)
    inner = tuple(slice(min(max(st, 0), d), min(max(en, 0), d)) for (st, en), d in zip(box, shape))
    if not pad:
        out = x[(slice(None),) * lead + inner]
        return _window_cast(out, npd)
    out_shape = x.shape[:lead] + tuple(en - st for st, en in box)
    out = np.empty(out_shape, npd)
    out[...] = _fill_array(fill, out_shape[lead:], layout, npd)
    dst = tuple(slice(s.start - st, s.stop - st) if s.stop > s.start else slice(0, 0)
                for s, (st, _) in zip(inner, box))
    src = x[(slice(None),) * lead + inner]
    out[(slice(None),) * lead + dst] = _window_cast(src, npd)
    return out


def _window_cast(x: np.ndarray, npd: np.dtype) -> np.ndarray:
    """As DALI's slice converts: floats going to integers truncated, then saturated."""
    if x.dtype == npd:
        return x
    return saturate_cast(np.trunc(x) if x.dtype.kind == "f" and npd.kind in "iu" else x, npd)


def _fill_array(fill: tuple, shape: tuple, layout: str | None, npd: np.dtype) -> np.ndarray:
    f = np.asarray(fill, np.float64).reshape(-1)
    if f.size == 1:
        return f[0].astype(npd)
    ch = layout.index("C") if layout and "C" in layout else len(shape) - 1
    if ch < 0 or shape[ch] != f.size:
        raise _arg_error("slice", "fill_values", f"has {f.size} values, but the channel dimension "
                         f"has extent {shape[ch] if ch >= 0 else 0}")
    return f.reshape((-1,) + (1,) * (len(shape) - ch - 1)).astype(npd)


def _slice_cpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    bd = inputs[0]
    anchor = inputs[1] if len(inputs) > 1 else None
    shp = inputs[2] if len(inputs) > 2 else None
    layout = ctx.input_layouts[0]
    npd = ctx.output_meta[0].dtype.numpy_dtype
    policy, fill, names = args["out_of_bounds_policy"], args["fill_values"], args["axis_names"]
    if anchor is None and shp is None and _uniform(ctx, bd, args, _SLICE_ARGS):
        d = bd.dense
        axes = _slice_axes(names, args["axes"], d.ndim - 1, layout)
        box = _slice_box(args, 0, d.shape[1:], axes, None, None)
        return _slice_one(d, box, 1, policy, fill, layout, npd)
    out = []
    for i, s in enumerate(bd.samples):
        axes = _slice_axes(names, args.sample("axes", i), s.ndim, layout)
        box = _slice_box(args, i, s.shape, axes, None if anchor is None else anchor.sample(i),
                         None if shp is None else shp.sample(i))
        out.append(_slice_one(s, box, 0, policy, fill, layout, npd))
    return out


SLICE = OpSchema(
    "slice", deprecated={"output_dtype": "dtype", "image_type": None},
    inputs=("data", "anchor", "shape_input"),
    min_inputs=1,
    host_args_from=1,
    args={
        "start": Arg(FLOATS, per_sample=True, doc="absolute start coordinates"),
        "end": Arg(FLOATS, per_sample=True, doc="absolute end coordinates"),
        "shape": Arg(FLOATS, per_sample=True, doc="absolute extents"),
        "rel_start": Arg(FLOATS, per_sample=True, doc="start coordinates relative to the extents"),
        "rel_end": Arg(FLOATS, per_sample=True, doc="end coordinates relative to the extents"),
        "rel_shape": Arg(FLOATS, per_sample=True, doc="extents relative to the input extents"),
        "axes": Arg(INTS, default=(1, 0), per_sample=True, doc="axes the coordinates refer to"),
        "axis_names": Arg(STR, default="WH", doc="layout names of the axes the coordinates refer to"),
        "normalized_anchor": Arg(BOOL, default=True, doc="the anchor input is relative to the extents"),
        "normalized_shape": Arg(BOOL, default=True, doc="the shape input is relative to the extents"),
        "dtype": Arg(DTYPE, doc="element type of the output (default: the input's)"),
        "fill_values": Arg(FLOATS, default=(0.0,), doc="padding value(s), one per channel or one for all"),
        "out_of_bounds_policy": Arg(STR, default="error", choices=("error", "pad", "trim_to_shape"),
                                    doc="what to do when the slice leaves the input"),
    },
    infer=_slice_infer,
    doc="Cut a box out of every sample (anchor/shape inputs, or start/end/shape arguments).",
)

SHAPE_OPS = (
    (RESHAPE, _reshape_cpu), (SQUEEZE, _squeeze_cpu), (EXPAND_DIMS, _expand_dims_cpu),
    (TRANSPOSE, _transpose_cpu), (CAT, _join_cpu(np.concatenate, "cat")),
    (STACK, _join_cpu(np.stack, "stack")), (PAD, _pad_cpu), (ONE_HOT, _one_hot_cpu), (SLICE, _slice_cpu),
    (ZEROS, _fill_cpu(0)), (ONES, _fill_cpu(1)), (FULL, _full_cpu), (ZEROS_LIKE, _like_cpu(0)),
    (ONES_LIKE, _like_cpu(1)), (FULL_LIKE, _full_like_cpu),
)
