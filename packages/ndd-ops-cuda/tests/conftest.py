"""GPU tests: on a machine without CUDA they run on the CPU emulation of the GPU backend.

``NDD_CUDA_EMULATE=cpu`` (a testing aid of ndd-ops-cuda) makes the "gpu" device store
torch CPU tensors, so device moves, device inference and the kernels run end to end
everywhere. It is set here, before ndd first loads its plugins, unless CUDA is present.
Tests marked ``requires_cuda`` (streams, pinned memory, nvJPEG, zero copy on CUDA) need
a real GPU and are skipped otherwise; the ``requires_cuda`` fixture does the same.
"""

from __future__ import annotations

import os

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAS_CUDA = _cuda_available()
if not HAS_CUDA:
    os.environ.setdefault("NDD_CUDA_EMULATE", "cpu")
EMULATED = os.environ.get("NDD_CUDA_EMULATE", "").lower() == "cpu"
SKIP_REASON = ("no CUDA device: ran on the CPU emulation only" if not HAS_CUDA
               else "NDD_CUDA_EMULATE=cpu is set: ran on the CPU emulation only")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires_cuda: needs a real CUDA device (skipped on the emulation)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_CUDA and not EMULATED:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if item.get_closest_marker("requires_cuda") is not None:
            item.add_marker(skip)


@pytest.fixture
def requires_cuda() -> None:
    """Skip the test unless a real CUDA device is in use."""
    if not HAS_CUDA or EMULATED:
        pytest.skip(SKIP_REASON)
