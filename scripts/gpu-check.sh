#!/usr/bin/env bash
# GPU check: install ndd from this tree without a network, run every GPU test and the GPU
# benchmark, print one table. Meant for the lent GPU machine (Python 3.12, torch with CUDA,
# torchvision, numpy, opencv, pillow, pytest preinstalled in /opt/torch/.venv); under 8 minutes.
#
#   bash scripts/gpu-check.sh [--quick] [other bench_gpu.py options]
#   nox -s gpu -- [same]
#   bash scripts/gpu-check.sh --criterion --epochs 10 --repeat 3   # only the tutorial loop's
#       device-graph rows and the ceiling, timed over epochs 2-10 as the tutorial does
#
# What it does:
#   1. third-party wheels that the machine lacks are installed from .whl/ (if present) into
#      $NDD_SITE (default /tmp/ndd-site) with --no-index --no-deps. The GPU machine lacks
#      simplejpeg (ndd-ops-cpu) and lmdb (ndd-readers); fetch them beforehand, on a machine
#      with an index, into .whl/ at the repository root (carry it to the GPU machine):
#        python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#            --implementation cp --platform manylinux2014_x86_64 -d .whl simplejpeg==1.9.0
#        python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#            --implementation cp --platform manylinux2014_x86_64 -d .whl lmdb==3.0.0
#      and, for the torchdata node tests (pure Python; skipped without it):
#        python3 -m pip download --no-deps -d .whl torchdata==0.11.0
#      and, for decoders.inflate (ndd-ops-cuda; its tests are skipped without it):
#        python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#            --implementation cp --platform manylinux2014_x86_64 -d .whl lz4==4.4.5
#      The video tests need PyAV (36 MB; skipped without it, and too big to carry beside
#      data/mnist_lmdb within the device's 64 MiB, so fetch it only for a run without the
#      criterion's data):
#        python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#            --implementation cp --platform manylinux_2_28_x86_64 -d .whl av==18.1.0
#   2. the ndd packages run from packages/*/src (PYTHONPATH); their entry points, which need
#      distribution metadata, come from a minimal .dist-info per package written into
#      $NDD_SITE from its pyproject.toml (no build backend needed). Distributions that are
#      already installed are left alone.
#   3. benchmarks/bench_gpu.py, with cProfile tables of the GPU loop in $OUT, then pytest
#      packages/ndd-ops-cuda/tests (NDD_CUDA_EMULATE is not set here: the real GPU).
#      Everything is tee'd to $OUT/gpu-log.txt. The benchmark may take 300 s; the tests get
#      what is left of 460 s from the start (at least 60 s), so the script ends within 8
#      minutes even when both run long (the last full H200 run took 396 s in all).
#
# Environment: NDD_GPU_PYTHON (default /opt/torch/.venv/bin/python3, else python3),
# OUT (default ./gpu-out), NDD_SITE, NDD_GPU_BUDGET_S (the 460 s above: a shorter device
# lease), NDD_GPU_TESTS (pytest arguments, shell-quoted, instead of the whole
# packages/ndd-ops-cuda/tests). Exit status: non-zero if the tests or a benchmark failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${NDD_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
OUT=${OUT:-$ROOT/gpu-out}
SITE=${NDD_SITE:-/tmp/ndd-site}
mkdir -p "$OUT" "$SITE"
exec > >(tee "$OUT/gpu-log.txt") 2>&1
start=$(date +%s)
echo "== gpu-check: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])')), $(date -u +%FT%TZ)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ -n "${NDD_CUDA_EMULATE:-}" ]; then
    echo "!! NDD_CUDA_EMULATE=$NDD_CUDA_EMULATE is set: the GPU is emulated on the CPU (a dry run)"
fi

echo "== 1. third-party wheels"
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install --quiet --no-index --no-deps --disable-pip-version-check --upgrade \
        --target "$SITE" .whl/*.whl || echo "!! installing .whl/*.whl failed"
    ls .whl
else
    echo "no .whl/ folder: using what is installed"
fi

SRC=$(printf '%s:' "$ROOT"/packages/*/src)
export PYTHONPATH="${SRC}${SITE}${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

echo "== 2. ndd distributions (metadata for the entry points)"
"$PY" - "$SITE" <<'EOF'
import importlib.metadata as md
import pathlib
import sys
import tomllib

site = pathlib.Path(sys.argv[1])
for pyproject in sorted(pathlib.Path("packages").glob("*/pyproject.toml")):
    project = tomllib.loads(pyproject.read_text())["project"]
    name, version = project["name"], project["version"]
    try:
        have = md.distribution(name)
        if not str(getattr(have, "_path", "")).startswith(str(site)):
            print(f"  {name}: installed already ({have.version}), left alone")
            continue
    except md.PackageNotFoundError:
        pass
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    eps = project.get("entry-points", {})
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n"
        for group, items in eps.items()))
    print(f"  {name} {version}: {', '.join(eps) or 'no entry points'}")
missing = []
for mod in ("numpy", "cv2", "PIL", "simplejpeg", "lmdb", "torch", "torchvision", "pytest"):
    try:
        __import__(mod)
    except ImportError as e:
        missing.append(f"{mod} ({e})")
print("  missing modules:", ", ".join(missing) if missing else "none")
EOF
"$PY" -c "import ndd, torch; print(ndd.plugins.report()); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"

# The benchmark first: if the device call is cut short, its table is what matters most.
echo "== 3. GPU benchmark"
timeout 300 "$PY" benchmarks/bench_gpu.py --profile "$OUT" "$@" 2>&1 | tee "$OUT/bench.txt"
bench_rc=${PIPESTATUS[0]}

echo "== 4. GPU tests"
per_test=()  # pytest-timeout, where installed: one hung test must not eat the whole budget
"$PY" -c "import pytest_timeout" 2>/dev/null && per_test=(--timeout 60)
test_s=$(( ${NDD_GPU_BUDGET_S:-460} - ($(date +%s) - start) ))
[ "$test_s" -lt 60 ] && test_s=60
echo "(time limit ${test_s} s)"
eval "tests=(${NDD_GPU_TESTS:-packages/ndd-ops-cuda/tests})"
timeout "$test_s" "$PY" -m pytest -q -p no:cacheprovider -rs --durations=15 "${per_test[@]}" "${tests[@]}" 2>&1 \
    | tee "$OUT/pytest.txt"
test_rc=${PIPESTATUS[0]}
test_line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error)|no tests ran' "$OUT/pytest.txt" | tail -1 | tr -d '=')

echo
echo "== summary ($(( $(date +%s) - start )) s)"
echo "GPU tests: ${test_line:-no result} (exit $test_rc)"
sed -n '/^what /,$p' "$OUT/bench.txt"
[ "$test_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
