"""Shape and construction operators against NumPy: sample and batch mode, ragged batches,
per-sample arguments, layouts and errors."""

import numpy as np
import pytest

import ndd

A = np.asarray


def samples(b):
    return [A(t) for t in b]


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
RAGGED = [np.arange(6, dtype=np.int32).reshape(2, 3, 1), np.arange(12, dtype=np.int32).reshape(4, 3, 1)]


def sync(fn, *args, **kwargs):
    with ndd.EvalMode.sync_cpu:
        return fn(*args, **kwargs)


# -- reshape ------------------------------------------------------------------------


def test_reshape_shape_and_negative_extent():
    t = ndd.tensor(X, layout="HWC")
    out = ndd.reshape(t, shape=[6, -1])
    assert out.ndim == 2 and out.layout is None
    np.testing.assert_array_equal(A(out), X.reshape(6, -1))
    same = ndd.reshape(t, shape=[4, 3, 2])
    assert same.layout == "HWC"
    assert ndd.reshape(t, shape=[4, 6], layout="AB").layout == "AB"
    b = ndd.as_batch(np.stack([X, X + 1]))
    ob = ndd.reshape(b, shape=[-1])
    assert ob.shape == [(24,), (24,)]
    np.testing.assert_array_equal(samples(ob)[1], (X + 1).reshape(-1))


def test_reshape_rel_shape_src_dims():
    t = ndd.tensor(np.zeros((480, 640, 3), np.uint8), layout="HWC")
    assert ndd.reshape(t, shape=[240, -1]).shape == (240, 3840)
    assert ndd.reshape(t, rel_shape=[0.5, -1]).shape == (240, 3840)
    s = ndd.tensor(np.zeros((300, 200, 1)), layout="HWC")
    o = ndd.reshape(s, src_dims=[-1, 1, 0])
    assert o.shape == (1, 200, 300) and o.layout is None
    assert ndd.reshape(s, src_dims=[-1, 1, 0], rel_shape=[-1, 0.5, 2]).shape == (1, 100, 600)
    assert ndd.reshape(s, src_dims=[2, 1, 0]).layout == "CWH"


def test_reshape_ragged_and_per_sample_shape():
    b = ndd.batch(RAGGED, layout="HWC")
    out = ndd.reshape(b, shape=[-1, 3])
    assert out.shape == [(2, 3), (4, 3)] and out.layout is None
    per = ndd.reshape(b, shape=ndd.batch([np.array([3, 2, 1]), np.array([6, 2, 1])]))
    assert per.shape == [(3, 2, 1), (6, 2, 1)] and per.layout == "HWC"
    np.testing.assert_array_equal(samples(per)[1], RAGGED[1].reshape(6, 2, 1))
    si = ndd.reshape(b, ndd.batch([np.array([6, 1, 1]), np.array([12, 1, 1])]))
    assert si.shape == [(6, 1, 1), (12, 1, 1)]
    # a shape_input (or per-sample shape) of another length sets the number of dimensions
    flat = ndd.reshape(b, ndd.batch([np.array([6]), np.array([12])]))
    assert flat.ndim == 1 and flat.shape == [(6,), (12,)] and flat.layout is None
    np.testing.assert_array_equal(samples(flat)[1], RAGGED[1].reshape(-1))
    assert ndd.reshape(b, ndd.batch([np.array([6]), np.array([12])]), layout="X").layout == "X"
    assert ndd.reshape(b, shape=ndd.batch([np.array([2, 3]), np.array([4, 3])])).shape == [(2, 3), (4, 3)]
    t = ndd.tensor(np.arange(24).reshape(2, 3, 4))
    np.testing.assert_array_equal(A(ndd.reshape(t, np.array([4, 6]))), np.arange(24).reshape(4, 6))
    np.testing.assert_array_equal(A(ndd.reshape(t, ndd.tensor([24]))), np.arange(24))
    with pytest.raises(ValueError, match=r"argument 'shape_input' has samples of \[1, 2\] elements"):
        ndd.reshape(b, ndd.batch([np.array([6]), np.array([12, 1])]))


def test_reshape_errors():
    with pytest.raises(ValueError, match=r"`reshape`: cannot reshape a sample of shape \(3,\) \(3 elements\) to \[2\]"):
        sync(ndd.reshape, ndd.tensor([1, 2, 3]), shape=[2])
    lazy = ndd.reshape(ndd.tensor([1, 2, 3]), shape=[2])
    with pytest.raises(ValueError, match="asynchronous") as ei:
        lazy.evaluate()
    assert "reshape" in str(ei.value.__cause__)
    t = ndd.tensor(X)
    with pytest.raises(ValueError, match="'shape' .* more than one negative"):
        ndd.reshape(t, shape=[-1, -1])
    with pytest.raises(ValueError, match="'shape' and 'rel_shape' are mutually exclusive"):
        ndd.reshape(t, shape=[24], rel_shape=[1.0])
    with pytest.raises(ValueError, match="argument 'src_dims' has axis 5"):
        ndd.reshape(t, src_dims=[5])
    with pytest.raises(ValueError, match="argument 'layout' 'AB' does not match the 1"):
        ndd.reshape(t, shape=[24], layout="AB")
    with pytest.raises(ValueError, match="argument 'rel_shape' has 4 elements"):
        ndd.reshape(t, rel_shape=[1.0, 1.0, 1.0, 1.0])


# -- squeeze / expand_dims ----------------------------------------------------------


def test_squeeze():
    a = np.zeros((1, 3, 1, 2), np.int16)
    t = ndd.tensor(a, layout="FHCW")
    out = ndd.squeeze(t, axes=[0, 2])
    assert out.ndim == 2 and out.layout == "HW" and out.shape == (3, 2)
    assert ndd.squeeze(t, axis_names="C").layout == "FHW"
    assert ndd.squeeze(t, axes=[-2]).shape == (1, 3, 2)
    b = ndd.batch(RAGGED, layout="HWC")
    ob = ndd.squeeze(b, axis_names="C")
    assert ob.shape == [(2, 3), (4, 3)] and ob.layout == "HW"
    np.testing.assert_array_equal(samples(ob)[1], RAGGED[1][..., 0])
    assert ndd.squeeze(ndd.as_batch(np.zeros((2, 1, 5))), axes=[0]).shape == [(5,), (5,)]
    per = ndd.squeeze(ndd.batch([np.zeros((1, 5, 1)), np.zeros((1, 4, 1))]), axes=ndd.batch([[0], [-1]]))
    assert per.ndim == 2 and per.shape == [(5, 1), (1, 4)]


def test_squeeze_errors():
    t = ndd.tensor(np.zeros((1, 3)), layout="HW")
    with pytest.raises(ValueError, match="`squeeze`: argument 'axes' names dimension 1 of extent 3"):
        sync(ndd.squeeze, t, axes=[1])
    with pytest.raises(ValueError, match="argument 'axes' has axis 2"):
        ndd.squeeze(t, axes=[2])
    with pytest.raises(ValueError, match="'axis_names' names axis 'C'"):
        ndd.squeeze(t, axis_names="C")
    with pytest.raises(ValueError, match="'axis_names' 'H' needs an input with a layout"):
        ndd.squeeze(ndd.tensor(np.zeros((1, 3))), axis_names="H")
    with pytest.raises(ValueError, match="mutually exclusive"):
        ndd.squeeze(t, axes=[0], axis_names="H")


def test_expand_dims():
    t = ndd.tensor(X, layout="HWC")
    out = ndd.expand_dims(t, axes=[0, 4], new_axis_names="FN")
    assert out.layout == "FHWCN" and out.shape == (1, 2, 3, 4, 1)
    np.testing.assert_array_equal(A(out), np.expand_dims(X, (0, 4)))
    assert ndd.expand_dims(t, axes=[1]).layout is None
    assert ndd.expand_dims(ndd.tensor(np.float32(1)), axes=[0], new_axis_names="C").layout == "C"
    b = ndd.batch(RAGGED)
    assert ndd.expand_dims(b, axes=[-1]).shape == [(2, 3, 1, 1), (4, 3, 1, 1)]
    assert ndd.expand_dims(ndd.as_batch(np.stack([X, X])), axes=[0]).shape == [(1, 2, 3, 4)] * 2
    with pytest.raises(ValueError, match="`expand_dims`: argument 'axes' has axis 7"):
        ndd.expand_dims(t, axes=[7])
    with pytest.raises(ValueError, match="argument 'axes' .* repeats"):
        ndd.expand_dims(t, axes=[0, 0])
    with pytest.raises(ValueError, match="'new_axis_names' 'AB' must have one name per axis"):
        ndd.expand_dims(t, axes=[0], new_axis_names="AB")
    with pytest.raises(TypeError, match="missing the required argument 'axes'"):
        ndd.expand_dims(t)


# -- transpose ----------------------------------------------------------------------


def test_transpose():
    t = ndd.tensor(X, layout="HWC")
    out = ndd.transpose(t, perm=[2, 0, 1])
    assert out.layout == "CHW"
    np.testing.assert_array_equal(A(out), X.transpose(2, 0, 1))
    assert A(out).flags.c_contiguous
    assert ndd.transpose(t).layout == "CWH" and ndd.transpose(t).shape == (4, 3, 2)
    assert ndd.transpose(t, perm=[2, 0, 1], transpose_layout=False).layout == "HWC"
    assert ndd.transpose(t, perm=[2, 0, 1], output_layout="ABC").layout == "ABC"
    b = ndd.batch(RAGGED, layout="HWC")
    ob = ndd.transpose(b, perm=[1, 0, 2])
    assert ob.shape == [(3, 2, 1), (3, 4, 1)] and ob.layout == "WHC"
    np.testing.assert_array_equal(samples(ob)[1], RAGGED[1].transpose(1, 0, 2))
    with pytest.raises(ValueError, match="`transpose`: argument 'perm' \\[0, 0, 1\\] is not a permutation"):
        ndd.transpose(t, perm=[0, 0, 1])
    with pytest.raises(ValueError, match="argument 'output_layout'"):
        ndd.transpose(t, perm=[2, 0, 1], output_layout="AB")


def test_transpose_keeps_0d_samples_0d():
    out = ndd.transpose(ndd.batch([np.float32(1), np.float32(2)]), perm=[])
    assert out.shape == [(), ()] and [a.tolist() for a in samples(out)] == [1.0, 2.0]


# -- cat / stack --------------------------------------------------------------------


def test_cat_and_stack():
    a, b = ndd.tensor(X, layout="HWC"), ndd.tensor(X + 100, layout="HWC")
    np.testing.assert_array_equal(A(ndd.cat(a, b)), np.concatenate([X, X + 100]))
    c = ndd.cat(a, b, axis_name="C")
    assert c.layout == "HWC" and c.shape == (2, 3, 8)
    np.testing.assert_array_equal(A(ndd.cat(a, b, a, axis=-2)), np.concatenate([X, X + 100, X], axis=-2))
    s = ndd.stack(a, b, axis=1, axis_name="N")
    assert s.layout == "HNWC" and s.shape == (2, 2, 3, 4)
    np.testing.assert_array_equal(A(s), np.stack([X, X + 100], axis=1))
    assert ndd.stack(a, b).layout is None
    rb = ndd.batch(RAGGED, layout="HWC")
    out = ndd.cat(rb, rb, axis=0)
    assert out.shape == [(4, 3, 1), (8, 3, 1)]
    np.testing.assert_array_equal(samples(out)[1], np.concatenate([RAGGED[1]] * 2))
    st = ndd.stack(rb, rb, axis=3)
    assert st.shape == [(2, 3, 1, 2), (4, 3, 1, 2)]
    db = ndd.as_batch(np.stack([X, X]))
    assert ndd.stack(db, db, axis=0).shape == [(2, 2, 3, 4)] * 2
    mixed = ndd.cat(ndd.batch([X, X[:1]]), ndd.tensor(X), axis=0)  # a Tensor joins every sample
    assert mixed.shape == [(4, 3, 4), (3, 3, 4)]


def test_cat_stack_errors():
    a = ndd.tensor(X)
    with pytest.raises(ValueError, match="`cat`: input 1 has dtype f64"):
        ndd.cat(a, ndd.tensor(X.astype(np.float64)))
    with pytest.raises(ValueError, match="`stack`: input 1 has 2 dimension"):
        ndd.stack(a, ndd.tensor(X[0]))
    with pytest.raises(ValueError, match="`cat`: argument 'axis' has axis 3"):
        ndd.cat(a, a, axis=3)
    with pytest.raises(ValueError, match="`cat`: the inputs' shapes do not fit along axis 0"):
        sync(ndd.cat, a, ndd.tensor(np.zeros((2, 2, 4), np.float32)), axis=0)
    with pytest.raises(ValueError, match="input 1 has layout 'CHW'"):
        ndd.cat(ndd.tensor(X, layout="HWC"), ndd.tensor(X, layout="CHW"))
    with pytest.raises(ValueError, match="scalars cannot be concatenated"):
        ndd.cat(ndd.tensor(1), ndd.tensor(2))
    with pytest.raises(ValueError, match="'axis_name' must be one character"):
        ndd.stack(a, a, axis_name="AB")


# -- zeros / ones / full -----------------------------------------------------------


def test_zeros_ones_full():
    z = ndd.zeros(shape=[2, 3])
    assert isinstance(z, ndd.Tensor) and z.dtype == ndd.int32 and z.ndim == 2
    np.testing.assert_array_equal(A(z), np.zeros((2, 3), np.int32))
    o = ndd.ones(shape=[4], dtype=ndd.float32, batch_size=3, layout="X")
    assert isinstance(o, ndd.Batch) and o.shape == [(4,)] * 3 and o.layout == "X"
    np.testing.assert_array_equal(samples(o)[2], np.ones(4, np.float32))
    assert ndd.zeros().shape == ()
    shapes = ndd.batch([np.array([1, 2]), np.array([3, 1])])
    per = ndd.zeros(shape=shapes, layout="AB")  # layout= gives the ndim of per-sample shapes
    assert per.shape == [(1, 2), (3, 1)] and per.layout == "AB"
    assert ndd.zeros(shape=shapes).shape == [(1, 2), (3, 1)]  # the ndim from the shapes' length
    with pytest.raises(ValueError, match=r"`full`: argument 'shape' has samples of \[1, 2\] elements"):
        ndd.full(ndd.batch([np.float32(1), np.float32(2)]), shape=ndd.batch([np.array([2]), np.array([1, 3])]))
    f = ndd.full(ndd.tensor(np.float32(2.5)), shape=[2, 2])
    assert f.dtype == ndd.float32
    np.testing.assert_array_equal(A(f), np.full((2, 2), 2.5, np.float32))
    fb = ndd.full(ndd.batch([np.int32(1), np.int32(2)]), shape=[3])
    assert [s.tolist() for s in samples(fb)] == [[1, 1, 1], [2, 2, 2]]
    row = ndd.full(ndd.tensor([1, 2, 3]), shape=[2, 3])
    np.testing.assert_array_equal(A(row), np.full((2, 3), [1, 2, 3]))
    assert ndd.full(ndd.tensor([1, 2])).shape == (2,)
    with pytest.raises(ValueError, match="`zeros`: argument 'shape' \\[-1\\] has a negative extent"):
        sync(ndd.zeros, shape=[-1])
    with pytest.raises(ValueError, match="`full`: argument 'shape' \\[4\\] is incompatible"):
        sync(ndd.full, ndd.tensor([1, 2]), shape=[4])
    with pytest.raises(ValueError, match="`ones`: argument 'layout'"):
        ndd.ones(shape=[2], layout="AB")


def test_like_variants():
    t = ndd.tensor(X, layout="HWC")
    zl = ndd.zeros_like(t)  # data_like's type, as DALI 2.4 gives
    assert zl.dtype == t.dtype and zl.layout == "HWC" and zl.shape == X.shape
    np.testing.assert_array_equal(A(zl), np.zeros(X.shape, A(t).dtype))
    f = ndd.tensor(np.ones((2, 3), np.float32))
    assert ndd.zeros_like(f).dtype == ndd.float32 and ndd.ones_like(f).dtype == ndd.float32
    assert ndd.ones_like(ndd.tensor(np.ones(2, np.uint8))).dtype == ndd.uint8
    ol = ndd.ones_like(t, dtype=ndd.uint8)
    np.testing.assert_array_equal(A(ol), np.ones(X.shape, np.uint8))
    rb = ndd.batch(RAGGED)
    assert ndd.zeros_like(rb).shape == [(2, 3, 1), (4, 3, 1)]
    fl = ndd.full_like(t, ndd.tensor(np.float64(7)))  # data_like's type, as DALI 2.4
    assert fl.dtype == t.dtype
    np.testing.assert_array_equal(A(fl), np.full(X.shape, 7, A(t).dtype))
    u8 = ndd.tensor(np.zeros((2, 3), np.uint8))
    assert A(ndd.full_like(u8, ndd.tensor(300))).tolist() == [[255] * 3] * 2  # saturated
    assert A(ndd.full_like(ndd.tensor(np.zeros(2, np.int32)), ndd.tensor(2.5))).tolist() == [3, 3]
    assert ndd.full_like(ndd.tensor(np.zeros(2, np.float32)), ndd.tensor(7)).dtype == ndd.float32
    np.testing.assert_array_equal(A(ndd.full_like(t, ndd.tensor(np.arange(4.0)))), np.broadcast_to(np.arange(4.0), X.shape))
    db = ndd.as_batch(np.stack([X, X]))
    fd = ndd.full_like(db, ndd.batch([np.float32(1), np.float32(2)]))
    assert [float(s.max()) for s in samples(fd)] == [1.0, 2.0]
    fr = ndd.full_like(rb, ndd.batch([np.int32(5), np.int32(6)]))
    assert samples(fr)[1].shape == (4, 3, 1) and samples(fr)[1].max() == 6
    with pytest.raises(ValueError, match="`full_like`: fill_value cannot be broadcast"):
        sync(ndd.full_like, t, ndd.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="`full_like`: fill_value has 2 dimension"):
        ndd.full_like(ndd.tensor([1]), ndd.tensor(np.zeros((1, 1))))


# -- pad ----------------------------------------------------------------------------


def test_pad_to_batch_max_and_shape_align():
    b = ndd.batch([np.ones((2, 3), np.float32), np.ones((4, 1), np.float32)], layout="HW")
    out = ndd.pad(b, fill_value=-1)
    assert out.shape == [(4, 3), (4, 3)] and out.layout == "HW"
    want0 = np.full((4, 3), -1, np.float32)
    want0[:2, :3] = 1
    np.testing.assert_array_equal(samples(out)[0], want0)
    assert ndd.pad(b, axis_names="W").shape == [(2, 3), (4, 3)]
    assert ndd.pad(b, axes=[0], shape=[5]).shape == [(5, 3), (5, 1)]
    assert ndd.pad(b, axes=[0], shape=[3]).shape == [(3, 3), (4, 1)]  # never crops
    assert ndd.pad(b, axes=[1], shape=[-1]).shape == [(2, 3), (4, 3)]
    assert ndd.pad(b, align=[4]).shape == [(4, 4), (4, 4)]
    assert ndd.pad(b, axes=[0, 1], align=[1, 8]).shape == [(4, 8), (4, 8)]
    per = ndd.pad(b, axes=[0], shape=ndd.batch([np.array([6]), np.array([7])]))
    assert per.shape == [(6, 3), (7, 1)]
    fill = ndd.pad(b, fill_value=ndd.batch([np.float32(5), np.float32(9)]))
    assert samples(fill)[1][0, 2] == 9 and samples(fill)[0][3, 0] == 5
    dense = ndd.as_batch(np.zeros((2, 3), np.uint8))
    pd = ndd.pad(dense, align=[4], fill_value=7)
    assert pd.shape == [(4,), (4,)] and samples(pd)[0].tolist() == [0, 0, 0, 7]
    t = ndd.pad(ndd.tensor(np.arange(3)), shape=[5])
    np.testing.assert_array_equal(A(t), [0, 1, 2, 0, 0])


def test_pad_errors():
    t = ndd.tensor(np.zeros((2, 2)), layout="HW")
    with pytest.raises(ValueError, match="`pad`: argument 'align' must be positive"):
        sync(ndd.pad, t, align=[0])
    with pytest.raises(ValueError, match="`pad`: argument 'shape' has 3 values for 2 padded"):
        sync(ndd.pad, t, shape=[1, 2, 3])
    with pytest.raises(ValueError, match="`pad`: argument 'axis_names' names axis 'C'"):
        ndd.pad(t, axis_names="C")
    with pytest.raises(ValueError, match="`pad`: argument 'axes' has axis 4"):
        sync(ndd.pad, t, axes=[4])


# -- one_hot ------------------------------------------------------------------------


def test_one_hot():
    labels = np.array([0, 2, 1, 5], np.int32)
    out = ndd.one_hot(ndd.tensor(labels), num_classes=3)
    assert out.dtype == ndd.float32 and out.ndim == 2
    np.testing.assert_array_equal(A(out), np.eye(3, dtype=np.float32)[[0, 2, 1]].tolist() + [[0, 0, 0]])
    first = ndd.one_hot(ndd.tensor(labels), num_classes=6, axis=0, dtype=ndd.int32, on_value=7, off_value=-1)
    assert first.shape == (6, 4) and first.dtype == ndd.int32
    assert A(first)[5, 3] == 7 and A(first)[0, 3] == -1
    s = ndd.one_hot(ndd.tensor(np.int32(1)), num_classes=3, axis_name="C")
    assert s.shape == (3,) and s.layout == "C"
    assert ndd.one_hot(ndd.tensor(labels, layout="W"), num_classes=6, axis_name="C").layout == "WC"
    b = ndd.one_hot(ndd.batch([np.array([1]), np.array([0, 2])]), num_classes=3)
    assert b.shape == [(1, 3), (2, 3)]
    np.testing.assert_array_equal(samples(b)[1], [[1, 0, 0], [0, 0, 1]])
    d = ndd.one_hot(ndd.as_batch(np.array([[0, 1], [2, 2]])), num_classes=3, axis=0)
    np.testing.assert_array_equal(samples(d)[1], [[0, 0], [0, 0], [1, 1]])
    # float labels lose their fraction, as DALI 2.4 converts them: 1.7 is class 1
    f = ndd.one_hot(ndd.tensor(np.array([0.0, 1.7, 2.2, -0.5], np.float32)), num_classes=4)
    np.testing.assert_array_equal(A(f), np.eye(4, dtype=np.float32)[[0, 1, 2, 0]])
    with pytest.raises(ValueError, match="`one_hot`: argument 'num_classes' must be positive"):
        ndd.one_hot(ndd.tensor(labels))
    with pytest.raises(ValueError, match="`one_hot`: argument 'axis' 3 is out of range"):
        ndd.one_hot(ndd.tensor(labels), num_classes=3, axis=3)


# -- slice --------------------------------------------------------------------------


IMG = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)


def test_slice_absolute_and_relative_arguments():
    t = ndd.tensor(IMG, layout="HWC")
    # axes default to W, H ([1, 0])
    np.testing.assert_array_equal(A(ndd.slice(t, start=[1, 2], end=[5, 4])), IMG[2:4, 1:5])
    np.testing.assert_array_equal(A(ndd.slice(t, start=[1, 2], shape=[2, 1])), IMG[2:3, 1:3])
    np.testing.assert_array_equal(A(ndd.slice(t, rel_start=[0.5, 0.5])), IMG[2:, 3:])
    np.testing.assert_array_equal(A(ndd.slice(t, rel_start=[0.0, 0.25], rel_shape=[0.5, 0.5])), IMG[1:3, 0:3])
    np.testing.assert_array_equal(A(ndd.slice(t, rel_end=[0.5, 0.5])), IMG[:2, :3])
    np.testing.assert_array_equal(A(ndd.slice(t, axes=[2], start=[1])), IMG[:, :, 1:])
    np.testing.assert_array_equal(A(ndd.slice(t, axis_names="C", end=[2])), IMG[:, :, :2])
    np.testing.assert_array_equal(A(ndd.slice(t, start=[1, 1], end=[2, 2], dtype=ndd.float32)),
                                  IMG[1:2, 1:2].astype(np.float32))
    chw = ndd.tensor(IMG.transpose(2, 0, 1), layout="CHW")  # default names resolve W, H in any layout
    np.testing.assert_array_equal(A(ndd.slice(chw, start=[1, 2], end=[5, 4])), IMG.transpose(2, 0, 1)[:, 2:4, 1:5])
    plain = ndd.tensor(IMG[..., 0])  # no layout: axes [1, 0]
    np.testing.assert_array_equal(A(ndd.slice(plain, start=[1, 2])), IMG[2:, 1:, 0])


def test_slice_fractional_windows_round_their_ends():
    """A fractional window keeps rows round(start) .. round(start + extent) (DALI 2.4's shapes:
    17x23 with rel_start [0.13, 0.27] and rel_shape [0.41, 0.33] over (W, H) gives 5x9)."""
    x = np.arange(17 * 23 * 3, dtype=np.int32).reshape(17, 23, 3)
    t = ndd.tensor(x, layout="HWC")
    got = A(ndd.slice(t, rel_start=[0.13, 0.27], rel_shape=[0.41, 0.33]))  # x 2.99+9.43, y 4.59+5.61
    np.testing.assert_array_equal(got, x[5:10, 3:12])
    got = A(ndd.slice(t, rel_start=[0.5, 0.5], rel_shape=[0.5, 0.5]))  # 8.5 rounds away: rows 9..17
    np.testing.assert_array_equal(got, x[9:17, 12:23])
    # The arguments are float32, multiplied in double (DALI 2.4: 0.05 + 0.45 of 37 rows ends at
    # 18.4999996, row 18; in double it would be 18.5, row 19).
    y = np.zeros((37, 53, 1), np.uint8)
    assert A(ndd.slice(ndd.tensor(y, layout="HWC"), rel_start=[0.05, 0.05], rel_shape=[0.45, 0.45])).shape == (16, 23, 1)
    # absolute arguments are truncated (DALI 2.4: 7x5 from row 3, column 2; a start of -1.5
    # pads one column)
    got = A(ndd.slice(t, start=[2.6, 3.4], shape=[5.5, 7.5]))
    np.testing.assert_array_equal(got, x[3:10, 2:7])
    got = A(ndd.slice(t, start=[-1.5, 2.5], shape=[4.5, 3.5], out_of_bounds_policy="pad"))
    assert got.shape == (3, 4, 3) and np.all(got[:, 0] == 0)
    np.testing.assert_array_equal(got[:, 1:], x[2:5, 0:3])
    np.testing.assert_array_equal(A(ndd.slice(t, start=[1.5, 0], end=[5.5, 17])), x[:, 1:5])
    got = A(ndd.slice(t, ndd.tensor(np.array([2.6, 3.4], np.float32)), ndd.tensor(np.array([5.5, 7.5], np.float32)),
                      normalized_anchor=False, normalized_shape=False))
    np.testing.assert_array_equal(got, x[3:11, 3:8])


def test_slice_dtype_truncates_and_saturates_as_dali():
    """slice with a dtype converts as DALI's: floats truncated, then saturated (DALI 2.4:
    2.7 -> 2, -7.5 -> 0, 300 -> 255; int16 -300 -> 0, 1000 -> 255)."""
    f = np.array([-300.0, -7.5, -0.5, 0.5, 1.5, 2.7, 254.5, 255.5, 300.0], np.float32)
    got = A(ndd.slice(ndd.tensor(f), start=[0], end=[9], axes=[0], dtype=ndd.uint8))
    assert got.tolist() == [0, 0, 0, 0, 1, 2, 254, 255, 255]
    i = np.array([-300, -1, 0, 255, 256, 1000], np.int16)
    got = A(ndd.slice(ndd.tensor(i), start=[0], end=[6], axes=[0], dtype=ndd.uint8))
    assert got.tolist() == [0, 0, 0, 255, 255, 255]
    padded = A(ndd.slice(ndd.tensor(i), start=[-1], end=[6], axes=[0], dtype=ndd.uint8,
                         out_of_bounds_policy="pad", fill_values=[7]))
    assert padded.tolist() == [7, 0, 0, 0, 255, 255, 255]


def test_slice_anchor_shape_inputs():
    t = ndd.tensor(IMG, layout="HWC")
    out = ndd.slice(t, ndd.tensor([0.5, 0.25]), ndd.tensor([0.5, 0.5]))
    np.testing.assert_array_equal(A(out), IMG[1:3, 3:6])
    absolute = ndd.slice(t, ndd.tensor([1, 2]), ndd.tensor([2, 1]), normalized_anchor=False,
                         normalized_shape=False)
    np.testing.assert_array_equal(A(absolute), IMG[2:3, 1:3])
    anchor_only = ndd.slice(t, ndd.tensor([2, 1]), normalized_anchor=False)
    np.testing.assert_array_equal(A(anchor_only), IMG[1:, 2:])
    b = ndd.batch([IMG, IMG[:2]], layout="HWC")
    ob = ndd.slice(b, ndd.batch([np.array([0.0, 0.0]), np.array([0.5, 0.5])]),
                   ndd.batch([np.array([0.5, 0.5]), np.array([0.5, 0.5])]))
    assert ob.shape == [(2, 3, 3), (1, 3, 3)]
    np.testing.assert_array_equal(samples(ob)[1], IMG[1:2, 3:6])


def test_slice_batch_per_sample_args_and_dense():
    dense = ndd.as_batch(np.stack([IMG, IMG + 1]), layout="HWC")
    out = ndd.slice(dense, start=[0, 1], end=[2, 3])
    assert out.shape == [(2, 2, 3)] * 2
    np.testing.assert_array_equal(samples(out)[1], (IMG + 1)[1:3, 0:2])
    per = ndd.slice(dense, start=ndd.batch([np.array([0.0, 0.0]), np.array([1.0, 1.0])]), shape=[2, 2])
    np.testing.assert_array_equal(samples(per)[1], (IMG + 1)[1:3, 1:3])


def test_slice_out_of_bounds_policies():
    t = ndd.tensor(IMG, layout="HWC")
    with pytest.raises(ValueError, match=r"`slice`: the slice \[4, 8\) on axis 1 is out of bounds for extent 6"):
        sync(ndd.slice, t, start=[4, 0], shape=[4, 2])
    trim = ndd.slice(t, start=[4, -1], shape=[4, 2], out_of_bounds_policy="trim_to_shape")
    np.testing.assert_array_equal(A(trim), IMG[0:1, 4:6])
    pad = ndd.slice(t, start=[4, -1], shape=[4, 2], out_of_bounds_policy="pad", fill_values=[7, 8, 9])
    p = A(pad)
    assert p.shape == (2, 4, 3)
    np.testing.assert_array_equal(p[1, :2], IMG[0, 4:6])
    assert p[0].tolist() == [[7, 8, 9]] * 4 and p[1, 3].tolist() == [7, 8, 9]
    one = A(ndd.slice(t, start=[-2, 0], shape=[3, 1], out_of_bounds_policy="pad", fill_values=[5]))
    assert one[0, 0].tolist() == [5, 5, 5] and one[0, 2].tolist() == IMG[0, 0].tolist()
    with pytest.raises(ValueError, match="`slice`: argument 'fill_values' has 2 values"):
        sync(ndd.slice, t, start=[-2, 0], out_of_bounds_policy="pad", fill_values=[1, 2])
    with pytest.raises(ValueError, match="must be one of 'error', 'pad', 'trim_to_shape'"):
        ndd.slice(t, start=[0, 0], out_of_bounds_policy="wrap")
    for start in ([-5, 0], [0, 9], [9, 9]):  # windows wholly outside an axis: all fill
        out = A(ndd.slice(t, start=start, shape=[2, 2], out_of_bounds_policy="pad", fill_values=[3]))
        assert out.shape == (2, 2, 3) and (out == 3).all(), start
    assert A(ndd.slice(t, start=[-5, 0], shape=[2, 2], out_of_bounds_policy="trim_to_shape")).shape == (2, 0, 3)  # start is W, H


def test_slice_errors():
    t = ndd.tensor(IMG, layout="HWC")
    with pytest.raises(ValueError, match="`slice`: argument 'start' cannot be combined with the anchor"):
        ndd.slice(t, ndd.tensor([0.0, 0.0]), start=[0, 0])
    with pytest.raises(ValueError, match="'start' and 'rel_start' are mutually exclusive"):
        ndd.slice(t, start=[0, 0], rel_start=[0, 0])
    with pytest.raises(ValueError, match="only one of 'end', 'rel_end', 'shape' and 'rel_shape'"):
        ndd.slice(t, end=[1, 1], shape=[1, 1])
    with pytest.raises(ValueError, match="`slice`: argument 'start' has 3 values for 2 sliced"):
        sync(ndd.slice, t, start=[0, 0, 0])
    with pytest.raises(ValueError, match="argument 'axis_names' names axis 'D'"):
        ndd.slice(t, axis_names="D", start=[0])
    with pytest.raises(ValueError, match="negative extent"):
        sync(ndd.slice, t, start=[3, 0], end=[1, 1])
    with pytest.raises(ValueError, match="argument 'axes' has axis 5"):
        ndd.slice(t, axes=[5], start=[0])
    with pytest.raises(ValueError, match="`slice`: give the window as arguments"):  # as DALI: no silent copy
        ndd.slice(t)
    with pytest.raises(ValueError, match="`slice`: give the window as arguments"):
        ndd.slice(ndd.as_batch([IMG, IMG], layout="HWC"), axes=[0])
