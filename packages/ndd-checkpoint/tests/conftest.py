"""Fixtures: small datasets of digit JPEGs (a Caffe2 LMDB and a File-reader directory)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import ndd
from ndd_readers._caffe2 import write_caffe2_lmdb

N = 22  # samples; labels are 0..N-1, so every label names its sample


def _jpeg(i: int) -> bytes:
    img = np.zeros((20, 20), np.uint8)
    cv2.putText(img, str(i % 10), (3, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.6, 255, 2)
    img[i % 20, :] = 128  # make every sample distinct
    return cv2.imencode(".jpg", img)[1].tobytes()


@pytest.fixture(scope="session")
def lmdb_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("digits_lmdb")
    write_caffe2_lmdb(str(path), [(_jpeg(i), i) for i in range(N)])
    return str(path)


@pytest.fixture(scope="session")
def jpeg_root(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("digits_files")
    for i in range(6):
        d = root / str(i % 2)
        d.mkdir(exist_ok=True)
        (d / f"{i}.jpg").write_bytes(_jpeg(i))
    return str(root)


@pytest.fixture(autouse=True)
def _fresh_current_checkpoint():
    """``ndd.checkpoint.current()`` is shared by the thread; start every test with it empty."""
    ndd.checkpoint.current().clear()
    yield
    ndd.checkpoint.current().clear()
