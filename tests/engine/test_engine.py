"""contextvec.Engine through its public names: many threads and coroutines get the vectors
``Encoder.embed`` gives, their calls share forward passes, the queue bound and close hold."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import contextvec
from contextvec.engine import Engine, EngineSettings, QueueFull, ShuttingDown
from contextvec.engine.worker import WorkerThread

SENTENCES = [
    "The bank was robbed .", "I sat on the river bank", "Colorless green ideas sleep furiously",
    "a", "", "Time flies like an arrow ; fruit flies like a banana .", "Dogs bark", "We went home .",
]
EPS = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def encoder(own_tiny_dir):
    return contextvec.load(own_tiny_dir)


def assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """Same dtype and shape; values equal up to float32 summation order: a batch's shape picks
    the order a matrix product sums in, and each reordering moves a sum by a few ulps of its
    terms' magnitude, over the model's few layers."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == np.float32 and g.shape == w.shape
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        assert float(np.abs(g - w).max(initial=0.0)) <= 64 * EPS * scale


def held(encoder, **settings) -> tuple[Engine, threading.Event]:
    """An engine whose worker thread is busy until the returned event is set: calls made before
    then wait in its queue together."""
    worker = WorkerThread("test-engine")
    gate = threading.Event()
    worker.submit(lambda: gate.wait(30))
    return Engine(encoder, EngineSettings(**settings), worker=worker), gate


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


@pytest.mark.parametrize(("layers", "pool"), [("all", None), ("average", "mean"), ("top", "first")])
def test_many_threads_get_what_encoder_embed_gives_one_by_one(encoder, layers, pool):
    want = [encoder.embed([s], layers=layers, pool=pool)[0] for s in SENTENCES]
    calls = [i % len(SENTENCES) for i in range(4 * len(SENTENCES))]
    with Engine(encoder) as engine, ThreadPoolExecutor(16) as pool_:
        got = list(pool_.map(lambda i: engine.embed([SENTENCES[i]], layers=layers, pool=pool)[0], calls))
    assert_same(got, [want[i] for i in calls])


def test_many_coroutines_get_what_encoder_embed_gives(encoder):
    want = encoder.embed(SENTENCES, batch_size=1, layers="top")

    async def main(engine: Engine) -> list[np.ndarray]:
        results = await asyncio.gather(*(engine.aembed([s], layers="top") for s in SENTENCES))
        return [r[0] for r in results]

    with Engine(encoder) as engine:
        got = asyncio.run(main(engine))
    assert_same(got, want)


@pytest.mark.parametrize(("batching", "forwards"), [(True, 1), (False, 6)])
def test_calls_waiting_together_share_one_forward_unless_batching_is_off(encoder, batching, forwards):
    sentences = [s for s in SENTENCES if s][:6]
    engine, gate = held(encoder, batching=batching)
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(engine.embed, [s]) for s in sentences]
        wait_for(lambda: engine.depth == 6)
        gate.set()
        got = [f.result(10)[0] for f in futures]
    engine.close()
    assert engine.stats.batches == forwards and engine.stats.sentences == 6
    assert_same(got, [encoder.embed([s])[0] for s in sentences])


def test_a_full_queue_refuses_the_next_call(encoder):
    engine, gate = held(encoder, max_queue=2)
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(engine.embed, [s]) for s in SENTENCES[:2]]
        wait_for(lambda: engine.depth == 2)
        with pytest.raises(QueueFull, match="queue is full"):
            engine.embed(["one more"])
        gate.set()
        assert [f.result(10)[0].shape[1] for f in futures] == [5, 6]
    engine.close()


def test_close_runs_the_queued_calls_and_refuses_new_ones(encoder):
    engine, gate = held(encoder)
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(engine.embed, [s]) for s in SENTENCES[:4]]
        wait_for(lambda: engine.depth == 4)
        closer = threading.Thread(target=engine.close)
        closer.start()
        wait_for(lambda: not engine.accepting)
        with pytest.raises(ShuttingDown):
            engine.embed(["too late"])
        gate.set()
        closer.join(10)
        assert not closer.is_alive()
        assert [f.result(10)[0].shape[1] for f in futures] == [5, 6, 5, 1]
    assert engine.stats.sentences == 4


def test_a_call_past_its_timeout_raises_and_its_sentences_are_dropped(encoder):
    engine, gate = held(encoder)
    with pytest.raises(TimeoutError, match="within 0.2 s"):
        engine.embed(["never run"], timeout=0.2)
    gate.set()
    assert engine.embed(["runs"])[0].shape[1] == 1
    engine.close()
    assert engine.stats.sentences == 1


def test_a_cancelled_coroutine_drops_its_sentences(encoder):
    engine, gate = held(encoder)

    async def main() -> None:
        task = asyncio.ensure_future(engine.aembed(["never run"]))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    gate.set()
    engine.close(10)
    assert engine.stats.sentences == 0


def test_bad_arguments_are_refused_before_anything_is_queued(encoder):
    with Engine(encoder) as engine:
        with pytest.raises(TypeError, match="single str"):
            engine.embed("The bank")
        with pytest.raises(ValueError, match="layers must be one of"):
            engine.embed(["The bank"], layers="middle")
        with pytest.raises(ValueError, match="pool must be one of"):
            engine.embed(["The bank"], pool="sum")
    assert engine.stats.batches == 0


@pytest.mark.parametrize("settings", [{"max_batch_tokens": 0}, {"max_queue": True},
                                      {"max_wait_ms": -1.0}, {"max_wait_ms": float("inf")}])
def test_settings_out_of_range_are_refused(settings):
    with pytest.raises(ValueError, match=next(iter(settings))):
        EngineSettings(**settings)


def test_no_budget_is_a_setting_of_its_own():
    assert EngineSettings(max_batch_tokens=None, batching=False).max_batch_tokens is None
    with pytest.raises(ValueError, match="max_batch_tokens must be None or a whole number"):
        EngineSettings(max_batch_tokens=2.5)
    with pytest.raises(ValueError, match="max_queue must be a whole number"):
        EngineSettings(max_queue=None)


def test_the_engine_is_a_top_level_name():
    assert contextvec.Engine is Engine
