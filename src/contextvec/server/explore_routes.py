"""The explorer page at ``/`` (static files shipped in the package) and its endpoints, in the
OpenAPI schema with this server's bounds."""

# No ``from __future__ import annotations``: FastAPI reads a route's body model from its
# annotation, and the endpoints below name this server's models, made when they are installed.
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

from contextvec.server import explore_schemas as es
from contextvec.server.explore import Explorer
from contextvec.server.service import Call

STATIC = Path(__file__).resolve().parent / "static"
"""The page's files: ``index.html``, its script and style, and the charting library."""


def install_explorer(app: FastAPI, explorer: Explorer, responses: Callable[..., dict],
                     keyed: tuple[int, ...], work: tuple[int, ...]) -> None:
    """Add the page and the ``/v1/explore`` endpoints to ``app`` (``responses(*statuses)``: the
    OpenAPI error responses), their request models stating the server's bounds and the models'
    ids."""
    limits = explorer.service.settings
    requests = es.request_models([m.id for m in explorer.models], limits.max_sentences,
                                 limits.max_sentence_tokens)
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
    async def similarity(body: requests.similarity, request: Request) -> dict:
        """A word's occurrences in a few sentences: their cosine similarity per layer, and the
        closest and farthest pair per layer."""
        return await explorer.similarity(body, Call.of(request))

    @app.post("/v1/explore/nearest", response_model=es.NearestResponse,
              responses=responses(*keyed, *work))
    async def nearest(body: requests.nearest, request: Request) -> dict:
        """A word of a sentence: the corpus's occurrences of it nearest to it, per layer."""
        return await explorer.nearest(body, Call.of(request))

