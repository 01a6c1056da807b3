"""The hot endpoints answered straight on ASGI: body -> JSON -> pydantic -> handler -> bytes.

FastAPI's per-request machinery (its middleware stack, routing, dependency solving and response
wrapping) costs a few hundred microseconds a request: a tenth of a lone request's latency with
the bundled model. The requests named in ``routes`` are answered here, with the same request
models, handlers and error shapes; everything else (the OpenAPI schema, ``/docs``, the other
endpoints, wrong methods) goes on to the FastAPI app. :func:`declare` puts a hot route in both:
here, and in the FastAPI app as a route made from it (the schema, and the same handler).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from fastapi import FastAPI, Request
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from contextvec.server.errors import APIError, error_bytes, validation_message
from contextvec.server.middleware import send_json
from contextvec.server.service import Call

logger = logging.getLogger("contextvec.server")

Handler = Callable[[Any, Call], Awaitable[bytes]]
"""``(validated body or None, call) -> the response's JSON bytes``."""


class HotRoute(NamedTuple):
    """A handler and the model its JSON body is validated with (``None``: no body)."""

    model: type[BaseModel] | None
    handler: Handler


def declare(app: FastAPI, routes: dict[tuple[str, str], HotRoute], method: str, path: str,
            route: HotRoute, name: str, doc: str, **openapi: Any) -> None:
    """Add ``route`` to ``routes`` (answered by :class:`HotRoutes`) and to ``app`` as the FastAPI
    route of the same handler, named ``name`` and described by ``doc`` (its operation in the
    OpenAPI schema; ``openapi``: the route's ``response_model``, ``responses``)."""
    routes[method, path] = route

    async def endpoint(request: Request, body: Any = None) -> Response:
        payload = await route.handler(body, Call.of(request))
        return Response(payload, media_type="application/json")

    parameters = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    if route.model is not None:  # FastAPI reads the body's model from the signature
        parameters.insert(0, inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                               annotation=route.model))
    endpoint.__signature__ = inspect.Signature(parameters, return_annotation=Response)
    endpoint.__name__, endpoint.__doc__ = name, doc
    app.add_api_route(path, endpoint, methods=[method], name=name, **openapi)


class HotRoutes:
    """Answers ``(method, path)`` in ``routes`` itself; passes any other request to ``app``."""

    def __init__(self, app: ASGIApp, routes: dict[tuple[str, str], HotRoute]) -> None:
        self.app, self.routes = app, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get((scope["method"], scope["path"])) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        request_id = scope.get("state", {}).get("request_id", "-")
        headers: list[tuple[bytes, bytes]] = []
        try:
            body = None
            if route.model is not None:
                raw = await _read_body(receive)
                if raw is None:  # the client went away while sending
                    return
                body = route.model.model_validate(parse_json(raw))
            status, payload = 200, await route.handler(body, Call(request_id, receive))
        except ValidationError as e:
            message, field = validation_message(e.errors(include_url=False))
            status, payload = 422, error_bytes(422, message, field)
        except APIError as e:
            status, payload = e.status, error_bytes(e.status, e.message, e.param)
            headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                       for k, v in (e.headers or {}).items()]
        except Exception as e:
            logger.error("request %s failed", request_id, exc_info=e)
            status, payload = 500, error_bytes(500, f"internal error (request id {request_id})")
        await send_json(send, status, payload, headers)


def parse_json(raw: bytes) -> object:
    """The body's JSON value, parsed as FastAPI parses it (the standard library's ``json``);
    anything it cannot parse is a 422 on ``body``, nesting too deep included."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise APIError(422, f"malformed JSON: {e.msg} (line {e.lineno}, column {e.colno})",
                       "body") from None
    except RecursionError:
        raise APIError(422, "malformed JSON: nested too deeply", "body") from None
    except ValueError:  # e.g. an integer of more digits than Python converts
        raise APIError(422, "malformed JSON: a number too long to convert", "body") from None


async def _read_body(receive: Receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
