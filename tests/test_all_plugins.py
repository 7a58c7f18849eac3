"""All ndd distributions installed together: every plugin loads and the layering holds."""

import importlib
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


def test_an_extension_submodule_is_the_extension_own():
    """``ndd.capture._invariant`` (where DALI's tests import helpers from) is the module
    capture itself uses, not a second copy whose marker class capture would not know."""
    import ndd.capture._invariant as alias
    import ndd_capture._invariant
    from ndd.capture._invariant import is_invariant, unwrap_invariant

    assert alias is ndd_capture._invariant
    p = ndd.capture.invariant(3)
    assert is_invariant(p) and type(unwrap_invariant(p)) is int
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ndd.capture._no_such_module")


def test_layering_script_passes():
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(ROOT / "scripts" / "check_layering.py"), run_name="__main__")
    assert info.value.code == 0
