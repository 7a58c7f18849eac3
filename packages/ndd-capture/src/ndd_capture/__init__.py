"""ndd-capture: capture mode for ndd, published as ``ndd.capture``.

``reader.next_epoch(batch_size=B, capture=True)`` traces the first step of the loop,
builds a pipeline from every call it can prove is the same on each step, and replays
it ahead of the loop on a worker thread. Results are identical to eager mode.

Public API: :func:`invariant` (DALI's), and ours: :func:`report` (what was captured
and why not), :class:`CaptureError` (strict mode: ``capture="strict"``).
"""

from __future__ import annotations

from ndd.plugins import get_op_call_hook, set_op_call_hook

from ._invariant import invariant, is_invariant, unwrap_invariant, unwrap_invariants
from ._loop import (
    CapturedBatch,
    CaptureError,
    _tls,
    default_worker_processes,
    external_source_epoch,
    feed,
    hook,
    reader_epoch,
    set_device_graphs,
    set_gpu_thread,
    set_graph_steps,
    set_prefetch_depth,
    set_worker_processes,
)
from ._report import RUNTIME_CODES, CaptureReport, DeviceGraphStats, Fallback, SiteRecord

__all__ = ["external_source_epoch", "feed", "reader_epoch", "CaptureError", "CaptureReport", "CapturedBatch", "default_worker_processes", "DeviceGraphStats", "Fallback", "SiteRecord", "invariant",
           "is_invariant", "report", "reason_codes", "set_device_graphs", "set_gpu_thread", "set_graph_steps", "set_prefetch_depth", "set_worker_processes", "unwrap_invariant", "unwrap_invariants"]


def report() -> CaptureReport | None:
    """The report of the most recent capture-mode loop on this thread (live while it runs)."""
    return getattr(_tls, "last_report", None)


def reason_codes() -> dict[str, tuple[str, str]]:
    """Every reason code: ``code -> (title, hint that fixes it)``."""
    from ._source_analysis import REASON_CODES

    return {**REASON_CODES, **RUNTIME_CODES}


if get_op_call_hook() is not hook:
    set_op_call_hook(hook)
