"""All ndd distributions installed together: every plugin loads and the layering holds."""

import pathlib
import runpy

import pytest

import ndd

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_plugin_loads():
    rep = ndd.plugins.report()
    dists = {r.distribution for r in rep.loaded}
    assert {"ndd-core", "ndd-ops-cpu", "ndd-ops-cuda", "ndd-readers"} <= dists
    assert rep.failed == [], str(rep)


def test_extensions_resolve():
    import ndd.capture
    import ndd.checkpoint

    assert ndd.capture.__name__ == "ndd_capture" and ndd.checkpoint.__name__ == "ndd_checkpoint"


def test_layering_script_passes():
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(ROOT / "scripts" / "check_layering.py"), run_name="__main__")
    assert info.value.code == 0
