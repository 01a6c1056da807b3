"""Shared helpers for the tests: reference fixtures and small HDF5 utilities.

The reference fixtures are read in place from ``/work/shared/data/reference`` (relative to the
repository) and never copied into the repository; broken variants are written to ``tmp_path``.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import h5py
import numpy as np

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "reference"


def reference_dir(name: str) -> Path:
    """Folder of one reference model (``elmo-tiny``, ``elmo-small``); fails if absent."""
    path = REFERENCE / name
    if not (path / "options.json").is_file():
        raise FileNotFoundError(2, f"reference fixture {path} is missing: tests need ../shared/data",
                                str(path))
    return path


@functools.cache
def reference_sentences(name: str) -> tuple[tuple[str, ...], ...]:
    """The whitespace-tokenized sentences of a reference folder, in file order."""
    text = (reference_dir(name) / "sentences.txt").read_text(encoding="utf-8")
    return tuple(tuple(line.split()) for line in text.splitlines())


@functools.cache
def reference_expected(name: str) -> dict[str, np.ndarray]:
    """All arrays of a reference ``expected.npz`` (no pickles)."""
    with np.load(reference_dir(name) / "expected.npz", allow_pickle=False) as npz:
        return {key: npz[key] for key in npz.files}


def read_h5(path: str | Path) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file, by full name."""
    out: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as f:

        def visit(name: str, obj: object) -> None:
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]

        f.visititems(visit)
    return out


def write_h5(path: str | Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` as datasets of a fresh HDF5 file."""
    path = Path(path)
    with h5py.File(path, "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array)
    return path


def tiny_copy(tmp_path: Path, arrays: dict[str, np.ndarray] | None = None) -> Path:
    """A bilm-tf folder in ``tmp_path`` with elmo-tiny's options and ``arrays`` as weights.

    Without ``arrays`` the weight file is a byte copy of elmo-tiny's.
    """
    src = reference_dir("elmo-tiny")
    out = tmp_path / "tiny"
    out.mkdir(exist_ok=True)
    shutil.copyfile(src / "options.json", out / "options.json")
    if arrays is None:
        shutil.copyfile(src / "weights.hdf5", out / "weights.hdf5")
    else:
        write_h5(out / "weights.hdf5", arrays)
    return out
