"""The "gpu" device: moves, storage, zero-copy hand-off, streams (real CUDA or the emulation)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import types

import numpy as np
import pytest
import torch

import ndd
from ndd_ops_cuda._backend import BACKEND

CUDA = torch.cuda.is_available() and os.environ.get("NDD_CUDA_EMULATE") != "cpu"


def _stored(b: ndd.Batch):
    return b._batch_data().dense


def test_batch_round_trip_keeps_metadata():
    x = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4, 1)
    g = ndd.as_batch(x, layout="HWC").gpu()
    assert g.device == ndd.Device("gpu:0") and g.layout == "HWC" and g.dtype == ndd.uint8
    assert isinstance(_stored(g), torch.Tensor)
    c = g.cpu()
    assert c.device == ndd.Device("cpu")
    np.testing.assert_array_equal(np.stack([np.asarray(t) for t in c]), x)


def test_gpu_copies_the_host_data():
    x = np.zeros((2, 3), np.float32)
    g = ndd.as_batch(x).gpu()
    x[:] = 5
    assert g.torch().sum().item() == 0
    back = g.cpu()
    g.torch()[:] = 1
    assert np.asarray(back.tensors[0]).sum() == 0


def test_ragged_batch_and_padding():
    b = ndd.batch([np.ones((2, 3), np.int16), np.ones((4, 1), np.int16)]).gpu()
    assert b.shape == [(2, 3), (4, 1)]
    with pytest.raises(ValueError, match="pad=True"):
        b.torch()
    t = b.torch(pad=True)
    assert tuple(t.shape) == (2, 4, 3) and t.dtype == torch.int16
    assert t.sum().item() == 6 + 4


def test_tensor_device_ids_and_moves():
    if not CUDA or torch.cuda.device_count() > 1:
        t = ndd.tensor([1, 2, 3]).gpu(1)
        assert t.device == ndd.Device("gpu:1") and t.torch().tolist() == [1, 2, 3]
    g = ndd.tensor(np.float32(2.5)).gpu()
    assert g.device == ndd.Device("gpu", 0) and float(g) == 2.5 and g.item() == 2.5
    assert "device=gpu:0" in repr(g)
    assert g.gpu() is g and g.to_device("gpu:0", force_copy=True) is not g


def test_torch_is_zero_copy():
    g = ndd.as_batch(np.zeros((3, 2), np.float32)).gpu()
    t = g.torch()
    assert t is _stored(g) and t.data_ptr() == g.torch().data_ptr()
    t += 1
    np.testing.assert_array_equal(np.asarray(g.cpu().tensors[2]), [1, 1])
    assert g.torch(copy=True).data_ptr() != t.data_ptr()
    s = g.tensors[1].torch()
    assert s.data_ptr() == t[1].data_ptr()


def test_dlpack_round_trip():
    g = ndd.tensor(np.arange(4, dtype=np.int32)).gpu()
    dev_type, dev_id = g.__dlpack_device__()
    assert (dev_type, dev_id) == ((2, 0) if CUDA else (1, 0))  # the emulation stores host memory
    np.testing.assert_array_equal(torch.from_dlpack(g).cpu().numpy(), [0, 1, 2, 3])


def test_array_operations_on_gpu_data():
    g = ndd.as_batch(np.arange(6, dtype=np.int32).reshape(3, 2)).gpu()
    f = ndd.batch(g, dtype=ndd.float32)
    assert f.device == g.device and f.torch().dtype == torch.float32
    sub = g.tensors[[0, 2]]
    assert sub.device == g.device and sub.torch().tolist() == [[0, 1], [4, 5]]
    ragged = ndd.batch([np.ones(2, np.int32), np.ones(3, np.int32)]).gpu()
    copied = ragged.tensors.as_batch(copy=True)
    assert copied.tensors[1].torch().data_ptr() != ragged.tensors[1].torch().data_ptr()
    bc = ndd.Batch.broadcast(ndd.tensor([7, 8]).gpu(), 3)
    assert bc.device == ndd.Device("gpu:0") and bc.torch().tolist() == [[7, 8]] * 3
    assert bc.torch().is_contiguous()
    t = ndd.tensor(g.tensors[1])
    assert t.device == g.device and t.torch().tolist() == [2, 3]
    assert t.torch().data_ptr() != g.tensors[1].torch().data_ptr()


def test_cpu_tensors_have_no_cuda_interface_on_the_emulation():
    g = ndd.tensor([1.0]).gpu()
    if CUDA:
        assert g.__cuda_array_interface__["version"] == 3
    else:
        assert not hasattr(g, "__cuda_array_interface__")


def test_numpy_conversion_of_gpu_data_is_refused():
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        np.asarray(ndd.tensor([1, 2]).gpu())


def test_sync_full_mode():
    with ndd.EvalMode.sync_full:
        g = ndd.as_batch(np.ones((2, 2), np.uint8)).gpu()
        assert g.cpu().torch().sum().item() == 4


def test_stream_for_is_a_null_context_on_the_emulation():
    if CUDA:
        pytest.skip("checked by test_one_stream_per_context on CUDA")
    with BACKEND.stream_for(ndd.EvalContext.current()):
        pass
    assert BACKEND.stream() is None


def _run_without_emulation(code: str) -> str:
    """The stdout of ``code`` run by a fresh interpreter with the emulation switched off."""
    env = {k: v for k, v in os.environ.items() if k != "NDD_CUDA_EMULATE"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(CUDA, reason="this machine has CUDA: the backend is available without emulation")
def test_without_cuda_or_emulation_the_backend_is_unavailable():
    out = _run_without_emulation(
        "import ndd\n"
        "rep = ndd.plugins.report()\n"
        "rec = [r for r in rep.loaded if r.group == 'ndd.devices' and r.name == 'gpu'][0]\n"
        "print('REASON', rec.unavailable)\n"
        "print([l for l in str(rep).splitlines() if 'ndd.devices' in l][0])\n"
        "try:\n"
        "    ndd.tensor([1]).gpu()\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
    )
    assert "REASON ndd-ops-cuda:" in out
    assert "\nunavailable  ndd.devices" in out
    assert "ERROR The GPU backend (from ndd-ops-cuda 0.1.0) is installed but unusable: ndd-ops-cuda:" in out


@pytest.mark.skipif(CUDA, reason="this machine has CUDA: the backend is available without emulation")
def test_without_cuda_or_emulation_an_op_on_the_gpu_device_says_why():
    out = _run_without_emulation(
        "import ndd\n"
        "x = ndd.tensor([1.5])\n"
        "for f in (lambda: x.gpu(), lambda: ndd.cast(x, dtype=ndd.int32, device='gpu'),\n"
        "          lambda: ndd.random.uniform(device='gpu')):\n"
        "    try:\n"
        "        f()\n"
        "    except RuntimeError as e:\n"
        "        print('ERROR', e)\n"
    )
    lines = out.splitlines()
    assert len(lines) == 3 and len(set(lines)) == 1, out
    assert lines[0].startswith("ERROR The GPU backend (from ndd-ops-cuda 0.1.0) is installed but unusable: ")


# -- real CUDA only --------------------------------------------------------------------

@pytest.mark.requires_cuda
def test_storage_is_cuda_and_zero_copy_from_torch():
    t = torch.arange(6, device="cuda", dtype=torch.float32).reshape(2, 3)
    b = ndd.as_batch(t)
    assert b.device == ndd.Device("gpu:0") and b.torch().data_ptr() == t.data_ptr()
    x = ndd.as_tensor(t)
    assert x.torch().data_ptr() == t.data_ptr() and x.dtype == ndd.float32
    g = ndd.as_batch(np.ones((4, 4), np.uint8)).gpu()
    assert _stored(g).is_cuda


@pytest.mark.requires_cuda
def test_one_stream_per_context():
    a, b = ndd.EvalContext(), ndd.EvalContext()
    sa, sb = BACKEND.stream(a), BACKEND.stream(b)
    assert sa is BACKEND.stream(a) and sa != sb and sa != torch.cuda.current_stream()
    user = torch.cuda.Stream()
    c = ndd.EvalContext(cuda_stream=user)
    assert BACKEND.stream(c) is user
    with c:
        g = ndd.as_batch(np.full((64, 256), 3, np.float32)).gpu()
        torch.testing.assert_close(g.torch().sum().item(), 3.0 * 64 * 256)


@pytest.mark.requires_cuda
def test_handing_out_waits_for_ndd_stream():
    big = np.random.default_rng(0).random((64, 1024, 256), dtype=np.float32)
    for _ in range(3):  # a race would show as a wrong sum now and then
        g = ndd.as_batch(big).gpu()  # async copy on ndd's stream
        s = g.torch().sum()  # runs on torch's current stream
        assert abs(s.item() - float(big.sum(dtype=np.float64))) < 1e-3 * big.size
    cai = g.tensors[0].__cuda_array_interface__
    assert cai["version"] == 3 and cai["stream"] == BACKEND.stream().cuda_stream
    assert cai["data"][0] == g.tensors[0].torch().data_ptr()
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        back = torch.from_dlpack(g.tensors[0])
        assert back.data_ptr() == cai["data"][0]


@pytest.mark.requires_cuda
def test_handing_out_waits_for_the_stream_of_another_context():
    """Data computed under one EvalContext and handed out under another (the default one):
    the consumer waits for the stream that computed them."""
    big = np.random.default_rng(1).random((64, 1024, 256), dtype=np.float32)
    ctx = ndd.EvalContext()
    for _ in range(3):
        with ctx:
            g = ndd.as_batch(big).gpu()  # async copy on ctx's stream
        assert BACKEND.stream(ctx) != BACKEND.stream()
        s = g.torch().sum()
        assert abs(s.item() - float(big.sum(dtype=np.float64))) < 1e-3 * big.size


@pytest.mark.requires_cuda
def test_cupy_arrays_in_and_out_without_copies():
    """CuPy (cupy-cuda12x or cupy-cuda13x, whichever matches the machine) meets ndd through
    ``__cuda_array_interface__``: no copy either way, and the values survive an operator."""
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    src = cp.arange(2 * 4 * 6 * 3, dtype=cp.uint8).reshape(2, 4, 6, 3)
    b = ndd.as_batch(src, layout="HWC")
    assert b.device == ndd.Device("gpu:0") and _stored(b).data_ptr() == src.data.ptr
    flipped = ndd.flip(b, horizontal=1)
    back = cp.asarray(flipped.tensors[0])
    assert back.data.ptr == flipped.tensors[0].__cuda_array_interface__["data"][0]
    np.testing.assert_array_equal(cp.asnumpy(back), cp.asnumpy(src[0, :, ::-1]))


@pytest.mark.requires_cuda
def test_invalid_device_id():
    with pytest.raises(RuntimeError, match="CUDA device"):
        ndd.tensor([1]).gpu(torch.cuda.device_count())


class _FakeCudaC:
    """torch's C functions for current devices and streams, as torch.cuda's own functions use
    them: one current stream per device, and setting a stream makes its device current."""

    def __init__(self) -> None:
        self.device = 0
        self.current = {0: (0, 0, 1), 1: (0, 1, 1)}  # device -> (stream_id, device_index, device_type)

    def _cuda_getDevice(self) -> int:
        return self.device

    def _cuda_getCurrentStream(self, dev: int) -> tuple:
        return self.current[dev]

    def _cuda_setStream(self, stream_id: int, device_index: int, device_type: int) -> None:
        self.device = device_index
        self.current[device_index] = (stream_id, device_index, device_type)


class _FakeStream:
    def __init__(self, stream_id: int, device_index: int) -> None:
        self.stream_id, self.device_index, self.device_type = stream_id, device_index, 1
        self.cuda_stream = 1000 + stream_id  # the raw handle
        self.waited: list = []  # events waited for (wait_event)

    def wait_event(self, ev: object) -> None:
        self.waited.append(ev)


@pytest.mark.parametrize("start_device", [0, 1])
def test_on_stream_restores_the_threads_device_and_streams(monkeypatch, start_device):
    """OnStream (ndd's cheaper torch.cuda.stream) against a model of torch's C functions: inside,
    the stream and its device are current; after, every device's stream and the current device
    are as before, also when the stream is on another device than the current one."""
    from ndd_ops_cuda._backend import OnStream

    fake = _FakeCudaC()
    fake.current[1] = (7, 1, 1)  # a stream of the user's is current on device 1
    fake.device = start_device  # the thread's device: the stream's below (1) or another (0)
    before = (fake.device, dict(fake.current))
    for name in ("_cuda_getDevice", "_cuda_getCurrentStream", "_cuda_setStream"):
        monkeypatch.setattr(torch._C, name, getattr(fake, name), raising=False)
    with OnStream(_FakeStream(42, 1)):
        assert fake.device == 1 and fake.current[1] == (42, 1, 1)
        with OnStream(_FakeStream(43, 0)):  # nested, back on the first device
            assert fake.device == 0 and fake.current[0] == (43, 0, 1)
        assert fake.device == 1 and fake.current[1] == (42, 1, 1)
    assert (fake.device, fake.current) == before


@pytest.fixture
def fake_waits(monkeypatch):
    """torch's stream functions and events replaced by fakes (OnStream and the backend's waits
    run without CUDA); gives the list of streams events were recorded on."""
    fake = _FakeCudaC()
    for name in ("_cuda_getDevice", "_cuda_getCurrentStream", "_cuda_setStream"):
        monkeypatch.setattr(torch._C, name, getattr(fake, name), raising=False)
    recorded = []

    class FakeEvent:
        def record(self, stream: object) -> None:
            recorded.append(stream)

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(BACKEND, "_waits", threading.local())
    return recorded


def test_a_consumer_waits_again_only_after_ndd_ran_on_the_stream(fake_waits):
    """A consumer's wait for ndd's stream (``only_new``, as .torch() makes it) is skipped when no
    OnStream block has ended on that stream since this thread's last wait for the pair (the
    labels after the images of one step); any block in between, from any thread, brings it
    back; a wait for a stream the program itself filled (``only_new=False``) always happens."""
    from ndd_ops_cuda._backend import OnStream

    recorded = fake_waits
    ndd_stream, consumer = _FakeStream(11, 0), _FakeStream(12, 0)

    def run_on_ndd_stream() -> None:
        with OnStream(ndd_stream):
            pass

    run_on_ndd_stream()
    BACKEND._wait(consumer, ndd_stream, only_new=True)
    assert len(consumer.waited) == 1 and recorded == [ndd_stream]
    BACKEND._wait(consumer, ndd_stream, only_new=True)  # nothing new: no second wait
    assert len(consumer.waited) == 1
    t = threading.Thread(target=run_on_ndd_stream)  # another thread's work counts too
    t.start()
    t.join()
    BACKEND._wait(consumer, ndd_stream, only_new=True)
    assert len(consumer.waited) == 2
    other = _FakeStream(13, 0)  # another consumer stream has not waited yet
    BACKEND._wait(other, ndd_stream, only_new=True)
    assert len(other.waited) == 1
    BACKEND._wait(consumer, ndd_stream)  # not only_new: always
    assert len(consumer.waited) == 3
    never_used = _FakeStream(14, 0)  # no OnStream block ever: always waited for
    BACKEND._wait(consumer, never_used, only_new=True)
    BACKEND._wait(consumer, never_used, only_new=True)
    assert len(consumer.waited) == 5


def test_a_hand_off_waits_for_every_other_ndd_stream_once(fake_waits, monkeypatch):
    """``.torch()``'s waits (``_consumer_waits``): the consumer's stream waits directly for each
    stream ndd ran on, not for itself, records the tensor's use on itself, and a second
    hand-off with no ndd work in between waits for nothing."""
    from ndd_ops_cuda._backend import OnStream

    consumer, ctx_stream, graph_stream = _FakeStream(21, 0), _FakeStream(22, 0), _FakeStream(23, 0)
    monkeypatch.setattr(BACKEND, "caller_stream", lambda dev, note=False: consumer)
    monkeypatch.setattr(BACKEND, "_ndd_streams", lambda dev: [ctx_stream, consumer, graph_stream])
    for s in (ctx_stream, consumer, graph_stream):
        with OnStream(s):
            pass

    class FakeTensor:
        def __init__(self) -> None:
            self.device = types.SimpleNamespace(index=0)
            self.uses: list = []

        def record_stream(self, s: object) -> None:
            self.uses.append(s)

    images, labels = FakeTensor(), FakeTensor()
    BACKEND._consumer_waits(images)
    assert fake_waits == [ctx_stream, graph_stream] and len(consumer.waited) == 2
    BACKEND._consumer_waits(labels)
    assert len(consumer.waited) == 2
    assert images.uses == [consumer] and labels.uses == [consumer]
    with OnStream(graph_stream):  # the next step's replay
        pass
    BACKEND._consumer_waits(images)
    assert fake_waits[2:] == [graph_stream] and len(consumer.waited) == 3


@pytest.mark.requires_cuda
def test_on_stream_matches_torch_stream_context():
    from ndd_ops_cuda._backend import OnStream

    before = torch.cuda.current_stream()
    s = torch.cuda.Stream()
    with OnStream(s):
        assert torch.cuda.current_stream() == s
        x = torch.ones(1024, device="cuda") * 2  # runs on s
    s.synchronize()
    assert torch.cuda.current_stream() == before and x.sum().item() == 2048


# -- ndd.Stream, ndd.stream, default and current streams -----------------------------------


@pytest.mark.requires_cuda
def test_new_stream_and_contexts_running_on_it():
    s = ndd.stream()
    assert s.device_id == torch.cuda.current_device()
    assert s.handle == BACKEND._torch_stream(s).cuda_stream != torch.cuda.current_stream().cuda_stream
    ctx = ndd.EvalContext(cuda_stream=s)
    assert ctx.cuda_stream is s and BACKEND.stream(ctx) is BACKEND.stream(ctx)
    assert BACKEND.stream(ctx).cuda_stream == s.handle
    with ctx:
        g = ndd.as_batch(np.full((64, 256), 2, np.float32)).gpu()
        total = (g * 2).torch().sum().item()
    s.synchronize()
    assert total == 4.0 * 64 * 256
    wrapped = ndd.stream(stream=torch.cuda.Stream())  # a torch stream: run on that very object
    assert BACKEND.stream(ndd.EvalContext(cuda_stream=wrapped)) is wrapped._obj


@pytest.mark.requires_cuda
def test_default_and_current_streams_on_the_gpu():
    user = torch.cuda.Stream()
    ndd.set_default_stream(user)
    try:
        assert ndd.get_default_stream() == ndd.stream(stream=user)
        ctx = ndd.EvalContext(device_id=user.device_index)
        assert BACKEND.stream(ctx) is user and ctx.cuda_stream.handle == user.cuda_stream
    finally:
        ndd.set_default_stream(None)
    fresh = ndd.EvalContext(device_id=0)
    own = fresh.cuda_stream  # the backend's stream for the context, as an ndd.Stream
    assert own.handle == BACKEND.stream(fresh).cuda_stream != user.cuda_stream

    seen = {}

    def worker():
        with ndd.Device("gpu:0"):
            mine = ndd.stream()
            ndd.set_current_stream(mine)
            seen["ok"] = ndd.get_current_stream() is mine and ndd.EvalContext(device_id=0).cuda_stream is mine
            with ndd.EvalContext.default():
                g = ndd.as_batch(np.ones((8, 8), np.float32)).gpu()
                seen["sum"] = g.torch().sum().item()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"ok": True, "sum": 64.0}


def test_new_stream_on_the_emulation_is_a_clear_error():
    if not BACKEND.available() or torch.cuda.is_available():
        pytest.skip("checks the emulation only")
    with pytest.raises(RuntimeError, match="needs a real GPU"):
        ndd.stream()
    s = ndd.stream(stream=5, device_id=0)  # wrapping needs no GPU; running on it is a no-op here
    with ndd.EvalContext(cuda_stream=s):
        g = ndd.as_batch(np.ones((2, 2), np.uint8)).gpu()
        assert g.torch().sum().item() == 4
    s.synchronize()


@pytest.mark.requires_cuda
def test_handing_out_waits_for_user_streams():
    big = np.random.default_rng(1).random((64, 1024, 256), dtype=np.float32)
    expect = float(big.sum(dtype=np.float64))
    def worker(made: dict) -> None:
        ndd.set_current_stream(ndd.stream())  # this thread's work runs on the program's stream
        made["g"] = ndd.as_batch(big).gpu() * 2

    for _ in range(3):  # a race would show as a wrong sum now and then
        made: dict = {}
        t = threading.Thread(target=worker, args=(made,))
        t.start()
        t.join()
        s = made["g"].torch().sum()  # on torch's current stream in this thread
        assert abs(s.item() - 2 * expect) < 2e-3 * big.size


_ON_GPU_CALLS = {
    "flip": lambda x: ndd.flip(x, horizontal=1, device="gpu"),
    "resize": lambda x: ndd.resize(x, size=[3, 5], device="gpu"),
    "cast": lambda x: ndd.cast(x, dtype=ndd.float32, device="gpu"),
    "crop_mirror_normalize": lambda x: ndd.crop_mirror_normalize(x, crop=(2, 3), mean=[10.0], std=[2.0],
                                                                device="gpu"),
    "transpose": lambda x: ndd.transpose(x, perm=[2, 0, 1], device="gpu"),
    "rotate": lambda x: ndd.rotate(x, angle=30.0, device="gpu"),
    "cat": lambda x: ndd.cat(x, x, axis=0, device="gpu"),
}


@pytest.mark.parametrize("op", sorted(_ON_GPU_CALLS))
@pytest.mark.parametrize("kind", ["batch", "tensor"])
def test_device_gpu_moves_host_inputs_to_the_gpu(op, kind):
    """``device="gpu"`` on an operator whose inputs are on the CPU moves them first (as DALI
    does): the same values as the call on inputs moved with ``.gpu()``, on the GPU."""
    rng = np.random.default_rng(0)
    data = rng.integers(0, 255, (2, 6, 8, 3), np.uint8)
    x = ndd.as_batch(data, layout="HWC") if kind == "batch" else ndd.as_tensor(data[0], layout="HWC")
    got = _ON_GPU_CALLS[op](x)
    want = _ON_GPU_CALLS[op](x.gpu())
    assert got.device == want.device == ndd.Device("gpu:0")
    assert x.device == ndd.Device("cpu")  # the caller's input stays where it was
    a, b = got.cpu(), want.cpu()
    if kind == "batch":
        a, b = [np.asarray(t) for t in a], [np.asarray(t) for t in b]
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_decoders_with_device_gpu_read_host_inputs():
    """The decoders (DALI's "mixed" operators) take their encoded input from the host."""
    import cv2

    jpeg = cv2.imencode(".png", np.full((4, 5, 3), 77, np.uint8))[1]
    images = ndd.decoders.image(ndd.as_batch([jpeg, jpeg]), device="gpu")
    assert images.device == ndd.Device("gpu:0")
    assert np.asarray(images.cpu().tensors[1]).tolist() == np.full((4, 5, 3), 77).tolist()


@pytest.mark.parametrize("host", ["batch", "array"])
def test_a_gpu_input_with_a_host_input_needs_device_gpu(host):
    """With ``device=None`` an operator runs where its GPU input is; a second input on the
    host is refused with the input's index (as DALI refuses mixed arithmetic), where it used to
    reach the GPU kernel. ``device="gpu"`` moves it (and the result is the two moved by hand)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = ndd.as_batch([a, a + 1]).gpu()
    h = ndd.as_batch([a * 2, a * 3]) if host == "batch" else a * 2
    with pytest.raises(ValueError, match=r"`cat`: input 1 is on the CPU but another input is on gpu:0"):
        ndd.cat(g, h)
    got = ndd.cat(g, h, device="gpu")
    hb = h if host == "batch" else ndd.as_batch([h, h])
    want = ndd.cat(g, hb.gpu())
    assert got.device == ndd.Device("gpu:0")
    for x, y in zip(got.cpu(), want.cpu()):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("fill", ["literal", "array", "host batch", "gpu batch"])
def test_full_like_on_the_gpu_takes_its_fill_value_from_the_host(fill):
    """full_like's fill value acts as an argument: it may stay on the host (a Python number
    above all) and is copied to the device of data_like; the result equals the CPU one."""
    a = np.zeros((2, 3), np.float32)
    like = ndd.as_batch([a, a])
    value = {"literal": 3, "array": np.array([1, 2, 3], np.float32),
             "host batch": ndd.as_batch([np.float32(5), np.float32(6)]),
             "gpu batch": ndd.as_batch([np.float32(5), np.float32(6)]).gpu()}[fill]
    got = ndd.full_like(like.gpu(), value)
    want = ndd.full_like(like, value.cpu() if fill == "gpu batch" else value)
    assert got.device == ndd.Device("gpu:0")
    for x, y in zip(got.cpu(), want):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
