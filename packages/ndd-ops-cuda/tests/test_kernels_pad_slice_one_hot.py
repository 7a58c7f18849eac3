"""The device kernels of pad, one_hot and slice against core's CPU kernels: bit-identical
results (shapes, dtypes, layouts, values) and the same errors, over uniform (dense and
lists of one shape) and ragged batches, several dtypes, per-sample argument batches and
every out_of_bounds_policy; and no trip of the sample data through the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import ndd

RAGGED = [(4, 5, 3), (3, 7, 3), (6, 2, 3)]
UNIFORM = [(4, 5, 3)] * 3
DTYPES = [np.uint8, np.int16, np.float32, np.float16, np.uint16, np.int64, np.bool_]


def _data(shapes: list, dtype: Any, seed: int = 0, lo: int = -20, hi: int = 60) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "ub":
        lo = 0
    if np.dtype(dtype) == np.bool_:
        hi = 2
    return [rng.integers(lo, hi, s).astype(dtype) for s in shapes]


def _batch(samples: list[np.ndarray], kind: str, layout: str | None) -> ndd.Batch:
    """``dense``: one array; ``list``: a list of samples (of one shape or ragged)."""
    if kind == "dense":
        return ndd.as_batch(np.stack(samples), layout=layout)
    return ndd.batch(samples, layout=layout)


BATCHES = [("dense", UNIFORM), ("list", UNIFORM), ("list", RAGGED)]


def _outcome(fn: Callable, *inputs: Any) -> tuple:
    """What ``fn`` gives: ("ok", samples, dtype, layout, ndim, device) or ("error", type, message)."""
    try:
        with ndd.EvalMode.sync_cpu:
            out = fn(*inputs)
            out.evaluate()
    except (ValueError, IndexError, TypeError) as e:
        return ("error", type(e), str(e))
    dev = out.device
    host = out.cpu() if dev.device_type == "gpu" else out
    if isinstance(host, ndd.Batch):
        samples = [np.asarray(t) for t in host]
    else:
        samples = [np.asarray(host)]
    return ("ok", samples, out.dtype, out.layout, out.ndim, dev)


def check(fn: Callable, *inputs: Any) -> tuple:
    """``fn`` on the CPU inputs and on their GPU copies: the same result, bit for bit, or
    the same error."""
    ref = _outcome(fn, *inputs)
    got = _outcome(fn, *(x.gpu() if isinstance(x, (ndd.Batch, ndd.Tensor)) else x for x in inputs))
    if ref[0] == "error":
        assert got[:3] == ref[:3], (got, ref)
        return ref
    assert got[0] == "ok", got
    assert got[5] == ndd.Device("gpu:0") and ref[5] == ndd.Device("cpu")
    assert got[2:5] == ref[2:5]
    assert len(got[1]) == len(ref[1])
    for g, r in zip(got[1], ref[1]):
        assert (g.shape, g.dtype) == (r.shape, r.dtype)
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(r).tobytes(), (g, r)
    return ref


def _arg(values: list) -> ndd.Batch:
    return ndd.batch([np.asarray(v) for v in values])


# -- pad ----------------------------------------------------------------------------

PAD_ARGS = [
    {}, {"fill_value": -1}, {"fill_value": 7.75}, {"shape": [-1, 9, -1]}, {"shape": [8, 8, 4]},
    {"shape": [2, 2, 2]}, {"shape": [9]}, {"align": [4]}, {"align": [3, 2, 1], "fill_value": 5},
    {"axes": [0]}, {"axes": [-1], "shape": [5]}, {"axis_names": "W"}, {"axis_names": "HC", "align": 4},
    {"axis_names": "W", "shape": [10], "align": [4]},
    # errors
    {"align": [0]}, {"shape": [1, 2]}, {"axes": [4]}, {"axis_names": "D"}, {"axis_names": "W", "axes": [0]},
]


@pytest.mark.parametrize("kind,shapes", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pad(kind, shapes, dtype):
    b = _batch(_data(shapes, dtype), kind, "HWC")
    for kw in PAD_ARGS:
        check(lambda x, kw=kw: ndd.pad(x, **kw), b)


@pytest.mark.parametrize("kind,shapes", BATCHES)
def test_pad_per_sample_arguments(kind, shapes):
    b = _batch(_data(shapes, np.int32), kind, "HWC")
    n = len(shapes)
    for kw in ({"fill_value": _arg([1.5, -2.0, 3.0])},
               {"fill_value": _arg([1.0, 2.0, 3.0]), "shape": [9, 9, 3]},
               {"shape": _arg([[8, 8, 3], [-1, 9, 3], [6, 7, 5]])},
               {"shape": _arg([[8, 8, 3]] * n)},
               {"align": _arg([[4], [2], [8]])},
               {"axes": _arg([[0], [1], [0]]), "shape": [10]},
               {"axes": _arg([[0, 1], [1, 2], [0, 2]]), "fill_value": _arg([1.0, 2.0, 3.0])},
               {"align": _arg([[4], [0], [8]])},  # error on sample 1
               {"axes": _arg([[0], [5], [0]])}):
        check(lambda x, kw=kw: ndd.pad(x, **kw), b)


def test_pad_other_ranks_and_tensors():
    check(lambda x: ndd.pad(x, shape=[6], fill_value=3), ndd.tensor(np.arange(3, dtype=np.int32)))
    check(lambda x: ndd.pad(x), ndd.batch([np.arange(k, dtype=np.float32) for k in (1, 4, 2)]))
    check(lambda x: ndd.pad(x, align=[4]), ndd.batch([np.zeros((0, 2), np.uint8), np.ones((3, 2), np.uint8)]))
    check(lambda x: ndd.pad(x), ndd.batch([np.float32(1.5), np.float32(2.0)]))
    check(lambda x: ndd.pad(x, fill_value=float("nan")), ndd.batch([np.ones(2, np.float32), np.ones(5, np.float32)]))


def test_pad_makes_one_output_for_a_ragged_batch_padded_to_one_shape():
    b = ndd.batch([np.ones((2, 3), np.float32), np.ones((3, 1), np.float32)]).gpu()
    out = ndd.pad(b, fill_value=-1).evaluate()
    assert out._batch_data().dense is not None and tuple(out._batch_data().dense.shape) == (2, 3, 3)


# -- one_hot ------------------------------------------------------------------------

ONE_HOT_ARGS = [
    {"num_classes": 5}, {"num_classes": 3, "axis": 0}, {"num_classes": 4, "axis": 1},
    {"num_classes": 6, "dtype": ndd.int32, "on_value": 7, "off_value": -1},
    {"num_classes": 5, "dtype": ndd.uint8, "on_value": 255.0}, {"num_classes": 5, "dtype": ndd.bool},
    {"num_classes": 5, "dtype": ndd.float16, "on_value": 0.1, "off_value": -2.5},
    {"num_classes": 5, "dtype": ndd.uint16, "on_value": 65535}, {"num_classes": 5, "dtype": ndd.float64},
    {"num_classes": 5, "dtype": ndd.int64, "on_value": 3.9, "off_value": -3.9},
    {"num_classes": 5, "axis_name": "C"}, {"num_classes": 5, "axis": 0, "axis_name": "K"},
    # errors
    {"num_classes": 0}, {"num_classes": 3, "axis": 5}, {"num_classes": 3, "axis_name": "CC"},
]


def _labels(shapes: list, dtype: Any) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    if np.dtype(dtype).kind == "f":  # integers, halves and negatives
        return [(rng.integers(-4, 14, s) / 2).astype(dtype) for s in shapes]
    lo = 0 if np.dtype(dtype).kind in "ub" else -2
    return [rng.integers(lo, 2 if np.dtype(dtype) == np.bool_ else 7, s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("kind,shapes", [("dense", [(4, 2)] * 3), ("list", [(4, 2)] * 3),
                                         ("list", [(4, 2), (1, 3), (5, 1)]), ("dense", [()] * 4),
                                         ("list", [(3,), (1,), (0,)])])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.float32, np.float16, np.uint32, np.bool_])
def test_one_hot(kind, shapes, dtype):
    layout = "HW"[:len(shapes[0])] or None
    b = _batch(_labels(shapes, dtype), kind, layout)
    for kw in ONE_HOT_ARGS:
        check(lambda x, kw=kw: ndd.one_hot(x, **kw), b)


def test_one_hot_scalars_and_tensors():
    for kw in ONE_HOT_ARGS:
        check(lambda x, kw=kw: ndd.one_hot(x, **kw), ndd.tensor(np.int32(2)))
        check(lambda x, kw=kw: ndd.one_hot(x, **kw), ndd.tensor(np.array([0, 4, 9, -1], np.int64), layout="W"))
    check(lambda x: ndd.one_hot(x, num_classes=3000, dtype=ndd.uint8),
          ndd.tensor(np.array([2047, 2048, 2049, 2999], np.float16)))


# -- slice --------------------------------------------------------------------------

SLICE_ARGS = [
    {"start": [1, 2], "end": [4, 3]}, {"start": [1, 1], "shape": [2, 1]}, {"rel_start": [0.5, 0.5]},
    {"rel_start": [0.25, 0.0], "rel_shape": [0.5, 0.75]}, {"rel_end": [0.5, 0.5]}, {"end": [2, 2]},
    {"axes": [2], "start": [1]}, {"axis_names": "C", "end": [2]}, {"axes": [0], "rel_start": [0.3]},
    {"axis_names": "HW", "start": [0, 1], "shape": [2, 2]},
    {"start": [1, 1], "end": [2, 3], "dtype": ndd.float32}, {"start": [0, 0], "shape": [2, 2], "dtype": ndd.int32},
    {"start": [1, 1], "shape": [0, 2]},
    # out of bounds, every policy
    *({"start": [-1, 2], "shape": [4, 3], "out_of_bounds_policy": p, **f}
      for p in ("error", "pad", "trim_to_shape") for f in ({}, {"fill_values": [9]}, {"fill_values": [7, 8, 9]})),
    *({"start": [3, -2], "end": [9, 1], "out_of_bounds_policy": p} for p in ("pad", "trim_to_shape")),
    {"start": [9, 9], "shape": [2, 2], "out_of_bounds_policy": "pad", "fill_values": [1, 2, 3]},
    {"start": [-9, 0], "shape": [3, 2], "out_of_bounds_policy": "trim_to_shape"},
    {"rel_start": [-0.5, 0.5], "rel_shape": [2.0, 1.0], "out_of_bounds_policy": "pad", "dtype": ndd.float16},
    # errors
    {"start": [1, 1, 1]}, {"start": [3, 0], "end": [1, 1]}, {"axes": [5], "start": [0]},
    {"start": [-1, 0], "out_of_bounds_policy": "pad", "fill_values": [1, 2]}, {"axis_names": "D", "start": [0]},
]


@pytest.mark.parametrize("kind,shapes", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_slice(kind, shapes, dtype):
    b = _batch(_data(shapes, dtype), kind, "HWC")
    for kw in SLICE_ARGS:
        check(lambda x, kw=kw: ndd.slice(x, **kw), b)


@pytest.mark.parametrize("kind,shapes", BATCHES)
@pytest.mark.parametrize("policy", ["error", "pad", "trim_to_shape"])
def test_slice_per_sample_arguments(kind, shapes, policy):
    b = _batch(_data(shapes, np.float32), kind, "HWC")
    for kw in ({"start": _arg([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]]), "shape": [2, 2]},  # windows of one size
               {"start": _arg([[-1.0, 0.0], [1.0, 3.0], [2.0, -2.0]]), "shape": [3, 3], "fill_values": [4, 5, 6]},
               {"start": _arg([[-1.0, 0.0], [1.0, 3.0], [2.0, -2.0]]), "shape": [3, 3]},
               {"start": _arg([[0.0, 0.0], [1.0, 1.0], [0.0, 2.0]]), "shape": _arg([[2, 2], [1, 3], [2, 1]])},
               {"rel_start": _arg([[0.0, 0.5], [0.5, 0.0], [0.25, 0.25]]), "rel_shape": [0.5, 0.5]},
               {"axes": _arg([[0], [1], [2]]), "start": [1], "end": [3]},
               {"end": _arg([[1.0, 1.0], [2.0, 1.0], [9.0, 1.0]]), "axes": [1, 0]},
               {"start": _arg([[0.0, 0.0], [5.0, 0.0], [0.0, 0.0]]), "end": _arg([[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]])}):
        check(lambda x, kw=kw: ndd.slice(x, out_of_bounds_policy=policy, **kw), b)


@pytest.mark.parametrize("kind,shapes", BATCHES)
@pytest.mark.parametrize("policy", ["error", "pad", "trim_to_shape"])
def test_slice_anchor_and_shape_inputs(kind, shapes, policy):
    b = _batch(_data(shapes, np.uint8), kind, "HWC")
    rel = _arg([[0.0, 0.5], [0.5, 0.25], [0.25, 0.0]])
    for extra, kw in (((rel, _arg([[0.5, 0.5]] * 3)), {}),
                      ((rel,), {}),
                      ((_arg([[1, 2], [0, 0], [1, 1]]), _arg([[2, 1], [2, 1], [2, 1]])),
                       {"normalized_anchor": False, "normalized_shape": False}),
                      ((_arg([[1, 2], [-1, 0], [1, 1]]), _arg([[3, 3], [2, 1], [2, 2]])),
                       {"normalized_anchor": False, "normalized_shape": False, "fill_values": [1, 2, 3]}),
                      ((rel, _arg([[0.75, 1.0]] * 3)), {"normalized_anchor": True, "normalized_shape": True}),
                      ((_arg([[0.5, -0.5]] * 3), _arg([[3, 3]] * 3)), {"normalized_shape": False}),
                      ((rel, _arg([[0.5, 0.5, 0.5]] * 3)), {}),  # error: 3 values for 2 axes
                      ((ndd.as_batch(np.array([[0.5, 0.5]] * 3)),), {"axis_names": "HW"})):
        check(lambda x, *e, kw=kw: ndd.slice(x, *e, out_of_bounds_policy=policy, **kw), b, *extra)


def test_slice_tensors_and_other_layouts():
    img = _data([(4, 6, 3)], np.int16)[0]
    check(lambda x: ndd.slice(x, start=[1, 2], end=[5, 4]), ndd.tensor(img, layout="HWC"))
    check(lambda x: ndd.slice(x, start=[1, 2], end=[5, 4]), ndd.tensor(img.transpose(2, 0, 1), layout="CHW"))
    check(lambda x: ndd.slice(x, start=[1, 2]), ndd.tensor(img[..., 0]))
    check(lambda x: ndd.slice(x, ndd.tensor([0.5, 0.25]), ndd.tensor([0.5, 0.5])), ndd.tensor(img, layout="HWC"))
    chw = ndd.as_batch(np.stack(_data([(3, 4, 5)] * 2, np.float32)), layout="CHW")
    check(lambda x: ndd.slice(x, start=[-1, 1], shape=[3, 4], out_of_bounds_policy="pad",
                              fill_values=[1, 2, 3]), chw)
    check(lambda x: ndd.slice(x, start=_arg([[-1.0, 1.0], [0.0, 0.0]]), shape=[3, 4], out_of_bounds_policy="pad",
                              fill_values=[1, 2, 3]), chw)
    check(lambda x: ndd.slice(x, start=[0, 0], shape=[2, 2], out_of_bounds_policy="pad"),
          ndd.batch([np.zeros((0, 3), np.uint8), np.ones((0, 3), np.uint8)]))
    for start in ([-9, 0], [0, 9]):  # windows wholly outside an axis: all fill
        check(lambda x, s=start: ndd.slice(x, start=s, shape=[2, 2], out_of_bounds_policy="pad",
                                           fill_values=[1, 2, 3]), ndd.tensor(img, layout="HWC"))


def test_empty_batches():
    e = ndd.as_batch(np.zeros((0, 3, 4, 2), np.uint8), layout="HWC")
    check(lambda x: ndd.pad(x, fill_value=1), e)
    check(lambda x: ndd.slice(x, start=[0, 0], shape=[1, 1]), e)
    check(lambda x: ndd.one_hot(x, num_classes=3), ndd.as_batch(np.zeros((0, 2), np.int32)))


# -- no trip through the host -------------------------------------------------------


def test_no_host_round_trip(monkeypatch):
    """The sample data stays on the device: no copy to the host (``to_host``, ``.cpu()``,
    ``.numpy()``, ``.tolist()``, ``.item()``), except slice's anchor / shape inputs, a few
    numbers per sample."""
    from ndd_ops_cuda._backend import BACKEND
    from ndd_ops_cuda.kernels import _common

    cpu, numpy = torch.Tensor.cpu, torch.Tensor.numpy
    copied: list = []

    def record(x):
        copied.append(tuple(x.shape))
        return numpy(cpu(x.detach()))

    def guard(name):
        # Device data read back to the host fails; host tensors (an upload's pinned staging,
        # argument inputs) pass. Under the emulation device data are CPU tensors: all fail.
        orig = getattr(torch.Tensor, name)

        def no_host(self, *a, **k):
            if self.is_cuda or BACKEND.emulated:
                raise AssertionError(f"{name}() copied device data to the host")
            return orig(self, *a, **k)
        return no_host

    n = 3
    imgs = [_batch(_data(sh, np.uint8), kind, "HWC").gpu() for kind, sh in BATCHES]
    labels = ndd.batch(_labels([(4, 2), (1, 3), (5, 1)], np.int32)).gpu()
    dense_labels = ndd.as_batch(np.stack(_labels([(4, 2)] * n, np.int32))).gpu()
    anchor = _arg([[0.0, 0.5], [0.5, 0.25], [0.25, 0.0]]).gpu()
    shape = _arg([[0.5, 0.5]] * n).gpu()
    starts = _arg([[-1.0, 0.0], [1.0, 3.0], [2.0, -2.0]])
    calls = [lambda x: ndd.pad(x, fill_value=-1), lambda x: ndd.pad(x, align=[4], fill_value=_arg([1.0, 2.0, 3.0])),
             lambda x: ndd.pad(x, shape=_arg([[8, 8, 3], [-1, 9, 3], [6, 7, 5]])),
             lambda x: ndd.slice(x, start=[0, 1], shape=[2, 2]),
             lambda x: ndd.slice(x, start=[-1, 1], shape=[2, 9], out_of_bounds_policy="pad", fill_values=[1, 2, 3]),
             lambda x: ndd.slice(x, start=starts, shape=[3, 3], out_of_bounds_policy="pad", dtype=ndd.float32),
             lambda x: ndd.slice(x, start=starts, end=[9, 9], out_of_bounds_policy="trim_to_shape")]
    with monkeypatch.context() as m:
        m.setattr(_common, "to_host", record)
        for name in ("cpu", "numpy", "tolist", "item", "__array__"):
            m.setattr(torch.Tensor, name, guard(name))
        outs = [fn(x).evaluate() for fn in calls for x in imgs]
        outs += [ndd.one_hot(x, num_classes=5, axis=1).evaluate() for x in (labels, dense_labels)]
        outs += [ndd.slice(x, anchor, shape, out_of_bounds_policy="pad").evaluate() for x in imgs]
    assert all(o.device == ndd.Device("gpu:0") for o in outs)
    assert copied and all(s in ((n, 2), (2,)) for s in copied), copied  # the anchor and shape inputs only
