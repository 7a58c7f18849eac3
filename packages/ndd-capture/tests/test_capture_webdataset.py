"""Capture mode over a Webdataset reader: the same batches and random values as eager mode."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

import ndd

B = 4


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> list[str]:
    """Three archives of 7, 5 and 9 samples: a float32 vector of 3-6 values and an int32 label."""
    d = tmp_path_factory.mktemp("wds")
    paths, k = [], 0
    for a, n in enumerate((7, 5, 9)):
        path = str(d / f"a{a}.tar")
        with tarfile.open(path, "w") as t:
            for _ in range(n):
                for ext, data in (("bin", np.arange(k, k + 3 + k % 4, dtype=np.float32).tobytes()),
                                  ("cls", np.int32(k).tobytes())):
                    info = tarfile.TarInfo(f"s{k:03d}.{ext}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                k += 1
        paths.append(path)
    return paths


def run(paths, capture, **reader_args):
    reader = ndd.readers.Webdataset(paths=paths, ext=["bin", "cls"], dtypes=[ndd.float32, ndd.int32], **reader_args)
    rng = ndd.random.RNG(0)
    out = []
    for _ in range(3):
        for x, labels in reader.next_epoch(batch_size=B, capture=capture):
            y = ndd.cast(x, dtype=ndd.float64)
            noise = ndd.random.uniform(batch_size=B, range=[0.0, 1.0], rng=rng)
            out.append(([np.asarray(t).tolist() for t in y], [np.asarray(t).tolist() for t in labels],
                        [float(np.asarray(t)) for t in noise]))
    return out


@pytest.mark.parametrize("args", [dict(num_shards=3, shard_id=2, pad_last_batch=True),
                                  dict(shuffle_after_epoch=True, random_shuffle=True, seed=5, initial_fill=8)])
def test_parity_with_eager(archives, args):
    eager = run(archives, False, **args)
    assert len(eager) >= 6
    assert run(archives, True, **args) == eager
