"""GPU image decoders: ``decoders.image`` through nvJPEG, with a hybrid CPU path.

``decoders.image(jpegs, device="gpu")`` sorts the samples of a batch:

* 8-bit Huffman JPEGs (baseline, extended, progressive) with 1 or 3 components and at
  least ``HYBRID_MIN_PIXELS`` pixels go to nvJPEG's batched decoder, through
  ``torchvision.io.decode_jpeg(list, device="cuda")``, in one call per batch;
* everything else decodes on the CPU with the CPU decoder (the ``decoders.image`` CPU
  kernel, found through the plugin registry) and is uploaded through pinned memory:
  small images (for them nvJPEG's per-image cost exceeds a libjpeg-turbo decode), other
  formats (PNG, BMP, TIFF, WebP), CMYK/YCCK, 12-bit and arithmetic-coded JPEGs, JPEGs
  with EXIF data when ``adjust_orientation`` is set, and the YCbCr/ANY_DATA outputs.

The CPU path gives exactly the CPU decoder's pixels. nvJPEG's IDCT and chroma
upsampling differ from libjpeg-turbo's by a few levels (see the README for the measured
difference). Under the test emulation (``NDD_CUDA_EMULATE=cpu``), or without
torchvision, every sample takes the CPU path. ``decoders.image_crop``,
``decoders.image_slice`` and ``decoders.image_random_crop`` on the GPU decode and crop on the
CPU, then upload. ``decoders.video`` on the GPU (DALI's "mixed" backend) decodes on the CPU
with FFmpeg and uploads the frames: this plugin has no NVDEC path.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ndd import Device
from ndd.plugins import BatchData, KernelArgs, KernelContext, schemas, upload_device, upload_host
from ndd.types import DALIImageType

from ._backend import BACKEND

HYBRID_MIN_PIXELS = 64 * 64  # smaller images decode on the CPU (the "hybrid" path)

_RGB, _BGR, _GRAY = DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY
_NVJPEG_SOF = (0xC0, 0xC1, 0xC2)  # baseline, extended sequential, progressive (Huffman)


_HEAD_BYTES = 65536  # the markers before the frame header usually fit in this much


def jpeg_info(data: np.ndarray, reject_exif: bool) -> tuple[int, int, int] | None:
    """``(height, width, components)`` of a JPEG that nvJPEG decodes like the CPU, else None.

    Walks the markers up to the frame header: None for non-JPEG data, precisions other
    than 8 bits, component counts other than 1 or 3, arithmetic coding or lossless
    frames, Adobe (APP14) colour transforms, and EXIF data when ``reject_exif``.
    """
    if data.ndim != 1 or data.itemsize != 1:
        data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
    # Runs for every sample: indexing ``bytes`` (ints) costs a fraction of indexing a
    # memoryview, and only the first part is copied (all of it if the markers run beyond).
    full = data.size
    b = data.tobytes() if full <= _HEAD_BYTES else data[:_HEAD_BYTES].tobytes()
    n = len(b)
    if n < 4 or b[0] != 0xFF or b[1] != 0xD8:
        return None
    pos = 2
    while True:
        if pos + 10 > n and n < full:  # a segment header crosses the end of the part copied
            b = data.tobytes()
            n = full
        if pos + 4 > n:
            return None
        if b[pos] != 0xFF:
            return None
        m = b[pos + 1]
        if 0xC0 <= m <= 0xCF and m != 0xC4 and m != 0xC8 and m != 0xCC:  # a frame header
            if m not in _NVJPEG_SOF or pos + 10 > n:
                return None
            prec, h, w, c = b[pos + 4], (b[pos + 5] << 8) | b[pos + 6], (b[pos + 7] << 8) | b[pos + 8], b[pos + 9]
            return (h, w, c) if prec == 8 and c in (1, 3) and h > 0 and w > 0 else None
        if m >= 0xD0 and m != 0xDB:  # 0xDB (quantisation tables, always there) has a length
            if m == 0xFF:  # fill byte
                pos += 1
                continue
            if m <= 0xD8:  # markers without a length
                pos += 2
                continue
            if m == 0xD9 or m == 0xDA:  # end of image or start of scan before any frame header
                return None
            if m == 0xE1 and reject_exif and b[pos + 4:pos + 10] == b"Exif\0\0":
                return None
            if m == 0xEE and b[pos + 4:pos + 9] == b"Adobe":
                return None
        elif m == 0x01:  # TEM, without a length
            pos += 2
            continue
        pos += 2 + ((b[pos + 2] << 8) | b[pos + 3])


@functools.cache
def _tvio() -> Any:
    """``torchvision.io`` when torchvision is installed, else None."""
    try:
        import torchvision.io
    except ImportError:
        return None
    return torchvision.io


def _cpu_kernel(op: str) -> Any:
    kernel = schemas()[op].kernels.get("cpu")
    if kernel is None:
        raise RuntimeError(
            f"Operator `{op}` on the GPU decodes some samples on the CPU (videos, small images, formats "
            "nvJPEG does not decode, the emulation), which needs the CPU decoder: pip install ndd-ops-cpu"
        )
    return kernel


def _cpu_context(ctx: KernelContext, n: int) -> KernelContext:
    return KernelContext(ctx.op, n, ctx.is_batch, Device("cpu"), ctx.eval_context, ctx.random_state,
                         ctx.input_layouts, ctx.output_meta)


def _host_samples(bd: BatchData) -> list[np.ndarray]:
    """The encoded samples as NumPy arrays (encoded data given on the GPU come back first)."""
    return [s if isinstance(s, np.ndarray) else BACKEND.to_host(s) for s in bd.samples]


def _upload(ctx: KernelContext, value: Any) -> Any:
    """Copy a CPU kernel's result (one dense array or a list) to the kernel's GPU."""
    dev = ctx.device.device_id
    bd = BatchData.of(value)
    if bd.dense is not None:
        return BACKEND.to_device(bd.dense, dev, ctx.eval_context)
    return [BACKEND.to_device(s, dev, ctx.eval_context) for s in bd.samples]


def _decode_one_on_cpu(ctx: KernelContext, kernel: Any, bd: BatchData, i: int, args: KernelArgs) -> Any:
    """Sample ``i`` of ``bd`` decoded by the CPU kernel (errors name it as in the batch)."""
    try:
        out = kernel(_cpu_context(ctx, 1), [BatchData(samples=[bd.samples[i]])], args)
    except ValueError as e:  # the CPU kernel numbers the sample 0: give its place in the batch
        reason = str(e).split("sample 0: ", 1)[-1]
        raise ValueError(f"Operator `{ctx.op}`: cannot decode {bd.describe(i)}: {reason}") from None
    return BatchData.of(out).sample(0)


def _to_hwc(imgs: list[Any], out: DALIImageType, dtype: np.dtype) -> Any:
    """nvJPEG's CHW uint8 samples (of one shape) as one contiguous HWC batch of ``dtype``.

    One stack of the CHW samples and one copy of its HWC view: two kernels but three calls,
    where stacking the samples' HWC views (one kernel) took a call per sample, which cost the
    host more (64 samples: about 100 against 25 µs here) than the second kernel costs the GPU.
    """
    import torch

    hwc = torch.stack(imgs).permute(0, 2, 3, 1)
    if out == _BGR:
        hwc = hwc.flip(-1)
    hwc = hwc.contiguous()
    if dtype == np.uint16:
        return (hwc.to(torch.int32) * 257).to(torch.uint16)
    if dtype == np.float32:
        return hwc.to(torch.float32) * (1 / 255)
    if dtype != np.uint8:  # int8/16/32, uint32: as the CPU kernel (float32, rounded, saturated)
        top = float(np.iinfo(dtype).max)
        y = (hwc.to(torch.float32) * float(np.float32(1 / 255)) * top).double()  # + 0.5 exact in double
        return torch.floor(y + 0.5).clamp_(max=top).to(torch.int64).to(BACKEND.torch_dtype(dtype))
    return hwc


def _image_host_stage(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> list[BatchData]:
    """Host stage of ``decoders.image`` on the GPU (no device needed; a capture worker process
    runs it): the samples nvJPEG will not take are decoded on the CPU, the others pass on as
    their bytes. Returns ``[samples, indices of the nvJPEG samples]``."""
    samples = _host_samples(inputs[0])
    out = args["output_type"]
    tvio = None if BACKEND.emulated or out not in (_RGB, _BGR, _GRAY) else _tvio()
    gpu_idx = []
    if tvio is not None:
        orient = args["adjust_orientation"]
        for i, s in enumerate(samples):
            info = jpeg_info(s, orient) if s.dtype == np.uint8 and s.ndim == 1 else None
            if info is not None and info[0] * info[1] >= HYBRID_MIN_PIXELS:
                gpu_idx.append(i)
    kernel = _cpu_kernel(ctx.op)
    host = BatchData(samples=samples)
    host.origin = inputs[0].origin  # errors name the reader's file or record
    if not gpu_idx:  # the whole batch in one call of the CPU kernel (its thread pool)
        staged = BatchData.of(kernel(_cpu_context(ctx, len(samples)), [host], args))
    else:
        on_gpu = set(gpu_idx)
        staged = BatchData(samples=[s if i in on_gpu else _decode_one_on_cpu(ctx, kernel, host, i, args)
                                    for i, s in enumerate(samples)])
    staged.origin = host.origin
    return [staged, BatchData(dense=np.array(gpu_idx, np.int64))]


def _image_device_stage(ctx: KernelContext, staged: list[BatchData], args: KernelArgs) -> Any:
    """Device stage of ``decoders.image`` on the GPU: nvJPEG's batched decode of the samples the
    host stage passed on as bytes, and the upload of those it decoded."""
    BACKEND.require()
    data, gpu_idx = staged[0], staged[1].dense.tolist()
    if not gpu_idx:
        return _upload(ctx, data.dense if data.dense is not None else data.samples)

    import torch

    samples = data.samples
    dev = ctx.device.device_id
    dtype = args["dtype"].numpy_dtype
    out = args["output_type"]
    tvio = _tvio()
    encoded = [torch.from_numpy(samples[i] if samples[i].flags.writeable else samples[i].copy())
               for i in gpu_idx]
    mode = tvio.ImageReadMode.GRAY if out == _GRAY else tvio.ImageReadMode.RGB
    with BACKEND.stream_for(ctx.eval_context, dev):
        try:
            decoded = tvio.decode_jpeg(encoded, mode=mode, device=f"cuda:{dev}")
        except RuntimeError:  # nvJPEG refused a sample: the CPU decoder decodes or explains
            kernel = _cpu_kernel(ctx.op)
            decoded = None
        if decoded is not None and len(gpu_idx) == len(samples) \
                and all(d.shape == decoded[0].shape for d in decoded):
            return _to_hwc(decoded, out, dtype)
        results: list[Any] = [None] * len(samples)
        for n, i in enumerate(gpu_idx):
            results[i] = (_to_hwc([decoded[n]], out, dtype)[0] if decoded is not None
                          else _decode_one_on_cpu(ctx, kernel, data, i, args))
        for i, s in enumerate(samples):
            if results[i] is None or isinstance(results[i], np.ndarray):
                results[i] = BACKEND.to_device(s if results[i] is None else results[i], dev, ctx.eval_context)
        if all(r.shape == results[0].shape for r in results):
            return torch.stack(results)
        return results


def image_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``decoders.image`` on the GPU (see the module docstring for which path each sample takes)."""
    BACKEND.require()
    return _image_device_stage(ctx, _image_host_stage(ctx, inputs, args), args)


def _host_then_upload(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> list[BatchData]:
    """Host stage of the cropping decoders on the GPU: the CPU kernel's result (the window
    inputs of ``image_slice``, a few numbers per sample, are read back if on the GPU)."""
    host = [None if bd is None else BatchData(samples=_host_samples(bd)) for bd in inputs]
    n = len(host[0].samples)
    return [BatchData.of(_cpu_kernel(ctx.op)(_cpu_context(ctx, n), host, args))]


def _upload_stage(ctx: KernelContext, staged: list[BatchData], args: KernelArgs) -> Any:
    """Device stage of the cropping decoders: the upload."""
    BACKEND.require()
    bd = staged[0]
    return _upload(ctx, bd.dense if bd.dense is not None else bd.samples)


def image_crop_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``decoders.image_crop`` on the GPU: decoded and cropped on the CPU, then uploaded."""
    BACKEND.require()
    return _upload_stage(ctx, _host_then_upload(ctx, inputs, args), args)


def image_slice_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``decoders.image_slice`` on the GPU: decoded and sliced on the CPU, then uploaded."""
    BACKEND.require()
    return _upload_stage(ctx, _host_then_upload(ctx, inputs, args), args)


def image_random_crop_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``decoders.image_random_crop`` on the GPU: the CPU kernel's windows and pixels, uploaded."""
    BACKEND.require()
    return _upload_stage(ctx, _host_then_upload(ctx, inputs, args), args)


def video_gpu(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
    """``decoders.video`` on the GPU: decoded on the CPU (FFmpeg; no NVDEC here), then uploaded."""
    BACKEND.require()
    return _upload_stage(ctx, _host_then_upload(ctx, inputs, args), args)


# Staged kernels (core's Plan.run): capture worker processes run the host stage.
image_gpu.host_stage, image_gpu.device_stage = _image_host_stage, _image_device_stage
for _k in (image_crop_gpu, image_slice_gpu, image_random_crop_gpu, video_gpu):
    _k.host_stage, _k.device_stage = _host_then_upload, _upload_stage


def _upload_graph_host(ctx: KernelContext, staged: list[BatchData], args: KernelArgs) -> tuple[list, Any]:
    """Graph host stage of the decoders' device stage (core's ``Plan.graph_host``): the decoded
    batch to upload; a step with samples for nvJPEG cannot be replayed from a graph."""
    if len(staged) > 1 and len(staged[1].dense):
        raise RuntimeError(f"Operator `{ctx.op}`: nvJPEG decodes cannot be part of a device graph")
    return upload_host(ctx, staged[:1], args)


def _upload_graph_device(ctx: KernelContext, staged: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
    return upload_device(ctx, staged[:1], uploaded, args)


for _k in (image_gpu, image_crop_gpu, image_slice_gpu, image_random_crop_gpu, video_gpu):
    _k.graph_stages = (_upload_graph_host, _upload_graph_device)


KERNELS = {
    "decoders.image": image_gpu,
    "decoders.image_crop": image_crop_gpu,
    "decoders.image_slice": image_slice_gpu,
    "decoders.image_random_crop": image_random_crop_gpu,
    "decoders.video": video_gpu,
}
