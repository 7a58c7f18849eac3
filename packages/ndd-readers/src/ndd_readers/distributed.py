"""``ndd.readers.shard_args()``: shard a reader by distributed rank in one line (ours).

DALI has no such helper: there you pass ``shard_id=rank, num_shards=world_size``
yourself. This one reads them from the running job::

    reader = ndd.readers.Caffe2(path="train_lmdb", pad_last_batch=True, stick_to_shard=True,
                                **ndd.readers.shard_args())

Every reader of ``ndd-readers`` accepts the two arguments (they share one base class).

Where the numbers come from, first match wins:

1. ``torch.distributed``, when it is imported and its default process group (or the
   ``group`` given) is initialised: ``get_rank(group)`` and ``get_world_size(group)``.
2. The ``RANK`` and ``WORLD_SIZE`` environment variables that ``torchrun`` (and most
   launchers built on it) set for every worker. This works *before*
   ``init_process_group``, so a reader can be built (and fail) before any collective.
3. Otherwise a single shard: ``{"shard_id": 0, "num_shards": 1}``.

torch is never imported by this module: a job that has not imported
``torch.distributed`` cannot have initialised it.

A world larger than the dataset is rejected by the reader's constructor with a
``ValueError`` (every shard needs at least one sample), on every rank, unless the reader
is built with ``lazy_init=True``, which defers it to the first use.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["shard_args", "rank_and_world_size"]


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def rank_and_world_size(group: Any = None) -> tuple[int, int]:
    """``(rank, world_size)`` of this process (see the module docstring for the sources)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank(group)), int(dist.get_world_size(group))
    if group is not None:
        raise ValueError("a process group was given but torch.distributed is not initialised")
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is None and world is None:
        return 0, 1
    if rank is None or world is None:
        missing = "RANK" if rank is None else "WORLD_SIZE"
        raise ValueError(f"{missing} is not set but {'WORLD_SIZE' if rank is None else 'RANK'} is; "
                         "set both (torchrun does) or neither")
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK={rank} and WORLD_SIZE={world} are inconsistent: need 0 <= RANK < WORLD_SIZE")
    return rank, world


def shard_args(group: Any = None) -> dict[str, int]:
    """``{"shard_id": rank, "num_shards": world_size}`` for a reader's constructor (ours).

    ``group``: a ``torch.distributed`` process group to shard over (default: the whole
    job). ValueError for an inconsistent ``RANK``/``WORLD_SIZE`` environment.
    """
    rank, world = rank_and_world_size(group)
    return {"shard_id": rank, "num_shards": world}
