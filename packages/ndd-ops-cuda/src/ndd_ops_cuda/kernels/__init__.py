"""GPU kernels written with torch (issue 8): the image operators of ndd-ops-cpu and
core's own operators, for batches whose samples are torch tensors on any device
(CUDA on a GPU machine; CPU tensors under ``NDD_CUDA_EMULATE=cpu``).

Importing this package does not import torch: each kernel is a small wrapper that
imports its module on first use, then runs the kernel on the stream of the call's
EvalContext.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ndd.plugins import BatchData, KernelArgs, KernelContext, Registry

# operator -> (module of this package, kernel function)
_WHERE = {
    "resize": ("_geometry", "resize_gpu"),
    "random_resized_crop": ("_geometry", "random_resized_crop_gpu"),
    "rotate": ("_geometry", "rotate_gpu"),
    "warp_affine": ("_geometry", "warp_affine_gpu"),
    "flip": ("_geometry", "flip_gpu"),
    "crop": ("_geometry", "crop_gpu"),
    "crop_mirror_normalize": ("_normalize", "cmn_gpu"),
    "normalize": ("_normalize", "normalize_gpu"),
    "color_twist": ("_color", "color_gpu"),
    "brightness_contrast": ("_color", "brightness_contrast_gpu"),
    "hsv": ("_color", "color_gpu"),
    "gaussian_blur": ("_blur", "gaussian_blur_gpu"),
    "color_space_conversion": ("_pixel", "color_space_conversion_gpu"),
    "lookup_table": ("_pixel", "lookup_table_gpu"),
    "erase": ("_pixel", "erase_gpu"),
    "cast": ("_core", "cast_gpu"),
    "cast_like": ("_core", "cast_gpu"),
    "_arithm": ("_core", "arithm_gpu"),
    "_subscript": ("_core", "subscript_gpu"),
    "transpose": ("_core", "transpose_gpu"),
    "pad": ("_shape", "pad_gpu"),
    "one_hot": ("_shape", "one_hot_gpu"),
    "slice": ("_shape", "slice_gpu"),
    "bb_flip": ("_bbox", "bb_flip_gpu"),
    "box_encoder": ("_bbox", "box_encoder_gpu"),
    "coord_transform": ("_bbox", "coord_transform_gpu"),
    "noise.gaussian": ("_noise", "gaussian_gpu"),
    "noise.salt_and_pepper": ("_noise", "salt_and_pepper_gpu"),
    "noise.shot": ("_noise", "shot_gpu"),
    "jitter": ("_gpu_only", "jitter_gpu"),
    "experimental.median_blur": ("_gpu_only", "median_blur_gpu"),
    "experimental.dilate": ("_gpu_only", "dilate_gpu"),
    "experimental.erode": ("_gpu_only", "erode_gpu"),
    "experimental.remap": ("_gpu_only", "remap_gpu"),
    "experimental.resize": ("_geometry", "resize_gpu"),
    "copy": ("_util", "copy_gpu"),
    "per_frame": ("_util", "per_frame_gpu"),
    "element_extract": ("_util", "element_extract_gpu"),
    "sequence_rearrange": ("_util", "sequence_rearrange_gpu"),
    "reinterpret": ("_util", "reinterpret_gpu"),
    "permute_batch": ("_util", "permute_batch_gpu"),
    "coord_flip": ("_util", "coord_flip_gpu"),
    "grid_mask": ("_util", "grid_mask_gpu"),
    "dump_image": ("_dump_inflate", "dump_image_gpu"),
    "decoders.inflate": ("_dump_inflate", "inflate_gpu"),
    **{f"reductions.{op}": ("_reductions", "REDUCTIONS") for op in (
        "sum", "mean", "mean_square", "rms", "min", "max", "std_dev", "variance")},
    **{op: ("_core", "HOST_KERNELS") for op in (
        "reshape", "squeeze", "expand_dims", "cat", "stack", "full", "full_like", "ones", "ones_like",
        "zeros", "zeros_like", "random.uniform", "random.normal",
        "random.coin_flip", "random.beta", "random.choice")},
}


# Operators whose kernels can be part of a device graph (core's Plan.graph_host): with
# constant arguments their launches depend only on their input shapes, and they read no
# device value back ...
# (resize, lookup_table: their filter taps and tables, which
# depend on the shapes and arguments, are cached constants)
_GRAPH_PURE = {"cast", "cast_like", "squeeze", "expand_dims", "transpose", "cat", "stack", "resize", "experimental.resize",
               "lookup_table", "color_space_conversion", "one_hot", "pad",
               # (a mean given on the host is uploaded, which a capture refuses: kernel by kernel)
               *(f"reductions.{op}" for op in ("sum", "mean", "mean_square", "rms", "min", "max", "std_dev",
                                               "variance"))}
# ... and those with graph stages of their own: operator -> (module, host stage, device stage).
_GRAPH_STAGES = {op: ("_geometry", "_warp_graph_host", "_warp_graph_device") for op in ("rotate", "warp_affine")}
_GRAPH_STAGES["flip"] = ("_geometry", "_flip_graph_host", "_flip_graph_device")
_GRAPH_STAGES["crop_mirror_normalize"] = ("_normalize", "_cmn_graph_host", "_cmn_graph_device")
_GRAPH_STAGES["crop"] = ("_geometry", "_crop_graph_host", "_crop_graph_device")
_GRAPH_STAGES["reshape"] = ("_shape", "_reshape_graph_host", "_reshape_graph_device")
_GRAPH_STAGES["slice"] = ("_shape", "_slice_graph_host", "_slice_graph_device")
_GRAPH_STAGES["gaussian_blur"] = ("_blur", "_graph_host", "_graph_device")
_GRAPH_STAGES["random_resized_crop"] = ("_geometry", "_rrc_graph_host", "_rrc_graph_device")
_GRAPH_STAGES["normalize"] = ("_normalize", "_normalize_graph_host", "_normalize_graph_device")
_GRAPH_STAGES["erase"] = ("_pixel", "_erase_graph_host", "_erase_graph_device")
_GRAPH_STAGES["noise.gaussian"] = ("_noise", "_gaussian_graph_host", "_gaussian_graph_device")
_GRAPH_STAGES["noise.salt_and_pepper"] = ("_noise", "_salt_and_pepper_graph_host", "_salt_and_pepper_graph_device")
_GRAPH_STAGES["noise.shot"] = ("_noise", "_shot_graph_host", "_shot_graph_device")
_GRAPH_STAGES["brightness_contrast"] = ("_color", "_bc_graph_host", "_bc_graph_device")
_GRAPH_STAGES.update({op: ("_color", "_color_graph_host", "_color_graph_device") for op in ("hsv", "color_twist")})


def _lazy(op: str, module: str, name: str) -> Callable:
    found: list = []

    def load() -> tuple[Callable, Any]:
        if not found:
            from .._backend import BACKEND

            fn = getattr(importlib.import_module(f"{__name__}.{module}"), name)
            found.append(fn[op] if isinstance(fn, dict) else fn)
            found.append(BACKEND)
        return found[0], found[1]

    def kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
        fn, backend = load()
        with backend.stream_for(ctx.eval_context, ctx.device.device_id):
            return fn(ctx, inputs, args)

    kernel.__name__ = kernel.__qualname__ = f"{op.replace('.', '_')}_gpu"
    if op in _GRAPH_PURE:
        kernel.graph_pure = True  # type: ignore[attr-defined]
    if op in _GRAPH_STAGES:
        mod, host, device = _GRAPH_STAGES[op]
        stages: list = []  # (host, device), imported on first use like the kernel

        def graph_stage(i: int) -> Callable:
            if not stages:
                m = importlib.import_module(f"{__name__}.{mod}")
                stages.extend((getattr(m, host), getattr(m, device)))
            return stages[i]

        def graph_host(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs) -> Any:
            return graph_stage(0)(ctx, inputs, args)

        def graph_device(ctx: KernelContext, inputs: list[BatchData], uploaded: list, args: KernelArgs) -> Any:
            _, backend = load()
            with backend.stream_for(ctx.eval_context, ctx.device.device_id):
                return graph_stage(1)(ctx, inputs, uploaded, args)

        kernel.graph_stages = (graph_host, graph_device)  # type: ignore[attr-defined]
    return kernel


KERNELS: dict[str, Callable] = {op: _lazy(op, mod, name) for op, (mod, name) in _WHERE.items()}


def register(reg: Registry) -> None:
    """Attach the GPU kernels to the operators core declares."""
    for name, fn in KERNELS.items():
        reg.add_kernel(name, "gpu", fn)
