"""The built wheels, installed into fresh virtual environments (not the editable trees).

Checks that ``pip install ndd-core`` alone gives a working core whose missing plugins fail
with errors naming the package to install, that the meta-package ``ndd`` pulls in the rest
and its plugins are discovered through entry points in that environment, and that
``ndd[cuda]`` adds ndd-ops-cuda. The ndd wheels are installed with ``--no-index`` from the
wheels built here (PyPI has an unrelated project called ``ndd``); their third-party
dependencies, read from the pyproject files, come from the package index first.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_build_dists", ROOT / "scripts" / "build_dists.py")
assert _spec is not None and _spec.loader is not None
bd = sys.modules.setdefault("_build_dists", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(bd)

DISTS = {bd._norm(d.name): d for d in bd.distributions()}
META_PULLS = {"ndd-core", "ndd-ops-cpu", "ndd-readers", "ndd-capture", "ndd-checkpoint"}
TORCH = "torch==2.13.0"
OFFLINE_SIGNS = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
                 "Max retries exceeded")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="venv layout differs on Windows")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _run(cmd: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)


class Venv:
    """A fresh virtual environment (no system site-packages)."""

    def __init__(self, path: pathlib.Path, wheelhouse: pathlib.Path) -> None:
        self.path = path
        self.wheelhouse = wheelhouse
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=_env(), timeout=300)
        self.bin = path / "bin"
        self.python = self.bin / "python"

    def pip(self, *args: str) -> str:
        r = _run([str(self.python), "-m", "pip", *args], self.path)
        out = r.stdout + r.stderr
        if r.returncode != 0:
            if any(s in out for s in OFFLINE_SIGNS):
                pytest.skip(f"the package index is unreachable: pip {' '.join(args)}")
            pytest.fail(f"pip {' '.join(args)} failed:\n{out[-4000:]}")
        return out

    def install(self, requirement: str) -> None:
        """Third-party dependencies from the index, then the ndd wheels from the wheelhouse only."""
        # torch: the CPU build on this disk (a bare range pulls a multi-GB CUDA build).
        third_party = sorted(TORCH if bd._requirement_name(r) == "torch" else r for r in _third_party(requirement))
        if third_party:
            self.pip("install", "--quiet", *third_party)
        self.pip("install", "--quiet", "--no-index", "--find-links", str(self.wheelhouse), requirement)

    def py(self, code: str) -> dict:
        """Run ``code`` in the venv; it prints one JSON object last, which is returned."""
        r = _run([str(self.python), "-c", textwrap.dedent(code)], self.path)
        assert r.returncode == 0, f"failed in the venv:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return json.loads(r.stdout.strip().splitlines()[-1])

    def installed(self) -> dict[str, str]:
        out = json.loads(self.pip("list", "--format", "json"))
        return {bd._norm(p["name"]): p["version"] for p in out}


def _third_party(requirement: str) -> set[str]:
    """The non-ndd requirements of ``requirement`` (``name`` or ``name[extra]``), transitively."""
    name, _, extra = requirement.partition("[")
    todo = [(bd._norm(name), extra.rstrip("]"))]
    seen, out = set(), set()
    while todo:
        dist_name, ex = todo.pop()
        if dist_name in seen:
            continue
        seen.add(dist_name)
        d = DISTS[dist_name]
        for req in d.dependencies + (d.optional.get(ex, []) if ex else []):
            req_name = bd._requirement_name(req)
            if req_name in DISTS:
                todo.append((req_name, ""))
            else:
                out.add(req)
    return out


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    bd.build(out, sdist=False, backend="pip")
    return out


@pytest.fixture(scope="module")
def full_env(tmp_path_factory: pytest.TempPathFactory, wheelhouse: pathlib.Path) -> Venv:
    venv = Venv(tmp_path_factory.mktemp("venv-ndd") / "env", wheelhouse)
    venv.install("ndd")
    return venv


def test_wheels_metadata(wheelhouse: pathlib.Path) -> None:
    assert bd.check(wheelhouse, sdist=False) == []


CORE_CHECK = """
import json, pathlib, sys
import numpy as np
import ndd

out = {"file": ndd.__file__, "prefix": sys.prefix}
t = ndd.tensor([1, 2, 3])
out["cast"] = np.asarray(ndd.cast(t, dtype=ndd.float32)).tolist()
out["cast_dtype"] = str(np.asarray(ndd.cast(t, dtype=ndd.float32)).dtype)
rep = ndd.plugins.report()
out["loaded"] = sorted({r.distribution for r in rep.loaded})
out["failed"] = [str(r) for r in rep.failed]

def error(fn):
    try:
        fn()
    except Exception as e:
        return [[c.__name__ for c in type(e).__mro__], str(e)]
    return None

def _import_capture():
    import ndd.capture  # noqa: F401

out["decoders.image"] = error(lambda: ndd.decoders.image)
out["resize"] = error(lambda: ndd.resize)
out["readers.File"] = error(lambda: ndd.readers.File)
out["import ndd.capture"] = error(_import_capture)
out["checkpoint"] = error(lambda: ndd.checkpoint)
out["gpu"] = error(lambda: ndd.tensor([1]).gpu())
print(json.dumps(out))
"""


def test_core_alone(tmp_path: pathlib.Path, wheelhouse: pathlib.Path) -> None:
    venv = Venv(tmp_path / "env", wheelhouse)
    venv.install("ndd-core")
    ndd_dists = {k: v for k, v in venv.installed().items() if k.startswith("ndd")}
    assert ndd_dists == {"ndd-core": DISTS["ndd-core"].version}
    out = venv.py(CORE_CHECK)
    # Imported from the installed wheel, not from the source tree.
    assert pathlib.Path(out["file"]).is_relative_to(out["prefix"]), out["file"]
    assert out["cast"] == [1.0, 2.0, 3.0] and out["cast_dtype"] == "float32"
    assert out["loaded"] == ["ndd-core"] and out["failed"] == []
    for what, (kind, pkg) in {"decoders.image": ("AttributeError", "ndd-ops-cpu"),
                              "resize": ("AttributeError", "ndd-ops-cpu"),
                              "readers.File": ("AttributeError", "ndd-readers"),
                              "import ndd.capture": ("ImportError", "ndd-capture"),
                              "checkpoint": ("ImportError", "ndd-checkpoint"),
                              "gpu": ("RuntimeError", "ndd-ops-cuda")}.items():
        err = out[what]
        assert err is not None, f"ndd.{what} should fail without {pkg}"
        assert kind in err[0], f"{what}: expected {kind}, got {err}"
        assert pkg in err[1], f"{what}: the error does not name {pkg}: {err[1]}"


FULL_CHECK = """
import json, sys
import numpy as np
import ndd

out = {"file": ndd.__file__, "prefix": sys.prefix}
img = ndd.tensor(np.zeros((8, 6, 3), np.uint8))
out["resize"] = list(np.asarray(ndd.resize(img, size=[4, 3])).shape)
out["Caffe2"] = ndd.readers.Caffe2.__module__
out["invariant"] = ndd.capture.invariant.__module__
out["Checkpoint"] = ndd.checkpoint.Checkpoint.__module__
out["tfrecord"] = ndd.tfrecord.__name__
rep = ndd.plugins.report()
out["loaded"] = sorted({(r.group, r.distribution, r.version) for r in rep.loaded})
out["failed"] = [f"{r.distribution} {r.name}: {r.error}" for r in rep.failed]
try:
    ndd.tensor([1]).gpu()
    out["gpu"] = None
except Exception as e:
    out["gpu"] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def _groups_by_dist(loaded: list[list[str]]) -> dict[str, set[str]]:
    by: dict[str, set[str]] = {}
    for group, dist, version in loaded:
        assert version == DISTS[bd._norm(dist)].version, (dist, version)
        by.setdefault(bd._norm(dist), set()).add(group)
    return by


def test_meta_package(full_env: Venv) -> None:
    ndd_dists = {k: v for k, v in full_env.installed().items() if k.startswith("ndd")}
    assert ndd_dists == {name: DISTS[name].version for name in META_PULLS | {"ndd"}}
    full_env.pip("check")
    out = full_env.py(FULL_CHECK)
    assert pathlib.Path(out["file"]).is_relative_to(out["prefix"]), out["file"]
    assert out["resize"] == [4, 3, 3]
    assert out["Caffe2"].startswith("ndd_readers")
    assert out["invariant"].startswith("ndd_capture")
    assert out["Checkpoint"].startswith("ndd_checkpoint")
    assert out["failed"] == []
    # Every entry point of every installed plugin was discovered and loaded.
    by = _groups_by_dist(out["loaded"])
    assert set(by) == META_PULLS
    for name in META_PULLS:
        assert by[name] == set(DISTS[name].entry_points) - {"console_scripts"}, name
    assert out["gpu"] is not None and out["gpu"][0] == "RuntimeError"
    # The console script is installed and runs.
    r = _run([str(full_env.bin / "ndd-tfrecord2idx"), "--help"], full_env.path)
    assert r.returncode == 0 and "usage" in r.stdout.lower(), r.stdout + r.stderr


def test_cuda_extra(full_env: Venv, wheelhouse: pathlib.Path) -> None:
    full_env.install("ndd[cuda]")
    ndd_dists = {k: v for k, v in full_env.installed().items() if k.startswith("ndd")}
    assert "ndd-ops-cuda" in ndd_dists
    assert set(ndd_dists) == META_PULLS | {"ndd", "ndd-ops-cuda"}
    out = full_env.py(FULL_CHECK)
    assert out["failed"] == []
    by = _groups_by_dist(out["loaded"])
    assert by["ndd-ops-cuda"] == set(DISTS["ndd-ops-cuda"].entry_points)
    # No GPU on this machine (or no CUDA kernels yet): a clear error, not a crash.
    assert out["gpu"] is not None, "expected .gpu() to fail on a machine without a usable GPU"
    kind, message = out["gpu"]
    assert kind == "RuntimeError" and "GPU" in message, out["gpu"]
