"""ndd: a data-loading and preprocessing library in the shape of DALI dynamic mode.

``import ndd`` gives the core (Tensor, Batch, dtypes, devices, EvalMode, RNG);
operators and readers arrive from plugins through entry points and appear as
``ndd.<op>``, ``ndd.<module>.<op>`` and ``ndd.readers.<Reader>``.
"""

import sys as _sys
from typing import Any as _Any

from . import _arith, _ops, _plugins, plugins, types
from ._batch import Batch
from ._construct import as_batch, as_tensor, batch, tensor
from ._derived import brightness, contrast, hue, saturation
from ._device import Device, device
from ._dispatch import OperatorError
from ._dtype import (
    DataType,
    DType,
    ImageType,
    InterpType,
    bfloat16,
    bool,
    dtype,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    type_id,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._eval import EvalContext, EvalMode
from ._external_source import ExternalSource
from ._imread import imread
from ._reader import Reader, ReaderState
from ._stream import (
    Stream,
    get_current_stream,
    get_default_stream,
    set_current_stream,
    set_default_stream,
    stream,
)
from ._tensor import Tensor
from ._threads import ThreadPool, get_num_threads, set_num_threads

__version__ = "0.1.0"

# Operator namespaces DALI has; plugins fill them.
for _name in ("decoders", "noise", "transforms", "reductions", "segmentation", "experimental", "io"):
    globals()[_name] = _ops.get_module(_name)
del _name

from . import math, pytorch, random, readers  # noqa: E402  (after the core names they use)

experimental.readers = readers.namespace("experimental")  # noqa: F821  (DALI's experimental readers)

_sys.meta_path.append(_ops.ExtensionFinder())
_sys.meta_path.insert(0, _ops.ExtensionSubmoduleFinder())


def __getattr__(name: str) -> _Any:
    if name.startswith("__"):
        raise AttributeError(name)
    fn = _ops.resolve("", name)
    if fn is not None:
        globals()[name] = fn
        return fn
    if name in _plugins.KNOWN_EXTENSIONS or _plugins.has_extension(name):
        mod = _plugins.extension(name)
        globals()[name] = mod
        return mod
    if name in _ops.submodules(""):
        return _ops.get_module(name)
    raise AttributeError(f"module 'ndd' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ops.module_names("")))
