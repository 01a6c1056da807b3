"""SQuAD-style question answering with BERT: windows, decoding, fine-tuning, saved models, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from contextvec.cli.main import main
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.qa.bert import fine_tune_qa
from contextvec.tasks.qa.decode import best_answers, window_spans
from contextvec.tasks.qa.metric import squad_scores
from contextvec.tasks.qa.record import read_record
from contextvec.tasks.qa.saved import load_qa_model, save_bert_reader
from contextvec.tasks.qa.squad import Answer, Question, SquadData, parse_squad
from contextvec.tasks.qa.windows import WindowSettings, batch_windows, make_windows

CONTEXTS = [
    "bob ate a red apple at noon.",
    "ann swam in the cold lake.",
    "tom read a long book today.",
    "sue sang a sad song at dusk.",
]
QUESTIONS = [("what did bob eat", "red apple"), ("where did ann swim", "cold lake"),
             ("what did tom read", "long book"), ("what did sue sing", "sad song")]


def toy_data() -> SquadData:
    questions = []
    for i, (context, (question, answer)) in enumerate(zip(CONTEXTS, QUESTIONS, strict=True)):
        questions.append(Question(f"q{i}", question, context, (Answer(answer, context.index(answer)),)))
    return SquadData(tuple(questions), tuple(range(len(questions))), "toy")


def test_windows_cover_a_long_context_once_each_and_target_the_answer(own_tiny_bert_dir: Path) -> None:
    tokenizer = WordPieceTokenizer.from_directory(own_tiny_bert_dir)
    context = " ".join(["alpha beta gamma"] * 6) + " the answer is here. " + " ".join(["delta"] * 8)
    start = context.index("here")
    question = Question("long", "where is it", context, (Answer("here", start),))
    settings = WindowSettings(max_length=40, stride=12, max_query=5)
    windows = make_windows([question], tokenizer, settings, train=True)
    assert len(windows) > 3
    assert all(len(w.ids) <= 40 for w in windows)
    assert all(w.ids[1:w.context_at - 1] == windows[0].ids[1:w.context_at - 1] for w in windows)
    assert windows[0].context_at == 5 + 2  # the question cut to max_query pieces
    # every character piece belongs to exactly one window, and windows step by the stride
    owned = [offset for w in windows for offset, mine in zip(w.offsets, w.belongs, strict=True) if mine]
    assert len(owned) == len(set(owned)) == len({o for w in windows for o in w.offsets})
    assert [w.offsets[0][0] for w in windows[:2]] == [0, windows[1].offsets[0][0]]
    answered = [w for w in windows if w.target != (0, 0)]
    assert answered
    for w in answered:
        first, last = (w.offsets[i - w.context_at] for i in w.target)
        assert context[first[0]:last[1]] == "here"
    assert any(w.target == (0, 0) for w in windows)  # windows without the answer point at [CLS]


def test_decoding_keeps_the_best_allowed_span_across_windows(own_tiny_bert_dir: Path) -> None:
    tokenizer = WordPieceTokenizer.from_directory(own_tiny_bert_dir)
    context = "abc def ghi jkl mno pqr stu vwx"
    question = Question("q", "xyz", context, ())
    windows = make_windows([question], tokenizer, WindowSettings(max_length=20, stride=6, max_query=3))
    assert len(windows) >= 2
    batch = batch_windows(windows)
    start = torch.zeros(batch.input_ids.shape)
    end = torch.zeros(batch.input_ids.shape)
    # best in the second window: "def" would win in the first, but is scored lower there
    second = windows[1]
    target = context.index("mno")
    piece = next(i for i, (s, _) in enumerate(second.offsets) if s == target) + second.context_at
    start[1, piece] = 5.0
    end[1, piece + 2] = 4.0
    start[1, 0] = end[1, 0] = 100.0  # [CLS] is never an answer
    found = window_spans(start, end, batch.starts, batch.ends, max_answer_length=30, n_best=3)
    spans = [tuple(t[row].tolist() for t in found) for row in range(len(windows))]
    answers = best_answers(windows, spans, [context], n_best=2)[0]
    assert answers[0].text == "mno" and answers[0].score == 9.0
    assert context[answers[0].start:answers[0].end] == "mno"
    short = window_spans(start, end, batch.starts, batch.ends, max_answer_length=2, n_best=1)
    assert short[2][1].item() < 9.0  # the 3-piece span is over max_answer_length 2


@pytest.fixture(scope="module")
def trained(own_tiny_bert_dir: Path) -> tuple:
    data = toy_data()
    settings = FineTuneSettings(epochs=10, lr=3e-3, batch_size=4, warmup=0.0, progress=False, seed=0)
    report, reader = fine_tune_qa(data, data, own_tiny_bert_dir, settings,
                                  WindowSettings(max_length=64, stride=16, max_query=16))
    return report, reader


def test_fine_tuning_learns_the_answers(trained: tuple) -> None:
    report, reader = trained
    assert report.curve[-1]["train_loss"] < report.curve[0]["train_loss"]
    predictions = reader.predict(toy_data())
    assert squad_scores(toy_data(), predictions)["f1"] >= 75.0
    assert report.dev["f1"] == pytest.approx(100 * max(c["dev_f1"] for c in report.curve), abs=1e-3)


def test_answers_do_not_depend_on_the_batch(trained: tuple) -> None:
    _, reader = trained
    questions = list(toy_data().questions)
    alone = [reader.answer_questions([q])[0] for q in questions]
    together = reader.answer_questions(questions, batch_size=3)
    for a, b in zip(alone, together, strict=True):
        assert (a[0].text, a[0].start, a[0].end) == (b[0].text, b[0].start, b[0].end)
        assert a[0].score == pytest.approx(b[0].score, abs=1e-4)


def test_saved_model_answers_as_trained_and_transformers_reads_it(trained: tuple, own_tiny_bert_dir: Path,
                                                                   tmp_path: Path) -> None:
    _, reader = trained
    saved = save_bert_reader(tmp_path / "qa", reader, base_model=str(own_tiny_bert_dir),
                             reported={"exact_match": 50.0, "f1": 75.0})
    assert read_record(saved).windows == reader.windows
    loaded = load_qa_model(saved)
    assert loaded.predict(toy_data()) == reader.predict(toy_data())
    transformers = pytest.importorskip("transformers")
    theirs = transformers.BertForQuestionAnswering.from_pretrained(saved).eval()
    ids = torch.tensor([[2, 5, 6, 3, 7, 8, 3]])
    ours = reader.model(ids)
    with torch.no_grad():
        out = theirs(input_ids=ids)
    torch.testing.assert_close(out.start_logits, ours.start_logits.detach(), atol=1e-5, rtol=1e-4)


def test_a_saved_record_with_a_bad_field_is_refused(trained: tuple, own_tiny_bert_dir: Path,
                                                    tmp_path: Path) -> None:
    _, reader = trained
    saved = save_bert_reader(tmp_path / "qa", reader, base_model=str(own_tiny_bert_dir), reported={})
    record = json.loads((saved / "task.json").read_text())
    for field, value, message in (("version", 9, "format version 9"), ("kind", "magic", "kind must be"),
                                  ("windows", {"max_length": "x"}, "windows must be"),
                                  ("eval_batch_size", 0, "eval_batch_size")):
        (saved / "task.json").write_text(json.dumps({**record, field: value}))
        with pytest.raises(ValueError, match=message):
            load_qa_model(saved)


def test_train_task_squad_and_predict_from_the_command_line(own_tiny_bert_dir: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "train.json"
    data.write_text(json.dumps(toy_data().to_json()))
    model = tmp_path / "model"
    argv = ["train-task", "squad", "--train", str(data), "--dev", str(data), "--fine-tune", "--model",
            str(own_tiny_bert_dir), "--epochs", "2", "--batch-size", "4", "--max-length", "48",
            "--max-query", "16", "--quiet", "--save-model", str(model),
            "--output", str(tmp_path / "report.json")]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "dev exact match" in out and "saved the model" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["task"] == "squad" and set(report["dev"]) >= {"exact_match", "f1"}
    assert main(["predict", str(model), str(data), str(tmp_path / "predictions.json"), "--score"]) == 0
    predictions = json.loads((tmp_path / "predictions.json").read_text())
    assert set(predictions) == {"q0", "q1", "q2", "q3"}
    assert all(p in toy_data().questions[i].context for i, p in enumerate(predictions.values()))
    assert "squad exact_match" in capsys.readouterr().out


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=3),
     "answer_start 3 does not point at its text"),
    (lambda d: d["data"][0]["paragraphs"][0].update(context="  "), "empty context"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][0].update(id="q0"), "the id is used twice"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("question"), "no 'question' field"),
    (lambda d: d["data"][0]["paragraphs"][0].update(qas={}), "'qas' must be list"),
])
def test_malformed_squad_files_are_refused_in_one_line(change, message: str) -> None:
    document = toy_data().to_json()
    change(document)
    with pytest.raises(ValueError, match=message):
        parse_squad(document, "x.json")


def test_a_file_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    from contextvec.tasks.qa.squad import read_squad

    path = tmp_path / "bad.json"
    path.write_text('{"version": "1.1",\n "data": [}\n')
    with pytest.raises(ValueError, match=r"bad.json, line 2, column \d+: not JSON"):
        read_squad(path)
