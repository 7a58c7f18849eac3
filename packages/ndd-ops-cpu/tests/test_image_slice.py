"""decoders.image_slice: decode, then the window `slice` would cut; windows and errors as
observed in DALI 2.4, pixels against Pillow's decoding of the same PNG cut with NumPy."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import ndd
import ndd.types as types

RNG = np.random.default_rng(0)
IMG = RNG.integers(0, 255, (20, 30, 3), np.uint8)


def _png(arr: np.ndarray) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return np.frombuffer(buf.getvalue(), np.uint8)


PNG = _png(IMG)
f32 = lambda *v: ndd.as_tensor(np.array(v, np.float32))  # noqa: E731


def _slice(*inputs, **kw) -> np.ndarray:
    return np.asarray(ndd.decoders.image_slice(ndd.as_tensor(PNG), *inputs, **kw))


# (inputs, arguments, the rows and columns DALI 2.4 returned)
CASES = [
    ((f32(0.1, 0.2), f32(0.5, 0.5)), {}, (slice(4, 14), slice(3, 18))),
    ((f32(3, 4), f32(10, 5)), {"normalized_anchor": False, "normalized_shape": False}, (slice(4, 9), slice(3, 13))),
    ((), {"start": [3, 4], "end": [13, 9]}, (slice(4, 9), slice(3, 13))),
    ((), {"rel_start": [0.1, 0.2], "rel_shape": [0.5, 0.5]}, (slice(4, 14), slice(3, 18))),
    ((f32(0.5), f32(0.5)), {"axes": [0]}, (slice(10, 20), slice(0, 30))),
    ((f32(0.5), f32(0.5)), {"axis_names": "H"}, (slice(10, 20), slice(0, 30))),
    ((f32(0.11, 0.23), f32(0.47, 0.51)), {}, (slice(5, 15), slice(3, 17))),  # ends rounded: 10x14
]


@pytest.mark.parametrize("inputs,kw,window", CASES)
def test_windows_as_dali(inputs, kw, window) -> None:
    got = _slice(*inputs, **kw)
    np.testing.assert_array_equal(got, IMG[window])  # PNG is lossless: the pixels are IMG's


def test_output_type_dtype_and_layout() -> None:
    gray = ndd.decoders.image_slice(ndd.as_tensor(PNG), f32(0.1, 0.2), f32(0.5, 0.5), output_type=types.GRAY)
    ref = np.asarray(Image.open(io.BytesIO(PNG.tobytes())).convert("L"))[4:14, 3:18]
    assert gray.layout == "HWC" and np.abs(np.asarray(gray)[..., 0].astype(int) - ref).max() <= 1
    flt = ndd.decoders.image_slice(ndd.as_tensor(PNG), f32(0.1, 0.2), f32(0.5, 0.5), dtype=ndd.float32)
    assert flt.dtype == ndd.float32
    np.testing.assert_allclose(np.asarray(flt), IMG[4:14, 3:18] / 255.0, atol=1e-6)


def test_batch_with_per_sample_windows() -> None:
    other = RNG.integers(0, 255, (16, 12, 3), np.uint8)
    batch = ndd.as_batch([PNG, _png(other)])
    anchors = ndd.as_batch([np.array([0.0, 0.0], np.float32), np.array([0.25, 0.5], np.float32)])
    shapes = ndd.as_batch([np.array([1.0, 1.0], np.float32), np.array([0.5, 0.25], np.float32)])
    out = ndd.decoders.image_slice(batch, anchors, shapes)
    np.testing.assert_array_equal(np.asarray(out.tensors[0]), IMG)
    np.testing.assert_array_equal(np.asarray(out.tensors[1]), other[8:12, 3:9])
    per_arg = ndd.decoders.image_slice(batch, rel_start=[0.5, 0.5], rel_end=[1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(per_arg.tensors[1]), other[8:16, 6:12])


def test_errors() -> None:
    with pytest.raises(ValueError, match="give the window as arguments .* got 1 input"):
        ndd.decoders.image_slice(ndd.as_tensor(PNG))
    with pytest.raises(ValueError, match="got 2 input"):
        ndd.decoders.image_slice(ndd.as_tensor(PNG), f32(0.1, 0.2))
    with pytest.raises(ValueError, match="'start' cannot be combined with the anchor and shape inputs"):
        ndd.decoders.image_slice(ndd.as_tensor(PNG), f32(0.1, 0.2), f32(0.5, 0.5), start=[1, 1])
    with pytest.raises(ValueError, match="'start' and 'rel_start' are mutually exclusive"):
        ndd.decoders.image_slice(ndd.as_tensor(PNG), start=[1, 1], rel_start=[0.1, 0.1], end=[5, 5])
    # Windows DALI rejects: past the image, a negative start, an empty extent.
    for anchor, shape, msg in [((0.8, 0.8), (0.5, 0.5), "rows 16..26, columns 24..39"),
                               ((-0.1, 0.0), (0.5, 0.5), "columns -3..12"),
                               ((0.1, 0.2), (0.0, 0.5), "columns 3..3")]:
        with pytest.raises(Exception, match=f"sample 0: the window \\(.*{msg}.*not inside the 20x30x3 image"):
            ndd.decoders.image_slice(ndd.as_tensor(PNG), f32(*anchor), f32(*shape)).evaluate()


def test_window_arguments_given_per_sample() -> None:
    batch = ndd.as_batch([PNG, PNG])
    start = ndd.as_batch([np.array([2, 5], np.int64), np.array([0, 0], np.int64)])
    shape = ndd.as_batch([np.array([4, 4], np.int64), np.array([3, 3], np.int64)])
    out = ndd.decoders.image_slice(batch, start=start, shape=shape)
    np.testing.assert_array_equal(np.asarray(out.tensors[0]), IMG[5:9, 2:6])
    np.testing.assert_array_equal(np.asarray(out.tensors[1]), IMG[0:3, 0:3])
    with pytest.raises(ValueError, match="'start' and 'rel_start' are mutually exclusive"):
        ndd.decoders.image_slice(batch, start=start, rel_start=[0.1, 0.1], shape=[3, 3])
