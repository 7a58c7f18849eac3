"""Zero-copy hand-off to PyTorch (torch is installable only for Python 3.11 here)."""

import numpy as np
import pytest

import ndd

torch = pytest.importorskip("torch", reason="torch is installable only for Python 3.11 here")

def test_tensor_torch_zero_copy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ndd.as_tensor(a)
    tt = t.torch()
    assert tt.data_ptr() == a.ctypes.data
    tc = t.torch(copy=True)
    assert tc.data_ptr() != a.ctypes.data and torch.equal(tc, tt)


def test_batch_torch_zero_copy_and_pad():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = ndd.as_batch(a)
    assert b.torch().data_ptr() == a.ctypes.data
    assert b.torch(copy=True).data_ptr() != a.ctypes.data
    r = ndd.batch([np.ones((2,), np.int32), np.ones((3,), np.int32)])
    with pytest.raises(ValueError, match="pad=True"):
        r.torch()
    assert r.torch(pad=True).tolist() == [[1, 1, 0], [1, 1, 1]]
    with pytest.raises(ValueError, match="needs a copy"):
        r.torch(copy=False, pad=True)


def test_op_output_torch_zero_copy():
    b = ndd.cast(ndd.as_batch(np.ones((4, 2), np.float32)), dtype=ndd.int64)
    tt = b.torch()
    assert tt.dtype == torch.int64 and tt.data_ptr() == b._batch_data().dense.ctypes.data


def test_from_torch():
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = ndd.as_tensor(src)
    src[0, 0] = 5
    assert np.asarray(t)[0, 0] == 5 and t.dtype == ndd.float32
    b = ndd.as_batch(src)
    assert b.batch_size == 2 and b.shape == [(3,), (3,)]
    assert ndd.dtype(torch.int16) == ndd.int16


def test_reversed_slice_goes_to_torch_as_a_copy():
    """torch has no negative strides: t[::-1] reaches torch as a compact copy, through
    .torch() and through DLPack (torch aborted the process on the negative-stride export)."""
    t = ndd.tensor(np.arange(8, dtype=np.int32).reshape(2, 4))[:, ::-1]
    assert t.torch().tolist() == [[3, 2, 1, 0], [7, 6, 5, 4]]
    assert torch.from_dlpack(t).tolist() == [[3, 2, 1, 0], [7, 6, 5, 4]]
    r = ndd.tensor(np.arange(4, dtype=np.float32))[::-1]
    assert r.torch(copy=False).tolist() == [3, 2, 1, 0]
    fwd = ndd.tensor(np.arange(6, dtype=np.float32))[::2]  # forward strides still share memory
    tt = fwd.torch()
    tt[0] = 42
    assert np.asarray(fwd)[0] == 42


def test_batch_of_same_shape_samples_hands_torch_its_memory():
    """ndd.batch copies same-shape samples into one array (as DALI's contiguous batches), so
    torch(copy=False) works and shares it, and an operator's result does too."""
    b = ndd.batch([np.zeros(3, np.float32), np.ones(3, np.float32)])
    t = b.torch(copy=False)
    t[0, 0] = 5
    assert np.asarray(b.tensors[0]).tolist() == [5, 0, 0]
    assert (b + 1).torch(copy=False).tolist() == [[6, 1, 1], [2, 2, 2]]
    ragged = ndd.batch([np.zeros(2, np.float32), np.ones(3, np.float32)])
    with pytest.raises(ValueError):
        ragged.torch(copy=False)


def test_torch_tensors_as_arguments():
    """A torch tensor given as an argument counts as its values, as a NumPy array does
    (DALI 2.4 takes both)."""
    x = ndd.as_tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    np.testing.assert_array_equal(np.asarray(ndd.transpose(x, perm=torch.tensor([2, 0, 1]))),
                                  np.asarray(ndd.transpose(x, perm=[2, 0, 1])))
    np.testing.assert_array_equal(np.asarray(ndd.pad(x, fill_value=torch.tensor(7.0), shape=torch.tensor([3, 3, 5]))),
                                  np.asarray(ndd.pad(x, fill_value=7.0, shape=[3, 3, 5])))
    assert ndd.reshape(x, shape=torch.tensor([4, 6])).shape == (4, 6)


def test_read_only_data_and_subscripts_hand_off_as_dali():
    """Read-only data (np.frombuffer of a file's bytes) gives torch a copy instead of raising,
    as DALI; a subscript's result is contiguous, so .torch().view() works (it was a strided
    view)."""
    t = ndd.as_tensor(np.frombuffer(b"abcd", np.uint8))
    assert t.torch().tolist() == [97, 98, 99, 100]
    x = ndd.as_tensor(np.arange(12).reshape(3, 4))
    sub = x[:, 1:3]
    assert np.asarray(sub).flags.c_contiguous
    assert sub.torch().view(-1).tolist() == [1, 2, 5, 6, 9, 10]
    b = ndd.as_batch(np.arange(24).reshape(2, 3, 4))
    assert b.slice[:, 1:3].torch().view(2, -1).tolist() == [[1, 2, 5, 6, 9, 10], [13, 14, 17, 18, 21, 22]]
