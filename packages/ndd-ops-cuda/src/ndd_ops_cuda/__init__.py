"""ndd-ops-cuda: the GPU device and CUDA kernels (registered via the ``ndd.ops`` entry point)."""
