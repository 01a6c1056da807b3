"""``contextvec embed --documents``: a file of documents -> HDF5, one group per document.

Layout (``d`` is the document's index in the file, ``s`` a sentence's index in its document)::

    d/text            the document's text: its lines joined by "\\n" (offsets point into it)
    d/s               sentence s's vectors, as ``contextvec embed`` writes a line's
    d/offsets/s       (tokens, 2) int64 (start, end) character offsets of its tokens in d/text
    d/chunks          with --chunk-tokens: (chunks, ...) pooled vectors (no d/s then)
    d/chunk_tokens    (chunks, 2) int64 [first, stop) token indices in document order
    d/chunk_offsets   (chunks, 2) int64 characters of d/text each chunk covers

The root's attributes record the settings and the model. Sentences are written as the encoder
yields them, so a long document needs memory for one pass, not for its vectors. The file is
written beside its name and renamed into place: it is complete or absent.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import h5py
from tqdm import tqdm

from contextvec.api import ModelSpec
from contextvec.documents.chunks import chunk_token_ranges
from contextvec.documents.embed import (
    Progress,
    chunk_character_spans,
    pool_chunks,
    prepare_document,
    sentence_layers,
)
from contextvec.documents.settings import DocumentSettings
from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.outputs import pool_tokens, select_layers
from contextvec.io.atomic import atomic_path, output_lock, output_target, refuse_to_replace
from contextvec.io.documents import iter_documents
from contextvec.io.text_lines import InvalidUtf8, input_file
from contextvec.io.vector_storage import VectorStorage
from contextvec.progress import SentenceBar


def embed_documents_to_hdf5(
    model: Encoder | ModelSpec,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    settings: DocumentSettings | None = None,
    storage: VectorStorage | None = None,
    *,
    invalid_utf8: InvalidUtf8 | str = InvalidUtf8.ERROR,
    overwrite: bool = False,
    progress: bool = True,
) -> Path:
    """Embed every document of ``input_path`` (documents separated by blank lines or CoNLL's
    ``-DOCSTART-`` lines; each line a sentence, split by ``settings.tokenizer``) into
    ``output_path`` in the layout of this module's docstring; returns the output's path.

    ``model`` is a loaded encoder, or a [`ModelSpec`][contextvec.api.ModelSpec] loaded once the
    input has been checked. Documents are read one at a time (``invalid_utf8``: ``"error"``
    refuses a file with invalid UTF-8 before any compute, ``"replace"`` decodes it with
    U+FFFD). An existing output is refused unless ``overwrite``; a symbolic link is written
    through; the output is held for the whole call (a second run on it is refused). With
    ``progress``, a bar on standard error counts the sentences embedded, with the documents
    finished and the tokens per second beside it, as ``embed_to_hdf5``'s bar counts sentences.
    """
    settings = settings or DocumentSettings()
    storage = storage or VectorStorage()
    input_path, given = input_file(input_path), output_path
    output_path = output_target(output_path)
    with output_lock(output_path):
        refuse_to_replace(output_path, given, inputs=[input_path], replace=overwrite)
        documents = iter_documents(input_path, invalid_utf8)
        first = next(documents)  # the file's checks run before the model loads
        encoder = model.load() if isinstance(model, ModelSpec) else model
        with (atomic_path(output_path) as tmp, h5py.File(tmp, "w") as out,
              tqdm(unit="sent", desc="embed", disable=not progress) as bar):
            out.attrs.update({"format": "contextvec-documents", "model": model_identity(encoder),
                              "context": settings.context.value, "layers": settings.layers.value,
                              "pool": settings.pool.value if settings.pool else "",
                              "chunk_tokens": settings.chunk_tokens or 0,
                              "tokenizer": settings.tokenizer.value})
            count = 0
            tick = SentenceBar(bar, items="doc") if progress else None
            for count, lines in enumerate(itertools.chain([first], documents), start=1):
                _write_document(out.create_group(str(count - 1)), encoder, lines, settings, storage, tick)
                if tick is not None:
                    tick.item_done()
            out.attrs["documents"] = count
    return output_path


def _write_document(group: h5py.Group, encoder: Encoder, lines: list[str], settings: DocumentSettings,
                    storage: VectorStorage, progress: Progress | None) -> None:
    prepared = prepare_document(lines, settings)
    group.create_dataset("text", data="\n".join(lines), dtype=h5py.string_dtype())
    group.attrs["sentences"] = len(prepared.sentences)
    offsets = group.create_group("offsets")
    for s, pairs in enumerate(prepared.offsets or []):
        offsets.create_dataset(str(s), data=pairs)
    if settings.chunk_tokens is None:
        for s, array in enumerate(sentence_layers(encoder, prepared.sentences, settings)):
            vectors = select_layers(array, settings.layers)
            if settings.pool is not None:
                vectors = pool_tokens(vectors, settings.pool)
            storage.create(group, str(s), storage.encode(vectors))
            if progress is not None:
                progress(1, array.shape[-2])
        return
    ranges = chunk_token_ranges(prepared.n_tokens, settings.chunk_tokens)
    chunks = pool_chunks(encoder, prepared, settings, ranges, progress)
    storage.create(group, "chunks", storage.encode(chunks))
    group.create_dataset("chunk_tokens", data=ranges)
    group.create_dataset("chunk_offsets", data=chunk_character_spans(prepared, ranges))
