"""Random numbers: the Philox ``RNG``, per-thread default generators and random operators."""

from __future__ import annotations

from .. import _ops
from ._rng import RNG, RNGState, get_default_rng, set_seed

__all__ = ["RNG", "RNGState", "get_default_rng", "set_seed"]

__getattr__ = _ops.module_getattr("random")
