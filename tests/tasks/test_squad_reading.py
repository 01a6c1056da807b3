"""How a saved question-answering model reads at inference: ``load_qa_model(max_length=,
precision=)`` and the same options of ``contextvec answer`` and ``contextvec predict``."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from helpers_squad import TINY_SPAN, toy_squad
from tolerance import BF16_EPS

from contextvec.cli.main import main
from contextvec.encoders import cpu as cpu_module
from contextvec.encoders.bert.finetune import BertForQuestionAnswering
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.precision import Precision, precision_of
from contextvec.tasks.qa.bert import BertReader
from contextvec.tasks.qa.frozen import SpanTrainSettings, train_span_model
from contextvec.tasks.qa.saved import load_qa_model, save_bert_reader
from contextvec.tasks.qa.span_model import SpanSettings
from contextvec.tasks.qa.span_saved import save_span_model
from contextvec.tasks.qa.squad import Question
from contextvec.tasks.qa.windows import WindowSettings, make_windows
from contextvec.tasks.train import TrainSettings

SHORT_ROWS = WindowSettings(max_length=40, stride=16, max_query=16)
"""Rows shorter than the tiny BERT's 64 positions: the context below takes two of them."""
QUESTION = "who swam"  # 7 pieces (a piece a letter)
CONTEXT = "ann swam in the cold lake. tom read a long book."  # 38 pieces: 30 fit a 40-piece row


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny matrices: a second thread only waits


def save_reader(directory, bert_dir, windows: WindowSettings):
    model = BertForQuestionAnswering.from_pretrained(bert_dir, seed=0)
    reader = BertReader(model, WordPieceTokenizer.from_directory(bert_dir), windows)
    return save_bert_reader(directory, reader, base_model=str(bert_dir), reported={})


@pytest.fixture(scope="module")
def saved(own_tiny_bert_dir, tmp_path_factory):
    """The same weights saved twice: with 40-piece rows, and with rows of all 64 positions."""
    root = tmp_path_factory.mktemp("reading")
    return (save_reader(root / "rows40", own_tiny_bert_dir, SHORT_ROWS),
            save_reader(root / "rows64", own_tiny_bert_dir, dataclasses.replace(SHORT_ROWS, max_length=64)))


def windows_of(model, question: str, context: str) -> int:
    return len(make_windows([Question("q", question, context, ())], model.tokenizer, model.windows))


def spans(answers) -> list[tuple[str, int, int, float]]:
    return [(a.text, a.start, a.end, a.score) for a in answers]


def test_max_length_reads_a_long_context_in_one_window_as_a_model_saved_so(saved):
    rows40, rows64 = saved
    as_saved, longer = load_qa_model(rows40), load_qa_model(rows40, max_length=64)
    assert longer.windows == dataclasses.replace(SHORT_ROWS, max_length=64)  # the stride stays
    assert (windows_of(as_saved, QUESTION, CONTEXT), windows_of(longer, QUESTION, CONTEXT)) == (2, 1)
    got = longer.answer(QUESTION, CONTEXT, 3)
    assert spans(got) == spans(load_qa_model(rows64).answer(QUESTION, CONTEXT, 3))
    assert all(CONTEXT[a.start:a.end] == a.text != "" for a in got)


@pytest.mark.parametrize(("max_length", "message"), [
    (65, "max_length 65 is over the model's 64 positions"),
    (18, "max_length 18 leaves no room for context after a question of max_query 16 pieces"),
    (0, "max_length must be a whole number of pieces >= 1, not 0"),
    (True, "max_length must be a whole number of pieces >= 1, not True"),
    (50.0, "max_length must be a whole number of pieces >= 1, not 50.0"),
])
def test_a_max_length_that_does_not_fit_is_one_line(saved, max_length, message):
    with pytest.raises(ValueError, match=message) as error:
        load_qa_model(saved[0], max_length=max_length)
    assert "\n" not in str(error.value)


def test_int8_converts_the_encoder_and_keeps_the_head_and_the_best_score_close(saved):
    exact, int8 = load_qa_model(saved[1]), load_qa_model(saved[1], precision="int8")
    assert precision_of(int8.model.bert) is Precision.INT8 and precision_of(int8.model.head) is Precision.FP32
    assert precision_of(exact.model) is Precision.FP32
    got, want = int8.answer(QUESTION, CONTEXT, 3), exact.answer(QUESTION, CONTEXT, 3)
    assert len(got) == 3 and all(CONTEXT[a.start:a.end] == a.text != "" for a in got)
    # The best score is a max over start + end logits, so it moves by at most their error: int8
    # rounds weights to 1/127 and activations to 1/63 of their row's largest, about 2% of the
    # magnitude of what each layer gives; the best score is the sum of two such logits.
    assert abs(got[0].score - want[0].score) <= 0.05 * abs(want[0].score)


def pretend_cpu(monkeypatch, flags: set[str]) -> None:
    """contextvec sees a CPU of ``flags`` (the kernels run anywhere; only the check reads them)."""
    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: frozenset(flags))
    for name in cpu_module.ISA_CAP_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_bf16_is_refused_in_one_line_where_the_cpu_emulates_it(saved, monkeypatch):
    pretend_cpu(monkeypatch, {"avx2", "fma"})
    with pytest.raises(ValueError, match="precision bf16: this CPU has no native bf16") as error:
        load_qa_model(saved[1], precision="bf16")
    assert "\n" not in str(error.value)


def test_bf16_loads_and_answers_where_the_cpu_has_it(saved, monkeypatch):
    pretend_cpu(monkeypatch, {"avx2", "avx512f", "avx512bw", "avx512_bf16"})
    bf16, exact = load_qa_model(saved[1], precision="bf16"), load_qa_model(saved[1])
    assert precision_of(bf16.model) is Precision.BF16
    got, want = bf16.answer(QUESTION, CONTEXT), exact.answer(QUESTION, CONTEXT)
    # inputs and weights rounded to 8 bits (BF16_EPS each), their errors of mixed signs: a few
    # BF16_EPS of the logits, and the best score is the sum of two of them
    assert abs(got[0].score - want[0].score) <= 4 * BF16_EPS * abs(want[0].score)


def test_an_unknown_precision_is_one_line(saved):
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, not 'fp16'"):
        load_qa_model(saved[1], precision="fp16")


# -- the span model over frozen features: no windows; precision is its encoder's --------------

ONE_EPOCH = TrainSettings(epochs=1, batch_size=4, progress=False)


@pytest.fixture(scope="module")
def span_without_encoder(tmp_path_factory):
    data = toy_squad(4)
    _, reader = train_span_model(data, data, None,
                                 SpanTrainSettings(TINY_SPAN, SpanSettings(modelling_layers=1), ONE_EPOCH))
    return save_span_model(tmp_path_factory.mktemp("span") / "model", reader)


@pytest.mark.parametrize(("options", "message"), [
    ({"max_length": 64}, "max_length is for fine-tuned BERT readers"),
    ({"precision": "int8"}, "precision int8 converts a model's encoder; this span model reads no "
                            "contextual vectors"),
])
def test_a_span_model_refuses_what_it_cannot_take_in_one_line(span_without_encoder, options, message):
    with pytest.raises(ValueError, match=message) as error:
        load_qa_model(span_without_encoder, **options)
    assert str(error.value).startswith(str(span_without_encoder)) and "\n" not in str(error.value)


def test_int8_converts_a_span_models_encoder(own_tiny_dir, tmp_path):
    import contextvec
    from contextvec.features import FeatureSettings
    from contextvec.tasks.saved import encoder_reference

    data = toy_squad(4)
    encoder = contextvec.load(own_tiny_dir)
    settings = SpanTrainSettings(
        dataclasses.replace(TINY_SPAN, placement="input"), SpanSettings(modelling_layers=1), ONE_EPOCH,
        FeatureSettings(cache_dir=tmp_path / "features", batch_size=4))
    _, reader = train_span_model(data, data, encoder, settings)
    saved = save_span_model(tmp_path / "model", reader, encoder=encoder,
                            encoder_ref=encoder_reference(str(own_tiny_dir)))
    loaded = load_qa_model(saved, precision="int8")
    assert precision_of(loaded.encoder) is Precision.INT8
    question = data.questions[0]
    answers = loaded.answer(question.question, question.context, 2)
    assert len(answers) == 2 and all(question.context[a.start:a.end] == a.text for a in answers)


# -- the command line ----------------------------------------------------------------------------

def test_answer_max_length_and_precision_reach_the_model(saved, tmp_path, capsys):
    rows40, rows64 = saved
    context = tmp_path / "context.txt"
    context.write_text(CONTEXT, encoding="utf-8")
    ask = ["--question", QUESTION, "--context", str(context), "--n-best", "3", "--json"]
    assert main(["answer", str(rows40), *ask, "--max-length", "64"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == [a.to_dict() for a in load_qa_model(rows64).answer(QUESTION, CONTEXT, 3)]
    assert main(["answer", str(rows64), *ask, "--precision", "int8"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == [a.to_dict() for a in load_qa_model(rows64, precision="int8").answer(QUESTION, CONTEXT, 3)]


ASKED = [Question("q1", QUESTION, CONTEXT, ()), Question("q2", "what did tom read", CONTEXT, ())]


def squad_file(path) -> str:
    """``ASKED`` as a SQuAD v1.1 file (answers left out: only to be answered)."""
    qas = [{"id": q.id, "question": q.question} for q in ASKED]
    value = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


def test_predict_max_length_and_precision_reach_the_model(saved, tmp_path):
    rows40, rows64 = saved
    data = squad_file(tmp_path / "squad.json")
    out = tmp_path / "predictions.json"
    assert main(["predict", str(rows40), data, str(out), "--max-length", "64", "--quiet"]) == 0
    assert json.loads(out.read_text()) == load_qa_model(rows64).predict(ASKED)
    assert main(["predict", str(rows64), data, str(out), "--precision", "int8", "--overwrite"]) == 0
    assert json.loads(out.read_text()) == load_qa_model(rows64, precision="int8").predict(ASKED)


@pytest.mark.parametrize(("command", "extra", "message"), [
    ("answer", ["--max-length", "65"], "max_length 65 is over the model's 64 positions"),
    ("answer", ["--precision", "fp16"], "argument --precision: invalid choice: 'fp16'"),
    ("answer", ["--max-length", "0"], "argument --max-length: expected an integer > 0, got 0"),
    ("predict", ["--max-length", "18"], "max_length 18 leaves no room for context"),
    ("predict-other", ["--precision", "int8"], "--max-length and --precision are for question-answering "
                                               "models (train-task squad)"),
])
def test_bad_reading_options_are_one_line_and_exit_2(saved, own_tiny_bert_dir, tmp_path, capsys,
                                                     command, extra, message):
    context = tmp_path / "context.txt"
    context.write_text(CONTEXT, encoding="utf-8")
    if command == "answer":
        args = ["answer", str(saved[0]), "--question", QUESTION, "--context", str(context)]
    else:
        model = saved[0] if command == "predict" else own_tiny_bert_dir
        args = ["predict", str(model), squad_file(tmp_path / "squad.json"), str(tmp_path / "out.json")]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("contextvec") and message in err and "\n" not in err
    assert not (tmp_path / "out.json").exists()
