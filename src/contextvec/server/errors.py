"""Error responses: one JSON shape (OpenAI's), one line of message that names the field or limit.

Validation messages never echo the request's text (it may be private): only field paths,
limits and pydantic's description of what was expected.
"""

from __future__ import annotations

import difflib
import logging
import math

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

logger = logging.getLogger("contextvec.server")

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               408: "timeout_error",
               405: "invalid_request_error", 413: "request_too_large", 415: "invalid_request_error",
               422: "invalid_request_error",
               429: "rate_limit_error", 500: "server_error", 503: "service_unavailable",
               504: "timeout_error"}

# Field names of the request models: what remains of pydantic's error location once union
# branch tags ("str", "list[str]", "ScalarMixSpec", ...) are removed.
FIELDS = {"sentences", "layers", "pool", "encoding", "tokenizer", "weights", "gamma", "input",
          "model", "encoding_format", "dimensions", "user",
          "word", "sentence", "position", "top_k", "ignore_case",
          "question", "context", "n_best", "offsets", "chunk_tokens", "spans"}

WRONG_TYPE = {"literal_error", "model_type", "model_attributes_type", "dict_type", "list_type",
              "string_type", "int_type", "float_type", "bool_type"}


def error_bytes(status: int, message: str, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": ERROR_TYPES.get(status, "error"),
                                   "param": param, "code": status}})


class APIError(Exception):
    """Raised by handlers: becomes a JSON error with ``status`` (and headers, e.g. Retry-After)."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers


def error_response(status: int, message: str, param: str | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    return Response(error_bytes(status, message, param), status_code=status,
                    media_type="application/json", headers=headers)


def field_path(loc: tuple) -> str:
    """``("body", "sentences", 3, "str")`` -> ``"sentences[3]"``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in FIELDS:
            path += f".{part}" if path else part
    return path or "body"


def validation_message(errors: list[dict]) -> tuple[str, str]:
    """(message, field) of pydantic's errors.

    An unknown field comes first: it is most often a misspelt one, which is then also missing
    (``{"sentence": ...}``), and the message suggests the name it resembles. Of the errors one
    value gets from the branches of a union (``layers``: a mode, a list or a mix), the one with
    the deepest location is the informative one (``layers.weights[2]``).
    """
    first = max(errors, key=lambda e: (e.get("type") == "extra_forbidden", len(e.get("loc", ())),
                                       e.get("type") not in WRONG_TYPE))
    loc = tuple(first.get("loc", ()))
    field = field_path(loc)
    kind = first.get("type")
    if kind == "json_invalid":
        message, field = f"malformed JSON: {first.get('ctx', {}).get('error', 'cannot parse')}", "body"
    elif kind == "missing":
        message = f"{field}: field required"
    elif kind == "extra_forbidden":
        field = field_path(loc[:-1])  # where the unknown name is, not the name itself
        name = str(loc[-1])
        missing = [str(e["loc"][-1]) for e in errors
                   if e.get("type") == "missing" and tuple(e.get("loc", ()))[:-1] == loc[:-1]]
        like = difflib.get_close_matches(name, missing, n=1)
        message = (f"unknown field {name!r}" + (f" in {field}" if field != "body" else "")
                   + (f" (did you mean {like[0]!r}?)" if like else ""))
        if like:  # the missing field the unknown one resembles is not named again
            errors = [e for e in errors if tuple(e.get("loc", ()))[-1:] != (like[0],)]
    else:
        message = f"{field}: {_describe(first)}"
    others = {_top_field(e) for e in errors} - {_top_field(first)}
    if others:
        message += f" (and {len(others)} more field{'s' if len(others) > 1 else ''})"
    return message, field


def _describe(error: dict) -> str:
    """pydantic's message, said plainly where it would mislead: a NaN or infinity is not "less
    than" a bound but no number at all, and a bound reads better as 1e+30 than in 31 digits."""
    kind, ctx, value = error.get("type"), error.get("ctx") or {}, error.get("input")
    bounds = {"greater_than_equal": (">=", "ge"), "less_than_equal": ("<=", "le"),
              "greater_than": (">", "gt"), "less_than": ("<", "lt")}
    if (kind in bounds or kind == "finite_number") and isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number (NaN and Infinity are not)"
    if kind in bounds and isinstance(ctx.get(bounds[kind][1]), int | float):
        sign, key = bounds[kind]
        return f"must be {sign} {ctx[key]:g}"
    return error.get("msg", "invalid value")


def _top_field(error: dict) -> str:
    return field_path(tuple(error.get("loc", ()))).split(".")[0].split("[")[0]


def install_error_handlers(app: FastAPI) -> None:
    """422 for bad bodies, the JSON error shape for every HTTP error, 500s logged with an id."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        message, field = validation_message(list(exc.errors()))
        return error_response(422, message, field)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> Response:
        return error_response(exc.status, exc.message, exc.param, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        # Starlette's "Not Found" and "Method Not Allowed" say what, not where to look.
        message = str(exc.detail)
        where = f"{request.method} {request.url.path}"
        if exc.status_code == 404:
            message = f"no endpoint {where}: the API is described at /openapi.json"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            message = f"{where} is not allowed" + (f": use {allowed}" if allowed else "")
        return error_response(exc.status_code, message, None, exc.headers)

    @app.exception_handler(Exception)
    async def _fault(request: Request, exc: Exception) -> Response:
        request_id = request.scope.get("state", {}).get("request_id", "-")
        logger.error("request %s failed", request_id, exc_info=exc)
        return error_response(500, f"internal error (request id {request_id})")
