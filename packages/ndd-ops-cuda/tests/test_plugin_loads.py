"""Both ndd-ops-cuda entry points are discovered and load without error."""

import ndd


def test_entry_points_loaded():
    rep = ndd.plugins.report()
    loaded = {(r.group, r.name): r for r in rep.loaded}
    ops = loaded[("ndd.ops", "cuda")]
    assert ops.distribution == "ndd-ops-cuda" and ops.value == "ndd_ops_cuda._register:register"
    dev = loaded[("ndd.devices", "gpu")]
    assert dev.distribution == "ndd-ops-cuda" and dev.value == "ndd_ops_cuda._backend:register"
    assert dev.unavailable is None  # a real GPU, or the emulation the tests turn on
    assert not [r for r in rep.failed if r.distribution == "ndd-ops-cuda"], str(rep)


def test_gpu_decoders_are_registered():
    schemas = ndd.plugins.schemas()
    for op in ("decoders.image", "decoders.image_crop", "decoders.image_random_crop"):
        assert schemas[op].kernel_sources["gpu"].startswith("ndd-ops-cuda")
