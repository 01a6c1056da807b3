"""A disk cache of a frozen encoder's layers for a dataset, so probes never rerun the encoder.

**Key.** A cache entry is named by a hash of the model identity
(:func:`~contextvec.encoders.fingerprint.model_identity`: the
encoder's class, its settings and config, its tokenizer if any, and every tensor of its
state dict), the data (:func:`data_identity`: the exact token lists, in order) and the storage
dtype; under document context (:class:`~contextvec.documents.settings.Context`), also the
context and where each document starts (:func:`document_identity`); a sentence-context key is
what it has always been. Anything that changes the vectors changes the key; a hit just opens the
file.

**Layout** of ``CACHE_DIR/<key>.h5`` (see :class:`FeatureFile`):

- ``layers``: ``(num_layers, total_tokens, dim)``, the sentences' ``(num_layers, n_tokens, dim)``
  arrays concatenated along the token axis in input order, so a probe reads one layer's token
  matrix in a single contiguous read; ``float32`` by default, ``float16`` to halve the disk
  and memory use (about 3 significant digits, plenty for probing).
- ``lengths``: ``(n_sentences,)`` int64 tokens per sentence; sentence i is
  ``layers[:, offsets[i]:offsets[i + 1]]``.
- attributes: ``model``, ``data``, ``dtype``, ``num_layers``, ``dim``, ``n_sentences``,
  ``n_tokens``, ``format_version`` and a free-text ``label``.

**Resumable and atomic.** Sentences are embedded in chunks; each finished chunk is written
atomically as a shard under ``CACHE_DIR/<key>.parts/``. An interrupted run keeps its shards and
the next call with the same model and data computes only the missing chunks. The shards are
then merged into ``<key>.h5`` by an atomic rename, so that file is complete or absent.

The cache directory is ``$CONTEXTVEC_CACHE`` if set, else ``~/.cache/contextvec/features``;
every function takes an explicit ``cache_dir`` too.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType

import h5py
import numpy as np
from tqdm import tqdm

from contextvec.choices import checked_choice, spellings
from contextvec.documents.settings import Context, as_context
from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.io.atomic import atomic_file, file_lock, output_target
from contextvec.io.shards import ShardDir

CACHE_ENV = "CONTEXTVEC_CACHE"
FORMAT_VERSION = 1


class FeatureDtype(StrEnum):
    """The dtype the cache stores layers in (``FeatureSettings.dtype``, ``--feature-dtype``):
    the spellings of ``embed --dtype``
    ([`VectorDtype`][contextvec.io.vector_storage.VectorDtype], whose members it takes too), of
    which the cache stores these two. Not bfloat16: the cache's readers map its layers as
    plain floats, and HDF5 has no bfloat16 type."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    """Half the disk and memory; the task models read it as float32."""


DTYPES = spellings(FeatureDtype)


@dataclass(frozen=True)
class FeatureSettings:
    """How frozen features are computed and kept: the cache's directory (None: the default,
    :func:`default_cache_dir`), its storage dtype; sentences per encoder batch (``batch_size``,
    at most ``max_tokens`` tokens; None: no limit) and per stored chunk (``chunk_sentences``:
    what an interrupted pass keeps)."""

    cache_dir: str | os.PathLike | None = None
    dtype: FeatureDtype = FeatureDtype.FLOAT32
    batch_size: int = 64
    max_tokens: int | None = 4096
    chunk_sentences: int = 1000

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", checked_choice(FeatureDtype, self.dtype, "feature dtype"))
        if self.batch_size < 1:
            raise ValueError(f"the encoder batch size must be >= 1, not {self.batch_size}")
        if self.chunk_sentences < 1:
            raise ValueError(f"chunk_sentences must be >= 1, not {self.chunk_sentences}")


def default_cache_dir() -> Path:
    """``$CONTEXTVEC_CACHE`` if set and not empty, else ``~/.cache/contextvec/features``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "contextvec" / "features"


def data_identity(sentences: Sequence[Sequence[str]]) -> str:
    """A sha256 hex digest of the token lists (JSON, so token boundaries are unambiguous)."""
    text = json.dumps([list(s) for s in sentences], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def document_runs(documents: Sequence[int], n_sentences: int) -> list[tuple[int, int]]:
    """``(first, stop)`` sentence ranges of each document, in order, from each sentence's document
    index (``Split.documents``); a ``ValueError`` unless there is one index per sentence and each
    document's sentences are consecutive."""
    if len(documents) != n_sentences:
        raise ValueError(f"{len(documents)} document indices for {n_sentences} sentences")
    runs: list[tuple[int, int]] = []
    seen: set[int] = set()
    for i, document in enumerate(documents):
        if runs and documents[runs[-1][0]] == document:
            runs[-1] = (runs[-1][0], i + 1)
            continue
        if document in seen:
            raise ValueError(f"sentence {i + 1}: document {document} resumes after another document "
                             "(a document's sentences must be consecutive)")
        seen.add(document)
        runs.append((i, i + 1))
    return runs


def document_identity(documents: Sequence[int]) -> str:
    """A sha256 hex digest of where documents start: the number of sentences of each, in order
    (the document indices themselves do not matter, only the boundaries)."""
    sizes = [stop - first for first, stop in document_runs(documents, len(documents))]
    return hashlib.sha256(json.dumps(sizes).encode()).hexdigest()


def cache_key(model_id: str, data_id: str, dtype: FeatureDtype | str = FeatureDtype.FLOAT32,
              context: Context | str = Context.SENTENCE, documents_id: str | None = None) -> str:
    """The file stem of a cache entry: a hash of format version, model, data and dtype, and under
    document context the context and ``documents_id`` (:func:`document_identity`; needed then,
    refused under sentence context, whose key is unchanged)."""
    dtype = checked_choice(FeatureDtype, dtype, "dtype").value
    context = as_context(context)
    fields = {"format": FORMAT_VERSION, "model": model_id, "data": data_id, "dtype": dtype}
    if (context is Context.DOCUMENT) != (documents_id is not None):
        raise ValueError("document context keys on the documents (documents_id), sentence context does not")
    if context is Context.DOCUMENT:
        fields.update({"context": context.value, "documents": documents_id})
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


@dataclass
class FeatureFile:
    """An open cache entry, the one reader of the cache's layout. Use as a context manager, or
    call :meth:`close`."""

    path: Path
    file: h5py.File

    @classmethod
    def open(cls, path: str | os.PathLike) -> FeatureFile:
        return cls(Path(path), h5py.File(path, "r"))

    @property
    def num_layers(self) -> int:
        return int(self.file.attrs["num_layers"])

    @property
    def dim(self) -> int:
        return int(self.file.attrs["dim"])

    @property
    def lengths(self) -> np.ndarray:
        return self.file["lengths"][()]

    @property
    def offsets(self) -> np.ndarray:
        """``(n_sentences + 1,)``: sentence i spans tokens ``offsets[i]:offsets[i + 1]``."""
        return np.concatenate([[0], np.cumsum(self.lengths)])

    @property
    def num_tokens(self) -> int:
        return int(self.file["layers"].shape[1])

    def __len__(self) -> int:
        return int(self.file["lengths"].shape[0])

    def layer(self, index: int) -> np.ndarray:
        """Layer ``index`` for every token: float32 ``(total_tokens, dim)``."""
        return self.file["layers"][index].astype(np.float32, copy=False)

    def all_layers(self) -> np.ndarray:
        """Every layer for every token: float32 ``(num_layers, total_tokens, dim)``."""
        return self.file["layers"][()].astype(np.float32, copy=False)

    def sentence(self, index: int) -> np.ndarray:
        """Sentence ``index``: float32 ``(num_layers, n_tokens, dim)``, as ``Encoder.embed``."""
        offsets = self.offsets
        return self.file["layers"][:, offsets[index]:offsets[index + 1]].astype(np.float32, copy=False)

    def stored_layers(self, first: int = 0) -> np.ndarray:
        """Layers ``first`` to the last for every token, in the stored dtype (float16 stays
        float16: half the memory): ``(num_layers - first, total_tokens, dim)``."""
        return self.file["layers"][first:]

    def blocks(self, max_tokens: int) -> Iterator[tuple[list[int], np.ndarray]]:
        """``(sentence indices, layers)`` of consecutive whole sentences of at most ``max_tokens``
        tokens (at least one sentence), every sentence once, in order: ``layers`` is float32
        ``(num_layers, tokens, dim)``, one contiguous read per layer."""
        offsets, layers, start = self.offsets, self.file["layers"], 0
        while start < len(self):
            end = max(start + 1, int(np.searchsorted(offsets, offsets[start] + max_tokens, "right")) - 1)
            yield list(range(start, end)), layers[:, offsets[start]:offsets[end]].astype(np.float32)
            start = end

    def mapped_layers(self) -> np.ndarray:
        """Every layer for every token in the stored dtype, ``(num_layers, total_tokens, dim)``:
        mapped from the file (read through the page cache on demand, it outlives :meth:`close`)
        when the dataset is contiguous, as the cache writes it; any other layout is read whole."""
        dataset = self.file["layers"]
        offset = dataset.id.get_offset()
        if offset is None:
            return dataset[()]
        return np.memmap(self.path, dataset.dtype, "r", offset, dataset.shape)

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> FeatureFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _write_shard(path: Path, arrays: list[np.ndarray], dtype: str, num_layers: int, dim: int) -> None:
    empty = np.zeros((num_layers, 0, dim), dtype)  # keeps concatenate valid for an empty chunk
    layers = np.concatenate([empty, *arrays], axis=1).astype(dtype, copy=False)
    with atomic_file(path) as stream, h5py.File(stream, "w") as f:  # a full disk: one error, no crash
        f.create_dataset("layers", data=layers)
        f.create_dataset("lengths", data=np.array([a.shape[1] for a in arrays], dtype=np.int64))


def _merge(parts: ShardDir, n_chunks: int, output: Path, lengths: np.ndarray, attrs: dict) -> None:
    """Copy the shards into one contiguous ``layers`` dataset; check each shard's lengths."""
    shape = (attrs["num_layers"], int(lengths.sum()), attrs["dim"])
    chunk = attrs["chunk_sentences"]
    with atomic_file(output) as stream, h5py.File(stream, "w") as out:
        layers = out.create_dataset("layers", shape=shape, dtype=attrs["dtype"])
        out.create_dataset("lengths", data=lengths)
        start = 0
        for number in range(n_chunks):
            expected = lengths[number * chunk:(number + 1) * chunk]
            path = parts.shard(number)
            with h5py.File(path, "r") as shard:
                if not np.array_equal(shard["lengths"][()], expected):
                    raise RuntimeError(f"{path} does not match the data; delete {parts.path}")
                n = int(expected.sum())
                for k in range(shape[0]):  # a layer at a time bounds the memory used
                    layers[k, start:start + n] = shard["layers"][k]
                start += n
        out.attrs.update({k: v for k, v in attrs.items() if k != "chunk_sentences"})


def cached_features(
    encoder: Encoder,
    sentences: Sequence[Sequence[str]],
    settings: FeatureSettings | None = None,
    *,
    progress: bool = True,
    label: str = "",
    model_id: str | None = None,
    context: Context | str = Context.SENTENCE,
    documents: Sequence[int] | None = None,
) -> Path:
    """The path of the cache entry holding ``encoder``'s layers for ``sentences``.

    Computes the missing chunks first (a hit does no work). ``label`` is stored for humans
    (e.g. the source file) and is not part of the key. ``model_id`` may pass a precomputed
    :func:`model_identity` to avoid rehashing the weights for every split. Under document
    ``context``, ``documents`` gives each sentence's document (``Split.documents``; a document's
    sentences consecutive) and each sentence's layers are ``encoder.embed_document``'s for its
    document; the entry's layout is the same.
    """
    settings = settings or FeatureSettings()
    context = as_context(context)
    # The dtype's plain spelling: what numpy, the manifest and the HDF5 attributes take.
    cache_dir, dtype, chunk_sentences = settings.cache_dir, settings.dtype.value, settings.chunk_sentences
    runs, identity = None, {}
    if context is Context.DOCUMENT:
        if documents is None:
            raise ValueError(f"{label or 'these sentences'}: no document boundaries, so no document context")
        runs = document_runs(documents, len(sentences))
        identity = {"context": context.value, "documents": document_identity(documents)}
    model_id = model_id or model_identity(encoder)
    data_id = data_identity(sentences)
    key = cache_key(model_id, data_id, dtype, context, identity.get("documents"))
    # a cache folder is shared (entries are locked one by one), so only its kind is checked here
    root = (default_cache_dir() if cache_dir is None
            else output_target(os.path.expanduser(cache_dir), directory=True))
    output = root / f"{key}.h5"
    if output.exists():
        return output
    root.mkdir(parents=True, exist_ok=True)
    # One process computes an entry; another that asks for it meanwhile (two commands sharing a
    # cache) waits, then finds it made. Unlocked, the second merged shards the first had removed.
    with file_lock(root / f".{key}.lock"):
        if output.exists():
            return output
        parts = ShardDir(root / f"{key}.parts", {
            "model": model_id, "data": data_id, "dtype": dtype, "chunk_sentences": chunk_sentences,
            **identity,
        }, free={"chunk_sentences"})
        parts.reuse_or_restart()  # resume with the chunking the shards were written with
        chunk = parts.manifest["chunk_sentences"]
        n = len(sentences)
        n_chunks = max(1, -(-n // chunk))
        done = parts.done(n_chunks)
        desc = f"features {label.split()[0]}" if label else "features"
        with tqdm(total=n, unit="sent", desc=desc, disable=not progress) as bar:
            bar.update(sum(len(sentences[i * chunk:(i + 1) * chunk]) for i in done))
            tokens = 0
            for number in range(n_chunks):
                if number in done:
                    continue
                batch = [list(s) for s in sentences[number * chunk:(number + 1) * chunk]]
                arrays: list[np.ndarray] = [np.empty(0)] * len(batch)
                # Each chunk from empty encoder caches: a token vector's rounding depends on the
                # tokens it was computed with, so a chunk's layers then never depend on what was
                # embedded before it (a resumed run, a saved task model's prediction).
                encoder.clear_caches()
                rows = (encoder.embed_batches(batch, settings.batch_size, settings.max_tokens) if runs is None
                        else _document_rows(encoder, sentences, runs, number * chunk, len(batch)))
                for row, array in rows:
                    arrays[row] = array
                    bar.update(1)
                tokens += sum(len(s) for s in batch)
                bar.set_postfix_str(f"{tokens / max(bar.format_dict['elapsed'], 1e-9):.0f} tok/s")
                _write_shard(parts.shard(number), arrays, dtype, encoder.num_layers, encoder.output_dim)
        lengths = np.array([len(s) for s in sentences], dtype=np.int64)
        attrs = {
            "model": model_id, "data": data_id, "dtype": dtype, "num_layers": encoder.num_layers,
            "dim": encoder.output_dim, "n_sentences": n, "n_tokens": int(lengths.sum()),
            "format_version": FORMAT_VERSION, "label": label, "chunk_sentences": chunk, **identity,
        }
        _merge(parts, n_chunks, output, lengths, attrs)
        parts.remove()
    return output


def _document_rows(encoder: Encoder, sentences: Sequence[Sequence[str]], runs: list[tuple[int, int]],
                   start: int, n: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(row, layers)`` of sentences ``start`` to ``start + n`` (rows from 0), each from its whole
    document: a document across the chunk's edge is read whole (its vectors depend on all of it)."""
    stop = start + n
    for first, end in runs:
        if end <= start or first >= stop:
            continue
        document = [list(s) for s in sentences[first:end]]
        for i, array in enumerate(encoder.embed_document(document), first):
            if start <= i < stop:
                yield i - start, array


def load_features(encoder: Encoder, sentences: Sequence[Sequence[str]],
                  settings: FeatureSettings | None = None, **kwargs) -> FeatureFile:
    """:func:`cached_features`, opened: a :class:`FeatureFile` (close it when done)."""
    return FeatureFile.open(cached_features(encoder, sentences, settings, **kwargs))
