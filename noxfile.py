"""Sessions: tests per package, cross-package tests, lint, layering, benchmarks.

``nox -s tests`` (the default) runs everything that passes on a CPU-only machine.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = False

TORCH = "torch==2.13.0"  # the CPU build; a bare `torch` pulls a multi-GB CUDA build
MAIN_PY = "3.11"  # torch is installable only for 3.11 here
OTHER_PYS = ["3.10", "3.12", "3.13"]
CORE = "packages/ndd-core"
TEST_PLUGIN = "tests/plugins/ndd-testplugin"
PACKAGES = {
    "ops_cpu": "packages/ndd-ops-cpu",
    "ops_cuda": "packages/ndd-ops-cuda",
    "readers": "packages/ndd-readers",
    "capture": "packages/ndd-capture",
    "checkpoint": "packages/ndd-checkpoint",
}


def _pytest(session: nox.Session, *paths: str) -> None:
    session.run("pytest", "-q", "-p", "no:cacheprovider", *paths, *session.posargs)


@nox.session(python=MAIN_PY)
def test_core(session: nox.Session) -> None:
    """ndd-core with torch (zero-copy tests) and the test plugin."""
    session.install("pytest", TORCH, CORE, TEST_PLUGIN)
    _pytest(session, f"{CORE}/tests")


@nox.session(python=OTHER_PYS)
def test_core_pythons(session: nox.Session) -> None:
    """ndd-core on the other Python versions (torch tests skip: no torch build here)."""
    session.install("pytest", CORE, TEST_PLUGIN)
    _pytest(session, f"{CORE}/tests")


def _package_session(key: str, extra: tuple[str, ...] = ()) -> None:
    path = PACKAGES[key]

    @nox.session(python=MAIN_PY, name=f"test_{key}")
    def _session(session: nox.Session) -> None:
        session.install("pytest", CORE, path, *extra)  # no torch: these tests do not need it
        _pytest(session, f"{path}/tests")

    _session.__doc__ = f"Tests of {path}."


_package_session("ops_cpu", extra=("scikit-image",))
# The GPU tests run on the CPU emulation of the GPU backend here (their conftest sets
# NDD_CUDA_EMULATE=cpu without CUDA) and compare with the CPU kernels of ndd-ops-cpu; the
# capture-mode GPU loop needs the readers and capture packages.
_package_session("ops_cuda", extra=(TORCH, "torchdata==0.11.0", PACKAGES["ops_cpu"], PACKAGES["readers"],
                                   PACKAGES["capture"]))
_package_session("readers", extra=("protobuf", "astropy>=5", PACKAGES["ops_cpu"]))
_package_session("capture", extra=(PACKAGES["readers"], PACKAGES["ops_cpu"]))


@nox.session(python=MAIN_PY)
def test_capture_threads(session: nox.Session) -> None:
    """The capture tests again with the pipeline on threads (worker processes are the default)."""
    session.install("pytest", CORE, PACKAGES["capture"], PACKAGES["readers"], PACKAGES["ops_cpu"])
    session.env["NDD_CAPTURE_PROCESSES"] = "0"
    _pytest(session, f"{PACKAGES['capture']}/tests")


@nox.session(python=OTHER_PYS)
def test_capture_pythons(session: nox.Session) -> None:
    """Capture on the other Python versions: call sites and source analysis differ per version."""
    session.install("pytest", CORE, PACKAGES["capture"], PACKAGES["readers"], PACKAGES["ops_cpu"])
    _pytest(session, f"{PACKAGES['capture']}/tests")


_package_session("checkpoint", extra=(PACKAGES["readers"], PACKAGES["ops_cpu"], PACKAGES["capture"]))


@nox.session(python=MAIN_PY)
def test_cross(session: nox.Session) -> None:
    """Cross-package and end-to-end tests in tests/."""
    session.install("pytest", TORCH, "torchdata==0.11.0", CORE, *PACKAGES.values())
    _pytest(session, "tests")


@nox.session(python=False)
def gpu(session: nox.Session) -> None:
    """On a GPU machine: all GPU tests and the GPU benchmark, one table (scripts/gpu-check.sh).

    Uses the Python that has torch with CUDA (NDD_GPU_PYTHON, default /opt/torch/.venv/bin/python3)
    and installs nothing from an index; ``-- --quick`` for a short benchmark.
    """
    session.run("bash", "scripts/gpu-check.sh", *session.posargs, external=True)


@nox.session(python=MAIN_PY)
def lint(session: nox.Session) -> None:
    """ruff over the whole repository."""
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session(python=MAIN_PY)
def layering(session: nox.Session) -> None:
    """Core imports no plugin; no plugin imports another."""
    session.run("python", "scripts/check_layering.py")


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    """Everything that passes on a CPU-only machine."""
    for name in ("lint", "layering", "test_core", *(f"test_core_pythons-{v}" for v in OTHER_PYS),
                 *(f"test_{k}" for k in PACKAGES), "test_capture_threads",
                 *(f"test_capture_pythons-{v}" for v in OTHER_PYS),
                 "test_cross"):
        session.notify(name)


@nox.session(python=MAIN_PY)
def bench_ops(session: nox.Session) -> None:
    """µs per batch of 64 for each CPU image operator vs a plain Pillow/NumPy loop."""
    session.install(CORE, PACKAGES["ops_cpu"], "scikit-image")
    session.run("python", "benchmarks/bench_ops.py", *session.posargs)


@nox.session(python=MAIN_PY)
def bench_core(session: nox.Session) -> None:
    """Per-call overhead of a trivial op in each EvalMode (prints a table)."""
    session.install(CORE)
    session.run("python", "benchmarks/bench_core.py", *session.posargs)


@nox.session(python=MAIN_PY)
def demo(session: nox.Session) -> None:
    """The main job: the MNIST-like training loop, eager then captured, with throughput."""
    session.install(TORCH, CORE, *PACKAGES.values())
    session.run("python", "examples/mnist_demo.py", *session.posargs, success_codes=[0])


@nox.session(python=MAIN_PY)
def bench_capture(session: nox.Session) -> None:
    """Capture vs eager on the MNIST-like loop, with and without training (prints a table)."""
    session.install(TORCH, CORE, *PACKAGES.values())
    session.run("python", "benchmarks/bench_capture.py", *session.posargs)


@nox.session(python=MAIN_PY)
def bench_readers(session: nox.Session) -> None:
    """Reader samples/s (Caffe2 LMDB, File tree) vs a plain Python loop, and per-batch overhead."""
    session.install(CORE, PACKAGES["readers"], PACKAGES["ops_cpu"])
    session.run("python", "benchmarks/bench_readers.py", *session.posargs)


BENCH_DEPS = (TORCH, CORE, *PACKAGES.values(), "matplotlib")


@nox.session(python=MAIN_PY)
def bench(session: nox.Session) -> None:
    """ndd eager/capture vs a PyTorch DataLoader with Pillow on three loops (table, JSON, PNG)."""
    session.install(*BENCH_DEPS)
    session.run("python", "benchmarks/bench_loops.py", *session.posargs)


@nox.session(python=MAIN_PY)
def bench_dali(session: nox.Session) -> None:
    """The `bench` table plus DALI 2.4 dynamic mode (eager, capture) on the identical loops."""
    session.install(*BENCH_DEPS, "nvidia-dali-cuda120==2.4.0")
    session.run("python", "benchmarks/bench_dali.py", *session.posargs)


@nox.session(python=MAIN_PY)
def docs(session: nox.Session) -> None:
    """Build the documentation site with mkdocs, warnings as errors (into .nox/docs-site)."""
    session.install("mkdocs>=1.6,<1.7")
    session.run("mkdocs", "build", "--strict", "--site-dir", ".nox/docs-site", *session.posargs)


@nox.session(python=MAIN_PY)
def bench_distributed(session: nox.Session) -> None:
    """Samples/s per rank and in total for 1 and 2 ranks under torchrun (gloo, CPU)."""
    session.install(TORCH, CORE, *PACKAGES.values())
    session.run("python", "benchmarks/bench_distributed.py", *session.posargs)


@nox.session(python=MAIN_PY)
def build(session: nox.Session) -> None:
    """Wheel and sdist of every distribution into dist/, checked (metadata, entry points, twine)."""
    import pathlib

    session.install("build", "twine")
    session.run("python", "scripts/build_dists.py", "--outdir", "dist")
    built = sorted(str(p) for p in pathlib.Path("dist").glob("ndd*") if p.suffix in (".whl", ".gz"))
    session.run("twine", "check", "--strict", *built)
