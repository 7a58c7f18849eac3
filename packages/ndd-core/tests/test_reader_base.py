"""The Reader base class: mode and batch-size locking, capture hand-off, states."""

import numpy as np
import pytest

import ndd
from ndd._storage import BatchData


class Counter(ndd.Reader):
    """A toy reader over the integers 0..n-1 (epochs of n samples, every batch full)."""

    def __init__(self, n=6, **kw):
        super().__init__(**kw)
        self.n = n
        self.pos = 0

    def _take(self, k):
        vals = [(self.pos + i) for i in range(k)]
        self.pos += k
        return vals

    def _epoch(self, batch_size):
        if batch_size is None:
            for _ in range(self.n):
                yield (ndd.tensor(np.int32(self._take(1)[0])),)
            return
        for _ in range(-(-self.n // batch_size)):
            vals = np.array(self._take(batch_size), np.int32)
            yield (ndd.Batch._wrap(BatchData(dense=vals), ndd.int32, None, ndd.Device("cpu"), 0, batch_size),)

    def _run(self, batch_size):
        return self._take(batch_size or 1)

    def _state(self):
        return {"pos": self.pos}

    def _restore(self, state):
        self.pos = state["pos"]

    def get_metadata(self, batch_size=None):
        return {"epoch_size": self.n}


def values(it):
    return [[int(t) for t in out[0]] if isinstance(out[0], ndd.Batch) else int(out[0]) for out in it]


def test_batches_and_samples():
    assert values(Counter().next_epoch(batch_size=4)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert values(Counter(n=3).next_epoch()) == [0, 1, 2]


def test_batch_size_fixed_after_first_use():
    r = Counter()
    values(r.next_epoch(batch_size=2))
    with pytest.raises(ValueError, match="`batch_size` 3 is different than the `max_batch_size` 2"):
        r.next_epoch(batch_size=3)
    assert values(Counter(max_batch_size=3).next_epoch())[0] == [0, 1, 2]
    with pytest.raises(ValueError, match="`batch_size` 4 is larger than the `max_batch_size` 3"):
        Counter(max_batch_size=3).next_epoch(batch_size=4)  # as DALI


def test_mixing_modes_raises():
    r = Counter()
    values(r.next_epoch(batch_size=2))
    with pytest.raises(RuntimeError, match="Cannot mix `samples`, `batches` and `_run`/`__call__`"):
        r.next_epoch()
    with pytest.raises(RuntimeError, match="Cannot mix"):
        r(batch_size=2)
    r2 = Counter()
    assert r2(batch_size=2) == [0, 1]
    with pytest.raises(RuntimeError, match="Cannot mix"):
        r2.next_epoch(batch_size=2)


def test_capture_rules():
    r = Counter()
    values(r.next_epoch(batch_size=2))
    with pytest.raises(RuntimeError, match="previously used without capture=True"):
        r.next_epoch(batch_size=2, capture=True)
    with pytest.raises(ValueError, match="capture=True requires a non-None batch_size"):
        Counter().next_epoch(capture=True)


def test_capture_without_package_names_it(monkeypatch):
    def missing(name):
        raise ImportError(f"ndd.{name} is not available")

    monkeypatch.setattr(ndd._plugins, "extension", missing)
    with pytest.raises(RuntimeError, match="pip install ndd-capture"):
        Counter().next_epoch(batch_size=2, capture=True)


def test_abandoned_epoch_is_closed_and_next_continues():
    r = Counter(n=6)
    it = r.next_epoch(batch_size=2)
    assert values([next(it)]) == [[0, 1]]
    assert values(r.next_epoch(batch_size=2)) == [[2, 3], [4, 5], [6, 7]]
    with pytest.raises(StopIteration):
        next(it)


def test_state_round_trip_and_errors():
    r = Counter()
    with pytest.raises(RuntimeError, match="checkpointing disabled"):
        r.get_state()
    r = Counter(enable_checkpointing=True)
    with pytest.raises(RuntimeError, match="before its first iteration"):
        r.get_state()
    it = r.next_epoch(batch_size=2)
    next(it)
    s = r.get_state()
    assert isinstance(s, ndd.ReaderState) and str(s).startswith("ndd-reader-v1:")
    assert s == str(s) and hash(s) == hash(ndd.ReaderState(str(s))) and repr(s).startswith("ReaderState('")
    rest = values(it)
    fresh = Counter()
    fresh.set_state(str(s).encode())
    assert values(fresh.next_epoch(batch_size=2))[: len(rest)] == rest
    r.set_state(s)  # after iteration began: beyond DALI, resumes at that step
    assert values(r.next_epoch(batch_size=2))[0] == [2, 3]


def test_set_state_bad_input():
    r = Counter()
    with pytest.raises(TypeError, match="ReaderState"):
        r.set_state(12)
    with pytest.raises(ValueError, match="Not an ndd reader state"):
        r.set_state("garbage")
    with pytest.raises(ValueError, match="Corrupted reader state"):
        r.set_state("ndd-reader-v1:!!!!")
    other = ndd.ReaderState.from_dict("File", {"pos": 1})
    with pytest.raises(ValueError, match="belongs to a File reader, not Counter"):
        r.set_state(other)


def test_reader_runs_on_cpu_only():
    with pytest.raises(ValueError, match="Readers run on the CPU"):
        Counter(device="gpu")


def test_batch_data_shapes_without_sample_views():
    dense = BatchData(dense=np.zeros((3, 4, 5, 1), np.uint8))
    assert dense.shapes() == [(4, 5, 1)] * 3 and dense._samples is None  # no views were made
    ragged = BatchData(samples=[np.zeros((2, 3)), np.zeros((4,))])
    assert ragged.shapes() == [(2, 3), (4,)]
    assert BatchData(dense=np.zeros((0, 2))).shapes() == []
