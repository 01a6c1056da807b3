"""``POST /v1/answer``: a saved question-answering model served beside the embedding model.

The app on plain ASGI calls in process (the worker thread can be held, so what shares a call is
checked without timing anything), and once as ``contextvec serve --task-model`` over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request

import pytest
import torch
from helpers_asgi import ask, service_of
from qa_saved import save_tiny_qa_model
from tolerance import assert_reordered_close, bert_terms

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("pybase64", reason="the server extra is not installed")

import contextvec  # noqa: E402
from contextvec.engine.worker import WorkerThread  # noqa: E402
from contextvec.server.answer import ServedTask  # noqa: E402
from contextvec.server.app import create_app  # noqa: E402
from contextvec.server.hot import HotRoutes  # noqa: E402
from contextvec.server.process import ServerProcess  # noqa: E402
from contextvec.server.settings import ServerSettings  # noqa: E402
from contextvec.tasks.qa.saved import load_qa_model  # noqa: E402

SHORT = "bob ate a red apple at noon."
# Over the tiny model's 64-piece rows (one piece a letter): read in several windows.
LONG = ("ann swam in the cold lake. tom read a long book today. sue sang a sad song at dusk. "
        "the dog ran far.")
MAX_CONTEXT_CHARS = 400


@pytest.fixture(scope="module")
def qa_dir(own_tiny_bert_dir, tmp_path_factory):
    return save_tiny_qa_model(tmp_path_factory.mktemp("answer-route") / "qa", own_tiny_bert_dir)


def make_app(bert_dir, qa_dir):
    """(app, worker, QA model): the tiny BERT served, with the tiny QA model at /v1/answer; the
    engine not yet started."""
    torch.set_num_threads(1)
    worker = WorkerThread()
    encoder = worker.run(lambda: contextvec.load(bert_dir))
    model = worker.run(lambda: load_qa_model(qa_dir))
    settings = ServerSettings(model_name="tiny-bert", max_context_chars=MAX_CONTEXT_CHARS)
    return create_app(encoder, settings, worker=worker, task=ServedTask("tiny-qa", model)), worker, model


@pytest.fixture(scope="module")
def served(own_tiny_bert_dir, qa_dir):
    app, worker, model = make_app(own_tiny_bert_dir, qa_dir)
    service_of(app).engine.start()
    yield app, worker, model
    service_of(app).engine.close(5)
    worker.close()


def post(app, body: object) -> tuple[int, dict]:
    status, payload = asyncio.run(ask(app, "POST", "/v1/answer", json.dumps(body).encode()))
    return status, json.loads(payload)


def assert_same_answers(got: list[dict], want, model, context: str) -> None:
    """The same spans; scores up to another summation order (a batch pads rows to its longest)."""
    assert [(a["text"], a["start"], a["end"]) for a in got] == [(a.text, a.start, a.end) for a in want]
    pieces = model.windows.max_length
    assert_reordered_close(torch.tensor([a["score"] for a in got]), torch.tensor([a.score for a in want]),
                           terms=bert_terms(model.model.config, pieces))
    assert all(context[a["start"]:a["end"]] == a["text"] != "" for a in got)


def test_answers_are_spans_of_the_context_best_first(served):
    app, _, model = served
    status, body = post(app, {"question": "who swam", "context": LONG, "n_best": 5})
    assert status == 200 and body["model"] == "tiny-qa"
    assert len(body["answers"]) == 5 and set(body["answers"][0]) == {"text", "start", "end", "score"}
    scores = [a["score"] for a in body["answers"]]
    assert scores == sorted(scores, reverse=True)
    assert_same_answers(body["answers"], model.answer("who swam", LONG, 5), model, LONG)
    # The FastAPI route behind the hot path answers the same bytes.
    hot = app
    while not isinstance(hot, HotRoutes):
        hot = hot.app
    request = json.dumps({"question": "who swam", "context": LONG, "n_best": 5}).encode()
    assert asyncio.run(ask(hot.app, "POST", "/v1/answer", request)) == asyncio.run(
        ask(hot, "POST", "/v1/answer", request))


def test_concurrent_questions_share_a_call_and_get_their_own_answers(own_tiny_bert_dir, qa_dir):
    app, worker, model = make_app(own_tiny_bert_dir, qa_dir)
    service = service_of(app)
    asked = [("who ate", SHORT, 2), ("what did tom read", LONG, 2), ("when", SHORT + " " + LONG, 2),
             ("a sad song", LONG, 2), ("who ate", SHORT, 1)]
    gate = threading.Event()
    worker.submit(lambda: gate.wait(10))   # the engine's loop starts behind it: requests queue
    service.engine.start()

    async def scenario() -> list[tuple[int, bytes]]:
        calls = [asyncio.ensure_future(ask(app, "POST", "/v1/answer", json.dumps(
            {"question": q, "context": c, "n_best": n}).encode())) for q, c, n in asked]
        async with asyncio.timeout(10):
            while service.engine.depth < len(asked):
                await asyncio.sleep(0.01)
        gate.set()
        return await asyncio.wait_for(asyncio.gather(*calls), 30)

    try:
        answers = asyncio.run(scenario())
    finally:
        gate.set()
        service.engine.close(5)
        worker.close()
    # The four asking for two answers share one call; the one asking for one runs apart.
    assert (service.engine.stats.batches, service.engine.stats.sentences) == (2, 5)
    for (question, context, n_best), (status, payload) in zip(asked, answers, strict=True):
        assert status == 200
        assert_same_answers(json.loads(payload)["answers"], model.answer(question, context, n_best),
                            model, context)


@pytest.mark.parametrize(("body", "status", "param", "says"), [
    ({"question": " \n", "context": SHORT}, 400, "question", "question: empty or blank text"),
    ({"question": "who", "context": "\t"}, 400, "context", "context: empty or blank text"),
    ({"question": "who", "context": "a" * (MAX_CONTEXT_CHARS + 1)}, 422, "context",
     f"over the limit of {MAX_CONTEXT_CHARS} (--max-context-chars)"),
    ({"question": "who", "context": "\u200b\u200b"}, 422, "context", "its context has no word pieces"),
    ({"question": "who", "context": SHORT, "n_best": 0}, 422, "n_best", "n_best: must be >= 1"),
    ({"question": "who", "context": SHORT, "n_best": 21}, 422, "n_best", "n_best: must be <= 20"),
    ({"question": "who", "context": SHORT, "n_best": "2"}, 422, "n_best", "valid integer"),
    ({"question": "who"}, 422, "context", "context: field required"),
    ({"question": "who", "context": SHORT, "top_k": 2}, 422, "body", "unknown field 'top_k'"),
])
def test_bad_requests_are_one_json_error(served, body, status, param, says):
    app, _, _ = served
    got, payload = post(app, body)
    error = payload["error"]
    assert (got, error["code"]) == (status, status) and says in error["message"]
    assert error["param"] == param


def test_a_lone_surrogate_is_refused(served):
    app, _, _ = served
    raw = b'{"question": "who", "context": "bob \\ud800 ate"}'
    status, payload = asyncio.run(ask(app, "POST", "/v1/answer", raw))
    assert status == 422 and json.loads(payload)["error"]["param"] == "context"


def test_the_schema_states_the_context_limit(served):
    app, _, _ = served
    status, payload = asyncio.run(ask(app, "GET", "/openapi.json"))
    request = json.loads(payload)["components"]["schemas"]["AnswerRequest"]["properties"]
    assert status == 200 and request["context"]["maxLength"] == MAX_CONTEXT_CHARS
    assert (request["n_best"]["minimum"], request["n_best"]["maximum"]) == (1, 20)


def test_without_a_task_model_answer_is_404_and_not_in_the_schema(own_tiny_bert_dir):
    torch.set_num_threads(1)
    app = create_app(contextvec.load(own_tiny_bert_dir), ServerSettings(model_name="tiny-bert"))
    status, payload = post(app, {"question": "who", "context": SHORT})
    assert status == 404 and "--task-model" in payload["error"]["message"]
    _, schema = asyncio.run(ask(app, "GET", "/openapi.json"))
    assert "/v1/answer" not in json.loads(schema)["paths"]


@pytest.mark.slow
def test_serve_task_model_answers_over_http(own_tiny_bert_dir, qa_dir):
    model = load_qa_model(qa_dir)
    args = ["--model", str(own_tiny_bert_dir), "--task-model", str(qa_dir), "--threads", "1", "--no-ui",
            "--max-context-chars", "300"]
    with ServerProcess(args, env={"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": ""}) as server:
        assert "and qa (/v1/answer) loaded" in server.output()

        def call(body: dict) -> tuple[int, dict]:
            request = urllib.request.Request(server.url + "/v1/answer", data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        status, body = call({"question": "what did tom read", "context": LONG, "n_best": 3})
        assert status == 200 and body["model"] == "qa"
        assert_same_answers(body["answers"], model.answer("what did tom read", LONG, 3), model, LONG)
        assert contextvec.Client(server.url).answer("what did tom read", LONG, 3) == body["answers"]
        assert call({"question": "who", "context": "a " * 151})[0] == 422


def test_a_task_model_directory_that_is_none_stops_the_start_in_one_line(own_tiny_bert_dir, capsys):
    from contextvec.cli.main import main

    code = main(["serve", "--model", str(own_tiny_bert_dir), "--task-model", str(own_tiny_bert_dir),
                 "--threads", "1", "--no-ui", "--port", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == (f"contextvec: error: {own_tiny_bert_dir} is not a saved model: "
                                     "task.json is missing")


@pytest.mark.parametrize("limit", [0, -5, True, 2.5])
def test_max_context_chars_must_be_a_positive_whole_number(limit):
    with pytest.raises(ValueError, match="max_context_chars must be a whole number of at least 1"):
        ServerSettings(max_context_chars=limit)
