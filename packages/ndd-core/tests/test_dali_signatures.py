"""Calls written for DALI 2.4's dynamic mode that depend on its exact signatures: the Tensor and
Batch constructors, the helpers' argument names, and deprecated operator arguments."""

import inspect
import warnings

import numpy as np
import pytest

import ndd


def test_tensor_constructor_wraps_like_as_tensor():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = ndd.Tensor(a, layout="HW")
    assert (t.dtype, t.layout, t.shape) == (ndd.int16, "HW", (2, 3))
    a[0, 0] = 42  # wrapped, not copied (DALI's copy=False)
    assert np.asarray(t)[0, 0] == 42
    c = ndd.Tensor(a, copy=True)
    a[0, 1] = 7
    assert np.asarray(c)[0, 1] == 1
    f = ndd.Tensor([1, 2, 3], dtype=ndd.float32)
    assert f.dtype == ndd.float32 and np.asarray(f).tolist() == [1.0, 2.0, 3.0]
    assert isinstance(t, ndd.Tensor) and (np.asarray(ndd.Tensor(t)) == np.asarray(t)).all()


def test_batch_constructor_wraps_like_as_batch():
    samples = [np.zeros((2, 2), np.uint8), np.ones((3, 2), np.uint8)]
    b = ndd.Batch(samples, layout="HW")
    assert (b.batch_size, b.layout, b.dtype, b.shape) == (2, "HW", ndd.uint8, [(2, 2), (3, 2)])
    d = ndd.Batch(np.arange(8.0).reshape(4, 2), dtype=ndd.int32)
    assert d.dtype == ndd.int32 and d.shape == [(2,)] * 4
    assert np.asarray(d.tensors[3]).tolist() == [6, 7]
    assert (np.asarray((ndd.Batch(samples, layout="HW") + 1).tensors[1]) == 2).all()  # an operator's input


def test_constructors_need_data():
    with pytest.raises(TypeError, match="needs data"):
        ndd.Tensor()
    with pytest.raises(TypeError, match="needs tensors"):
        ndd.Batch()


def test_helper_argument_names_are_dalis():
    assert list(inspect.signature(ndd.set_num_threads).parameters) == ["n"]
    assert list(inspect.signature(ndd.device).parameters) == ["obj", "id"]
    assert list(inspect.signature(ndd.type_id).parameters) == ["dtype"]
    before = ndd.get_num_threads()
    try:
        ndd.set_num_threads(n=3)
        assert ndd.get_num_threads() == 3
    finally:
        ndd.set_num_threads(before)
    assert ndd.device(obj="cpu") == ndd.Device("cpu")
    assert ndd.type_id(dtype=ndd.float32) == ndd.types.DALIDataType.FLOAT
    assert ndd.ThreadPool(2, device_id=0).num_threads == 2


def test_deprecated_alias_argument_warns_and_renames():
    x = ndd.tensor(np.arange(10, dtype=np.int32))
    with pytest.warns(DeprecationWarning, match="'output_dtype' is a deprecated alias for 'dtype'") as rec:
        y = ndd.slice(x, start=[2], shape=[3], axes=[0], normalized_anchor=False, normalized_shape=False,
                      output_dtype=ndd.float32)
    assert rec[0].filename == __file__  # the warning points at the caller's line
    assert y.dtype == ndd.float32 and np.asarray(y).tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(TypeError, match="both 'dtype' and its deprecated alias 'output_dtype'"):
        ndd.slice(x, start=[2], shape=[3], axes=[0], dtype=ndd.float32, output_dtype=ndd.float32)


def test_deprecated_unused_argument_warns_and_is_ignored():
    x = ndd.tensor(np.arange(10, dtype=np.int32))
    with pytest.warns(DeprecationWarning, match="'image_type' is deprecated and no longer used"):
        y = ndd.slice(x, rel_start=[0.5], rel_shape=[0.2], axes=[0], image_type=ndd.types.DALIImageType.RGB)
    assert np.asarray(y).tolist() == [5, 6]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # None means "not given": no warning
        ndd.slice(x, rel_start=[0.5], rel_shape=[0.2], axes=[0], image_type=None).evaluate()
    assert {"output_dtype", "image_type"} <= set(inspect.signature(ndd.slice).parameters)


def test_dtype_factories():
    assert ndd.DType.parse("f32") == ndd.float32 and ndd.DType.parse("u8") == ndd.uint8
    assert ndd.DType.from_type_id(ndd.types.DALIDataType.INT16) == ndd.int16
    assert ndd.DType.from_fw_type(np.dtype(np.float64)) == ndd.float64 == ndd.DType.from_fw_type(np.float64)
    with pytest.raises(ValueError, match="Unknown data type name"):
        ndd.DType.parse("f33")
    with pytest.raises(TypeError, match="takes a type name"):
        ndd.DType.parse(np.float32)


def test_random_module_lists_its_operators():
    names = dir(ndd.random)
    assert {"uniform", "normal", "coin_flip", "choice", "beta", "RNG"} <= set(names)
    assert ndd.ThreadPool(1, device_id=0).device_id == 0


def test_device_class_helpers():
    assert ndd.Device.CPU == ndd.Device("cpu")
    assert ndd.Device.default_device_id("cpu") is None and ndd.Device.default_device_id("gpu") == 0
    assert ndd.Device.from_dlpack(np.zeros(3)) == ndd.Device("cpu")
    assert ndd.Device.type_from_dlpack(1) == "cpu" and ndd.Device.type_from_dlpack(2) == "gpu"
    with pytest.raises(ValueError, match="Unsupported DLPack device type: 3"):
        ndd.Device.type_from_dlpack(3)
