"""What the endpoints do, apart from HTTP: check the sentences, wait for the engine, build the JSON.

The handlers take a validated request body and a :class:`Call` and return the response body's
bytes, so the same code answers whether :class:`~contextvec.server.hot.HotRoutes` or a FastAPI
route received the request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import anyio
import numpy as np
import orjson
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive

from contextvec.encoders.base import Encoder, SentenceVectors
from contextvec.encoders.registry import sentence_vectors
from contextvec.engine import Engine, QueueFull, ShuttingDown
from contextvec.engine.worker import WorkerThread
from contextvec.server import schemas
from contextvec.server.documents import embed_documentwise, embeddings_chunked
from contextvec.server.errors import APIError, validation_message
from contextvec.server.metrics import Metrics
from contextvec.server.settings import ServerSettings
from contextvec.server.vectors import (
    FieldError,
    LayerView,
    encode,
    has_lone_surrogate,
    layer_view,
    unit_length,
)
from contextvec.text.tokenize import Tokenizer, TokenizerName, as_tokenizer_name

logger = logging.getLogger("contextvec.server")

LARGE_OUTPUT = 200_000
"""Floats in a response above which it is built off the event loop."""

INLINE_CHARACTERS = 65_536
"""Characters of text above which a request's words are split off the event loop (below it,
the thread's hop costs more than splitting on whitespace)."""

SENTENCE_VECTORS = "sentence-vectors"
"""The engine kind of ``/v1/embeddings``' model's own sentence vectors: every request's pieces
run through the one ``SentenceVectors.embed_pieces``, so they share forward passes."""


@dataclass(frozen=True)
class Call:
    """What a handler needs of its request besides the body: its id (for logs) and the ASGI
    ``receive``, whose next message tells that the client went away."""

    request_id: str
    receive: Receive

    @classmethod
    def of(cls, request: Request) -> Call:
        """The call of a request a FastAPI route received."""
        return cls(request.scope.get("state", {}).get("request_id", "-"), request.receive)


class Service:
    """What the routes share: the encoder's engine, tokenizers, limits and metrics."""

    def __init__(self, encoder: Encoder, settings: ServerSettings,
                 is_stopping: Callable[[], bool], worker: WorkerThread | None = None) -> None:
        self.encoder, self.settings, self.is_stopping = encoder, settings, is_stopping
        self.metrics = Metrics(queue_depth=lambda: self.engine.depth)
        # Started by the app's lifespan, when the server starts serving.
        self.engine = Engine(encoder, settings.engine, worker=worker, on_batch=self.metrics.observe_batch,
                             start=False)
        self.tokenizers: dict[TokenizerName, Tokenizer] = {}
        self.started = int(time.time())
        # The model's own sentence vector unless the layers or pooling to use are given.
        own = settings.openai_layers is None and settings.openai_pool is None
        self.sentence_encoder: SentenceVectors | None = (
            sentence_vectors(encoder, settings.openai_sentence) if own else None)
        self.openai_view: LayerView | None = None
        if self.sentence_encoder is not None:
            self.openai_dim = self.sentence_encoder.output_dim
        else:
            layers = settings.openai_layers or encoder.sentence_layers.value
            if not isinstance(layers, str):
                try:
                    layers = schemas.ScalarMixSpec(weights=list(layers), gamma=settings.openai_gamma)
                except ValidationError as e:
                    message, _ = validation_message(e.errors(include_url=False))
                    raise ValueError(f"--openai-layers: {message}") from None
            try:
                self.openai_view = layer_view(layers, settings.openai_pool or "mean", encoder.num_layers)
            except FieldError as e:
                raise ValueError(f"--openai-layers: {str(e).split(': ', 1)[1]}") from None
            self.openai_dim = encoder.output_dim

    async def embed(self, body: schemas.EmbedRequest, call: Call) -> bytes:
        """``POST /v1/embed``: per-token vectors (or pooled ones), shaped like ``contextvec embed``."""
        try:
            view = layer_view(body.layers, body.pool, self.encoder.num_layers)
        except FieldError as e:
            raise APIError(422, str(e), e.field) from None
        if body.context != "sentence" or body.offsets or body.chunk_tokens or body.spans:
            return await embed_documentwise(self, body, call, view)
        sentences = await self.atokenize(body.sentences, body.tokenizer, "sentences")
        arrays = await self.vectors(call, sentences)

        def build() -> bytes:
            items = []
            for i, (tokens, array) in enumerate(zip(sentences, arrays, strict=True)):
                out = view.apply(array)
                items.append({"index": i, "tokens": tokens, "shape": list(out.shape),
                              "vectors": encode(out, body.encoding)})
            total = sum(len(s) for s in sentences)
            return orjson.dumps({"model": self.settings.model_name, "encoding": body.encoding,
                                 "embeddings": items,
                                 "usage": {"prompt_tokens": total, "total_tokens": total}})

        if sum(a.size for a in arrays) > LARGE_OUTPUT:
            return await anyio.to_thread.run_sync(build)
        return build()

    async def embeddings(self, body: schemas.EmbeddingsRequest, call: Call) -> bytes:
        """``POST /v1/embeddings`` (OpenAI-compatible): one pooled vector per input."""
        if body.dimensions is not None and body.dimensions != self.openai_dim:
            raise APIError(422, f"dimensions: this model gives {self.openai_dim} dimensions, "
                                f"not {body.dimensions}", "dimensions")
        if body.chunk_tokens is not None or body.spans is not None:
            return await embeddings_chunked(self, body, call)
        if body.context != "sentence":
            raise APIError(422, "context: document context is for late chunking (chunk_tokens or spans): "
                                "a text without chunks is one pooled vector", "context")
        texts = [body.input] if isinstance(body.input, str) else body.input
        sentences = await self.atokenize(texts, None, "input", self.settings.openai_max_inputs,
                                         "--openai-max-inputs")

        def name(i: int) -> str:
            return "input" if isinstance(body.input, str) else f"input[{i}]"

        for i, tokens in enumerate(sentences):
            if not tokens:  # OpenAI refuses an empty input too; there is nothing to embed
                raise APIError(400, f"{name(i)}: empty or blank text: every input needs at least "
                                    "one word", name(i))
        if self.sentence_encoder is not None:
            encoder = self.sentence_encoder
            rows = encoder.pieces(sentences)
            for i, row in enumerate(rows):
                if len(row) > encoder.max_pieces:
                    raise APIError(413, f"{name(i)}: {len(row)} word pieces with [CLS] and [SEP], "
                                        f"over this model's limit of {encoder.max_pieces} "
                                        "(a text is never cut: split it)", name(i))
            vectors = await self.vectors(call, rows, encoder.embed_pieces, SENTENCE_VECTORS)
            total = sum(len(row) - 2 for row in rows)
        else:
            view = self.openai_view
            vectors = [view.apply(a) for a in await self.vectors(call, sentences)]
            total = sum(len(s) for s in sentences)
        if self.settings.openai_normalize:
            vectors = [_unit(v, i) for i, v in enumerate(vectors)]
        data = [{"object": "embedding", "index": i,
                 "embedding": encode(v.astype(np.float32, copy=False), body.encoding_format)}
                for i, v in enumerate(vectors)]
        return orjson.dumps({"object": "list", "data": data, "model": self.settings.model_name,
                             "usage": {"prompt_tokens": total, "total_tokens": total}})

    async def atokenize(self, sentences: list[str | list[str]], tokenizer: str | None, field: str,
                        most: int | None = None, option: str = "--max-sentences") -> list[list[str]]:
        """:meth:`tokenize` off the event loop when it is long work (Moses, or a large text), so
        that other requests, ``/health`` included, are answered meanwhile."""
        # The schema admits only the line tokenizers' spellings: as the enum here, at the edge.
        name = as_tokenizer_name(tokenizer or self.settings.tokenizer, one_per_line=True)
        if name is TokenizerName.MOSES or sum(map(len, sentences)) > INLINE_CHARACTERS:
            return await anyio.to_thread.run_sync(self.tokenize, sentences, name, field, most, option)
        return self.tokenize(sentences, name, field, most, option)

    def tokenize(self, sentences: list[str | list[str]], name: TokenizerName, field: str,
                 most: int | None = None, option: str = "--max-sentences") -> list[list[str]]:
        """Token lists (strings split by ``name``, resolved by :meth:`atokenize`), checked
        against the per-request limits and for invalid text (422).

        More than ``most`` items (default ``--max-sentences``, named by ``option``) and a token
        list over ``--max-sentence-tokens`` break bounds the schema states: 422, as any body the
        schema refuses. A string over ``--max-sentence-tokens`` words (which no schema counts)
        is too large: 413.
        """
        limits = self.settings
        most = limits.max_sentences if most is None else most
        if len(sentences) > most:
            noun = "sentences" if field == "sentences" else "texts"
            raise APIError(422, f"{field}: {len(sentences)} {noun}, over the limit of "
                                f"{most} per request ({option})", field)
        out = []
        for i, sentence in enumerate(sentences):
            items = [sentence] if isinstance(sentence, str) else sentence
            if any(has_lone_surrogate(text) for text in items):
                raise APIError(422, f"{field}[{i}]: contains a lone surrogate (not valid Unicode)",
                               f"{field}[{i}]")
            tokens = sentence if not isinstance(sentence, str) else (
                sentence.split() if name is TokenizerName.WHITESPACE else self._tokenizer(name)(sentence)[0])
            if len(tokens) > limits.max_sentence_tokens:
                raise APIError(413 if isinstance(sentence, str) else 422,
                               f"{field}[{i}]: {len(tokens)} tokens, over the limit of "
                               f"{limits.max_sentence_tokens} per sentence (--max-sentence-tokens)",
                               f"{field}[{i}]")
            out.append(list(tokens))
        return out

    def _tokenizer(self, name: TokenizerName) -> Tokenizer:
        # Made once, on whichever thread asks first (two threads at once: both make one, one is kept).
        if name not in self.tokenizers:
            self.tokenizers.setdefault(name, Tokenizer(name))
        return self.tokenizers[name]

    async def vectors(self, call: Call, sentences: list[Sequence],
                      run: Callable[[list[Sequence]], list] | None = None, kind: Hashable = None,
                      field: str = "sentences") -> list:
        """Each sentence's (num_layers, tokens, dim) array (or what ``run`` makes of each item),
        through the engine, within the deadline; calls of the same ``kind`` share forward
        passes (see ``Engine.submit``). Items the model refuses are a 422 naming ``field``."""
        if self.is_stopping():
            raise APIError(503, "the server is shutting down")
        timeout = self.settings.request_timeout
        try:
            future = self.engine.submit(sentences, time.monotonic() + timeout, run, kind)
        except QueueFull:
            raise APIError(429, f"the queue is full ({self.settings.engine.max_queue} requests); retry later",
                           headers={"Retry-After": "1"}) from None
        except ShuttingDown:
            raise APIError(503, "the server is shutting down") from None
        result = await _wait(future, call, timeout, field)
        self.metrics.tokens.inc(sum(len(s) for s in sentences))
        return result


async def _wait(future: Future, call: Call, timeout: float, field: str) -> list:
    """The engine call's result; 504 past the deadline; the call is dropped (its future
    cancelled) if the client goes away."""
    gone = not future.done() and await _until_settled(future, call.receive, timeout)
    if future.done():
        try:
            return future.result()
        except (ValueError, TypeError, UnicodeError) as e:
            raise APIError(422, f"{field}: {e}", field) from None
        except Exception as e:
            logger.error("request %s: encoder failed", call.request_id, exc_info=e)
            raise APIError(500, f"internal error (request id {call.request_id})") from None
    future.cancel()
    if gone:
        raise APIError(499, "client closed the request")
    raise APIError(504, f"request not finished within {timeout:g} s (--request-timeout)")


async def _until_settled(future: Future, receive: Receive, timeout: float) -> bool:
    """Sleep until the worker settles ``future``, the client goes away (then True) or ``timeout``.

    One event-loop future woken by whichever comes first: lighter on the hot path than
    ``wrap_future`` + ``asyncio.wait``.
    """
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake(*_: object) -> None:
        if not woken.done():
            woken.set_result(None)

    def wake_from_worker(_: Future) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(wake)

    future.add_done_callback(wake_from_worker)
    gone = asyncio.ensure_future(_disconnected(receive))
    gone.add_done_callback(wake)
    timer = loop.call_later(timeout, wake)
    try:
        await woken
    finally:
        timer.cancel()
        gone.cancel()
    return gone.done() and not gone.cancelled() and not future.done()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _unit(vector: np.ndarray, index: int) -> np.ndarray:
    """``vector`` at unit length (--openai-normalize); one that has none is an error, never
    returned as it is."""
    unit = unit_length(vector)
    if unit is None:
        raise APIError(500, f"input[{index}]: the model's vector has no length to normalise "
                            "(--openai-normalize)", f"input[{index}]")
    return unit
