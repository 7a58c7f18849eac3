"""The sample-stream engine: DALI's epoch, shard, padding and shuffle rules.

Expected sequences are written out by hand from the rules (reference section 5) or come
from ``reference_epochs`` below, a deliberately naive restatement of those rules that
materialises the whole stream as a Python list.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ndd_readers._stream import Cursor, SampleStream, buffer_shuffle, dali_list_order


def run(stream: SampleStream, batch_size: int, epochs: int, cur: Cursor | None = None):
    """Epochs as lists of batches (lists of indices), and the final cursor."""
    cur = cur or Cursor()
    out = []
    for _ in range(epochs):
        steps = list(stream.epoch_steps(cur, batch_size))
        cur = steps[-1][1]
        out.append([idx for idx, _ in steps])
    return out, cur


def reference_epochs(n, shards, shard, stick, pad, bs, epochs):
    """The rules, naively: P, shard ranges, a materialised stream, padding by repetition."""
    p = shards * math.ceil(n / shards) if pad else n

    def size(k):
        return (k + 1) * p // shards - k * p // shards

    def data(k):
        return list(range(k * n // shards, (k + 1) * n // shards))

    if stick:
        stream = data(shard) * (4 * epochs * bs + 4)
    else:
        stream = list(range(shard * n // shards, n)) + list(range(n)) * (4 * epochs * bs + 4)
    out, pos = [], 0
    for e in range(epochs):
        k = shard if stick else (shard + e) % shards
        count = math.ceil(size(k) / bs) * bs
        if pad:
            d = data(k)
            seq = d + [d[-1]] * (count - len(d))
        else:
            seq = stream[pos:pos + count]
            pos += count
        out.append([seq[i:i + bs] for i in range(0, count, bs)])
    return out


def labels_of(epochs, labels):
    return [[[labels[i] for i in b] for b in batches] for batches in epochs]


# -- the observed DALI sequences (10 files, labels 0x5 and 1x5, batch 4) -----------------
LABELS = [0] * 5 + [1] * 5


def test_observed_without_padding():
    got, _ = run(SampleStream(10), 4, 2)
    assert labels_of(got, LABELS) == [
        [[0, 0, 0, 0], [0, 1, 1, 1], [1, 1, 0, 0]],
        [[0, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0]],
    ]


def test_observed_with_padding():
    got, _ = run(SampleStream(10, pad_last_batch=True), 4, 3)
    assert labels_of(got, LABELS) == [[[0, 0, 0, 0], [0, 1, 1, 1], [1, 1, 1, 1]]] * 3
    assert got[0][-1] == [8, 9, 9, 9]


def test_sample_mode_yields_exactly_the_shard():
    got, _ = run(SampleStream(10, num_shards=3, shard_id=2), 1, 3)
    # shard sizes 3, 3, 4 (positions [0,3) [3,6) [6,10)); shard 2, then 0, then 1
    assert [sum(b, []) for b in got] == [[6, 7, 8, 9], [0, 1, 2], [3, 4, 5]]


# -- hand-derived shard layouts (N = 10, batch 4) ---------------------------------------
HAND = [
    # (shards, shard, stick, pad, expected epochs as flat index lists)
    (2, 0, False, False, [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 0, 1, 2, 3]]),
    (2, 0, False, True, [[0, 1, 2, 3, 4, 4, 4, 4], [5, 6, 7, 8, 9, 9, 9, 9], [0, 1, 2, 3, 4, 4, 4, 4]]),
    (2, 1, True, False, [[5, 6, 7, 8, 9, 5, 6, 7], [8, 9, 5, 6, 7, 8, 9, 5], [6, 7, 8, 9, 5, 6, 7, 8]]),
    (2, 1, True, True, [[5, 6, 7, 8, 9, 9, 9, 9]] * 3),
    (3, 1, False, False, [[3, 4, 5, 6], [7, 8, 9, 0], [1, 2, 3, 4]]),
    (3, 0, False, True, [[0, 1, 2, 2], [3, 4, 5, 5], [6, 7, 8, 9]]),
    (3, 2, True, False, [[6, 7, 8, 9], [6, 7, 8, 9], [6, 7, 8, 9]]),
    (3, 0, True, True, [[0, 1, 2, 2]] * 3),
    (8, 3, False, False, [[3, 4, 5, 6], [7, 8, 9, 0], [1, 2, 3, 4]]),
    (8, 3, False, True, [[3, 4, 4, 4], [5, 5, 5, 5], [6, 6, 6, 6]]),
    (8, 7, True, False, [[8, 9, 8, 9], [8, 9, 8, 9], [8, 9, 8, 9]]),
    (8, 7, False, True, [[8, 9, 9, 9], [0, 0, 0, 0], [1, 1, 1, 1]]),
]


@pytest.mark.parametrize("shards,shard,stick,pad,expected", HAND)
def test_hand_derived_layouts(shards, shard, stick, pad, expected):
    s = SampleStream(10, num_shards=shards, shard_id=shard, stick_to_shard=stick, pad_last_batch=pad)
    got, _ = run(s, 4, len(expected))
    assert [sum(b, []) for b in got] == expected
    assert all(len(b) == 4 for e in got for b in e)


@pytest.mark.parametrize("n", [7, 10, 13])
@pytest.mark.parametrize("shards", [1, 2, 3, 8])
@pytest.mark.parametrize("stick,pad", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("bs", [1, 3, 4])
def test_against_reference(n, shards, stick, pad, bs):
    if shards > n:
        return
    for shard in range(shards):
        s = SampleStream(n, num_shards=shards, shard_id=shard, stick_to_shard=stick, pad_last_batch=pad)
        got, _ = run(s, bs, 2 * shards + 1)
        assert got == reference_epochs(n, shards, shard, stick, pad, bs, 2 * shards + 1)


def test_padded_shards_partition_the_dataset_each_epoch():
    for e in range(3):
        seen = []
        for shard in range(3):
            s = SampleStream(10, num_shards=3, shard_id=shard, pad_last_batch=True)
            got, _ = run(s, 4, e + 1)
            seen += sorted(set(sum(got[e], [])))
        assert sorted(seen) == list(range(10))


def test_metadata():
    s = SampleStream(10, num_shards=3, shard_id=1, pad_last_batch=True, stick_to_shard=True)
    assert s.metadata() == {"epoch_size": 10, "epoch_size_padded": 12, "number_of_shards": 3,
                            "shard_id": 1, "pad_last_batch": True, "stick_to_shard": True}
    assert SampleStream(10, num_shards=3).metadata()["epoch_size_padded"] == 10


@pytest.mark.parametrize("kw,match", [
    (dict(num_shards=0), "num_shards"),
    (dict(num_shards=2, shard_id=2), "shard_id"),
    (dict(shard_id=-1), "shard_id"),
    (dict(num_shards=11), "num_shards=11 is larger than the dataset"),
    (dict(initial_fill=-1), "initial_fill"),
    (dict(random_shuffle=True, shuffle_after_epoch=True), "shuffle_after_epoch and random_shuffle"),
    (dict(stick_to_shard=True, shuffle_after_epoch=True), "shuffle_after_epoch and stick_to_shard"),
])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        SampleStream(10, **kw)


def test_initial_fill_zero_reads_in_order():
    """DALI accepts initial_fill=0: a buffer of one sample, the source order."""
    s = SampleStream(10, random_shuffle=True, initial_fill=0, seed=1)
    assert sum(run(s, 5, 1)[0][0], []) == list(range(10))


# -- shuffling ----------------------------------------------------------------------------
def test_buffer_shuffle_window_and_permutation():
    src = np.arange(100)
    for fill in (1, 5, 100, 1000):
        out = buffer_shuffle(src, fill, np.random.default_rng(3))
        assert sorted(out.tolist()) == list(range(100))
        # the element at step t was among the first t + fill source elements
        assert all(v < t + fill for t, v in enumerate(out.tolist()))
    assert buffer_shuffle(src, 1, np.random.default_rng(0)).tolist() == list(range(100))


def test_random_shuffle_is_seeded_and_keeps_passes_apart():
    def epochs(seed, pad):
        return run(SampleStream(10, random_shuffle=True, seed=seed, pad_last_batch=pad), 5, 4)[0]

    a, b, c = epochs(7, False), epochs(7, False), epochs(8, False)
    assert a == b and a != c
    flat = [sum(e, []) for e in a]
    assert all(sorted(f) == list(range(10)) for f in flat)  # bs 5 divides 10: epoch == pass
    assert flat[0] != flat[1]  # a new order each pass
    padded = run(SampleStream(10, random_shuffle=True, seed=7, pad_last_batch=True), 4, 2)[0]
    for e in padded:
        seq = sum(e, [])
        assert sorted(seq[:10]) == list(range(10)) and seq[10:] == [seq[9]] * 2


@pytest.mark.parametrize("n,shards,fill", [(13, 3, 1024), (13, 3, 2), (20, 4, 3), (7, 7, 1024), (10, 1, 4)])
def test_random_shuffle_keeps_each_shards_block_apart(n, shards, fill):
    """Shuffling never mixes two shards' blocks: in sample mode every epoch of every shard
    is a permutation of its own block (so the shards partition the data each epoch), and
    in batch mode the stream is the unshuffled stream with each block run permuted."""
    for shard in range(shards):
        stream = SampleStream(n, num_shards=shards, shard_id=shard, random_shuffle=True,
                              initial_fill=fill, seed=3)
        got, _ = run(stream, 1, 2 * shards)
        for e, batches in enumerate(got):
            k = (shard + e) % shards
            assert sorted(sum(batches, [])) == list(range(k * n // shards, (k + 1) * n // shards))
        for bs in (3, 4):
            stream = SampleStream(n, num_shards=shards, shard_id=shard, random_shuffle=True,
                                  initial_fill=fill, seed=3)
            shuffled = sum(sum(run(stream, bs, 2 * shards)[0], []), [])
            plain = sum(sum(reference_epochs(n, shards, shard, False, False, bs, 2 * shards), []), [])
            assert len(shuffled) == len(plain)
            at = 0
            while at < len(plain):  # runs of one block in the unshuffled stream
                k = ((plain[at] + 1) * shards - 1) // n
                end = at
                while end < len(plain) and ((plain[end] + 1) * shards - 1) // n == k \
                        and (end == at or plain[end] == plain[end - 1] + 1):
                    end += 1
                whole = end - at == (k + 1) * n // shards - k * n // shards
                if whole:  # a complete run is a permutation of the block
                    assert sorted(shuffled[at:end]) == plain[at:end]
                else:  # the run cut by the end of what was read: samples of that block only
                    assert set(shuffled[at:end]) <= set(range(k * n // shards, (k + 1) * n // shards))
                at = end


def test_file_list_order_is_dalis():
    """The one-off shuffle of a file list, against the orders DALI 2.4's File reader gives
    with random_shuffle=True and initial_fill=1 (which then reads the list in order)."""
    assert dali_list_order(13).tolist() == [10, 0, 2, 11, 7, 1, 6, 5, 3, 9, 8, 4, 12]
    assert dali_list_order(120)[:20].tolist() == [30, 17, 59, 53, 56, 14, 20, 99, 107, 78, 50, 4, 46, 57,
                                         97, 40, 7, 113, 82, 106]
    assert dali_list_order(1000)[:20].tolist() == [30, 812, 788, 887, 165, 659, 376, 711, 318, 513, 613,
                                          324, 188, 557, 535, 643, 678, 549, 818, 333]
    # past 65,536 entries each swap position takes its own draw
    assert dali_list_order(70001)[:20].tolist() == [14022, 67989, 4767, 37944, 42924, 24812, 34586, 65034,
                                           43369, 11806, 36280, 25885, 13115, 26000, 20822, 18066,
                                           20630, 61995, 10370, 24079]
    assert sorted(dali_list_order(70001).tolist()) == list(range(70001))
    assert dali_list_order(1).tolist() == [0] and dali_list_order(0).tolist() == []


def test_file_list_order_applies_before_sharding():
    """With the list shuffled once, the shards are DALI's: consecutive blocks of that order."""
    order = dali_list_order(13).tolist()
    for shard in range(3):
        s = SampleStream(13, num_shards=3, shard_id=shard, random_shuffle=True, initial_fill=1,
                         shuffle_list=True)
        got = [sum(e, []) for e in run(s, 1, 3)[0]]
        for e in range(3):
            k = (shard + e) % 3
            assert got[e] == order[k * 13 // 3:(k + 1) * 13 // 3]
    plain = SampleStream(13, random_shuffle=False, shuffle_list=True)  # only with random_shuffle
    assert sum(run(plain, 13, 1)[0][0], []) == list(range(13))


def test_random_seed_minus_one_is_random_but_recorded():
    s1, s2 = SampleStream(50, random_shuffle=True), SampleStream(50, random_shuffle=True)
    assert s1.seed != s2.seed
    s3 = SampleStream(50, random_shuffle=True, seed=1)
    s3.restore(s1.state(Cursor()))
    assert run(s3, 5, 2)[0] == run(s1, 5, 2)[0]


def test_shuffle_after_epoch_same_permutation_on_every_rank():
    for e in range(3):
        seen = []
        for shard in range(2):
            s = SampleStream(10, num_shards=2, shard_id=shard, pad_last_batch=True, shuffle_after_epoch=True)
            got, _ = run(s, 5, e + 1)
            seen += sum(got[e], [])
        assert sorted(seen) == list(range(10))
    # without padding too (shards of 3, 3 and 4): every epoch's shards split that epoch's
    # permutation (DALI 2.4 does; ndd's shards read blocks of different passes before)
    got = [run(SampleStream(10, num_shards=3, shard_id=k, shuffle_after_epoch=True), 1, 5)[0] for k in range(3)]
    for e in range(5):
        assert sorted(sum((sum(got[k][e], []) for k in range(3)), [])) == list(range(10)), e
    s = SampleStream(10, shuffle_after_epoch=True)
    got, _ = run(s, 10, 3)
    orders = [sum(e, []) for e in got]
    assert all(sorted(o) == list(range(10)) for o in orders) and len({tuple(o) for o in orders}) == 3


# -- state --------------------------------------------------------------------------------
CONFIGS = [
    dict(),
    dict(pad_last_batch=True),
    dict(num_shards=3, shard_id=1),
    dict(num_shards=3, shard_id=2, stick_to_shard=True),
    dict(num_shards=3, shard_id=0, pad_last_batch=True),
    dict(random_shuffle=True, initial_fill=4, seed=5),
    dict(random_shuffle=True, initial_fill=4, seed=5, num_shards=2, shard_id=1, pad_last_batch=True),
    dict(shuffle_after_epoch=True, num_shards=2),
]


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("bs", [1, 4])
def test_resume_from_every_step(cfg, bs):
    full = SampleStream(11, **cfg)
    steps, cur = [], Cursor()
    for _ in range(4):
        steps += full.epoch_steps(cur, bs)
        cur = steps[-1][1]
    for m in range(len(steps)):
        state = full.state(steps[m - 1][1] if m else Cursor())
        other = SampleStream(11, **{**cfg, "seed": 99})
        cur = other.restore(state)
        rest = []
        while len(rest) < len(steps) - m:
            more = list(other.epoch_steps(cur, bs))
            rest += [idx for idx, _ in more]
            cur = more[-1][1]
        assert rest[:len(steps) - m] == [s[0] for s in steps[m:]]


def test_restore_rejects_another_configuration():
    state = SampleStream(10, num_shards=2).state(Cursor(1, 4, 12))
    with pytest.raises(ValueError, match="num_shards=2"):
        SampleStream(10).restore(state)
    with pytest.raises(ValueError, match="Corrupted"):
        SampleStream(10).restore({"epoch": 1})


def test_groups_make_shuffle_after_epoch_move_whole_files():
    """With ``groups`` (the samples of each file), shuffle_after_epoch permutes files, keeping
    each file's samples in order, and may be combined with random_shuffle."""
    groups = [3, 1, 4, 2]
    blocks = [[0, 1, 2], [3], [4, 5, 6, 7], [8, 9]]
    s = SampleStream(10, shuffle_after_epoch=True, groups=groups)
    seen = set()
    for g in range(8):
        order = s._permutation(g).tolist()
        assert sorted(order) == list(range(10))
        starts = [b[0] for b in blocks]
        k, files = 0, []
        while k < 10:
            f = starts.index(order[k])
            assert order[k:k + len(blocks[f])] == blocks[f]
            files.append(f)
            k += len(blocks[f])
        seen.add(tuple(files))
    assert len(seen) > 1
    SampleStream(10, shuffle_after_epoch=True, random_shuffle=True, groups=groups)
    with pytest.raises(ValueError, match="cannot be both true"):
        SampleStream(10, shuffle_after_epoch=True, random_shuffle=True)
    with pytest.raises(ValueError, match="the groups hold 9 samples, not 10"):
        SampleStream(10, groups=[3, 6])
