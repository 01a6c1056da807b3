"""The ASGI app: the FastAPI routes (and OpenAPI schema) behind the hot path and the middleware."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp

from contextvec.encoders.base import Encoder
from contextvec.engine.worker import WorkerThread
from contextvec.server import schemas
from contextvec.server.errors import APIError, install_error_handlers
from contextvec.server.explore import Explorer, ExploreSettings
from contextvec.server.explore_routes import install_explorer
from contextvec.server.hot import HotRoute, HotRoutes, declare
from contextvec.server.middleware import OPEN_PATHS, ApiKey, BodyReader, HostCheck, RequestContext
from contextvec.server.service import Call, Service
from contextvec.server.settings import LOOPBACK_HOSTS, ServerSettings

if TYPE_CHECKING:  # /v1/answer's module needs the tasks extra: imported only with a task model
    from contextvec.server.answer import ServedTask

HEALTH = b'{"status":"ok"}'

WHY = {400: "a blank text", 401: "missing or wrong API key (only with --api-key)",
       408: "the body did not arrive within --request-timeout",
       413: "over a size limit no schema states (body bytes, the words of a text)",
       415: "a body sent without Content-Type: application/json",
       422: "a body that does not fit the schema (its limits included) or the model",
       429: "the queue is full: retry later (Retry-After)",
       500: "internal error (logged with the request id)",
       503: "shutting down", 504: "not finished within --request-timeout"}
"""Why each error status is answered; its body is always :class:`schemas.ErrorResponse`."""

WORK = (408, 413, 415, 422, 429, 500, 503, 504)
"""What a request that runs the model can be answered besides 200."""


def errors(*statuses: int) -> dict[int | str, dict]:
    """OpenAPI responses for ``statuses``: OpenAI's error body, with why each is answered."""
    return {status: {"model": schemas.ErrorResponse, "description": WHY[status]} for status in statuses}


async def _health(body: None, call: Call) -> bytes:
    return HEALTH


def create_app(encoder: Encoder, settings: ServerSettings | None = None,
               is_stopping: Callable[[], bool] = lambda: False, grace_period: float = 30.0,
               worker: WorkerThread | None = None, explore: ExploreSettings | None = None,
               compare: Sequence[tuple[str, Encoder]] = (), task: ServedTask | None = None) -> ASGIApp:
    """The ASGI app serving ``encoder``: ``/v1/embed``, ``/v1/embeddings``, ``/v1/models``,
    ``/health``, ``/ready``, ``/metrics`` and ``/openapi.json``; with ``explore``, the explorer
    page at ``/`` and its ``/v1/explore`` endpoints too; with ``task``, ``/v1/answer``.

    Args:
        encoder: the model to serve, loaded, in eval mode and warmed by the caller.
        settings: limits and defaults (None: the defaults of ``ServerSettings``).
        is_stopping: tells whether the server is shutting down (``/ready`` then answers 503).
        grace_period: seconds the engine gets on shutdown to finish the queued work.
        worker: the thread that loaded and warmed ``encoder``, to run the forward passes on
            too (a new one if None; ``contextvec.engine.worker`` says why one thread).
        explore: the explorer's corpus and reports (None: no page, no explorer endpoints).
            Its corpus is embedded here, by every model, before the app is returned.
        compare: ``(id, encoder)`` of other models the explorer shows beside ``encoder``
            (loaded and warmed on ``worker`` by the caller).
        task: a question-answering model ``/v1/answer`` answers with (loaded and warmed on
            ``worker`` by the caller; its questions run there too, through the engine). None:
            ``/v1/answer`` answers 404.

    Returns:
        The ASGI application; its lifespan starts and stops the engine, so run it under an
        ASGI server with lifespan on (uvicorn's default).
    """
    settings = settings or ServerSettings()
    worker = worker or WorkerThread()
    service = Service(encoder, settings, is_stopping, worker)
    explorer = None if explore is None else Explorer.prepare(
        service, [(settings.model_name, encoder), *compare], explore, worker)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        service.engine.start()
        yield
        await anyio.to_thread.run_sync(service.engine.close, grace_period)

    app = FastAPI(title="contextvec", version="1", lifespan=lifespan,
                  description="Contextual word vectors (ELMo, CoVe, BERT) of every layer.")
    app.state.service = service
    install_error_handlers(app)

    # POST /v1/embed, /v1/embeddings, /v1/answer and GET /health are answered by HotRoutes
    # before FastAPI sees them; each is declared once, for both (hot.declare).
    keyed = (401,) if settings.api_key else ()
    hot_routes: dict[tuple[str, str], HotRoute] = {}
    requests = schemas.request_models(
        max_sentences=settings.max_sentences, max_sentence_tokens=settings.max_sentence_tokens,
        num_layers=encoder.num_layers, openai_max_inputs=settings.openai_max_inputs,
        openai_dim=service.openai_dim, max_context_chars=settings.max_context_chars)
    declare(app, hot_routes, "POST", "/v1/embed", HotRoute(requests.embed, service.embed), "embed",
            "Per-token vectors of each sentence (or pooled ones), shaped like ``contextvec embed``.",
            response_model=schemas.EmbedResponse, responses=errors(*keyed, *WORK))
    declare(app, hot_routes, "POST", "/v1/embeddings",
            HotRoute(requests.embeddings, service.embeddings), "embeddings",
            "OpenAI-compatible: one pooled vector per input, with the server's layer mix.",
            response_model=schemas.EmbeddingsResponse, responses=errors(400, *keyed, *WORK))

    @app.get("/v1/models", response_model=schemas.ModelList, responses=errors(*keyed))
    async def models() -> dict:
        """The one model this server serves."""
        return {"object": "list", "data": [{
            "id": settings.model_name, "object": "model", "created": service.started,
            "owned_by": "contextvec", "num_layers": encoder.num_layers, "dim": encoder.output_dim}]}

    declare(app, hot_routes, "GET", "/health", HotRoute(None, _health), "health",
            "Liveness: the process answers (no API key needed).", response_model=schemas.Health)

    @app.get("/ready", response_model=schemas.Ready, responses=errors(*keyed, 503))
    async def ready() -> dict:
        """Readiness: the model is loaded and warmed and the server is not shutting down."""
        if is_stopping() or not service.engine.accepting:
            raise APIError(503, "not ready: shutting down")
        return {"status": "ready", "model": settings.model_name}

    @app.get("/metrics", response_class=PlainTextResponse, responses={
        200: {"description": "Prometheus text exposition format",
              "content": {"text/plain": {"schema": {"type": "string"}}}}, **errors(*keyed)})
    async def metrics() -> Response:
        """Prometheus text format (not JSON)."""
        return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    if task is not None:
        from contextvec.server.answer import Answerer

        answerer = Answerer(task, service)
        declare(app, hot_routes, "POST", "/v1/answer", HotRoute(requests.answer, answerer.answer),
                "answer", "The question-answering model's answers: spans of the context "
                "(``context[start:end]``),\nbest first, with their scores.",
                response_model=schemas.AnswerResponse, responses=errors(400, *keyed, *WORK))
    else:
        @app.post("/v1/answer", include_in_schema=False)
        async def no_answer() -> Response:
            raise APIError(404, "no question-answering model: start the server with --task-model DIR "
                                "(a model saved by train-task squad --save-model)")

    if explorer is not None:
        install_explorer(app, explorer, errors, keyed, WORK)
    app.openapi = lambda: _openapi(app, settings)
    hot = HotRoutes(app, hot_routes)
    wrapped = BodyReader(hot, settings.max_body_bytes, settings.request_timeout)
    if settings.api_key:
        wrapped = ApiKey(wrapped, settings.api_key)
    if settings.cors_origins:  # before the key: a browser's preflight carries none
        wrapped = CORSMiddleware(wrapped, allow_origins=list(settings.cors_origins),
                                 allow_methods=["GET", "POST"],
                                 allow_headers=["Authorization", "Content-Type"],
                                 expose_headers=["X-Request-ID", "Retry-After"])
    wrapped = HostCheck(wrapped, list(dict.fromkeys((*LOOPBACK_HOSTS, *settings.allowed_hosts))))
    return RequestContext(wrapped, service.metrics)


def _openapi(app: FastAPI, settings: ServerSettings) -> dict:
    """FastAPI's schema (the request models state this server's bounds: ``schemas.request_models``),
    with every error answered as JSON and, with an API key, the bearer scheme on every guarded path."""
    if app.openapi_schema is None:
        schema = FastAPI.openapi(app)
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
        for operations in schema["paths"].values():
            for operation in operations.values():
                for status, response in operation["responses"].items():
                    if int(status) >= 400:  # JSON, whatever the route's own media type (/metrics)
                        response["content"] = error
        if settings.api_key:
            schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            for path, operations in schema["paths"].items():
                for operation in operations.values():
                    if path not in OPEN_PATHS:
                        operation["security"] = [{"bearer": []}]
        app.openapi_schema = schema
    return app.openapi_schema
