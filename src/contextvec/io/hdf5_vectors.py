"""The HDF5 files of ``contextvec embed``: how vectors are stored (dtype, filters), its shards,
their merge, and the one reader that decodes every stored form.

Layout (allennlp's former ``elmo`` command): one dataset per input line, keyed by the 0-based
line index (or by the sentence with ``sentence_keys``), shaped ``(layers, tokens, dim)`` for
``"all"`` and ``(tokens, dim)`` for ``"top"`` / ``"average"`` (with ``pool``, the token axis is
pooled away); plus ``sentence_to_index``, a one-element string dataset holding
``json.dumps({sentence: "index"})``, unless ``forget_sentences`` or ``sentence_keys``. The file's
``contextvec_run`` attribute records what made it (input hash, model fingerprint, settings, the
storage unless float32 without compression), so a resume can check it.

Storage (dtype, compression): :mod:`contextvec.io.vector_storage`; :func:`read_vectors` reads
every stored form back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
from tqdm import tqdm

from contextvec.io.atomic import WriteFailed, atomic_file
from contextvec.io.shards import ResumeError, ShardDir
from contextvec.io.text_lines import read_lines
from contextvec.io.vector_storage import DTYPE_ATTRIBUTE, VectorDtype, VectorStorage, bfloat16_values

SENTENCE_TO_INDEX = "sentence_to_index"
RUN_ATTRIBUTE = "contextvec_run"
MERGE_BAR_DELAY_S = 2.0
"""The merge's progress bar appears only once the merge has run this long."""


def read_vectors(dataset: h5py.Dataset) -> np.ndarray:
    """A stored dataset as numbers: float32 and float16 as stored, bfloat16 (uint16 bits with
    the ``contextvec_dtype`` attribute) as float32 holding exactly the stored values. Shape as
    stored: ``(layers, tokens, dim)``, ``(tokens, dim)``, or pooled without the token axis."""
    data = dataset[()]
    kind = dataset.attrs.get(DTYPE_ATTRIBUTE)
    if kind is None:
        return data
    if kind != VectorDtype.BFLOAT16 or data.dtype != np.uint16:
        raise ValueError(f"{dataset.file.filename}: dataset {dataset.name} declares dtype {kind!r} over "
                         f"{data.dtype}; contextvec writes only bfloat16 over uint16")
    return bfloat16_values(data)


@dataclass(frozen=True)
class Shard:
    """One shard's datasets, already in their stored form, and how to write them."""

    items: list[tuple[str, np.ndarray]]
    storage: VectorStorage

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[tuple[str, np.ndarray]]:
        return iter(self.items)


def write_shard(path: Path, shard: Shard) -> None:
    """One shard, written atomically and flushed to the disk: complete under its name or absent.
    A disk that refuses the write raises :class:`~contextvec.io.atomic.WriteFailed` naming
    ``path`` (HDF5 writes through a Python file: on a path of its own it crashes the process)."""
    with atomic_file(path) as stream, h5py.File(stream, "w") as f:
        for key, stored in shard:
            shard.storage.create(f, key, stored)


def shard_problem(path: Path, datasets: int) -> str | None:
    """Why the shard at ``path`` cannot be used (it does not open, or holds other than
    ``datasets`` datasets: torn by a crash the disk did not survive), or None."""
    try:
        with h5py.File(path, "r") as f:
            held = len(f)
    except OSError as e:
        return f"it cannot be read ({str(e).splitlines()[0]})"
    return None if held == datasets else f"it holds {held} datasets, not {datasets}"


def whole_shards(parts: ShardDir, n_chunks: int, lines_of: Callable[[int], int],
                 notice: Callable[[str], None]) -> set[int]:
    """The finished shards of ``0..n_chunks-1`` that open and hold their chunk's datasets
    (``lines_of(number)``); any other is removed and named to ``notice``, to be computed again."""
    done = set()
    for number in sorted(parts.done(n_chunks)):
        problem = shard_problem(parts.shard(number), lines_of(number))
        if problem is None:
            done.add(number)
        else:
            parts.shard(number).unlink()
            notice(f"{parts.shard(number)} is damaged: {problem}; computing its "
                   f"{lines_of(number):,} lines again")
    return done


def kept(error: WriteFailed, chunks: str, parts: ShardDir, need: str = "") -> WriteFailed:
    """``error`` saying which finished chunks are kept and how to go on."""
    return WriteFailed(error.errno, f"{error.strerror}; {chunks} are kept in {parts.path}: free some "
                                    f"space{need}, then rerun with --resume")


def check_finished(output: Path, parts: ShardDir) -> None:
    """A complete output may be reused by ``resume`` only if the same run made it: else
    :class:`ResumeError`, naming what differs (the run is recorded in ``contextvec_run``)."""
    try:
        with h5py.File(output, "r") as f:
            recorded = f.attrs.get(RUN_ATTRIBUTE)
    except OSError as e:
        raise ResumeError(f"{output} exists but is not a readable HDF5 file ({e}); "
                          "pass --overwrite to replace it") from e
    if recorded is None:
        raise ResumeError(f"{output} exists and does not record how it was made; "
                          "pass --overwrite to replace it")
    differ = parts.explain(json.loads(recorded))
    if differ:
        raise ResumeError(f"{output} was made by another run: {differ}; pass --overwrite to replace it")


def merge_shards(
    parts: ShardDir, n_chunks: int, output: Path, input_path: str | os.PathLike, index: bool, progress: bool
) -> None:
    """Shards ``0..n_chunks-1`` -> ``output`` (atomically, flushed to the disk), with
    ``sentence_to_index`` if ``index`` and the run's manifest as the ``contextvec_run`` attribute.
    Datasets are copied as stored (filters and attributes included: nothing is compressed
    again). Its progress bar shows only on a merge longer than :data:`MERGE_BAR_DELAY_S`. A
    shard that cannot be read is named (``OSError``); a disk that refuses the output raises
    :class:`~contextvec.io.atomic.WriteFailed` naming it."""
    with atomic_file(output) as stream, h5py.File(stream, "w") as out:
        for number in tqdm(range(n_chunks), desc="merge", unit="shard", disable=not progress,
                           delay=MERGE_BAR_DELAY_S):
            path = parts.shard(number)
            try:
                shard = h5py.File(path, "r")
            except OSError as e:
                raise OSError(f"{path} cannot be read ({str(e).splitlines()[0]}); rerun with "
                              "--resume to compute it again") from None
            with shard:
                for name in shard:
                    shard.copy(shard[name], out, name=name)
        if index:
            sentence_to_index = {text.strip(): str(i) for i, text in read_lines(input_path)}
            data = out.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype())
            data[0] = json.dumps(sentence_to_index)
        out.attrs[RUN_ATTRIBUTE] = json.dumps(parts.manifest, sort_keys=True)
