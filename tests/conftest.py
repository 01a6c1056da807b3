"""Shared fixtures: the reference data in ../shared (never copied into the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REFERENCE = SHARED / "reference"


def reference_dir(name: str) -> Path:
    path = REFERENCE / name
    if not (path / "weights.hdf5").is_file():
        raise FileNotFoundError(f"reference fixture {path} is missing: tests need ../shared/data")
    return path


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.manual_seed(0)
    torch.set_num_threads(2)


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    return reference_dir("elmo-tiny")


@pytest.fixture(scope="session")
def small_dir() -> Path:
    return reference_dir("elmo-small")
