"""A NaN or infinite float argument is an error naming the operator and the argument (ours),
at the call for a constant and when the call runs for a per-sample value; fill values may be
NaN."""

from __future__ import annotations

import numpy as np
import pytest

import ndd

NAN, INF = float("nan"), float("inf")
IMGS = ndd.batch([np.full((12, 10, 3), 100, np.uint8)] * 2, layout="HWC")


@pytest.mark.parametrize("call,name,value", [
    (lambda: ndd.resize(IMGS, size=[NAN, 8]), "size", "nan"),
    (lambda: ndd.resize(IMGS, resize_shorter=INF), "resize_shorter", "inf"),
    (lambda: ndd.resize(IMGS, size=[8, 8], roi_start=[NAN, 0], roi_end=[10, 10]), "roi_start", "nan"),
    (lambda: ndd.rotate(IMGS, angle=NAN), "angle", "nan"),
    (lambda: ndd.crop(IMGS, crop=[NAN, 4]), "crop", "nan"),
    (lambda: ndd.crop(IMGS, crop=[4, 4], crop_pos_x=-INF), "crop_pos_x", "-inf"),
    (lambda: ndd.crop_mirror_normalize(IMGS, mean=[NAN]), "mean", "nan"),
    (lambda: ndd.crop_mirror_normalize(IMGS, std=[1.0, INF, 1.0]), "std", "inf"),
    (lambda: ndd.random.uniform(range=[0.0, INF], batch_size=2), "range", "inf"),
])
def test_a_constant_is_checked_at_the_call(call, name, value):
    with pytest.raises(ValueError, match=rf"argument '{name}' must be finite, got {value}$"):
        call()


def test_a_per_sample_value_is_checked_when_the_call_runs():
    angles = ndd.batch([np.float32(10), np.float32(NAN)])
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"`rotate`: argument 'angle' must be "
                                                                 r"finite, got nan \(sample 1\)"):
        ndd.rotate(IMGS, angle=angles)
    sizes = ndd.batch([np.float32([6, 6]), np.float32([INF, 6])])
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"'size' must be finite, got \[inf, 6.0\] "
                                                                 r"\(sample 1\)"):
        ndd.resize(IMGS, size=sizes)


def test_fill_values_may_be_nan():
    f = ndd.batch([np.zeros((2, 2), np.float32)] * 2, layout="HW")
    out = np.stack([np.array(t) for t in ndd.pad(f, shape=[3, 3], fill_value=NAN).tensors])
    assert np.isnan(out[:, 2, :]).all() and (out[:, :2, :2] == 0).all()
    sl = np.stack([np.array(t) for t in
                   ndd.slice(f, start=[0, 0], shape=[3, 2], out_of_bounds_policy="pad", fill_values=[NAN]).tensors])
    assert np.isnan(sl[:, :, 2]).all() and (sl[:, :, :2] == 0).all()  # (slice axes are W, H)
