"""ndd-capture: capture mode for ndd, published as ``ndd.capture`` (filled by its own issue)."""
