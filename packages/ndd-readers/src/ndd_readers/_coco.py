"""``ndd.readers.COCO``: COCO-style detection datasets (images plus a JSON file)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._base import Dataset, StreamReader, read_bytes
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED


class _Sample:
    __slots__ = ("bboxes", "image_id", "labels", "path", "polygons", "vertices")


def _load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"annotations_file {path!r} cannot be read: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"annotations_file {path!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise ValueError(f"annotations_file {path!r} has no `images` list")
    return data


class COCODataset(Dataset):
    """Images with their boxes, labels and (optionally) polygons, ordered by image id."""

    def __init__(self, file_root: str, annotations_file: str, *, images: Sequence[str] | None, ltrb: bool,
                 ratio: bool, skip_empty: bool, size_threshold: float, include_iscrowd: bool,
                 avoid_class_remapping: bool, image_ids: bool, polygon_masks: bool) -> None:
        data = _load_json(annotations_file)
        where = f"annotations_file {annotations_file!r}"
        try:
            infos = {int(im["id"]): (im["file_name"], float(im["width"]), float(im["height"]))
                     for im in data["images"]}
            cat_ids = sorted(int(c["id"]) for c in data.get("categories", []))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: malformed `images` or `categories` entry: {e!r}") from None
        remap = {c: c if avoid_class_remapping else k for k, c in enumerate(cat_ids, 1)}
        anns: dict[int, list[dict]] = {i: [] for i in infos}
        for n, a in enumerate(data.get("annotations", [])):
            try:
                img, box, cat = int(a["image_id"]), [float(v) for v in a["bbox"]], int(a["category_id"])
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{where}: malformed annotation #{n}: {e!r}") from None
            if img not in anns:
                raise ValueError(f"{where}: annotation #{n} refers to unknown image_id {img}")
            if cat not in remap:
                raise ValueError(f"{where}: annotation #{n} has unknown category_id {cat}")
            if len(box) != 4:
                raise ValueError(f"{where}: annotation #{n} has a bbox of {len(box)} values, expected 4")
            if not include_iscrowd and a.get("iscrowd", 0):
                continue
            if box[2] < size_threshold or box[3] < size_threshold:
                continue
            anns[img].append({"bbox": box, "label": remap[cat], "seg": a.get("segmentation")})
        order = sorted(infos)
        if images is not None:
            by_name = {infos[i][0]: i for i in order}
            missing = [f for f in images if f not in by_name]
            if missing:
                raise ValueError(f"{where}: `images` names {missing[0]!r}, which it does not list")
            order = [by_name[f] for f in images]
        self.samples: list[_Sample] = []
        for img in order:
            if skip_empty and not anns[img]:
                continue
            fname, w, h = infos[img]
            s = _Sample()
            s.path = os.path.join(file_root, fname)
            if not os.path.isfile(s.path):
                raise ValueError(f"{s.path}: image {img} of {where} does not exist")
            boxes = np.array([a["bbox"] for a in anns[img]], dtype=np.float32).reshape(-1, 4)
            if ltrb:
                boxes[:, 2:] += boxes[:, :2]
            scale = np.array([w, h], dtype=np.float32)
            if ratio:
                boxes /= np.tile(scale, 2)
            s.bboxes = boxes
            s.labels = np.array([a["label"] for a in anns[img]], dtype=np.int32)
            s.image_id = np.array([img], dtype=np.int32)
            if polygon_masks:
                s.polygons, s.vertices = _polygons(anns[img], scale if ratio else None)
            self.samples.append(s)
        if not self.samples:
            raise ValueError(f"{where}: no images to read")
        self._polygons, self._image_ids = polygon_masks, image_ids
        self.layouts = (None,) * (3 + 2 * polygon_masks + image_ids)

    def __len__(self) -> int:
        return len(self.samples)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        s = self.samples[i]
        out = [read_bytes(s.path, f"image {int(s.image_id[0])}"), s.bboxes.copy(), s.labels.copy()]
        if self._polygons:
            out += [s.polygons.copy(), s.vertices.copy()]
        if self._image_ids:
            out.append(s.image_id.copy())
        return tuple(out)

    def describe(self, i: int) -> str:
        s = self.samples[i]
        return f"{s.path} (image id {int(s.image_id[0])}, sample {i})"


def _polygons(anns: list[dict], scale: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``polygons`` int32 [P, 3] (annotation index, first vertex, end vertex) and
    ``vertices`` float32 [V, 2]; RLE segmentations give no polygons."""
    polys, verts = [], []
    for k, a in enumerate(anns):
        seg = a["seg"]
        if not isinstance(seg, list):
            continue
        for poly in seg:
            xy = np.asarray(poly, dtype=np.float32).reshape(-1, 2)
            n = sum(len(v) for v in verts)
            polys.append((k, n, n + len(xy)))
            verts.append(xy)
    vertices = np.concatenate(verts) if verts else np.zeros((0, 2), np.float32)
    if scale is not None:
        vertices = vertices / scale
    return np.array(polys, dtype=np.int32).reshape(-1, 3), vertices.astype(np.float32)


class COCO(StreamReader):
    """Reads a COCO dataset: yields ``(images, bboxes, labels[, polygons, vertices][,
    image_ids])``.

    Images are the encoded files (uint8 1-D); bboxes float32 [M, 4] in ``xywh`` (``ltrb``
    with ``ltrb=True``), divided by the image size with ``ratio=True``; labels int32 [M],
    category ids remapped to 1..K in id order unless ``avoid_class_remapping``; image ids
    int32 (1,). Images are read in image-id order (or the order of ``images``). Boxes
    narrower or lower than ``size_threshold`` are dropped. ``pixelwise_masks``,
    ``masks`` and preprocessed annotations are not supported. See :class:`StreamReader`
    for the epoch, read-ahead and state rules.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        name: str | None = None,
        device: str = "cpu",
        num_inputs: int | None = None,
        *,
        file_root: str | os.PathLike | None = None,
        annotations_file: str | os.PathLike = "",
        images: Sequence[str] | None = None,
        ltrb: bool = False,
        ratio: bool = False,
        skip_empty: bool = False,
        size_threshold: float = 0.1,
        include_iscrowd: bool = True,
        avoid_class_remapping: bool = False,
        image_ids: bool = False,
        polygon_masks: bool = False,
        pixelwise_masks: bool = False,
        masks: bool = False,
        preprocessed_annotations: str = "",
        save_preprocessed_annotations: bool = False,
        save_preprocessed_annotations_dir: str = "",
        shuffle_after_epoch: bool = False,
        shuffle_after_epoch_seed: int = DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
        initial_fill: int = 1024,
        lazy_init: bool = False,
        pad_last_batch: bool = False,
        prefetch_queue_depth: int = 1,
        random_shuffle: bool = False,
        read_ahead: bool = False,
        seed: int = -1,
        shard_id: int = 0,
        num_shards: int = 1,
        stick_to_shard: bool = False,
        skip_cached_images: bool = False,
        dont_use_mmap: bool = False,
        tensor_init_bytes: int = 1048576,
        enable_checkpointing: bool = False,
    ) -> None:
        if file_root is None:
            raise ValueError("COCO reader needs `file_root`, the directory of the images")
        if not annotations_file:
            raise ValueError("COCO reader needs `annotations_file`")
        for arg, value in (("pixelwise_masks", pixelwise_masks), ("masks", masks),
                           ("preprocessed_annotations", preprocessed_annotations),
                           ("save_preprocessed_annotations", save_preprocessed_annotations)):
            if value:
                raise ValueError(f"COCO: `{arg}` is not supported by ndd")
        self._args: dict[str, Any] = dict(
            images=None if images is None else list(images), ltrb=bool(ltrb), ratio=bool(ratio),
            skip_empty=bool(skip_empty), size_threshold=float(size_threshold),
            include_iscrowd=bool(include_iscrowd), avoid_class_remapping=bool(avoid_class_remapping),
            image_ids=bool(image_ids), polygon_masks=bool(polygon_masks),
        )
        self._where = (os.fspath(file_root), os.fspath(annotations_file))
        super().__init__(
            max_batch_size, name, device, num_inputs, initial_fill=initial_fill, lazy_init=lazy_init,
            pad_last_batch=pad_last_batch, prefetch_queue_depth=prefetch_queue_depth,
            random_shuffle=random_shuffle, read_ahead=read_ahead, seed=seed, shard_id=shard_id,
            num_shards=num_shards, stick_to_shard=stick_to_shard, skip_cached_images=skip_cached_images,
            dont_use_mmap=dont_use_mmap, tensor_init_bytes=tensor_init_bytes,
            shuffle_after_epoch=shuffle_after_epoch, shuffle_after_epoch_seed=shuffle_after_epoch_seed,
            enable_checkpointing=enable_checkpointing,
        )

    def _open(self) -> Dataset:
        return COCODataset(*self._where, **self._args)
