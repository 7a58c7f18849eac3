"""Fixtures for the capture tests: a small Caffe2 LMDB of digit JPEGs, loops to compare."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import ndd
from ndd_readers._caffe2 import write_caffe2_lmdb


def _jpegs(n: int, seed: int) -> list[tuple[bytes, int]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        img = np.zeros((28, 28), np.uint8)
        cv2.putText(img, str(i % 10), (6, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.8, 255, 2)
        img = np.clip(img.astype(np.int16) + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
        out.append((cv2.imencode(".jpg", img)[1].tobytes(), i % 10))
    return out


@pytest.fixture(scope="session")
def lmdb_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("digits")
    write_caffe2_lmdb(str(path), _jpegs(40, 0))
    return str(path)


@pytest.fixture(params=list(ndd.EvalMode), ids=lambda m: m.name)
def eval_mode(request):
    """Every capture test runs under each EvalMode (capture is independent of it)."""
    with request.param:
        yield request.param
