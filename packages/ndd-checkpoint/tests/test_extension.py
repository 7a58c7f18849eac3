"""ndd-checkpoint is published as `ndd.checkpoint` through the ndd.extensions entry point."""

import sys


def test_import_as_ndd_checkpoint():
    import ndd.checkpoint
    import ndd_checkpoint

    assert ndd.checkpoint is ndd_checkpoint is sys.modules["ndd.checkpoint"]
