"""HotRoutes answers the hot endpoints itself; FastAPI's routes for them (the OpenAPI schema's)
call the same handlers: both give the same bytes. In process, on plain ASGI calls."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch
from helpers_asgi import ask

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("pybase64", reason="the server extra is not installed")

import contextvec  # noqa: E402
from contextvec.server.app import create_app  # noqa: E402
from contextvec.server.hot import HotRoutes  # noqa: E402


def test_fastapi_routes_answer_as_the_hot_path():
    torch.set_num_threads(1)
    app = create_app(contextvec.load())
    hot = app.app.app.app   # RequestContext -> HostCheck -> BodyReader -> HotRoutes -> FastAPI
    assert isinstance(hot, HotRoutes)
    service = hot.app.state.service
    service.engine.start()
    requests = [("/v1/embed", {"sentences": ["The bank was robbed .", ""], "encoding": "base64"}),
                ("/v1/embed", {"sentences": [["a", "b"]], "layers": "top", "pool": "mean"}),
                ("/v1/embed", {"sentences": ["a"], "layers": [0, 7]}),
                ("/v1/embeddings", {"input": ["hi there", "x"], "encoding_format": "base64"}),
                ("/v1/embeddings", {"input": "hi", "dimensions": 3})]
    try:
        for path, payload in requests:
            body = json.dumps(payload).encode()
            fast = asyncio.run(ask(hot, "POST", path, body))
            slow = asyncio.run(ask(hot.app, "POST", path, body))
            assert fast == slow, (path, payload)
            assert fast[0] in (200, 422)
    finally:
        service.engine.close(5)
