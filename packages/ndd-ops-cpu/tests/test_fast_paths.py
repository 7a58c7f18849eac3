"""The ImageNet-loop fast paths against the general paths they replace, bit for bit.

* decoders.image: a batch of same-size JPEGs decoded straight into one dense array
  (``_decode._decode_dense``) against one array per sample then ``np.stack``.
* resize with Pillow: uint8 1/3-channel images through mapped NumPy buffers
  (``_resize._resample_pil_mapped``) against ``Image.fromarray`` / ``np.asarray``, and the
  dense batch output against the per-sample one.
* crop_mirror_normalize: a large dense batch written sample by sample on the thread pool
  (``_normalize._SPLIT_MIN_BYTES``) against the per-sample path.
"""

from __future__ import annotations

import numpy as np
import pytest
from ops_cpu_helpers import encode, raises, smooth_image

import ndd
from ndd import types
from ndd_ops_cpu import _decode, _normalize, _resize


def _run(fn, *args, **kw):
    with ndd.EvalMode.sync_cpu:
        out = fn(*args, **kw)
        return [np.asarray(t) for t in out]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


# -- decoders.image ---------------------------------------------------------------------

@pytest.mark.parametrize("out_type", [types.RGB, types.BGR, types.GRAY])
@pytest.mark.parametrize("size", [(40, 52), (256, 256)])
def test_decode_dense_matches_general_path(monkeypatch, rng, out_type, size):
    imgs = [smooth_image(rng, *size) for _ in range(6)]
    jpegs = ndd.batch([encode(im, "JPEG", quality=90) for im in imgs])
    calls = []
    orig = _decode._decode_dense
    monkeypatch.setattr(_decode, "_decode_dense", lambda *a: calls.append(orig(*a)) or calls[-1])
    out = _run(ndd.decoders.image, jpegs, output_type=out_type)
    assert calls[0] is not None
    monkeypatch.setattr(_decode, "_decode_dense", lambda *a: None)
    _same(out, _run(ndd.decoders.image, jpegs, output_type=out_type))


def test_decode_dense_falls_back(monkeypatch, rng):
    calls = []
    orig = _decode._decode_dense
    monkeypatch.setattr(_decode, "_decode_dense", lambda *a: calls.append(orig(*a)) or calls[-1])
    mixed = ndd.batch([encode(smooth_image(rng, 30, 40), "JPEG"), encode(smooth_image(rng, 30, 41), "JPEG")])
    assert [o.shape for o in _run(ndd.decoders.image, mixed)] == [(30, 40, 3), (30, 41, 3)]
    png = ndd.batch([encode(smooth_image(rng, 30, 40), "JPEG"), encode(smooth_image(rng, 30, 40), "PNG")])
    assert [o.shape for o in _run(ndd.decoders.image, png)] == [(30, 40, 3)] * 2
    assert calls == [None, None]


def test_decode_dense_error_names_sample(rng):
    good = encode(smooth_image(rng, 30, 40), "JPEG")
    bad = good.copy()
    bad[len(bad) // 2:] = 0  # the header survives, the scan does not
    with raises(ValueError, "cannot decode sample 1"):
        _run(ndd.decoders.image, ndd.batch([good, bad]))


# -- resize (Pillow engine) -------------------------------------------------------------

@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("kw", [
    dict(size=(41, 33)),
    dict(size=(41, 33), interp_type=types.INTERP_CUBIC),
    dict(size=(30, 70)),  # height shrinks, width grows
    dict(size=(25, 20), roi_start=(50, 5), roi_end=(10, 40)),  # flipped rows, fractional box
    dict(resize_x=-30, resize_y=35),  # flipped columns
])
def test_resize_pil_mapped_matches_fromarray(monkeypatch, rng, c, kw):
    imgs = [smooth_image(rng, 60, 45, c) for _ in range(4)]
    assert _resize._pil_map_ok()
    used = []
    orig = _resize._resample_pil_mapped
    monkeypatch.setattr(_resize, "_resample_pil_mapped", lambda *a: used.append(1) or orig(*a))
    dense = _run(ndd.resize, ndd.as_batch(np.stack(imgs), layout="HWC"), **kw)
    single = [np.asarray(ndd.resize(ndd.as_tensor(imgs[0], layout="HWC"), **kw))]
    assert used
    monkeypatch.setattr(_resize, "_PIL_MAP_OK", False)
    ref = _run(ndd.resize, ndd.as_batch(np.stack(imgs), layout="HWC"), **kw)
    _same(dense, ref)
    _same(single, ref[:1])


def test_resize_dense_output_with_other_engines(rng):
    imgs = [smooth_image(rng, 20, 24, 3, np.float32) for _ in range(3)]
    out = _run(ndd.resize, ndd.as_batch(np.stack(imgs), layout="HWC"), size=(10, 12),
               interp_type=types.INTERP_GAUSSIAN)
    for i, im in enumerate(imgs):
        np.testing.assert_array_equal(
            out[i], np.asarray(ndd.resize(ndd.as_tensor(im, layout="HWC"), size=(10, 12),
                                          interp_type=types.INTERP_GAUSSIAN)))


# -- crop_mirror_normalize --------------------------------------------------------------

@pytest.mark.parametrize("layout,out_layout,pad_output", [
    ("HWC", "CHW", False), ("HWC", "CHW", True), ("HWC", "HWC", False), ("CHW", "HWC", False), ("HW", "HW", False)])
@pytest.mark.parametrize("mirror", ["none", "all", "mixed"])
@pytest.mark.parametrize("dtype", [ndd.float32, ndd.float16])
@pytest.mark.parametrize("crop", [None, (20, 16)])
def test_cmn_split_dense_is_bit_identical(monkeypatch, rng, layout, out_layout, pad_output, mirror, dtype, crop):
    n = 7
    c = 3 if "C" in layout else None
    imgs = rng.integers(0, 256, (n, 28, 24) + ((c,) if c else ()), dtype=np.uint8)
    if layout == "CHW":
        imgs = np.ascontiguousarray(imgs.transpose(0, 3, 1, 2))
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255] if c else [0.1307 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255] if c else [0.3081 * 255]
    mir = {"none": 0, "all": 1, "mixed": ndd.batch([np.int32(i % 3 == 0) for i in range(n)])}[mirror]
    kw = dict(dtype=dtype, output_layout=out_layout, mean=mean, std=std, mirror=mir, pad_output=pad_output)
    if crop:
        kw.update(crop=crop, crop_pos_x=0.3, crop_pos_y=0.7)
    batch = ndd.as_batch(imgs, layout=layout)
    monkeypatch.setattr(_normalize, "_SPLIT_MIN_BYTES", 0)
    out = _run(ndd.crop_mirror_normalize, batch, **kw)
    monkeypatch.setattr(_normalize, "_cmn_dense", lambda *a, **k: None)
    _same(out, _run(ndd.crop_mirror_normalize, batch, **kw))
