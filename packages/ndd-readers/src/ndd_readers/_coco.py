"""``ndd.readers.COCO``: COCO-style detection datasets (images plus a JSON file)."""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._base import Dataset, StreamReader, flag, path_list, read_bytes
from ._stream import DEFAULT_SHUFFLE_AFTER_EPOCH_SEED


class _Sample:
    __slots__ = ("bboxes", "image_id", "labels", "name", "path", "polygons", "vertices", "segs", "size")


def _load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"annotations_file {path!r} cannot be read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"annotations_file {path!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise ValueError(f"annotations_file {path!r} has no `images` list")
    return data


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _json_int(entry: Any, key: str, what: str) -> int:
    """Integer field ``key`` of a JSON object (an id), or a ValueError naming ``what``."""
    v = entry.get(key) if isinstance(entry, dict) else None
    if not (_is_number(v) and float(v).is_integer()):  # (1.0 as written by some tools; not "1" or 1.5)
        raise ValueError(f"{what}: `{key}` must be an integer, got {v!r}")
    return int(v)


def _json_number(entry: dict, key: str, what: str, positive: bool) -> float:
    """Number field ``key`` (an image's width or height; above 0 where ``positive``)."""
    v = entry.get(key)
    if not (_is_number(v) and math.isfinite(v)) or (positive and v <= 0):
        raise ValueError(f"{what}: `{key}` must be a {'positive ' if positive else ''}number, got {v!r}")
    return float(v)


class COCODataset(Dataset):
    """Images with their boxes, labels and (optionally) polygons, ordered by image id."""

    def __init__(self, file_root: str, annotations_file: str, *, images: Sequence[str] | None, ltrb: bool,
                 ratio: bool, skip_empty: bool, size_threshold: float, include_iscrowd: bool,
                 avoid_class_remapping: bool, image_ids: bool, polygon_masks: bool,
                 pixelwise_masks: bool = False, legacy_polygons: bool = False) -> None:
        data = _load_json(annotations_file)
        where = f"annotations_file {annotations_file!r}"
        sized = ratio or pixelwise_masks  # the image's width and height are used
        infos: dict[int, tuple[str, float, float]] = {}
        for n, im in enumerate(data["images"]):
            what = f"{where}: `images` entry #{n}"
            img = _json_int(im, "id", what)
            name = im.get("file_name") if isinstance(im, dict) else None
            if not isinstance(name, str):
                raise ValueError(f"{what}: `file_name` must be a string, got {name!r}")
            w, h = _json_number(im, "width", what, sized), _json_number(im, "height", what, sized)
            if img in infos:
                raise ValueError(f"{what}: image id {img} is also that of {infos[img][0]!r}")
            infos[img] = (name, w, h)
        cats = data.get("categories", [])
        if not isinstance(cats, list):
            raise ValueError(f"{where}: `categories` must be a list")
        cat_ids = [_json_int(c, "id", f"{where}: `categories` entry #{k}") for k, c in enumerate(cats)]
        remap = {c: c if avoid_class_remapping else k for k, c in enumerate(cat_ids, 1)}  # list order, as DALI
        anns: dict[int, list[dict]] = {i: [] for i in infos}
        annotations = data.get("annotations", [])
        if not isinstance(annotations, list):
            raise ValueError(f"{where}: `annotations` must be a list")
        for n, a in enumerate(annotations):
            what = f"{where}: annotation #{n}"
            img, cat = _json_int(a, "image_id", what), _json_int(a, "category_id", what)
            box = a.get("bbox")
            if not isinstance(box, list) or len(box) != 4 or not all(
                    _is_number(v) and math.isfinite(v) for v in box):
                raise ValueError(f"{what}: `bbox` must be a list of 4 finite numbers, got {box!r:.80}")
            box = [float(v) for v in box]
            if img not in anns:
                raise ValueError(f"{what} refers to unknown image_id {img}")
            if cat not in remap:
                raise ValueError(f"{what} has unknown category_id {cat}")
            if not include_iscrowd and a.get("iscrowd", 0):
                continue
            if box[2] < size_threshold or box[3] < size_threshold:
                continue
            anns[img].append({"bbox": box, "label": remap[cat], "seg": a.get("segmentation"), "n": n})
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
            s.name, s.path = fname, os.path.join(file_root, fname)
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
                s.polygons, s.vertices = _polygons(anns[img], scale if ratio else None, f"{where}: image id {img}")
                if legacy_polygons:  # DALI's deprecated `masks`: coordinate (not vertex) indices
                    s.polygons[:, 1:] *= 2
            if pixelwise_masks:
                s.size = (int(round(h)), int(round(w)))
                s.segs = [(a["label"], _parse_segmentation(a["seg"], s.size, f"{where}: annotation #{a['n']}"))
                          for a in anns[img]]
            self.samples.append(s)
        if not self.samples:
            raise ValueError(f"{where}: no images to read")
        self._polygons, self._image_ids, self._pixelwise = polygon_masks, image_ids, pixelwise_masks
        self.layouts = (None,) * (3 + 2 * polygon_masks) + ("HWC",) * pixelwise_masks + (None,) * image_ids

    def __len__(self) -> int:
        return len(self.samples)

    def read(self, i: int) -> tuple[np.ndarray, ...]:
        s = self.samples[i]
        out = [read_bytes(s.path, f"image {int(s.image_id[0])}"), s.bboxes.copy(), s.labels.copy()]
        if self._polygons:
            out += [s.polygons.copy(), s.vertices.copy()]
        if self._pixelwise:
            out.append(pixelwise_mask(s.size, s.segs))
        if self._image_ids:
            out.append(s.image_id.copy())
        return tuple(out)

    def describe(self, i: int) -> str:
        s = self.samples[i]
        return f"{s.path} (image id {int(s.image_id[0])}, sample {i})"

    def source_info(self, i: int, output: int) -> str:
        """The image's ``file_name`` in the annotations (the image only)."""
        return self.samples[i].name if output == 0 else ""


def _polygons(anns: list[dict], scale: np.ndarray | None, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``polygons`` int32 [P, 3] (annotation index, first vertex, end vertex) and
    ``vertices`` float32 [V, 2]; RLE segmentations give no polygons. ValueError naming
    ``where`` and the annotation for a polygon that is not a flat list of x, y pairs."""
    polys, verts = [], []
    for k, a in enumerate(anns):
        seg = a["seg"]
        if isinstance(seg, dict) or seg is None:  # RLE (or none): no polygons
            continue
        if not isinstance(seg, list):
            raise ValueError(f"{where}, annotation #{a['n']}: `segmentation` must be a list of polygons or "
                             f"an RLE dict, got {seg!r:.60}")
        for poly in seg:
            try:
                xy = np.asarray(poly, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                xy = None
            if xy is None or xy.size % 2 or not np.isfinite(xy).all():
                got = "something else" if xy is None else f"{xy.size} numbers" if xy.size % 2 else "a NaN or infinity"
                raise ValueError(f"{where}, annotation #{a['n']}: a polygon must be a flat list of finite x, y "
                                 f"pairs, got {got}")
            xy = xy.astype(np.float32).reshape(-1, 2)
            n = sum(len(v) for v in verts)
            polys.append((k, n, n + len(xy)))
            verts.append(xy)
    vertices = np.concatenate(verts) if verts else np.zeros((0, 2), np.float32)
    if scale is not None:
        vertices = vertices / scale
    return np.array(polys, dtype=np.int32).reshape(-1, 3), vertices.astype(np.float32)


# -- pixelwise masks ---------------------------------------------------------------------------
# A mask pixel (column x, row y) covers [x, x+1) x [y, y+1) in COCO's coordinates; it belongs to
# a polygon when its centre (x + 0.5, y + 0.5) lies inside (even-odd rule, edges half-open),
# which is what COCO's own rasteriser approximates. RLE masks are exact.

Segment = tuple[str, Any]  # ("poly", [V×2 float64 arrays]) or ("rle", counts as int64 array)


def decode_rle_string(s: str) -> list[int]:
    """Decode COCO's compressed RLE string (``counts`` of ``pycocotools``' ``frString``).

    Each count is a little-endian base-32 number in characters ``chr(48 + v)``: 5 value
    bits per character, bit 0x20 means "more characters follow", and bit 0x10 of the last
    character is the sign. From the third count on, the value is a delta to the count two
    places before it.
    """
    counts: list[int] = []
    p, n = 0, len(s)
    while p < n:
        x = k = 0
        more = True
        while more:
            if p >= n:
                raise ValueError("the compressed RLE string ends inside a count")
            c = ord(s[p]) - 48
            if not 0 <= c < 64:
                raise ValueError(f"the compressed RLE string has an invalid character {s[p]!r}")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and c & 0x10:
                x -= 1 << (5 * k)  # sign-extend
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def _parse_segmentation(seg: Any, size: tuple[int, int], where: str) -> list[Segment]:
    """Check an annotation's ``segmentation`` (polygons, or RLE with list or string counts)."""
    if seg is None or (isinstance(seg, list) and not seg):
        return []
    items = [seg] if isinstance(seg, dict) else seg
    if not isinstance(items, list):
        raise ValueError(f"{where}: `segmentation` must be a list of polygons or an RLE dict, got {seg!r:.60}")
    h, w = size
    out: list[Segment] = []
    polys = []
    for item in items:
        if isinstance(item, dict):
            try:
                rh, rw = (int(v) for v in item["size"])
                counts = item["counts"]
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{where}: an RLE `segmentation` needs `size` [h, w] and `counts`") from None
            if (rh, rw) != (h, w):
                raise ValueError(f"{where}: RLE size {[rh, rw]} differs from the image's [height, width] {[h, w]}")
            try:
                if isinstance(counts, str):
                    counts = decode_rle_string(counts)
                elif isinstance(counts, bytes):
                    counts = decode_rle_string(counts.decode("ascii"))
                arr = np.asarray(counts, dtype=np.int64).reshape(-1)
            except (ValueError, TypeError, UnicodeDecodeError) as e:
                raise ValueError(f"{where}: bad RLE `counts`: {e}") from None
            if (arr < 0).any() or int(arr.sum()) != h * w:
                raise ValueError(f"{where}: RLE `counts` must be non-negative and sum to height*width = {h * w}, "
                                 f"got {int(arr.sum())}")
            out.append(("rle", arr))
        else:
            try:
                xy = np.asarray(item, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: a polygon must be a flat list of numbers x0, y0, x1, y1, ...") from None
            if xy.size % 2 or not np.isfinite(xy).all():
                raise ValueError(f"{where}: a polygon must hold finite x, y pairs, got {xy.size} numbers")
            if xy.size >= 6:
                polys.append(xy.reshape(-1, 2))
    if polys:
        out.append(("poly", polys))
    return out


def fill_polygon(mask: np.ndarray, xy: np.ndarray) -> None:
    """Set the pixels of boolean ``mask`` (H, W) whose centres lie inside polygon ``xy`` (V, 2)."""
    h, w = mask.shape
    x0, y0 = xy[:, 0], xy[:, 1]
    x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
    r0 = max(int(math.ceil(y0.min() - 0.5)), 0)  # rows whose centre is in [ymin, ymax)
    r1 = min(int(math.ceil(y0.max() - 0.5)), h)
    if r0 >= r1:
        return
    py = np.arange(r0, r1, dtype=np.float64) + 0.5
    crosses = (y0[:, None] > py) != (y1[:, None] > py)  # (edges, rows), half-open in y
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = x0[:, None] + (py - y0[:, None]) * (x1 - x0)[:, None] / (y1 - y0)[:, None]
    xs = np.where(crosses, xs, np.inf)
    xs.sort(axis=0)  # per row: the crossings in x order, then +inf
    k = xs.shape[0] // 2
    starts, ends = xs[0:2 * k:2], xs[1:2 * k:2]  # inside on [start, end) of each pair
    ok = np.isfinite(ends)
    rows = np.broadcast_to(np.arange(r1 - r0), ends.shape)[ok]
    c0 = np.clip(np.ceil(starts[ok] - 0.5), 0, w).astype(np.intp)
    c1 = np.clip(np.ceil(ends[ok] - 0.5), 0, w).astype(np.intp)
    n = (r1 - r0) * (w + 1)
    base = rows * (w + 1)
    diff = np.bincount(base + c0, minlength=n) - np.bincount(base + c1, minlength=n)
    mask[r0:r1] |= np.cumsum(diff.reshape(r1 - r0, w + 1)[:, :w], axis=1) > 0


def rle_to_mask(counts: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Boolean (H, W) mask of uncompressed COCO RLE ``counts`` (column-major runs, zeros first)."""
    h, w = size
    values = (np.arange(len(counts)) % 2).astype(bool)
    return np.repeat(values, counts).reshape(w, h).T


def pixelwise_mask(size: tuple[int, int], segs: list[tuple[int, list[Segment]]]) -> np.ndarray:
    """int32 (H, W, 1): each pixel holds the highest label of the annotations covering it
    (0: none), as DALI's masks do."""
    h, w = size
    out = np.zeros((h, w, 1), np.int32)
    scratch = np.zeros((h, w), bool)
    for label, parts in segs:
        for kind, data in parts:
            if kind == "rle":
                hit = rle_to_mask(data, size)
                out[hit, 0] = np.maximum(out[hit, 0], label)
            else:
                scratch[:] = False
                for xy in data:
                    fill_polygon(scratch, xy)
                out[scratch, 0] = np.maximum(out[scratch, 0], label)
    return out


class COCO(StreamReader):
    """Reads a COCO dataset: yields ``(images, bboxes, labels[, polygons, vertices |
    pixelwise_masks][, image_ids])``.

    Images are the encoded files (uint8 1-D); bboxes float32 [M, 4] in ``xywh`` (``ltrb``
    with ``ltrb=True``), divided by the image size with ``ratio=True``; labels int32 [M],
    category ids remapped to 1..K in the order of ``categories`` unless ``avoid_class_remapping``; image ids
    int32 (1,). Images are read in image-id order (or the order of ``images``). Boxes
    narrower or lower than ``size_threshold`` are dropped.

    ``polygon_masks=True`` adds ``polygons`` int32 [P, 3] (annotation index, first and
    end vertex) and ``vertices`` float32 [V, 2]; the deprecated ``masks=True`` gives the
    same with coordinate indices (twice the vertex indices), as in DALI.
    ``pixelwise_masks=True`` adds an int32 (H, W, 1) mask (layout ``HWC``, H and W from
    the JSON's image entry) whose pixels hold the label of the annotation covering them,
    0 for background. It is rasterised from polygon segmentations (a pixel is inside when
    its centre is, even-odd rule) and from RLE ones (``counts`` as a list, or COCO's
    compressed string). Where annotations overlap, the later annotation in the file wins
    (DALI leaves this unspecified). Masks are built on the read-ahead thread.
    Preprocessed annotations are not supported. See :class:`StreamReader` for the epoch,
    read-ahead and state rules.
    """

    _SHUFFLES_LIST = True

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
        save_img_ids: bool | None = None,
        meta_files_path: str | None = None,
        dump_meta_files: bool | None = None,
        dump_meta_files_path: str | None = None,
    ) -> None:
        # DALI's deprecated aliases (since 0.28), each with a warning: save_img_ids stands for
        # image_ids; the other three name the preprocessed annotations, which ndd does not support.
        aliases = (("save_img_ids", "image_ids", save_img_ids),
                   ("meta_files_path", "preprocessed_annotations", meta_files_path),
                   ("dump_meta_files", "save_preprocessed_annotations", dump_meta_files),
                   ("dump_meta_files_path", "save_preprocessed_annotations_dir", dump_meta_files_path))
        for old, new, value in aliases:
            if value is not None:
                warnings.warn(f"COCO: argument `{old}` is a deprecated alias for `{new}`; use `{new}`",
                              DeprecationWarning, stacklevel=2)
        if save_img_ids is not None:
            image_ids = save_img_ids
        preprocessed_annotations = preprocessed_annotations or meta_files_path or ""
        save_preprocessed_annotations = save_preprocessed_annotations or bool(dump_meta_files)
        if file_root is None:
            raise ValueError("COCO reader needs `file_root`, the directory of the images")
        if not annotations_file:
            raise ValueError("COCO reader needs `annotations_file`")
        for arg, value in (("preprocessed_annotations", preprocessed_annotations),
                           ("save_preprocessed_annotations", save_preprocessed_annotations)):
            if value:
                raise ValueError(f"COCO: `{arg}` is not supported by ndd")
        ltrb, ratio, skip_empty = flag(ltrb, "ltrb"), flag(ratio, "ratio"), flag(skip_empty, "skip_empty")
        include_iscrowd = flag(include_iscrowd, "include_iscrowd")
        avoid_class_remapping = flag(avoid_class_remapping, "avoid_class_remapping")
        image_ids, masks = flag(image_ids, "image_ids"), flag(masks, "masks")
        polygon_masks, pixelwise_masks = flag(polygon_masks, "polygon_masks"), flag(pixelwise_masks, "pixelwise_masks")
        if isinstance(size_threshold, (bool, np.bool_)) or not isinstance(size_threshold, (int, float, np.number)) \
                or not math.isfinite(size_threshold):
            raise TypeError(f"`size_threshold` must be a number, got {size_threshold!r}")
        if pixelwise_masks and polygon_masks:
            raise ValueError("COCO: `pixelwise_masks` and `polygon_masks` are mutually exclusive")
        if pixelwise_masks and masks:
            raise ValueError("COCO: `masks` and `pixelwise_masks` cannot be both true")
        self._args: dict[str, Any] = dict(
            images=None if images is None else path_list(images, "images"), ltrb=ltrb, ratio=ratio,
            skip_empty=skip_empty, size_threshold=float(size_threshold), include_iscrowd=include_iscrowd,
            avoid_class_remapping=avoid_class_remapping, image_ids=image_ids, polygon_masks=polygon_masks or masks,
            pixelwise_masks=pixelwise_masks, legacy_polygons=masks,
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
