"""ndd.ExternalSource in eager use: sources, cycling, outputs, conversion and errors."""

import numpy as np
import pytest

import ndd


def test_callable_sample_and_broadcast():
    es = ndd.ExternalSource(lambda: np.arange(4, dtype=np.int32))
    t = es()
    assert isinstance(t, ndd.Tensor) and np.asarray(t).tolist() == [0, 1, 2, 3]
    b = es(batch_size=3)
    assert isinstance(b, ndd.Batch) and b.batch_size == 3
    assert all(np.asarray(x).tolist() == [0, 1, 2, 3] for x in b)


def test_batch_items_and_size_check():
    items = [[np.zeros(2, np.float32), np.ones(3, np.float32)]]
    es = ndd.ExternalSource(lambda: items[0])
    b = es()
    assert isinstance(b, ndd.Batch) and b.shape == [(2,), (3,)]
    assert es(batch_size=2).batch_size == 2
    with pytest.raises(ValueError, match="Expected batch size 5, got 2"):
        es(batch_size=5)
    es2 = ndd.ExternalSource(lambda: ndd.as_batch(np.zeros((4, 2))))
    assert es2().batch_size == 4


def test_data_is_copied():
    a = np.zeros(3, np.int32)
    es = ndd.ExternalSource(lambda: a)
    t = es()
    a[0] = 7
    assert np.asarray(t)[0] == 0


def test_generator_and_iterable_end():
    es = ndd.ExternalSource(iter([np.int32(1), np.int32(2)]))
    assert es().item() == 1 and es().item() == 2
    with pytest.raises(StopIteration):
        es()


@pytest.mark.parametrize("cycle", [None, False, "no"])
def test_cycle_no_stays_exhausted(cycle):
    es = ndd.ExternalSource([np.int32(1), np.int32(2)], cycle=cycle)
    assert [es().item(), es().item()] == [1, 2]
    for _ in range(2):
        with pytest.raises(StopIteration):
            es()


@pytest.mark.parametrize("cycle", [True, "quiet"])
def test_cycle_quiet(cycle):
    es = ndd.ExternalSource([np.int32(1), np.int32(2)], cycle=cycle)
    assert [es().item() for _ in range(5)] == [1, 2, 1, 2, 1]


def test_cycle_raise():
    es = ndd.ExternalSource([np.int32(1), np.int32(2)], cycle="raise")
    assert [es().item(), es().item()] == [1, 2]
    with pytest.raises(StopIteration):
        es()
    assert es().item() == 1


def test_multiple_outputs_layout_dtype():
    es = ndd.ExternalSource(lambda: (np.zeros((2, 2), np.uint8), np.ones(1, np.int64)), num_outputs=2,
                            layout=["HW", None], dtype=[ndd.float32, None])
    img, label = es()
    assert img.layout == "HW" and img.dtype == ndd.float32 and label.dtype == ndd.int64
    imgs, labels = es(batch_size=4)
    assert imgs.batch_size == labels.batch_size == 4 and imgs.layout == "HW"


def test_errors():
    with pytest.raises(ValueError, match="no parameters"):
        ndd.ExternalSource(lambda x: x)
    with pytest.raises(ValueError, match="cycle"):
        ndd.ExternalSource(lambda: 1, cycle="quiet")
    with pytest.raises(ValueError, match="cycle must be"):
        ndd.ExternalSource([1], cycle="sometimes")
    with pytest.raises(ValueError, match="num_outputs"):
        ndd.ExternalSource(lambda: 1, num_outputs=0)
    with pytest.raises(ValueError, match="`layout` has 1 entries but num_outputs is 2"):
        ndd.ExternalSource(lambda: (1, 2), num_outputs=2, layout=["HW"])
    with pytest.raises(ValueError, match="`dtype` has 3 entries"):
        ndd.ExternalSource(lambda: (1, 2), num_outputs=2, dtype=[None, None, None])
    with pytest.raises(TypeError, match="callable or an iterable"):
        ndd.ExternalSource(5)
    mixed = ndd.ExternalSource(lambda: ([np.zeros(2), np.zeros(2)], np.zeros(2)), num_outputs=2)
    with pytest.raises(TypeError, match="all batches, or all samples"):
        mixed()
    wrong = ndd.ExternalSource(lambda: np.zeros(2), num_outputs=2)
    with pytest.raises(ValueError, match="expects the source to give 2 outputs"):
        wrong()


def test_role_locking_eager_then_captured():
    es = ndd.ExternalSource(lambda: np.zeros(2))
    es()
    with pytest.raises(RuntimeError, match="already used eagerly"):
        es.captured(batch_size=2)


def test_captured_without_package_names_it(monkeypatch):
    def missing(name):
        raise ImportError(name)

    monkeypatch.setattr(ndd._plugins, "extension", missing)
    with pytest.raises(RuntimeError, match="pip install ndd-capture"):
        ndd.ExternalSource(lambda: np.zeros(2)).captured(batch_size=2)


def test_batch_size_type_is_checked_at_the_call():
    es = ndd.ExternalSource(lambda: [np.zeros(2, np.uint8)] * 4)
    with pytest.raises(TypeError, match="ExternalSource: batch_size must be an int, got str '4'"):
        es.captured(batch_size="4")
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        es.captured(batch_size=0)
    with pytest.raises(TypeError, match="batch_size must be an int, got str '4'"):
        es(batch_size="4")
    assert es(batch_size=np.int64(4)).batch_size == 4


def _numbers():
    yield np.int32(1)
    yield np.int32(2)


class _Numbers:
    def __call__(self):
        yield np.int32(7)


def test_generator_function_source_is_called_for_each_pass():
    """As DALI: a generator function (or an object whose __call__ is one) is called to get
    the iterator, and again at each rewind when cycling; a generator object cannot cycle."""
    es = ndd.ExternalSource(_numbers)
    assert [es().item(), es().item()] == [1, 2]
    with pytest.raises(StopIteration):
        es()
    quiet = ndd.ExternalSource(_numbers, cycle="quiet")
    assert [quiet().item() for _ in range(5)] == [1, 2, 1, 2, 1]
    assert ndd.ExternalSource(_Numbers())().item() == 7
    with pytest.raises(TypeError, match="Cannot cycle through a generator"):
        ndd.ExternalSource(_numbers(), cycle="quiet")


def test_cycle_values_and_callables_as_dali():
    for bad in (0, 1, "yes"):
        with pytest.raises(ValueError, match="cycle"):
            ndd.ExternalSource([1], cycle=bad)
    for cycle in (False, "no", True):  # a callable takes no cycle at all
        with pytest.raises(ValueError, match="cycle"):
            ndd.ExternalSource(lambda: 1, cycle=cycle)


def test_numpy_scalars_and_narrow_int_types_are_one_sample():
    """A list of NumPy scalars (or 0-d arrays) is one sample, as a list of Python numbers;
    a Python int with a narrow integer type reads back (was a broken 0-d tensor)."""
    for item in ([np.int64(1), np.int64(2)], [np.float64(1), np.float64(2)], [np.array(1), np.array(2)]):
        out = ndd.ExternalSource(lambda item=item: item)()
        assert isinstance(out, ndd.Tensor) and out.shape == (2,)
    for dt in (ndd.uint8, ndd.int8, ndd.int16, ndd.uint16):
        t = ndd.ExternalSource(lambda: 5, dtype=dt)()
        assert t.dtype == dt and np.asarray(t).item() == 5 and np.asarray(ndd.tensor(100, dtype=dt)).ndim == 0


def test_num_outputs_takes_numpy_integers():
    """num_outputs as a NumPy integer (or True, as 1) works, as in DALI; 0, -1 or 1.5 do not."""
    pair = ndd.ExternalSource(lambda: (np.zeros(2), np.ones(2)), num_outputs=np.int64(2))()
    assert isinstance(pair, tuple) and len(pair) == 2
    assert ndd.ExternalSource(lambda: np.zeros(3), num_outputs=True)().shape == (3,)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="num_outputs must be a positive integer"):
            ndd.ExternalSource(lambda: np.zeros(3), num_outputs=bad)
