"""ndd-ops-cpu: CPU kernels of ndd's image operators (registered via the ``ndd.ops`` entry point)."""
