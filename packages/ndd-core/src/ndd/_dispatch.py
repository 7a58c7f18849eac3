"""The one path every operator call takes: validate, infer, pick a kernel, run.

Capture mode observes and replaces calls through one hook (see
:func:`ndd.plugins.set_op_call_hook`); core never imports it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _convert, _plugins
from ._batch import Batch
from ._device import CPU, Device
from ._eval import EvalContext, EvalMode, Invocation, caller_frame
from ._schema import BOOL, FLOAT, FLOATS, INT, Arg, OpSchema, OutMeta, check_finite, convert_arg
from ._storage import BatchData
from ._tensor import Tensor

_SYNC = EvalMode.sync_cpu.value

# Set by a capture plugin: hook(schema, inputs, kwargs) -> result. It must call
# ``invoke`` itself for calls it does not answer.
op_call_hook: Any = None


class PerSample:
    """A per-sample argument: one NumPy value per sample (always on the CPU).

    Built from a dense batch it keeps the one array; ``values`` (the per-sample list)
    is then made on first use, and ``array()`` costs nothing.
    """

    __slots__ = ("_values", "_dense")

    def __init__(self, values: list[np.ndarray] | None = None, dense: np.ndarray | None = None) -> None:
        self._values = values
        self._dense = dense

    @property
    def values(self) -> list[np.ndarray]:
        if self._values is None:
            d = self._dense
            self._values = [d[i, ...] for i in range(len(d))]
        return self._values

    def array(self) -> np.ndarray:
        """All values stacked (they must share a shape)."""
        if self._dense is None:
            self._dense = np.stack(self._values) if self._values else np.zeros((0,))
        return self._dense

    def __repr__(self) -> str:
        return f"PerSample({self.values!r})"


class KernelArgs(dict):
    """Arguments as a kernel sees them: constants, or :class:`PerSample` values."""

    # batch_args (per-sample arguments as Batches) and inputs (the call's inputs) are set
    # for the schema's infer: the sizes of a shape-like one set the number of output dimensions.
    __slots__ = ("batch_size", "batch_args", "inputs")

    def is_per_sample(self, name: str) -> bool:
        return isinstance(self[name], PerSample)

    def sample(self, name: str, i: int) -> Any:
        """The value of ``name`` for sample ``i``."""
        v = self[name]
        return v.values[i] if isinstance(v, PerSample) else v

    def per_sample(self, name: str) -> list:
        """One value per sample (constants repeated)."""
        v = self[name]
        return v.values if isinstance(v, PerSample) else [v] * self.batch_size


class KernelContext:
    """What a kernel knows about its call besides inputs and arguments."""

    __slots__ = ("op", "batch_size", "is_batch", "device", "thread_pool", "random_state",
                 "input_layouts", "output_meta", "eval_context")

    def __init__(self, op: str, batch_size: int, is_batch: bool, device: Device,
                 eval_context: EvalContext, random_state: np.ndarray | None,
                 input_layouts: list, output_meta: list[OutMeta]) -> None:
        self.op = op
        self.batch_size = batch_size
        self.is_batch = is_batch
        self.device = device
        self.eval_context = eval_context
        self.thread_pool = eval_context.thread_pool
        self.random_state = random_state
        self.input_layouts = input_layouts
        self.output_meta = output_meta


def call(schema: OpSchema, inputs: tuple, kwargs: dict) -> Any:
    """Entry point of every generated operator function."""
    if schema.deprecated and not schema.deprecated.keys().isdisjoint(kwargs):
        kwargs = _undeprecated(schema, kwargs)
    device = kwargs.get("device")
    if device is not None and device is not _CPU_NAME and not schema.host_inputs:
        inputs = _inputs_on(schema, inputs, device)
    hook = op_call_hook
    try:
        if hook is not None:
            return hook(schema, inputs, kwargs)
        return invoke(schema, inputs, kwargs)
    except ValueError as e:  # an argument check: also a RuntimeError, as DALI raises there
        if isinstance(e, RuntimeError):
            raise
        raise OperatorError(str(e)).with_traceback(e.__traceback__) from e.__cause__


_CPU_NAME = "cpu"


def _undeprecated(schema: OpSchema, kwargs: dict) -> dict:
    """``kwargs`` with DALI's deprecated arguments replaced, each with a DeprecationWarning at
    the caller's line, as DALI warns: an alias becomes its new name (giving both is a
    TypeError), an argument no longer used is dropped."""
    op, out = schema.name, dict(kwargs)
    for name, new in schema.deprecated.items():
        if out.get(name) is None:
            out.pop(name, None)
            continue
        v = out.pop(name)
        if new is None:
            msg = f"Operator `{op}`: argument '{name}' is deprecated and no longer used"
        else:
            if out.get(new) is not None:
                raise TypeError(f"Operator `{op}`: got both '{new}' and its deprecated alias '{name}'")
            out[new] = v
            msg = f"Operator `{op}`: argument '{name}' is a deprecated alias for '{new}'; use '{new}'"
        warnings.warn(msg, DeprecationWarning, stacklevel=4)
    return out


def _inputs_on(schema: OpSchema, inputs: tuple, device: Any) -> tuple:
    """``inputs`` moved to a GPU that ``device=`` asks for (as DALI does): host data first
    becomes a tensor, and a batch's move is itself an operator call (capture mode takes it
    as one). Any other device, or an operator without a GPU kernel: the inputs as they are
    (``invoke`` checks the device)."""
    try:
        dev = device if isinstance(device, Device) else Device(device)
    except (TypeError, ValueError):
        return inputs
    if not schema.kernels:
        _plugins.ensure_loaded()
    if dev.device_type != "gpu" or "gpu" not in schema.kernels:  # (no GPU kernel: invoke says so)
        return inputs
    n = len(inputs) if schema.device_inputs is None else schema.device_inputs
    moved = list(inputs)
    batches = []  # (position, batch) of the host batches: moved in one call (one capture site)
    for i, x in enumerate(inputs[:n]):
        if x is None:
            continue
        if not isinstance(x, (Tensor, Batch)):
            x = _as_input(schema.name, x)
        if x._device.device_type != "cpu":
            continue
        if isinstance(x, Batch):
            batches.append((i, x))
        else:
            moved[i] = x.to_device(dev)
    if batches:
        from ._builtins import to_device

        out = to_device(batches[0][1], dev, *(b for _, b in batches[1:]))
        for (i, _), b in zip(batches, out if len(batches) > 1 else (out,)):
            moved[i] = b
    return tuple(moved)


def _check_batch_size(op: str, v: Any) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"Operator `{op}`: batch_size must be a non-negative int, got {v!r}")
    return int(v)


def _as_input(op: str, x: Any) -> Tensor | Batch:
    from ._construct import as_batch, as_tensor

    if isinstance(x, (list, tuple)) and x and all(isinstance(e, Tensor) for e in x):
        return as_batch(x)
    try:
        return as_tensor(x)
    except TypeError as e:
        raise TypeError(f"Operator `{op}`: cannot use {type(x).__name__} as an input ({e})") from None


def _pick_kernel(schema: OpSchema, ins: list, device: Any) -> tuple[Device, Any]:
    if device is None and ins and not schema.conflicts:  # the common case: CPU inputs, a CPU kernel
        kernel = schema.kernels.get("cpu")
        if kernel is not None and all(x is None or x._device is CPU or x._device.device_type == "cpu"
                                      for x in ins):
            return CPU, kernel
    op = schema.name
    if device is not None:
        dev = device if isinstance(device, Device) else Device(device)
    else:
        dev = None
        for x in ins:
            if x is not None and x._device.device_type == "gpu":
                if dev is not None and dev != x._device:
                    raise RuntimeError(
                        f"Operator `{op}`: inputs are on different GPUs ({dev} and {x._device})"
                    )
                dev = x._device
        if dev is None:
            dev = CPU if any(x is not None for x in ins) else Device.current()
        elif not schema.host_inputs:
            _check_none_on_host(op, ins if schema.host_args_from is None else ins[:schema.host_args_from], dev)
    kernels = schema.kernels
    if not kernels:  # an internal op used before anything loaded the plugins
        _plugins.ensure_loaded()
    kernel = kernels.get(dev.device_type)
    if kernel is None:
        if not kernels:
            raise NotImplementedError(_missing_message(schema))
        if device is None and len(kernels) == 1:
            (dt, kernel), = kernels.items()
            if dt == "cpu" and dev.device_type == "gpu":
                raise ValueError(
                    f"Operator `{op}` runs only on the CPU, but an input is on {dev}; "
                    "move it with .cpu() first."
                )
            if dt == "gpu" and dev.device_type == "cpu":
                raise ValueError(
                    f"Operator `{op}` runs only on the GPU, but its inputs are on the CPU; "
                    'move them with .gpu() first, or pass device="gpu".'
                )
            dev = Device(dt) if dt == "cpu" else Device(dt, dev.device_id)
        else:
            raise ValueError(f'Invalid device "{dev}" for operator `{op}`')
    if schema.conflicts and dev.device_type in schema.conflicts:
        raise RuntimeError(schema.conflicts[dev.device_type])
    return dev, kernel


def _check_none_on_host(op: str, ins: list, dev: Device) -> None:
    """An operator whose device was inferred from a GPU input takes no host input (DALI's
    rule for arithmetic); ``device="gpu"`` moves them instead (``_inputs_on``)."""
    for i, x in enumerate(ins):
        if x is not None and x._device.device_type == "cpu":
            raise ValueError(
                f"Operator `{op}`: input {i} is on the CPU but another input is on {dev}; "
                f'move it with .gpu(), or pass device="gpu" to move every CPU input'
            )


def _missing_message(schema: OpSchema) -> str:
    pkg = schema.provided_by
    name = f"ndd.{schema.name}"
    if pkg:
        return f"{name} is provided by the `{pkg}` package, which is not installed: pip install {pkg}"
    return f"{name} has no kernel installed for any device"


def _per_sample(op: str, name: str, spec: Arg, bd: BatchData) -> PerSample:
    npd = spec.sample_dtype
    if bd.dense is not None:
        out = PerSample(dense=np.asarray(bd.dense, npd))
    else:
        out = PerSample([np.asarray(s, npd) for s in bd.samples])
    if spec.kind in (INT, FLOAT, BOOL):  # one value per sample
        shapes = [out._dense.shape[1:]] if out._dense is not None else [v.shape for v in out.values]
        bad = next((i for i, sh in enumerate(shapes) if math.prod(sh) != 1), None)
        if bad is not None:
            raise ValueError(f"Operator `{op}`: argument '{name}' takes one value per sample, but sample "
                             f"{bad} of its batch has shape {shapes[bad]}")
    if spec.kind in (FLOAT, FLOATS):
        check_finite(op, name, out._dense if out._dense is not None else out.values)
    return out


def _outputs(out: Any) -> list[BatchData]:
    if not isinstance(out, tuple):
        out = (out,)
    return [BatchData.of(o) for o in out]


class OperatorError(ValueError, RuntimeError):
    """``ndd.OperatorError`` (ours): a bad argument or input of an operator, found at the
    call (an argument out of range) or while it ran (a sample that does not decode, a crop
    window outside its image). A RuntimeError, as DALI raises there, and a ValueError."""


def _running(fn: Callable, *args: Any) -> Any:
    """``fn(*args)``, a kernel or one of its stages; a ValueError it raises comes out as an
    OperatorError with the same message and traceback."""
    try:
        return fn(*args)
    except ValueError as e:
        if isinstance(e, RuntimeError):
            raise
        raise OperatorError(str(e)).with_traceback(e.__traceback__) from e.__cause__


def invoke(schema: OpSchema, inputs: tuple, kwargs: dict) -> Any:
    """Run one operator call under the current EvalMode (the eager path)."""
    op = schema.name
    batch_size = kwargs.pop("batch_size", None)
    device = kwargs.pop("device", None)
    rng = kwargs.pop("rng", None) if schema.random else None

    n = len(inputs)
    if n < schema.min_inputs or (not schema.variadic and n > len(schema.inputs)):
        want = f"at least {schema.min_inputs}" if schema.variadic else (
            f"{schema.min_inputs}" if schema.min_inputs == len(schema.inputs)
            else f"{schema.min_inputs} to {len(schema.inputs)}")
        raise TypeError(f"Operator `{op}` takes {want} positional input(s), got {n}")
    bs = None if batch_size is None else _check_batch_size(op, batch_size)
    ins: list = []
    for i, x in enumerate(inputs):
        if x is None:
            if i < schema.min_inputs or i >= len(schema.inputs):
                name = schema.inputs[i] if i < len(schema.inputs) else f"input_{i}"
                raise TypeError(f"Operator `{op}`: input '{name}' is required, got None")
        elif not isinstance(x, (Tensor, Batch)):
            x = _as_input(op, x)
        if isinstance(x, Batch):
            if bs is None:
                bs = x._bs
            elif bs != x._bs:
                raise ValueError(f"Inconsistent batch size: {bs} != {x._bs}")
        ins.append(x)

    args = KernelArgs(schema.defaults)
    batch_args: dict[str, tuple[Arg, Batch]] | None = None
    spec_args = schema.args
    for name, v in kwargs.items():
        spec = spec_args.get(name)
        if spec is None:
            raise TypeError(f"Operator `{op}` got an unexpected keyword argument '{name}'")
        if v is None:
            continue
        if isinstance(v, Batch):
            if not spec.per_sample:
                raise TypeError(
                    f"Operator `{op}`: argument '{name}' does not accept per-sample values (a Batch)"
                )
            if bs is None:
                bs = v._bs
            elif bs != v._bs:
                raise ValueError(f"Inconsistent batch size: {bs} != {v._bs}")
            if batch_args is None:
                batch_args = {}
            batch_args[name] = (spec, v)
        else:
            if isinstance(v, Tensor) and v._meta_extra == "random" and (bs is not None or any(
                    isinstance(x, Batch) for x in ins)):
                warnings.warn(
                    f"Operator `{op}`: argument '{name}' is a single random value shared by every "
                    "sample; pass batch_size= to the random operator to draw one value per sample.",
                    UserWarning, stacklevel=3,
                )
            args[name] = convert_arg(op, name, spec, v)
    for name, spec in spec_args.items():
        if spec.required and args[name] is None and (batch_args is None or name not in batch_args):
            raise TypeError(f"Operator `{op}` is missing the required argument '{name}'")
    args.batch_args = {k: b for k, (_, b) in batch_args.items()} if batch_args else {}
    if schema.validate is not None:
        schema.validate(args)

    is_batch = bs is not None
    dev, kernel = _pick_kernel(schema, ins if schema.device_inputs is None else ins[:schema.device_inputs], device)
    if dev.device_type != "cpu":  # a clear error when the device is unusable here (not in Plans:
        _plugins.device_backend(dev.device_type)  # a capture worker must not initialise CUDA)
    if schema.random:
        if rng is None:
            from .random._rng import get_default_rng

            rng = get_default_rng()
        else:
            from .random._rng import RNG

            if not isinstance(rng, RNG):
                raise ValueError(
                    f"Operator `{op}`: rng must be an ndd.random.RNG, got {type(rng).__name__}"
                )
        state = rng.draw_words(7)
    else:
        state = None

    in_metas = [OutMeta(x._dtype, x._ndim, x._layout) if x is not None else None for x in ins]
    args.inputs = ins
    out_metas = schema.infer(in_metas, args)
    ctx = EvalContext.current()
    n_out = bs if is_batch else 1
    args.batch_size = n_out
    kc = KernelContext(op, n_out, is_batch, dev, ctx, state,
                       [m.layout if m is not None else None for m in in_metas], out_metas)

    def run() -> list:
        bds = []
        for x in ins:
            if x is None:
                bds.append(None)
            elif isinstance(x, Batch) or not is_batch:
                bds.append(x._batch_data())
            else:  # a Tensor broadcast to the batch
                bds.append(BatchData(samples=[x._array()] * n_out))
        if batch_args:
            for name, (spec, b) in batch_args.items():
                bd = b.cpu()._batch_data() if b._device.device_type != "cpu" else b._batch_data()
                args[name] = _per_sample(op, name, spec, bd)
        return _outputs(_running(kernel, kc, bds, args))

    mode = EvalMode.current()
    inv = Invocation(run, mode, ctx)
    if mode.value >= _SYNC or schema.side_effects or any(x is not None and x._ext for x in ins):
        inv.mode = EvalMode.sync_cpu
        inv.run()
        if inv.error is not None:
            err = inv.error
            raise err.with_traceback(err.__traceback__)
        if mode is EvalMode.sync_full and dev.device_type == "gpu":
            _convert.gpu_backend().synchronize(ctx)
    else:
        inv.remember_caller(caller_frame(2))
        if mode is EvalMode.eager:
            ctx.submit(inv)
    if is_batch:
        outs = [Batch._wrap(None, m.dtype, m.layout, dev, m.ndim, bs, inv=inv, idx=i)
                for i, m in enumerate(out_metas)]
    else:
        outs = [Tensor._wrap(None, m.dtype, m.layout, dev, m.ndim, inv=inv, idx=i)
                for i, m in enumerate(out_metas)]
        if schema.random:
            for t in outs:
                t._meta_extra = "random"
    return outs[0] if len(outs) == 1 else tuple(outs)


class Plan:
    """An operator call prepared once and run many times (ours; capture mode's pipeline).

    The constant arguments are checked and converted once and the kernel is chosen
    once; each :meth:`run` only takes this step's input batches, per-sample argument
    batches and random state, and calls the kernel directly (no EvalMode, no lazy
    results).
    """

    __slots__ = ("schema", "kernel", "device", "args", "specs", "out_meta", "batch_size", "layouts",
                 "context")

    def __init__(self, schema: OpSchema, const_kwargs: dict, batch_arg_names: Sequence[str],
                 input_layouts: list, out_meta: list[OutMeta], batch_size: int, device: Device,
                 context: EvalContext) -> None:
        op = schema.name
        args = KernelArgs(schema.defaults)
        for name, v in const_kwargs.items():
            spec = schema.args.get(name)
            if spec is None:
                raise TypeError(f"Operator `{op}` got an unexpected keyword argument '{name}'")
            args[name] = convert_arg(op, name, spec, v)
        args.batch_args = dict.fromkeys(batch_arg_names)  # (validate sees which are given per sample)
        if schema.validate is not None:
            schema.validate(args)
        _, self.kernel = _pick_kernel(schema, [], device)
        self.schema = schema
        self.device = device
        self.args = args
        self.specs = {name: schema.args[name] for name in batch_arg_names}
        self.out_meta = out_meta
        self.batch_size = batch_size
        self.layouts = input_layouts
        self.context = context

    def __reduce__(self) -> tuple:
        # Sent to capture worker processes by name: the schema (with its functions) is
        # looked up again there, and the converted constants travel as they are.
        return (_rebuild_plan, (self.schema.name, dict(self.args), list(self.specs), self.layouts,
                                self.out_meta, self.batch_size, self.device))

    @property
    def staged(self) -> bool:
        """True when the kernel splits into a host stage and a device stage (see :meth:`run`)."""
        return getattr(self.kernel, "host_stage", None) is not None

    @property
    def graphable(self) -> bool:
        """True when this call can be part of a device graph (ours; see :meth:`graph_host`)."""
        return getattr(self.kernel, "graph_stages", None) is not None or (
            getattr(self.kernel, "graph_pure", False) and not self.specs)

    def _context(self, batch_args: dict[str, BatchData], random_state: np.ndarray | None
                 ) -> tuple[KernelContext, KernelArgs]:
        args = KernelArgs(self.args)
        args.batch_size = self.batch_size
        args.batch_args = {}
        for name, bd in batch_args.items():
            args[name] = _per_sample(self.schema.name, name, self.specs[name], bd)
        kc = KernelContext(self.schema.name, self.batch_size, True, self.device, self.context, random_state,
                           self.layouts, self.out_meta)
        return kc, args

    def graph_host(self, inputs: list[BatchData | None], batch_args: dict[str, BatchData],
                   random_state: np.ndarray | None = None) -> tuple[list[np.ndarray], Any]:
        """The host half of a graphed call (ours): ``(arrays, signature)``.

        A device graph (a CUDA graph) replays fixed kernels with fixed arguments; what
        changes per step may only enter through host arrays copied into its input
        buffers. A graphable kernel says how: ``kernel.graph_stages = (host, device)``
        where ``host(ctx, inputs, args)`` returns the arrays to upload and a signature
        (hashable: every host value the kernels' launches depend on besides the arrays'
        contents, e.g. output sizes), and ``device(ctx, inputs, uploaded, args)`` the
        outputs from the uploaded arrays (device tensors) without reading any device
        value or per-step host value. ``kernel.graph_pure = True`` marks a kernel whose
        launches depend only on its input shapes and constant arguments (graphable when
        the call has no per-sample argument batches). A replay is valid only while every
        call's signature and array shapes equal those of the captured step. Device inputs
        may be stale data of the right shapes here: a host stage reads only their shapes.
        For a staged kernel (:meth:`run`) the graph stages split its device stage.
        """
        stages = getattr(self.kernel, "graph_stages", None)
        if stages is None:
            return [], tuple(None if bd is None else bd.shapes() for bd in inputs)
        kc, args = self._context(batch_args, random_state)
        arrays, sig = stages[0](kc, inputs, args)
        return list(arrays), sig

    def graph_device(self, inputs: list[BatchData | None], batch_args: dict[str, BatchData],
                     uploaded: list[Any], random_state: np.ndarray | None = None,
                     stage: str | None = None) -> list[BatchData]:
        """The device half of a graphed call (see :meth:`graph_host`)."""
        kc, args = self._context(batch_args, random_state)
        stages = getattr(self.kernel, "graph_stages", None)
        if stages is None:
            fn = self.kernel if stage is None else self.kernel.device_stage
            return _outputs(_running(fn, kc, inputs, args))
        return _outputs(_running(stages[1], kc, inputs, uploaded, args))

    def run(self, inputs: list[BatchData | None], batch_args: dict[str, BatchData],
            random_state: np.ndarray | None = None, stage: str | None = None) -> list[BatchData]:
        """Run the kernel on this step's data.

        ``stage`` runs half of a staged kernel (ours): a device kernel may carry two
        attributes, ``host_stage(ctx, inputs, args) -> list[BatchData]``, the part that
        needs no device (it returns host data only, so a capture worker process can run
        it), and ``device_stage(ctx, staged, args)``, the rest, given what ``host_stage``
        returned. ``kernel(ctx, inputs, args)`` must equal the two run in turn.
        ``stage="host"`` returns the staged data; ``stage="device"`` takes it as ``inputs``.
        """
        kc, args = self._context(batch_args, random_state)
        if stage == "host":
            return list(_running(self.kernel.host_stage, kc, inputs, args))
        fn = self.kernel if stage is None else self.kernel.device_stage
        return _outputs(_running(fn, kc, inputs, args))


def _rebuild_plan(name: str, args: dict, batch_arg_names: list, layouts: list, out_meta: list,
                  batch_size: int, device: Device) -> Plan:
    _plugins.ensure_loaded()
    schema = _plugins.schemas[name]
    plan = Plan.__new__(Plan)
    plan.schema = schema
    _, plan.kernel = _pick_kernel(schema, [], device)
    plan.device = device
    plan.args = KernelArgs(args)
    plan.specs = {n: schema.args[n] for n in batch_arg_names}
    plan.out_meta = out_meta
    plan.batch_size = batch_size
    plan.layouts = layouts
    plan.context = EvalContext.current()
    return plan
