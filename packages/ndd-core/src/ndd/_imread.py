"""``ndd.imread``: read image files and decode them with ``ndd.decoders.image``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from ._batch import Batch
from ._construct import as_batch, as_tensor
from ._tensor import Tensor

PathLike = Union[str, "os.PathLike[str]"]


def _read(path: PathLike) -> np.ndarray:
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8)


def imread(filepaths: PathLike | Sequence[PathLike], **kwargs: Any) -> Tensor | Batch:
    """Read and decode one image file (a Tensor) or a list of them (a Batch).

    Keyword arguments go to ``ndd.decoders.image`` (``output_type``, ``device``, ...),
    which must be installed (package ``ndd-ops-cpu``). Errors name the file.
    """
    from . import decoders

    if isinstance(filepaths, (str, os.PathLike)):
        data = as_tensor(_read(filepaths))
        try:
            return decoders.image(data, **kwargs).evaluate()
        except ValueError as e:
            raise ValueError(f"imread: {os.fspath(filepaths)!r}: {e.__cause__ or e}") from e
    paths = list(filepaths)
    if not paths:
        raise ValueError("imread: the list of files is empty")
    batch = as_batch([_read(p) for p in paths])
    try:
        return decoders.image(batch, **kwargs).evaluate()
    except ValueError as e:
        msg = str(e.__cause__ or e)  # eager mode re-raises with the original as the cause
        for i, p in enumerate(paths):  # name the file of the failing sample
            if f"sample {i}:" in msg:
                msg = f"{msg} (file {os.fspath(p)!r})"
                break
        raise ValueError(f"imread: {msg}") from e
