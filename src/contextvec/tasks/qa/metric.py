"""SQuAD v1.1's official metric: exact match and token F1, to the last digit of the official script.

The official ``evaluate-v1.1.py`` (distributed with the dataset) scores a predictions file
``{question_id: answer_text}`` against a dataset file; this module computes the same numbers from a
:class:`~contextvec.tasks.qa.squad.SquadData` and a mapping, step for step:

- **Normalisation** (:func:`normalize_answer`), in the script's order: lower case (``str.lower``);
  delete every character of ``string.punctuation`` (ASCII only: curly quotes and dashes stay);
  replace the whole words ``a``, ``an`` and ``the`` by a space (a regular expression with ``\\b``,
  so Unicode word boundaries, after punctuation is gone: ``"the-end"`` has become ``"theend"`` and
  keeps its article); split on any whitespace and join with single spaces. There is no Unicode
  normalisation: a decomposed accent differs from a composed one.
- **Exact match** (:func:`exact_match`): the two normalised strings are equal (so an answer that
  normalises to nothing, ``"The."``, matches a reference that does too).
- **F1** (:func:`token_f1`): the normalised strings split on whitespace; the overlap counts each
  token as often as it occurs in both (``Counter`` intersection); no overlap scores 0, which is
  also what an empty prediction or an empty normalised reference scores (the script tests the
  overlap before it divides by either length).
- **Per question**: the best of each measure over all the question's reference answers.
- **Totals**: sums in dataset order, then ``100.0 * total / questions`` over every question of the
  dataset. A question with no prediction scores 0 on both (the script prints one line per such
  question to stderr; :func:`squad_scores` counts them as ``"unanswered"``); predictions for ids
  not in the dataset are ignored, as the script ignores them.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

from contextvec.tasks.qa.squad import SquadData
from contextvec.tasks.readers.lines import located_decode_errors, open_task_file

PREDICTIONS_EXPECTED = 'a SQuAD predictions JSON file ({"question_id": "answer text", ...})'
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLE = re.compile(r"\b(?:a|an|the)\b")
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}


def normalize_answer(text: str) -> str:
    """``text`` as the official script compares answers: lower-cased, ASCII punctuation deleted,
    the words a/an/the dropped, whitespace runs made single spaces and trimmed."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLE.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> bool:
    """Whether the two answers are equal once normalised."""
    return normalize_answer(prediction) == normalize_answer(reference)


def token_f1(prediction: str, reference: str) -> float:
    """The F1 of the normalised tokens of ``prediction`` against those of ``reference``, in [0, 1];
    0 where they share no token (an empty side included), as in the official script."""
    predicted = normalize_answer(prediction).split()
    wanted = normalize_answer(reference).split()
    shared = sum((Counter(predicted) & Counter(wanted)).values())
    if shared == 0:
        return 0.0
    precision = shared / len(predicted)
    recall = shared / len(wanted)
    return 2 * precision * recall / (precision + recall)


def best_exact_match(prediction: str, references: Sequence[str]) -> bool:
    """Whether ``prediction`` matches any of ``references`` (at least one)."""
    return max(exact_match(prediction, r) for r in references)


def best_f1(prediction: str, references: Sequence[str]) -> float:
    """The highest :func:`token_f1` of ``prediction`` over ``references`` (at least one)."""
    return max(token_f1(prediction, r) for r in references)


def squad_scores(data: SquadData, predictions: Mapping[str, str]) -> dict:
    """The official script's scores of ``predictions`` (question id -> answer text) on ``data``.

    Returns ``{"exact_match": float, "f1": float, "questions": int, "unanswered": int}``: exact
    match and F1 as percentages over all ``questions`` of ``data``, each float equal to the one
    the official script prints; ``unanswered`` is how many of them have no prediction (each
    scored 0). A question without reference answers cannot be scored (the official script fails
    on it): a ``ValueError`` names it.
    """
    if not data.questions:
        raise ValueError(f"{data.source}: no questions to score")
    matches = 0
    # Summed one question at a time in dataset order, as the script does: sum() of floats rounds
    # differently on Python 3.12 and later (compensated summation), and so would another order.
    f1_total = 0.0
    unanswered = 0
    for question in data.questions:
        if not question.answers:
            raise ValueError(f"{data.source}, question {question.id!r}: no reference answers to score "
                             "against")
        if question.id not in predictions:
            unanswered += 1
            continue
        references = [answer.text for answer in question.answers]
        prediction = predictions[question.id]
        matches += best_exact_match(prediction, references)
        f1_total += best_f1(prediction, references)
    count = len(data.questions)
    return {"exact_match": 100.0 * matches / count, "f1": 100.0 * f1_total / count,
            "questions": count, "unanswered": unanswered}


class _DuplicateId(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateId(f"question id {key!r} is given twice")
        found[key] = value
    return found


def read_predictions(path: str | os.PathLike) -> dict[str, str]:
    """A predictions file (plain or ``.gz``): one JSON object of question id -> answer text, the
    official script's input. Refused in one line naming the file: not UTF-8 JSON, not an object,
    an answer that is not a string, an id given twice (the script would keep the last silently).
    """
    with located_decode_errors(path, PREDICTIONS_EXPECTED), open_task_file(path) as stream:
        try:
            value = json.load(stream, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {error.lineno}, column {error.colno}: not JSON ({error.msg}); "
                             f"expected {PREDICTIONS_EXPECTED}") from None
        except _DuplicateId as error:
            raise ValueError(f"{path}: {error}; expected {PREDICTIONS_EXPECTED}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: the JSON value is {_JSON_TYPES[type(value)]}, not an object; "
                         f"expected {PREDICTIONS_EXPECTED}")
    for qid, answer in value.items():
        if not isinstance(answer, str):
            raise ValueError(f"{path}, question {qid!r}: the answer is {_JSON_TYPES[type(answer)]}, not a "
                             f"string; expected {PREDICTIONS_EXPECTED}")
    return value
