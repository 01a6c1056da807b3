"""Shared helpers for the tests: reference fixtures and small HDF5 utilities.

The reference fixtures are read in place from ``../shared/data/reference`` (beside the
repository); broken variants are written to ``tmp_path``. Without ../shared, elmo-tiny's model
(options, weights, sentences) is rebuilt from ``tests/data/elmo-tiny``, with an excerpt of its
allennlp outputs as ``expected.npz``: every sentence's character ids, and the layers and mix of
some of them (:func:`expected_rows`), so the tests compare the sentences present.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import h5py
import numpy as np

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "reference"
COMMITTED = Path(__file__).resolve().parent / "data"
# Marks a rebuilt folder, so that a test reading a file absent there is skipped, not failed.
REBUILT_PREFIX = "contextvec-shared-excerpt-"


@functools.cache
def rebuilt_reference(name: str) -> Path | None:
    """``name``'s model folder rebuilt from ``tests/data/<name>``, or None where none is committed.

    The weights are kept there as float16, which holds every value of the reference file exactly,
    and are written back as the float32 HDF5 datasets the bilm-tf layout has; a committed
    ``expected-excerpt.npz`` becomes the folder's ``expected.npz``.
    """
    source = COMMITTED / name
    if not (source / "weights-float16.npz").is_file():
        return None
    out = Path(tempfile.mkdtemp(prefix=REBUILT_PREFIX)) / name
    atexit.register(shutil.rmtree, out.parent, ignore_errors=True)
    out.mkdir()
    for file in ("options.json", "sentences.txt"):
        shutil.copyfile(source / file, out / file)
    if (source / "expected-excerpt.npz").is_file():
        shutil.copyfile(source / "expected-excerpt.npz", out / "expected.npz")
    with np.load(source / "weights-float16.npz", allow_pickle=False) as npz:
        write_h5(out / "weights.hdf5", {key: npz[key].astype(np.float32) for key in npz.files})
    return out


def reference_dir(name: str) -> Path:
    """Folder of one reference model (``elmo-tiny``, ``elmo-small``); fails if absent."""
    path = REFERENCE / name
    if (path / "options.json").is_file():
        return path
    rebuilt = None if REFERENCE.parent.is_dir() else rebuilt_reference(name)
    if rebuilt is None:
        raise FileNotFoundError(2, f"reference fixture {path} is missing: tests need ../shared/data",
                                str(path))
    return rebuilt


@functools.cache
def reference_sentences(name: str) -> tuple[tuple[str, ...], ...]:
    """The whitespace-tokenized sentences of a reference folder, in file order."""
    text = (reference_dir(name) / "sentences.txt").read_text(encoding="utf-8")
    return tuple(tuple(line.split()) for line in text.splitlines())


@functools.cache
def reference_expected(name: str) -> dict[str, np.ndarray]:
    """All arrays of a reference ``expected.npz`` (no pickles)."""
    path = reference_dir(name) / "expected.npz"
    if not path.is_file():
        shared = REFERENCE / name / "expected.npz"
        raise FileNotFoundError(2, f"{shared} is missing: tests need ../shared/data", str(shared))
    with np.load(path, allow_pickle=False) as npz:
        return {key: npz[key] for key in npz.files}


def expected_rows(expected: Iterable[str]) -> list[int]:
    """The sentence indices whose allennlp layers and mix ``expected`` (an ``expected.npz``, or its
    keys) holds: all of them from ../shared, the excerpt's on a clone alone. Each sentence's
    outputs were computed from the zero LSTM state (reference README), so they are the same
    whichever sentences share its batch."""
    rows = sorted(int(key.removeprefix("activations_")) for key in expected if key.startswith("activations_"))
    assert rows, "expected.npz holds no sentence's layers"
    return rows


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
