"""ndd-capture is published as `ndd.capture` through the ndd.extensions entry point."""

import sys


def test_import_as_ndd_capture():
    import ndd.capture
    import ndd_capture

    assert ndd.capture is ndd_capture is sys.modules["ndd.capture"]
