"""Embedding a whole text file into an HDF5 file laid out like allennlp's former ``elmo`` command.

Output: one float32 dataset per input line, keyed by the 0-based line index (or by the sentence
with ``sentence_keys``), shaped ``(layers, tokens, dim)`` for ``"all"`` and ``(tokens, dim)``
for ``"top"`` / ``"average"``; plus ``sentence_to_index``, a one-element string dataset holding
``json.dumps({sentence: "index"})``, unless ``forget_sentences`` or ``sentence_keys``.

How it stays safe on big inputs: the input is streamed in chunks of lines, each chunk sorted
into length batches; every finished chunk is written atomically as a shard in
``OUTPUT.parts/``. A run that stops for any reason keeps its finished shards, and ``resume``
computes only the missing ones (after checking that the input, model and settings are the same).
The shards are finally merged into ``OUTPUT`` by an atomic rename, so ``OUTPUT`` is either
complete or absent. Peak disk use is about twice the output size during the merge.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import torch
from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.io.atomic import atomic_path
from contextvec.io.text_lines import check_scan, read_lines, scan_lines

LAYER_MODES = ("all", "top", "average")
MANIFEST = "manifest.json"
SENTENCE_TO_INDEX = "sentence_to_index"


class ResumeError(RuntimeError):
    """A leftover partial run that cannot be continued as asked."""


def model_fingerprint(encoder: Encoder) -> str:
    """A hash of the encoder's type and weights: resuming with other weights is refused."""
    digest = hashlib.sha256(type(encoder).__name__.encode())
    for name, tensor in sorted(encoder.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _select(layers: np.ndarray, mode: str) -> np.ndarray:
    if mode == "all":
        return layers
    if mode == "top":
        return np.ascontiguousarray(layers[-1])
    return layers.mean(axis=0, dtype=np.float32)


def _chunks(path: Path, size: int) -> Iterator[list[tuple[int, str]]]:
    chunk: list[tuple[int, str]] = []
    for item in read_lines(path):
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _shard_path(parts: Path, number: int) -> Path:
    return parts / f"shard-{number:06d}.h5"


def _prepare_parts(parts: Path, manifest: dict, resume: bool) -> dict:
    """Create the shard directory, or check that a leftover one belongs to this very run."""
    if parts.exists():
        if not resume:
            raise ResumeError(
                f"{parts} holds an unfinished run: pass --resume to finish it, or delete it"
            )
        try:
            old = json.loads((parts / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ResumeError(f"{parts}: no readable {MANIFEST}; delete the directory") from e
        differ = sorted(k for k in manifest if k != "chunk_lines" and old.get(k) != manifest[k])
        if differ:
            raise ResumeError(
                f"cannot resume {parts}: {', '.join(differ)} changed since the interrupted run"
            )
        return old
    parts.mkdir(parents=True)
    with atomic_path(parts / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


def embed_file(
    encoder: Encoder,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    layers: str = "all",
    batch_size: int = 64,
    max_tokens: int | None = 4096,
    sentence_keys: bool = False,
    forget_sentences: bool = False,
    resume: bool = False,
    empty_lines: str = "error",
    invalid_utf8: str = "error",
    chunk_lines: int = 2048,
    progress: bool = True,
) -> Path:
    """Embed every line of ``input_path`` into ``output_path``; returns the output path.

    ``empty_lines``: ``"error"`` (default) refuses empty or whitespace-only lines, naming them;
    ``"keep"`` writes a zero-token dataset for each. ``invalid_utf8``: ``"error"`` (default)
    names the offending lines; ``"replace"`` decodes them with U+FFFD. Both checks run on a
    first streaming pass, before any compute.
    """
    if layers not in LAYER_MODES:
        raise ValueError(f"layers must be one of {LAYER_MODES}, not {layers!r}")
    input_path, output_path = Path(input_path), Path(output_path)
    parts = output_path.with_name(output_path.name + ".parts")
    if resume and not parts.exists() and output_path.exists():
        return output_path  # finished earlier: nothing left to do
    if resume:  # a merge killed half-way leaves its temporary output behind
        for stale in output_path.parent.glob(f".{output_path.name}.tmp*"):
            stale.unlink()
    scan = scan_lines(input_path, sentence_keys)
    check_scan(scan, empty_lines, invalid_utf8)
    manifest = _prepare_parts(parts, {
        "input_sha256": scan.sha256,
        "n_lines": scan.n_lines,
        "model": model_fingerprint(encoder),
        "layers": layers,
        "sentence_keys": sentence_keys,
        "invalid_utf8": invalid_utf8,
        "chunk_lines": chunk_lines,
    }, resume)
    chunk_lines = manifest["chunk_lines"]
    n_chunks = -(-scan.n_lines // chunk_lines)
    done = {n for n in range(n_chunks) if _shard_path(parts, n).exists()}

    with tqdm(total=scan.n_lines, unit="sent", disable=not progress, desc="embed") as bar:
        bar.update(sum(min(chunk_lines, scan.n_lines - n * chunk_lines) for n in done))
        for number, chunk in enumerate(_chunks(input_path, chunk_lines)):
            if number in done:
                continue
            keys = [text.strip() if sentence_keys else str(i) for i, text in chunk]
            results: dict[int, np.ndarray] = {}
            tokens = [text.split() for _, text in chunk]
            for row, array in encoder.embed_batches(tokens, batch_size, max_tokens):
                results[row] = _select(array, layers)
                bar.update(1)
            with atomic_path(_shard_path(parts, number)) as tmp, h5py.File(tmp, "w") as f:
                for row in range(len(chunk)):
                    f.create_dataset(keys[row], data=results[row])

    _merge(parts, n_chunks, output_path, input_path,
           index=not (forget_sentences or sentence_keys), progress=progress)
    shutil.rmtree(parts)
    return output_path


def _merge(
    parts: Path, n_chunks: int, output: Path, input_path: Path, index: bool, progress: bool
) -> None:
    with atomic_path(output) as tmp, h5py.File(tmp, "w") as out:
        for number in tqdm(range(n_chunks), desc="merge", unit="shard", disable=not progress):
            with h5py.File(_shard_path(parts, number), "r") as shard:
                for name in shard:
                    shard.copy(shard[name], out, name=name)
        if index:
            sentence_to_index = {text.strip(): str(i) for i, text in read_lines(input_path)}
            data = out.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype())
            data[0] = json.dumps(sentence_to_index)
