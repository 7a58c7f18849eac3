"""The invariant proxy (reference §6.7 and the seed's API reference)."""

import copy
import enum
import json
import pickle

import numpy as np

import ndd
from ndd_capture._invariant import invariant, is_invariant, unwrap_invariant, unwrap_invariants


class Cfg:
    scale = 2

    def __init__(self):
        self.size = (64, 64)
        self.angle = 30

    def get(self):
        return self.size

    @property
    def area(self):
        return self.size[0] * self.size[1]


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1


class Color(enum.Enum):
    RED = 1


def test_generated_subclass_and_plain_results():
    i = invariant(3)
    assert type(i).__name__ == "_Invariant_int" and isinstance(i, int)
    assert is_invariant(i) and invariant(i) is i
    for plain in (i + 1, 1 + i, i * 2.5, 2.5 * i, -i, abs(i), i // 2, divmod(i, 2), pow(i, 2, 5), 2**i):
        assert not is_invariant(plain)
    assert i + 1 == 4 and type(i + 1) is int and 1 + i == 4 and invariant(3) + invariant(4) == 7
    assert i == 3 and 3 == i and i != 4 and i < 4 and hash(i) == hash(3)
    assert str(i) == "3" and repr(i) == "3" and f"{i:>3}" == "  3" and f"{i:d}" == "3"
    assert float(i) == 3.0 and [0, 1, 2, 3][i] == 3 and json.dumps(i) == "3" and bool(invariant(0)) is False
    assert {3: "x"}[i] == "x"


def test_immutable_builtins():
    s = invariant("abc")
    assert isinstance(s, str) and s + "d" == "abcd" and s[0] == "a" and len(s) == 3 and "b" in s
    assert s.upper() == "ABC" and json.dumps(s) == '"abc"'
    t = invariant((1, 2))
    assert isinstance(t, tuple) and t + (3,) == (1, 2, 3) and list(t) == [1, 2] and not is_invariant(t[0])
    f = invariant(2.5)
    assert isinstance(f, float) and f * 2 == 5.0 and round(f) == 2 and is_invariant(f.real)
    fs = invariant(frozenset({1}))
    assert isinstance(fs, frozenset) and fs | {2} == {1, 2}
    assert invariant(b"x") + b"y" == b"xy"


def test_generic_proxy_types():
    b = invariant(True)
    assert type(b).__name__ == "_Invariant_bool" and isinstance(b, bool) and bool(b) and b + 1 == 2
    n = invariant(None)
    assert type(n).__name__ == "_Invariant_NoneType" and n == None and not n  # noqa: E711
    lst = invariant([1, 2])
    assert type(lst).__name__ == "_Invariant_list" and isinstance(lst, list)
    assert lst[0] == 1 and not is_invariant(lst[0]) and len(lst) == 2 and list(lst) == [1, 2]
    assert lst + [3] == [1, 2, 3] and [x for x in lst] == [1, 2]
    e = invariant(ndd.types.DALIDataType.FLOAT)
    assert e == ndd.types.DALIDataType.FLOAT and isinstance(e, ndd.types.DALIDataType) and int(e) == 9
    assert invariant(Color.RED) == Color.RED
    arr = invariant(np.arange(3))
    assert isinstance(arr, np.ndarray) and np.array_equal(arr + 1, [1, 2, 3]) and is_invariant(arr.shape)
    fn = invariant(lambda x: x * 2)
    assert callable(fn) and fn(3) == 6 and not is_invariant(fn(3))
    sl = invariant(Slotted())
    assert isinstance(sl, Slotted) and sl.a == 1 and is_invariant(sl.a)


def test_attribute_access_is_marked():
    c = invariant(Cfg())
    assert type(c).__name__ == "_Invariant_Cfg" and isinstance(c, Cfg)
    assert is_invariant(c.size) and c.size == (64, 64) and is_invariant(c.scale)
    assert is_invariant(c.get()) and is_invariant(c.get) and is_invariant(c.area)
    assert is_invariant(invariant(ndd.int32).bits) and invariant(ndd.int32) == ndd.int32
    assert not is_invariant(c.__dict__) and c.__dict__ == {"size": (64, 64), "angle": 30}
    assert "size" in dir(c)


def test_setattr_and_delattr_act_on_wrapped():
    raw = Cfg()
    c = invariant(raw)
    c.angle = 45
    assert raw.angle == 45 and c.angle == 45
    del c.angle
    assert not hasattr(raw, "angle")


def test_copy_and_pickle_keep_the_marker():
    lst = invariant([1, [2]])
    deep = copy.deepcopy(lst)
    assert is_invariant(deep) and deep == [1, [2]] and unwrap_invariant(deep) is not unwrap_invariant(lst)
    assert is_invariant(copy.copy(invariant(3)))
    back = pickle.loads(pickle.dumps(invariant((1, 2))))
    assert is_invariant(back) and back == (1, 2)


def test_unwrap():
    raw = Cfg()
    assert unwrap_invariant(invariant(raw)) is raw and unwrap_invariant(raw) is raw
    x = [1, invariant(2), (3, invariant(4)), {"k": invariant(5)}]
    u = unwrap_invariants(x)
    assert u == [1, 2, (3, 4), {"k": 5}]
    assert type(u[1]) is int and type(u[2][1]) is int and type(u[3]["k"]) is int and type(u[2]) is tuple
    assert not is_invariant(unwrap_invariants(invariant([invariant(1)]))[0])
    same = [1, (2, 3), {"a": (4,)}]
    assert unwrap_invariants(same) is same
    t = (1, 2)
    assert unwrap_invariants(t) is t


def test_unwrap_never_iterates_user_objects():
    class Listish(list):
        def __iter__(self):
            raise AssertionError("iterated")

    obj = Listish([invariant(1)])
    assert unwrap_invariants(obj) is obj


def test_a_marked_dtype_is_accepted_where_a_dtype_is():
    """Markers in constructor arguments are accepted everywhere: a marked dtype is the dtype."""
    f32 = invariant(ndd.float32)
    assert ndd.dtype(f32) is ndd.float32
    assert ndd.tensor([1, 2], dtype=invariant(ndd.int64)).dtype == ndd.int64
    assert ndd.as_tensor(np.zeros(2), dtype=f32).dtype == ndd.float32
    b = ndd.batch([np.zeros(2, np.int32)], dtype=f32)
    assert b.dtype == ndd.float32 and np.array(b.tensors[0]).dtype == np.float32
    assert ndd.Batch.broadcast(np.zeros(2), 3, dtype=f32).dtype == ndd.float32
    assert np.array(ndd.cast(ndd.tensor([1.6]), dtype=invariant(ndd.int32))).tolist() == [2]
