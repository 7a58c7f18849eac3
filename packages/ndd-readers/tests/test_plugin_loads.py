"""The ndd-readers entry point is discovered and loads without error."""

import ndd


def test_entry_point_loaded():
    loaded = {(r.group, r.name): r for r in ndd.plugins.report().loaded}
    rec = loaded[("ndd.readers", "builtin")]
    assert rec.distribution == "ndd-readers" and rec.value == "ndd_readers._register:register"
    assert not [r for r in ndd.plugins.report().failed if r.distribution == "ndd-readers"]
