"""``ndd.get_property(x, key="source_info")`` of the readers' outputs: DALI's per-sample
text naming where a sample was read, for every reader, in Tensor and Batch mode, through
shuffling, sharding and padding, and kept only by operators that pass samples through.

The datasets are written here (small files, tar archives through ``tarfile``, records
framed by hand); the expected texts follow DALI's formats, spelled out per reader, with
offsets measured on the written files, not taken from the readers.
"""

from __future__ import annotations

import io
import struct
import tarfile

import numpy as np
import pytest

import ndd
from ndd_readers import writers
from ndd_readers._caffe2 import write_lmdb


def info(x) -> list[str] | str:
    """The source info of a Batch (a list) or a Tensor (a str)."""
    p = ndd.get_property(x, key="source_info")
    if isinstance(p, ndd.Batch):
        return [bytes(np.asarray(t)).decode() for t in p.tensors]
    return bytes(np.asarray(p)).decode()


def first(reader, batch_size=None):
    return next(iter(reader.next_epoch(batch_size=batch_size)))


# -- File --------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    """root/a/{0,1,2}.jpg and root/b/{3,4}.jpg; file k holds the byte k (k + 1 times)."""
    root = tmp_path / "tree"
    for k in range(5):
        d = root / ("a" if k < 3 else "b")
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{k}.jpg").write_bytes(bytes([k]) * (k + 1))
    return root


def test_file_root_names_the_file_under_the_root_and_not_the_label(tree):
    data, labels = first(ndd.readers.File(file_root=tree), 5)
    assert info(data) == ["a/0.jpg", "a/1.jpg", "a/2.jpg", "b/3.jpg", "b/4.jpg"]
    assert info(labels) == [""] * 5
    data, labels = first(ndd.readers.File(file_root=str(tree) + "/"))  # Tensor mode
    assert (info(data), info(labels)) == ("a/0.jpg", "")


def test_file_files_and_file_list_give_the_names_as_listed(tree, tmp_path):
    absolute = [str(tree / "b" / "4.jpg"), str(tree / "a" / "1.jpg")]
    assert info(first(ndd.readers.File(files=absolute), 2)[0]) == absolute
    assert info(first(ndd.readers.File(file_root=tmp_path, files=["tree/b/3.jpg"]), 1)[0]) == ["tree/b/3.jpg"]
    (tree / "list.txt").write_text("b/4.jpg 7\na/0.jpg 1\n")
    for kw in (dict(file_root=tree), {}):  # names relative to file_root, or to the list's folder
        data, labels = first(ndd.readers.File(file_list=tree / "list.txt", **kw), 2)
        assert info(data) == ["b/4.jpg", "a/0.jpg"] and info(labels) == ["", ""]


def contents(batch) -> list[int]:
    """The k each File sample holds (file k is the byte k)."""
    return [int(np.asarray(t)[0]) for t in batch.tensors]


@pytest.mark.parametrize("kw", [dict(random_shuffle=True, seed=3), dict(random_shuffle=True, seed=7, initial_fill=2),
                                dict(shuffle_after_epoch=True)])
def test_the_source_info_follows_the_shuffled_samples(tree, kw):
    names = {0: "a/0.jpg", 1: "a/1.jpg", 2: "a/2.jpg", 3: "b/3.jpg", 4: "b/4.jpg"}
    reader, tensors = ndd.readers.File(file_root=tree, **kw), ndd.readers.File(file_root=tree, **kw)
    orders = []
    for _ in range(2):
        for data, _ in reader.next_epoch(batch_size=2):
            assert info(data) == [names[k] for k in contents(data)]
            orders += contents(data)
        for data, _ in tensors.next_epoch():  # Tensor mode
            assert info(data) == names[int(np.asarray(data)[0])]
    assert orders != sorted(orders)  # (it did shuffle)


def test_shards_and_the_padded_sample_repeat_the_last_name(tree):
    reader = ndd.readers.File(file_root=tree, num_shards=2, shard_id=1, pad_last_batch=True)
    batches = list(reader.next_epoch(batch_size=2))
    # shard 1 of 5 files is files 2, 3, 4; the last batch is padded with its last sample
    assert [info(d) for d, _ in batches] == [["a/2.jpg", "b/3.jpg"], ["b/4.jpg", "b/4.jpg"]]
    # without padding, the last batch is topped up from the continuing stream
    reader = ndd.readers.File(file_root=tree, num_shards=2, shard_id=1)
    assert [info(d) for d, _ in reader.next_epoch(batch_size=2)] == [["a/2.jpg", "b/3.jpg"], ["b/4.jpg", "a/0.jpg"]]


# -- Numpy -------------------------------------------------------------------------------


def test_numpy_names_root_files_with_dot_and_sub_directory_files_with_the_folder(tmp_path):
    root = tmp_path / "np"
    (root / "sub").mkdir(parents=True)
    np.save(root / "x.npy", np.zeros(1))
    np.save(root / "sub" / "y.npy", np.zeros(2))
    reader = ndd.readers.Numpy(file_root=root)
    assert info(first(reader, 2)[0]) == ["./x.npy", "sub/y.npy"]
    assert info(first(ndd.readers.Numpy(file_root=root))[0]) == "./x.npy"
    assert info(first(ndd.readers.Numpy(file_root=root, files=["sub/y.npy"]), 1)[0]) == ["sub/y.npy"]
    assert info(first(ndd.readers.Numpy(files=[str(root / "x.npy")]), 1)[0]) == [str(root / "x.npy")]
    (root / "list.txt").write_text("sub/y.npy\nx.npy\n")
    assert info(first(ndd.readers.Numpy(file_list=root / "list.txt"), 2)[0]) == ["sub/y.npy", "x.npy"]


# -- record formats ----------------------------------------------------------------------


def tfrecord_offsets(path) -> list[int]:
    """Where each record of a TFRecord file starts (length u64, its CRC, data, data CRC)."""
    raw, out, pos = open(path, "rb").read(), [], 0
    while pos < len(raw):
        out.append(pos)
        pos += 12 + struct.unpack_from("<Q", raw, pos)[0] + 4
    return out


def test_tfrecord_names_the_file_and_the_record_offset_in_every_feature(tmp_path):
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    writers.write_tfrecord(paths[0], [{"label": [k], "img": b"x" * k} for k in range(3)])
    writers.write_tfrecord(paths[1], [{"label": [k], "img": b"y"} for k in range(2)])
    expected = [f"{p} at index {o}" for p in paths for o in tfrecord_offsets(p)]
    assert expected[1] != f"{paths[0]} at index 0" and expected[3] == f"{paths[1]} at index 0"
    def reader():
        return ndd.readers.TFRecord(path=paths, index_path=[p + ".idx" for p in paths], features={
            "label": ndd.tfrecord.FixedLenFeature([1], ndd.tfrecord.int64, -1),
            "img": ndd.tfrecord.FixedLenFeature((), ndd.tfrecord.string, "")})
    out = first(reader(), 5)
    assert info(out["label"]) == expected and info(out["img"]) == expected
    assert info(first(reader())["img"]) == expected[0]


def datum(k: int) -> bytes:
    """A Caffe Datum (protobuf wire format by hand): data = k + 1 bytes k, label = k, encoded."""
    return b"\x22" + bytes([k + 1]) + bytes([k]) * (k + 1) + b"\x28" + bytes([k]) + b"\x38\x01"


def test_lmdb_readers_name_the_database_and_key_on_the_image_only(tmp_path):
    c2 = str(tmp_path / "c2")
    writers.write_caffe2_lmdb(c2, [(bytes([k]) * 3, k) for k in range(3)])
    caffe = str(tmp_path / "caffe") + "/"  # (the path as given)
    write_lmdb(caffe, [datum(k) for k in range(3)])
    for reader, path in ((ndd.readers.Caffe2(path=c2), c2), (ndd.readers.Caffe(path=caffe), caffe)):
        image, label = first(reader, 3)
        assert info(image) == [f"{path} at key {k:08d}" for k in range(3)]  # the writer's keys
        assert info(label) == ["", "", ""]
    assert info(first(ndd.readers.Caffe(path=caffe))[0]) == f"{caffe} at key 00000000"
    (label,) = first(ndd.readers.Caffe(path=caffe, image_available=False), 2)
    assert info(label) == ["", ""]


def test_coco_names_the_file_name_of_the_annotations(tmp_path):
    png = bytes.fromhex("89504e47")  # (not decoded)
    images = [("p.jpg", png, 10, 8), ("q.jpg", png, 10, 8)]
    anns = [{"image": i, "bbox": [1, 1, 4, 3], "category_id": 7} for i in range(2)]
    ann_file = writers.write_coco(tmp_path / "coco", images, anns)
    outs = first(ndd.readers.COCO(file_root=tmp_path / "coco" / "images", annotations_file=ann_file,
                                  image_ids=True), 2)
    assert info(outs[0]) == ["p.jpg", "q.jpg"]
    assert all(info(o) == ["", ""] for o in outs[1:])


def make_tar(path, entries: list[tuple[str, bytes]]) -> dict[str, int]:
    """Write a tar archive; where each member's data starts (read back with tarfile)."""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for name, data in entries:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    with tarfile.open(path) as t:
        return {m.name: m.offset_data for m in t.getmembers()}


def test_webdataset_names_archive_offset_and_member_for_every_output(tmp_path):
    a = str(tmp_path / "a.tar")
    offs = make_tar(a, [("s0.jpg", b"a"), ("s0.cls", b"b"), ("s1.jpg", b"c"), ("s1.cls", b"d"), ("s2.jpg", b"e")])
    reader = ndd.readers.Webdataset(paths=a, ext=["jpg", "cls"], missing_component_behavior="empty")
    jpg, cls = first(reader, 3)
    assert info(jpg) == [f"{a}:{offs[f's{k}.jpg']}:s{k}.jpg" for k in range(3)]
    assert info(cls) == [f"{a}:{offs['s0.cls']}:s0.cls", f"{a}:{offs['s1.cls']}:s1.cls", ""]  # s2 has no .cls
    jpg, cls = first(ndd.readers.Webdataset(paths=a, ext=["jpg", "cls"], missing_component_behavior="skip"))
    assert (info(jpg), info(cls)) == (f"{a}:{offs['s0.jpg']}:s0.jpg", f"{a}:{offs['s0.cls']}:s0.cls")


def test_mxnet_names_the_file_and_the_record_offset_in_that_file(tmp_path):
    paths, offsets, keys = [str(tmp_path / "a.rec"), str(tmp_path / "b.rec")], [], []
    base = 0
    for p, ks in zip(paths, ([0, 1, 2], [3, 4])):
        with open(p, "wb") as f:
            for k in ks:
                # RecordIO: magic, length; MXNet's image header (flag, label, id, id2); the image; padding
                payload = struct.pack("<IfQQ", 0, float(k), k, 0) + bytes([k]) * (k + 1)
                keys.append((p, f.tell()))
                offsets.append(base + f.tell())
                f.write(struct.pack("<II", 0xCED7230A, len(payload)) + payload + b"\0" * (-len(payload) % 4))
            base += f.tell()
    (tmp_path / "all.idx").write_text("".join(f"{k}\t{o}\n" for k, o in enumerate(offsets)))
    image, label = first(ndd.readers.MXNet(path=paths, index_path=str(tmp_path / "all.idx")), 5)
    assert info(image) == [f"{p} at index {o}" for p, o in keys]
    assert keys[3] == (paths[1], 0) and info(label) == [""] * 5


# -- operators ---------------------------------------------------------------------------


def test_operators_that_pass_samples_through_keep_it_and_the_others_drop_it(tree):
    data, _ = first(ndd.readers.File(file_root=tree), 3)
    names = ["a/0.jpg", "a/1.jpg", "a/2.jpg"]
    kept = {
        "copy": ndd.copy(data),
        "reshape": ndd.reshape(data, shape=[1, -1]),
        "squeeze": ndd.squeeze(ndd.reshape(data, shape=[1, -1]), axes=[0]),
        "expand_dims": ndd.expand_dims(data, axes=[0]),
        "reinterpret": ndd.reinterpret(data, dtype=ndd.int8),
        "per_frame": ndd.per_frame(ndd.reshape(data, shape=[-1, 1])),
        "Batch": ndd.Batch(data.tensors),
        "batch (a copy)": ndd.batch(data),
    }
    for op, out in kept.items():
        assert info(out) == names, op
    assert info(ndd.permute_batch(data, indices=[2, 0, 0])) == ["a/2.jpg", "a/0.jpg", "a/0.jpg"]
    assert info(data.tensors[1]) == "a/1.jpg" and info(data.select(2)) == "a/2.jpg"
    assert info(data.tensors[[2, 0]]) == ["a/2.jpg", "a/0.jpg"] and info(data.tensors[1:]) == names[1:]
    t = data.tensors[2]
    assert info(ndd.reshape(t, shape=[-1])) == info(ndd.copy(t)) == info(ndd.Tensor(t)) == "a/2.jpg"
    assert info(ndd.Batch([ndd.tensor(np.zeros(3, np.uint8)), t])) == ["", "a/2.jpg"]
    dropped = {
        "cast": ndd.cast(data, dtype=ndd.float32),
        "arithmetic": data + 1,
        "slice": data.slice[0:1],
        "pad": ndd.pad(data, fill_value=0),
        "stack": ndd.stack(data, data),
        "batch with a new type": ndd.batch(data, dtype=ndd.int8),
    }
    for op, out in dropped.items():
        assert info(out) == ["", "", ""], op
    assert info(t + 1) == info(ndd.cast(t, dtype=ndd.int8)) == ""


def test_decoded_images_have_none(tmp_path):
    import cv2

    root = tmp_path / "imgs" / "k"
    root.mkdir(parents=True)
    cv2.imwrite(str(root / "0.png"), np.full((4, 5, 3), 9, np.uint8))
    data, _ = first(ndd.readers.File(file_root=tmp_path / "imgs"), 1)
    assert info(data) == ["k/0.png"] and info(ndd.decoders.image(data)) == [""]


def test_data_not_read_by_a_reader_has_none_and_errors_still_name_the_file(tree):
    assert info(ndd.as_batch([np.zeros(2), np.ones(3)])) == ["", ""]
    assert info(ndd.as_tensor(np.zeros(2))) == ""
    data, _ = first(ndd.readers.File(file_root=tree), 2)
    with pytest.raises(Exception) as e:
        ndd.decoders.image(data).evaluate()
    assert "a/0.jpg" in f"{e.value} {e.value.__cause__}"
