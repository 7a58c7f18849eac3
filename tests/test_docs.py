"""The documentation's code examples run, and the capture pages list every reason code.

Conventions for ``docs/*.md`` (every page, including pages other people write):

* A fenced block opened with ```` ```python ```` is executed. The blocks of one page run
  in order in one fresh namespace, so a later block may use names an earlier block of
  the same page defined. Each block is written to its own ``.py`` file before it runs,
  because capture mode proves constants by reading the source.
* A block opened with ```` ```{.python .no-run} ```` is shown but not executed: use it
  for GPU-only code and for fragments that are illustrative only (keep them few).
  Blocks in other languages (``bash``, ``toml``, ``text``) are never executed.
* Pages run with the working directory set to a temporary directory, and with these
  names predefined (a small generated dataset; the pages say what each one holds):

  ``data_dir``          the directory holding everything below (``pathlib.Path``)
  ``images_dir``        File reader layout: ``cat/`` and ``dog/``, 10 JPEGs (RGB) each
  ``mnist_lmdb``        a Caffe2 LMDB of 256 28x28 grey JPEGs labelled 0..9
  ``tfrecord_path``     a TFRecord file of 12 examples (``image/encoded``,
                        ``image/class/label``) and ``tfrecord_index``, its index file
  ``npy_dir``           8 ``.npy`` files, float32 of shape (4, 3)
  ``coco_root``         6 JPEGs of a COCO dataset; ``coco_annotations`` its JSON file
"""

from __future__ import annotations

import json
import pathlib
import re
import warnings

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("**/*.md"))
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
RUN_INFOS = {"python", "py"}
SKIP_INFOS = {"{.python .no-run}"}


def code_blocks(text: str) -> list[tuple[int, str, bool]]:
    """``(line, code, run)`` for every Python block of a page."""
    out = []
    for m in FENCE.finditer(text):
        info = m.group("info").strip()
        if info in RUN_INFOS or info in SKIP_INFOS:
            out.append((text.count("\n", 0, m.start()) + 2, m.group("body"), info in RUN_INFOS))
    return out


def _jpeg(rng: np.random.Generator, h: int, w: int, c: int) -> bytes:
    import cv2

    img = rng.integers(0, 256, (h, w, c) if c > 1 else (h, w), dtype=np.uint8)
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    return buf.tobytes()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The small dataset the pages refer to (see the module docstring)."""
    import ndd.tfrecord as tfr
    from ndd_readers._caffe2 import write_caffe2_lmdb

    root = tmp_path_factory.mktemp("docs-data")
    rng = np.random.default_rng(0)
    images = root / "images"
    for label in ("cat", "dog"):
        (images / label).mkdir(parents=True)
        for i in range(10):
            (images / label / f"{i:03d}.jpg").write_bytes(_jpeg(rng, 32 + 2 * i, 40, 3))
    lmdb = root / "mnist_lmdb"
    lmdb.mkdir()
    write_caffe2_lmdb(str(lmdb), ((_jpeg(rng, 28, 28, 1), i % 10) for i in range(256)))
    payloads = [tfr.encode_example({"image/encoded": _jpeg(rng, 24, 24, 3), "image/class/label": [i % 3]})
                for i in range(12)]
    tfr.write_index(tfr.write_tfrecord(root / "train.tfrecord", payloads), root / "train.idx")
    npy = root / "arrays"
    npy.mkdir()
    for i in range(8):
        np.save(npy / f"{i:02d}.npy", np.full((4, 3), i, np.float32))
    coco = root / "coco"
    (coco / "images").mkdir(parents=True)
    imgs, anns = [], []
    for i in range(6):
        name = f"{i:03d}.jpg"
        (coco / "images" / name).write_bytes(_jpeg(rng, 48, 64, 3))
        imgs.append({"id": i + 1, "file_name": name, "width": 64, "height": 48})
        anns.append({"id": i + 1, "image_id": i + 1, "category_id": 1 + i % 2, "bbox": [4, 4, 20, 10],
                     "area": 200, "iscrowd": 0, "segmentation": [[4, 4, 24, 4, 24, 14]]})
    cats = [{"id": 1, "name": "round"}, {"id": 2, "name": "square"}]
    (coco / "annotations.json").write_text(json.dumps({"images": imgs, "annotations": anns, "categories": cats}))
    return dict(data_dir=root, images_dir=images, mnist_lmdb=lmdb, tfrecord_path=root / "train.tfrecord",
                tfrecord_index=root / "train.idx", npy_dir=npy, coco_root=coco / "images",
                coco_annotations=coco / "annotations.json")


def test_pages_exist():
    names = {p.name for p in PAGES}
    assert {"index.md", "getting-started.md", "dynamic-mode.md", "readers.md", "capture-mode.md",
            "capture-rules.md", "capture-report.md", "checkpointing.md", "plugins.md",
            "migrating.md"} <= names


def test_every_page_is_in_the_nav():
    """mkdocs only warns about pages outside the nav; here it is an error both ways."""
    nav = re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert sorted(nav) == sorted(str(p.relative_to(DOCS)) for p in PAGES)


RUNNABLE = [p for p in PAGES if any(b[2] for b in code_blocks(p.read_text()))]


def test_most_pages_have_runnable_examples():
    assert len(RUNNABLE) >= len(PAGES) - 1, "only the index page may go without Python examples"


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page: pathlib.Path, dataset: dict, tmp_path: pathlib.Path,
                           monkeypatch: pytest.MonkeyPatch):
    blocks = [b for b in code_blocks(page.read_text()) if b[2]]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NDD_CAPTURE_REPORT", raising=False)
    namespace = {"__name__": "__main__", **dataset}
    stem = re.sub(r"\W", "_", page.stem)
    for k, (line, code, _) in enumerate(blocks):
        path = tmp_path / f"docs_{stem}_{k}.py"
        path.write_text(code)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(compile(code, str(path), "exec"), namespace)  # noqa: S102 - the docs' own code
            except Exception as e:
                raise AssertionError(f"{page.name}, block at line {line} failed: {e!r}") from e
    import ndd.checkpoint

    ndd.checkpoint.current().clear()


def _reason_rows(page: str) -> dict[str, tuple[str, str]]:
    rows = re.findall(r"^\| `(NDD-C\d+)` \| (.*?) \| (.*?) \|\s*$", (DOCS / page).read_text(), re.M)
    return {code: (_unescape(title), _unescape(hint)) for code, title, hint in rows}


def _unescape(cell: str) -> str:
    """A table cell as plain text: Markdown backslash escapes removed."""
    return re.sub(r"\\([\\`*_{}\[\]<>|#+.!-])", r"\1", cell.strip())


def test_reason_codes_are_all_documented():
    import ndd.capture

    codes = ndd.capture.reason_codes()
    rows = _reason_rows("capture-report.md")
    assert sorted(rows) == sorted(codes)
    for code, (title, hint) in codes.items():
        assert rows[code] == (title, hint), code


def test_code_blocks_are_recognised():
    text = "```python\na = 1\n```\n\n```{.python .no-run}\nb = 2\n```\n\n```bash\nls\n```\n"
    assert code_blocks(text) == [(2, "a = 1\n", True), (6, "b = 2\n", False)]
