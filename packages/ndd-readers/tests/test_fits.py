"""``ndd.experimental.readers.Fits``: image HDUs of FITS files written here with astropy.

References are independent of the reader: astropy's own reads of the files (its scaled
``getdata``, and its decompression of tile-compressed HDUs), the raw arrays the files were
written from, and small cases computed by hand from the FITS formula
``value = raw * BSCALE + BZERO`` with the output types CFITSIO (DALI's library) assigns.
All comparisons are exact.
"""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest

import ndd

fits = pytest.importorskip("astropy.io.fits")

from ndd_readers._fits import equivalent_dtype  # noqa: E402  (after the skip: astropy is optional)

Fits = ndd.experimental.readers.Fits


def write(path, *images, primary=None, scaled=None):
    """A FITS file: a primary HDU (empty unless ``primary``) and one image extension per
    array; ``scaled`` maps an extension number (1-based HDU) to (BSCALE, BZERO) set on
    the raw data as written."""
    hdus = [fits.PrimaryHDU(primary)] + [fits.ImageHDU(a) for a in images]
    fits.HDUList(hdus).writeto(path)
    if scaled:
        with fits.open(path, mode="update", do_not_scale_image_data=True) as h:
            for k, (bscale, bzero) in scaled.items():
                h[k - 1].header["BSCALE"] = bscale
                h[k - 1].header["BZERO"] = bzero
    return str(path)


def first(reader, batch_size=None):
    return next(iter(reader.next_epoch(batch_size=batch_size)))


RAW = {8: np.uint8, 16: np.int16, 32: np.int32, 64: np.int64, -32: np.float32, -64: np.float64}


@pytest.mark.parametrize("bitpix", sorted(RAW))
def test_unscaled_bitpix_tensor(tmp_path, bitpix):
    rng = np.random.default_rng(bitpix + 100)
    dt = np.dtype(RAW[bitpix])
    a = (rng.standard_normal((3, 4, 5)) * 1000).astype(dt) if dt.kind == "f" else \
        rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, (3, 4, 5), dtype=dt, endpoint=True)
    f = write(tmp_path / "a.fits", a)
    (t,) = first(Fits(files=[f]))
    assert isinstance(t, ndd.Tensor) and t.layout is None
    out = np.asarray(t)
    assert out.dtype == dt and out.dtype.isnative  # (FITS data is big-endian on disk)
    assert out.shape == (3, 4, 5) == fits.getdata(f, 1).shape  # NAXIS1 (fastest) last
    np.testing.assert_array_equal(out, a)


def test_batch_ragged_and_several_hdus(tmp_path):
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 255, s, dtype=np.uint8) for s in [(4, 5), (2, 7), (4, 5)]]
    tabs = [rng.standard_normal(n).astype(np.float32) for n in (3, 6, 1)]
    paths = [write(tmp_path / f"{k}.fits", im, tb) for k, (im, tb) in enumerate(zip(imgs, tabs))]
    b = first(Fits(files=paths, hdu_indices=[3, 2, 2]), batch_size=3)
    assert len(b) == 3 and all(isinstance(x, ndd.Batch) for x in b)
    assert b[0].dtype == ndd.float32 and b[1].dtype == ndd.uint8
    for j in range(3):
        np.testing.assert_array_equal(np.asarray(b[0].tensors[j]), tabs[j])
        np.testing.assert_array_equal(np.asarray(b[1].tensors[j]), imgs[j])
        np.testing.assert_array_equal(np.asarray(b[2].tensors[j]), imgs[j])


def test_primary_hdu_and_scalar_index(tmp_path):
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    f = tmp_path / "p.fits"
    fits.PrimaryHDU(a).writeto(f)
    np.testing.assert_array_equal(np.asarray(first(Fits(files=[str(f)], hdu_indices=1))[0]), a)
    np.testing.assert_array_equal(np.asarray(first(Fits(files=[str(f)], hdu_indices=[1]))[0]), a)


# -- BSCALE / BZERO ---------------------------------------------------------------------


@pytest.mark.parametrize("bitpix, bscale, bzero, expected", [
    (8, 1, 0, np.uint8), (8, 1, -128, np.int8), (8, 1, 32768, np.uint16), (8, 2, 1, np.int16),
    (8, -1, 0, np.int16), (8, 100000, 0, np.int32), (8, 1, 2**31, np.uint32), (8, 0.5, 3, np.float32),
    (8, 1, 3e9, np.float32), (8, 1, -1e10, np.float64), (8, 1e10, 0, np.float64),
    (16, 1, 0, np.int16), (16, 1, 32768, np.uint16), (16, 1, 5, np.int32), (16, 1, -128, np.int32),
    (16, 0.5, 3, np.float32), (16, 100000, 0, np.float64), (16, 65536, 0, np.int32),
    (32, 1, 0, np.int32), (32, 1, 2**31, np.uint32), (32, 1, 5, np.float64), (32, 0.25, 1, np.float64),
    (32, -1, 2**31, np.float64),
    (64, 1, 0, np.int64), (64, 0.5, 3, np.int64), (64, 1, 2**63, np.int64),
    (-32, 2, 1, np.float32), (-64, 2, 1, np.float64),
])
def test_equivalent_dtype_table(bitpix, bscale, bzero, expected):
    # the scaled range [bzero + bscale*min, bzero + bscale*max] of the raw type, worked out
    # by hand per row: e.g. BITPIX 16 + 5 spans -32763..32772, beyond int16 -> int32
    assert equivalent_dtype(bitpix, float(bscale), float(bzero)) == np.dtype(expected)


@pytest.mark.parametrize("bitpix, bscale, bzero, raw, expected", [
    (16, 1, 32768, [-32768, 0, 32767], np.array([0, 32768, 65535], np.uint16)),
    (8, 1, -128, [0, 128, 255], np.array([-128, 0, 127], np.int8)),
    (16, 1, 5, [-32768, 0, 32767], np.array([-32763, 5, 32772], np.int32)),
    (8, 2, 1, [0, 7, 255], np.array([1, 15, 511], np.int16)),
    (16, 0.5, 3, [-3, 0, 5], np.array([1.5, 3, 5.5], np.float32)),
    (32, 1, 2**31, [-2**31, 0, 2**31 - 1], np.array([0, 2**31, 2**32 - 1], np.uint32)),
    (32, 2, 1, [-2**31, 0, 7], np.array([-2.0**32 + 1, 1, 15], np.float64)),
    (64, 0.001, 0, [1999, -1999, 5], np.array([1, -1, 0], np.int64)),  # truncated toward zero
    (64, 1, 2**63, [-2**63, -1, -2**63 + 12345678901234567],
     np.array([0, 2**63 - 1, 12345678901234567], np.int64)),  # unsigned data: exact
    (-32, 2, 1, [0.5, -1.25, 3], np.array([2, -1.5, 7], np.float32)),
])
def test_scaled_values(tmp_path, bitpix, bscale, bzero, raw, expected):
    f = write(tmp_path / "s.fits", np.array(raw, RAW[bitpix]), scaled={2: (bscale, bzero)})
    out = np.asarray(first(Fits(files=[f]))[0])
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_scaled_float_output_is_computed_in_double(tmp_path):
    rng = np.random.default_rng(7)
    raw = rng.integers(-30000, 30000, (6, 7)).astype(np.int16)
    f = write(tmp_path / "s.fits", raw, scaled={2: (0.37, -12.5)})
    out = np.asarray(first(Fits(files=[f]))[0])
    # CFITSIO: raw * BSCALE + BZERO in double precision, then cast to float32 (astropy's own
    # scaled read computes in float32 and differs by 1 ulp on a few of these values)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, (raw.astype(np.float64) * 0.37 - 12.5).astype(np.float32))
    np.testing.assert_allclose(out, fits.getdata(f, 1), rtol=2e-7)


def test_blank_is_not_applied(tmp_path):
    f = write(tmp_path / "b.fits", np.array([1, -999, 3], np.int16))
    with fits.open(f, mode="update") as h:
        h[1].header["BLANK"] = -999
    np.testing.assert_array_equal(np.asarray(first(Fits(files=[f]))[0]), [1, -999, 3])


def test_int64_overflow_names_file_and_hdu(tmp_path):
    f = write(tmp_path / "o.fits", np.array([2**62, 1], np.int64), scaled={2: (4, 0)})
    with pytest.raises(ValueError, match=r"o\.fits \(sample 0\), HDU 2: .*beyond int64"):
        first(Fits(files=[f]))
    f = write(tmp_path / "u.fits", np.array([5], np.int64), scaled={2: (1, 2**63)})
    with pytest.raises(ValueError, match=r"u\.fits \(sample 0\), HDU 2: .*2\*\*63"):
        first(Fits(files=[f]))


# -- tile-compressed HDUs ---------------------------------------------------------------


@pytest.mark.parametrize("ctype, dtype", [
    ("RICE_1", np.int16), ("RICE_1", np.uint8), ("RICE_1", np.int32), ("RICE_1", np.uint16),
    ("GZIP_1", np.int32), ("GZIP_2", np.float64), ("HCOMPRESS_1", np.int16), ("PLIO_1", np.uint8),
])
def test_compressed_lossless(tmp_path, ctype, dtype):
    rng = np.random.default_rng(3)
    shape = (5, 40, 64) if ctype != "HCOMPRESS_1" else (40, 64)
    a = rng.integers(0, 200, shape).astype(dtype) if np.dtype(dtype).kind != "f" else \
        rng.standard_normal(shape).astype(dtype)
    f = tmp_path / "c.fits"
    hdu = fits.CompImageHDU(a, compression_type=ctype, **({"quantize_level": 0} if ctype == "GZIP_2" else {}))
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(f)
    for mmap in (False, True):
        out = np.asarray(first(Fits(files=[str(f)], dont_use_mmap=not mmap))[0])
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, a)


def test_compressed_quantized_float_as_astropy_decompresses(tmp_path):
    a = (np.random.default_rng(4).standard_normal((30, 31)) * 10).astype(np.float32)
    f = tmp_path / "q.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(a, compression_type="RICE_1")]).writeto(f)
    out = np.asarray(first(Fits(files=[str(f)]))[0])
    ref = fits.getdata(f, 1)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, ref)
    assert np.abs(out - a).max() < 1.0  # (lossy: quantized to steps of about 0.9 here)


# -- files, order, sharding --------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    """Files whose HDU 2 holds their number, in the root, sub-directories and deeper."""
    names = ["z.fits", "m.fits", "b/q.fits", "a/x.fits", "a/c.fits", "B.fits", "b/a.fits",
             "a/deep/n.fits", "skip.fit", "a/skip.FITS"]
    for k, n in enumerate(names):
        (tmp_path / n).parent.mkdir(parents=True, exist_ok=True)
        write(tmp_path / n, np.array([k], np.int32))
    return tmp_path, names


def numbers(reader, batch_size=None):
    out = []
    for x in reader.next_epoch(batch_size=batch_size):
        out += [int(np.asarray(t)[0]) for t in (x[0].tensors if batch_size else [x[0]])]
    return out


def test_file_root_order_filter_and_list(tree):
    root, names = tree
    # the root's files sorted, then each sub-directory (sorted) one level down
    order = ["B.fits", "m.fits", "z.fits", "a/c.fits", "a/x.fits", "b/a.fits", "b/q.fits"]
    assert numbers(Fits(file_root=str(root))) == [names.index(n) for n in order]
    assert numbers(Fits(file_root=str(root), file_filter="*.FITS")) == [names.index("a/skip.FITS")]
    lst = root / "list.txt"
    lst.write_text("b/q.fits\nskip.fit\n")
    assert numbers(Fits(file_list=str(lst))) == [names.index("b/q.fits"), names.index("skip.fit")]
    assert numbers(Fits(file_root=str(root), files=["m.fits", "a/deep/n.fits"])) == [1, 7]


def test_sharding_and_shuffle(tree):
    root, _ = tree
    all_ = numbers(Fits(file_root=str(root)))
    shards = [numbers(Fits(file_root=str(root), num_shards=3, shard_id=s, stick_to_shard=True)) for s in range(3)]
    assert sum(shards, []) == all_ and [len(s) for s in shards] == [2, 2, 3]
    a = numbers(Fits(file_root=str(root), random_shuffle=True, seed=5), batch_size=7)
    b = numbers(Fits(file_root=str(root), random_shuffle=True, seed=5), batch_size=7)
    assert a == b and sorted(a) == sorted(all_)


def test_source_info_is_empty_as_in_dali(tree):
    root, _ = tree
    (t,) = first(Fits(file_root=str(root)))
    assert bytes(np.asarray(ndd.get_property(t, key="source_info"))) == b""


def test_state_round_trip(tree):
    root, _ = tree
    r = Fits(file_root=str(root), enable_checkpointing=True)
    it = r.next_epoch()
    next(it)
    state = r.get_state()
    rest = [int(np.asarray(x[0])[0]) for x in it]
    r2 = Fits(file_root=str(root), enable_checkpointing=True)
    r2.set_state(state)
    assert [int(np.asarray(x[0])[0]) for x in r2.next_epoch()] == rest


# -- errors ------------------------------------------------------------------------------


def test_errors_name_file_and_hdu(tmp_path):
    f = tmp_path / "t.fits"
    col = fits.Column(name="x", format="E", array=np.zeros(3, np.float32))
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(np.zeros((2, 2), np.int16)),
                  fits.BinTableHDU.from_columns([col]), fits.ImageHDU()]).writeto(f)
    f = str(f)
    with pytest.raises(ValueError, match=r"t\.fits \(sample 0\): `hdu_indices` names HDU 9, but the file has 4"):
        first(Fits(files=[f], hdu_indices=[2, 9]))
    with pytest.raises(ValueError, match=r"t\.fits \(sample 0\): HDU 3 is a BinTableHDU, not an image"):
        first(Fits(files=[f], hdu_indices=[3]))
    for k in (1, 4):
        with pytest.raises(ValueError, match=rf"t\.fits \(sample 0\): HDU {k} holds no image \(NAXIS = 0\)"):
            first(Fits(files=[f], hdu_indices=[k]))
    bad = tmp_path / "bad.fits"
    bad.write_bytes(b"not a fits file" * 200)
    with pytest.raises(ValueError, match=r"bad\.fits \(sample 0\): not a readable FITS file"):
        first(Fits(files=[str(bad)]))
    with pytest.raises(ValueError, match=r"missing\.fits: file #0 of `files` does not exist"):
        Fits(files=[str(tmp_path / "missing.fits")])


def test_batch_of_mixed_types_is_an_error(tmp_path):
    a = write(tmp_path / "a.fits", np.zeros((2, 2), np.int32))
    b = write(tmp_path / "b.fits", np.zeros((2, 2), np.int16))
    with pytest.raises(ValueError, match=r"b\.fits \(sample 1\): output 0 has dtype int16.*a\.fits"):
        first(Fits(files=[a, b]), batch_size=2)


def test_argument_checks(tmp_path):
    f = write(tmp_path / "a.fits", np.zeros(3, np.int16))
    with pytest.raises(ValueError, match="`hdu_indices`: HDUs are numbered from 1"):
        Fits(files=[f], hdu_indices=[0])
    with pytest.raises(ValueError, match="`hdu_indices` must name at least one HDU"):
        Fits(files=[f], hdu_indices=[])
    with pytest.raises(TypeError, match="`hdu_indices` must be an integer"):
        Fits(files=[f], hdu_indices=[2.5])
    with pytest.raises(ValueError, match="`dtypes` gives 2 types for 1 outputs"):
        Fits(files=[f], dtypes=[ndd.float32, ndd.int16])
    with pytest.raises(ValueError, match="`dtypes`: unsupported output dtype bool"):
        Fits(files=[f], dtypes=[ndd.bool])
    with pytest.raises(ValueError, match="Fits reader needs `file_root`, `files` or `file_list`"):
        Fits()
    # as DALI: `dtypes` is checked but the output keeps the HDU's own type
    assert np.asarray(first(Fits(files=[f], dtypes=ndd.float64))[0]).dtype == np.int16


def test_signature_has_dalis_arguments():
    params = inspect.signature(Fits).parameters
    dali = {"dont_use_mmap", "dtypes", "file_filter", "file_list", "file_root", "files", "hdu_indices",
            "initial_fill", "lazy_init", "num_shards", "pad_last_batch", "prefetch_queue_depth",
            "random_shuffle", "read_ahead", "seed", "shard_id", "shuffle_after_epoch",
            "shuffle_after_epoch_seed", "skip_cached_images", "stick_to_shard", "tensor_init_bytes",
            "enable_checkpointing", "max_batch_size", "name", "device", "num_inputs"}
    assert set(params) == dali
    assert params["hdu_indices"].default == (2,) and params["file_filter"].default == "*.fits"


def test_missing_astropy_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "astropy.io", None)
    with pytest.raises(ImportError, match=r"pip install ndd-readers\[fits\]"):
        Fits(files=[str(tmp_path / "x.fits")])


def test_import_paths():
    import ndd.experimental.readers as er
    from ndd.experimental.readers import Fits as F

    assert er.Fits is F is Fits and "Fits" in dir(er)
    with pytest.raises(AttributeError, match="PascalCase: use ndd.experimental.readers.Fits"):
        er.fits  # noqa: B018
