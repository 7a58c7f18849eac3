"""The ``bench_loops.py`` table plus DALI dynamic mode columns (``nox -s bench_dali``).

Runs the identical loop functions of ``bench_loops.py`` against
``nvidia.dali.experimental.dynamic`` (imported as ``ndd`` inside the DALI worker
processes only; ``nvidia.dali.types`` as ``types``), adding ``DALI eager`` and ``DALI
capture`` columns next to ndd eager, ndd capture and the PyTorch DataLoader. DALI's
Caffe2 reader reads the same LMDB and its File reader the same tree; images are decoded
on the CPU. Needs ``nvidia-dali-cuda120==2.4.0`` (it runs on a CPU-only machine). Writes
``bench-results/bench_dali.json`` and ``bench_dali.png``. ``--help`` lists the options.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_loops import BASE_COLUMNS, DALI_COLUMNS, main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(columns=BASE_COLUMNS + DALI_COLUMNS, name="bench_dali"))
