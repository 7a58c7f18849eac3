"""Per-call overhead of a trivial operator (``cast`` of a 64-sample batch) per EvalMode.

Prints a table of µs per call: "submit" is the time for the call to return, "total"
includes reading the result, "overhead" is total minus the bare NumPy ``astype``. Run with ``nox -s bench_core``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import ndd

CHUNK = 8  # calls in flight at once; results are dropped after each chunk to keep memory flat


def bench(mode: ndd.EvalMode, batch: ndd.Batch, calls: int, repeats: int) -> tuple[float, float]:
    submit, total = [], []
    with mode:
        for _ in range(repeats):
            sub = 0.0
            t0 = time.perf_counter()
            for _ in range(calls // CHUNK):
                c0 = time.perf_counter()
                outs = [ndd.cast(batch, dtype=ndd.float32) for _ in range(CHUNK)]
                sub += time.perf_counter() - c0
                for o in outs:
                    o.evaluate()
            n = calls // CHUNK * CHUNK
            submit.append(sub / n * 1e6)
            total.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(submit), statistics.median(total)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    # An ndd-owned batch (not wrapping user memory, which would force synchronous runs).
    small = ndd.batch(rng.integers(0, 255, (64, 28, 28), dtype=np.uint8))
    tiny = ndd.batch(rng.integers(0, 255, (64, 4), dtype=np.uint8))
    ndd.cast(small, dtype=ndd.float32).evaluate()  # load plugins, start the executor
    print(f"cast of a 64-sample uint8 batch to float32, {a.calls} calls x {a.repeats} repeats (median)")
    print(f"{'batch':<16}{'mode':<11}{'submit µs':>10}{'total µs':>10}{'overhead µs':>13}")
    for name, b in (("64x4", tiny), ("64x28x28", small)):
        base = b._batch_data().dense
        n = a.calls // CHUNK * CHUNK
        t0 = time.perf_counter()
        for _ in range(n // CHUNK):
            outs = [base.astype(np.float32) for _ in range(CHUNK)]  # same allocation pattern
        kernel_us = (time.perf_counter() - t0) / n * 1e6
        del outs
        for mode in (ndd.EvalMode.deferred, ndd.EvalMode.eager, ndd.EvalMode.sync_cpu, ndd.EvalMode.sync_full):
            s, t = bench(mode, b, a.calls, a.repeats)
            print(f"{name:<16}{mode.name:<11}{s:>10.1f}{t:>10.1f}{t - kernel_us:>13.1f}")
        print(f"{name:<16}{'numpy':<11}{'':>10}{kernel_us:>10.1f}{0:>13.1f}")


if __name__ == "__main__":
    main()
