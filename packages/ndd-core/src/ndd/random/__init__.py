"""Random numbers: the Philox ``RNG``, per-thread default generators and random operators."""

from __future__ import annotations

from .. import _ops as _op_functions  # (ndd.random._ops is another module: the random operators)
from ._rng import RNG, RNGState, get_default_rng, set_seed

__all__ = ["RNG", "RNGState", "get_default_rng", "set_seed"]

__getattr__ = _op_functions.module_getattr("random")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_op_functions.module_names("random")))
