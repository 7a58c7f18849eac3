"""Fixtures (real photographs) and the path to the shared test helpers."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib

skdata = pytest.importorskip("skimage.data")


@pytest.fixture(scope="session")
def photos() -> list[np.ndarray]:
    """Real RGB photographs shipped with scikit-image (different sizes)."""
    return [skdata.astronaut(), skdata.chelsea(), skdata.coffee()]


@pytest.fixture(scope="session")
def gray_photo() -> np.ndarray:
    return skdata.camera()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
