"""The ASGI app: routes, request checks and the wait for the batcher (never on the event loop)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager

import anyio
import numpy as np
import orjson
from fastapi import FastAPI, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response
from starlette.types import ASGIApp

from contextvec.encoders.base import Encoder
from contextvec.server import schemas
from contextvec.server.batcher import Batcher, Job, QueueFull, ShuttingDown
from contextvec.server.errors import APIError, install_error_handlers
from contextvec.server.metrics import Metrics
from contextvec.server.middleware import ApiKey, BodyReader, RequestContext
from contextvec.server.settings import ServerSettings
from contextvec.server.vectors import FieldError, LayerView, encode, has_lone_surrogate, layer_view
from contextvec.text.tokenize import Tokenizer

logger = logging.getLogger("contextvec.server")

ERRORS = {status: {"model": schemas.ErrorResponse} for status in (401, 413, 422, 429, 503, 504)}
LARGE_OUTPUT = 200_000
"""Floats in a response above which it is built off the event loop."""


class Service:
    """What the routes share: the encoder's batcher, tokenizers, limits and metrics."""

    def __init__(self, encoder: Encoder, settings: ServerSettings,
                 is_stopping: Callable[[], bool]) -> None:
        self.encoder, self.settings, self.is_stopping = encoder, settings, is_stopping
        self.metrics = Metrics(queue_depth=lambda: self.batcher.depth)
        self.batcher = Batcher(encoder, settings.max_batch_tokens, settings.max_wait_ms / 1000,
                               settings.max_queue, settings.batching, self.metrics.observe_batch)
        self.tokenizers: dict[str, Tokenizer] = {}
        self.started = int(time.time())
        layers = settings.openai_layers
        if not isinstance(layers, str):
            layers = schemas.ScalarMixSpec(weights=list(layers), gamma=settings.openai_gamma)
        self.openai_view = layer_view(layers, settings.openai_pool, encoder.num_layers,
                                      field="--openai-layers")

    def tokenize(self, sentences: list[str | list[str]], tokenizer: str | None,
                 field: str) -> list[list[str]]:
        """Token lists, checked against the per-request limits (413) and for invalid text (422)."""
        limits = self.settings
        if len(sentences) > limits.max_sentences:
            raise APIError(413, f"{field}: {len(sentences)} sentences, over the limit of "
                                f"{limits.max_sentences} per request (--max-sentences)", field)
        name = tokenizer or limits.tokenizer
        out = []
        for i, sentence in enumerate(sentences):
            items = [sentence] if isinstance(sentence, str) else sentence
            if any(has_lone_surrogate(text) for text in items):
                raise APIError(422, f"{field}[{i}]: contains a lone surrogate (not valid Unicode)",
                               f"{field}[{i}]")
            tokens = sentence if not isinstance(sentence, str) else (
                sentence.split() if name == "whitespace" else self._tokenizer(name)(sentence)[0])
            if len(tokens) > limits.max_sentence_tokens:
                raise APIError(413, f"{field}[{i}]: {len(tokens)} tokens, over the limit of "
                                    f"{limits.max_sentence_tokens} per sentence (--max-sentence-tokens)",
                               f"{field}[{i}]")
            out.append(list(tokens))
        return out

    def _tokenizer(self, name: str) -> Tokenizer:
        if name not in self.tokenizers:
            self.tokenizers[name] = Tokenizer(name)
        return self.tokenizers[name]

    async def vectors(self, request: Request, sentences: list[list[str]]) -> list[np.ndarray]:
        """Each sentence's (num_layers, tokens, dim) array, through the batcher, within the deadline."""
        if self.is_stopping():
            raise APIError(503, "the server is shutting down")
        timeout = self.settings.request_timeout
        try:
            job = self.batcher.submit(sentences, time.monotonic() + timeout)
        except QueueFull as e:
            raise APIError(429, f"{e}; retry later", headers={"Retry-After": "1"}) from None
        except ShuttingDown as e:
            raise APIError(503, str(e)) from None
        result = await _wait(job, request, timeout)
        self.metrics.tokens.inc(sum(len(s) for s in sentences))
        return result


async def _wait(job: Job, request: Request, timeout: float) -> list[np.ndarray]:
    """The job's result; 504 past the deadline; the job is dropped if the client goes away."""
    future = asyncio.wrap_future(job.future)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({future, gone}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if future in done:
        try:
            return future.result()
        except (ValueError, TypeError, UnicodeError) as e:
            raise APIError(422, f"sentences: {e}", "sentences") from None
        except Exception as e:
            request_id = request.scope.get("state", {}).get("request_id", "-")
            logger.error("request %s: encoder failed", request_id, exc_info=e)
            raise APIError(500, f"internal error (request id {request_id})") from None
    job.cancel()
    future.cancel()
    if gone in done:
        raise APIError(499, "client closed the request")
    raise APIError(504, f"request not finished within {timeout:g} s (--request-timeout)")


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _json(payload: dict) -> Response:
    return Response(orjson.dumps(payload), media_type="application/json")


async def _off_loop_if_large(build: Callable[[], dict], floats: int) -> Response:
    if floats > LARGE_OUTPUT:
        return _json(await anyio.to_thread.run_sync(build))
    return _json(build())


def create_app(encoder: Encoder, settings: ServerSettings | None = None,
               is_stopping: Callable[[], bool] = lambda: False, grace_period: float = 30.0) -> ASGIApp:
    """The ASGI app serving ``encoder`` (loaded, eval mode, warmed by the caller).

    ``is_stopping`` tells whether the server is shutting down (``/ready`` then answers 503);
    on shutdown the batcher gets ``grace_period`` seconds to finish the queued work.
    """
    settings = settings or ServerSettings()
    service = Service(encoder, settings, is_stopping)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        service.batcher.start()
        yield
        await anyio.to_thread.run_sync(service.batcher.close, grace_period)

    app = FastAPI(title="contextvec", version="1", lifespan=lifespan,
                  description="Contextual word vectors (ELMo, CoVe, BERT) of every layer.")
    app.state.service = service
    install_error_handlers(app)

    @app.post("/v1/embed", response_model=schemas.EmbedResponse, responses=ERRORS)
    async def embed(body: schemas.EmbedRequest, request: Request) -> Response:
        """Per-token vectors of each sentence (or pooled ones), shaped like ``contextvec embed``."""
        try:
            view = layer_view(body.layers, body.pool, encoder.num_layers)
        except FieldError as e:
            raise APIError(422, str(e), e.field) from None
        sentences = service.tokenize(body.sentences, body.tokenizer, "sentences")
        arrays = await service.vectors(request, sentences)

        def build() -> dict:
            items = []
            for i, (tokens, array) in enumerate(zip(sentences, arrays, strict=True)):
                out = view.apply(array)
                items.append({"index": i, "tokens": tokens, "shape": list(out.shape),
                              "vectors": encode(out, body.encoding)})
            total = sum(len(s) for s in sentences)
            return {"model": settings.model_name, "encoding": body.encoding, "embeddings": items,
                    "usage": {"prompt_tokens": total, "total_tokens": total}}

        return await _off_loop_if_large(build, sum(a.size for a in arrays))

    @app.post("/v1/embeddings", response_model=schemas.EmbeddingsResponse, responses=ERRORS)
    async def embeddings(body: schemas.EmbeddingsRequest, request: Request) -> Response:
        """OpenAI-compatible: one pooled vector per input, with the server's layer mix."""
        if body.dimensions is not None and body.dimensions != encoder.output_dim:
            raise APIError(422, f"dimensions: this model gives {encoder.output_dim} dimensions, "
                                f"not {body.dimensions}", "dimensions")
        texts = [body.input] if isinstance(body.input, str) else body.input
        sentences = service.tokenize(texts, None, "input")
        arrays = await service.vectors(request, sentences)
        data = [{"object": "embedding", "index": i,
                 "embedding": encode(_pooled(service.openai_view, a, settings.openai_normalize),
                                     body.encoding_format)}
                for i, a in enumerate(arrays)]
        total = sum(len(s) for s in sentences)
        return _json({"object": "list", "data": data, "model": settings.model_name,
                      "usage": {"prompt_tokens": total, "total_tokens": total}})

    @app.get("/v1/models", response_model=schemas.ModelList)
    async def models() -> dict:
        """The one model this server serves."""
        return {"object": "list", "data": [{
            "id": settings.model_name, "object": "model", "created": service.started,
            "owned_by": "contextvec", "num_layers": encoder.num_layers, "dim": encoder.output_dim}]}

    @app.get("/health")
    async def health() -> dict:
        """Liveness: the process answers (no API key needed)."""
        return {"status": "ok"}

    @app.get("/ready", responses={503: {"model": schemas.ErrorResponse}})
    async def ready() -> dict:
        """Readiness: the model is loaded and warmed and the server is not shutting down."""
        if is_stopping() or not service.batcher.accepting:
            raise APIError(503, "not ready: shutting down")
        return {"status": "ready", "model": settings.model_name}

    @app.get("/metrics")
    async def metrics() -> Response:
        """Prometheus text format."""
        return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    wrapped = BodyReader(app, settings.max_body_bytes)
    if settings.api_key:
        wrapped = ApiKey(wrapped, settings.api_key)
    return RequestContext(wrapped, service.metrics)


def _pooled(view: LayerView, layers: np.ndarray, normalize: bool) -> np.ndarray:
    vector = view.apply(layers)
    if normalize:
        norm = float(np.linalg.norm(vector))
        vector = vector / norm if norm > 0 else vector
    return vector.astype(np.float32, copy=False)
