"""Entry point of the GPU kernels (group ``ndd.ops``).

The decoders come from ``_decode``; the other GPU kernels from the ``kernels`` package.
Nothing here imports torch: that happens when a kernel first runs.
"""

from __future__ import annotations

from ndd.plugins import Registry

from ._decode import KERNELS as DECODERS


def register(reg: Registry) -> None:
    """Attach the GPU decoders, then the other GPU kernels.

    An import error in ``kernels`` propagates, so ``ndd.plugins.report()`` lists it
    (the decoders stay registered).
    """
    for name, fn in DECODERS.items():
        reg.add_kernel(name, "gpu", fn)
    from .kernels import register as register_kernels

    register_kernels(reg)
