"""``contextvec answer``: a saved question-answering model asked one question on a context file."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from qa_saved import save_tiny_qa_model

from contextvec.cli.main import main
from contextvec.tasks.qa.saved import load_qa_model

CONTEXT = ("bob ate a red apple at noon. ann swam in the cold lake. tom read a long book today. "
           "sue sang a sad song at dusk.")


@pytest.fixture(scope="module")
def qa_dir(own_tiny_bert_dir, tmp_path_factory) -> Path:
    return save_tiny_qa_model(tmp_path_factory.mktemp("answer") / "qa", own_tiny_bert_dir)


def answer_json(capsys, *args: str) -> list[dict]:
    assert main(["answer", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_answers_are_spans_of_the_context_best_first(qa_dir, tmp_path, capsys):
    context = tmp_path / "context.txt"
    context.write_text(CONTEXT, encoding="utf-8")
    got = answer_json(capsys, str(qa_dir), "--question", "what did bob eat", "--context", str(context),
                      "--n-best", "4")
    assert len(got) == 4
    for item in got:
        assert CONTEXT[item["start"]:item["end"]] == item["text"] != ""
    scores = [item["score"] for item in got]
    assert scores == sorted(scores, reverse=True)
    want = load_qa_model(qa_dir).answer("what did bob eat", CONTEXT, 4)
    assert got == [a.to_dict() for a in want]


def test_offsets_count_the_characters_of_the_file_as_it_is(qa_dir, tmp_path, capsys):
    # Windows line breaks are kept (no newline translation) and a byte-order mark is dropped.
    text = CONTEXT.replace(". ", ".\r\n")
    context = tmp_path / "crlf.txt"
    context.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    got = answer_json(capsys, str(qa_dir), "--question", "who swam", "--context", str(context),
                      "--n-best", "3")
    assert [a.to_dict() for a in load_qa_model(qa_dir).answer("who swam", text, 3)] == got
    assert all(text[a["start"]:a["end"]] == a["text"] for a in got)


def test_context_from_stdin_answers_as_from_a_file(qa_dir, tmp_path, capsys, monkeypatch):
    context = tmp_path / "context.txt"
    context.write_text(CONTEXT, encoding="utf-8")
    from_file = answer_json(capsys, str(qa_dir), "--question", "who sang", "--context", str(context))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(CONTEXT.encode("utf-8"))))
    assert answer_json(capsys, str(qa_dir), "--question", "who sang", "--context", "-") == from_file


def test_lines_give_each_answer_with_its_offsets_and_score(qa_dir, tmp_path, capsys):
    context = tmp_path / "context.txt"
    context.write_text(CONTEXT, encoding="utf-8")
    assert main(["answer", str(qa_dir), "--question", "who read", "--context", str(context),
                 "--n-best", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    want = load_qa_model(qa_dir).answer("who read", CONTEXT, 2)
    assert lines == [f"{a.text}\t(characters {a.start}-{a.end}, score {a.score:.4f})" for a in want]


def test_a_question_over_max_query_pieces_is_cut_to_its_first_pieces(qa_dir, tmp_path, capsys):
    # Each letter is a piece of the tiny vocabulary: "abcd" is 4 pieces, max_query is 16.
    context = tmp_path / "context.txt"
    context.write_text(CONTEXT, encoding="utf-8")
    long = answer_json(capsys, str(qa_dir), "--question", " ".join(["abcd"] * 200), "--context",
                       str(context), "--n-best", "3")
    cut = answer_json(capsys, str(qa_dir), "--question", " ".join(["abcd"] * 4), "--context",
                      str(context), "--n-best", "3")
    assert long == cut


@pytest.mark.parametrize(("case", "message"), [
    ("blank question", "the question is empty"),
    ("blank context", "the context is empty"),
    ("not UTF-8", "bad.txt: not UTF-8 text (byte 4: invalid start byte)"),
    ("missing context", "--context"),
    ("context is a directory", "is a directory"),
    ("not a QA model", "is not a saved model: task.json is missing"),
])
def test_bad_input_is_one_line(qa_dir, own_tiny_bert_dir, tmp_path, capsys, case, message):
    good = tmp_path / "context.txt"
    good.write_text(CONTEXT, encoding="utf-8")
    (tmp_path / "blank.txt").write_text(" \n\t\n", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"bob \xff ate")
    model, question, context = str(qa_dir), "who ate", str(good)
    if case == "blank question":
        question = "  "
    elif case == "blank context":
        context = str(tmp_path / "blank.txt")
    elif case == "not UTF-8":
        context = str(tmp_path / "bad.txt")
    elif case == "missing context":
        context = str(tmp_path / "absent.txt")
    elif case == "context is a directory":
        context = str(tmp_path)
    else:
        model = str(own_tiny_bert_dir)
    assert main(["answer", model, "--question", question, "--context", context]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("contextvec: error: ") and message in err and "\n" not in err
