"""Schemas of the operators that DALI 2.4 runs only on the GPU: ``jitter``,
``experimental.median_blur``, ``experimental.dilate``, ``experimental.erode``,
``experimental.remap`` and ``experimental.resize`` (kernels in ndd-ops-cuda only; a call
on CPU data without ``device="gpu"`` says that the operator runs only on the GPU).

The per-sample checks of the window arguments live here too, so that every kernel reads
them alike. Windows and anchors are given as (width, height), as DALI (CV-CUDA) takes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtype
from ._schema import FLOAT, INT, INTERP_TYPE, INTS, STR, Arg, OpSchema, OutMeta
from ._schemas_image import RESIZE
from .types import DALIInterpType

_PKG = "ndd-ops-cuda"
# The layouts of the window filters (median blur, morphology): images and sequences of them.
FILTER_LAYOUTS = ("HW", "HWC", "FHWC", "CHW", "FCHW")
_GUESS = {2: "HW", 3: "HWC", 4: "FHWC"}
# Input types of the CV-CUDA filters (median blur, morphology) and of remap (NPP).
MEDIAN_DTYPES = (_dtype.uint8, _dtype.uint16, _dtype.int16, _dtype.int32, _dtype.float32)
MORPH_DTYPES = (_dtype.uint8, _dtype.uint16, _dtype.float32)
REMAP_DTYPES = (_dtype.uint8, _dtype.int16, _dtype.uint16, _dtype.float32)
BORDER_MODES = ("constant", "replicate", "reflect", "reflect_101", "wrap")


def _err(op: str, name: str, msg: str) -> ValueError:
    return ValueError(f"Operator `{op}`: argument '{name}' {msg}")


def filter_layout(op: str, layout: str | None, ndim: int) -> str:
    """The layout of a window filter's input: its own, or guessed from ``ndim``; checked."""
    lay = layout or _GUESS.get(ndim)
    if lay not in FILTER_LAYOUTS:
        raise ValueError(f"Operator `{op}`: expects an input with layout {', '.join(FILTER_LAYOUTS)}, "
                         f"got {lay!r} ({ndim}-D)")
    return lay


def _check_dtype(op: str, m: OutMeta, allowed: Sequence[_dtype.DType]) -> None:
    if m.dtype not in allowed:
        raise TypeError(f"Operator `{op}`: input type {m.dtype} is not supported; "
                        f"expected one of {', '.join(str(d) for d in allowed)}")


def window(op: str, name: str, value: Any, sample: int | None = None, odd: bool = False) -> tuple[int, int]:
    """A window size (width, height) from one value or two, checked (positive; odd when asked)."""
    v = [int(x) for x in np.asarray(value).ravel()]
    where = "" if sample is None else f" (sample {sample})"
    if len(v) == 1:
        v = v * 2
    if len(v) != 2 or min(v) < 1 or (odd and not all(x % 2 for x in v)):
        kind = "two positive odd" if odd else "two positive"
        raise _err(op, name, f"takes {kind} sizes (width, height), got {list(v)}{where}")
    return v[0], v[1]


def anchor(op: str, value: Any, size: tuple[int, int], sample: int | None = None) -> tuple[int, int]:
    """The anchor (x, y) inside a window of ``size`` (width, height); -1 means its centre."""
    v = [int(x) for x in np.asarray(value).ravel()]
    where = "" if sample is None else f" (sample {sample})"
    if len(v) == 1:
        v = v * 2
    if len(v) != 2 or not all(-1 <= a < s for a, s in zip(v, size)):
        raise _err(op, "anchor", f"must be (x, y) inside the mask of size {list(size)}, or -1 for its "
                                 f"centre; got {list(v)}{where}")
    return tuple(s // 2 if a == -1 else a for a, s in zip(v, size))  # type: ignore[return-value]


# -- jitter ------------------------------------------------------------------------------------


def _jitter_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "jitter"
    m = inputs[0]
    if (m.layout or ("HWC" if m.ndim == 3 else None)) != "HWC":
        raise ValueError(f"Operator `{op}`: expects an HWC image, got layout {m.layout!r} ({m.ndim}-D)")
    _check_dtype(op, m, (_dtype.uint8, _dtype.float32))
    return [OutMeta(m.dtype, 3, "HWC")]


def _jitter_validate(args: dict) -> None:
    op = "jitter"
    if args["nDegree"] < 0:
        raise _err(op, "nDegree", f"must be >= 0, got {args['nDegree']}")
    if args["interp_type"] not in (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR):
        raise _err(op, "interp_type", f"must be INTERP_NN or INTERP_LINEAR; got {args['interp_type'].name}")


JITTER = OpSchema(
    "jitter", random=True,
    args={
        "nDegree": Arg(INT, 2, doc="each pixel comes from one up to nDegree/2 pixels away in x and in y"),
        "fill_value": Arg(FLOAT, 0.0, doc="accepted as DALI does; unused, the source stays inside the image"),
        "interp_type": Arg(INTERP_TYPE, DALIInterpType.INTERP_NN,
                           doc="INTERP_NN or INTERP_LINEAR (the same: the offsets are whole pixels)"),
        "mask": Arg(INT, 1, per_sample=True, doc="0: copy the sample unchanged, 1: jitter it"),
    },
    infer=_jitter_infer, validate=_jitter_validate, provided_by=_PKG,
    doc="Move each pixel by a random whole number of pixels in [-nDegree/2, nDegree/2] along x and y "
        "(clamped to the image). GPU only.",
)


# -- median blur and morphology -------------------------------------------------------------------


def _filter_infer(op: str, dtypes: Sequence[_dtype.DType]):
    def infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
        m = inputs[0]
        lay = filter_layout(op, m.layout, m.ndim)
        _check_dtype(op, m, dtypes)
        return [OutMeta(m.dtype, m.ndim, lay)]
    return infer


def _median_validate(args: dict) -> None:
    if args["window_size"] is not None:
        window("experimental.median_blur", "window_size", args["window_size"], odd=True)


MEDIAN_BLUR = OpSchema(
    "experimental.median_blur",
    args={"window_size": Arg(INTS, (3, 3), per_sample=True,
                             doc="window (width, height), odd sizes; one value: a square")},
    infer=_filter_infer("experimental.median_blur", MEDIAN_DTYPES), validate=_median_validate, provided_by=_PKG,
    doc="Each pixel (each channel) replaced by the median of the window around it; the border "
        "replicates the edge pixels. GPU only.",
)


def _morph_validate(op: str):
    def validate(args: dict) -> None:
        size = None
        if args["mask_size"] is not None:
            size = window(op, "mask_size", args["mask_size"])
        if size is not None and args["anchor"] is not None:
            anchor(op, args["anchor"], size)
        if args["iterations"] < 0:
            raise _err(op, "iterations", f"must be >= 0, got {args['iterations']}")
    return validate


def _morph_schema(op: str, what: str) -> OpSchema:
    return OpSchema(
        op,
        args={
            "mask_size": Arg(INTS, (3, 3), per_sample=True, doc="structuring element (width, height), all ones"),
            "anchor": Arg(INTS, (-1, -1), per_sample=True, doc="anchor (x, y) in the element; -1: its centre"),
            "iterations": Arg(INT, 1, doc="how many times the operation is applied (0: a copy)"),
            "border_mode": Arg(STR, "constant", choices=BORDER_MODES,
                               doc="pixels outside the image: constant (they do not count), replicate, "
                                   "reflect, reflect_101 or wrap"),
        },
        infer=_filter_infer(op, MORPH_DTYPES), validate=_morph_validate(op), provided_by=_PKG,
        doc=f"Morphological {what}: each pixel (each channel) replaced by the "
            f"{'maximum' if what == 'dilation' else 'minimum'} over the structuring element. GPU only. "
            "As DALI's (CV-CUDA's) float32 kernel, a dilation starts from the smallest positive float "
            "(negative results become 1.2e-38) and an erosion from the largest finite one.",
    )


DILATE = _morph_schema("experimental.dilate", "dilation")
ERODE = _morph_schema("experimental.erode", "erosion")


# -- remap ------------------------------------------------------------------------------------------


def _remap_infer(inputs: Sequence[OutMeta], args: dict) -> list[OutMeta]:
    op = "experimental.remap"
    m = inputs[0]
    lay = m.layout or {3: "HWC", 4: "FHWC"}.get(m.ndim)
    if lay not in ("HWC", "FHWC"):
        raise ValueError(f"Operator `{op}`: expects an HWC image or an FHWC sequence, got layout {lay!r} ({m.ndim}-D)")
    _check_dtype(op, m, REMAP_DTYPES)
    for name, mm in zip(("mapx", "mapy"), inputs[1:]):
        if mm.dtype != _dtype.float32:
            raise TypeError(f"Operator `{op}`: input '{name}' must be float32, got {mm.dtype}")
    return [OutMeta(m.dtype, m.ndim, lay)]


def _remap_validate(args: dict) -> None:
    if args["interp"] not in (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR):
        raise _err("experimental.remap", "interp", f"must be INTERP_NN or INTERP_LINEAR; got {args['interp'].name}")


REMAP = OpSchema(
    "experimental.remap", inputs=("input", "mapx", "mapy"),
    args={
        "interp": Arg(INTERP_TYPE, DALIInterpType.INTERP_LINEAR, doc="INTERP_NN or INTERP_LINEAR"),
        "pixel_origin": Arg(STR, "corner", choices=("corner", "center"),
                            doc="whether a map coordinate x names the corner of pixel x (corner) or "
                                "its centre (center, as OpenCV's remap)"),
    },
    infer=_remap_infer, validate=_remap_validate, provided_by=_PKG,
    doc="output(y, x) = input(mapy(y, x), mapx(y, x)), interpolated; pixels outside the input are 0. GPU only.",
)


# -- experimental.resize: resize's arguments and kernel, on the GPU only -------------------------------

EXPERIMENTAL_RESIZE = dataclasses.replace(
    RESIZE, name="experimental.resize", provided_by=_PKG, kernels={}, kernel_sources={}, conflicts={},
    doc="`resize` (the same arguments and results), GPU only.",
)

GPU_ONLY_SCHEMAS = (JITTER, MEDIAN_BLUR, DILATE, ERODE, REMAP, EXPERIMENTAL_RESIZE)
