"""Arithmetic operators on Tensor and Batch, type promotion, and ndd.math."""

import operator

import numpy as np
import pytest

import ndd
from ndd._arith import promote

A = np.asarray


def samples(b):
    return [A(t) for t in b]


BINARY = [
    (operator.add, np.add), (operator.sub, np.subtract), (operator.mul, np.multiply),
    (operator.mod, np.fmod), (operator.pow, np.power),
    (operator.and_, np.bitwise_and), (operator.or_, np.bitwise_or), (operator.xor, np.bitwise_xor),
    (operator.lshift, np.left_shift), (operator.rshift, np.right_shift),
    (operator.eq, np.equal), (operator.ne, np.not_equal), (operator.lt, np.less),
    (operator.le, np.less_equal), (operator.gt, np.greater), (operator.ge, np.greater_equal),
]


@pytest.mark.parametrize("pyop,npop", BINARY)
def test_binary_int_tensor_and_batch(pyop, npop):
    a = np.array([[7, -3, 5], [2, 9, -8]], np.int32)
    b = np.array([[2, 3, 1], [4, 2, 3]], np.int32)
    want = npop(a, b)
    out = pyop(ndd.tensor(a), ndd.tensor(b))
    assert isinstance(out, ndd.Tensor) and out.dtype == ndd.dtype(want.dtype)
    np.testing.assert_array_equal(A(out), want)
    ob = pyop(ndd.as_batch(a), ndd.as_batch(b))
    assert isinstance(ob, ndd.Batch) and ob.batch_size == 2
    np.testing.assert_array_equal(np.stack(samples(ob)), want)
    # reflected, with a Python constant
    np.testing.assert_array_equal(A(pyop(3, ndd.tensor(b))), npop(np.int32(3), b))
    np.testing.assert_array_equal(A(pyop(ndd.tensor(a), 2)), npop(a, np.int32(2)))


def test_true_and_floor_division():
    a = np.array([7, -7, 6, -1], np.int32)
    t = ndd.tensor(a)
    q = t / 2
    assert q.dtype == ndd.float32
    np.testing.assert_array_equal(A(q), a.astype(np.float32) / 2)
    # // truncates toward zero for integers (C semantics), % is the matching remainder
    np.testing.assert_array_equal(A(t // 2), [3, -3, 3, 0])
    np.testing.assert_array_equal(A(t % 2), [1, -1, 0, -1])
    np.testing.assert_array_equal(A((t // 2) * 2 + t % 2), a)
    assert (t // 2).dtype == ndd.int32
    for zero in (lambda: t // 0, lambda: t % 0, lambda: t // np.int64(0)):
        with pytest.raises(ValueError, match="Integer division by zero."):  # a constant 0: as DALI
            zero()
    for zero in (lambda: t // ndd.tensor(np.array([1, 0, 2, 3], np.int32)),  # a zero in the data: as DALI
                 lambda: t % ndd.tensor(np.zeros(4, np.int32)),
                 lambda: samples(ndd.batch([np.int16(5)]) // ndd.batch([np.int16(0)]))):
        with pytest.raises(ValueError) as e:  # raised by the kernel: the cause of the reported error
            A(zero())
        assert "Integer division by zero." in str(e.value) + str(e.value.__cause__)
    np.testing.assert_array_equal(A(t % ndd.tensor(np.array([3, 3, 4, 5], np.int32))), [1, -1, 2, -1])
    assert np.isinf(A(ndd.tensor(np.array([1.0])) // 0)).all()  # floats divide
    f = ndd.tensor(np.array([7.0, -7.0], np.float64))
    assert (f / 2).dtype == ndd.float64 and (f // 2).dtype == ndd.float64
    np.testing.assert_array_equal(A(f // 2), [3.5, -3.5])  # DALI `div` on floats divides
    np.testing.assert_array_equal(A(ndd.tensor(np.array([7, 9], np.uint8)) // 2), [3, 4])


def test_integer_pow_negative_exponent_truncates():
    base = ndd.tensor(np.array([2, 1, -1, -1, 3], np.int32))
    exp = ndd.tensor(np.array([-1, -5, -3, -2, 2], np.int32))
    np.testing.assert_array_equal(A(base ** exp), [0, 1, -1, 1, 9])


def test_unary():
    a = np.array([-2, 0, 3], np.int32)
    t = ndd.tensor(a)
    np.testing.assert_array_equal(A(-t), -a)
    assert +t is t
    np.testing.assert_array_equal(A(abs(t)), np.abs(a))
    np.testing.assert_array_equal(A(~t), ~a)
    bt = ndd.tensor([True, False])
    np.testing.assert_array_equal(A(~bt), [False, True])
    np.testing.assert_array_equal(A(-bt), [True, False])
    b = ndd.batch([a, a[:2]])
    assert [s.tolist() for s in samples(-b)] == [[2, 0, -3], [2, 0]]


PROMOTIONS = [
    (np.uint8, np.uint8, np.uint8), (np.int8, np.uint8, np.int16), (np.int16, np.uint8, np.int16),
    (np.int32, np.uint32, np.int64), (np.int64, np.uint64, np.int64), (np.int32, np.int64, np.int64),
    (np.uint16, np.uint32, np.uint32), (np.bool_, np.int8, np.int8), (np.bool_, np.uint16, np.uint16),
    (np.bool_, np.bool_, np.bool_), (np.int64, np.float16, np.float16), (np.float16, np.float32, np.float32),
    (np.float32, np.float64, np.float64), (np.uint8, np.float32, np.float32),
]


@pytest.mark.parametrize("x,y,want", PROMOTIONS)
def test_promotion_table(x, y, want):
    dx, dy, dw = (ndd.dtype(np.dtype(t)) for t in (x, y, want))
    assert promote(dx, dy) == dw and promote(dy, dx) == dw
    out = ndd.tensor(np.ones(2, x)) + ndd.tensor(np.ones(2, y))
    assert out.dtype == dw
    assert A(out).dtype == np.dtype(want)


def test_constants_types():
    u8 = ndd.tensor(np.array([250, 3], np.uint8))
    assert (u8 + 10).dtype == ndd.int32  # int constants are int32
    np.testing.assert_array_equal(A(u8 + 10), [260, 13])
    assert (u8 * 0.5).dtype == ndd.float32  # float constants are float32
    f64 = ndd.tensor(np.array([1.0], np.float64))
    assert (f64 + 1.5).dtype == ndd.float64
    assert (u8 + True).dtype == ndd.uint8
    assert (u8 + np.int64(1)).dtype == ndd.int64  # NumPy scalars keep their type
    assert (u8 / 2).dtype == ndd.float32 and (u8 < 5).dtype == ndd.bool
    with pytest.raises(OverflowError, match="2147483648 does not fit in int32"):
        u8 + 2**31
    with pytest.raises(OverflowError):
        -(2**31) - 1 - u8
    assert A(u8 + (2**31 - 1)).dtype == np.int32


def test_bool_arithmetic_is_integer_then_converted():
    t, f = ndd.tensor([True, True, False]), ndd.tensor([True, False, False])
    np.testing.assert_array_equal(A(t - f), [False, True, False])
    np.testing.assert_array_equal(A(t + f), [True, True, False])
    assert (t * f).dtype == ndd.bool


def test_bitwise_rejects_floats():
    x = ndd.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="Arithmetic `bitand`: bitwise operations need integer"):
        x & 1
    with pytest.raises(ValueError, match="`bitnot`"):
        ~x  # noqa: B018


def test_enum_operands_rejected():
    e = ndd.tensor([ndd.types.DALIImageType.RGB])
    with pytest.raises(ValueError, match="not numbers"):
        e + 1


def test_scalar_tensor_and_constant_broadcast_against_batch():
    b = ndd.batch([np.arange(3, dtype=np.int32), np.arange(5, dtype=np.int32)])
    out = b + ndd.tensor(10)
    assert isinstance(out, ndd.Batch)
    assert [s.tolist() for s in samples(out)] == [[10, 11, 12], [10, 11, 12, 13, 14]]
    assert [s.tolist() for s in samples(100 - b)] == [[100, 99, 98], [100, 99, 98, 97, 96]]
    dense = ndd.as_batch(np.arange(6, dtype=np.float32).reshape(2, 3), layout="W")
    row = ndd.tensor(np.array([1, 2, 3], np.float32))
    out = dense * row
    assert out.layout == "W"
    np.testing.assert_array_equal(np.stack(samples(out)), np.arange(6).reshape(2, 3) * [1, 2, 3])
    # a Tensor with more dims than the samples: per-sample broadcasting aligns to the right
    col = ndd.tensor(np.array([[1], [2]], np.float32))
    np.testing.assert_array_equal(samples(dense + col)[1], np.array([[4, 5, 6], [5, 6, 7]]))


def test_batch_with_batch_ragged_and_per_sample():
    a = ndd.batch([np.array([1, 2]), np.array([3, 4, 5])])
    b = ndd.batch([np.array([10]), np.array([1, 1, 1])])
    assert [s.tolist() for s in samples(a * b)] == [[10, 20], [3, 4, 5]]
    scale = ndd.batch([np.float32(2), np.float32(3)])  # one scalar per sample
    assert [s.tolist() for s in samples(a * scale)] == [[2.0, 4.0], [9.0, 12.0, 15.0]]


def test_inconsistent_batch_size_and_bad_shapes():
    a = ndd.as_batch(np.ones((2, 3), np.int32))
    with pytest.raises(ValueError, match="Inconsistent batch size: 2 != 3"):
        a + ndd.as_batch(np.ones((3, 3), np.int32))
    with ndd.EvalMode.sync_cpu:
        with pytest.raises(ValueError, match=r"Arithmetic `add`: operands of shapes \(3,\), \(4,\)"):
            ndd.tensor([1, 2, 3]) + ndd.tensor([1, 2, 3, 4])
    lazy = ndd.tensor([1, 2, 3]) + ndd.tensor([1, 2, 3, 4])  # eager: raised on access
    with pytest.raises(ValueError, match="asynchronous execution") as ei:
        lazy.evaluate()
    assert "Arithmetic `add`" in str(ei.value.__cause__)


def test_unsupported_operand_returns_notimplemented():
    t = ndd.tensor([1])
    with pytest.raises(TypeError):
        t + "x"
    assert (t == "x") is False
    assert (t != None) is True  # noqa: E711


def test_numpy_and_list_operands():
    t = ndd.tensor(np.array([1, 2], np.int64))
    np.testing.assert_array_equal(A(t + np.array([1, 1], np.int64)), [2, 3])
    np.testing.assert_array_equal(A(t + [1, 1]), [2, 3])


def test_hashable_by_identity_and_eq_is_elementwise():
    t, u = ndd.tensor([1, 2]), ndd.tensor([1, 2])
    assert len({t, u}) == 2 and {t: 1}[t] == 1
    b = ndd.batch([np.zeros(1)])
    assert {b: 1}[b] == 1
    assert isinstance(t == u, ndd.Tensor) and A(t == u).all()
    assert isinstance(b == b, ndd.Batch)


def test_layout_and_ndim_inference():
    x = ndd.tensor(np.ones((2, 3), np.float32), layout="HW")
    out = x + 1
    assert out.layout == "HW" and out.ndim == 2
    assert (ndd.tensor(np.float32(1)) + x).layout == "HW"


def test_seed_guide_shape_example():
    imgs = ndd.batch([np.zeros((100, 80, 3), np.uint8), np.zeros((120, 60, 3), np.uint8)], layout="HWC")
    shapes = ndd.batch(imgs.shape)
    assert shapes.dtype == ndd.int32
    half = shapes.slice[0] // 2
    assert half.dtype == ndd.int32 and [int(A(s)) for s in half] == [50, 60]
    out = imgs.slice[42: ndd.batch(imgs.shape).slice[0] // 2]
    assert out.shape == [(8, 80, 3), (18, 60, 3)]


def test_sync_and_deferred_modes():
    with ndd.EvalMode.deferred:
        out = ndd.tensor([1, 2]) * 3
    np.testing.assert_array_equal(A(out), [3, 6])
    with ndd.EvalMode.sync_cpu:
        np.testing.assert_array_equal(A(ndd.tensor([1, 2]) - 1), [0, 1])


# -- ndd.math -----------------------------------------------------------------------

UNARY_MATH = {
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "exp": np.exp, "log": np.log,
    "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "floor": np.floor, "ceil": np.ceil, "fabs": np.abs, "abs": np.abs,
}
DOMAIN = {"acosh": (1.0, 5.0), "asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "atanh": (-0.99, 0.99),
          "log": (0.1, 10.0), "log2": (0.1, 10.0), "log10": (0.1, 10.0), "sqrt": (0.0, 10.0),
          "rsqrt": (0.1, 10.0)}


@pytest.mark.parametrize("name", sorted(UNARY_MATH))
def test_math_unary_float32(name):
    lo, hi = DOMAIN.get(name, (-3.0, 3.0))
    x = np.linspace(lo, hi, 37, dtype=np.float32)
    want = UNARY_MATH[name](x.astype(np.float64))
    out = getattr(ndd.math, name)(ndd.tensor(x))
    assert out.dtype == ndd.float32
    # float32 results within a few ulp of the float64 reference
    np.testing.assert_allclose(A(out), want, rtol=4 * np.finfo(np.float32).eps, atol=1e-7)
    ob = getattr(ndd.math, name)(ndd.batch([x, x[:5]]))
    np.testing.assert_allclose(samples(ob)[1], want[:5], rtol=4 * np.finfo(np.float32).eps, atol=1e-7)


def test_math_float_functions_of_ints_give_float32():
    i = ndd.tensor(np.array([1, 4, 9], np.int32))
    for fn in (ndd.math.sqrt, ndd.math.floor, ndd.math.exp, ndd.math.fabs):
        assert fn(i).dtype == ndd.float32
    np.testing.assert_array_equal(A(ndd.math.sqrt(i)), [1, 2, 3])
    assert ndd.math.abs(i).dtype == ndd.int32
    assert ndd.math.sqrt(ndd.tensor(np.array([4.0]))).dtype == ndd.float64
    np.testing.assert_allclose(A(ndd.math.sqrt(4.0)), 2.0)


def test_math_takes_dali_parameter_names():
    x = np.array([-2.5, 0.25, 3.0], np.float32)
    y = np.array([1.0, -2.0, 2.0], np.float32)
    tx, ty = ndd.tensor(x), ndd.tensor(y)
    np.testing.assert_allclose(A(ndd.math.atan2(x=tx, y=ty)), np.arctan2(x, y), rtol=1e-6)
    np.testing.assert_array_equal(A(ndd.math.min(left=tx, right=ty)), np.minimum(x, y))
    np.testing.assert_allclose(A(ndd.math.pow(base=tx, exponent=2)), x ** 2, rtol=1e-6)
    np.testing.assert_array_equal(A(ndd.math.clamp(tx, lo=-1.0, hi=1.0)), np.clip(x, -1, 1))
    np.testing.assert_allclose(A(ndd.math.fabs(input=tx)), np.abs(x), rtol=1e-6)


def test_math_binary_and_clamp():
    x = np.array([-2.5, 0.5, 3.0], np.float32)
    y = np.array([1.0, -2.0, 2.0], np.float32)
    tx, ty = ndd.tensor(x), ndd.tensor(y)
    np.testing.assert_allclose(A(ndd.math.atan2(tx, ty)), np.arctan2(x, y), rtol=1e-6)
    np.testing.assert_array_equal(A(ndd.math.min(tx, ty)), np.minimum(x, y))
    np.testing.assert_array_equal(A(ndd.math.max(tx, 0)), np.maximum(x, 0))
    np.testing.assert_allclose(A(ndd.math.pow(tx, 2)), x ** 2, rtol=1e-6)
    i = ndd.tensor(np.array([2, 3], np.int32))
    assert ndd.math.pow(i, 2).dtype == ndd.int32 and ndd.math.fpow(i, 2).dtype == ndd.float32
    np.testing.assert_allclose(A(ndd.math.fpow(i, 0.5)), np.sqrt([2, 3]), rtol=1e-6)
    u8 = ndd.tensor(np.array([0, 100, 250], np.uint8))
    c = ndd.math.clamp(u8, 10, 200)
    assert c.dtype == ndd.int32
    np.testing.assert_array_equal(A(c), [10, 100, 200])
    cb = ndd.math.clamp(ndd.batch([x, x[:1]]), -1.0, 1.0)
    assert [s.tolist() for s in samples(cb)] == [[-1.0, 0.5, 1.0], [-1.0]]


def test_math_errors():
    with pytest.raises(TypeError, match="ndd.math.sqrt: unsupported operand"):
        ndd.math.sqrt("x")
    with pytest.raises(ValueError, match="`sqrt` takes 1 operand"):
        ndd._arith.apply("sqrt", ndd.tensor([1.0]), 2.0)
