"""The op dispatch path: validation, batch and device inference, plugins, the hook."""

import warnings

import numpy as np
import pytest

import ndd
import ndd.plugins as plugins


def test_cast_values_against_numpy():
    # DALI's Cast saturates: floats are rounded (ties away from zero) and clamped to the
    # target's range (test_cast_saturate.py has the details)
    rng = np.random.default_rng(0)
    a = rng.uniform(-300, 300, (4, 5)).astype(np.float32)
    r = np.trunc(a.astype(np.float64) + np.copysign(0.5, a))  # exact for float32 values
    for dt, want in [(ndd.int32, r.astype(np.int32)), (ndd.uint8, np.clip(r, 0, 255).astype(np.uint8)),
                     (ndd.float64, a.astype(np.float64)), (ndd.int16, r.astype(np.int16)),
                     (ndd.int8, np.clip(r, -128, 127).astype(np.int8))]:
        np.testing.assert_array_equal(np.asarray(ndd.cast(ndd.tensor(a), dtype=dt)), want)
        out = ndd.cast(ndd.as_batch(a), dtype=dt)
        assert isinstance(out, ndd.Batch) and out.batch_size == 4 and out.dtype == dt
        np.testing.assert_array_equal(np.stack([np.asarray(t) for t in out]), want)


def test_cast_ragged_and_layout_kept():
    b = ndd.batch([np.ones((2, 2), np.uint8), np.ones((3, 2), np.uint8)], layout="HW")
    out = ndd.cast(b, dtype=ndd.float32)
    assert out.layout == "HW" and out.shape == [(2, 2), (3, 2)] and out.dtype == ndd.float32


def test_sample_vs_batch_mode():
    assert isinstance(ndd.cast(ndd.tensor([1]), dtype=ndd.float32), ndd.Tensor)
    assert isinstance(ndd.cast(ndd.tensor([1]), dtype=ndd.float32, batch_size=3), ndd.Batch)
    b = ndd.cast(ndd.tensor([1, 2]), dtype=ndd.float32, batch_size=3)
    assert b.shape == [(2,)] * 3


def test_inconsistent_batch_size():
    scale = ndd.testplugin.scale
    b2 = ndd.as_batch(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="Inconsistent batch size: 2 != 3"):
        scale(b2, factor=ndd.as_batch(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="Inconsistent batch size: 4 != 2"):
        ndd.cast(b2, dtype=ndd.int8, batch_size=4)


def test_argument_validation_names_op_and_argument():
    x = ndd.tensor([1.0])
    with pytest.raises(TypeError, match="Operator `cast` got an unexpected keyword argument 'dtyp'"):
        ndd.cast(x, dtyp=ndd.int32)
    with pytest.raises(TypeError, match="Operator `cast` is missing the required argument 'dtype'"):
        ndd.cast(x)
    with pytest.raises(ValueError, match="not the string 'float32'"):
        ndd.cast(x, dtype="float32")
    with pytest.raises(ValueError, match="Python type int"):
        ndd.cast(x, dtype=int)
    with pytest.raises(TypeError, match="argument 'factor' expects a float"):
        ndd.testplugin.scale(x, factor="big")
    with pytest.raises(TypeError, match="does not accept per-sample values"):
        ndd.cast(ndd.as_batch(np.ones((2, 1))), dtype=ndd.as_batch(np.ones(2)))
    with pytest.raises(TypeError, match="takes 1 positional input"):
        ndd.cast(x, x, dtype=ndd.int32)
    with pytest.raises(ValueError, match="batch_size must be a non-negative int"):
        ndd.cast(x, dtype=ndd.int32, batch_size=-1)


def test_per_sample_argument_batch():
    b = ndd.as_batch(np.ones((3, 2), np.float32))
    out = ndd.testplugin.scale(b, factor=ndd.batch([np.float32(1), np.float32(2), np.float32(3)]))
    np.testing.assert_array_equal(np.stack([np.asarray(t) for t in out]), [[1, 1], [2, 2], [3, 3]])
    out2 = ndd.testplugin.scale(b, factor=5)  # scalar broadcast
    assert np.asarray(out2.tensors[2]).tolist() == [5, 5]


def test_device_inference_and_errors():
    x = ndd.tensor([1])
    assert ndd.cast(x, dtype=ndd.int8).device == ndd.Device("cpu")
    # testplugin.scale has only a CPU kernel (cast may have a GPU one, from ndd-ops-cuda).
    with pytest.raises(ValueError, match='Invalid device "gpu:0" for operator `testplugin.scale`'):
        ndd.testplugin.scale(x, device="gpu")
    with pytest.raises(ValueError, match='use device="gpu"'):
        ndd.cast(x, dtype=ndd.int8, device="mixed")


def test_bools_for_int_arguments_are_one_and_zero():
    """``mirror=True`` / ``horizontal=True`` work as in DALI (an int argument takes a bool as
    1 or 0); a float argument still refuses one (more likely a mistake than a number)."""
    from ndd._schema import FLOAT, INT, INTS, Arg, convert_arg

    assert convert_arg("op", "horizontal", Arg(INT), True) == 1 and convert_arg("op", "h", Arg(INT), False) == 0
    assert convert_arg("op", "h", Arg(INT), np.bool_(True)) == 1
    assert convert_arg("op", "axes", Arg(INTS), [True, 2]) == (1, 2)
    with pytest.raises(TypeError, match="argument 'factor' expects a float"):
        convert_arg("op", "factor", Arg(FLOAT), True)


def test_none_for_a_required_input_names_the_input():
    with pytest.raises(TypeError, match="Operator `cast`: input 'input' is required, got None"):
        ndd.cast(None, dtype=ndd.float32)
    with pytest.raises(TypeError, match="Operator `cat`: input 'input_1' is required, got None"):
        ndd.cat(ndd.tensor([1]), None)
    with pytest.raises(TypeError, match="Operator `reshape`: input 'data' is required"):
        ndd.reshape(None, shape=[1])
    # an optional input may be None
    assert ndd.reshape(ndd.tensor([1, 2]), None, shape=[2, 1]).shape == (2, 1)


def test_explicit_device_that_is_unusable_says_why(monkeypatch):
    from ndd import _dispatch, _plugins
    from ndd._schema import OpSchema

    class Unusable:
        def available(self):
            return False

        def unavailable_reason(self):
            return "no CUDA device is visible"

    ran = []
    schema = OpSchema("_t_gpu", kernels={"cpu": lambda ctx, ins, args: ins[0].samples,
                                         "gpu": lambda ctx, ins, args: ran.append(1)})
    _plugins.ensure_loaded()
    monkeypatch.setattr(_plugins, "devices", {"gpu": Unusable()})
    with pytest.raises(RuntimeError, match="installed but unusable: no CUDA device is visible"):
        _dispatch.invoke(schema, (ndd.tensor([1]),), {"device": "gpu"})
    assert not ran
    out = _dispatch.invoke(schema, (ndd.tensor([1]),), {"device": "cpu"})
    assert np.asarray(out).tolist() == [1]


def test_missing_plugin_names_the_package():
    from ndd._plugins import Registry
    from ndd._schema import OpSchema

    if "_needs_pkg" not in plugins.schemas():
        Registry("tests").add_schema(OpSchema("_needs_pkg", provided_by="ndd-ops-cpu"))
    with pytest.raises(AttributeError, match="pip install ndd-ops-cpu"):
        ndd._needs_pkg  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'definitely_not_an_op'"):
        ndd.definitely_not_an_op  # noqa: B018


def test_signature_and_doc():
    import inspect

    sig = inspect.signature(ndd.cast)
    assert list(sig.parameters)[:1] == ["input"]
    assert sig.parameters["input"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert sig.parameters["dtype"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "batch_size" in sig.parameters and "device" in sig.parameters
    assert "dtype" in ndd.cast.__doc__ and ndd.cast.__module__ == "ndd"
    assert ndd.testplugin.scale.__module__ == "ndd.testplugin"


def test_hook_observes_and_replaces():
    seen = []

    def hook(schema, inputs, kwargs):
        seen.append((schema.name, sorted(kwargs)))
        if kwargs.get("dtype") is ndd.int8:
            return "answered by hook"
        return plugins.invoke(schema, inputs, kwargs)

    previous = plugins.get_op_call_hook()  # a capture extension may have installed one
    plugins.set_op_call_hook(None)
    plugins.set_op_call_hook(hook)
    try:
        assert ndd.cast(ndd.tensor([1]), dtype=ndd.int8) == "answered by hook"
        out = ndd.cast(ndd.tensor([1]), dtype=ndd.int16)
        assert out.dtype == ndd.int16
        with pytest.raises(RuntimeError, match="already installed"):
            plugins.set_op_call_hook(lambda *a: None)
    finally:
        plugins.set_op_call_hook(None)
        assert plugins.get_op_call_hook() is None
        plugins.set_op_call_hook(previous)
    assert seen == [("cast", ["dtype"]), ("cast", ["dtype"])]


def test_random_tensor_in_batch_context_warns():
    t = ndd.random.uniform(range=[1, 2])  # no batch_size: one value, a Tensor
    assert isinstance(t, ndd.Tensor)
    with pytest.warns(UserWarning, match="pass batch_size= to the random operator"):
        ndd.testplugin.scale(ndd.as_batch(np.ones((2, 1), np.float32)), factor=t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ndd.testplugin.scale(ndd.tensor(np.ones(1, np.float32)), factor=t)  # sample mode: fine


@pytest.mark.parametrize("n", [3, 40_000])
def test_long_number_lists_convert_and_fail_like_short_ones(n):
    """Long FLOATS/INTS lists (box_encoder's anchors) take a whole-list check; the values and
    the errors are those of the value-by-value one."""
    from ndd._schema import FLOATS, INTS, Arg, convert_arg

    floats, ints = Arg(FLOATS), Arg(INTS)
    vals = [0.5, 1, 2.25] * (n // 3)
    got = convert_arg("op", "anchors", floats, vals)
    assert type(got) is tuple and got == tuple(float(v) for v in vals)
    assert all(type(v) is float for v in got)
    assert convert_arg("op", "anchors", floats, np.asarray(vals, np.float32)) == got  # from NumPy
    assert convert_arg("op", "anchors", floats, list(np.asarray(vals, np.float32))) == got  # NumPy scalars
    assert all(type(v) is float for v in convert_arg("op", "anchors", floats, list(np.asarray(vals))))
    assert convert_arg("op", "shape", ints, [3, 4] * (n // 2)) == (3, 4) * (n // 2)
    shape = convert_arg("op", "shape", ints, [3, np.int64(4)] * (n // 2))
    assert shape == (3, 4) * (n // 2) and all(type(v) is int for v in shape)
    with pytest.raises(TypeError, match="argument 'anchors' expects a float"):
        convert_arg("op", "anchors", floats, vals[:-1] + [np.bool_(True)])
    with pytest.raises(ValueError, match=r"argument 'anchors' must be finite, got nan"):
        convert_arg("op", "anchors", floats, vals[:-1] + [float("nan")])
    with pytest.raises(TypeError, match="argument 'anchors' expects a float"):
        convert_arg("op", "anchors", floats, vals[:-1] + [True])
    with pytest.raises(TypeError, match="argument 'shape' expects an int"):
        convert_arg("op", "shape", ints, [3] * (n - 1) + [2.5])
    fill = convert_arg("op", "fill_value", floats, [1.0] * (n - 1) + [float("inf")])  # non-finite allowed there
    assert fill[-1] == float("inf") and len(fill) == n
