"""ndd-checkpoint: checkpointing for ndd, published as ``ndd.checkpoint`` (filled by its own issue)."""
