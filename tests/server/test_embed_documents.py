"""``/v1/embed``'s document fields: ``context``, ``offsets``, ``chunk_tokens`` and ``spans`` give
what the documents room gives in Python. In process, on plain ASGI calls."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import torch
from helpers_asgi import ask, service_of

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("pybase64", reason="the server extra is not installed")

import contextvec  # noqa: E402
from contextvec.documents import DocumentSettings, embed_document  # noqa: E402
from contextvec.server.app import create_app  # noqa: E402
from contextvec.server.settings import ServerSettings  # noqa: E402

LINES = ["The bank was robbed .", "We sat on the  bank of the river ."]
TEXT = "\n".join(LINES)
SPACES = TEXT.index("  bank")


@pytest.fixture(scope="module")
def served(own_tiny_dir):
    torch.set_num_threads(1)
    encoder = contextvec.load(own_tiny_dir)
    app = create_app(encoder, ServerSettings(model_name="tiny"))
    service = service_of(app)
    service.engine.start()
    yield app, encoder
    service.engine.close(5)


def post(app, payload: dict) -> tuple[int, dict]:
    status, body = asyncio.run(ask(app, "POST", "/v1/embed", json.dumps(payload).encode()))
    return status, json.loads(body)


def test_document_context_and_offsets(served):
    app, encoder = served
    status, got = post(app, {"sentences": LINES, "context": "document", "offsets": True, "layers": "top"})
    assert status == 200, got
    want = embed_document(encoder, TEXT, DocumentSettings(context="document", layers="top"))
    for item, vectors, offsets in zip(got["embeddings"], want.vectors, want.offsets, strict=True):
        np.testing.assert_array_equal(np.asarray(item["vectors"], dtype=np.float32), vectors)
        start = TEXT.index(LINES[item["index"]])
        assert item["offsets"] == (offsets - start).tolist()
    assert [LINES[1][s:e] for s, e in got["embeddings"][1]["offsets"]] == LINES[1].split()
    status, plain = post(app, {"sentences": LINES, "layers": "top"})
    assert "offsets" not in plain["embeddings"][0]
    assert plain["embeddings"][0]["vectors"] != got["embeddings"][0]["vectors"]


def test_chunk_tokens_and_spans_pool_after_the_pass(served):
    app, encoder = served
    settings = {"context": "document", "chunk_tokens": 3, "layers": "average"}
    status, got = post(app, {"sentences": LINES, **settings})
    assert status == 200, got
    want = embed_document(encoder, TEXT, DocumentSettings(**settings))
    assert got["embeddings"] == []
    assert [[c["first"], c["stop"]] for c in got["chunks"]] == want.chunk_tokens.tolist()
    assert [[c["start"], c["end"]] for c in got["chunks"]] == want.chunk_offsets.tolist()
    vectors = np.asarray([c["vector"] for c in got["chunks"]], dtype=np.float32)
    np.testing.assert_array_equal(vectors, want.chunks)
    river = TEXT.index("bank of")
    status, got = post(app, {"sentences": LINES, "spans": [[river, river + 7]], "pool": "max"})
    assert status == 200, got
    want = embed_document(encoder, TEXT, DocumentSettings(pool="max"), spans=[(river, river + 7)])
    assert got["chunks"][0]["shape"] == [encoder.num_layers, encoder.output_dim]
    np.testing.assert_array_equal(np.asarray(got["chunks"][0]["vector"], dtype=np.float32), want.chunks[0])


@pytest.mark.parametrize(("payload", "message"), [
    ({"spans": [[0, 2]], "chunk_tokens": 2}, "not both"),
    ({"spans": [[SPACES, SPACES + 2]]}, r"spans\[0\]: \(\d+, \d+\) covers no token"),
    ({"spans": [[0, 999]]}, "not inside the text"),
    ({"context": "paragraph"}, "context"),
    ({"chunk_tokens": 0}, "chunk_tokens"),
])
def test_bad_document_fields_are_422_naming_the_field(served, payload, message):
    app, _ = served
    status, got = post(app, {"sentences": LINES, **payload})
    assert status == 422
    assert __import__("re").search(message, json.dumps(got)), got


def test_spans_need_string_sentences(served):
    app, _ = served
    status, got = post(app, {"sentences": [["a", "b"]], "spans": [[0, 1]]})
    assert status == 422 and "need every sentence as a string" in json.dumps(got)


def embeddings(app, payload: dict) -> tuple[int, dict]:
    status, body = asyncio.run(ask(app, "POST", "/v1/embeddings", json.dumps(payload).encode()))
    return status, json.loads(body)


def test_openai_embeddings_late_chunks_are_items_of_their_text(served):
    app, encoder = served
    texts = [TEXT, "Another text here ."]
    status, got = embeddings(app, {"input": texts, "chunk_tokens": 4, "context": "document"})
    assert status == 200, got
    settings = DocumentSettings(context="document", chunk_tokens=4, layers="average")
    want = [embed_document(encoder, t, settings) for t in texts]
    assert [(d["index"], d["chunk"]) for d in got["data"]] == [
        (i, k) for i, w in enumerate(want) for k in range(len(w.chunks))]
    for item in got["data"]:
        doc = want[item["index"]]
        assert [item["start"], item["end"]] == doc.chunk_offsets[item["chunk"]].tolist()
        np.testing.assert_allclose(np.asarray(item["embedding"], dtype=np.float32), doc.chunks[item["chunk"]],
                                   rtol=0, atol=1e-6)
    river = TEXT.index("bank of")
    status, got = embeddings(app, {"input": [TEXT], "spans": [[[river, river + 7], [0, 3]]]})
    assert status == 200 and [(d["start"], d["end"]) for d in got["data"]] == [(river, river + 7), (0, 3)]


@pytest.mark.parametrize(("payload", "status", "message"), [
    ({"input": ["a b"], "spans": [[[0, 1]]], "chunk_tokens": 2}, 422, "not both"),
    ({"input": ["a b", "c"], "spans": [[[0, 1]]]}, 422, "1 lists for 2 texts"),
    ({"input": ["a  b"], "spans": [[[1, 2]]]}, 422, r"spans\[0\]: \(1, 2\) covers no token"),
    ({"input": ["a b"], "context": "document"}, 422, "document context is for late chunking"),
])
def test_bad_openai_chunk_fields_name_the_field(served, payload, status, message):
    app, _ = served
    got_status, got = embeddings(app, payload)
    assert got_status == status and __import__("re").search(message, got["error"]["message"]), got
