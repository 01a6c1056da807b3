"""SQuAD v1.1's metric: the official script's printed scores to the last digit, on committed
predictions (tests/data/squad, made by its make_fixture.py), and its normalisation and F1 rules."""

from __future__ import annotations

import gzip
import json
import unicodedata
from pathlib import Path

import pytest
from conftest import EXCERPTS, SHARED

from contextvec.tasks.qa.metric import (
    best_exact_match,
    best_f1,
    exact_match,
    normalize_answer,
    read_predictions,
    squad_scores,
    token_f1,
)
from contextvec.tasks.qa.squad import parse_squad, read_squad

FIXTURE = EXCERPTS / "squad"
CASES = {
    "excerpt": (FIXTURE / "excerpt.json", "excerpt-"),
    "even-articles": (SHARED / "tasks" / "squad-v1.1" / "dev-v1.1-even-articles.json.gz", ""),
}


@pytest.mark.parametrize("case", CASES)
def test_scores_equal_the_official_script_to_every_printed_digit(case):
    dataset, prefix = CASES[case]
    data = read_squad(dataset)
    predictions = read_predictions(FIXTURE / f"{prefix}predictions.json")
    printed = (FIXTURE / f"{prefix}expected.json").read_text(encoding="utf-8")
    unanswered = (FIXTURE / f"{prefix}expected-stderr.txt").read_text(encoding="utf-8").splitlines()

    scores = squad_scores(data, predictions)

    # The script prints json.dumps of its dict: the floats' repr, every digit.
    assert json.dumps({"exact_match": scores["exact_match"], "f1": scores["f1"]}) + "\n" == printed
    assert scores["questions"] == len(data) and scores["unanswered"] == len(unanswered) > 0
    missing = {q.id for q in data.questions if q.id not in predictions}
    assert {line.split()[2] for line in unanswered} == missing


def _data(*questions: tuple[str, list[str]]) -> object:
    context = "Denver Broncos beat the Carolina Panthers in Super Bowl 50 at Levi's Stadium."
    qas = [{"id": qid, "question": "Who?",
            "answers": [{"text": text, "answer_start": context.index(text)} for text in answers]}
           for qid, answers in questions]
    return parse_squad({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}, "toy.json")


def test_normalisation_lowers_drops_ascii_punctuation_then_whole_word_articles_and_collapses_spaces():
    assert normalize_answer("  The Denver\tBroncos!\n") == "denver broncos"
    assert normalize_answer("a Another THEATRE, an anthem; the") == "another theatre anthem"
    # punctuation goes first, so an article glued by a hyphen is no longer a word of its own
    assert normalize_answer("the-end") == "theend"
    assert normalize_answer("The. A, an!") == ""
    # string.punctuation is ASCII: curly quotes and dashes stay
    assert normalize_answer("\u201cGolden\u201d \u2014 The") == "\u201cgolden\u201d \u2014"
    # Unicode word boundaries, Unicode whitespace, no Unicode normalisation
    assert normalize_answer("theÉmile") == "theémile"
    assert normalize_answer("Super\u00a0Bowl") == "super bowl"
    assert normalize_answer(unicodedata.normalize("NFD", "Café")) != normalize_answer("Café")


def test_f1_counts_shared_tokens_with_multiplicity_and_an_empty_side_scores_zero():
    assert token_f1("the Denver Broncos.", "Denver broncos") == 1.0
    assert token_f1("Denver", "Denver Broncos") == 2 * 1.0 * 0.5 / 1.5
    assert token_f1("Denver Denver", "Denver Broncos") == 0.5
    assert token_f1("", "Denver Broncos") == 0.0
    assert token_f1("Denver Broncos", "The.") == 0.0
    # both normalise to nothing: an exact match whose F1 is 0, as the official script has it
    assert exact_match("the", "A.") and token_f1("the", "A.") == 0.0
    assert not exact_match("Denver", "Denver Broncos")


def test_each_measure_takes_its_best_reference():
    references = ["Broncos", "the Denver Broncos team", "Panthers"]
    assert best_f1("Denver Broncos", references) == token_f1("Denver Broncos", references[1]) == 0.8
    assert not best_exact_match("Denver Broncos", references)
    assert best_exact_match("panthers", references) and best_f1("panthers", references) == 1.0


def test_scores_are_percentages_over_all_questions_a_missing_one_scoring_zero():
    data = _data(("q1", ["Broncos", "Denver Broncos"]), ("q2", ["Carolina Panthers"]),
                 ("q3", ["Super Bowl 50"]))
    scores = squad_scores(data, {"q1": "denver broncos", "q2": "the Panthers", "not a question": "x"})
    assert scores == {"exact_match": 100.0 * 1 / 3, "f1": 100.0 * (1.0 + 2 * 0.5 / 1.5) / 3,
                      "questions": 3, "unanswered": 1}


def test_a_question_without_references_cannot_be_scored():
    data = _data(("q1", ["Broncos"]), ("q2", []))
    with pytest.raises(ValueError, match=r"toy.json, question 'q2': no reference answers"):
        squad_scores(data, {"q1": "Broncos", "q2": "Broncos"})


def test_read_predictions_reads_plain_and_gzip(tmp_path):
    text = '\ufeff{"q1": "Denver Broncos", "q2": "caf\u00e9"}'
    (tmp_path / "p.json").write_text(text, encoding="utf-8")
    (tmp_path / "p.json.gz").write_bytes(gzip.compress(text.encode()))
    expected = {"q1": "Denver Broncos", "q2": "caf\u00e9"}
    assert read_predictions(tmp_path / "p.json") == read_predictions(tmp_path / "p.json.gz") == expected


@pytest.mark.parametrize(("content", "message"), [
    (b'{"q1": "Denver",\n "q2": }', r"p.json, line 2, column 8: not JSON"),
    (b'["Denver"]', r"p.json: the JSON value is an array, not an object"),
    (b'{"q1": "Denver", "q2": 50}', r"p.json, question 'q2': the answer is a number, not a string"),
    (b'{"q1": {"text": "Denver"}}', r"p.json, question 'q1': the answer is an object, not a string"),
    (b'{"q1": "Denver", "q1": "Carolina"}', r"p.json: question id 'q1' is given twice"),
    (b'{"q1": "Caf\xe9"}', r"p.json, line 1: not UTF-8 text \(byte 0xe9\)"),
])
def test_read_predictions_refuses_a_malformed_file_in_one_line(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as error:
        read_predictions(path)
    assert "\n" not in str(error.value) and "predictions JSON file" in str(error.value)


def test_read_predictions_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.json"):
        read_predictions(Path(tmp_path, "absent.json"))
