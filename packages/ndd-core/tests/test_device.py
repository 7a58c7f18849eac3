"""Device, device context and the CPU thread pool."""

import os
import subprocess
import sys
import threading

import pytest

import ndd


def test_parse_and_print():
    assert str(ndd.Device("cpu")) == "cpu" and repr(ndd.Device("cpu")) == "Device(device_type='cpu')"
    g = ndd.Device("gpu:1")
    assert g.device_type == "gpu" and g.device_id == 1 and str(g) == "gpu:1"
    assert repr(ndd.Device("gpu")) == "Device(device_type='gpu', device_id=0)"
    assert ndd.Device("gpu", 2) == ndd.Device("gpu:2") == "gpu:2"
    assert ndd.device("cpu") == ndd.Device("cpu")


@pytest.mark.parametrize("bad", ["tpu", "gpu:x", "gpu:-1", "cuda"])
def test_invalid_names(bad):
    with pytest.raises(ValueError):
        ndd.Device(bad)


def test_invalid_ids():
    with pytest.raises(ValueError):
        ndd.Device("gpu:1", 2)
    with pytest.raises(ValueError):
        ndd.Device("cpu", 3)


def test_mixed_teaches():
    with pytest.raises(ValueError, match='use device="gpu"'):
        ndd.Device("mixed")


def test_context_is_thread_local():
    seen = []
    with ndd.Device("gpu:0"):
        assert ndd.Device.current() == ndd.Device("gpu:0")
        t = threading.Thread(target=lambda: seen.append(ndd.Device.current()))
        t.start()
        t.join()
        with ndd.Device("cpu"):
            assert ndd.Device.current().device_type == "cpu"
        assert ndd.Device.current().device_type == "gpu"
    assert ndd.Device.current() == ndd.Device("cpu")
    assert seen == [ndd.Device("cpu")]


def test_num_threads():
    old = ndd.get_num_threads()
    try:
        ndd.set_num_threads(3)
        assert ndd.get_num_threads() == 3
        with pytest.raises(ValueError):
            ndd.set_num_threads(0)
    finally:
        ndd.set_num_threads(old)


def _threads_in_fresh_process(env):
    code = "import ndd; print(ndd.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_num_threads_default_from_env_and_affinity():
    env = {k: v for k, v in os.environ.items() if k not in ("NDD_NUM_THREADS", "DALI_NUM_THREADS")}
    assert _threads_in_fresh_process(env) == len(os.sched_getaffinity(0))
    assert _threads_in_fresh_process(dict(env, DALI_NUM_THREADS="3")) == 3  # DALI's variable
    assert _threads_in_fresh_process(dict(env, DALI_NUM_THREADS="3", NDD_NUM_THREADS="5")) == 5


def test_thread_pool_map_order():
    pool = ndd.ThreadPool(2)
    assert pool.map(lambda x: x * x, range(10)) == [x * x for x in range(10)]
    pool.shutdown()
