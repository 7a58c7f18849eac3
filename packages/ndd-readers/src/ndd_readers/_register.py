"""Entry point of the readers (group ``ndd.readers``)."""

from __future__ import annotations

from ndd.plugins import Registry


def register(reg: Registry) -> None:
    """Publish this package's reader classes under ``ndd.readers``."""
