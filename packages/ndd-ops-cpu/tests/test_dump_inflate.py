"""dump_image on the CPU: the files it writes are read back with Pillow's PPM/PGM reader
(an independent reference) and compared exactly with the images; a few files are compared
byte for byte with PPM text written out by hand. decoders.inflate runs only on the GPU: its
tests are in ndd-ops-cuda.

The working directory of each test is a fresh temporary directory (the files go there)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

import ndd


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _images(seed: int, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, s, dtype=np.uint8) for s in shapes]


def _read(name: str) -> np.ndarray:
    """A written file decoded by Pillow, as (H, W, C)."""
    with Image.open(name) as im:
        a = np.asarray(im)
    return a if a.ndim == 3 else a[..., None]


def test_files_hold_the_images_and_the_output_is_the_input():
    shapes = [(5, 7, 3), (1, 9, 1), (8, 2, 3), (3, 3, 1)]  # ragged; RGB and gray
    imgs = _images(0, shapes)
    out = ndd.dump_image(ndd.as_batch(imgs, layout="HWC"), suffix="step")
    assert sorted(os.listdir(".")) == [f"{i}-step-0.ppm" for i in range(4)]
    for i, x in enumerate(imgs):
        np.testing.assert_array_equal(_read(f"{i}-step-0.ppm"), x)
        np.testing.assert_array_equal(np.asarray(out.tensors[i]), x)
    assert out.layout == "HWC" and out.dtype == ndd.uint8


def test_bytes_written_by_hand():
    rgb = np.array([[[1, 2, 3], [40, 50, 60]], [[255, 0, 7], [8, 9, 10]]], np.uint8)
    gray = np.array([[[0], [255], [17]]], np.uint8)
    ndd.dump_image(ndd.as_batch([rgb, gray]))
    with open("0--0.ppm", "rb") as f:
        assert f.read() == b"P3\n2 2\n255\n1 2 3 40 50 60 \n255 0 7 8 9 10 \n"
    with open("1--0.ppm", "rb") as f:
        assert f.read() == b"P2\n3 1\n255\n0 255 17 \n"


def test_empty_images_write_a_header_and_empty_rows():
    ndd.dump_image(ndd.as_batch([np.zeros((0, 3, 3), np.uint8), np.zeros((2, 0, 1), np.uint8)]))
    with open("0--0.ppm", "rb") as f:
        assert f.read() == b"P3\n3 0\n255\n"
    with open("1--0.ppm", "rb") as f:
        assert f.read() == b"P2\n0 2\n255\n\n\n"


def test_tensor_input_and_overwriting():
    a, b = _images(1, [(4, 3, 3), (2, 6, 3)])
    t = ndd.dump_image(ndd.Tensor(a), suffix="t")
    assert isinstance(t, ndd.Tensor)
    np.testing.assert_array_equal(np.asarray(t), a)
    ndd.dump_image(ndd.Tensor(b), suffix="t")  # the same name: the file is replaced
    assert os.listdir(".") == ["0-t-0.ppm"]
    np.testing.assert_array_equal(_read("0-t-0.ppm"), b)


@pytest.mark.parametrize("mode", [ndd.EvalMode.eager, ndd.EvalMode.deferred])
def test_written_at_the_call_even_when_the_output_is_unused(mode):
    (a,) = _images(2, [(3, 4, 3)])
    with mode:
        ndd.dump_image(ndd.as_batch([a]), suffix="u")
        assert os.listdir(".") == ["0-u-0.ppm"]
    np.testing.assert_array_equal(_read("0-u-0.ppm"), a)


def test_side_effects_keep_it_out_of_capture():
    s = ndd.plugins.schemas()["dump_image"]
    assert s.side_effects and not s.capturable


def test_errors():
    ok = _images(3, [(2, 2, 3)])[0]
    with pytest.raises(TypeError, match=r"`dump_image`: input type f32"):
        ndd.dump_image(ndd.as_batch([ok.astype(np.float32)]))
    with pytest.raises(ValueError, match=r"`dump_image`.*three dimensions"):
        ndd.dump_image(ndd.as_batch([ok[..., 0]]))
    with pytest.raises(ValueError, match=r"'input_layout'.*'CHW'"):
        ndd.dump_image(ndd.as_batch([ok]), input_layout="CHW")
    with pytest.raises(ValueError, match=r"`dump_image`.*sample 1 has 4 channels"):
        ndd.dump_image(ndd.as_batch([ok, np.zeros((2, 2, 4), np.uint8), ok]))
    assert os.listdir(".") == []  # nothing is written when a sample is refused
    with pytest.raises(RuntimeError, match=r"`dump_image`.*sample 0.*'0-no/such-0.ppm'"):
        ndd.dump_image(ndd.as_batch([ok]), suffix="no/such")
