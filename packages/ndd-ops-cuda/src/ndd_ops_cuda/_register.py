"""Entry point of the CUDA kernels (group ``ndd.ops``); the kernels come with issue 8."""

from __future__ import annotations

from ndd.plugins import Registry


def register(reg: Registry) -> None:
    """Attach this package's GPU kernels (none yet)."""
