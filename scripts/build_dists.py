"""Build a wheel and an sdist of every distribution under packages/ and check their metadata.

    python scripts/build_dists.py [--outdir dist] [--wheel-only] [--check-only]

Building uses ``python -m build`` when it is installed and ``pip wheel --no-deps`` (wheels only)
otherwise. The check reads each built file, not the source tree: name and version as in
pyproject.toml, Requires-Python, dependencies (siblings pinned with ``==`` to their exact
version), the entry points and console scripts in the wheel's entry_points.txt, the package
files in the wheel, the README as a Markdown long description, and the sdist's contents.
``tests/test_packaging.py`` imports this module for the same checks.
"""

from __future__ import annotations

import argparse
import configparser
import email.parser
import importlib.util
import pathlib
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"


@dataclass
class Dist:
    """One distribution as its pyproject.toml declares it."""

    name: str
    version: str
    path: pathlib.Path
    requires_python: str
    dependencies: list[str]
    optional: dict[str, list[str]]
    entry_points: dict[str, dict[str, str]]  # group -> name -> value (console_scripts included)
    packages: list[str] = field(default_factory=list)  # top-level import packages in the wheel

    @property
    def stem(self) -> str:
        """The file-name form of the name (``ndd-ops-cpu`` -> ``ndd_ops_cpu``)."""
        return re.sub(r"[-_.]+", "_", self.name).lower()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> list[Dist]:
    """Every distribution under packages/, by name."""
    out = []
    for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        project = data["project"]
        eps = {group: dict(items) for group, items in project.get("entry-points", {}).items()}
        if project.get("scripts"):
            eps["console_scripts"] = dict(project["scripts"])
        wheel = data.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {})
        pkgs = [pathlib.PurePosixPath(p).name for p in wheel.get("packages", [])]
        out.append(Dist(project["name"], project["version"], pyproject.parent,
                        project.get("requires-python", ""), list(project.get("dependencies", [])),
                        {k: list(v) for k, v in project.get("optional-dependencies", {}).items()},
                        eps, pkgs))
    return out


def build(outdir: pathlib.Path, dists: list[Dist] | None = None, *, sdist: bool = True,
          backend: str = "auto", python: str = sys.executable) -> None:
    """Build every distribution into ``outdir`` (wheel, and sdist when ``sdist``).

    ``backend``: "build" (``python -m build``), "pip" (``pip wheel --no-deps``, wheels only)
    or "auto" (``build`` when it is installed).
    """
    dists = distributions() if dists is None else dists
    outdir.mkdir(parents=True, exist_ok=True)
    have_build = importlib.util.find_spec("build") is not None if backend == "auto" else backend == "build"
    if sdist and not have_build:
        raise SystemExit("building sdists needs `build`: pip install build")
    for d in dists:
        for old in outdir.glob(f"{d.stem}-*"):
            old.unlink()
    if have_build:
        for d in dists:
            targets = ["--sdist", "--wheel"] if sdist else ["--wheel"]
            subprocess.run([python, "-m", "build", *targets, "--outdir", str(outdir), str(d.path)],
                           check=True, stdout=subprocess.DEVNULL)
    else:
        subprocess.run([python, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(outdir),
                        *(str(d.path) for d in dists)], check=True)


def _requirement_name(req: str) -> str:
    return _norm(re.split(r"[\s;\[<>=!~(]", req.strip(), maxsplit=1)[0])


def _check_requirements(d: Dist, requires: list[str], siblings: dict[str, Dist], where: str) -> list[str]:
    errors = []
    declared = {_requirement_name(r): r for r in d.dependencies}
    for reqs in d.optional.values():
        for r in reqs:
            declared.setdefault(_requirement_name(r), r)
    got = {}
    for r in requires:
        name = _requirement_name(r)
        got[name] = r
        if name in siblings:
            pin = f"=={siblings[name].version}"
            if pin not in r.replace(" ", ""):
                errors.append(f"{where}: sibling dependency {r!r} is not pinned {pin}")
    for name in declared:
        if name not in got:
            errors.append(f"{where}: dependency {declared[name]!r} of pyproject.toml is missing")
    for name in got:
        if name not in declared:
            errors.append(f"{where}: unexpected dependency {got[name]!r}")
    return errors


def _check_metadata(d: Dist, text: str, siblings: dict[str, Dist], where: str) -> list[str]:
    msg = email.parser.Parser().parsestr(text)
    errors = []
    if _norm(msg.get("Name", "")) != _norm(d.name):
        errors.append(f"{where}: Name is {msg.get('Name')!r}, not {d.name!r}")
    if msg.get("Version") != d.version:
        errors.append(f"{where}: Version is {msg.get('Version')!r}, not {d.version!r}")
    if (msg.get("Requires-Python") or "").replace(" ", "") != d.requires_python.replace(" ", ""):
        errors.append(f"{where}: Requires-Python is {msg.get('Requires-Python')!r}, not {d.requires_python!r}")
    if not msg.get("Summary"):
        errors.append(f"{where}: no Summary")
    if not (msg.get("Description-Content-Type") or "").startswith("text/markdown"):
        errors.append(f"{where}: Description-Content-Type is {msg.get('Description-Content-Type')!r}")
    body = msg.get_payload() or msg.get("Description") or ""
    readme = (d.path / "README.md").read_text(encoding="utf-8")
    if not body.strip() or body.strip() != readme.strip():
        errors.append(f"{where}: the long description is not the README")
    for extra in d.optional:
        if extra not in (msg.get_all("Provides-Extra") or []):
            errors.append(f"{where}: extra {extra!r} is not provided")
    errors += _check_requirements(d, msg.get_all("Requires-Dist") or [], siblings, where)
    return errors


def check_wheel(path: pathlib.Path, d: Dist, siblings: dict[str, Dist]) -> list[str]:
    """Problems with one built wheel (empty when it is right)."""
    where = path.name
    errors = []
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        info = f"{d.stem}-{d.version}.dist-info"
        if f"{info}/METADATA" not in names:
            return [f"{where}: no {info}/METADATA"]
        errors += _check_metadata(d, zf.read(f"{info}/METADATA").decode("utf-8"), siblings, where)
        for pkg in d.packages:
            if f"{pkg}/__init__.py" not in names:
                errors.append(f"{where}: package {pkg} is missing")
        stray = {n.split("/")[0] for n in names} - set(d.packages) - {info}
        if stray:
            errors.append(f"{where}: unexpected top-level entries {sorted(stray)}")
        if any("__pycache__" in n or n.endswith(".pyc") for n in names):
            errors.append(f"{where}: contains bytecode")
        eps_text = zf.read(f"{info}/entry_points.txt").decode() if f"{info}/entry_points.txt" in names else ""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(eps_text)
    got = {g: {k: v.strip() for k, v in parser[g].items()} for g in parser.sections()}
    if got != d.entry_points:
        errors.append(f"{where}: entry points {got} differ from pyproject.toml's {d.entry_points}")
    return errors


def check_sdist(path: pathlib.Path, d: Dist, siblings: dict[str, Dist]) -> list[str]:
    """Problems with one built sdist (empty when it is right)."""
    where = path.name
    top = f"{d.stem}-{d.version}"
    with tarfile.open(path) as tf:
        names = set(tf.getnames())
        if f"{top}/PKG-INFO" not in names:
            return [f"{where}: no {top}/PKG-INFO"]
        member = tf.extractfile(f"{top}/PKG-INFO")
        assert member is not None
        errors = _check_metadata(d, member.read().decode("utf-8"), siblings, where)
    for needed in ("pyproject.toml", "README.md"):
        if f"{top}/{needed}" not in names:
            errors.append(f"{where}: {needed} is missing")
    sources = sorted(p.relative_to(d.path).as_posix() for p in (d.path / "src").rglob("*.py")
                     if "__pycache__" not in p.parts) if (d.path / "src").is_dir() else []
    for src in sources:
        if f"{top}/{src}" not in names:
            errors.append(f"{where}: {src} is missing")
    return errors


def check(outdir: pathlib.Path, dists: list[Dist] | None = None, *, sdist: bool = True) -> list[str]:
    """Check the wheel (and sdist) of every distribution in ``outdir``; the list of problems."""
    dists = distributions() if dists is None else dists
    siblings = {_norm(d.name): d for d in dists}
    errors = []
    for d in dists:
        wheels = sorted(outdir.glob(f"{d.stem}-{d.version}-py3-none-any.whl"))
        if len(wheels) != 1:
            errors.append(f"{d.name}: expected one pure-Python wheel in {outdir}, found {len(wheels)}")
        for w in wheels:
            errors += check_wheel(w, d, siblings)
        if sdist:
            sdists = sorted(outdir.glob(f"{d.stem}-{d.version}.tar.gz"))
            if len(sdists) != 1:
                errors.append(f"{d.name}: expected one sdist in {outdir}, found {len(sdists)}")
            for s in sdists:
                errors += check_sdist(s, d, siblings)
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outdir", type=pathlib.Path, default=ROOT / "dist")
    ap.add_argument("--wheel-only", action="store_true", help="build and check wheels only")
    ap.add_argument("--check-only", action="store_true", help="check what is in --outdir, build nothing")
    args = ap.parse_args(argv)
    dists = distributions()
    sdist = not args.wheel_only
    if not args.check_only:
        build(args.outdir, dists, sdist=sdist)
    errors = check(args.outdir, dists, sdist=sdist)
    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)
    for f in sorted(args.outdir.iterdir()):
        print(f"{f.stat().st_size:>9}  {f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}")
    print(f"{len(dists)} distributions: {'problems: ' + str(len(errors)) if errors else 'all checks passed'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
