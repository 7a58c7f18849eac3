"""Constant proofs by source analysis: every row of the Capture Rules table and every form.

The user functions below call a fake operator ``op`` (from ``capture_sa_helpers``) that
analyses the call expression which invoked it, as the capture runtime does. Keep each
``op(...)`` call alone on its line: on Python 3.10 a line with two calls is unprovable.
"""

import functools
import math
import os
import sys
from math import pi  # noqa: F401  (the "imported name" row)

import pytest

import ndd
from ndd_capture._invariant import invariant
from ndd_capture._source_analysis import REASON_CODES

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
import capture_sa_helpers as helpers  # noqa: E402
from capture_sa_helpers import op  # noqa: E402

PY311 = sys.version_info >= (3, 11)
SIZE = (64, 64)  # a module-level global: never proven
SOME_GLOBAL = 1.5
CFG = invariant(type("Cfg", (), {"angle": 30, "size": (64, 64)})())


def _line(tag: str) -> int:
    """The line number of the line carrying the comment ``# @tag``."""
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# @{tag}"))


def ok(proof, depth=0):
    assert proof.constant, (proof.code, proof.reason)
    assert proof.code is None and proof.reason is None
    assert proof.depth == depth


def no(proof, code, *words):
    assert not proof.constant
    assert proof.code == code, (proof.code, proof.reason)
    assert code in REASON_CODES
    for word in words:
        assert word in proof.reason, (word, proof.reason)


# ------------------------------------------------------------------ the table of the seed


def test_row_literal():
    res = op(1, angle=30)
    ok(res.kw["angle"])


def test_row_inline_list_of_constants():
    width = 64
    r = op(1, size=[width, 64])
    ok(r.kw["size"])


def test_row_dali_constant():
    res = op(1, dtype=ndd.int32)
    ok(res.kw["dtype"])


def test_row_name_assigned_once():
    size = (64, 64)
    res = op(1, size=size)
    ok(res.kw["size"])


def build(images, angle):
    return op(images, angle=angle)


def test_row_constant_passed_as_argument():
    r = build(1, angle=30)
    ok(r.kw["angle"], depth=1)


def test_row_expressions_of_constants():
    size = 32
    r = op(1, size=(size, size * 2))
    ok(r.kw["size"])


def test_row_module_level_name():
    res = op(1, size=SIZE)
    no(res.kw["size"], "NDD-C010", "'SIZE'", "module-level")


def test_row_mutable_value():
    size = [64, 64]
    res = op(1, size=size)
    no(res.kw["size"], "NDD-C013", "local name 'size' is bound to a list; write a tuple instead")


def test_row_assigned_more_than_once_on_untaken_branch():
    size = (64, 64)  # @twice-1
    if False:
        size = (32, 32)  # @twice-2
    r = op(1, size=size)
    reason = f"local name 'size' is assigned twice (lines {_line('twice-1')} and {_line('twice-2')})"
    no(r.kw["size"], "NDD-C012", reason)


def compute_angle():
    return 60


def test_row_function_call_result():
    angle = compute_angle()  # @call
    res = op(1, angle=angle)
    no(res.kw["angle"], "NDD-C017", "'angle'", f"line {_line('call')}", "compute_angle()")


class Model:
    angle = 30

    def __init__(self):
        self.angle = 30

    def run(self):
        return op(1, angle=self.angle)


def test_row_attribute_of_own_object():
    res = Model().run()
    no(res.kw["angle"], "NDD-C018", "'self.angle'", "user object")
    cfg = Model()
    res = op(1, size=cfg.angle)
    no(res.kw["size"], "NDD-C018", "'cfg.angle'")
    res = op(1, dtype=Model.angle)
    no(res.kw["dtype"], "NDD-C018", "'Model.angle'")


def test_row_for_target():
    for size in [(64, 64)]:  # @for
        r = op(1, size=size)
    no(r.kw["size"], "NDD-C014", "'size' is a for-loop target", f"line {_line('for')}")


# ------------------------------------------------------------------ accepted forms


def test_literals_and_operators():
    r = op(1, 2.5, -3, +4, "s", b"b", True, None, ..., 3j, 2**10 - 1, -(1 + 2) * 3, {1, 2}, (1, [2, (3,)]))
    for p in r.args:
        ok(p)


def test_assignment_forms():
    a: int = 10
    _ = b = 60
    (c, d), *_rest, e = (1, 2), 3, 4, 5
    if True:
        f = 7
    g = (h := 8) + 1
    dt = ndd.float32
    t = ndd.types.DALIInterpType.INTERP_LINEAR
    r = op(a, b, c, d, e, f, g, h, dt, t)
    for p in r.args:
        ok(p)


def test_dali_constant_chains():
    from ndd import types
    from ndd.types import DALIImageType

    r = op(
        image_type=ndd.types.GRAY,
        interp=types.DALIInterpType.INTERP_LINEAR,
        t=DALIImageType.RGB,
        d=ndd.Device("cpu"),
    )
    for name in ("image_type", "interp", "t"):
        ok(r.kw[name])
    no(r.kw["d"], "NDD-C017")


def test_local_enum_and_ndd_values_are_immutable():
    kind = ndd.types.DALIImageType.GRAY
    dt = ndd.int32
    pair = (dt, kind)
    r = op(1, kind=kind, dt=dt, pair=pair)
    for p in r.kw.values():
        ok(p)


def test_invariant_marked_values():
    local = invariant([1, 2])
    angle = invariant(10) + CFG.angle
    r = op(
        1,
        a=local,
        b=CFG,
        c=CFG.size,
        d=invariant(SOME_GLOBAL),
        e=ndd.capture.invariant(SIZE),
        f=angle,
    )
    for p in r.kw.values():
        ok(p)
    bad = invariant(0.0) + SOME_GLOBAL
    res = op(1, x=bad)
    no(res.kw["x"], "NDD-C010", "'SOME_GLOBAL'")
    res = op(
        1,
        x=invariant(0.0) + SOME_GLOBAL,
    )
    no(res.kw["x"], "NDD-C010", "'SOME_GLOBAL'")


def test_marked_attribute_chain_on_user_object():
    m = Model()
    m.cfg = CFG
    res = op(1, size=m.cfg.size)
    ok(res.kw["size"])
    res = op(
        1,
        size=invariant(m).angle,
    )
    ok(res.kw["size"])


# ------------------------------------------------------------------ rejected forms


def test_immutable_module_global_and_builtin():
    res = op(1, x=SOME_GLOBAL)
    no(res.kw["x"], "NDD-C010", "'SOME_GLOBAL' is a module-level global")
    res = op(1, x=len)
    no(res.kw["x"], "NDD-C010", "'len' is a global or builtin name")


def test_imported_names():
    res = op(1, x=pi)
    no(res.kw["x"], "NDD-C011", "'pi' is a name imported from a module")
    from math import tau

    res = op(1, x=tau)
    no(res.kw["x"], "NDD-C011", "'tau' is imported")
    res = op(1, x=math.pi)
    no(res.kw["x"], "NDD-C018", "'math.pi' is not an ndd constant")


def test_mutable_values():
    d = {"a": 1}
    s = {1, 2}
    t = ([1],)
    r = op(1, d=d, s=s, t=t)
    no(r.kw["d"], "NDD-C013", "bound to a dict")
    no(r.kw["s"], "NDD-C013", "bound to a set; write a frozenset instead")
    no(r.kw["t"], "NDD-C013", "tuple holding mutable items")


def test_assigned_more_than_once_forms():
    a = 1  # @aug-1
    r = op(1, a=a)
    a += 1  # @aug-2
    no(r.kw["a"], "NDD-C012", f"lines {_line('aug-1')} and {_line('aug-2')}")

    b = 1

    def rebind():
        nonlocal b
        b = 2

    res = op(1, b=b)
    no(res.kw["b"], "NDD-C012", "'b' is assigned twice (including a nonlocal rebinding)")
    c = 1
    c = 2
    c = 3
    res = op(1, c=c)
    no(res.kw["c"], "NDD-C012", "assigned 3 times")


def test_function_call_values():
    a = abs(-60)
    r = op(
        1,
        a=a,
        b=abs(-60),
        c=ndd.int32.__class__,
    )
    no(r.kw["a"], "NDD-C017", "abs(-60)")
    no(r.kw["b"], "NDD-C017", "'abs(-60)' is the value returned by a function call")
    no(r.kw["c"], "NDD-C018")


def test_user_rooted_dali_chain():
    class Holder:
        DTYPE = ndd.int32

    holder = Holder()
    holder.nd = ndd
    res = op(1, d=Holder.DTYPE)
    no(res.kw["d"], "NDD-C018", "'Holder.DTYPE' is an attribute of a user object")
    res = op(1, d=holder.nd.int32)
    no(res.kw["d"], "NDD-C018", "user object")


def test_star_and_unpacking():
    first, *rest = 1, 2, 3
    x, y = divmod(7, 2)
    tup = (1, 2)
    u, v = (*tup, 3)[:2]
    (p, _q) = (*tup,)
    r = op(1, first=first, rest=rest, x=x, u=u, p=p, s=[*tup])
    ok(r.kw["first"])
    no(r.kw["rest"], "NDD-C015", "'rest' is a starred assignment target")
    no(r.kw["x"], "NDD-C015", "'x' is unpacked from a non-literal value")
    no(r.kw["u"], "NDD-C015", "'u' is unpacked")
    no(r.kw["p"], "NDD-C015", "right-hand side that unpacks")
    no(r.kw["s"], "NDD-C015", "unpacks with *")


def test_other_bindings():
    with open(__file__) as fh:
        pass
    try:
        raise ValueError
    except ValueError as err:
        r = op(1, fh=fh, err=err)
    no(r.kw["fh"], "NDD-C016", "'fh' is bound by a with statement")
    no(r.kw["err"], "NDD-C016", "'err' is bound by an except clause")


def test_unsupported_expressions():
    t = (1, 2)
    r = op(1, a=t[0], b=1 if t else 2, c={"k": 1}, d=f"{t}", e=not t, f=1 < 2)
    for p in r.kw.values():
        no(p, "NDD-C019", "not a recognised constant expression")


def test_comprehension_target_and_constant_inside_comprehension():
    sizes = ((1, 2), (3, 4))
    scale = 2
    res = [op(1, size=s, scale=scale) for s in sizes]
    no(res[0].kw["size"], "NDD-C014", "'s' is a comprehension target")
    # On 3.11 the list comprehension runs in its own frame: the proof reads the enclosing
    # function's frame but depends on no caller, so the depth stays 0.
    ok(res[0].kw["scale"])


# ------------------------------------------------------------------ parameters


def level1(images, angle, size=(3, 4), *, mode="linear"):
    return op(images, angle=angle, size=size, mode=mode)


def level2(images, angle):
    return level1(images, angle)


def level3(images, a):
    return level2(images, angle=a)


def test_parameters_through_levels():
    r1 = level1(1, 30)
    ok(r1.kw["angle"], depth=1)
    ok(r1.kw["size"], depth=1)
    ok(r1.kw["mode"], depth=1)
    r2 = level2(1, angle=30)
    ok(r2.kw["angle"], depth=2)
    r3 = level3(1, 30)
    ok(r3.kw["angle"], depth=3)
    ok(r3.args[0], depth=3)


def test_parameter_non_constant_at_caller():
    angle = [30]
    r = level2(1, angle)
    no(
        r.kw["angle"],
        "NDD-C013",
        "parameter 'angle' of 'level1'",
        "parameter 'angle' of 'level2'",
        "bound to a list",
    )
    assert r.kw["angle"].depth == 2
    ok(r.args[0], depth=2)


def mutable_default(images, size=[1, 2]):  # noqa: B006
    return op(images, size=size)


def global_default(images, size=SIZE):
    return op(images, size=size)


def star_params(images, *args, **kwargs):
    return op(images, a=args, k=kwargs)


def test_parameter_defaults_and_star_parameters():
    res = mutable_default(1)
    no(res.kw["size"], "NDD-C022", "mutable default (list)")
    res = global_default(1)
    no(res.kw["size"], "NDD-C022", "uses the name 'SIZE'")
    r = star_params(1, 2, k=3)
    no(r.kw["a"], "NDD-C020", "'args' collects *args")
    no(r.kw["k"], "NDD-C020", "'kwargs'")


class Ops:
    def method(self, images, angle):
        return op(images, angle=angle)

    def uses_self(self, images):
        return op(images, me=self)

    @classmethod
    def cm(cls, images, angle):
        return op(images, angle=angle)

    @staticmethod
    def sm(images, angle):
        return op(images, angle=angle)

    def __call__(self, images, angle):
        return op(images, angle=angle)


class Built:
    def __init__(self, images, angle):
        self.seen = op(images, angle=angle)


def test_methods():
    obj = Ops()
    res = obj.method(1, 30)
    ok(res.kw["angle"], depth=1)
    res = obj.method(1, angle=30)
    ok(res.kw["angle"], depth=1)
    res = Ops.method(obj, 1, 30)
    ok(res.kw["angle"], depth=1)
    res = Ops.cm(1, 30)
    ok(res.kw["angle"], depth=1)
    res = obj.cm(1, 30)
    ok(res.kw["angle"], depth=1)
    res = Ops.sm(1, 30)
    ok(res.kw["angle"], depth=1)
    res = obj.sm(1, 30)
    ok(res.kw["angle"], depth=1)
    res = obj(1, 30)
    ok(res.kw["angle"], depth=1)
    res = Built(1, 30)
    ok(res.seen.kw["angle"], depth=1)
    bound = obj.method
    res = bound(1, 30)
    ok(res.kw["angle"], depth=1)
    res = obj.uses_self(1)
    no(res.kw["me"], "NDD-C020", "'self'", "bound instance")


def countdown(images, n, angle):
    if n == 0:
        return op(images, angle=angle, n=n)
    return countdown(images, n - 1, angle)


def test_recursion():
    r = countdown(1, 2, 45)
    ok(r.kw["angle"], depth=3)
    ok(r.kw["n"], depth=3)


def test_cross_file():
    res = helpers.build(1, 30)
    ok(res.kw["angle"], depth=1)
    res = helpers.build_default(1)
    ok(res.kw["angle"], depth=1)
    res = helpers.call_back(level1)
    ok(res.kw["angle"], depth=1)
    res = helpers.build(1, SIZE)
    no(res.kw["angle"], "NDD-C010", "parameter 'angle' of 'build'", "'SIZE'")


def test_indirect_calls():
    part = functools.partial(level1, angle=30)
    res = part(1)
    no(res.kw["angle"], "NDD-C021", "functools.partial")

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        return wrapper

    wrapped = deco(level1)
    res = wrapped(1, 30)
    no(res.kw["angle"], "NDD-C004", "*args or **kwargs")

    def make():
        return level1

    res = make()(1, 30)
    # Python 3.10 cannot tell the two calls of this line apart
    no(res.kw["angle"], "NDD-C021" if PY311 else "NDD-C003", "returned inline" if PY311 else "2 calls")
    holder = Model()
    holder.fn = level1
    res = holder.fn(1, 30)
    no(res.kw["angle"], "NDD-C021", "stored on an instance")
    res = list(map(level1, [1], [30]))
    no(res[0].kw["angle"], "NDD-C021" if PY311 else "NDD-C003", "does not call it directly" if PY311 else "")
    args = (1, 30)
    res = level1(*args)
    no(res.kw["angle"], "NDD-C004")


def test_lambda_parameter():
    fn = lambda images, angle: op(images, angle=angle)  # noqa: E731
    res = fn(1, 30)
    ok(res.kw["angle"], depth=1)


# ------------------------------------------------------------------ closures


def test_closure_constant_live_and_frozen():
    size = (8, 8)
    cell = [1]

    def inner():
        return op(1, size=size, cell=cell)

    r = inner()
    ok(r.kw["size"])
    no(r.kw["cell"], "NDD-C013", "closure variable 'cell' is bound to a list")

    def outer():
        width = (4, 4)

        def deep():
            return op(1, size=width)

        return deep

    res = outer()()
    ok(res.kw["size"])  # the owning call has returned: the cell is frozen


def test_closure_over_parameter():
    def outer(angle):
        def inner():
            return op(1, angle=angle)

        return inner(), inner

    live, inner = outer(30)
    ok(live.kw["angle"], depth=2)
    res = inner()
    no(res.kw["angle"], "NDD-C023", "'angle' is a parameter of 'outer'")


def test_closure_nonlocal_rebinding():
    def outer():
        size = (1, 1)  # @nl-1

        def change():
            nonlocal size
            size = (2, 2)  # @nl-2

        def use():
            return op(1, size=size)

        return use()

    res = outer()
    no(res.kw["size"], "NDD-C012", f"lines {_line('nl-1')} and {_line('nl-2')}")


# ------------------------------------------------------------------ locating the call


def test_exec_source_unavailable():
    namespace = {"op": op}
    exec("def f():\n    return op(1, size=(1, 2))\nr = f()", namespace)
    r = namespace["r"]
    assert r.analysis.code == "NDD-C001"
    no(r.kw["size"], "NDD-C001", "not available")


def test_two_calls_on_one_line():
    r = op(op(1, 2), size=(3, 4))
    if PY311:
        assert r.analysis.code is None
        ok(r.kw["size"])
        no(r.args[0], "NDD-C017", "op(1, 2)")
    else:
        no(r.kw["size"], "NDD-C003", "cannot be told apart")


def test_multiline_call():
    size = (1, 2)
    r = op(
        1,
        size=size,
    )
    ok(r.kw["size"])


def test_non_ascii_source():
    r = op("ü日本語", op("é", 1), size=(1, 2))  # ✓ columns are UTF-8 bytes
    if PY311:
        ok(r.args[0])
        ok(r.kw["size"])
    else:
        no(r.kw["size"], "NDD-C003")
    s = "ü日本語"
    res = op(s, size=(1, 2))
    ok(res.args[0])


def test_missing_argument_and_positional():
    r = op(1, 2)
    res = r.analysis.keyword("nope")
    no(res, "NDD-C002", "'nope'")
    res = r.analysis.positional(5)
    no(res, "NDD-C002")
    ok(r.args[1])


def test_reason_codes_documented():
    for code, (title, hint) in REASON_CODES.items():
        assert code.startswith("NDD-C0") and title and hint


@pytest.mark.parametrize("value", [1, (1, 2)])
def test_parametrized_test_function_is_not_a_constant_source(value):
    # pytest calls test functions with **kwargs, so the parameter cannot be traced further
    res = op(1, v=value)
    no(res.kw["v"], "NDD-C004", "parameter 'value'")
