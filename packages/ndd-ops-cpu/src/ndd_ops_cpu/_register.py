"""Entry point of the CPU kernels (group ``ndd.ops``)."""

from __future__ import annotations

from ndd.plugins import Registry


def register(reg: Registry) -> None:
    """Attach this package's CPU kernels to the operators core declares."""
