"""The public dataset writers round-trip through the readers."""

import cv2
import numpy as np

import ndd
from ndd_readers import writers


def _jpeg(value: int, size=(8, 6)) -> bytes:
    return cv2.imencode(".png", np.full((size[1], size[0]), value, np.uint8))[1].tobytes()


def _labels(reader):
    return [int(np.asarray(lab).ravel()[0]) for _, lab in reader.next_epoch()]


def test_caffe2_and_file_tree(tmp_path):
    records = [(_jpeg(i * 10), i % 3) for i in range(7)]
    assert writers.write_caffe2_lmdb(str(tmp_path / "db"), records) == 7
    assert _labels(ndd.readers.Caffe2(path=str(tmp_path / "db"))) == [r[1] for r in records]
    assert writers.write_file_tree(tmp_path / "tree", records, ext="png") == 7
    got = _labels(ndd.readers.File(file_root=str(tmp_path / "tree")))
    assert sorted(got) == sorted(r[1] for r in records)
    images = [np.asarray(ndd.decoders.image(j, output_type=ndd.types.GRAY))[0, 0, 0]
              for j, _ in ndd.readers.File(file_root=str(tmp_path / "tree")).next_epoch()]
    assert sorted(int(v) for v in images) == [i * 10 for i in range(7)]


def test_tfrecord_with_index(tmp_path):
    path = tmp_path / "data.tfrecord"
    examples = [{"label": [i], "name": f"s{i}".encode()} for i in range(5)]
    assert writers.write_tfrecord(path, examples) == 5
    reader = ndd.readers.TFRecord(path=str(path), index_path=str(path) + ".idx", features={
        "label": ndd.tfrecord.FixedLenFeature([1], ndd.tfrecord.int64, -1),
        "name": ndd.tfrecord.FixedLenFeature((), ndd.tfrecord.string, ""),
    })
    out = list(reader.next_epoch())
    assert [int(np.asarray(o["label"])[0]) for o in out] == list(range(5))
    assert bytes(np.asarray(out[3]["name"])) == b"s3"


def test_coco(tmp_path):
    images = [("a.png", _jpeg(50, (10, 8)), 10, 8), ("b.png", _jpeg(90, (10, 8)), 10, 8)]
    anns = [{"image": 0, "bbox": [1, 1, 4, 3], "category_id": 7},
            {"image": 1, "bbox": [2, 2, 5, 5], "category_id": 3},
            {"image": 1, "bbox": [0, 0, 2, 2], "category_id": 7}]
    ann_file = writers.write_coco(tmp_path / "coco", images, anns)
    reader = ndd.readers.COCO(file_root=str(tmp_path / "coco" / "images"), annotations_file=ann_file)
    out = list(reader.next_epoch())
    assert len(out) == 2
    _, boxes0, labels0 = out[0]
    np.testing.assert_allclose(np.asarray(boxes0), [[1, 1, 4, 3]])
    assert np.asarray(out[1][2]).tolist() == [1, 2]  # categories 3, 7 remapped to 1, 2
