"""Dataset writers (ours): build the formats the readers read, without TensorFlow or Caffe2.

* :func:`write_caffe2_lmdb` — ``(encoded_image, label)`` records as a Caffe2 LMDB.
* :func:`write_tfrecord` — ``{feature: values}`` examples as a TFRecord file plus its
  index (the text format of ``ndd-tfrecord2idx`` / DALI's ``tfrecord2idx``).
* :func:`write_file_tree` — ``(encoded_image, label)`` records as ``root/<label>/<n>.<ext>``
  (what ``ndd.readers.File(file_root=...)`` reads; labels become the sorted folders).
* :func:`write_coco` — images with boxes (and optional polygons) as a COCO folder
  (``root/images/*`` plus ``root/annotations.json``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._caffe2 import write_caffe2_lmdb
from ._tfrecord import encode_example, write_index
from ._tfrecord import write_tfrecord as _write_records

__all__ = ["write_caffe2_lmdb", "write_coco", "write_file_tree", "write_tfrecord"]


def write_tfrecord(path: str | os.PathLike, examples: Iterable[Mapping[str, Any]],
                   index_path: str | os.PathLike | None = None, *, crc: bool = True) -> int:
    """Write ``examples`` (``{name: bytes | str | list of int/float/bytes | ndarray}``) as a
    TFRecord file and its index (``index_path``, default ``path + ".idx"``); returns the count."""
    index = _write_records(path, (encode_example(ex) for ex in examples), crc=crc)
    write_index(index, index_path if index_path is not None else os.fspath(path) + ".idx")
    return len(index)


def write_file_tree(root: str | os.PathLike, records: Iterable[tuple[bytes, int]], ext: str = "jpg",
                    digits: int = 2) -> int:
    """Write ``(encoded_image, label)`` records as ``root/<label:0{digits}d>/<n:06d>.<ext>``.

    Folder names are zero-padded so their sorted order is the label order, which is how
    ``ndd.readers.File(file_root=root)`` assigns labels. Returns the record count.
    """
    n = 0
    for n, (data, label) in enumerate(records, 1):
        folder = os.path.join(os.fspath(root), f"{int(label):0{digits}d}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{n - 1:06d}.{ext}"), "wb") as f:
            f.write(bytes(data))
    return n


def write_coco(root: str | os.PathLike, images: Sequence[tuple[str, bytes, int, int]],
               annotations: Sequence[Mapping[str, Any]], categories: Sequence[int] | None = None) -> str:
    """Write a COCO folder: ``root/images/<file_name>`` and ``root/annotations.json``.

    ``images`` holds ``(file_name, encoded_bytes, width, height)``; each annotation is a
    mapping with ``image`` (index into ``images``), ``bbox`` (``[x, y, w, h]`` in pixels),
    ``category_id`` and optionally ``segmentation`` (a list of polygons) and ``iscrowd``.
    Returns the annotations file path (pass ``file_root=root + "/images"``).
    """
    img_dir = os.path.join(os.fspath(root), "images")
    os.makedirs(img_dir, exist_ok=True)
    entries = []
    for i, (name, data, width, height) in enumerate(images):
        with open(os.path.join(img_dir, name), "wb") as f:
            f.write(bytes(data))
        entries.append({"id": i + 1, "file_name": name, "width": int(width), "height": int(height)})
    anns = []
    for k, a in enumerate(annotations):
        x, y, w, h = (float(v) for v in a["bbox"])
        ann = {"id": k + 1, "image_id": int(a["image"]) + 1, "bbox": [x, y, w, h], "area": w * h,
               "category_id": int(a["category_id"]), "iscrowd": int(a.get("iscrowd", 0))}
        if "segmentation" in a:
            ann["segmentation"] = a["segmentation"]
        anns.append(ann)
    cats = sorted(set(categories) if categories is not None else {a["category_id"] for a in anns})
    path = os.path.join(os.fspath(root), "annotations.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"images": entries, "annotations": anns,
                   "categories": [{"id": int(c), "name": str(c)} for c in cats]}, f)
    return path
