"""Fail if a package imports something its layer may not: core imports no plugin,
and no plugin imports another plugin (they meet only through core's entry points)."""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLUGINS = {"ndd_ops_cpu", "ndd_ops_cuda", "ndd_readers", "ndd_capture", "ndd_checkpoint"}
PACKAGES = {"ndd-core": "ndd", "ndd-ops-cpu": "ndd_ops_cpu", "ndd-ops-cuda": "ndd_ops_cuda",
            "ndd-readers": "ndd_readers", "ndd-capture": "ndd_capture",
            "ndd-checkpoint": "ndd_checkpoint"}


def imported_modules(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant):
                out.append((node.lineno, str(node.args[0].value)))
    return out


def main() -> int:
    errors = []
    for dist, own in PACKAGES.items():
        for path in sorted((ROOT / "packages" / dist / "src").rglob("*.py")):
            for lineno, mod in imported_modules(path):
                top = mod.split(".")[0]
                if top in PLUGINS and top != own:
                    rel = path.relative_to(ROOT)
                    errors.append(f"{rel}:{lineno}: {dist} must not import plugin package {top}")
    for e in errors:
        print(e)
    print(f"layering: {'FAILED' if errors else 'ok'} ({len(errors)} violation(s))")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
