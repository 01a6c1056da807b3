"""Requests to an ASGI app in process, as uvicorn makes them (the server tests' shared helpers)."""

from __future__ import annotations

import asyncio


async def ask(app, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One request to ``app`` as uvicorn makes it (the client stays until answered)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": [(b"host", b"127.0.0.1:8080"),
                                          (b"content-type", b"application/json")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8080)}
    answered = asyncio.Event()
    sent: list[dict] = []
    replayed = False

    async def receive() -> dict:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            answered.set()

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def service_of(app):
    """The service behind the middleware: the FastAPI app's ``state.service``."""
    while not hasattr(getattr(app, "state", None), "service"):
        app = app.app
    return app.state.service
