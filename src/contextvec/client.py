"""A client of ``contextvec serve``: the same arrays as ``Encoder.embed``, from a remote model.

>>> client = contextvec.Client("http://127.0.0.1:8080")          # doctest: +SKIP
>>> client.embed(["The bank was robbed ."])[0].shape              # (layers, tokens, dim)  # doctest: +SKIP

Standard library only (urllib): vectors travel as base64 float32, so they arrive bit for bit.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence

import numpy as np

from contextvec.text.tokenize import Sentence


class ServerError(RuntimeError):
    """The server answered with an error: ``status`` (e.g. 413, 422, 429) and its message."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message, self.param = status, message, param


class Client:
    """Talks to a ``contextvec serve`` at ``url``; ``api_key`` if the server requires one."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

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
        """Vectors per sentence, as :meth:`contextvec.Encoder.embed` returns them.

        ``layers``: ``"all"`` (layers, tokens, dim), ``"top"``/``"average"`` (tokens, dim) or a
        list of layer indices; ``mix``: scalar-mix weights (one per layer, with ``gamma``) instead
        of ``layers``; ``pool``: ``"mean"``, ``"max"`` or ``"first"``. Strings are split on
        whitespace unless ``tokenizer`` (``"moses"``) or the server's default says otherwise.
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

    def models(self) -> list[dict]:
        """The server's model: id, num_layers, dim."""
        return self._request("GET", "/v1/models")["data"]

    def _post(self, path: str, body: dict) -> dict:
        return self._request("POST", path, json.dumps(body).encode("utf-8"))

    def _request(self, method: str, path: str, data: bytes | None = None) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            raise _server_error(e) from None


def _decode(vectors: str, shape: list[int]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(vectors), dtype="<f4").astype(np.float32).reshape(shape)


def _server_error(e: urllib.error.HTTPError) -> ServerError:
    try:
        error = json.loads(e.read())["error"]
        return ServerError(e.code, error["message"], error.get("param"))
    except (ValueError, KeyError, TypeError):
        return ServerError(e.code, e.reason or "error")
