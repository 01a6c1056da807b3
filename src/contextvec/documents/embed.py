"""Embedding documents: a document's sentences in document or sentence context, their character
offsets, and late chunking, through one call."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from contextvec.api import load
from contextvec.documents.chunks import ChunkPooler, chunk_token_ranges, span_token_ranges
from contextvec.documents.settings import Context, DocumentSettings
from contextvec.encoders.base import Encoder
from contextvec.encoders.outputs import pool_tokens, select_layers
from contextvec.text.offsets import tokenize_with_offsets

Progress = Callable[[int, int], None]
"""Called as a document's sentences come out of the encoder, with (sentences, tokens) done."""

Document = str | Sequence[str] | Sequence[Sequence[str]]
"""A raw text (its lines are its sentences, split by the settings' tokenizer), the text's lines
as a list of strings (the same as ``"\\n".join(lines)``), or the sentences as token lists (no
character offsets then)."""


@dataclass(frozen=True)
class PreparedDocument:
    """A document as tokens, with each token's characters where the input was text."""

    sentences: list[list[str]]
    offsets: list[np.ndarray] | None
    """Per sentence ``(tokens, 2)`` int64 ``(start, end)`` into the document's text; None for
    token lists."""
    text_length: int | None

    @property
    def n_tokens(self) -> int:
        return sum(map(len, self.sentences))


@dataclass
class DocumentVectors:
    """One document's result (see :func:`embed_document`)."""

    tokens: list[list[str]]
    """Each sentence's tokens."""
    offsets: list[np.ndarray] | None
    """Each sentence's ``(tokens, 2)`` int64 character offsets ``(start, end)`` into the
    document's text (end exclusive); None where the document came as token lists."""
    vectors: list[np.ndarray] | None
    """Without chunks: each sentence's float32 vectors as ``Encoder.embed(layers, pool)`` shapes
    them. None with chunks."""
    chunks: np.ndarray | None = None
    """With chunks: ``(chunks, num_layers, dim)`` under ``layers="all"``, else ``(chunks, dim)``,
    float32, each chunk's tokens pooled."""
    chunk_tokens: np.ndarray | None = None
    """With chunks: ``(chunks, 2)`` int64, each chunk's ``[first, stop)`` token indices in
    document order (sentences concatenated)."""
    chunk_offsets: np.ndarray | None = None
    """With chunks, for text: ``(chunks, 2)`` int64 characters from the chunk's first token's
    start to its last token's end."""


def prepare_document(document: Document, settings: DocumentSettings) -> PreparedDocument:
    """Tokenize a document as :data:`Document` describes; a ``ValueError`` for anything else."""
    if isinstance(document, bytes):
        raise TypeError("a document is text (str), a list of lines or a list of token lists, not bytes")
    if isinstance(document, str):
        text = document
    else:
        items = list(document)
        if items and all(isinstance(item, str) for item in items):
            text = "\n".join(items)
        elif all(not isinstance(item, str | bytes) for item in items):
            sentences = [list(item) for item in items]
            bad = next((t for s in sentences for t in s if not isinstance(t, str)), None)
            if bad is not None:
                raise ValueError(f"a token list holds {type(bad).__name__} {bad!r}, not a string")
            return PreparedDocument(sentences, None, None)
        else:
            raise ValueError("a document is either lines (strings) or token lists, not a mix")
    tokenized = tokenize_with_offsets(text, settings.tokenizer)
    offsets = [np.asarray(o, dtype=np.int64).reshape(-1, 2) for o in tokenized.sentence_spans]
    return PreparedDocument([list(s) for s in tokenized.sentences], offsets, len(text))


def sentence_layers(encoder: Encoder, sentences: Sequence[Sequence[str]],
                    settings: DocumentSettings) -> Iterator[np.ndarray]:
    """Each sentence's float32 ``(num_layers, tokens, dim)``, in document order, in the settings'
    context. Sentence context runs groups of about ``pass_tokens`` tokens, batched by length
    within a group, so memory stays bounded there too."""
    if settings.context is Context.DOCUMENT:
        yield from encoder.embed_document(sentences, settings.pass_tokens)
        return
    for start, stop in _groups([len(s) for s in sentences], settings.pass_tokens):
        group = [sentences[i] for i in range(start, stop)]
        arrays: list[np.ndarray | None] = [None] * len(group)
        for index, array in encoder.embed_batches(group, settings.batch_size, settings.max_tokens):
            arrays[index] = array
        yield from arrays  # type: ignore[misc]


def _groups(lengths: Sequence[int], most: int) -> Iterator[tuple[int, int]]:
    """Consecutive ``[start, stop)`` runs of sentences holding at most ``most`` tokens (a longer
    sentence alone)."""
    start = 0
    while start < len(lengths):
        stop, held = start + 1, lengths[start]
        while stop < len(lengths) and held + lengths[stop] <= most:
            held += lengths[stop]
            stop += 1
        yield start, stop
        start = stop


def embed_prepared(encoder: Encoder, prepared: PreparedDocument, settings: DocumentSettings,
                   spans: Sequence[Sequence[int]] | None = None) -> DocumentVectors:
    """:func:`embed_document` on a document already tokenized."""
    ranges = _chunk_ranges(prepared, settings, spans)
    if ranges is None:
        vectors = [select_layers(layers, settings.layers) for layers in
                   sentence_layers(encoder, prepared.sentences, settings)]
        if settings.pool is not None:
            vectors = [pool_tokens(v, settings.pool) for v in vectors]
        return DocumentVectors(prepared.sentences, prepared.offsets, vectors)
    chunks = pool_chunks(encoder, prepared, settings, ranges)
    return DocumentVectors(prepared.sentences, prepared.offsets, None, chunks, ranges,
                           chunk_character_spans(prepared, ranges))


def pool_chunks(encoder: Encoder, prepared: PreparedDocument, settings: DocumentSettings,
                ranges: np.ndarray, progress: Progress | None = None) -> np.ndarray:
    """The document's token ranges ``(chunks, 2)`` pooled after its pass (late chunking):
    ``(chunks, ...)`` float32, a chunk's vector shaped as one pooled sentence's; ``progress``
    is told of each sentence as it is pooled."""
    pooler = ChunkPooler(ranges, settings.chunk_pool)
    for layers in sentence_layers(encoder, prepared.sentences, settings):
        pooler.add(select_layers(layers, settings.layers))
        if progress is not None:
            progress(1, layers.shape[-2])
    empty = select_layers(np.zeros((encoder.num_layers, 0, encoder.output_dim), np.float32), settings.layers)
    return pooler.result(empty.shape[:-2] + empty.shape[-1:])


def chunk_character_spans(prepared: PreparedDocument, ranges: np.ndarray) -> np.ndarray | None:
    """``(chunks, 2)`` int64: from each chunk's first token's start to its last token's end;
    None for a document given as token lists."""
    if prepared.offsets is None:
        return None
    if not len(ranges):
        return np.zeros((0, 2), dtype=np.int64)
    every = np.concatenate(prepared.offsets)
    return np.stack([every[ranges[:, 0], 0], every[ranges[:, 1] - 1, 1]], axis=1)


def embed_document(
    model: Encoder | str | os.PathLike | None,
    document: Document,
    settings: DocumentSettings | None = None,
    *,
    spans: Sequence[Sequence[int]] | None = None,
) -> DocumentVectors:
    """One document's vectors, and with ``spans`` or ``settings.chunk_tokens`` its chunks pooled
    after the whole document's pass (late chunking).

    Under ``context="document"`` every sentence's vectors depend on the document around it
    (``Encoder.embed_document``); under ``"sentence"`` they are ``Encoder.embed``'s. Memory is
    bounded by ``settings.pass_tokens`` plus what the result holds: with chunks, only the
    pooled chunks are kept, so a document of any length fits.

    Args:
        model: an encoder, or what [`contextvec.load`][contextvec.api.load] takes.
        document: a raw text, its lines, or its sentences as token lists (:data:`Document`).
        settings: context, layers, pooling, chunks, tokenizer (default: sentence context, all
            layers, token vectors, whitespace tokens).
        spans: ``(start, end)`` character offsets into the text (end exclusive) to pool, one
            chunk each; not with token lists, nor with ``chunk_tokens``.

    Returns:
        A :class:`DocumentVectors`.

    Raises:
        ValueError: a span outside the text, covering no token, or malformed; spans for token
            lists; both spans and ``chunk_tokens``.
        NotImplementedError: ``context="document"`` for a family without it.
    """
    settings = settings or DocumentSettings()
    encoder = model if isinstance(model, Encoder) else load(model)
    return embed_prepared(encoder, prepare_document(document, settings), settings, spans)


def embed_documents(
    model: Encoder | str | os.PathLike | None,
    documents: Iterable[Document],
    settings: DocumentSettings | None = None,
) -> Iterator[DocumentVectors]:
    """:func:`embed_document` for each document in turn (chunks by ``settings.chunk_tokens``);
    a document's result does not depend on the others. A bare string is refused (pass
    ``[text]`` for one document)."""
    if isinstance(documents, str | bytes):
        raise TypeError("documents must be a list of documents, not a single text; for one "
                        "document pass [text] or call embed_document")
    settings = settings or DocumentSettings()
    encoder = model if isinstance(model, Encoder) else load(model)
    for document in documents:
        yield embed_prepared(encoder, prepare_document(document, settings), settings)


def _chunk_ranges(prepared: PreparedDocument, settings: DocumentSettings,
                  spans: Sequence[Sequence[int]] | None) -> np.ndarray | None:
    if spans is not None and settings.chunk_tokens is not None:
        raise ValueError("give spans or chunk_tokens, not both")
    if spans is not None:
        if prepared.offsets is None:
            raise ValueError("spans are character offsets: give the document as text, not token lists")
        every = (np.concatenate(prepared.offsets) if prepared.offsets
                 else np.zeros((0, 2), dtype=np.int64))
        return span_token_ranges(spans, every[:, 0], every[:, 1], prepared.text_length or 0)
    if settings.chunk_tokens is not None:
        return chunk_token_ranges(prepared.n_tokens, settings.chunk_tokens)
    return None
