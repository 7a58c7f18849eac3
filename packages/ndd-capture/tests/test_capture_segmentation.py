"""Capture mode over the random segmentation operators (segmentation.random_object_bbox,
random_mask_pixel, roi_random_crop): the same values and final RNG state as eager mode."""

from __future__ import annotations

import numpy as np

import ndd


def rows(x) -> list:
    return [np.asarray(t) for t in x] if isinstance(x, ndd.Batch) else [np.asarray(x)]


def test_captured_loop_gives_eager_values(tmp_path):
    """A loop over label maps drawing boxes, pixels and crop starts with rng=: capture mode
    gives eager mode's values and leaves the RNG in the same state."""
    r = np.random.default_rng(4)
    for i in range(8):
        np.save(tmp_path / f"{i}.npy", ((r.random((12, 10)) < 0.3) * r.integers(1, 4, (12, 10))).astype(np.uint8))

    def run(capture: bool) -> tuple[list, str]:
        reader = ndd.readers.Numpy(file_root=str(tmp_path), file_filter="*.npy")
        rng = ndd.random.RNG(5)
        out = []
        for (masks,) in reader.next_epoch(batch_size=4, capture=capture):
            a, s, c = ndd.segmentation.random_object_bbox(masks, output_class=True, k_largest=3, rng=rng)
            p = ndd.segmentation.random_mask_pixel(masks, foreground=1, rng=rng)
            start = ndd.roi_random_crop(masks, crop_shape=[6, 6], roi_start=[2, 2], roi_end=[9, 5], rng=rng)
            out.append([np.array(rows(x)) for x in (a, s, c, p, start)])
        return out, str(rng.get_state())

    eager, captured = run(False), run(True)
    assert eager[1] == captured[1] and len(eager[0]) == len(captured[0]) == 2
    for e, c in zip(eager[0], captured[0]):
        for x, y in zip(e, c):
            np.testing.assert_array_equal(x, y)
    assert {s.op for s in ndd.capture.report().sites if s.captured} >= {
        "segmentation.random_object_bbox", "segmentation.random_mask_pixel", "roi_random_crop"}
