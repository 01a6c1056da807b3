"""HotRoutes answers the hot endpoints itself; FastAPI's routes for them (the OpenAPI schema's)
call the same handlers: both give the same bytes. In process, on plain ASGI calls."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("pybase64", reason="the server extra is not installed")

import contextvec  # noqa: E402
from contextvec.server.app import create_app  # noqa: E402
from contextvec.server.hot import HotRoutes  # noqa: E402


async def post(app, path: str, body: bytes) -> tuple[int, bytes]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": [(b"content-type", b"application/json")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2), "state": {"request_id": "t"}}
    replayed = False

    async def receive() -> dict:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(60)   # the client stays connected
        return {"type": "http.disconnect"}

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


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
            fast = asyncio.run(post(hot, path, body))
            slow = asyncio.run(post(hot.app, path, body))
            assert fast == slow, (path, payload)
            assert fast[0] in (200, 422)
    finally:
        service.engine.close(5)
