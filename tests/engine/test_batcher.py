"""The engine's batching rule through ``Engine.submit`` (what the server calls): idle requests run
at once, queued ones batch, dead ones drop."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest
import torch

from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.engine import Engine, EngineSettings, QueueFull
from contextvec.engine.worker import WorkerThread


class Recording(Encoder):
    """Vectors = the token's length, per layer; records each forward's sentences; can be held."""

    num_layers, output_dim = 2, 3

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__()
        self.calls: list[list[list[str]]] = []
        self.threads: set[int] = set()
        self.gate = threading.Event()
        self.gate.set()
        self.fail_on = fail_on

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        self.gate.wait(10)
        self.calls.append([list(s) for s in sentences])
        self.threads.add(threading.get_ident())
        if any(self.fail_on in s for s in sentences):
            raise ValueError(f"cannot encode {self.fail_on!r}")
        width = max(len(s) for s in sentences)
        out = torch.zeros(2, len(sentences), width, 3)
        for b, sentence in enumerate(sentences):
            for t, token in enumerate(sentence):
                out[:, b, t] = len(token)
        mask = torch.tensor([[t < len(s) for t in range(width)] for s in sentences])
        return EncoderOutput(out, mask)


def batcher(encoder: Encoder, worker: WorkerThread | None = None, **settings) -> Engine:
    return Engine(encoder, EngineSettings(**settings), worker=worker)


def test_a_lone_request_does_not_wait_for_partners():
    encoder = Recording()
    b = batcher(encoder, max_wait_ms=2000)
    start = time.monotonic()
    result = b.submit([["ab", "c"]], time.monotonic() + 10).result(5)
    assert time.monotonic() - start < 1.0
    assert result[0].shape == (2, 2, 3) and result[0][0, :, 0].tolist() == [2, 1]
    b.close(5)


def test_queued_requests_share_a_forward_and_get_their_own_rows():
    encoder = Recording()
    b = batcher(encoder, max_wait_ms=10, max_batch_tokens=1000)
    encoder.gate.clear()                       # hold the worker inside the first forward
    first = b.submit([["x"]], time.monotonic() + 10)
    time.sleep(0.2)
    jobs = [b.submit([["a" * (i + 1)] * (i + 1)], time.monotonic() + 10) for i in range(4)]
    encoder.gate.set()
    results = [job.result(5) for job in jobs]
    first.result(5)
    assert len(encoder.calls) == 2 and len(encoder.calls[1]) == 4
    for i, result in enumerate(results):
        assert result[0].shape == (2, i + 1, 3) and (result[0] == i + 1).all()
    b.close(5)


def _busy_forward(b: Engine, encoder: Recording, partners: int) -> None:
    """A first forward held while ``partners`` jobs queue: when it ends, the server holds
    1 + ``partners`` jobs, the clients the batcher then expects back."""
    encoder.gate.clear()
    first = b.submit([["x"]], time.monotonic() + 10)
    deadline = time.monotonic() + 5
    while b.depth and time.monotonic() < deadline:  # until the worker has taken it alone
        time.sleep(0.01)
    for i in range(partners):
        b.submit([["p" * (i + 1)]], time.monotonic() + 10)
    encoder.gate.set()
    first.result(5)


def test_the_clients_a_forward_answered_are_waited_for_and_no_longer():
    encoder = Recording()
    b = batcher(encoder, max_wait_ms=2000)
    _busy_forward(b, encoder, partners=3)      # 4 jobs in the server when the forward ended
    time.sleep(0.2)
    assert len(encoder.calls) == 1             # 3 queued: the fourth client is expected back
    start = time.monotonic()
    last = b.submit([["back"]], time.monotonic() + 10)
    last.result(5)
    assert time.monotonic() - start < 1.0      # all 4 back: no waiting out max_wait_ms
    assert len(encoder.calls) == 2 and len(encoder.calls[1]) == 4
    b.close(5)


def test_a_request_to_an_idle_server_runs_at_once_after_a_busy_forward():
    encoder = Recording()
    b = batcher(encoder, max_wait_ms=500)
    _busy_forward(b, encoder, partners=3)
    # The 3 queued run after max_wait_ms without the fourth; max_wait_ms after that, it is idle.
    time.sleep(1.3)
    assert len(encoder.calls) == 2
    start = time.monotonic()
    b.submit([["alone"]], time.monotonic() + 10).result(5)
    assert time.monotonic() - start < 0.25
    b.close(5)


def test_budget_splits_a_large_request_and_queue_bound_gives_queue_full():
    encoder = Recording()
    b = batcher(encoder, max_batch_tokens=8, max_queue=1)
    encoder.gate.clear()
    b.submit([["x"]], time.monotonic() + 10)
    time.sleep(0.2)
    big = b.submit([["t"] * 4] * 5, time.monotonic() + 10)     # 20 tokens: 2 sentences a batch
    with pytest.raises(QueueFull):
        b.submit([["y"]], time.monotonic() + 10)
    encoder.gate.set()
    assert len(big.result(5)) == 5
    assert [len(c) for c in encoder.calls[1:]] == [2, 2, 1]
    b.close(5)


def test_dead_jobs_are_dropped_and_a_failing_job_does_not_fail_its_partners():
    encoder = Recording(fail_on="BAD")
    b = batcher(encoder, max_wait_ms=50)
    encoder.gate.clear()
    b.submit([["x"]], time.monotonic() + 10)
    time.sleep(0.2)
    expired = b.submit([["late"]], time.monotonic() - 1)
    gone = b.submit([["gone"]], time.monotonic() + 10)
    gone.cancel()
    bad = b.submit([["BAD"]], time.monotonic() + 10)
    good = b.submit([["fine", "words"]], time.monotonic() + 10)
    encoder.gate.set()
    assert good.result(5)[0].shape == (2, 2, 3)
    with pytest.raises(ValueError, match="BAD"):
        bad.result(5)
    seen = [token for call in encoder.calls for sentence in call for token in sentence]
    assert "late" not in seen and "gone" not in seen and not expired.done()
    b.close(5)


def test_worker_thread_runs_in_order_and_hands_back_results_and_errors():
    worker = WorkerThread("test-worker")
    seen: list[int] = []
    futures = [worker.submit(lambda i=i: seen.append(i) or threading.get_ident()) for i in range(5)]
    idents = {f.result(5) for f in futures}
    assert seen == [0, 1, 2, 3, 4]
    assert len(idents) == 1 and threading.get_ident() not in idents
    with pytest.raises(ZeroDivisionError):
        worker.run(lambda: 1 / 0)
    assert worker.run(lambda: "still alive") == "still alive"


def test_forwards_run_on_the_worker_that_loaded_the_model():
    """One thread for all torch work (engine/worker.py): the forwards run on the thread given."""
    worker = WorkerThread("test-torch")
    loader = worker.run(threading.get_ident)
    encoder = Recording()
    b = batcher(encoder, worker=worker)
    jobs = [b.submit([["a", "bb"]], time.monotonic() + 10) for _ in range(3)]
    for job in jobs:
        job.result(5)
    assert encoder.threads == {loader}
    b.close(5)
    assert not b.accepting


def test_without_a_budget_or_batching_each_call_is_one_forward_as_given():
    """What ``contextvec embed`` relies on: a call of sentences sorted longest first (ties in
    any order) runs as one forward pass of exactly those rows, in that order, however long."""
    encoder = Recording()
    b = batcher(encoder, max_batch_tokens=None, batching=False)
    encoder.gate.clear()
    b.submit([["x"]], time.monotonic() + 10)
    time.sleep(0.2)
    cut = [["t2", "u"] * 300, ["b", "c", "d"], ["a", "a", "a"], ["z", "y"], ["q", "r"], ["k"]]
    jobs = [b.submit(cut, time.monotonic() + 10), b.submit([["s"]] * 3, time.monotonic() + 10)]
    encoder.gate.set()
    assert [len(job.result(5)) for job in jobs] == [6, 3]
    assert encoder.calls[1:] == [cut, [["s"]] * 3]
    b.close(5)


def test_an_engine_ends_the_thread_it_made_and_keeps_the_one_it_was_given():
    given = WorkerThread("test-given")
    before = set(threading.enumerate())
    own = batcher(Recording())
    own.submit([["a"]], time.monotonic() + 10).result(5)
    shared = batcher(Recording(), worker=given)
    shared.submit([["a"]], time.monotonic() + 10).result(5)
    own.close(5)
    shared.close(5)
    own.start()  # a closed engine stays closed
    assert not own.accepting
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set()
    assert given.run(lambda: "still alive") == "still alive"
    given.close()
    with pytest.raises(RuntimeError, match="closed"):
        given.submit(lambda: None)


class Pieces:
    """A runner the way a service hands one over: a bound method, a new object on each access."""

    def __init__(self) -> None:
        self.calls: list[list] = []

    def embed(self, items: list) -> list:
        self.calls.append(list(items))
        return [np.full(2, len(item), dtype=np.float32) for item in items]


def test_jobs_of_one_kind_share_a_forward_whatever_their_run_object():
    encoder, runner = Recording(), Pieces()
    assert runner.embed is not runner.embed   # what a queue compared by identity never batched
    b = batcher(encoder, max_wait_ms=10, max_batch_tokens=1000)
    encoder.gate.clear()                       # hold the worker inside a first forward
    first = b.submit([["x"]], time.monotonic() + 10)
    time.sleep(0.2)
    jobs = [b.submit([[1] * (i + 1)], time.monotonic() + 10, runner.embed, kind="pieces") for i in range(4)]
    other = b.submit([[7, 7]], time.monotonic() + 10, runner.embed, kind="other")
    alone = b.submit([[8]], time.monotonic() + 10, runner.embed, kind="alone")
    encoder.gate.set()
    results = [job.result(5) for job in jobs]
    first.result(5)
    assert other.result(5)[0].tolist() == [2, 2] and alone.result(5)[0].tolist() == [1, 1]
    assert runner.calls == [[[1], [1, 1], [1, 1, 1], [1, 1, 1, 1]], [[7, 7]], [[8]]]
    assert [r[0].tolist() for r in results] == [[i + 1, i + 1] for i in range(4)]
    b.close(5)


def test_a_run_needs_a_hashable_kind_and_a_kind_its_run():
    """Calls group by their kind, never by the identity of their run object."""
    b = batcher(Recording())
    with pytest.raises(ValueError, match="a run needs the kind"):
        b.submit([[1]], time.monotonic() + 10, Pieces().embed)
    with pytest.raises(ValueError, match="a kind its run"):
        b.submit([["a"]], time.monotonic() + 10, kind="pieces")
    with pytest.raises(TypeError, match="unhashable"):
        b.submit([[1]], time.monotonic() + 10, Pieces().embed, kind=["pieces"])
    assert b.depth == 0
    b.close(5)
