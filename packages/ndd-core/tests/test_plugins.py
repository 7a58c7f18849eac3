"""Plugin discovery from installed metadata, failure reporting, extensions, readers."""

import subprocess
import sys

import pytest

import ndd


def test_report_lists_core_and_test_plugin():
    rep = ndd.plugins.report()
    loaded = {(r.group, r.name): r for r in rep.loaded}
    assert loaded[("ndd.ops", "core")].distribution == "ndd-core"
    good = loaded[("ndd.ops", "good")]
    assert good.distribution == "ndd-testplugin" and good.version == "0.0.1"
    text = str(rep)
    assert "ndd-testplugin 0.0.1" in text and "FAILED" in text


def test_broken_plugin_is_reported_not_fatal():
    failed = {r.name: r for r in ndd.plugins.report().failed}
    assert "broken on purpose" in failed["broken"].error
    assert failed["broken"].distribution == "ndd-testplugin"
    assert ndd.testplugin.scale is not None  # the good entry point of the same package works


def test_plugin_op_in_its_module_path():
    import numpy as np

    out = ndd.testplugin.scale(ndd.tensor(np.ones(2, np.float32)), factor=3)
    assert np.asarray(out).tolist() == [3.0, 3.0]
    assert "scale" in dir(ndd.testplugin)


def test_loading_is_lazy():
    code = "import ndd, ndd._plugins as p; a = p._loaded; ndd.cast; print(a, p._loaded)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_two_plugins_claiming_one_op_is_an_error_naming_both():
    from ndd._plugins import Registry
    from ndd._schema import OpSchema

    s = OpSchema("_conflict_probe", internal=True)
    Registry("pkg-a 1.0").add_schema(s)
    Registry("pkg-a 1.0").add_kernel("_conflict_probe", "cpu", lambda c, i, a: i[0])
    with pytest.raises(RuntimeError, match="pkg-a 1.0 and pkg-b 2.0"):
        Registry("pkg-b 2.0").add_kernel("_conflict_probe", "cpu", lambda c, i, a: i[0])
    from ndd._dispatch import call

    with pytest.raises(RuntimeError, match="two plugins"):
        call(s, (ndd.tensor([1]),), {})


def test_missing_extension_names_package():
    import importlib

    try:
        import ndd_capture  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install ndd-capture"):
            importlib.import_module("ndd.capture")
        with pytest.raises(ImportError, match="ndd-capture"):
            getattr(ndd, "capture")  # noqa: B009
    else:
        assert importlib.import_module("ndd.capture") is sys.modules["ndd.capture"]


def test_reader_name_errors():
    with pytest.raises(AttributeError, match="ndd.readers.File"):
        ndd.readers.file  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        ndd.readers.Nope  # noqa: B018


def test_internal_op_before_any_lookup_loads_plugins():
    code = "import ndd; print(ndd.tensor([5, 6])[1].item(), (ndd.tensor([1]) + 1).item())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["6", "2"]
