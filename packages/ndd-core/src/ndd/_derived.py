"""Operators DALI has that are another ndd operator with a subset of its arguments:
``brightness`` and ``contrast`` (of ``brightness_contrast``), ``hue`` and ``saturation``
(of ``color_twist``).

They call that operator, so its kernels on every device, capture mode and error messages
(which name it) apply unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _ops

_COMMON = ("device", "batch_size")


def _subset(name: str, parent: str, args: tuple[str, ...], doc: str) -> Callable:
    allowed = frozenset(args + _COMMON)

    def fn(input: Any, /, **kwargs: Any) -> Any:  # noqa: A002 - DALI's input name
        for k in kwargs:
            if k not in allowed:
                raise TypeError(f"Operator `{name}` got an unexpected keyword argument '{k}'")
        return _ops.resolve("", parent)(input, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "ndd"
    fn.__doc__ = f"{doc}\n\n``{parent}`` with only the arguments {', '.join(args)}."
    return fn


brightness = _subset("brightness", "brightness_contrast", ("brightness", "brightness_shift", "dtype"),
                     "Scale the values and shift them by a fraction of the output range.")
contrast = _subset("contrast", "brightness_contrast", ("contrast", "contrast_center", "dtype"),
                   "Scale the distance of the values from contrast_center.")
hue = _subset("hue", "color_twist", ("hue", "image_type", "dtype"), "Rotate the hue of RGB images (degrees).")
saturation = _subset("saturation", "color_twist", ("saturation", "image_type", "dtype"),
                     "Scale the saturation of RGB images.")
