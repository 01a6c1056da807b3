"""The server does what its ``/openapi.json`` says, checked by Schemathesis from the schema alone.

A real ``contextvec serve`` (the bundled model) on a loopback port. Schemathesis generates
requests the schema allows (positive data) for every operation; each must be answered 2xx (no
schema-valid request refused: the schema carries the server's limits, the model's layers and
dimensions) and every answer must match the schema: its status, media type and body. Requests
the schema refuses (negative data) must be refused as such (4xx of a bad request, never 413 for a
bound the schema states); without the key, a keyed server's refusals must match the schema too.
Bounded, derandomized runs: the same cases every time.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")
schemathesis = pytest.importorskip("schemathesis", reason="the test extra is not installed")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from contextvec.server.process import ServerProcess  # noqa: E402

ENV = {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": ""}
# Small limits, so that requests at the limits stay quick; the schema states them (but for the
# words in a string, which no JSON Schema counts: generated strings stay far below 64).
LIMITS = ["--threads", "1", "--max-sentences", "8", "--max-sentence-tokens", "64",
          "--openai-max-inputs", "12", "--request-timeout", "20"]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
BUDGET_S = 40.0
"""Seconds of requests per mode at most: past it the remaining cases are generated, not sent."""
CASES = {schemathesis.GenerationMode.POSITIVE: 240, schemathesis.GenerationMode.NEGATIVE: 120}
KEYED_CASES = 80
DATA_BOUND = {("POST /v1/explore/nearest", "position"), ("POST /v1/explore/similarity", "senses"),
              ("POST /v1/embed", "spans"), ("POST /v1/embeddings", "spans"),
              ("POST /v1/embeddings", "context")}
"""(operation, field) whose bound depends on another field, which no JSON Schema states: the
explorer's ``position`` must be one of its sentence's tokens, its ``senses`` as many as its
``sentences``, the ``spans`` of ``/v1/embed`` and ``/v1/embeddings`` inside their text and over a
token, ``/v1/embeddings``' ``context="document"`` with late chunks only (else a 422 naming the
field)."""
"""Cases in all per mode: the operations share them (the strategy picks an operation, then its data)."""


@pytest.fixture(scope="module")
def url():
    with ServerProcess(LIMITS, env=ENV) as process:
        yield process.url


def openapi(url: str, headers: dict | None = None) -> dict:
    request = urllib.request.Request(url + "/openapi.json", headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def fuzz(url: str, mode: schemathesis.GenerationMode, schema_headers: dict | None = None,
         cases: int | None = None) -> Counter:
    """Run the cases of ``mode`` (sent without ``schema_headers``, which fetch the schema);
    (operation, status) -> how many."""
    schema = schemathesis.openapi.from_dict(openapi(url, schema_headers))
    seen: Counter = Counter()
    stop = time.monotonic() + BUDGET_S
    negative = mode is schemathesis.GenerationMode.NEGATIVE
    checks = [*CHECKS, negative_data_rejection] if negative else CHECKS

    @settings(max_examples=cases or CASES[mode], deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=schema.as_strategy(mode))
    def run(case):
        if time.monotonic() > stop:
            return
        response = case.call(base_url=url, timeout=30)
        seen[case.operation.label, response.status_code] += 1
        case.validate_response(response, checks=checks)
        if mode is schemathesis.GenerationMode.POSITIVE and not schema_headers:
            bound = response.status_code == 422 and (
                case.operation.label, response.json()["error"]["param"]) in DATA_BOUND
            assert response.status_code < 400 or bound, (case.operation.label, case.body, response.text[:300])

    run()
    return seen


@pytest.mark.slow
def test_every_schema_valid_request_is_taken_and_answered_as_the_schema_says(url):
    seen = fuzz(url, schemathesis.GenerationMode.POSITIVE)
    operations = {label for label, _ in seen}
    assert {"POST /v1/embed", "POST /v1/embeddings", "GET /v1/models", "GET /metrics", "GET /v1/explore",
            "POST /v1/explore/similarity", "POST /v1/explore/nearest"} <= operations
    assert seen["POST /v1/embed", 200] >= 10 and seen["POST /v1/embeddings", 200] >= 10, seen


@pytest.mark.slow
def test_invalid_requests_get_a_documented_error_never_a_5xx(url):
    seen = fuzz(url, schemathesis.GenerationMode.NEGATIVE)
    assert seen["POST /v1/embed", 422] >= 10 and seen["POST /v1/embeddings", 422] >= 10, seen


def test_over_a_schema_bound_is_refused_as_invalid_data(url):
    """The cases the generator reaches only at times, sent each: one item past each maxItems
    the schema states is negative data, answered as such (422, not 413)."""
    schema = openapi(url)["components"]["schemas"]
    over = [("/v1/embed", {"sentences": ["a"] * 9}),
            ("/v1/embed", {"sentences": [["a"] * 65]}),
            ("/v1/embeddings", {"input": ["a"] * 13}),
            ("/v1/explore/similarity", {"sentences": ["a b"] * 9, "word": "a"})]
    assert schema["EmbedRequest"]["properties"]["sentences"]["maxItems"] == 8
    for path, body in over:
        request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
        assert error.value.code == 422, (path, error.value.read())


@pytest.mark.slow
def test_a_keyed_servers_refusals_are_answered_as_the_schema_says():
    with ServerProcess(LIMITS, env={**ENV, "CONTEXTVEC_API_KEY": "k3y"}) as process:
        seen = fuzz(process.url, schemathesis.GenerationMode.POSITIVE, {"Authorization": "Bearer k3y"},
                    KEYED_CASES)
    assert seen["GET /metrics", 401] >= 1 and seen["POST /v1/embed", 401] >= 1, seen
