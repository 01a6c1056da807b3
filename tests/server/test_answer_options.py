"""``contextvec serve --task-model DIR --task-max-length N --task-precision P``: how the served
question-answering model reads, apart from the served encoder's ``--precision``."""

from __future__ import annotations

import json
import urllib.request

import pytest
import torch
from tolerance import assert_reordered_close, bert_terms

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")

from contextvec.cli.main import main  # noqa: E402
from contextvec.encoders.bert.finetune import BertForQuestionAnswering  # noqa: E402
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer  # noqa: E402
from contextvec.encoders.precision import Precision  # noqa: E402
from contextvec.server.process import ServerProcess  # noqa: E402
from contextvec.server.serve import ServerProcessSettings  # noqa: E402
from contextvec.tasks.qa.bert import BertReader  # noqa: E402
from contextvec.tasks.qa.saved import load_qa_model, save_bert_reader  # noqa: E402
from contextvec.tasks.qa.windows import WindowSettings  # noqa: E402

QUESTION = "who swam"
CONTEXT = "ann swam in the cold lake. tom read a long book."  # two 40-piece rows, one of 64


@pytest.fixture(scope="module")
def qa_dir(own_tiny_bert_dir, tmp_path_factory):
    """The tiny BERT with a seeded span head, saved with rows of 40 of its 64 positions."""
    model = BertForQuestionAnswering.from_pretrained(own_tiny_bert_dir, seed=0)
    reader = BertReader(model, WordPieceTokenizer.from_directory(own_tiny_bert_dir),
                        WindowSettings(max_length=40, stride=16, max_query=16))
    return save_bert_reader(tmp_path_factory.mktemp("serve-reading") / "qa", reader,
                            base_model=str(own_tiny_bert_dir), reported={})


@pytest.mark.parametrize("options", [{"task_max_length": 64}, {"task_precision": "int8"}])
def test_task_reading_options_without_a_task_model_are_refused(options):
    with pytest.raises(ValueError, match="--task-max-length and --task-precision are for --task-model"):
        ServerProcessSettings(**options)


def test_task_precision_is_typed_and_checked_once(qa_dir):
    settings = ServerProcessSettings(task_model=str(qa_dir), task_precision="int8")
    assert settings.task_precision is Precision.INT8
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, not 'fp16'"):
        ServerProcessSettings(task_model=str(qa_dir), task_precision="fp16")
    with pytest.raises(ValueError, match="max_length must be a whole number of pieces >= 1, not 0"):
        ServerProcessSettings(task_model=str(qa_dir), task_max_length=0)


def test_a_task_max_length_over_the_models_positions_stops_the_start_in_one_line(
        own_tiny_bert_dir, qa_dir, capsys):
    torch.set_num_threads(1)
    code = main(["serve", "--model", str(own_tiny_bert_dir), "--task-model", str(qa_dir),
                 "--task-max-length", "65", "--threads", "1", "--no-ui", "--port", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == "contextvec: error: max_length 65 is over the model's 64 positions"


@pytest.mark.slow
def test_the_served_task_model_reads_with_the_task_options(own_tiny_bert_dir, qa_dir):
    want = load_qa_model(qa_dir, max_length=64, precision="int8")
    args = ["--model", str(own_tiny_bert_dir), "--task-model", str(qa_dir), "--task-max-length", "64",
            "--task-precision", "int8", "--threads", "1", "--no-ui"]
    with ServerProcess(args, env={"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": ""}) as server:
        request = urllib.request.Request(
            server.url + "/v1/answer", headers={"Content-Type": "application/json"},
            data=json.dumps({"question": QUESTION, "context": CONTEXT, "n_best": 3}).encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            got = json.loads(response.read())["answers"]
    expected = want.answer(QUESTION, CONTEXT, 3)
    assert [(a["text"], a["start"], a["end"]) for a in got] == [(a.text, a.start, a.end) for a in expected]
    # One 64-piece row each side; the same kernels, up to another summation order.
    assert_reordered_close(torch.tensor([a["score"] for a in got]), torch.tensor([a.score for a in expected]),
                           terms=bert_terms(want.model.config, 64))
