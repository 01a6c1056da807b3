"""``POST /v1/embed``'s document fields: ``context="document"``, ``offsets``, and late chunking
(``chunk_tokens``, ``spans``), through the same engine and the documents room's functions.

Under ``context="document"`` the request's sentences are one document: it runs on the engine's
worker thread as one item (``Encoder.embed_document``), its tokens counted against
``--max-batch-tokens`` as any sentence's. Spans are character offsets into the request's text:
its string sentences joined by a newline, so sentence ``i`` starts one character after sentence
``i - 1`` ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import orjson

from contextvec.documents.chunks import ChunkPooler, chunk_token_ranges, span_token_ranges
from contextvec.encoders.base import Encoder
from contextvec.server import schemas
from contextvec.server.errors import APIError
from contextvec.server.vectors import LayerView, encode
from contextvec.text.offsets import align_tokens

DOCUMENT = "document"
"""The engine kind of a document's pass (documents of concurrent requests share a call)."""


@dataclass(frozen=True)
class DocumentItem:
    """A request's sentences as one engine item; it counts its tokens against the budget."""

    sentences: list[list[str]]

    def __len__(self) -> int:
        return sum(map(len, self.sentences))


def _documents(encoder: Encoder, items: Sequence[DocumentItem]) -> list[list[np.ndarray]]:
    """Each document's sentences' layers (on the worker thread)."""
    try:
        return [list(encoder.embed_document(item.sentences)) for item in items]
    except NotImplementedError as e:  # a family without document context: the request's choice
        raise ValueError(str(e)) from None


async def embed_documentwise(service, body: schemas.EmbedRequest, call, view: LayerView) -> bytes:
    """``/v1/embed`` with any of the document fields (see the module docstring)."""
    if body.spans is not None and body.chunk_tokens is not None:
        raise APIError(422, "spans, chunk_tokens: give one of them, not both", "spans")
    sentences = await service.atokenize(body.sentences, body.tokenizer, "sentences")
    strings = [s if isinstance(s, str) else None for s in body.sentences]
    offsets = [None if text is None else align_tokens(text, tokens)
               for text, tokens in zip(strings, sentences, strict=True)]
    if body.context == DOCUMENT:
        arrays = (await service.vectors(call, [DocumentItem(sentences)], partial(_documents, service.encoder),
                                        DOCUMENT, "context"))[0]
    else:
        arrays = await service.vectors(call, sentences)
    total = sum(map(len, sentences))
    usage = {"prompt_tokens": total, "total_tokens": total}
    name = service.settings.model_name
    if body.spans is None and body.chunk_tokens is None:
        items = []
        for i, (tokens, array) in enumerate(zip(sentences, arrays, strict=True)):
            out = view.apply(array)
            item = {"index": i, "tokens": tokens, "shape": list(out.shape),
                    "vectors": encode(out, body.encoding)}
            if body.offsets:
                item["offsets"] = None if offsets[i] is None else [list(span) for span in offsets[i]]
            items.append(item)
        return orjson.dumps({"model": name, "encoding": body.encoding, "embeddings": items, "usage": usage})
    starts = _text_offsets(strings, offsets)
    if body.spans is not None:
        if starts is None:
            raise APIError(422, "spans: character offsets need every sentence as a string, not tokens",
                           "spans")
        text_length = sum(map(len, strings)) + len(strings) - 1
        try:
            ranges = span_token_ranges(body.spans, starts[:, 0], starts[:, 1], text_length)
        except ValueError as e:
            raise APIError(422, str(e), "spans") from None
    else:
        ranges = chunk_token_ranges(total, body.chunk_tokens)
    selected = dataclasses.replace(view, pool=None)
    pooler = ChunkPooler(ranges, view.pool or "mean")
    first, shape = 0, ()
    for array in arrays:
        out = selected.apply(array)
        shape = out.shape[:-2] + out.shape[-1:]
        pooler.add(first, out)
        first += out.shape[-2]
    pooled = pooler.result(shape)
    chunks = []
    for i, ((lo, hi), vector) in enumerate(zip(ranges.tolist(), pooled, strict=True)):
        chunk = {"index": i, "first": lo, "stop": hi, "shape": list(vector.shape),
                 "vector": encode(vector, body.encoding)}
        if starts is not None:
            chunk["start"], chunk["end"] = int(starts[lo, 0]), int(starts[hi - 1, 1])
        chunks.append(chunk)
    return orjson.dumps({"model": name, "encoding": body.encoding, "embeddings": [], "chunks": chunks,
                         "usage": usage})


def _text_offsets(strings: list[str | None], offsets: list) -> np.ndarray | None:
    """Every token's ``(start, end)`` in the request's text (strings joined by a newline),
    ``(tokens, 2)`` int64; None where a sentence came as tokens."""
    if any(text is None for text in strings):
        return None
    rows, at = [], 0
    for text, spans in zip(strings, offsets, strict=True):
        rows.extend((start + at, end + at) for start, end in spans)
        at += len(text) + 1
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2)
