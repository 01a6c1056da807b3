"""The explorer page at ``/`` (static files shipped in the package) and its endpoints, in the
OpenAPI schema with this server's bounds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

from contextvec.server import explore_schemas as es
from contextvec.server.explore import Explorer
from contextvec.server.service import Call
from contextvec.server.settings import ServerSettings

STATIC = Path(__file__).resolve().parent / "static"
"""The page's files: ``index.html``, its script and style, and the charting library."""


def install_explorer(app: FastAPI, explorer: Explorer, responses: Callable[..., dict],
                     keyed: tuple[int, ...], work: tuple[int, ...]) -> None:
    """Add the page and the ``/v1/explore`` endpoints to ``app`` (``responses(*statuses)``: the
    OpenAPI error responses)."""
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/v1/explore", response_model=es.ExploreInfo, responses=responses(*keyed))
    async def explore() -> dict:
        """The explorer's models (with their layers), corpus and reports."""
        return explorer.info()

    @app.post("/v1/explore/similarity", response_model=es.SimilarityResponse,
              responses=responses(*keyed, *work))
    async def similarity(body: es.SimilarityRequest, request: Request) -> dict:
        """A word's occurrences in a few sentences: their cosine similarity per layer, and the
        closest and farthest pair per layer."""
        return await explorer.similarity(body, Call.of(request))

    @app.post("/v1/explore/nearest", response_model=es.NearestResponse,
              responses=responses(*keyed, *work))
    async def nearest(body: es.NearestRequest, request: Request) -> dict:
        """A word of a sentence: the corpus's occurrences of it nearest to it, per layer."""
        return await explorer.nearest(body, Call.of(request))


def bound_schema(schema: dict, explorer: Explorer, settings: ServerSettings) -> None:
    """The explorer's request bounds in ``schema``: the model ids, and the server's limits."""
    models = schema["components"]["schemas"]
    ids = [m.id for m in explorer.models]
    for name in ("SimilarityRequest", "NearestRequest"):
        properties = models[name]["properties"]
        text = next(b for b in properties["model"]["anyOf"] if b.get("type") == "string")
        text["enum"] = ids
    sentences = models["SimilarityRequest"]["properties"]["sentences"]
    sentences["maxItems"] = settings.max_sentences
    sentences["items"]["anyOf"][1]["maxItems"] = settings.max_sentence_tokens
    tokens = next(b for b in models["NearestRequest"]["properties"]["sentence"]["anyOf"]
                  if b.get("type") == "array")
    tokens["maxItems"] = settings.max_sentence_tokens
    position = models["NearestRequest"]["properties"]["position"]
    position["maximum"] = settings.max_sentence_tokens - 1
