"""``get_property(key="source_info")`` in a captured loop gives what the eager loop gives:
the reader's per-sample text, following shuffled and padded samples through ``reshape``."""

from __future__ import annotations

import numpy as np
import pytest

import ndd


def texts(batch) -> list[str]:
    return [bytes(np.asarray(t)).decode() for t in batch.tensors]


def loop(path: str, capture: bool) -> list:
    reader = ndd.readers.Caffe2(path=path, random_shuffle=True, seed=3, num_shards=3, shard_id=2,
                                pad_last_batch=True)
    out = []
    for _ in range(2):
        for jpegs, labels in reader.next_epoch(batch_size=5, capture=capture):
            # (one operator call per line: Python 3.10 tells calls apart only by their line)
            flat = ndd.reshape(jpegs, shape=[-1])
            info = ndd.get_property(flat, key="source_info")
            label_info = ndd.get_property(labels, key="source_info")
            out.append((texts(info), texts(label_info), [len(np.asarray(t)) for t in jpegs.tensors]))
    return out


@pytest.mark.parametrize("processes", [0, 2])
def test_captured_source_info_is_the_eager_one(lmdb_path, processes):
    eager = loop(lmdb_path, False)
    ndd.capture.set_worker_processes(processes)
    try:
        captured = loop(lmdb_path, True)
        worker = ndd.capture.report().worker
    finally:
        ndd.capture.set_worker_processes(None)
    assert worker == (f"{processes} process(es)" if processes else "threads")
    assert captured == eager
    keys = {f"{lmdb_path} at key {k:08d}" for k in range(40)}  # (the fixture's 40 records)
    assert all(set(i) <= keys and lab == [""] * 5 for i, lab, _ in eager)
    assert any(len(set(i)) < len(i) for i, _, _ in eager)  # (the padded batch repeats a record)
