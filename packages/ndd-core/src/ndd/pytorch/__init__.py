"""PyTorch integration (package ndd-core; imports torch and torchdata only when used).

``ndd.pytorch.nodes`` holds ``torchdata.nodes`` nodes built on ndd readers, as in DALI
dynamic mode; it needs ``torchdata`` (``pip install ndd-core[torchdata]``).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["nodes"]


def __getattr__(name: str) -> Any:
    if name == "nodes":
        if importlib.util.find_spec("torchdata") is None:
            # an AttributeError, as in DALI without torchdata, so that hasattr() says False
            raise AttributeError("ndd.pytorch.nodes needs torchdata: pip install torchdata")
        return importlib.import_module(f"{__name__}.nodes")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
