"""Schemas of the per-pixel operators ``color_space_conversion``, ``lookup_table`` and
``erase`` (kernels in ndd-ops-cpu and ndd-ops-cuda; shared argument handling in
``_pixel_args``).

Argument names and defaults follow DALI 2.4. Where DALI's behaviour depends on whether
an argument was given at all (``erase``'s ``axes`` / ``axis_names`` and ``normalized*``,
``lookup_table``'s deprecated ``output_dtype``) the default here is None and the doc
string says what "not set" does.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._pixel_args import ERASE_DTYPES, LUT_MAX_KEY, check_erase_counts, color_conversion, erase_axes
from ._schema import BOOL, DTYPE, FLOAT, FLOATS, IMAGE_TYPE, INTS, STR, Arg, OpSchema, OutMeta

_PKG = "ndd-ops-cpu"



# -- color_space_conversion -------------------------------------------------------------

_CSC_LAYOUTS = ("HWC", "FHWC", "DHWC", "FDHWC")
_CSC_GUESS = {3: "HWC", 4: "FHWC", 5: "FDHWC"}


def _csc_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "color_space_conversion"
    m = inputs[0]
    if m.dtype != _dtype.uint8:
        raise ValueError(f"Operator `{op}`: expects uint8 images (as DALI), got {m.dtype}")
    lay = m.layout or _CSC_GUESS.get(m.ndim)
    if lay is None:
        raise ValueError(f"Operator `{op}`: expects channel-last images ({', '.join(_CSC_LAYOUTS)}), got a "
                         f"{m.ndim}-D input without a layout")
    if lay not in _CSC_LAYOUTS:
        raise ValueError(f"Operator `{op}`: expects the layout {', '.join(_CSC_LAYOUTS)}, got {lay!r}")
    return [OutMeta(m.dtype, m.ndim, lay)]


def _csc_validate(args: dict) -> None:
    color_conversion("color_space_conversion", args["image_type"], args["output_type"])


COLOR_SPACE_CONVERSION = OpSchema(
    "color_space_conversion",
    args={
        "image_type": Arg(IMAGE_TYPE, required=True, doc="colour space of the input: RGB, BGR, GRAY or YCbCr"),
        "output_type": Arg(IMAGE_TYPE, required=True, doc="colour space of the output: RGB, BGR, GRAY or YCbCr"),
    },
    infer=_csc_infer, validate=_csc_validate, provided_by=_PKG,
    doc="Convert uint8 images between RGB, BGR, GRAY and YCbCr (ITU-R BT.601, Y in 16..235), "
        "with DALI 2.4's rounding; GRAY has one channel, the others three.",
)

# -- lookup_table -----------------------------------------------------------------------

_LUT_OUT = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                                       np.int64, np.float16, np.float32, np.float64, np.bool_))


def _lut_dtype(args: dict) -> _dtype.DType:
    return args["dtype"] or args["output_dtype"] or _dtype.float32


def _lut_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    m = inputs[0]
    dt = _dtype.numpy_or_none(m.dtype)
    if dt is None or dt.kind not in "iu":
        raise ValueError(f"Operator `lookup_table`: expects an integer input, got {m.dtype}")
    return [OutMeta(_lut_dtype(args), m.ndim, m.layout)]


def _lut_validate(args: dict) -> None:
    op = "lookup_table"
    keys, values = args["keys"], args["values"]
    if len(keys) != len(values):
        raise ValueError(f"Operator `{op}`: arguments 'keys' and 'values' must have the same length, "
                         f"got {len(keys)} and {len(values)}")
    bad = [k for k in keys if not 0 <= k <= LUT_MAX_KEY]
    if bad:
        raise ValueError(f"Operator `{op}`: argument 'keys' must be in [0, {LUT_MAX_KEY}], got {bad[0]}")
    if args["output_dtype"] is not None:
        if args["dtype"] is not None:
            raise TypeError(f"Operator `{op}`: got both 'dtype' and its deprecated alias 'output_dtype'")
        warnings.warn(f"Operator `{op}`: argument 'output_dtype' is a deprecated alias for 'dtype'",
                      DeprecationWarning, stacklevel=5)
    name = "dtype" if args["dtype"] is not None else "output_dtype"
    out = _lut_dtype(args)
    npd = _dtype.numpy_or_none(out)
    if npd is None or npd not in _LUT_OUT:  # (np.dtype(None) is float64: test None first)
        raise ValueError(f"Operator `{op}`: argument '{name}' must be a numeric type or bool, got {out}")


LOOKUP_TABLE = OpSchema(
    "lookup_table",
    args={
        "keys": Arg(INTS, (), doc="input values mapped by the table, in [0, 65535]"),
        "values": Arg(FLOATS, (), doc="the output value of each key (a repeated key takes its last value)"),
        "default_value": Arg(FLOAT, 0.0, doc="output of every other input value (negative, or no key)"),
        "dtype": Arg(DTYPE, None, doc="output type (not set: float32); values rounded and saturated"),
        "output_dtype": Arg(DTYPE, None, doc="deprecated alias of dtype"),
    },
    infer=_lut_infer, validate=_lut_validate, provided_by=_PKG,
    doc="Map integer inputs through the table given by keys and values; other inputs take default_value.",
)

# -- erase ------------------------------------------------------------------------------


def _erase_infer(inputs: Sequence[OutMeta], args: Any) -> list[OutMeta]:
    op = "erase"
    m = inputs[0]
    npd = _dtype.numpy_or_none(m.dtype)
    if npd is None or npd not in ERASE_DTYPES:
        raise ValueError(f"Operator `{op}`: does not support input type {m.dtype} (as DALI: "
                         "integers, float16 and float32)")
    axes = erase_axes(op, args, m.layout, m.ndim)
    given = {k: args[k] for k in ("anchor", "shape") if k not in args.batch_args}
    if len(given) == 2:  # both constants: their counts are known now
        check_erase_counts(op, len(given["anchor"] or ()), len(given["shape"] or ()), axes)
    return [m]


def _erase_validate(args: dict) -> None:
    if args["normalized"] is not None and (args["normalized_anchor"] is not None
                                           or args["normalized_shape"] is not None):
        raise ValueError("Operator `erase`: argument 'normalized' cannot be combined with "
                         "'normalized_anchor' or 'normalized_shape'")


ERASE = OpSchema(
    "erase",
    args={
        "anchor": Arg(FLOATS, None, per_sample=True,
                      doc="start of each region, one value per axis, region after region (not set: none)"),
        "shape": Arg(FLOATS, None, per_sample=True, doc="extent of each region, laid out as anchor"),
        "axes": Arg(INTS, None, doc="the axes anchor and shape give, as indices (used when axis_names is not set)"),
        "axis_names": Arg(STR, None, doc="the axes anchor and shape give, as layout names "
                                         "(neither set: every axis of the layout but C)"),
        "centered_anchor": Arg(BOOL, False, doc="the anchor is the centre of the region"),
        "fill_value": Arg(FLOATS, (0.0,), per_sample=True,
                          doc="value of the erased elements: one, or one per channel (layout with C)"),
        "normalized": Arg(BOOL, None, doc="anchor and shape are fractions of the axis sizes (not set: False)"),
        "normalized_anchor": Arg(BOOL, None, doc="anchor is a fraction of the axis sizes (not set: False)"),
        "normalized_shape": Arg(BOOL, None, doc="shape is a fraction of the axis sizes (not set: False)"),
    },
    infer=_erase_infer, validate=_erase_validate, provided_by=_PKG,
    doc="Set regions given by anchor and shape (clipped to the input) to fill_value.",
)

PIXEL_SCHEMAS = (COLOR_SPACE_CONVERSION, LOOKUP_TABLE, ERASE)
