"""``CaptureReport``: what a capture-mode loop captured, and why not (ours; DALI is silent)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Reason codes of the capture runtime (the source-analysis codes live in _source_analysis).
RUNTIME_CODES: dict[str, tuple[str, str]] = {
    "NDD-C101": ("internal or side-effect operation",
                 "slicing (.slice[...], t[...]), arithmetic, ndd.math and operators with side effects "
                 "(dump_image) are never captured; move them after the last operator, or express "
                 "them with operators (e.g. ndd.crop); call dump_image on a side branch"),
    "NDD-C102": ("not a batch call",
                 "the call works on single samples; pass batch_size= (random ops) or batch inputs"),
    "NDD-C103": ("batch size differs from the loop's",
                 "give the operator the loop's batch size"),
    "NDD-C104": ("input is not a captured batch of this step",
                 "feed the operator the loop's outputs or other captured results of the same step, "
                 "not slices, arithmetic results, batches rebuilt from samples or batches kept from "
                 "an earlier step"),
    "NDD-C105": ("site already captured with other arguments",
                 "one call site maps to one node; call the operator at a separate line or pass the "
                 "same inputs on every call"),
    "NDD-C106": ("random call site repeats in one step",
                 "only the first call per step uses the pipeline; call the random operator once "
                 "with a larger batch or shape"),
    "NDD-C107": ("called outside the loop body",
                 "the call was made from code that the loop's frame does not reach"),
    "NDD-C201": ("site not seen during tracing",
                 "make every operator call of the loop body happen on the first step too"),
    "NDD-C202": ("stale or different input batch",
                 "pass the batch produced in this step by the call that was captured"),
    "NDD-C203": ("constant argument changed",
                 "the traced value is replayed; keep it the same or mark it with ndd.capture.invariant"),
    "NDD-C204": ("different inputs or keywords than traced",
                 "call the operator with the same inputs and keyword names on every step"),
}


@dataclass
class SiteRecord:
    """One call site of the loop body: where it is, whether it was captured and why not."""

    op: str
    filename: str
    lineno: int
    col: int
    captured: bool
    code: str | None = None
    reason: str | None = None
    replayed: int = 0
    eager: int = 0


@dataclass
class Fallback:
    """A replay mismatch: the call ran eagerly at ``step``."""

    site: SiteRecord
    step: int
    code: str
    reason: str


@dataclass
class DeviceGraphStats:
    """How the GPU part of a split capture pipeline ran, step by step (ours; live).

    ``replayed``: steps computed by replaying the device graph (the captured step too);
    ``kernel_by_kernel``: steps run kernel by kernel (the first, which sets the reference,
    steps unlike the captured one, and every step once the graph is dropped); ``unlike``:
    steps whose signature (shapes, output sizes) differed from the captured one;
    ``host_pass_in_workers``: steps whose host pass a worker process ran.
    """

    replayed: int = 0
    kernel_by_kernel: int = 0
    unlike: int = 0
    host_pass_in_workers: int = 0


@dataclass
class CaptureReport:
    """The report of one capture-mode loop (live while the loop runs)."""

    batch_size: int
    sites: list[SiteRecord] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    steps: int = 0
    traced: bool = False
    worker: str = ""  # how the pipeline runs: "threads" or "N process(es)" (and why not)
    device_graph: DeviceGraphStats | None = None  # set when the GPU part may run as a device graph
    # Steps whose data the pipeline did not have ready when the loop asked for them, and the
    # seconds the loop waited for them in all (ours): when the loop waits, the loader holds
    # the training back; when it never does, the training step is what bounds the loop.
    waits: int = 0
    waited_s: float = 0.0
    # Steps the pipeline could not compute (a captured call failed on their data), whose calls
    # ran as in eager mode instead (ours).
    eager_steps: int = 0

    def waited(self, seconds: float) -> None:
        """Count one step the loop waited ``seconds`` for (called by the pipeline)."""
        self.waits += 1
        self.waited_s += seconds

    def summary(self) -> str:
        n = len(self.sites)
        cap = sum(s.captured for s in self.sites)
        rep = sum(s.replayed for s in self.sites)
        eag = sum(s.eager for s in self.sites)
        g = self.device_graph
        return (f"capture: {cap}/{n} call sites captured; {rep} calls replayed, {eag} run eagerly, "
                f"{len(self.fallbacks)} fallbacks over {self.steps} steps"
                + (f"; pipeline on {self.worker}" if self.worker else "")
                + (f"; the loop waited for it on {self.waits} step{'' if self.waits == 1 else 's'} "
                   f"({self.waited_s:.2f} s)" if self.worker else "")
                + (f"; device graph: {g.replayed} steps replayed, {g.kernel_by_kernel} kernel by kernel"
                   if g is not None else "")
                + (f"; {self.eager_steps} step{'' if self.eager_steps == 1 else 's'} run eagerly after a "
                   "pipeline error" if self.eager_steps else ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "steps": self.steps,
            "worker": self.worker,
            "waits": self.waits,
            "waited_s": self.waited_s,
            "eager_steps": self.eager_steps,
            "device_graph": None if self.device_graph is None else asdict(self.device_graph),
            "summary": self.summary(),
            "sites": [asdict(s) for s in self.sites],
            "fallbacks": [{"site": f"{f.site.op} at {f.site.filename}:{f.site.lineno}", "step": f.step,
                           "code": f.code, "reason": f.reason} for f in self.fallbacks],
        }

    def __str__(self) -> str:
        rows = [("op", "where", "captured", "replayed", "eager", "reason")]
        for s in self.sites:
            where = f"{_short(s.filename)}:{s.lineno}:{s.col}"
            why = f"{s.code}: {s.reason}" if s.code else ""
            rows.append((s.op, where, "yes" if s.captured else "no", str(s.replayed), str(s.eager), why))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = [self.summary()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in rows]
        for f in self.fallbacks[:20]:
            lines.append(f"fallback at step {f.step}: {f.site.op} ({_short(f.site.filename)}:"
                         f"{f.site.lineno}) {f.code}: {f.reason}")
        if len(self.fallbacks) > 20:
            lines.append(f"... {len(self.fallbacks) - 20} more fallbacks")
        return "\n".join(lines)


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])
