"""A client of ``contextvec serve``: the same arrays as ``Encoder.embed``, from a remote model.

>>> client = contextvec.Client("http://127.0.0.1:8080")          # doctest: +SKIP
>>> client.embed(["The bank was robbed ."])[0].shape              # (layers, tokens, dim)  # doctest: +SKIP

Standard library only (http.client): vectors travel as base64 float32, so they arrive bit for
bit. Each thread keeps one connection open to the server (HTTP keep-alive), so a request does
not pay for a new TCP connection.

Every call has a deadline: ``timeout`` seconds (60 by default) for connecting and for each wait
on the server, so a server that is down, unreachable or silent ends the call with one
``ConnectionError`` or ``TimeoutError`` naming the URL, never a hang.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import threading
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

import numpy as np

from contextvec.text.tokenize import Sentence


class ServerError(RuntimeError):
    """The server answered with an error status.

    Attributes:
        status: the HTTP status (e.g. 413, 422, 429).
        message: the server's message.
        param: the request field the error is about, if the server named one.
    """

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message, self.param = status, message, param


class Client:
    """Talks to a ``contextvec serve``.

    Safe to share between threads: each thread has its own connection.

    Args:
        url: ``http://HOST:PORT`` or ``https://HOST:PORT``, optionally with a path prefix.
        api_key: sent as ``Authorization: Bearer ...`` if the server requires one.
        timeout: seconds to connect, and to wait for each part of an answer (a finite number
            > 0; the server's own ``--request-timeout`` is 30 s).

    Raises:
        ValueError: a URL that is not http(s) with a host, or a timeout that is not a finite
            number > 0.

    The server's errors raise [`ServerError`][contextvec.client.ServerError]; a server that
    refuses or cannot be reached, ``ConnectionError``; one that does not answer within
    ``timeout``, ``TimeoutError`` (both ``OSError``, one line each).
    """

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 60.0) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise ValueError(f"timeout: expected seconds, a finite number > 0, got {timeout!r}")
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url: expected http://HOST:PORT or https://HOST:PORT, got {url!r}")
        self._connection_class = (http.client.HTTPSConnection if parts.scheme == "https"
                                  else http.client.HTTPConnection)
        self._address = (parts.hostname, parts.port)
        self._path = parts.path
        self._local = threading.local()

    def embed(
        self,
        sentences: Iterable[Sentence],
        *,
        layers: str | Sequence[int] = "all",
        pool: str | None = None,
        mix: Sequence[float] | None = None,
        gamma: float = 1.0,
        tokenizer: str | None = None,
    ) -> list[np.ndarray]:
        """Vectors per sentence, as [`Encoder.embed`][contextvec.encoders.base.Encoder.embed]
        returns them (bit for bit: they travel as base64 float32).

        Args:
            sentences: strings or token lists; a bare string is refused.
            layers: ``"all"``, ``"top"``, ``"average"`` or a list of layer indices (negative
                ones count from the top).
            pool: None for per-token vectors, or ``"mean"``, ``"max"`` or ``"first"``.
            mix: scalar-mix weights (pre-softmax, one per layer) instead of ``layers``.
            gamma: the scale of ``mix``.
            tokenizer: how the server splits strings: ``"whitespace"`` or ``"moses"`` (None:
                the server's default).

        Returns:
            One float32 array per sentence, ``(num_layers, tokens, dim)`` for ``"all"``,
            ``(len(layers), tokens, dim)`` for a list of indices, ``(tokens, dim)`` for
            ``"top"``, ``"average"`` or ``mix``; with ``pool`` the tokens axis is pooled away.

        Raises:
            TypeError: a bare string or bytes instead of a list of sentences.
            ServerError: the server refused the request (its status and message).
        """
        if isinstance(sentences, str | bytes):
            raise TypeError(f"sentences must be a list of sentences; for one pass [{sentences[:30]!r}]")
        items = [s if isinstance(s, str) else list(s) for s in sentences]
        spec: object = layers if isinstance(layers, str) else [int(i) for i in layers]
        if mix is not None:
            spec = {"weights": [float(w) for w in mix], "gamma": float(gamma)}
        body: dict = {"sentences": items, "layers": spec, "pool": pool, "encoding": "base64"}
        if tokenizer is not None:
            body["tokenizer"] = tokenizer
        if not items:
            return []
        reply = self._post("/v1/embed", body)
        return [_decode(e["vectors"], e["shape"]) for e in reply["embeddings"]]

    def answer(self, question: str, context: str, n_best: int = 1) -> list[dict]:
        """The answers of the server's question-answering model (``serve --task-model``).

        Returns:
            Up to ``n_best`` dicts ``{"text", "start", "end", "score"}``, best first, where
            ``context[start:end] == text``.

        Raises:
            ServerError: the server refused the request (404: it serves no such model).
        """
        reply = self._post("/v1/answer", {"question": question, "context": context, "n_best": n_best})
        return reply["answers"]

    def models(self) -> list[dict]:
        """The server's model, as ``/v1/models`` lists it.

        Returns:
            A one-item list of dicts with ``id``, ``num_layers`` and ``dim`` (and the OpenAI
            fields ``object``, ``created``, ``owned_by``).
        """
        return self._request("GET", "/v1/models")["data"]

    def close(self) -> None:
        """Close this thread's connection (the next request opens a new one)."""
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()

    def _post(self, path: str, body: dict) -> dict:
        return self._request("POST", path, json.dumps(body).encode("utf-8"))

    def _request(self, method: str, path: str, data: bytes | None = None) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            try:
                status, reason, payload = self._exchange(method, path, data, headers)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection the server had closed meanwhile: the request is sent
                # once more, on a new connection (embedding has no side effects).
                status, reason, payload = self._exchange(method, path, data, headers)
        except TimeoutError:
            raise TimeoutError(f"{self.url}: no answer within {self.timeout:g} s "
                               "(Client(timeout=...))") from None
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionError(f"{self.url}: cannot reach the server: {_reason(e)}") from None
        if status >= 400:
            raise _server_error(status, reason, payload)
        return json.loads(payload)

    def _exchange(self, method: str, path: str, data: bytes | None,
                  headers: dict[str, str]) -> tuple[int, str, bytes]:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            host, port = self._address
            connection = self._local.connection = self._connection_class(host, port, timeout=self.timeout)
        try:
            connection.request(method, self._path + path, data, headers)
            response = connection.getresponse()
            payload = response.read()
        except BaseException:
            self.close()
            raise
        if response.will_close:
            self.close()
        return response.status, response.reason, payload


def _reason(error: BaseException) -> str:
    """An OS or HTTP error in a few words: "connection refused", not "[Errno 111] ..."."""
    if isinstance(error, http.client.RemoteDisconnected):
        return "it closed the connection without answering"
    if isinstance(error, http.client.HTTPException):
        return f"not an HTTP answer ({type(error).__name__})"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[:1].lower() + error.strerror[1:]
    return str(error) or type(error).__name__


def _decode(vectors: str, shape: list[int]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(vectors), dtype="<f4").astype(np.float32).reshape(shape)


def _server_error(status: int, reason: str, payload: bytes) -> ServerError:
    try:
        error = json.loads(payload)["error"]
        return ServerError(status, error["message"], error.get("param"))
    except (ValueError, KeyError, TypeError):
        return ServerError(status, reason or "error")
