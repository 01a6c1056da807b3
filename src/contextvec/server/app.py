"""The ASGI app: the FastAPI routes (and OpenAPI schema) behind the hot path and the middleware."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response
from starlette.types import ASGIApp

from contextvec.encoders.base import Encoder
from contextvec.server import schemas
from contextvec.server.errors import APIError, install_error_handlers
from contextvec.server.hot import HotRoute, HotRoutes
from contextvec.server.middleware import ApiKey, BodyReader, RequestContext
from contextvec.server.service import Call, Service
from contextvec.server.settings import ServerSettings
from contextvec.server.worker import WorkerThread

ERRORS = {status: {"model": schemas.ErrorResponse} for status in (401, 413, 422, 429, 503, 504)}
HEALTH = b'{"status":"ok"}'


def _json(payload: bytes) -> Response:
    return Response(payload, media_type="application/json")


def _call(request: Request) -> Call:
    return Call(request.scope.get("state", {}).get("request_id", "-"), request.receive)


async def _health(body: None, call: Call) -> bytes:
    return HEALTH


def create_app(encoder: Encoder, settings: ServerSettings | None = None,
               is_stopping: Callable[[], bool] = lambda: False, grace_period: float = 30.0,
               worker: WorkerThread | None = None) -> ASGIApp:
    """The ASGI app serving ``encoder``: ``/v1/embed``, ``/v1/embeddings``, ``/v1/models``,
    ``/health``, ``/ready``, ``/metrics`` and ``/openapi.json``.

    Args:
        encoder: the model to serve, loaded, in eval mode and warmed by the caller.
        settings: limits and defaults (None: the defaults of ``ServerSettings``).
        is_stopping: tells whether the server is shutting down (``/ready`` then answers 503).
        grace_period: seconds the batcher gets on shutdown to finish the queued work.
        worker: the thread that loaded and warmed ``encoder``, to run the forward passes on
            too (a new one if None; ``contextvec.server.worker`` says why one thread).

    Returns:
        The ASGI application; its lifespan starts and stops the batcher, so run it under an
        ASGI server with lifespan on (uvicorn's default).
    """
    settings = settings or ServerSettings()
    service = Service(encoder, settings, is_stopping, worker)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        service.batcher.start()
        yield
        await anyio.to_thread.run_sync(service.batcher.close, grace_period)

    app = FastAPI(title="contextvec", version="1", lifespan=lifespan,
                  description="Contextual word vectors (ELMo, CoVe, BERT) of every layer.")
    app.state.service = service
    install_error_handlers(app)

    # POST /v1/embed, /v1/embeddings and GET /health are answered by HotRoutes before FastAPI
    # sees them; these routes declare them in the OpenAPI schema, and call the same handlers.
    @app.post("/v1/embed", response_model=schemas.EmbedResponse, responses=ERRORS)
    async def embed(body: schemas.EmbedRequest, request: Request) -> Response:
        """Per-token vectors of each sentence (or pooled ones), shaped like ``contextvec embed``."""
        return _json(await service.embed(body, _call(request)))

    @app.post("/v1/embeddings", response_model=schemas.EmbeddingsResponse, responses=ERRORS)
    async def embeddings(body: schemas.EmbeddingsRequest, request: Request) -> Response:
        """OpenAI-compatible: one pooled vector per input, with the server's layer mix."""
        return _json(await service.embeddings(body, _call(request)))

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

    hot = HotRoutes(app, {("POST", "/v1/embed"): HotRoute(schemas.EmbedRequest, service.embed),
                          ("POST", "/v1/embeddings"): HotRoute(schemas.EmbeddingsRequest, service.embeddings),
                          ("GET", "/health"): HotRoute(None, _health)})
    wrapped = BodyReader(hot, settings.max_body_bytes)
    if settings.api_key:
        wrapped = ApiKey(wrapped, settings.api_key)
    return RequestContext(wrapped, service.metrics)

