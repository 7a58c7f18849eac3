"""``ndd.math``: elementwise math functions, all built on the arithmetic operator.

Operands are Tensors, Batches or Python/NumPy scalars (see :mod:`ndd._arith` for the
type rules), given by position or by DALI's parameter names (``input``, ``left``/``right``,
``base``/``exponent``, ``x``/``y``, ``value``/``lo``/``hi``). Float functions of integer or bool operands give float32.
"""

from __future__ import annotations

from typing import Any

from ._arith import apply as _apply

__all__ = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil",
           "clamp", "cos", "cosh", "exp", "fabs", "floor", "fpow", "log", "log10", "log2", "max",
           "min", "pow", "rsqrt", "sin", "sinh", "sqrt", "tan", "tanh"]


def _call(op: str, *operands: Any) -> Any:
    out = _apply(op, *operands)
    if out is NotImplemented:
        names = ", ".join(type(x).__name__ for x in operands)
        raise TypeError(f"ndd.math.{op}: unsupported operand type(s): {names}")
    return out


def _unary(op: str, name: str, doc: str) -> Any:
    def fn(input: Any) -> Any:  # noqa: A002 - DALI's parameter name
        return _call(op, input)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


abs = _unary("abs", "abs", "Absolute value (keeps the input type).")  # noqa: A001
fabs = _unary("fabs", "fabs", "Absolute value as a float (float32 for integer input).")
sqrt = _unary("sqrt", "sqrt", "Square root.")
rsqrt = _unary("rsqrt", "rsqrt", "Reciprocal of the square root.")
cbrt = _unary("cbrt", "cbrt", "Cube root.")
exp = _unary("exp", "exp", "Exponential.")
log = _unary("log", "log", "Natural logarithm.")
log2 = _unary("log2", "log2", "Base-2 logarithm.")
log10 = _unary("log10", "log10", "Base-10 logarithm.")
sin = _unary("sin", "sin", "Sine (radians).")
cos = _unary("cos", "cos", "Cosine (radians).")
tan = _unary("tan", "tan", "Tangent (radians).")
asin = _unary("asin", "asin", "Arcsine.")
acos = _unary("acos", "acos", "Arccosine.")
atan = _unary("atan", "atan", "Arctangent.")
sinh = _unary("sinh", "sinh", "Hyperbolic sine.")
cosh = _unary("cosh", "cosh", "Hyperbolic cosine.")
tanh = _unary("tanh", "tanh", "Hyperbolic tangent.")
asinh = _unary("asinh", "asinh", "Inverse hyperbolic sine.")
acosh = _unary("acosh", "acosh", "Inverse hyperbolic cosine.")
atanh = _unary("atanh", "atanh", "Inverse hyperbolic tangent.")
floor = _unary("floor", "floor", "Round down (a float result).")
ceil = _unary("ceil", "ceil", "Round up (a float result).")


def atan2(x: Any, y: Any) -> Any:
    """Arctangent of ``x / y``, using the signs of both to pick the quadrant."""
    return _call("atan2", x, y)


def pow(base: Any, exponent: Any) -> Any:  # noqa: A001
    """``base ** exponent`` with the usual type promotion."""
    return _call("pow", base, exponent)


def fpow(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` computed in floating point (float32 for integer operands)."""
    return _call("fpow", base, exponent)


def min(left: Any, right: Any) -> Any:  # noqa: A001
    """Elementwise minimum."""
    return _call("min", left, right)


def max(left: Any, right: Any) -> Any:  # noqa: A001
    """Elementwise maximum."""
    return _call("max", left, right)


def clamp(value: Any, lo: Any, hi: Any) -> Any:
    """``value`` limited to ``[lo, hi]``; the type is the promotion of all three."""
    return _call("clamp", value, lo, hi)
