"""Tensor and Batch: constructors, metadata, selection, slicing, conversions."""

import numpy as np
import pytest

import ndd
import ndd.types as types


# -- construction and inference ---------------------------------------------------
def test_python_inference_rules():
    assert ndd.tensor(5).dtype == ndd.int32
    assert ndd.tensor(2**31).dtype == ndd.uint32
    with pytest.raises(OverflowError):
        ndd.tensor(2**32)
    assert ndd.tensor(1.5).dtype == ndd.float32
    assert ndd.tensor(True).dtype == ndd.bool
    assert ndd.tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert ndd.tensor([types.GRAY, types.RGB]).dtype == ndd.ImageType
    assert ndd.tensor(np.arange(3, dtype=np.int64)).dtype == ndd.int64
    assert ndd.tensor(np.zeros(2, np.float64)).dtype == ndd.float64
    # A list of arrays or tensors keeps their type, but what NumPy makes 64-bit follows the
    # Python rules (DALI 2.4: uint8 arrays give uint8, float16 float16, int64 arrays int32)
    u8 = np.arange(3, dtype=np.uint8)
    assert ndd.tensor([u8, u8]).dtype == ndd.uint8
    assert ndd.tensor([ndd.tensor(u8), ndd.tensor(u8)]).dtype == ndd.uint8
    assert ndd.tensor([np.zeros(2, np.float16)] * 2).dtype == ndd.float16
    assert ndd.tensor([np.uint8(3), np.uint8(4)]).dtype == ndd.uint8
    assert ndd.tensor([np.arange(2, dtype=np.int64)]).dtype == ndd.int32
    assert ndd.tensor([np.float32(1.5), 2.5]).dtype == ndd.float32
    np.testing.assert_array_equal(np.asarray(ndd.tensor([u8, u8 + 1])), [u8, u8 + 1])
    # buffer-protocol objects are their bytes or items, as in DALI
    import array

    assert np.asarray(ndd.tensor(bytearray(b"ab"))).tolist() == [97, 98]
    assert ndd.as_tensor(memoryview(np.arange(3, dtype=np.float32))).dtype == ndd.float32
    assert np.asarray(ndd.tensor(array.array("h", [1, -2]))).tolist() == [1, -2]


def test_tensor_copies_as_tensor_wraps():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ndd.tensor(a)
    w = ndd.as_tensor(a)
    a[0, 0] = 42
    assert np.asarray(t)[0, 0] == 0
    assert np.asarray(w)[0, 0] == 42
    assert ndd.as_tensor(w) is w
    assert np.asarray(ndd.as_tensor(a, dtype=ndd.int32)).dtype == np.int32


def test_tensor_metadata_and_layout():
    t = ndd.tensor(np.zeros((4, 5, 3), np.uint8), layout="HWC")
    assert (t.shape, t.ndim, t.layout, t.dtype, t.size, t.nbytes, t.itemsize) == (
        (4, 5, 3), 3, "HWC", ndd.uint8, 60, 60, 1)
    assert str(t.device) == "cpu"
    assert ndd.tensor(np.zeros(3), layout="").layout is None
    with pytest.raises(ValueError, match="layout 'HW' has 2 dims"):
        ndd.tensor(np.zeros((1, 2, 3)), layout="HW")


def test_item():
    assert ndd.tensor([[7]]).item() == 7
    with pytest.raises(ValueError, match="exactly one element"):
        ndd.tensor([1, 2]).item()


def test_tensor_indexing_matches_numpy():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    t = ndd.tensor(a)
    assert t[:] is t and t[...] is t
    for idx in [1, -1, (slice(None), slice(1, 3)), (-1, -1), (slice(1, None), slice(None, None, 2)),
                (Ellipsis, 2), (None, 1)]:
        np.testing.assert_array_equal(np.asarray(t[idx]), a[idx])
    assert t[-1, -1].item() == 23
    assert t[1].ndim == 1 and t[None].ndim == 3


def test_tensor_index_layout():
    t = ndd.tensor(np.zeros((4, 5, 3)), layout="HWC")
    assert t[1].layout == "WC"
    assert t[:, 2:4].layout == "HWC"
    assert t[..., 0].layout == "HW"


def test_tensor_index_errors():
    t = ndd.tensor(np.zeros((2, 2)))
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t[5].evaluate()


def test_batch_from_list_and_dense():
    b = ndd.batch([np.zeros((2, 3), np.float32), np.ones((4, 3), np.float32)], layout="HW")
    assert b.batch_size == 2 and b.shape == [(2, 3), (4, 3)] and b.ndim == 2 and b.layout == "HW"
    d = ndd.as_batch(np.zeros((5, 2, 2), np.uint8))
    assert d.batch_size == 5 and d.shape == [(2, 2)] * 5 and d.dtype == ndd.uint8
    assert ndd.as_batch(d) is d


def test_batch_copy_vs_wrap():
    a = np.zeros((3, 2), np.int32)
    c, w = ndd.batch(a), ndd.as_batch(a)
    a[1, 1] = 9
    assert c.tensors[1].item if True else None
    assert np.asarray(c.tensors[1])[1] == 0 and np.asarray(w.tensors[1])[1] == 9


def test_batch_errors():
    with pytest.raises(ValueError, match="needs an explicit dtype"):
        ndd.batch([])
    assert ndd.batch([], dtype=ndd.float32).batch_size == 0
    with pytest.raises(ValueError, match="scalar"):
        ndd.as_batch(5)
    # samples of other types take the first sample's type (or dtype=), as in DALI 2.4
    mixed = ndd.batch([np.zeros(2, np.int32), np.array([1.4, 300.0], np.float32)])
    assert mixed.dtype == ndd.int32 and np.asarray(mixed.tensors[1]).tolist() == [1, 300]
    assert ndd.batch([1.5, 2]).dtype == ndd.float32
    assert ndd.batch([2**31, 1]).dtype == ndd.uint32
    given = ndd.batch([1.5, 2.7, np.float32(2.7)], dtype=ndd.int32)
    assert [np.asarray(t).item() for t in given] == [1, 2, 3]  # Python floats truncate, NumPy rounds (cast)
    with pytest.raises(ValueError, match="one ndim"):
        ndd.batch([np.zeros(2), np.zeros((2, 2))])


def test_no_getitem_teaches():
    b = ndd.as_batch(np.zeros((2, 2)))
    with pytest.raises(TypeError, match=r"\.tensors\[i\].*\.slice\[\.\.\.\]"):
        b[0]
    with pytest.raises(TypeError):
        len(b)


def test_tensors_proxy_and_select():
    a = np.arange(10, dtype=np.int32).reshape(5, 2)
    b = ndd.as_batch(a)
    assert isinstance(b.tensors[1], ndd.Tensor) and np.asarray(b.tensors[-1]).tolist() == [8, 9]
    sel = b.tensors[1:4]
    assert isinstance(sel, ndd.Batch) and sel.batch_size == 3
    assert [np.asarray(t).tolist() for t in sel] == [[2, 3], [4, 5], [6, 7]]
    assert len(b.tensors) == 5 and len(b.tensors.tolist()) == 5
    sub = b.tensors[[0, 4]]
    assert isinstance(sub, ndd.Batch) and sub.batch_size == 2
    np.testing.assert_array_equal(np.asarray(ndd.as_tensor(sub)), a[[0, 4]])
    assert b.select(...) is b
    assert isinstance(b.select(2), ndd.Tensor) and b.select(slice(0, 2)).batch_size == 2
    # DALI's selection has as_batch(copy=False): ndd's (a Batch already) takes it too
    assert sel.as_batch() is sel and sel.as_batch(copy=False) is sel
    copied = sel.as_batch(copy=True)
    assert copied is not sel and [np.asarray(t).tolist() for t in copied] == [[2, 3], [4, 5], [6, 7]]
    assert not np.shares_memory(np.asarray(ndd.as_tensor(copied)), np.asarray(ndd.as_tensor(sel)))
    assert b.select([3]).batch_size == 1
    with pytest.raises(IndexError):
        b.tensors[5]
    assert [np.asarray(t).tolist() for t in b][2] == [4, 5]


def test_slice_per_sample():
    imgs = ndd.batch([np.arange(12).reshape(3, 4), np.arange(20).reshape(5, 4)])
    first_rows = imgs.slice[0]
    assert first_rows.batch_size == 2 and first_rows.shape == [(4,), (4,)]
    col = imgs.slice[:, 1]
    np.testing.assert_array_equal(np.asarray(col.tensors[1]), np.arange(20).reshape(5, 4)[:, 1])
    stops = ndd.batch([np.int32(1), np.int32(3)])
    half = imgs.slice[0:stops]
    assert half.shape == [(1, 4), (3, 4)]
    idx = ndd.batch([np.int32(2), np.int32(4)])
    picked = imgs.slice[idx, 0]
    assert [t.item() for t in picked] == [8, 16]


def test_slice_seed_guide_example():
    xy = ndd.as_batch(np.arange(32, dtype=np.float32).reshape(16, 2))
    assert xy.slice[0].batch_size == 16 and xy.slice[0].shape == [()] * 16
    assert np.asarray(xy.tensors[0]).tolist() == [0.0, 1.0]


def test_broadcast():
    b = ndd.Batch.broadcast(np.array([1, 2], np.int32), 3)
    assert b.batch_size == 3 and b.shape == [(2,)] * 3
    with pytest.raises(ValueError, match="not a Batch"):
        ndd.Batch.broadcast(b, 2)


def test_as_tensor_of_batch_pads():
    b = ndd.batch([np.ones((2,), np.int32), np.ones((3,), np.int32)])
    with pytest.raises(ValueError, match="pad=True"):
        ndd.as_tensor(b)
    t = ndd.as_tensor(b, pad=True)
    np.testing.assert_array_equal(np.asarray(t), [[1, 1, 0], [1, 1, 1]])


def test_array_protocols_on_cpu():
    t = ndd.tensor(np.arange(3, dtype=np.float32))
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert not hasattr(t, "__cuda_array_interface__")
    assert t.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(t), [0, 1, 2])
    b = ndd.as_batch(np.zeros((2, 2)))
    assert not hasattr(b, "__dlpack__") and not hasattr(b, "__array__")


def test_gpu_without_backend_is_clear(monkeypatch):
    from ndd import _plugins

    _plugins.ensure_loaded()
    monkeypatch.setattr(_plugins, "devices", {})  # as if ndd-ops-cuda were not installed
    t = ndd.tensor([1, 2])
    with pytest.raises(RuntimeError, match=r"ndd-ops-cuda"):
        t.gpu()
    assert t.cpu() is t


def test_unusable_gpu_backend_says_why(monkeypatch):
    from ndd import _plugins

    class Unusable:
        def available(self):
            return False

        def unavailable_reason(self):
            return "no CUDA device is visible"

    _plugins.ensure_loaded()
    monkeypatch.setattr(_plugins, "devices", {"gpu": Unusable()})
    with pytest.raises(RuntimeError, match="installed but unusable: no CUDA device is visible"):
        ndd.tensor([1]).gpu()
    rec = ndd.plugins.PluginRecord("ndd.devices", "gpu", "x:register", "some-dist", "1.0", True,
                                   unavailable="no CUDA device is visible")
    line = str(ndd.plugins.PluginReport([rec], [])).splitlines()[1]
    assert line.startswith("unavailable") and line.endswith("no CUDA device is visible")


def test_repr():
    assert "dtype=i32" in repr(ndd.tensor([1, 2])) and "shape=(2,)" in repr(ndd.tensor([1, 2]))
    r = repr(ndd.batch([np.zeros(2), np.zeros(3)]))
    assert "batch_size=2" in r and "(2,)" in r and "(3,)" in r


def test_batch_from_the_tensors_view_and_dali_selection_methods():
    """as_batch(b.tensors) and batch(b.tensors) give the batch back (DALI 2.4 does; ndd raised
    TypeError), and a selection takes DALI's .as_batch() / .tolist()."""
    b = ndd.batch([np.zeros(2, np.float32), np.arange(3, dtype=np.float32)])
    for again in (ndd.as_batch(b.tensors), ndd.batch(b.tensors)):
        assert again.shape == [(2,), (3,)] and np.asarray(again.tensors[1]).tolist() == [0, 1, 2]
    part = b.tensors[1:]
    assert part.as_batch() is part and part.as_batch().shape == [(3,)]
    assert [np.asarray(t).tolist() for t in part.tolist()] == [[0, 1, 2]]
