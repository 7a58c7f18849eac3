"""The deprecated ``experimental.*`` decoder names (aliases of DALI 2.2+) run the main
operators' kernels with the same arguments, and warn; checked against Pillow's decode."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from ops_cpu_helpers import as_np, encode, pil_decode

import ndd

PAIRS = [("decoders.image", "experimental.decoders.image"),
         ("decoders.image_crop", "experimental.decoders.image_crop"),
         ("decoders.image_random_crop", "experimental.decoders.image_random_crop"),
         ("decoders.image_slice", "experimental.decoders.image_slice"),
         ("peek_image_shape", "experimental.peek_image_shape")]


def _fn(path: str):
    f = ndd
    for part in path.split("."):
        f = getattr(f, part)
    return f


@pytest.fixture
def pngs(rng):
    imgs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((20, 31), (17, 12))]
    return imgs, ndd.batch([encode(a, "PNG") for a in imgs])


@pytest.mark.parametrize("main,alias", PAIRS)
def test_alias_has_the_main_arguments(main, alias):
    pm = inspect.signature(_fn(main)).parameters
    pa = inspect.signature(_fn(alias)).parameters
    assert [n for n, p in pm.items() if p.kind == p.KEYWORD_ONLY] == \
           [n for n, p in pa.items() if p.kind == p.KEYWORD_ONLY]
    assert "Deprecated alias" in _fn(alias).__doc__


def test_aliases_decode_as_the_main_operators(pngs):
    imgs, data = pngs
    with pytest.warns(DeprecationWarning, match="experimental.decoders.image` is deprecated"):
        out = ndd.experimental.decoders.image(data)
    for got, a, enc in zip(as_np(out), imgs, data):
        np.testing.assert_array_equal(got, a)
        np.testing.assert_array_equal(got, pil_decode(np.asarray(enc)))
    with pytest.warns(DeprecationWarning):
        crop = ndd.experimental.decoders.image_crop(data, crop=(8, 6), crop_pos_x=0.0, crop_pos_y=1.0)
    for got, a in zip(as_np(crop), imgs):
        np.testing.assert_array_equal(got, a[-8:, :6])
    with pytest.warns(DeprecationWarning):
        sl = ndd.experimental.decoders.image_slice(data, start=[2, 1], shape=[5, 4])
    for got, a in zip(as_np(sl), imgs):
        np.testing.assert_array_equal(got, a[1:5, 2:7])
    with pytest.warns(DeprecationWarning):
        shp = ndd.experimental.peek_image_shape(data)
    assert [list(s) for s in as_np(shp)] == [[20, 31, 3], [17, 12, 3]]


def test_random_crop_alias_draws_as_the_main_operator(pngs):
    _, data = pngs
    with pytest.warns(DeprecationWarning):
        a = ndd.experimental.decoders.image_random_crop(data, rng=ndd.random.RNG(seed=5))
    b = ndd.decoders.image_random_crop(data, rng=ndd.random.RNG(seed=5))
    for x, y in zip(as_np(a), as_np(b)):
        np.testing.assert_array_equal(x, y)


def test_alias_checks_arguments_with_its_name(pngs):
    _, data = pngs
    with pytest.raises(TypeError, match="experimental.decoders.image"):
        ndd.experimental.decoders.image(data, bogus=1)
