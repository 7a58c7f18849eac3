"""The ndd-ops-cpu entry point is discovered and loads without error."""

import ndd


def test_entry_point_loaded():
    loaded = {(r.group, r.name): r for r in ndd.plugins.report().loaded}
    rec = loaded[("ndd.ops", "cpu")]
    assert rec.distribution == "ndd-ops-cpu" and rec.value == "ndd_ops_cpu._register:register"
    assert not [r for r in ndd.plugins.report().failed if r.distribution == "ndd-ops-cpu"]
