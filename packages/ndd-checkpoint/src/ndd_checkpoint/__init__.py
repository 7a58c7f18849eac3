"""ndd-checkpoint, published as ``ndd.checkpoint``: exact resume of readers and RNGs.

``Checkpoint`` aggregates the states of registered readers and RNGs (DALI's API and
errors); ``current()`` is the checkpoint of the current ``ndd.EvalContext``. Beyond
DALI it works in capture mode, restores into readers that are already iterating, and
saves files atomically with clear errors for corrupted ones (see ``_checkpoint``).
"""

from ._checkpoint import Checkpoint, current

__all__ = ["Checkpoint", "current"]
