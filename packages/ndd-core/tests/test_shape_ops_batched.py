"""squeeze / reshape / expand_dims on whole batches: a dense batch is reshaped without a
copy, a list of same-shape samples is stacked once, a ragged list keeps the per-sample path;
the values are the same either way."""

import numpy as np
import pytest

import ndd

LABELS = [np.array([i % 10], np.int32) for i in range(64)]


def run(fn, *args, **kw):
    with ndd.EvalMode.sync_cpu:
        out = fn(*args, **kw)
        out.evaluate()
    return out


def as_list_batch(arrays, layout=None):
    """A Batch that holds a per-sample list (what a reader used to deliver; ``batch`` would
    copy same-shape samples into one dense array)."""
    b = ndd.as_batch([np.array(a) for a in arrays], layout=layout)
    assert b._batch_data().dense is None
    return b


def test_squeeze_dense_is_a_view():
    dense = np.stack(LABELS)
    b = ndd.as_batch(dense)
    out = run(ndd.squeeze, b, axes=0)
    d = out._batch_data().dense
    assert d is not None and d.shape == (64,)
    assert np.shares_memory(d, b._batch_data().dense)  # zero-copy reshape
    assert [int(np.asarray(t)) for t in out] == [i % 10 for i in range(64)]


def test_squeeze_list_of_same_shape_stacks_once():
    out = run(ndd.squeeze, as_list_batch(LABELS), axes=0)
    d = out._batch_data().dense
    assert d is not None and d.shape == (64,) and d.dtype == np.int32
    np.testing.assert_array_equal(d, np.arange(64) % 10)
    cast = run(ndd.cast, out, dtype=ndd.int64)
    assert np.asarray(cast.tensors[5]).dtype == np.int64


def test_squeeze_ragged_list_stays_per_sample():
    ragged = [np.zeros((1, 3), np.float32), np.ones((1, 5), np.float32)]
    out = run(ndd.squeeze, as_list_batch(ragged), axes=[0])
    assert out.shape == [(3,), (5,)]
    np.testing.assert_array_equal(np.asarray(out.tensors[1]), np.ones(5, np.float32))


def test_squeeze_errors_on_list():
    b = as_list_batch([np.zeros((1, 4, 1)), np.zeros((1, 4, 1))])
    with pytest.raises(ValueError, match="only extent-1 dimensions can be removed"):
        run(ndd.squeeze, b, axes=1)


def test_reshape_and_expand_dims_on_same_shape_list():
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3) + i for i in range(5)]
    r = run(ndd.reshape, as_list_batch(arrays), shape=[3, -1])
    assert r._batch_data().dense is not None and r.shape == [(3, 2)] * 5
    for i, t in enumerate(r):
        np.testing.assert_array_equal(np.asarray(t), arrays[i].reshape(3, 2))
    e = run(ndd.expand_dims, as_list_batch(arrays), axes=[0])
    assert e._batch_data().dense is not None and e.shape == [(1, 2, 3)] * 5
    np.testing.assert_array_equal(np.asarray(e.tensors[4]), arrays[4][None])


def test_dense_and_list_results_agree():
    arrays = [np.arange(4, dtype=np.int16).reshape(1, 4, 1) * i for i in range(3)]
    a = run(ndd.squeeze, ndd.as_batch(np.stack(arrays)), axes=[0, 2])
    b = run(ndd.squeeze, as_list_batch(arrays), axes=[0, 2])
    assert b._batch_data().dense is not None
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
