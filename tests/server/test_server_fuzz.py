"""Fuzzing the JSON endpoints of a real ``contextvec serve`` with bodies of any shape, far outside
the schema: whatever the body, the answer is a 200 or a 4xx with a JSON error naming its status,
never a 5xx, and the server keeps serving. (test_server_schema.py fuzzes from the schema.)"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from contextvec.server.process import ServerProcess  # noqa: E402

ENV = {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": ""}
LIMITS = ["--threads", "1", "--max-sentences", "8", "--max-sentence-tokens", "16",
          "--max-body-bytes", "4096", "--request-timeout", "20"]

# Text with every kind of code point, lone surrogates included (sent as JSON escapes).
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=24)
SCALARS = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)
SENTENCE = TEXT | st.lists(TEXT, max_size=5)
LAYERS = (st.sampled_from(["all", "top", "average", "bottom", ""]) | st.lists(st.integers(-4, 4), max_size=4)
          | st.fixed_dictionaries({"weights": st.lists(st.floats(allow_nan=False), max_size=4)},
                                  optional={"gamma": st.floats(allow_nan=False)}) | JSON)
EMBED = st.fixed_dictionaries(
    {"sentences": st.lists(SENTENCE, max_size=10) | JSON},
    optional={"layers": LAYERS, "pool": st.sampled_from(["mean", "max", "first", "sum"]) | JSON,
              "encoding": st.sampled_from(["float", "base64", "hex"]) | JSON,
              "tokenizer": st.sampled_from(["whitespace", "moses", "nltk"]) | JSON, "extra": JSON},
)
EMBEDDINGS = st.fixed_dictionaries(
    {"input": SENTENCE | st.lists(TEXT, max_size=10) | JSON},
    optional={"model": TEXT, "encoding_format": st.sampled_from(["float", "base64"]) | JSON,
              "dimensions": st.integers(-2, 600) | JSON, "user": JSON},
)


@pytest.fixture(scope="module")
def url():
    with ServerProcess(LIMITS, env=ENV) as process:
        yield process.url


def post(url: str, path: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def check(url: str, path: str, body: bytes) -> None:
    status, payload = post(url, path, body)
    refusals = (400, 413, 422) if path == "/v1/embeddings" else (413, 422)   # 400: a blank text
    assert status == 200 or status in refusals, (status, payload, body[:300])
    if status != 200:
        assert payload["error"]["code"] == status and payload["error"]["message"], payload


FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@FUZZ
@given(body=EMBED)
def test_fuzzed_embed_bodies_get_200_or_a_clear_4xx(url, body):
    check(url, "/v1/embed", json.dumps(body).encode())


@pytest.mark.slow
@FUZZ
@given(body=EMBEDDINGS)
def test_fuzzed_openai_bodies_get_200_or_a_clear_4xx(url, body):
    check(url, "/v1/embeddings", json.dumps(body).encode())


@pytest.mark.slow
@FUZZ
@given(raw=st.binary(max_size=64) | JSON.map(lambda v: json.dumps(v).encode()))
def test_fuzzed_raw_bodies_get_a_clear_4xx(url, raw):
    check(url, "/v1/embed", raw)
    status, _ = post(url, "/v1/embed", json.dumps({"sentences": ["still serving"]}).encode())
    assert status == 200
