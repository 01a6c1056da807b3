"""``POST /v1/embed``'s document fields (``context="document"``, ``offsets``, and late chunking:
``chunk_tokens``, ``spans``) and ``POST /v1/embeddings``' late chunking extension, through the
same engine and the documents room's functions.

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

import anyio
import numpy as np
import orjson

from contextvec.documents.chunks import ChunkPooler, chunk_token_ranges, span_token_ranges
from contextvec.encoders.base import Encoder
from contextvec.server import schemas
from contextvec.server.errors import APIError
from contextvec.server.vectors import LayerView, encode, unit_length
from contextvec.text.offsets import align_tokens, tokenize_with_offsets
from contextvec.text.tokenize import as_tokenizer_name

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
    shape: tuple[int, ...] = ()
    for array in arrays:
        out = selected.apply(array)
        shape = out.shape[:-2] + out.shape[-1:]
        pooler.add(out)
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


async def embeddings_chunked(service, body: schemas.EmbeddingsRequest, call) -> bytes:
    """``/v1/embeddings`` with late chunking (``chunk_tokens`` or ``spans``): each text is a
    document, its lines its sentences (split by the server's ``--tokenizer``, with offsets), read
    in the request's ``context``; each chunk becomes one item, with its text's ``index``, its
    ``chunk`` number and its characters ``start``/``end``. The layers and pooling are the other
    items' (``--openai-layers``/``--openai-pool``; a model's own sentence vectors pool its
    ``sentence_layers`` by mean here, as chunks are made of token vectors)."""
    texts = [body.input] if isinstance(body.input, str) else body.input
    settings = service.settings
    if len(texts) > settings.openai_max_inputs:
        raise APIError(422, f"input: {len(texts)} texts, over the limit of {settings.openai_max_inputs} "
                            "per request (--openai-max-inputs)", "input")
    if body.spans is not None and body.chunk_tokens is not None:
        raise APIError(422, "spans, chunk_tokens: give one of them, not both", "spans")
    if body.spans is not None and len(body.spans) != len(texts):
        raise APIError(422, f"spans: {len(body.spans)} lists for {len(texts)} texts (one per text)", "spans")
    tokenizer = as_tokenizer_name(settings.tokenizer)
    tokenized = await anyio.to_thread.run_sync(
        lambda: [tokenize_with_offsets(text, tokenizer) for text in texts])
    documents = [[list(s) for s in t.sentences] for t in tokenized]
    for i, document in enumerate(documents):
        longest = max(map(len, document), default=0)
        if longest > settings.max_sentence_tokens:
            raise APIError(413, f"input[{i}]: a line of {longest} tokens, over the limit of "
                                f"{settings.max_sentence_tokens} per sentence (--max-sentence-tokens)",
                           f"input[{i}]")
    ranges = []
    for i, (text, found) in enumerate(zip(texts, tokenized, strict=True)):
        every = np.asarray(found.spans, dtype=np.int64).reshape(-1, 2)
        if body.spans is None:
            ranges.append(chunk_token_ranges(len(every), body.chunk_tokens))
            continue
        try:
            ranges.append(span_token_ranges(body.spans[i], every[:, 0], every[:, 1], len(text)))
        except ValueError as e:
            raise APIError(422, f"spans[{i}]: {str(e).split(': ', 1)[1]}", "spans") from None
    if body.context == DOCUMENT:
        layers = await service.vectors(call, [DocumentItem(d) for d in documents],
                                       partial(_documents, service.encoder), DOCUMENT, "context")
    else:
        flat = await service.vectors(call, [s for d in documents for s in d], field="input")
        layers, at = [], 0
        for document in documents:
            layers.append(flat[at:at + len(document)])
            at += len(document)
    view = service.openai_view or LayerView(mode=service.encoder.sentence_layers, pool=None)
    selected = dataclasses.replace(view, pool=None)
    data = []
    for i, (arrays, chunks, found) in enumerate(zip(layers, ranges, tokenized, strict=True)):
        pooler = ChunkPooler(chunks, view.pool or "mean")
        for array in arrays:
            pooler.add(selected.apply(array))
        vectors = pooler.result((service.encoder.output_dim,))
        for k, ((lo, hi), vector) in enumerate(zip(chunks.tolist(), vectors, strict=True)):
            if settings.openai_normalize:
                vector = unit_length(vector)
                if vector is None:
                    raise APIError(500, f"input[{i}]: chunk {k} has no length to normalise "
                                        "(--openai-normalize)", f"input[{i}]")
            data.append({"object": "embedding", "index": i, "chunk": k, "start": found.spans[lo][0],
                         "end": found.spans[hi - 1][1], "embedding": encode(vector, body.encoding_format)})
    if body.dimensions is not None and body.dimensions != service.encoder.output_dim:
        raise APIError(422, f"dimensions: chunks have {service.encoder.output_dim} dimensions, not "
                            f"{body.dimensions}", "dimensions")
    total = sum(len(s) for d in documents for s in d)
    return orjson.dumps({"object": "list", "data": data, "model": settings.model_name,
                         "usage": {"prompt_tokens": total, "total_tokens": total}})
