"""Entry point of the CPU kernels (group ``ndd.ops``)."""

from __future__ import annotations

from ndd.plugins import Registry

from ._audio import (
    audio_decoder_cpu,
    audio_resample_cpu,
    mel_filter_bank_cpu,
    mfcc_cpu,
    nonsilent_region_cpu,
    power_spectrum_cpu,
    preemphasis_filter_cpu,
    spectrogram_cpu,
    to_decibels_cpu,
)
from ._augment import clahe_cpu, debayer_cpu, equalize_cpu, grid_mask_cpu, jpeg_compression_distortion_cpu
from ._bbox import bb_flip_cpu, box_encoder_cpu
from ._blur import gaussian_blur_cpu
from ._color import brightness_contrast_cpu, color_twist_cpu, hsv_cpu
from ._crop import crop_cpu, flip_cpu
from ._decode import image_cpu, image_crop_cpu, image_random_crop_cpu, image_slice_cpu, peek_image_shape_cpu
from ._dump_inflate import dump_image_cpu
from ._filters import (
    filter_cpu,
    laplacian_cpu,
    resize_crop_mirror_cpu,
    sphere_cpu,
    tensor_resize_cpu,
    warp_perspective_cpu,
    water_cpu,
)
from ._normalize import cmn_cpu, normalize_cpu
from ._paste import bbox_paste_cpu, bbox_rotate_cpu, coord_flip_cpu, multi_paste_cpu, paste_cpu
from ._pixel import color_space_conversion_cpu, erase_cpu, lookup_table_cpu
from ._random_bbox import random_bbox_crop_cpu
from ._resize import random_resized_crop_cpu, resize_cpu
from ._segmentation import (
    random_crop_generator_cpu,
    random_mask_pixel_cpu,
    random_object_bbox_cpu,
    roi_random_crop_cpu,
    select_masks_cpu,
)
from ._video_decode import video_decoder_cpu
from ._warp import rotate_cpu, warp_affine_cpu

KERNELS = {
    "decoders.image": image_cpu,
    "decoders.image_crop": image_crop_cpu,
    "decoders.image_random_crop": image_random_crop_cpu,
    "decoders.image_slice": image_slice_cpu,
    "peek_image_shape": peek_image_shape_cpu,
    "resize": resize_cpu,
    "random_resized_crop": random_resized_crop_cpu,
    "rotate": rotate_cpu,
    "warp_affine": warp_affine_cpu,
    "flip": flip_cpu,
    "crop": crop_cpu,
    "crop_mirror_normalize": cmn_cpu,
    "normalize": normalize_cpu,
    "color_twist": color_twist_cpu,
    "brightness_contrast": brightness_contrast_cpu,
    "hsv": hsv_cpu,
    "gaussian_blur": gaussian_blur_cpu,
    "color_space_conversion": color_space_conversion_cpu,
    "lookup_table": lookup_table_cpu,
    "erase": erase_cpu,
    "bb_flip": bb_flip_cpu,
    "box_encoder": box_encoder_cpu,
    "random_bbox_crop": random_bbox_crop_cpu,
    "equalize": equalize_cpu,
    "grid_mask": grid_mask_cpu,
    "jpeg_compression_distortion": jpeg_compression_distortion_cpu,
    "clahe": clahe_cpu,
    "debayer": debayer_cpu,
    "segmentation.select_masks": select_masks_cpu,
    "roi_random_crop": roi_random_crop_cpu,
    "random_crop_generator": random_crop_generator_cpu,
    "segmentation.random_mask_pixel": random_mask_pixel_cpu,
    "segmentation.random_object_bbox": random_object_bbox_cpu,
    "coord_flip": coord_flip_cpu,
    "paste": paste_cpu,
    "bbox_paste": bbox_paste_cpu,
    "bbox_rotate": bbox_rotate_cpu,
    "multi_paste": multi_paste_cpu,
    "preemphasis_filter": preemphasis_filter_cpu,
    "spectrogram": spectrogram_cpu,
    "mel_filter_bank": mel_filter_bank_cpu,
    "to_decibels": to_decibels_cpu,
    "mfcc": mfcc_cpu,
    "power_spectrum": power_spectrum_cpu,
    "nonsilent_region": nonsilent_region_cpu,
    "audio_resample": audio_resample_cpu,
    "decoders.audio": audio_decoder_cpu,
    "laplacian": laplacian_cpu,
    "filter": filter_cpu,
    "water": water_cpu,
    "sphere": sphere_cpu,
    "experimental.warp_perspective": warp_perspective_cpu,
    "resize_crop_mirror": resize_crop_mirror_cpu,
    "tensor_resize": tensor_resize_cpu,
    "dump_image": dump_image_cpu,
    "decoders.video": video_decoder_cpu,
}


def register(reg: Registry) -> None:
    """Attach this package's CPU kernels to the operators core declares."""
    for name, fn in KERNELS.items():
        reg.add_kernel(name, "cpu", fn)
