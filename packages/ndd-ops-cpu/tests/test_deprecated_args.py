"""DALI 2.4's deprecated arguments of the image operators: accepted with a DeprecationWarning,
an alias doing what its new name does, an argument no longer used changing nothing."""

import io

import numpy as np
import pytest
from PIL import Image

import ndd
from ndd.types import DALIImageType


@pytest.fixture
def image():
    rng = np.random.default_rng(0)
    return ndd.tensor(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8), layout="HWC")


@pytest.mark.parametrize("call", [
    lambda x, **k: ndd.crop(x, crop=(6, 4), **k),
    lambda x, **k: ndd.crop_mirror_normalize(x, crop=(6, 4), mean=[1.0], **k),
    lambda x, **k: ndd.rotate(x, angle=30.0, **k),
    lambda x, **k: ndd.warp_affine(x, matrix=[1, 0.1, 0, 0, 1, 2], **k),
], ids=["crop", "crop_mirror_normalize", "rotate", "warp_affine"])
def test_output_dtype_is_an_alias_of_dtype(image, call):
    want = np.asarray(call(image, dtype=ndd.float32))
    with pytest.warns(DeprecationWarning, match="'output_dtype' is a deprecated alias for 'dtype'"):
        got = call(image, output_dtype=ndd.float32)
    assert got.dtype == ndd.float32
    np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(TypeError, match="deprecated alias 'output_dtype'"):
        call(image, dtype=ndd.float32, output_dtype=ndd.float32)


@pytest.mark.parametrize("call", [
    lambda x, **k: ndd.crop(x, crop=(6, 4), **k),
    lambda x, **k: ndd.crop_mirror_normalize(x, crop=(6, 4), **k),
    lambda x, **k: ndd.resize(x, size=(5, 7), **k),
], ids=["crop", "crop_mirror_normalize", "resize"])
def test_image_type_is_ignored(image, call):
    want = np.asarray(call(image))
    with pytest.warns(DeprecationWarning, match="'image_type' is deprecated and no longer used"):
        got = call(image, image_type=DALIImageType.BGR)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_decoder_tuning_arguments_are_ignored():
    buf = io.BytesIO()
    Image.fromarray(np.full((6, 5, 3), 90, np.uint8)).save(buf, "PNG")
    enc = ndd.tensor(np.frombuffer(buf.getvalue(), np.uint8))
    for op in (ndd.decoders.image, ndd.decoders.image_random_crop):
        with pytest.warns(DeprecationWarning) as rec:
            out = op(enc, split_stages=True, memory_stats=True, use_chunk_allocator=True)
        assert sorted(str(w.message).split("'")[1] for w in rec) == ["memory_stats", "split_stages",
                                                                     "use_chunk_allocator"]
        assert (np.asarray(out) == 90).all()


def test_cache_arguments_belong_to_decoders_image_only():
    assert "cache_size" in ndd.decoders.image.__signature__.parameters
    buf = io.BytesIO()
    Image.fromarray(np.zeros((6, 5, 3), np.uint8)).save(buf, "PNG")
    enc = ndd.tensor(np.frombuffer(buf.getvalue(), np.uint8))
    with pytest.raises(TypeError, match="unexpected keyword argument 'cache_size'"):
        ndd.decoders.image_crop(enc, crop=(2, 2), cache_size=10)
