"""ndd-ops-cuda: the "gpu" device backend (entry point ``ndd.devices``) and the GPU kernels
(entry point ``ndd.ops``). Importing it never needs a GPU; see ``ndd.plugins.report()``."""
