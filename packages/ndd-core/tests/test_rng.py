"""Tests for ndd.random._philox and ndd.random._rng."""

from __future__ import annotations

import pickle
import random
import re
import threading

import numpy as np
import pytest

from ndd.random import _philox
from ndd.random._rng import RNG, RNGState, get_default_rng, set_seed

TWO32 = 2**32
TWO64 = 2**64
TWO128 = 2**128

# Random123 kat_vectors, philox4x32 with 10 rounds: (counter, key, output) words.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
        (0xFFFFFFFF, 0xFFFFFFFF),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]

STATE_RE = re.compile(r"^Philox_[0-9A-F]{16}_[0-9A-F]{16}:[0-9A-F]{16}_[0-3]$")


# --------------------------------------------------------------------------- #
# Independent slow reference: word-list Philox, divmod for the products, and
# a stream addressed by absolute word position.
# --------------------------------------------------------------------------- #


def ref_philox(ctr: list[int], key: list[int]) -> list[int]:
    x = list(ctr)
    k = list(key)
    for rnd in range(10):
        if rnd > 0:
            k = [(k[0] + 0x9E3779B9) % TWO32, (k[1] + 0xBB67AE85) % TWO32]
        hi0, lo0 = divmod(x[0] * 0xD2511F53, TWO32)
        hi1, lo1 = divmod(x[2] * 0xCD9E8D57, TWO32)
        x = [hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0]
    return x


class RefStream:
    """Word ``pos`` of the stream is word ``pos % 4`` of block ``pos // 4``."""

    def __init__(self, key: int, counter: int = 0, phase: int = 0) -> None:
        self.key = [key % TWO32, (key // TWO32) % TWO32]
        self.pos = counter * 4 + phase

    def next(self) -> int:
        ctr = (self.pos // 4) % TWO128
        words = [(ctr // TWO32**i) % TWO32 for i in range(4)]
        w = ref_philox(words, self.key)[self.pos % 4]
        self.pos = (self.pos + 1) % (4 * TWO128)
        return w

    def take(self, n: int) -> list[int]:
        return [self.next() for _ in range(n)]

    def skip(self, n: int) -> None:
        self.pos = (self.pos + n) % (4 * TWO128)


def seeds(count: int, salt: int) -> list[int]:
    r = random.Random(salt)
    return [r.getrandbits(64) for _ in range(count)]


# --------------------------------------------------------------------------- #
# Philox core
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_kat_scalar(ctr, key, expected):
    assert _philox.philox4x32_10(ctr, key) == expected


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_kat_reference(ctr, key, expected):
    assert ref_philox(list(ctr), list(key)) == list(expected)


def test_kat_array():
    ctr = np.array([c for c, _, _ in KAT], dtype=np.uint32)
    key = np.array([k for _, k, _ in KAT], dtype=np.uint32)
    out = _philox.philox4x32_10_array(ctr, key)
    assert out.dtype == np.uint32
    assert out.tolist() == [list(e) for _, _, e in KAT]


def test_array_broadcasting_matches_scalar():
    r = random.Random(5)
    ctr = np.array([[r.getrandbits(32) for _ in range(4)] for _ in range(6)], dtype=np.uint32)
    ctr = ctr.reshape(2, 3, 4)
    key = np.array([r.getrandbits(32), r.getrandbits(32)], dtype=np.uint32)
    out = _philox.philox4x32_10_array(ctr, key)
    assert out.shape == (2, 3, 4)
    for idx in np.ndindex(2, 3):
        assert tuple(out[idx].tolist()) == _philox.philox4x32_10(ctr[idx].tolist(), key.tolist())


def test_stream_words_matches_reference():
    key, counter, phase = 0xA4093822299F31D0, TWO64 - 3, 2
    ref = RefStream(key, counter, phase)
    assert _philox.stream_words(key, counter, phase, 50).tolist() == ref.take(50)
    assert _philox.stream_words(key, counter, phase, 0).shape == (0,)


# --------------------------------------------------------------------------- #
# Sequences vs the reference
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("seed", [*seeds(3, 1), 0, TWO64 - 1])
def test_call_matches_reference(seed):
    rng = RNG(seed)
    ref = RefStream(seed)
    for _ in range(23):
        w = rng()
        assert type(w) is int
        assert w == ref.next()


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 7, 9, 64, 200, 765, 766, 1000])  # every path, both sides of each limit
@pytest.mark.parametrize("start_phase", [0, 1, 2, 3])
def test_draw_words_matches_reference(n, start_phase):
    for seed in seeds(2, n * 4 + start_phase):
        rng = RNG(seed)
        ref = RefStream(seed)
        rng.advance(start_phase)
        ref.skip(start_phase)
        words = rng.draw_words(n)
        assert words.dtype == np.uint32
        assert words.shape == (n,)
        assert words.tolist() == ref.take(n)
        assert [rng() for _ in range(5)] == ref.take(5)


def test_draw_words_equals_calls():
    a, b = RNG(77), RNG(77)
    for n in (1, 2, 9, 64, 65, 300, 3):
        assert a.draw_words(n).tolist() == [b() for _ in range(n)]


@pytest.mark.parametrize("phase", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 1001, 2**70 + 3])
def test_advance_matches_reference(phase, n):
    seed = seeds(1, phase * 100 + n % 97)[0]
    rng = RNG(seed)
    ref = RefStream(seed)
    rng.advance(phase)
    ref.skip(phase)
    rng.advance(n)
    ref.skip(n)
    assert [rng() for _ in range(6)] == ref.take(6)
    assert rng.draw_words(100).tolist() == ref.take(100)


def test_mixed_operations_match_reference():
    seed = 0x0123456789ABCDEF
    rng, ref = RNG(seed), RefStream(seed)
    r = random.Random(9)
    for _ in range(60):
        op = r.randrange(3)
        if op == 0:
            assert rng() == ref.next()
        elif op == 1:
            n = r.choice([0, 1, 2, 7, 8, 63, 64, 65, 200])
            assert rng.draw_words(n).tolist() == ref.take(n)
        else:
            n = r.randrange(20)
            rng.advance(n)
            ref.skip(n)


@pytest.mark.parametrize("counter", [TWO128 - 2, TWO64 - 3, TWO64 * 5 - 1, TWO32 - 7, TWO32 * 9 - 1, TWO128 - TWO32 + 5])
def test_counter_carry_and_wraparound(counter):
    key = 0xFEDCBA9876543210
    state = RNGState(key, counter, 2)
    ref = RefStream(key, counter, 2)
    expected = ref.take(120)
    assert RNG(state=state).draw_words(120).tolist() == expected
    small = RNG(state=state)
    assert [small() for _ in range(120)] == expected
    chunks = RNG(state=state)
    assert np.concatenate([chunks.draw_words(k) for k in (3, 5, 100, 12)]).tolist() == expected


def test_packed_blocks_leave_a_wrapping_low_word_to_the_other_paths():
    rkeys = _philox.round_keys(0x1234)
    assert _philox.blocks_packed(TWO32 - 4, rkeys, 4) is not None
    assert _philox.blocks_packed(TWO32 - 4, rkeys, 5) is None  # counters TWO32 - 4 ... TWO32: a carry
    words = _philox.blocks_packed(TWO32 * 3 + 11, rkeys, 40)
    assert words.tolist() == _philox.stream_words(0x1234, TWO32 * 3 + 11, 0, 160).tolist()


def test_wraparound_state():
    rng = RNG(state=RNGState(1, TWO128 - 1, 3))
    rng()
    assert rng.get_state() == RNGState(1, 0, 0)
    rng = RNG(state=RNGState(1, TWO128 - 1, 3))
    rng.advance(5)
    assert rng.get_state() == RNGState(1, 1, 0)


# --------------------------------------------------------------------------- #
# Seeding, cloning, state
# --------------------------------------------------------------------------- #


def test_same_seed_same_sequence():
    assert RNG(42).draw_words(100).tolist() == RNG(42).draw_words(100).tolist()
    assert RNG(42).draw_words(100).tolist() != RNG(43).draw_words(100).tolist()


def test_seed_cut_to_64_bits():
    assert RNG(5 + TWO64).draw_words(20).tolist() == RNG(5).draw_words(20).tolist()
    assert RNG(-1).get_state() == RNGState(TWO64 - 1, 0, 0)
    assert str(RNG(0x0123456789ABCDEF).get_state()) == (
        "Philox_0123456789ABCDEF_0000000000000000:0000000000000000_0"
    )


def test_seed_must_be_int():
    with pytest.raises(TypeError):
        RNG(1.5)


def test_no_seed_is_random():
    a, b = RNG(), RNG()
    assert a.get_state().counter == 0 and a.get_state().phase == 0
    assert a.get_state() != b.get_state()


def test_seed_and_state_together():
    with pytest.raises(ValueError):
        RNG(seed=1, state=RNG(1).get_state())


def test_seed_write_only_and_reseeds():
    rng = RNG(3)
    with pytest.raises(AttributeError, match="write-only"):
        _ = rng.seed
    first = rng.draw_words(10).tolist()
    rng.seed = 3
    assert rng.get_state() == RNGState(3, 0, 0)
    assert rng.draw_words(10).tolist() == first


def test_clone_is_independent():
    rng = RNG(11)
    rng.draw_words(5)
    rng.set_state(rng.get_state())
    c = rng.clone()
    assert c is not rng
    assert c._draws == 0 and c._version == 0
    assert rng._draws == 5 and rng._version == 1
    assert c.get_state() == rng.get_state()
    expected = rng.clone().draw_words(50).tolist()
    assert c.draw_words(50).tolist() == expected
    assert rng.draw_words(50).tolist() == expected
    c.seed = 99
    assert rng.get_state() != c.get_state()


def test_state_roundtrip():
    rng = RNG(2024)
    rng.draw_words(13)
    st = rng.get_state()
    expected = rng.draw_words(37).tolist()
    rng.set_state(st)
    assert rng.draw_words(37).tolist() == expected
    rng.set_state(str(st))
    assert rng.draw_words(37).tolist() == expected
    rng.state = st
    assert rng.state == st
    assert rng.draw_words(37).tolist() == expected
    rng.state = str(st)
    assert rng.draw_words(37).tolist() == expected
    assert RNG(state=st).draw_words(37).tolist() == expected
    assert RNG(state=str(st)).draw_words(37).tolist() == expected


def test_state_fields_and_format():
    rng = RNG(0xA4093822299F31D0)
    rng.draw_words(5)
    st = rng.get_state(cuda_stream=None)
    assert isinstance(st, RNGState)
    assert (st.key, st.counter, st.phase) == (0xA4093822299F31D0, 1, 1)
    assert str(st) == "Philox_A4093822299F31D0_0000000000000000:0000000000000001_1"  # DALI's case
    assert STATE_RE.match(str(st))
    big = RNGState(0xF, (0xABC << 64) | 0x1234, 3)
    assert str(big) == "Philox_000000000000000F_0000000000000ABC:0000000000001234_3"
    assert RNGState.from_string(str(big)) == big
    lower = "Philox_000000000000000f_0000000000000abc:0000000000001234_3"  # either case is read
    assert RNGState.from_string(lower) == big and big == lower
    assert RNGState.from_string(str(big).encode()) == big  # and its bytes, as DALI takes them
    r = RNG(0)
    r.set_state(lower.encode())
    assert r.get_state() == big
    for seed in seeds(5, 3):
        r = RNG(seed)
        r.advance(seed % 1000)
        assert STATE_RE.match(str(r.get_state()))


def test_reprs():
    rng = RNG(1)
    text = "Philox_0000000000000001_0000000000000000:0000000000000000_0"
    assert repr(rng) == f"RNG(state='{text}')"
    assert repr(rng.get_state()) == f"RNGState('{text}')"
    assert eval(repr(rng.get_state()).replace("RNGState(", "RNGState.from_string(")) == text


def test_rngstate_value_semantics():
    a = RNG(8).get_state()
    b = RNG(8).get_state()
    assert a == b and a == str(a) and str(a) == a
    assert hash(a) == hash(b) == hash(str(a))
    assert {a: 1}[str(b)] == 1
    assert a != RNG(9).get_state()
    assert a != 8
    assert a.__eq__(None) is NotImplemented
    with pytest.raises(AttributeError):
        a.key = 3
    with pytest.raises(AttributeError):
        a._text = "x"
    with pytest.raises(AttributeError):
        del a.key
    assert pickle.loads(pickle.dumps(a)) == a


def test_rngstate_constructor_validation():
    with pytest.raises(ValueError):
        RNGState(TWO64, 0, 0)
    with pytest.raises(ValueError):
        RNGState(0, TWO128, 0)
    with pytest.raises(ValueError):
        RNGState(0, 0, 4)
    with pytest.raises(ValueError):
        RNGState(-1, 0, 0)
    with pytest.raises(TypeError):
        RNGState(0, 0.0, 0)


@pytest.mark.parametrize("bad", [42, None, 1.0, ["x"]])
def test_set_state_bad_type(bad):
    with pytest.raises(TypeError):
        RNG(1).set_state(bad)
    with pytest.raises(ValueError, match="Malformed"):  # bytes are read as the string's bytes
        RNG(1).set_state(b"Philox")


@pytest.mark.parametrize(
    "bad",
    [
        "garbage",
        "",
        "Philox_0000000000000001_0000000000000000:0000000000000000_4",
        "Philox_0000000000000001_0000000000000000:0000000000000000",
        "Philox_000000000000001_0000000000000000:0000000000000000_0",
        "Philox_000000000000000G_0000000000000000:0000000000000000_0",
        "Philox_0000000000000001_0000000000000000_0000000000000000_0",
        " Philox_0000000000000001_0000000000000000:0000000000000000_0",
        "Philox_0000000000000001_0000000000000000:0000000000000000_0\n",
    ],
)
def test_set_state_malformed_string(bad):
    rng = RNG(1)
    before = rng.get_state()
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        rng.set_state(bad)
    assert rng.get_state() == before
    assert rng._version == 0


# --------------------------------------------------------------------------- #
# Argument checks and capture counters
# --------------------------------------------------------------------------- #


def test_advance_and_draw_argument_checks():
    rng = RNG(1)
    with pytest.raises(ValueError):
        rng.advance(-1)
    with pytest.raises(TypeError):
        rng.advance(1.0)
    with pytest.raises(TypeError):
        rng.advance("3")
    with pytest.raises(ValueError):
        rng.draw_words(-2)
    with pytest.raises(TypeError):
        rng.draw_words(2.0)
    assert rng._draws == 0
    rng.advance(np.int64(3))
    assert rng.draw_words(np.uint8(2)).shape == (2,)
    assert rng._draws == 5


def test_draws_counter():
    rng = RNG(5)
    assert rng._draws == 0
    rng()
    rng.draw_words(7)
    rng.draw_words(500)
    rng.draw_words(0)
    rng.advance(10)
    rng.advance(0)
    assert rng._draws == 1 + 7 + 500 + 10
    rng.seed = 5
    rng.set_state(rng.get_state())
    rng.get_state()
    assert rng._draws == 518


def test_version_counter():
    rng = RNG(5)
    assert rng._version == 0
    rng()
    rng.advance(3)
    rng.get_state()
    assert rng._version == 0
    rng.seed = 6
    assert rng._version == 1
    rng.seed = 6
    assert rng._version == 2
    st = rng.get_state()
    rng.set_state(st)
    assert rng._version == 3
    rng.set_state(str(st))
    assert rng._version == 4
    rng.state = st
    assert rng._version == 5
    assert RNG(state=st)._version == 0


# --------------------------------------------------------------------------- #
# Sub-generators
# --------------------------------------------------------------------------- #


def test_from_words_layout():
    w = [
        0x11111111,
        0x22222222,
        0x33333333,
        0x44444444,
        0x55555555,
        0x66666666,
        0xFFFFFFFE,
    ]
    sub = RNG.from_words(w)
    assert str(sub.get_state()) == "Philox_2222222211111111_6666666655555555:4444444433333333_2"
    assert sub._draws == 0 and sub._version == 0
    assert RNG.from_words(np.array(w, dtype=np.uint32)).get_state() == sub.get_state()
    ref = RefStream(0x2222222211111111, 0x66666666555555554444444433333333, 2)
    assert sub.draw_words(70).tolist() == ref.take(70)


def test_from_words_from_parent():
    parent = RNG(123)
    words = parent.clone().draw_words(7).tolist()
    sub = RNG.from_words(parent.draw_words(7))
    assert parent._draws == 7
    st = sub.get_state()
    assert st.key == words[0] | words[1] << 32
    assert st.counter == words[2] | words[3] << 32 | words[4] << 64 | words[5] << 96
    assert st.phase == words[6] & 3


def test_from_words_checks():
    with pytest.raises(ValueError):
        RNG.from_words([1, 2, 3, 4, 5, 6])
    with pytest.raises(ValueError):
        RNG.from_words([1, 2, 3, 4, 5, 6, 7, 8])
    with pytest.raises(ValueError):
        RNG.from_words([1, 2, 3, 4, 5, 6, TWO32])
    with pytest.raises(ValueError):
        RNG.from_words([-1, 2, 3, 4, 5, 6, 7])
    with pytest.raises(TypeError):
        RNG.from_words([1.0, 2, 3, 4, 5, 6, 7])


# --------------------------------------------------------------------------- #
# Per-thread default generator
# --------------------------------------------------------------------------- #


def run_in_thread(fn):
    box = []
    t = threading.Thread(target=lambda: box.append(fn()))
    t.start()
    t.join()
    return box[0]


def test_default_rng_is_per_thread():
    main = get_default_rng()
    assert isinstance(main, RNG)
    assert get_default_rng() is main
    other, other_again = run_in_thread(lambda: (get_default_rng(), get_default_rng()))
    assert other is other_again
    assert other is not main
    assert other.get_state() != main.get_state()


def test_set_seed_only_affects_calling_thread():
    set_seed(1234)
    main = get_default_rng()
    before = main.get_state()
    version = main._version

    def worker():
        set_seed(1234)
        rng = get_default_rng()
        return rng, rng.draw_words(10).tolist()

    other, other_words = run_in_thread(worker)
    assert other is not main
    assert main.get_state() == before
    assert main._version == version
    assert other_words == RNG(1234).draw_words(10).tolist()


def test_set_seed_reseeds_in_place():
    rng = get_default_rng()
    version = rng._version
    set_seed(77)
    assert get_default_rng() is rng
    assert rng._version == version + 1
    assert rng.draw_words(40).tolist() == RNG(77).draw_words(40).tolist()
    set_seed(77)
    assert rng._version == version + 2
    assert [rng() for _ in range(9)] == RNG(77).draw_words(9).tolist()


# --------------------------------------------------------------------------- #
# Value transforms
# --------------------------------------------------------------------------- #


def random_words(n: int, seed: int = 0) -> np.ndarray:
    return RNG(seed).draw_words(n)


def test_to_unit_float32():
    edge = np.array([0, 0xFF, 0x100, 0x80000000, 0xFFFFFFFF], dtype=np.uint32)
    u = _philox.to_unit_float32(edge)
    assert u.dtype == np.float32
    assert u.tolist() == [0.0, 0.0, 2.0**-24, 0.5, 1.0 - 2.0**-24]
    w = random_words(100_000, 1)
    u = _philox.to_unit_float32(w)
    assert u.dtype == np.float32 and u.shape == w.shape
    assert u.min() >= 0.0 and u.max() < 1.0
    np.testing.assert_array_equal(u, (w >> 8).astype(np.float64) / 2**24)
    assert abs(u.mean() - 0.5) < 0.005


def test_to_unit_float64():
    hi = np.array([0, 0, 0xFFFFFFFF, 0x80000000], dtype=np.uint32)
    lo = np.array([0, 0x800, 0xFFFFFFFF, 0], dtype=np.uint32)
    u = _philox.to_unit_float64(hi, lo)
    assert u.dtype == np.float64
    assert u.tolist() == [0.0, 2.0**-53, 1.0 - 2.0**-53, 0.5]
    w = random_words(20_000, 2)
    u = _philox.to_unit_float64(w[0::2], w[1::2])
    expected = [(int(a) * 2**21 + int(b) // 2**11) / 2**53 for a, b in zip(w[0::2], w[1::2], strict=True)]
    assert u.tolist() == expected
    assert u.min() >= 0.0 and u.max() < 1.0


def test_uniform():
    w = random_words(100_000, 3)
    x = _philox.uniform(w, -2.0, 3.0)
    assert x.dtype == np.float32
    u = ((w >> 8).astype(np.float32)) * np.float32(2**-24)
    expected = np.float32(-2.0) + (np.float32(3.0) - np.float32(-2.0)) * u
    np.testing.assert_array_equal(x, expected)
    assert x.min() >= -2.0 and x.max() < 3.0
    assert abs(x.mean() - 0.5) < 0.03
    lo = np.array([[0.0], [10.0]], dtype=np.float32)
    hi = np.array([[1.0], [20.0]], dtype=np.float32)
    y = _philox.uniform(w[:10], lo, hi)
    assert y.shape == (2, 10) and y.dtype == np.float32
    assert (y[0] >= 0).all() and (y[0] < 1).all() and (y[1] >= 10).all() and (y[1] < 20).all()


def test_normal():
    w = random_words(200_000, 4)
    a, b = w[0::2], w[1::2]
    z = _philox.normal(a, b)
    assert z.dtype == np.float32 and z.shape == (100_000,)
    assert np.isfinite(z).all()
    # Standard error of the mean is 1/sqrt(1e5) ~= 0.0032; of the std ~= 0.0022.
    assert abs(z.mean()) < 0.02
    assert abs(z.std() - 1.0) < 0.02
    assert np.abs(z).max() <= np.sqrt(64 * np.log(2)) + 1e-6
    u1 = (a.astype(np.float64) + 1) / 2**32
    u2 = b.astype(np.float64) / 2**32
    expected = (np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(np.float32)
    np.testing.assert_array_equal(z, expected)
    edge = _philox.normal([0xFFFFFFFF, 0], [0, 0])
    assert edge[0] == 0.0
    assert edge[1] == np.float32(np.sqrt(64 * np.log(2)))


def test_bounded_int():
    w = random_words(100_000, 5)
    for n in (1, 2, 10, 1000, 2**31 + 7):
        k = _philox.bounded_int(w, n)
        assert k.dtype == np.int64 and k.shape == w.shape
        assert k.min() >= 0 and k.max() < n
        expected = [(int(x) * n) >> 32 for x in w[:200]]
        assert k[:200].tolist() == expected
    np.testing.assert_array_equal(_philox.bounded_int(w, 2**32), w.astype(np.int64))
    np.testing.assert_array_equal(_philox.bounded_int(w, 16), (w >> 28).astype(np.int64))
    counts = np.bincount(_philox.bounded_int(w, 10), minlength=10)
    assert (np.abs(counts - 10_000) < 600).all()  # ~6 sigma
    per_sample = _philox.bounded_int(w[:6].reshape(2, 3), np.array([[2], [5]]))
    assert per_sample.shape == (2, 3)
    assert (per_sample[0] < 2).all() and (per_sample[1] < 5).all()
    for bad in (0, -1, 2**32 + 1, 2**64, np.array([3, 0])):
        with pytest.raises(ValueError):
            _philox.bounded_int(w[:2], bad)
    with pytest.raises(TypeError):
        _philox.bounded_int(w[:2], 2.5)


def test_transforms_are_pure():
    w = random_words(64, 6)
    copy = w.copy()
    assert np.array_equal(_philox.normal(w, w[::-1]), _philox.normal(copy, copy[::-1]))
    assert np.array_equal(_philox.uniform(w, 0, 1), _philox.uniform(copy, 0, 1))
    np.testing.assert_array_equal(w, copy)
