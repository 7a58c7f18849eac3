"""decoders.image(device="gpu"): the routing, the CPU path's exact pixels, nvJPEG's tolerance."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

import ndd
import ndd.types as types
from ndd_ops_cuda._decode import HYBRID_MIN_PIXELS, _to_hwc, jpeg_info

RNG = np.random.default_rng(0)


def smooth_image(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A natural-looking RGB image: gradients and a few soft blobs (JPEG-friendly)."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([x / w * 200, y / h * 200, (x + y) / (h + w) * 255], -1)
    for _ in range(4):
        cy, cx, rad = r.uniform(0, h), r.uniform(0, w), r.uniform(4, max(h, w) / 3)
        img += r.uniform(-80, 80, 3) * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / rad**2)[..., None]
    return np.clip(img, 0, 255).astype(np.uint8)


def encode(img: np.ndarray, ext: str = ".jpg", *params: int) -> np.ndarray:
    ok, buf = cv2.imencode(ext, img[..., ::-1] if img.ndim == 3 else img, list(params))
    assert ok
    return buf.ravel()


def progressive(img: np.ndarray) -> np.ndarray:
    out = io.BytesIO()
    Image.fromarray(img).save(out, "JPEG", progressive=True, quality=90)
    return np.frombuffer(out.getvalue(), np.uint8)


def with_exif(img: np.ndarray, orientation: int) -> np.ndarray:
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    Image.fromarray(img).save(out, "JPEG", exif=exif.tobytes(), quality=90)
    return np.frombuffer(out.getvalue(), np.uint8)


def host(b: ndd.Batch) -> list[np.ndarray]:
    return [np.asarray(t) for t in b.cpu()]


# -- routing ---------------------------------------------------------------------------

def test_jpeg_info_reads_the_frame_header():
    img = smooth_image(40, 56)
    assert jpeg_info(encode(img), True) == (40, 56, 3)
    assert jpeg_info(encode(img[..., 0]), True) == (40, 56, 1)
    assert jpeg_info(progressive(img), True) == (40, 56, 3)


@pytest.mark.parametrize("data", [
    encode(smooth_image(20, 20), ".png"),
    encode(smooth_image(20, 20))[:30],  # truncated before the frame header
    np.zeros(16, np.uint8),
])
def test_jpeg_info_rejects_what_nvjpeg_should_not_decode(data):
    assert jpeg_info(data, True) is None


def test_jpeg_info_and_exif():
    data = with_exif(smooth_image(30, 30), 6)
    assert jpeg_info(data, True) is None
    assert jpeg_info(data, False) == (30, 30, 3)


# -- the CPU path (all of it on the emulation, small and odd images on CUDA) --------------

@pytest.mark.parametrize("out", [types.RGB, types.BGR, types.GRAY, types.YCbCr])
@pytest.mark.parametrize("dtype", [ndd.uint8, ndd.float32, ndd.uint16, ndd.int16, ndd.uint32])
def test_small_images_match_the_cpu_decoder_exactly(out, dtype):
    jpegs = ndd.as_batch([encode(smooth_image(28, 28, s)) for s in range(4)])
    gpu = ndd.decoders.image(jpegs, device="gpu", output_type=out, dtype=dtype)
    cpu = ndd.decoders.image(jpegs, output_type=out, dtype=dtype)
    assert gpu.device == ndd.Device("gpu:0") and gpu.layout == "HWC" and gpu.dtype == dtype
    assert isinstance(gpu.torch(), torch.Tensor)
    for g, c in zip(host(gpu), host(cpu)):
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("dtype", [ndd.uint8, ndd.uint16, ndd.float32, ndd.int8, ndd.int16, ndd.int32, ndd.uint32])
def test_nvjpeg_output_conversion_matches_the_cpu_decoder(dtype):
    """nvJPEG's CHW uint8 planes go to HWC ``dtype`` with the CPU decoder's scaling, bit for
    bit (the conversion is plain torch, checked here on CPU tensors)."""
    img = np.random.default_rng(5).integers(0, 256, (7, 9, 3), dtype=np.uint8)
    got = _to_hwc([torch.from_numpy(img).permute(2, 0, 1)], types.RGB, dtype.numpy_dtype)[0].numpy()
    want = host(ndd.decoders.image(ndd.as_batch([encode(img, ".png")]), dtype=dtype))[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_mixed_formats_and_sizes_match_the_cpu_decoder_exactly():
    samples = [encode(smooth_image(20, 30)), encode(smooth_image(24, 24), ".png"),
               with_exif(smooth_image(20, 30, 1), 6), encode(smooth_image(16, 16, 2)[..., 0])]
    jpegs = ndd.as_batch(samples)
    gpu = ndd.decoders.image(jpegs, device="gpu")
    cpu = ndd.decoders.image(jpegs)
    assert gpu.shape == cpu.shape == [(20, 30, 3), (24, 24, 3), (30, 20, 3), (16, 16, 3)]
    for g, c in zip(host(gpu), host(cpu)):
        np.testing.assert_array_equal(g, c)


def test_crop_decoders_on_the_gpu_match_the_cpu():
    jpegs = ndd.as_batch([encode(smooth_image(40, 50, s)) for s in range(3)])
    a = ndd.decoders.image_crop(jpegs, device="gpu", crop=(16, 20), crop_pos_x=0.25)
    b = ndd.decoders.image_crop(jpegs, crop=(16, 20), crop_pos_x=0.25)
    assert a.device.device_type == "gpu"
    for g, c in zip(host(a), host(b)):
        np.testing.assert_array_equal(g, c)
    ra = ndd.decoders.image_random_crop(jpegs, device="gpu", rng=ndd.random.RNG(3))
    rb = ndd.decoders.image_random_crop(jpegs, rng=ndd.random.RNG(3))
    for g, c in zip(host(ra), host(rb)):
        np.testing.assert_array_equal(g, c)
    anchors = ndd.as_batch([np.array([0.1 * s, 0.2], np.float32) for s in range(3)])
    shapes = ndd.as_batch([np.array([0.5, 0.5 + 0.1 * s], np.float32) for s in range(3)])
    sa = ndd.decoders.image_slice(jpegs, anchors, shapes, device="gpu")
    sb = ndd.decoders.image_slice(jpegs, anchors, shapes)
    assert sa.device.device_type == "gpu" and [g.shape for g in host(sa)] == [(20, 25, 3), (24, 25, 3), (28, 25, 3)]
    for g, c in zip(host(sa), host(sb)):
        np.testing.assert_array_equal(g, c)
    gpu_anchors = ndd.decoders.image_slice(jpegs, anchors.gpu(), shapes.gpu(), device="gpu")  # read back
    for g, c in zip(host(gpu_anchors), host(sb)):
        np.testing.assert_array_equal(g, c)
    by_args = ndd.decoders.image_slice(jpegs, None, None, start=[2, 3], shape=[10, 8], device="gpu")
    for g, c in zip(host(by_args), host(ndd.decoders.image_slice(jpegs, start=[2, 3], shape=[10, 8]))):
        np.testing.assert_array_equal(g, c)


def test_a_corrupt_sample_is_named():
    bad = encode(smooth_image(20, 20))[:200].copy()
    jpegs = ndd.as_batch([encode(smooth_image(20, 20)), bad])
    with pytest.raises(ValueError, match="sample 1"):
        ndd.decoders.image(jpegs, device="gpu").evaluate()


def test_a_corrupt_sample_is_named_by_its_file(tmp_path):
    """Read by a reader, the bad sample's error names its file (the host stage keeps the
    batch's origin), also for a batch of which nvJPEG would take the others."""
    for i, img in enumerate([encode(smooth_image(80, 80)), encode(smooth_image(20, 20))[:200]]):
        (tmp_path / f"{i}.jpg").write_bytes(img.tobytes())
    reader = ndd.readers.File(files=[str(tmp_path / "0.jpg"), str(tmp_path / "1.jpg")])
    jpegs, _ = next(iter(reader.next_epoch(batch_size=2)))
    with ndd.EvalMode.sync_cpu, pytest.raises(ValueError, match=r"cannot decode sample 1 \(read from .*1\.jpg"):
        ndd.decoders.image(jpegs, device="gpu")


def test_device_inference_keeps_downstream_on_the_gpu():
    jpegs = ndd.as_batch([encode(smooth_image(28, 28, s)) for s in range(2)])
    images = ndd.decoders.image(jpegs, device="gpu")
    assert images.gpu() is images and images.cpu().device == ndd.Device("cpu")


# -- nvJPEG (real CUDA) ------------------------------------------------------------------

def _max_mean_diff(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[int, float]:
    d = [np.abs(x.astype(np.int16) - y.astype(np.int16)) for x, y in zip(a, b)]
    return max(int(x.max()) for x in d), float(np.mean([x.mean() for x in d]))


@pytest.mark.requires_cuda
@pytest.mark.parametrize("out", [types.RGB, types.BGR, types.GRAY])
def test_nvjpeg_is_close_to_the_cpu_decoder(out):
    pytest.importorskip("torchvision")
    side = int(np.sqrt(HYBRID_MIN_PIXELS)) * 4
    imgs = [smooth_image(side, side + 8 * s, s) for s in range(6)]
    # 4:4:4: no chroma upsampling, so only the IDCTs differ; 4:2:0: the upsampling too.
    for params in ([cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444], []):
        jpegs = ndd.as_batch([encode(im, ".jpg", *params) for im in imgs])
        gpu = ndd.decoders.image(jpegs, device="gpu", output_type=out)
        assert gpu.torch(pad=True).is_cuda
        cpu = ndd.decoders.image(jpegs, output_type=out)
        assert gpu.shape == cpu.shape
        worst, mean = _max_mean_diff(host(gpu), host(cpu))
        assert mean <= 1.5 and worst <= (8 if params else 48), (params, worst, mean)


@pytest.mark.requires_cuda
def test_hybrid_batch_on_cuda():
    pytest.importorskip("torchvision")
    samples = [encode(smooth_image(256, 256)), encode(smooth_image(28, 28, 1)),
               encode(smooth_image(20, 20), ".png"), progressive(smooth_image(128, 96, 2))]
    jpegs = ndd.as_batch(samples)
    gpu = ndd.decoders.image(jpegs, device="gpu", dtype=ndd.float32)
    cpu = ndd.decoders.image(jpegs, dtype=ndd.float32)
    assert gpu.shape == cpu.shape and gpu.tensors[0].torch().is_cuda
    g, c = host(gpu), host(cpu)
    np.testing.assert_array_equal(g[1], c[1])  # small: decoded on the CPU
    np.testing.assert_array_equal(g[2], c[2])  # PNG: on the CPU
    assert np.abs(g[0] - c[0]).mean() < 1.5 / 255 and np.abs(g[3] - c[3]).mean() < 1.5 / 255


@pytest.mark.requires_cuda
def test_uniform_batch_is_one_dense_cuda_tensor():
    pytest.importorskip("torchvision")
    jpegs = ndd.as_batch([encode(smooth_image(256, 256, s)) for s in range(8)])
    out = ndd.decoders.image(jpegs, device="gpu")
    t = out.torch()
    assert t.is_cuda and tuple(t.shape) == (8, 256, 256, 3) and t.is_contiguous()


@pytest.mark.parametrize("out", [types.RGB, types.BGR, types.GRAY])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_nvjpeg_output_to_hwc(out, dtype):
    """nvJPEG's CHW samples become one contiguous HWC batch in DALI's output scaling."""
    from ndd_ops_cuda._decode import _to_hwc

    c = 1 if out == types.GRAY else 3
    chw = [torch.from_numpy(RNG.integers(0, 256, (c, 5, 7), np.uint8)) for _ in range(4)]
    got = _to_hwc(chw, out, np.dtype(dtype))
    ref = np.stack([x.numpy().transpose(1, 2, 0) for x in chw])
    if out == types.BGR:
        ref = ref[..., ::-1]
    ref = {np.uint8: ref, np.uint16: ref.astype(np.uint16) * 257,
           np.float32: ref.astype(np.float32) * np.float32(1 / 255)}[dtype]
    assert got.is_contiguous() and got.dtype == torch.from_numpy(ref.copy()).dtype
    np.testing.assert_array_equal(got.numpy(), ref)
