"""SQuAD v1.1 files: questions on paragraphs, answered by spans of the paragraph.

The layout is the official one (``{"version": "1.1", "data": [article, ...]}``; an article has a
``title`` and ``paragraphs``, each a ``context`` and its ``qas``: ``id``, ``question`` and
``answers``, each ``{"text", "answer_start"}`` with ``answer_start`` a character offset into the
context). Training takes the first answer of each question (the reference implementations do);
scoring takes every answer as a reference. A file may hold questions without answers (a file
to predict); it cannot be trained or scored on.

Refused with one line naming the file and the question (or article): a file that is not JSON
or not this layout, a missing or mistyped field, an empty context or question, a duplicate
question id, an answer whose text is not the context's characters at its ``answer_start``.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from contextvec.tasks.readers.lines import located_decode_errors, open_task_file

EXPECTED = 'a SQuAD v1.1 JSON file ({"version": ..., "data": [{"title", "paragraphs": [...]}]})'
DEV_ARTICLES_SEED = 13
"""The seed of :func:`carve_dev_by_article` (fixed, so every run carves the same articles)."""
DEV_ARTICLES_FRACTION = 0.15
"""The share of articles :func:`carve_dev_by_article` makes dev: enough questions for a stable F1
from a file of a few dozen articles."""


@dataclass(frozen=True)
class Answer:
    """A reference answer: its text and its first character in the context."""

    text: str
    start: int

    @property
    def end(self) -> int:
        """One past its last character."""
        return self.start + len(self.text)


@dataclass(frozen=True)
class Question:
    """One question on one context; ``answers`` empty where the file gives none."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]
    title: str = ""


@dataclass(frozen=True)
class SquadData:
    """A file's questions in file order, with the article each came from (``articles[i]`` is the
    index of question ``i``'s article, so splits can be made by article)."""

    questions: tuple[Question, ...]
    articles: tuple[int, ...]
    source: str
    version: str = "1.1"

    def __len__(self) -> int:
        return len(self.questions)

    @property
    def labeled(self) -> bool:
        """Whether every question has an answer (what training and scoring need)."""
        return all(q.answers for q in self.questions)

    @property
    def num_articles(self) -> int:
        return len(set(self.articles))

    def select_articles(self, keep: set[int], source: str) -> SquadData:
        """The questions of the articles in ``keep``, in file order."""
        pairs = [(q, a) for q, a in zip(self.questions, self.articles, strict=True) if a in keep]
        return SquadData(tuple(q for q, _ in pairs), tuple(a for _, a in pairs), source, self.version)

    def first(self, n: int | None) -> SquadData:
        """The first ``n`` questions (all with None)."""
        if n is None:
            return self
        return SquadData(self.questions[:n], self.articles[:n], self.source, self.version)

    def to_json(self) -> dict:
        """The official layout again (articles, paragraphs and questions in this data's order)."""
        data: list[dict] = []
        last: tuple[int, str] | None = None
        for q, article in zip(self.questions, self.articles, strict=True):
            if not data or data[-1]["_article"] != article:
                data.append({"_article": article, "title": q.title, "paragraphs": []})
                last = None
            paragraphs = data[-1]["paragraphs"]
            if last != (article, q.context):
                paragraphs.append({"context": q.context, "qas": []})
                last = (article, q.context)
            paragraphs[-1]["qas"].append({"id": q.id, "question": q.question, "answers": [
                {"text": a.text, "answer_start": a.start} for a in q.answers]})
        for article in data:
            del article["_article"]
        return {"version": self.version, "data": data}


def _field(value: dict, name: str, kind: type, where: str) -> object:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, found {type(value).__name__}")
    if name not in value:
        raise ValueError(f"{where}: no {name!r} field")
    found = value[name]
    if not isinstance(found, kind) or (kind is int and isinstance(found, bool)):
        raise ValueError(f"{where}: {name!r} must be {kind.__name__}, not {type(found).__name__}")
    return found


def _answers(qa: dict, context: str, where: str) -> tuple[Answer, ...]:
    answers = []
    for k, answer in enumerate(_field(qa, "answers", list, where) if "answers" in qa else []):
        at = f"{where}, answer {k}"
        text = _field(answer, "text", str, at)
        start = _field(answer, "answer_start", int, at)
        if not text.strip():
            raise ValueError(f"{at}: empty answer text")
        if not 0 <= start <= len(context) - len(text) or context[start:start + len(text)] != text:
            found = context[max(start, 0):max(start, 0) + len(text)]
            raise ValueError(f"{at}: answer_start {start} does not point at its text {text!r} in the context "
                             f"(found {found!r} there)")
        answers.append(Answer(text, start))
    return tuple(answers)


def parse_squad(value: object, source: str) -> SquadData:
    """A SQuAD v1.1 document already parsed from JSON (see the module docstring)."""
    if not isinstance(value, dict) or not isinstance(value.get("data"), list):
        raise ValueError(f"{source}: not {EXPECTED}")
    questions: list[Question] = []
    articles: list[int] = []
    seen: set[str] = set()
    for a, article in enumerate(value["data"]):
        where = f"{source}, article {a}"
        title = article.get("title", "") if isinstance(article, dict) else ""
        for p, paragraph in enumerate(_field(article, "paragraphs", list, where)):
            at = f"{where}, paragraph {p}"
            context = _field(paragraph, "context", str, at)
            if not context.strip():
                raise ValueError(f"{at}: empty context")
            for qa in _field(paragraph, "qas", list, at):
                qid = _field(qa, "id", str, at)
                here = f"{source}, question {qid!r}"
                if qid in seen:
                    raise ValueError(f"{here}: the id is used twice")
                seen.add(qid)
                question = _field(qa, "question", str, here)
                if not question.strip():
                    raise ValueError(f"{here}: empty question")
                questions.append(Question(qid, question, context, _answers(qa, context, here), str(title)))
                articles.append(a)
    if not questions:
        raise ValueError(f"{source}: no questions")
    return SquadData(tuple(questions), tuple(articles), source, str(value.get("version", "1.1")))


def read_squad(path: str | os.PathLike, max_questions: int | None = None) -> SquadData:
    """The questions of a SQuAD v1.1 file (plain or ``.gz``), the first ``max_questions`` of them
    if given."""
    with located_decode_errors(path, EXPECTED), open_task_file(path) as stream:
        try:
            value = json.load(stream)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {error.lineno}, column {error.colno}: not JSON ({error.msg}); "
                             f"expected {EXPECTED}") from None
    return parse_squad(value, str(path)).first(max_questions)


def carve_dev_by_article(data: SquadData, fraction: float = DEV_ARTICLES_FRACTION,
                         seed: int = DEV_ARTICLES_SEED) -> tuple[SquadData, SquadData]:
    """(train, dev): a seeded ``fraction`` of the articles (at least one) are dev, whole, so no
    paragraph's questions fall on both sides."""
    articles = sorted(set(data.articles))
    if len(articles) < 2:
        raise ValueError(f"{data.source}: one article cannot be split by article; give --dev")
    count = min(len(articles) - 1, max(1, round(fraction * len(articles))))
    dev = set(random.Random(seed).sample(articles, count))
    return (data.select_articles(set(articles) - dev, f"{data.source} (train articles)"),
            data.select_articles(dev, f"{data.source} (dev articles {sorted(dev)})"))


def write_predictions(path: str | os.PathLike, predictions: dict[str, str]) -> None:
    """The official predictions file, ``{question_id: answer_text}``, written atomically."""
    from contextvec.io.atomic import atomic_path

    with atomic_path(Path(path)) as tmp:
        Path(tmp).write_text(json.dumps(predictions, ensure_ascii=False) + "\n", encoding="utf-8")

