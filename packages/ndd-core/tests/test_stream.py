"""ndd.Stream, ndd.stream and the default / current streams, without a GPU (wrapping
handles with their device given). Making streams and running on them: ndd-ops-cuda's tests."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

import ndd


def test_stream_wraps_handles_and_stream_objects() -> None:
    assert ndd.stream(stream=None) is None
    s = ndd.stream(stream=7, device_id=1)
    assert isinstance(s, ndd.Stream)
    assert (s.handle, s.device_id) == (7, 1)
    assert s.__cuda_stream__() == (0, 7)
    assert str(s) == "CUDA stream 7, device_id=1" and repr(s) == "Stream(stream=7, device_id=1)"
    assert ndd.stream(stream=s) is s and ndd.stream(stream=s, device_id=1) is s
    assert s == ndd.Stream(stream=7, device_id=1) and hash(s) == hash(ndd.Stream(stream=7, device_id=1))
    assert s != ndd.Stream(stream=7, device_id=0) and s != ndd.Stream(stream=8, device_id=1)
    assert s == 7 and s != 8 and s != None  # noqa: E711 - DALI compares with handles and None
    # Objects that carry their handle and device: the __cuda_stream__ protocol, torch-like
    # (cuda_stream, device_index) and CuPy-like (ptr, device.id) streams.
    proto = SimpleNamespace(__cuda_stream__=lambda: (0, 11), device_id=2)
    assert (ndd.stream(stream=proto).handle, ndd.stream(stream=proto).device_id) == (11, 2)
    torch_like = SimpleNamespace(cuda_stream=12, device_index=3)
    assert (ndd.stream(stream=torch_like).handle, ndd.stream(stream=torch_like).device_id) == (12, 3)
    cupy_like = SimpleNamespace(ptr=13, device=SimpleNamespace(id=4))
    w = ndd.Stream(stream=cupy_like)
    assert (w.handle, w.device_id) == (13, 4) and ndd.stream(stream=w) is w
    assert ndd.Stream(stream=w).handle == 13  # a Stream of a Stream


def test_stream_errors() -> None:
    with pytest.raises(ValueError, match="must not be None"):
        ndd.Stream(stream=None)
    with pytest.raises(ValueError, match="doesn't match the id 1"):
        ndd.stream(stream=ndd.stream(stream=7, device_id=1), device_id=0)
    with pytest.raises(ValueError, match="doesn't match the id 3"):
        ndd.stream(stream=SimpleNamespace(cuda_stream=12, device_index=3), device_id=0)
    with pytest.raises(TypeError, match="Expected a CUDA stream .* got str"):
        ndd.stream(stream="default")
    with pytest.raises(TypeError, match="bool"):
        ndd.stream(stream=True, device_id=0)
    with pytest.raises(ValueError, match="cannot be negative"):
        ndd.stream(stream=-1, device_id=0)


def test_new_streams_need_the_gpu_backend() -> None:
    ndd.plugins.report()  # loads the plugins
    if "gpu" in ndd._plugins.devices and ndd._plugins.devices["gpu"].available():
        pytest.skip("a GPU backend is usable here: ndd-ops-cuda's tests cover new streams")
    with pytest.raises(RuntimeError, match="GPU backend"):
        ndd.stream()
    with pytest.raises(RuntimeError, match="GPU backend"):
        ndd.stream(stream=5)  # the device of a bare handle is the current GPU's


def test_default_stream_per_device() -> None:
    s1 = ndd.stream(stream=21, device_id=1)
    try:
        ndd.set_default_stream(s1)  # the stream's own device
        assert ndd.get_default_stream(1) is s1 and ndd.get_default_stream(0) is None
        assert ndd.EvalContext(device_id=1).cuda_stream is s1
        own = ndd.stream(stream=22, device_id=1)
        assert ndd.EvalContext(device_id=1, cuda_stream=own).cuda_stream is own  # a context's own wins
        assert ndd.EvalContext().cuda_stream is None  # a CPU context
        ndd.set_default_stream(23, device_id=1)
        assert ndd.get_default_stream(1) == ndd.stream(stream=23, device_id=1)
    finally:
        ndd.set_default_stream(None, device_id=1)
    assert ndd.get_default_stream(1) is None


def test_current_stream_is_per_thread() -> None:
    seen = {}

    def worker() -> None:
        assert ndd.get_current_stream() is None
        s = ndd.stream(stream=31, device_id=0)
        ndd.set_current_stream(s)
        seen["current"] = ndd.get_current_stream()
        seen["later_context"] = ndd.EvalContext().cuda_stream
        seen["given"] = ndd.EvalContext(cuda_stream=ndd.stream(stream=32, device_id=0)).cuda_stream.handle
        ndd.set_current_stream(None)
        seen["reset"] = ndd.get_current_stream()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["current"] == ndd.stream(stream=31, device_id=0)
    assert seen["later_context"] is seen["current"]
    assert seen["given"] == 32 and seen["reset"] is None
    assert ndd.get_current_stream() is None  # this thread's default context was not touched
