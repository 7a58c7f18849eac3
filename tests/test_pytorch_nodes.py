"""ndd.pytorch.nodes: torchdata nodes over ndd readers, and their checkpoints (ours)."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tn = pytest.importorskip("torchdata.nodes")
pytest.importorskip("ndd_readers")
pytest.importorskip("ndd_ops_cpu")
Image = pytest.importorskip("PIL.Image")

import ndd  # noqa: E402
import ndd.types as types  # noqa: E402
from ndd.pytorch import nodes  # noqa: E402

B = 4
N = 22  # 6 batches of 4 per epoch (the last one topped up, as DALI does)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """N distinct 12x12 grey JPEGs in three class folders."""
    root = tmp_path_factory.mktemp("tree")
    rng = np.random.default_rng(7)
    for i in range(N):
        d = root / f"class{i % 3}"
        d.mkdir(exist_ok=True)
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (12, 12), np.uint8)).save(buf, format="JPEG", quality=95)
        (d / f"img{i:03d}.jpg").write_bytes(buf.getvalue())
    return root


def _pipeline(tree: pathlib.Path, rng: ndd.random.RNG | None = None, **reader_args) -> tn.Loader:
    args = dict(file_root=str(tree), random_shuffle=True, seed=3)
    args.update(reader_args)
    node = nodes.Reader(ndd.readers.File, batch_size=B, rngs={"aug": rng} if rng else None, **args)

    def augment(jpegs):
        images = ndd.decoders.image(jpegs, output_type=types.GRAY)
        if rng is None:
            return images
        angles = ndd.random.uniform(batch_size=jpegs.batch_size, range=[-30, 30], rng=rng)
        return ndd.rotate(images, angle=angles, keep_size=True, fill_value=0)

    return tn.Loader(nodes.ToTorch(nodes.DictMapper(node, augment)))


def _epoch(loader: tn.Loader, stop: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for images, labels in loader:
        out.append((images.numpy().copy(), labels.numpy().copy()))
        if stop is not None and len(out) == stop:
            break
    return out


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for p, q in zip(a, b) for x, y in zip(p, q))


def test_reader_node_yields_what_the_reader_yields(tree: pathlib.Path) -> None:
    reader = ndd.readers.File(file_root=str(tree), random_shuffle=True, seed=3)
    direct = [(np.asarray(j.torch(pad=True)), np.asarray(lab.torch()))
              for j, lab in reader.next_epoch(batch_size=B)]
    node = nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree), random_shuffle=True, seed=3)
    got = []
    for item in tn.Loader(node):
        assert set(item) == {"data", "label"}
        assert isinstance(item["data"], ndd.Batch)
        got.append((np.asarray(item["data"].torch(pad=True)), np.asarray(item["label"].torch())))
    assert _same(direct, got)
    assert [len(lab) for _, lab in got] == [4] * 6
    assert node.get_metadata()["epoch_size"] == N


def test_to_torch_gives_decoded_tensors_per_epoch(tree: pathlib.Path) -> None:
    loader = _pipeline(tree)
    first, second = _epoch(loader), _epoch(loader)
    assert len(first) == len(second) == 6
    images, labels = first[0]
    assert images.shape == (B, 12, 12, 1) and images.dtype == np.uint8 and labels.shape == (B, 1)
    # Reference: Pillow decoding of the same files, in the reader's order.
    reader = ndd.readers.File(file_root=str(tree), random_shuffle=True, seed=3)
    jpegs, _ = next(iter(reader.next_epoch(batch_size=B)))
    for k, jpeg in enumerate(jpegs.tensors):
        ref = np.asarray(Image.open(io.BytesIO(np.asarray(jpeg).tobytes())).convert("L"))
        assert np.abs(images[k, ..., 0].astype(int) - ref).max() <= 1  # libjpeg-turbo vs Pillow's IDCT
    assert not _same(first, second)  # shuffled anew


def test_to_torch_with_samples_instead_of_batches(tree: pathlib.Path) -> None:
    node = nodes.Reader(ndd.readers.File, batch_size=None, file_root=str(tree))
    items = list(tn.Loader(nodes.ToTorch(node)))
    assert len(items) == N
    data, label = items[0]
    assert data.ndim == 1 and label.shape == (1,)


@pytest.mark.parametrize("stop", [1, 3, 6])
def test_loader_state_resumes_exactly(tree: pathlib.Path, stop: int) -> None:
    rng = ndd.random.RNG(seed=11)
    loader = _pipeline(tree, rng)
    assert len(_epoch(loader, stop=stop)) == stop
    state = loader.state_dict()
    json.dumps(state)  # plain data: fits torch.save, DCP or a JSON file
    loader.load_state_dict(state)  # a bare iter() would start a new epoch, as torchdata's nodes do
    rest = _epoch(loader)  # the interrupted epoch's remainder, or the next epoch after a full one
    after = _epoch(loader)

    rng2 = ndd.random.RNG(seed=999)  # replaced by the saved state
    resumed = _pipeline(tree, rng2)
    resumed.load_state_dict(state)
    assert _same(_epoch(resumed), rest)
    assert _same(_epoch(resumed), after)
    if stop < 6:
        assert len(rest) == 6 - stop
    else:
        assert len(rest) == 6  # a state saved after the last batch resumes with the next epoch


def test_an_uninterrupted_run_equals_head_plus_resumed(tree: pathlib.Path) -> None:
    whole = _pipeline(tree, ndd.random.RNG(seed=5))
    reference = _epoch(whole) + _epoch(whole)
    first = _pipeline(tree, ndd.random.RNG(seed=5))
    head = _epoch(first, stop=2)
    state = first.state_dict()
    second = _pipeline(tree, ndd.random.RNG(seed=5))
    second.load_state_dict(state)
    assert _same(head + _epoch(second) + _epoch(second), reference)


def test_nodes_run_on_a_torchdata_prefetch_thread(tree: pathlib.Path) -> None:
    node = nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree))
    mapped = nodes.DictMapper(node, lambda j: ndd.decoders.image(j, output_type=types.GRAY))
    threaded = tn.Loader(tn.Prefetcher(nodes.ToTorch(mapped), prefetch_factor=2))
    plain = _epoch(tn.Loader(nodes.ToTorch(nodes.DictMapper(
        nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree)),
        lambda j: ndd.decoders.image(j, output_type=types.GRAY)))))
    assert _same(_epoch(threaded), plain)


def test_errors_name_the_problem(tree: pathlib.Path) -> None:
    with pytest.raises(TypeError, match="reader_type must be a reader class"):
        nodes.Reader(lambda: None, batch_size=B)
    node = nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree), output_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="3 names for 2 outputs of File"):
        next(node)
    with pytest.raises(TypeError, match=r"rngs\['x'\] must be an ndd.random.RNG"):
        nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree), rngs={"x": 3})
    mapper = nodes.DictMapper(nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree)),
                              lambda x: x, key="image")
    with pytest.raises(KeyError, match="no key 'image'"):
        next(mapper)
    bare = nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree))
    with pytest.raises(ValueError, match="no reader position"):
        bare.reset({"something": 1})
    with_rng = nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree), rngs={"aug": ndd.random.RNG(1)})
    with pytest.raises(ValueError, match=r"no entry for the RNGs \['aug'\]"):
        with_rng.reset(nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree)).state_dict())
    with pytest.raises(TypeError, match="output_stream must be"):
        nodes.ToTorch(bare, output_stream="stream")
    not_ndd = nodes.ToTorch(nodes.DictMapper(bare, lambda x: np.zeros(3)))
    with pytest.raises(TypeError, match="entry 'data' is a ndarray"):
        next(not_ndd)


def test_single_output_reader_needs_names(tmp_path: pathlib.Path) -> None:
    for i in range(3):
        np.save(tmp_path / f"a{i}.npy", np.full((2, 2), i, np.float32))
    node = nodes.Reader(ndd.readers.Numpy, batch_size=2, file_root=str(tmp_path))
    with pytest.raises(ValueError, match="Cannot infer output names for reader Numpy"):
        next(node)
    named = nodes.Reader(ndd.readers.Numpy, batch_size=2, file_root=str(tmp_path), output_names=["x"])
    (x,) = next(iter(tn.Loader(nodes.ToTorch(named))))
    assert x.shape == (2, 2, 2)


def test_state_with_a_prefetcher_after_the_mapper(tree: pathlib.Path) -> None:
    def make(rng):
        node = nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree), random_shuffle=True, seed=3,
                            rngs={"aug": rng})

        def augment(jpegs):
            angles = ndd.random.uniform(batch_size=jpegs.batch_size, range=[-30, 30], rng=rng)
            return ndd.rotate(ndd.decoders.image(jpegs, output_type=types.GRAY), angle=angles, keep_size=True,
                              fill_value=0)

        return tn.Loader(tn.Prefetcher(nodes.ToTorch(nodes.DictMapper(node, augment)), prefetch_factor=3))

    loader = make(ndd.random.RNG(seed=2))
    it = iter(loader)  # one pass: a new iter() would reset the prefetcher and drop what it holds
    head = [next(it) for _ in range(2)]
    state = loader.state_dict()  # after the second batch, though the prefetcher has run ahead
    rest = [(x.numpy().copy(), y.numpy().copy()) for x, y in it]
    resumed = make(ndd.random.RNG(seed=77))
    resumed.load_state_dict(state)
    assert len(head) == 2 and len(rest) == 4 and _same(_epoch(resumed), rest)


def test_checkpointing_disabled_gives_an_empty_state(tree: pathlib.Path) -> None:
    node = nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree), enable_checkpointing=False)
    loader = tn.Loader(tn.Prefetcher(node, prefetch_factor=2))  # asks for the state after every batch
    assert len(list(loader)) == 6
    assert loader.state_dict()["root"] is not None and node.state_dict() == {}
    with pytest.raises(ValueError, match="checkpointing disabled"):
        nodes.Reader(ndd.readers.File, batch_size=B, file_root=str(tree)).reset({})


# -- iterating a Loader again after a ``break`` ------------------------------------------


def _npy_dir(root: pathlib.Path, n: int) -> pathlib.Path:
    """``n`` .npy files in name order, file i holding the single value i."""
    root.mkdir(exist_ok=True)
    for i in range(n):
        np.save(root / f"s{i:03d}.npy", np.array([i], np.int32))
    return root


def _with_prefetcher(node: tn.BaseNode, prefetch: int | None) -> tn.Loader:
    return tn.Loader(node if prefetch is None else tn.Prefetcher(node, prefetch_factor=prefetch))


def _npy_loader(root: pathlib.Path, prefetch: int | None, batch: int = 2, **reader_args) -> tn.Loader:
    node = nodes.Reader(ndd.readers.Numpy, batch_size=batch, file_root=str(root), output_names=["x"],
                        **reader_args)
    return _with_prefetcher(nodes.ToTorch(node), prefetch)


def _samples(loader: tn.Loader, stop: int | None = None) -> list[list[int]]:
    """The sample values of each batch of one pass over ``loader`` (``break`` after ``stop``)."""
    out = []
    for item in loader:
        x = item[0] if isinstance(item, tuple) else item
        out.append([int(v) for v in np.asarray(x).reshape(-1)])
        if len(out) == stop:
            break
    return out


@pytest.mark.parametrize("prefetch", [None, 1, 2, 4])
def test_iterating_again_after_a_break_starts_a_new_epoch_as_torchdata_does(
        tmp_path: pathlib.Path, prefetch: int | None) -> None:
    """A new ``iter(loader)`` after a ``break`` gives a whole epoch, as with torchdata's own nodes,
    whatever a Prefetcher had read ahead (it used to go on from the prefetcher's position, so
    the batches it held were lost: 6..11 instead of 4..11 or 0..11)."""
    root = _npy_dir(tmp_path / "npy", 12)
    whole = [[2 * i, 2 * i + 1] for i in range(6)]

    reference = _with_prefetcher(tn.Batcher(tn.IterableWrapper(range(12)), batch_size=2), prefetch)
    ref_runs = [_samples(reference, stop=2), _samples(reference), _samples(reference, stop=1), _samples(reference)]
    assert ref_runs == [whole[:2], whole, whole[:1], whole]  # torchdata: each new iter() restarts

    loader = _npy_loader(root, prefetch)
    assert [_samples(loader, stop=2), _samples(loader), _samples(loader, stop=1), _samples(loader)] == ref_runs


@pytest.mark.parametrize("prefetch", [None, 3])
@pytest.mark.parametrize("checkpointing", [True, False])
@pytest.mark.parametrize("stop", [1, 3, 6])
def test_a_new_epoch_after_a_break_is_the_one_an_uninterrupted_run_gives(
        tmp_path: pathlib.Path, stop: int, checkpointing: bool, prefetch: int | None) -> None:
    """Shuffled, with the last batch topped up from the next epoch (11 samples, batches of 2):
    the epoch after a ``break`` (after the last batch too, before the loader saw the end) is
    the next epoch of a run that never broke off. Without checkpointing the rest is read."""
    root = _npy_dir(tmp_path / "npy", 11)
    args = dict(random_shuffle=True, seed=5, enable_checkpointing=checkpointing)
    plain = _npy_loader(root, None, **args)
    epochs = [_samples(plain) for _ in range(3)]
    assert len(epochs[0]) == 6 and epochs[0] != epochs[1]
    loader = _npy_loader(root, prefetch, **args)
    assert _samples(loader, stop=stop) == epochs[0][:stop]
    assert _samples(loader) == epochs[1]
    assert _samples(loader, stop=2) == epochs[2][:2]


def test_continuing_an_epoch_after_a_break_goes_through_the_state(tmp_path: pathlib.Path) -> None:
    """The way to go on with an interrupted epoch: reload the loader's own state, which is
    that of the last batch the loop got, not the prefetcher's read-ahead position."""
    root = _npy_dir(tmp_path / "npy", 12)
    loader = _npy_loader(root, 4)
    assert _samples(loader, stop=2) == [[0, 1], [2, 3]]
    loader.load_state_dict(loader.state_dict())
    assert _samples(loader) == [[4, 5], [6, 7], [8, 9], [10, 11]]
    assert _samples(loader)[0] == [0, 1]
