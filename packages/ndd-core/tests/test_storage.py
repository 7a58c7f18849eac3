"""BatchData storage: the lazily cut sample list and the origin of samples (ours)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ndd._storage import BatchData, LazyBatchData


def _lazy(arrays):
    made = []

    def make():
        made.append(1)
        return [a.copy() for a in arrays]
    return LazyBatchData(len(arrays), make), made


def test_lazy_samples_are_made_once_on_first_use():
    arrays = [np.arange(n, dtype=np.uint8) for n in (3, 5, 2)]
    bd, made = _lazy(arrays)
    assert len(bd) == 3 and bd.dense is None and made == []  # the length needs no samples
    assert bd.shapes() == [(3,), (5,), (2,)] and made == [1]
    assert not bd.is_uniform()
    np.testing.assert_array_equal(bd.sample(1), arrays[1])
    assert [s.tolist() for s in bd.samples] == [a.tolist() for a in arrays]
    assert made == [1]


def test_lazy_samples_stack_and_pickle_as_plain_batch_data():
    arrays = [np.full((2, 2), i, np.int16) for i in range(4)]
    bd, _ = _lazy(arrays)
    back = pickle.loads(pickle.dumps(bd))
    assert type(back) is BatchData and [s.tolist() for s in back.samples] == [a.tolist() for a in arrays]
    dense = bd.stacked()
    assert dense.shape == (4, 2, 2) and len(bd) == 4
    np.testing.assert_array_equal(bd.samples[3], arrays[3])  # now views of the stacked array
    back = pickle.loads(pickle.dumps(bd))
    assert type(back) is BatchData and back.dense.shape == (4, 2, 2)


def test_other_attributes_still_raise():
    bd, made = _lazy([np.zeros(1)])
    with pytest.raises(AttributeError, match="missing"):
        bd.missing  # noqa: B018
    assert made == []


def test_a_lazy_dense_array_is_made_once_on_first_use():
    arr = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    made = []

    def make():
        made.append(1)
        return arr.copy()

    bd = LazyBatchData(4, make, dense=True)
    assert len(bd) == 4 and made == []
    assert bd.is_uniform() and bd.shapes() == [(3, 2)] * 4 and made == [1]
    np.testing.assert_array_equal(bd.sample(2), arr[2])
    np.testing.assert_array_equal(bd.stacked(), arr)
    assert [s.tolist() for s in bd.samples] == [a.tolist() for a in arr]
    assert made == [1]
    back = pickle.loads(pickle.dumps(LazyBatchData(4, make, dense=True)))
    assert type(back) is BatchData and back.dense.tolist() == arr.tolist()


def test_origin_names_a_sample_in_this_process_only():
    bd = BatchData(samples=[np.zeros(2), np.ones(3)])
    assert bd.describe(1) == "sample 1"
    bd.origin = lambda i: f"file{i}.jpg"  # (what a reader sets; a lambda does not pickle)
    assert bd.describe(1) == "sample 1 (read from file1.jpg)"
    back = pickle.loads(pickle.dumps(bd))
    assert back.origin is None and back.describe(0) == "sample 0"
    assert [s.tolist() for s in back.samples] == [[0.0, 0.0], [1.0, 1.0, 1.0]]

    def closed(i):
        raise RuntimeError("the reader was closed")

    bd.origin = closed
    assert bd.describe(0) == "sample 0"
    assert LazyBatchData(2, lambda: [np.zeros(1)] * 2).describe(1) == "sample 1"
