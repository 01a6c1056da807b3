"""SQuAD's contexts and questions as word tokens that know their characters in the original text.

The span model reads moses tokens (:class:`~contextvec.text.tokenize.Tokenizer` ``"moses"``, as
the GLUE raw-text tasks) and answers with the characters of the context from its first token's
start to its last token's end, so every token carries its ``[start, end)`` in the string it came
from. sacremoses may alter a token (it drops control characters, splits a combining accent off
its letter): tokens are found in the text in order, exactly where they can be, and otherwise by
a character alignment of the tokens with the text
(:func:`~contextvec.text.offsets.align_tokens`).

A training answer becomes the tokens overlapping its characters (:func:`answer_tokens`); an
answer that starts or ends inside a token (``"1990s"`` answered ``"1990"``) takes the whole
token, and :attr:`SquadTokens.inexact` counts those answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextvec.tasks.qa.squad import SquadData
from contextvec.text.offsets import TokenizedText, align_sentences
from contextvec.text.tokenize import Tokenizer


def tokenize_text(text: str, tokenizer: Tokenizer) -> TokenizedText:
    """``text`` as tokens with their characters
    (:func:`~contextvec.text.offsets.align_sentences`): the whole text goes to the tokenizer at
    once, a line break is whitespace; the QA models read all sentences as one token list
    (:attr:`TokenizedText.tokens`)."""
    return align_sentences(text, tokenizer(text))


def answer_tokens(context: TokenizedText, start: int, end: int) -> tuple[int, int, bool]:
    """``(first, last, exact)``: the tokens overlapping characters ``[start, end)`` of the
    context (both included), and whether they begin and end exactly there.

    Raises:
        ValueError: no token overlaps the characters (they were all dropped by the tokenizer).
    """
    inside = [i for i, (s, e) in enumerate(context.spans) if s < end and e > start]
    if not inside:
        raise ValueError(f"characters {start}:{end} ({context.text[start:end]!r}) are in no token")
    first, last = inside[0], inside[-1]
    return first, last, context.characters(first, last) == (start, end)


@dataclass(frozen=True)
class SquadTokens:
    """A :class:`~contextvec.tasks.qa.squad.SquadData` tokenized: each distinct context once
    (``contexts``, in order of first use; ``context_of[i]`` is question ``i``'s), each question,
    and for labelled data each question's first answer as ``(first, last)`` context tokens
    (``answers``, else None) with ``exact[i]``: whether that answer begins and ends at token
    boundaries."""

    contexts: tuple[TokenizedText, ...]
    context_of: tuple[int, ...]
    questions: tuple[TokenizedText, ...]
    answers: tuple[tuple[int, int], ...] | None
    exact: tuple[bool, ...] | None

    @property
    def inexact(self) -> int:
        """How many answers do not begin and end at token boundaries."""
        return sum(not e for e in self.exact or ())


def tokenize_squad(data: SquadData, tokenizer: Tokenizer | None = None) -> SquadTokens:
    """Tokenize every context (once) and question of ``data`` (moses tokens by default) and, where
    every question has an answer, locate the first answer's tokens.

    Raises:
        ValueError: a context or question without any token, or an answer in no token, naming
            the question.
    """
    tokenizer = tokenizer or Tokenizer("moses")
    index: dict[str, int] = {}
    contexts: list[TokenizedText] = []
    context_of, questions = [], []
    answers: list[tuple[int, int]] | None = [] if data.labeled else None
    exacts: list[bool] = []
    for q in data.questions:
        where = f"{data.source}, question {q.id!r}"
        if q.context not in index:
            index[q.context] = len(contexts)
            contexts.append(tokenize_text(q.context, tokenizer))
            if not len(contexts[-1]):
                raise ValueError(f"{where}: the context has no tokens")
        context = contexts[index[q.context]]
        context_of.append(index[q.context])
        question = tokenize_text(q.question, tokenizer)
        if not len(question):
            raise ValueError(f"{where}: the question has no tokens")
        questions.append(question)
        if answers is not None:
            answer = q.answers[0]
            try:
                first, last, exact = answer_tokens(context, answer.start, answer.end)
            except ValueError as error:
                raise ValueError(f"{where}: answer {answer.text!r}: {error}") from None
            answers.append((first, last))
            exacts.append(exact)
    if answers is None:
        return SquadTokens(tuple(contexts), tuple(context_of), tuple(questions), None, None)
    return SquadTokens(tuple(contexts), tuple(context_of), tuple(questions), tuple(answers), tuple(exacts))
