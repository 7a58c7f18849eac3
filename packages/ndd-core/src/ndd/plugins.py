"""The plugin interface of ndd (ours; DALI has no equivalent).

Plugins are distributions with entry points in the groups ``ndd.ops``,
``ndd.readers``, ``ndd.devices`` (a callable ``register(registry)``) or
``ndd.extensions`` (a module published as ``ndd.<name>``). A kernel is a function
``kernel(ctx: KernelContext, inputs: list[BatchData], args: KernelArgs)`` returning
one output (a BatchData, an array with a leading batch dimension, or a list of
per-sample arrays) or a tuple of outputs.

``report()`` says what loaded and what failed. ``set_op_call_hook`` is the single
point through which capture mode observes and answers operator calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _dispatch, _plugins
from ._arith import result_types as arithm_result_types
from ._audio_args import (
    RESAMPLE_BLOCK,
    ResampleWindow,
    dct_matrix,
    hann_window,
    mel_filters,
    num_windows,
    resample_window,
    resampled_length,
)
from ._bbox_args import (
    BoxEncoding,
    bb_flip_flags,
    box_centers,
    box_encoding,
    check_box_encoder_sample,
    sample_flags,
)
from ._builtins import upload_device, upload_host
from ._dispatch import KernelArgs, KernelContext, PerSample, invoke
from ._image_args import (
    RESIZE_FILTER_ARGS,
    RESIZE_SIZE_ARGS,
    ResizePlan,
    Window,
    axis_kinds,
    axis_taps,
    batch_windows,
    blur_axes,
    brightness_contrast_params,
    check_hw_layout,
    check_not_empty,
    cmn_coefficients,
    color_twist_params,
    crop_window,
    fill_vector,
    gaussian_taps,
    half_range,
    hsv_matrix,
    hsv_params,
    image_layout,
    interp_of,
    pil_edge_pads,
    pil_vertical_first,
    pixel_maps,
    random_windows,
    random_words,
    reduced_axes,
    reflect101,
    resize_filters,
    resize_plan,
    resize_plans,
    rotate_params,
    rotated_size,
    rotation_matrices,
    sample_floats,
    shaped_param,
    shared_args,
    spatial_axes,
    type_range,
    warp_affine_params,
    warp_fill,
    warp_size,
    windows_per_sample,
)
from ._pixel_args import (
    GRAY_WEIGHTS,
    ColorConversion,
    color_conversion,
    erase_axes,
    erase_fill,
    erase_regions,
    lookup_indices,
    lookup_table_array,
    x86_cast,
)
from ._plugins import PluginRecord, Registry
from ._saturate import cast_plan, saturate_cast
from ._schema import Arg, OpSchema, OutMeta
from ._schemas_augment import bayer_pattern, debayer_algorithm, grid_mask_keep, grid_mask_tile
from ._schemas_paste import MULTI_PASTE_REGION_ARGS, bbox_rotate_sizes, coord_flip_axes, paste_geometry
from ._shape_ops import slice_box
from ._storage import BatchData, LazyBatchData, keep_origin
from ._transforms import check_points, coord_transform_params, transform_points
from ._video import VIDEO_IMAGE_TYPES, VideoFile
from ._wav import convert_decoded, decode_wav, from_unit, resample_signal, to_unit

__all__ = ["Arg", "BatchData", "LazyBatchData", "keep_origin", "KernelArgs", "KernelContext", "OpSchema", "OutMeta", "PerSample",
           "PluginRecord", "Registry", "PluginReport", "report", "invoke", "set_op_call_hook",
           "get_op_call_hook", "schemas", "arithm_result_types", "cast_plan", "saturate_cast", "upload_host", "upload_device",
           # argument handling shared by the image kernels of every device (_image_args)
           "Window", "axis_kinds", "axis_taps", "batch_windows", "blur_axes", "brightness_contrast_params", "check_hw_layout", "check_not_empty",
           "cmn_coefficients", "color_twist_params", "crop_window", "fill_vector", "gaussian_taps", "half_range",
           "hsv_matrix",
           "hsv_params", "image_layout", "interp_of", "pil_edge_pads", "pil_vertical_first", "pixel_maps", "random_windows", "random_words", "reduced_axes",
           "reflect101", "resize_filters", "resize_plan", "resize_plans", "ResizePlan", "RESIZE_FILTER_ARGS", "RESIZE_SIZE_ARGS", "rotate_params",
           "rotated_size", "rotation_matrices", "sample_floats", "shaped_param", "shared_args", "slice_box",
           "spatial_axes",
           "type_range", "warp_affine_params", "warp_fill", "warp_size", "windows_per_sample",
           # ... and by the per-pixel kernels (_pixel_args)
           "ColorConversion", "GRAY_WEIGHTS", "color_conversion", "erase_axes", "erase_fill", "erase_regions",
           "lookup_indices", "lookup_table_array", "x86_cast",
           # ... by the box kernels (_bbox_args) and coord_transform's (_transforms)
           "BoxEncoding", "bb_flip_flags", "box_centers", "box_encoding", "check_box_encoder_sample",
           "sample_flags", "check_points", "coord_transform_params", "transform_points",
           # ... by the augmentation kernels (_schemas_augment)
           "bayer_pattern", "debayer_algorithm", "grid_mask_keep", "grid_mask_tile",
           # ... by the paste family (_schemas_paste)
           "MULTI_PASTE_REGION_ARGS", "bbox_rotate_sizes", "coord_flip_axes", "paste_geometry",
           # ... and by the audio kernels (_audio_args)
           "RESAMPLE_BLOCK", "ResampleWindow", "dct_matrix", "hann_window", "mel_filters", "num_windows",
           "resample_window", "resampled_length",
           # ... and by the audio kernels and the NemoAsr reader (_wav)
           "convert_decoded", "decode_wav", "from_unit", "resample_signal", "to_unit",
           # ... and by the video decoder kernels and the video readers (_video)
           "VIDEO_IMAGE_TYPES", "VideoFile"]


@dataclass
class PluginReport:
    """What loaded (``loaded``) and what failed (``failed``), one record per entry point.

    A loaded record whose ``unavailable`` is set loaded fine but cannot be used on this
    machine (the GPU backend without a GPU); its report line says why.
    """

    loaded: list[PluginRecord]
    failed: list[PluginRecord]

    def __str__(self) -> str:
        rows = [("status", "group", "name", "distribution", "detail")]
        for r in self.loaded:
            status, detail = ("unavailable", r.unavailable) if r.unavailable else ("ok", r.value)
            rows.append((status, r.group, r.name, f"{r.distribution} {r.version}", detail))
        for r in self.failed:
            rows.append(("FAILED", r.group, r.name, f"{r.distribution} {r.version}", r.error or ""))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        return "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in rows
        )


def report() -> PluginReport:
    """Load plugins (once) and report what loaded and what failed, and why."""
    recs = _plugins.records()
    return PluginReport([r for r in recs if r.ok], [r for r in recs if not r.ok])


def schemas() -> dict[str, OpSchema]:
    """Every declared operator, by dotted name."""
    _plugins.ensure_loaded()
    return dict(_plugins.schemas)


def set_op_call_hook(hook: Any) -> None:
    """Install ``hook(schema, inputs, kwargs)`` in front of every operator call.

    The hook answers the call itself or passes it on with :func:`invoke`.
    ``None`` removes it. Only one hook can be installed at a time.
    """
    if hook is not None and _dispatch.op_call_hook not in (None, hook):
        raise RuntimeError("Another operator call hook is already installed.")
    _dispatch.op_call_hook = hook


def get_op_call_hook() -> Any:
    return _dispatch.op_call_hook
