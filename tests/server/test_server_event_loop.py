"""The app on plain ASGI calls, in process, where the worker thread and the tokenizer can be held:
what runs on the event loop and what shares a forward pass, checked without timing anything."""

from __future__ import annotations

import asyncio
import json
import threading

import numpy as np
import pytest
import torch
from helpers_asgi import ask, service_of
from tolerance import assert_reordered_close, bert_terms

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("pybase64", reason="the server extra is not installed")

import contextvec  # noqa: E402
from contextvec.engine.worker import WorkerThread  # noqa: E402
from contextvec.server.app import create_app  # noqa: E402
from contextvec.server.settings import ServerSettings  # noqa: E402
from contextvec.text.tokenize import Tokenizer, TokenizerName  # noqa: E402


class HeldMoses:
    """Moses, held inside its first call until ``release`` is set (a long text being split)."""

    def __init__(self) -> None:
        self.moses = Tokenizer(TokenizerName.MOSES)
        self.entered, self.release, self.done = threading.Event(), threading.Event(), threading.Event()

    def __call__(self, line: str) -> list[list[str]]:
        self.entered.set()
        self.release.wait(3)   # bounded: on the event loop it would hold everything this long
        self.done.set()
        return self.moses(line)


def test_health_answers_while_a_request_is_being_tokenized():
    torch.set_num_threads(1)
    app = create_app(contextvec.load(), ServerSettings(tokenizer="moses"))
    service = service_of(app)
    held = service.tokenizers[TokenizerName.MOSES] = HeldMoses()
    text = "Mr. Smith's bank (the old one) wasn't robbed."

    async def scenario() -> tuple[bool, tuple[int, bytes], tuple[int, bytes]]:
        body = json.dumps({"sentences": [text]}).encode()
        embed = asyncio.ensure_future(ask(app, "POST", "/v1/embed", body))
        while not held.entered.is_set():
            await asyncio.sleep(0.01)
        health = await asyncio.wait_for(ask(app, "GET", "/health"), 10)
        still_splitting = not held.done.is_set()
        held.release.set()
        return still_splitting, health, await asyncio.wait_for(embed, 30)

    service.engine.start()
    try:
        still_splitting, health, embed = asyncio.run(scenario())
    finally:
        service.engine.close(5)
    assert health == (200, b'{"status":"ok"}')
    assert still_splitting, "/health waited for the tokenizer: it ran on the event loop"
    assert embed[0] == 200
    assert json.loads(embed[1])["embeddings"][0]["tokens"] == Tokenizer("moses")(text)[0]


def test_openai_requests_of_a_bert_model_share_a_forward_pass(own_tiny_bert_dir):
    """Each /v1/embeddings request of a BERT model runs its pieces through the sentence encoder;
    queued together they are one forward pass, whichever request's call made them."""
    torch.set_num_threads(1)
    worker = WorkerThread()
    encoder = worker.run(lambda: contextvec.load(own_tiny_bert_dir))
    app = create_app(encoder, ServerSettings(model_name="tiny-bert"), worker=worker)
    service = service_of(app)
    gate = threading.Event()
    worker.submit(lambda: gate.wait(10))   # the engine's loop starts behind it: requests queue
    service.engine.start()
    texts = ["a bank", "the river bank was wet", "robbed", "a man with a gun"]

    async def scenario() -> list[tuple[int, bytes]]:
        calls = [asyncio.ensure_future(ask(app, "POST", "/v1/embeddings", json.dumps({"input": t}).encode()))
                 for t in texts]
        while service.engine.depth < len(texts):
            await asyncio.sleep(0.01)
        gate.set()
        return await asyncio.wait_for(asyncio.gather(*calls), 30)

    try:
        answers = asyncio.run(scenario())
        metrics = asyncio.run(ask(app, "GET", "/metrics"))[1].decode()
    finally:
        gate.set()
        service.engine.close(5)
        worker.close()
    assert [status for status, _ in answers] == [200] * 4
    series = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
              if line.startswith("contextvec_batch_sentences_")}
    assert (series["contextvec_batch_sentences_count"], series["contextvec_batch_sentences_sum"]) == (1, 4)
    assert service.engine.stats.batches == 1 and service.engine.stats.sentences == 4
    sentences = service.sentence_encoder
    rows = sentences.pieces([text.split() for text in texts])
    # Batched together: the same sums in other orders, over up to the longest row's pieces.
    terms = bert_terms(encoder.model.config, max(len(row) for row in rows))
    for row, (_, body) in zip(rows, answers, strict=True):   # each its own vector
        got = np.asarray(json.loads(body)["data"][0]["embedding"], dtype=np.float32)
        assert_reordered_close(got, sentences.embed_pieces([row])[0], terms=terms)
