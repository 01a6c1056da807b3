"""``contextvec serve``: a real server process on a free loopback port, driven over HTTP.

The bundled model (elmo-en-small) throughout; BERT and bilm-tf models in test_server_models.py.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close, elmo_terms

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("prometheus_client", reason="the server extra is not installed")
pytest.importorskip("pybase64", reason="the server extra is not installed")

import contextvec  # noqa: E402
from contextvec.client import Client, ServerError  # noqa: E402
from contextvec.server.process import ServerProcess, ServerStartError  # noqa: E402
from contextvec.server.schemas import NOT_SPACE  # noqa: E402


def assert_same_vectors(got, want, encoder) -> None:
    """The server batches a sentence with others: the same sums in other orders, then at most
    a mix of the 3 layers (a pool adds no error of its own: both sides pool alike)."""
    assert_reordered_close(got, want, terms=elmo_terms(encoder.config) + 3)

WORDS = ["the", "bank", "was", "robbed", "by", "a", "man", "with", "a", "gun", "near", "river",
         "where", "we", "sat", ".", "stocks", "rose", "sharply", "on", "Monday", ",", "while",
         "bonds", "fell", ";", "what", "day", "!"]
ENV = {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": ""}


def random_sentences(rng: random.Random, n: int, longest: int = 30) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest))) for _ in range(n)]


def call(url: str, path: str, body: object = None, *, raw: bytes | None = None,
         headers: dict | None = None, method: str | None = None) -> tuple[int, dict, dict]:
    """(status, headers, JSON body) of one request; errors are returned, not raised."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            payload = r.read()
            kind = r.headers.get("content-type", "")
            return r.status, dict(r.headers), json.loads(payload) if "json" in kind else {"text": payload}
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def metric(url: str, name: str) -> float:
    """Sum of a Prometheus series' samples whose name and labels start with ``name``."""
    _, _, body = call(url, "/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in body["text"].decode().splitlines()
               if line.startswith(name))


def wait_for(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def encoder():
    torch.set_num_threads(1)
    return contextvec.load()


@pytest.fixture(scope="module")
def server():
    args = ["--threads", "1", "--max-sentences", "64", "--max-sentence-tokens", "64",
            "--max-body-bytes", "65536", "--max-wait-ms", "5"]
    with ServerProcess(args, env=ENV) as process:
        yield process.url


def test_32_concurrent_clients_get_exactly_their_own_vectors(server, encoder):
    rng = random.Random(0)
    requests = [random_sentences(rng, rng.randint(1, 4)) for _ in range(32)]
    client = Client(server)
    barrier = threading.Barrier(32)

    def ask(sentences: list[str]) -> list[np.ndarray]:
        barrier.wait()
        return client.embed(sentences)

    before = metric(server, "contextvec_batch_sentences_count")
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(ask, requests))
    for sentences, got in zip(requests, answers, strict=True):
        expected = encoder.embed(sentences)
        assert [g.shape for g in got] == [e.shape for e in expected]
        for g, e in zip(got, expected, strict=True):
            assert_same_vectors(g, e, encoder)
    batches = metric(server, "contextvec_batch_sentences_count") - before
    assert batches < 32, "no two clients' requests were batched together"


@pytest.mark.parametrize("layers", ["all", "top", "average"])
@pytest.mark.parametrize("pool", [None, "mean", "max", "first"])
def test_layers_and_pooling_match_encoder_embed(server, encoder, layers, pool):
    sentences = ["The bank was robbed .", "We sat on the river bank", ""]
    status, _, body = call(server, "/v1/embed", {"sentences": sentences, "layers": layers, "pool": pool})
    assert status == 200
    expected = encoder.embed(sentences, layers=layers, pool=pool)
    for item, want in zip(body["embeddings"], expected, strict=True):
        assert item["shape"] == list(want.shape)
        assert_same_vectors(np.asarray(item["vectors"], dtype=np.float32).reshape(want.shape), want, encoder)
    assert [e["tokens"] for e in body["embeddings"]] == [s.split() for s in sentences]
    assert body["usage"]["prompt_tokens"] == 11


def test_layer_indices_and_scalar_mix(server, encoder):
    sentences = ["The bank was robbed .", ["tokens", "given", "as", "a", "list"]]
    full = encoder.embed(sentences)
    got = Client(server).embed(sentences, layers=[0, -1])
    for g, f in zip(got, full, strict=True):
        assert_same_vectors(g, f[[0, 2]], encoder)
    mix = contextvec.ScalarMix(3, initial_weights=[0.5, -1.0, 2.0], initial_gamma=0.7)
    got = Client(server).embed(sentences, mix=[0.5, -1.0, 2.0], gamma=0.7, pool="max")
    for g, f in zip(got, full, strict=True):
        with torch.no_grad():
            want = mix(torch.from_numpy(f)[:, None])[0].numpy().max(axis=0)
        assert_same_vectors(g, want, encoder)


def test_client_keeps_its_connection_and_reopens_a_closed_one(server, encoder, monkeypatch):
    opened = []
    connect = http.client.HTTPConnection.connect

    def counted(self: http.client.HTTPConnection) -> None:
        opened.append(self)
        connect(self)

    monkeypatch.setattr(http.client.HTTPConnection, "connect", counted)
    client = Client(server)
    with pytest.raises(ServerError, match="413"):   # answered with "Connection: close"
        client.embed(["a" * 70000])
    first = client.embed(["The bank"])
    assert len(opened) == 2   # the closed one is not reused
    assert client.embed(["was robbed"])[0].shape == (3, 2, 256) and len(opened) == 2
    time.sleep(5.5)   # past uvicorn's keep-alive timeout (5 s): the server closes the idle connection
    for got, want in zip(client.embed(["The bank"]) + first, encoder.embed(["The bank"]) * 2, strict=True):
        assert_same_vectors(got, want, encoder)
    assert len(opened) == 3
    client.close()


def test_odd_unicode_and_moses_behave_as_the_python_api(server, encoder):
    from contextvec.text.tokenize import Tokenizer

    sentences = ["caf\u00e9 na\u00efve \u200b zero-width", "tab\tand\u00a0nbsp", "\U0001F600 emoji",
                 "x" * 60 + " long-token"]
    for got, want in zip(Client(server).embed(sentences), encoder.embed(sentences), strict=True):
        assert_same_vectors(got, want, encoder)
    text = "Mr. Smith's \"bank\" (closed) wasn't robbed."
    status, _, body = call(server, "/v1/embed", {"sentences": [text], "tokenizer": "moses", "layers": "top"})
    tokens = Tokenizer("moses")(text)[0]
    assert status == 200 and body["embeddings"][0]["tokens"] == tokens
    assert_same_vectors(np.asarray(body["embeddings"][0]["vectors"], dtype=np.float32),
                        encoder.embed([tokens], layers="top")[0], encoder)


def test_openai_embeddings(server, encoder):
    texts = ["The bank was robbed .", "We sat on the river bank"]
    expected = encoder.embed(texts, layers="average", pool="mean")
    status, _, body = call(server, "/v1/embeddings", {"input": texts, "model": "anything",
                                                      "encoding_format": "base64"})
    assert status == 200 and body["object"] == "list" and body["model"] == "elmo-en-small"
    for item, want in zip(body["data"], expected, strict=True):
        got = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        assert_same_vectors(got, want, encoder)
    assert body["usage"] == {"prompt_tokens": 11, "total_tokens": 11}
    status, _, body = call(server, "/v1/embeddings", {"input": texts[0]})
    assert status == 200 and len(body["data"]) == 1
    assert_same_vectors(body["data"][0]["embedding"], expected[0], encoder)
    status, _, body = call(server, "/v1/embeddings", {"input": "x", "dimensions": 3})
    assert status == 422 and body["error"]["param"] == "dimensions"


@pytest.mark.parametrize(("raw", "param", "words"), [
    (b'{"sentences": ["a", ', "body", "malformed JSON"),
    (b'[1, 2]', "body", "dictionary"),
    (b'{"sentences": []}', "sentences", "at least 1"),
    (b'{"sentences": "one string"}', "sentences", "valid list"),
    (b'{"sentences": ["ok", 3]}', "sentences[1]", "valid string"),
    (b'{"sentences": [["a", null]]}', "sentences[0][1]", "valid string"),
    (b'{"layers": "top"}', "sentences", "required"),
    (b'{"sentences": ["a"], "layers": [0, 3]}', "layers", "out of range"),
    (b'{"sentences": ["a"], "layers": ["0"]}', "layers[0]", "valid integer"),
    (b'{"sentences": ["a"], "layers": []}', "layers", "at least 1"),
    (b'{"sentences": ["a"], "layers": {"weights": [1, 2]}}', "layers.weights", "expected 3 weights"),
    (b'{"sentences": ["a"], "layers": {"weights": [1, 2, "x"]}}', "layers.weights[2]", "number"),
    (b'{"sentences": ["a"], "layers": "middle"}', "layers", "'all', 'top' or 'average'"),
    (b'{"sentences": ["a"], "pool": "sum"}', "pool", "'mean', 'max' or 'first'"),
    (b'{"sentences": ["a"], "encoding": "hex"}', "encoding", "'float' or 'base64'"),
    (b'{"sentences": ["a"], "batch": 3}', "body", "unknown field 'batch'"),
    (b'{"sentence": ["a"]}', "body", "unknown field 'sentence' (did you mean 'sentences'?)"),
    (b'{"sentences": ["a"], "layers": {"weights": [1, 1, 1], "gama": 1}}', "layers",
     "unknown field 'gama' in layers"),
    (b'{"sentences": ["a \\ud800"]}', "sentences[0]", "lone surrogate"),
    (b'{"sentences": ["\xff\xfe"]}', "body", "malformed JSON"),
    (b"", "body", "malformed JSON"),
    (b'{"sentences": ' + b"[" * 20000 + b"]" * 20000 + b"}", "body", "nested too deeply"),
    (b'{"sentences": ["a"], "layers": [' + b"1" * 5000 + b"]}", "body", "number too long"),
    (b'{"sentences": [[["a"]]]}', "sentences[0][0]", "valid string"),
    (b"null", "body", "dictionary"),
    (b'{"sentences": ["a"], "layers": {"weights": [NaN, 1, 1]}}', "layers.weights[0]",
     "layers.weights[0]: must be a finite number (NaN and Infinity are not)"),
    (b'{"sentences": ["a"], "layers": {"weights": [1, 1, 1], "gamma": -Infinity}}', "layers.gamma",
     "must be a finite number"),
    (b'{"sentences": ["a"], "layers": {"weights": [1e31, 1, 1]}}', "layers.weights[0]", "must be <= 1e+30"),
    (b'{"sentences": ["a"], "layers": [0.5]}', "layers[0]", "valid integer"),
])
def test_bad_input_is_a_422_naming_the_field(server, raw, param, words):
    status, _, body = call(server, "/v1/embed", raw=raw)
    assert status == 422, body
    assert body["error"]["param"] == param and words in body["error"]["message"], body


def test_openai_bad_input(server):
    for payload, param in [({"input": []}, "input"), ({"input": [1, 2]}, "input[0]"),
                           ({"model": "x"}, "input")]:
        status, _, body = call(server, "/v1/embeddings", payload)
        assert status == 422 and body["error"]["param"] == param, body


@pytest.mark.parametrize(("payload", "param"), [
    ({"input": ""}, "input"), ({"input": " \t\n"}, "input"), ({"input": ["ok", ""]}, "input[1]"),
    ({"input": ["\u00a0", "ok"]}, "input[0]"),
])
def test_openai_blank_input_is_a_400_never_a_zero_vector(server, payload, param):
    status, _, body = call(server, "/v1/embeddings", payload)
    assert status == 400, body
    assert body == {"error": {"message": f"{param}: empty or blank text: every input needs at least one word",
                              "type": "invalid_request_error", "param": param, "code": 400}}


def test_openai_takes_2048_inputs_and_refuses_more(server, encoder):
    texts = [WORDS[i % len(WORDS)] for i in range(2048)]   # over this server's --max-sentences 64
    status, _, body = call(server, "/v1/embeddings", {"input": texts, "encoding_format": "base64"})
    assert status == 200 and [d["index"] for d in body["data"]] == list(range(2048))
    got = np.frombuffer(base64.b64decode(body["data"][5]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(got, encoder.embed([texts[5]], layers="average", pool="mean")[0],
                               atol=1e-5, rtol=0)
    status, _, body = call(server, "/v1/embeddings", {"input": [*texts, "one more"]})
    assert status == 422 and body["error"] == {   # over the schema's maxItems, as any schema bound
        "message": "input: 2049 texts, over the limit of 2048 per request (--openai-max-inputs)",
        "type": "invalid_request_error", "param": "input", "code": 422}


def test_openapi_states_what_the_server_takes_and_answers(server):
    _, _, schema = call(server, "/openapi.json")
    models = schema["components"]["schemas"]
    embed = models["EmbedRequest"]["properties"]
    assert embed["sentences"]["maxItems"] == 64   # --max-sentences
    indices = next(b for b in embed["layers"]["anyOf"] if b.get("type") == "array")["items"]
    assert (indices["minimum"], indices["maximum"]) == (-3, 2)   # the bundled model's 3 layers
    weights = models["ScalarMixSpec"]["properties"]["weights"]
    assert (weights["minItems"], weights["maxItems"]) == (3, 3)
    assert (weights["items"]["minimum"], weights["items"]["maximum"]) == (-1e30, 1e30)
    openai = models["EmbeddingsRequest"]["properties"]
    texts = next(b for b in openai["input"]["anyOf"] if b.get("type") == "array")
    assert texts["maxItems"] == 2048 and texts["items"]["pattern"] == NOT_SPACE
    dimensions = next(b for b in openai["dimensions"]["anyOf"] if b.get("type") == "integer")
    assert (dimensions["minimum"], dimensions["maximum"]) == (256, 256)
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    for path, statuses in (("/v1/embed", {408, 413, 415, 422, 429, 500, 503, 504}),
                           ("/v1/embeddings", {400, 408, 413, 415, 422, 429, 500, 503, 504})):
        responses = schema["paths"][path]["post"]["responses"]
        assert {int(s) for s in responses} == {200} | statuses
        for status in statuses:
            assert responses[str(status)]["content"]["application/json"]["schema"] == error
    ready = schema["paths"]["/ready"]["get"]["responses"]["503"]
    assert ready["content"]["application/json"]["schema"] == error
    metrics = schema["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    # What the schema allows at its bounds is taken.
    for layers in ([-3, 2], {"weights": [1e30, -1e30, 0], "gamma": 1e30}):
        assert call(server, "/v1/embed", {"sentences": ["a b"], "layers": layers})[0] == 200
    assert call(server, "/v1/embeddings", {"input": "a b", "dimensions": 256})[0] == 200
    assert call(server, "/v1/embed", {"sentences": ["a"] * 64})[0] == 200


def test_serve_option_errors_are_one_line():
    command = [sys.executable, "-m", "contextvec.cli.main", "serve", "--openai-layers", "nan,1,1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "expected top, average or comma-separated finite numbers" in result.stderr
    assert "pydantic" not in result.stderr and "http" not in result.stderr
    server = ServerProcess(["--threads", "1", "--openai-layers", "1,2"], env=ENV)
    with pytest.raises(ServerStartError) as error:
        server.start()
    assert str(error.value).endswith(
        "contextvec: error: --openai-layers: expected 3 weights (one per layer), got 2")


def test_over_the_limits_is_a_413_or_422_naming_the_limit(server):
    # Over a bound the schema states (maxItems): 422, as any body the schema refuses.
    status, _, body = call(server, "/v1/embed", {"sentences": ["a"] * 65})
    assert status == 422 and "65 sentences" in body["error"]["message"] and "64" in body["error"]["message"]
    status, _, body = call(server, "/v1/embed", {"sentences": ["ok", ["a"] * 65]})
    assert status == 422 and body["error"]["param"] == "sentences[1]"
    # The words of a string, which no schema counts, and the body's bytes: 413.
    status, _, body = call(server, "/v1/embed", {"sentences": ["ok", "a " * 65]})
    assert status == 413 and body["error"]["param"] == "sentences[1]"
    assert "65 tokens" in body["error"]["message"]
    status, _, body = call(server, "/v1/embed", raw=b'{"sentences": ["' + b"a" * 70000 + b'"]}')
    assert status == 413 and "65536 bytes" in body["error"]["message"]
    # A chunked body declares no length: the limit is enforced while it streams in.
    parts = urlsplit(server)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    chunks = (b"a" * 10000 for _ in range(10))
    # The server may answer 413 and close before the last chunks are sent (a busy client):
    # the write then fails, and the answer is still there to read.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        connection.request("POST", "/v1/embed", body=chunks, encode_chunked=True,
                           headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 413
    connection.close()


def test_a_body_not_declared_json_is_a_415(server):
    """A page in a browser may POST text/plain or a form to any address without a CORS preflight;
    such a body is refused before it is read, on the hot routes and FastAPI's alike."""
    body = json.dumps({"sentences": ["a b"]}).encode()
    for path in ("/v1/embed", "/v1/embeddings", "/v1/explore/similarity"):
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                     "application/jsonx", ""):
            status, _, answer = call(server, path, raw=body, headers={"Content-Type": kind})
            assert status == 415 and answer["error"]["param"] == "content-type", (path, kind, answer)
            message = answer["error"]["message"]
            assert message.startswith("Content-Type must be application/json") and "\n" not in message
    status, _, answer = call(server, "/v1/embed", raw=body,
                             headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert status == 200 and answer["embeddings"][0]["tokens"] == ["a", "b"]


def raw_get(url: str, path: str, host: bytes) -> tuple[int, dict]:
    """(status, JSON body) of a GET sent with this ``Host`` header."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: " + host
                     + b"\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload) if payload.startswith(b"{") else {}


@pytest.mark.parametrize("path", ["/health", "/v1/models", "/openapi.json", "/"])
def test_a_foreign_host_is_refused_a_loopback_one_taken(server, path):
    """DNS rebinding points a page's own name at 127.0.0.1: its requests carry that name."""
    port = str(urlsplit(server).port).encode()
    for host in (b"evil.example", b"evil.example:" + port, b"127.0.0.2:" + port, b"localhost.evil.example"):
        status, body = raw_get(server, path, host)
        assert status == 400, (path, host, body)
        assert body["error"]["message"] == (
            f"Host {host.decode()!r}: this server answers to 127.0.0.1, localhost, [::1] only "
            "(add names with --allowed-hosts)")
    for host in (b"127.0.0.1:" + port, b"localhost:" + port, b"LocalHost", b"[::1]:" + port):
        assert raw_get(server, path, host)[0] == 200, host


def test_wrong_paths_and_methods_say_where_to_look(server):
    status, _, body = call(server, "/v1/embedding", {"input": "a"})
    assert status == 404 and body["error"]["message"] == (
        "no endpoint POST /v1/embedding: the API is described at /openapi.json")
    status, headers, body = call(server, "/v1/embed", method="GET")
    assert status == 405 and headers.get("allow") == "POST"
    assert body["error"]["message"] == "GET /v1/embed is not allowed: use POST"


def test_service_endpoints(server):
    assert call(server, "/health")[0] == 200
    assert call(server, "/v1/embed", raw=b"{")[0] == 422   # counted in the metrics below
    status, _, body = call(server, "/ready")
    assert status == 200 and body["status"] == "ready"
    status, _, body = call(server, "/v1/models")
    assert body["data"][0] | {"created": 0} == {"id": "elmo-en-small", "object": "model", "created": 0,
                                                 "owned_by": "contextvec", "num_layers": 3, "dim": 256}
    status, _, schema = call(server, "/openapi.json")
    paths = {"/v1/embed", "/v1/embeddings", "/v1/models", "/health", "/ready", "/metrics"}
    assert paths <= set(schema["paths"])
    # HotRoutes answers these before FastAPI; the schema still describes their bodies.
    for path, model in (("/v1/embed", "EmbedRequest"), ("/v1/embeddings", "EmbeddingsRequest")):
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith("/" + model)
    status, headers, body = call(server, "/metrics")
    text = body["text"].decode()
    for name in ("contextvec_requests_total", "contextvec_request_seconds_bucket",
                 "contextvec_queue_sentences", "contextvec_batch_sentences_bucket",
                 "contextvec_batch_padded_tokens_bucket", "contextvec_tokens_total"):
        assert name in text
    assert 'contextvec_requests_total{endpoint="/v1/embed",status="422"}' in text
    # The start-up objects are out of the collector's view (no full collection walks the model).
    assert metric(server, "contextvec_gc_frozen_objects") > 10_000
    assert "python_gc_collections_total" in text
    assert "x-request-id" in {k.lower() for k in headers}


def test_queue_full_timeout_and_dropped_work():
    """A slow request is being embedded and a second waits: with room for two jobs (a job counts
    until its last sentence is taken) the third gets a 429 with Retry-After; both slow ones pass
    their deadline (504) and their remaining batches are dropped; a client that hangs up is
    dropped too (499 in the metrics)."""
    args = ["--threads", "1", "--max-queue", "2", "--request-timeout", "2", "--max-batch-tokens", "512",
            "--max-sentences", "256", "--max-sentence-tokens", "200"]
    rng = random.Random(1)
    slow = {"sentences": [" ".join(rng.choice(WORDS) for _ in range(128)) for _ in range(200)]}
    with ServerProcess(args, env=ENV) as process:
        url = process.url
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(call, url, "/v1/embed", slow)
            wait_for(lambda: metric(url, "contextvec_batch_sentences_count") >= 1, "first batch")
            before = metric(url, "contextvec_queue_sentences")
            second = pool.submit(call, url, "/v1/embed", slow)
            wait_for(lambda: metric(url, "contextvec_queue_sentences") > before, "second request queued")
            status, headers, body = call(url, "/v1/embed", {"sentences": ["a"]})
            assert status == 429 and headers.get("retry-after") == "1", body
            for future in (first, second):
                status, _, body = future.result()
                assert status == 504 and "--request-timeout" in body["error"]["message"], body
        time.sleep(0.5)
        embedded = metric(url, "contextvec_batch_sentences_sum")
        assert embedded < 400, "the work of timed-out requests was not dropped"
        # A client that goes away: its request ends as 499 and its batches stop.
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port)) as sock:
            data = json.dumps(slow).encode()
            sock.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
            time.sleep(0.1)
        wait_for(lambda: metric(url, 'contextvec_requests_total{endpoint="/v1/embed",status="499"}') >= 1,
                 "the disconnect")
        assert call(url, "/v1/embed", {"sentences": ["still", "serving"]})[0] == 200


def test_api_key_and_graceful_sigterm():
    rng = random.Random(2)
    with ServerProcess(["--threads", "1", "--max-batch-tokens", "512"],
                       env={**ENV, "CONTEXTVEC_API_KEY": "s3cret"}) as process:
        url = process.url
        good = {"Authorization": "Bearer s3cret"}
        assert call(url, "/health")[0] == 200
        for path in ("/ready", "/metrics", "/v1/models", "/openapi.json"):
            status, headers, _ = call(url, path)
            assert status == 401 and headers.get("www-authenticate") == "Bearer"
        for wrong in ("Bearer s3cre", "s3cret", "Basic s3cret", "Bearer s3cret2"):
            assert call(url, "/v1/embed", {"sentences": ["a"]}, headers={"Authorization": wrong})[0] == 401
        with pytest.raises(ServerError, match="401"):
            Client(url).embed(["a"])
        assert Client(url, api_key="s3cret").embed(["a b"])[0].shape == (3, 2, 256)
        assert call(url, "/v1/models", headers={"Authorization": "bearer s3cret"})[0] == 200
        # Every 401 is the JSON error, and the schema says so, /metrics' (text/plain) included.
        _, _, schema = call(url, "/openapi.json", headers=good)
        status, headers, _ = call(url, "/metrics")
        assert status == 401 and headers["content-type"] == "application/json"
        for path, operations in schema["paths"].items():
            for operation in operations.values():
                for code, response in operation["responses"].items():
                    if int(code) >= 400:
                        assert list(response["content"]) == ["application/json"], (path, code)

        # SIGTERM while a request is in flight: it is finished, then the process exits 0.
        slow = {"sentences": random_sentences(rng, 64, longest=60)}
        with ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(call, url, "/v1/embed", slow, headers=good)
            time.sleep(0.3)
            process.terminate()
            status, _, body = in_flight.result()
        assert status == 200 and len(body["embeddings"]) == 64
        assert process.wait(30) == 0
        assert "stopped (SIGTERM)" in process.output()
        with pytest.raises(OSError):
            call(url, "/health")
        assert "bank" not in process.output(), "request text must not be logged"


def test_the_openai_client_works_unchanged(server, encoder):
    openai = pytest.importorskip("openai", reason="the openai package is not installed")
    client = openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)
    texts = ["The bank was robbed .", "hi"]
    reply = client.embeddings.create(model="elmo-en-small", input=texts)   # base64 by default
    got = np.array([d.embedding for d in reply.data], dtype=np.float32)
    want = np.stack(encoder.embed(texts, layers="average", pool="mean"))
    assert_same_vectors(got, want, encoder)
    assert reply.usage.prompt_tokens == 6
