"""SQuAD's contexts and questions as word tokens that know their characters in the original text.

The span model reads moses tokens (:class:`~contextvec.text.tokenize.Tokenizer` ``"moses"``, as
the GLUE raw-text tasks) and answers with the characters of the context from its first token's
start to its last token's end, so every token carries its ``[start, end)`` in the string it came
from. sacremoses may alter a token (it drops control characters, splits a combining accent off
its letter): tokens are found in the text in order, exactly where they can be, and otherwise by
a character alignment of the tokens with the text (:func:`align_tokens`).

A training answer becomes the tokens overlapping its characters (:func:`answer_tokens`); an
answer that starts or ends inside a token (``"1990s"`` answered ``"1990"``) takes the whole
token, and :attr:`SquadTokens.inexact` counts those answers.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from contextvec.tasks.qa.squad import SquadData
from contextvec.text.tokenize import Tokenizer

Span = tuple[int, int]
"""Characters ``[start, end)`` of a token in its text."""


@dataclass(frozen=True)
class TokenizedText:
    """A string, its tokens and each token's characters in it (``text[start:end]`` is the token
    unless the tokenizer altered it)."""

    text: str
    tokens: tuple[str, ...]
    spans: tuple[Span, ...]

    def __len__(self) -> int:
        return len(self.tokens)

    def characters(self, first: int, last: int) -> Span:
        """``[start, end)`` of tokens ``first`` to ``last`` (both included) in the text."""
        return self.spans[first][0], self.spans[last][1]


def _exact_spans(text: str, tokens: Sequence[str]) -> list[Span] | None:
    """Each token at the next non-space character, or None where one is not found there."""
    spans, at = [], 0
    for token in tokens:
        while at < len(text) and text[at].isspace():
            at += 1
        if not token or not text.startswith(token, at):
            return None
        spans.append((at, at + len(token)))
        at += len(token)
    return spans


def align_tokens(text: str, tokens: Sequence[str]) -> list[Span]:
    """``[start, end)`` of every token in ``text``, in order and without overlap.

    Where the tokens are ``text``'s characters between whitespace (the usual case), each span
    holds its token exactly. Otherwise the tokens' characters are aligned with the text's
    (``difflib``'s longest matching blocks): a token spans from its first to its last aligned
    character, and a token none of whose characters align spans the text between its
    neighbours (whitespace trimmed; empty where there is none).
    """
    exact = _exact_spans(text, tokens)
    if exact is not None:
        return exact
    joined = "".join(tokens)
    where = [-1] * len(joined)  # the text position of each aligned token character
    matcher = difflib.SequenceMatcher(None, joined, text, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            where[block.a + k] = block.b + k
    found: list[Span | None] = []
    at = 0
    for token in tokens:
        positions = [p for p in where[at:at + len(token)] if p >= 0]
        found.append((positions[0], positions[-1] + 1) if positions else None)
        at += len(token)
    spans: list[Span] = []
    for i, span in enumerate(found):
        if span is None:  # between the previous token's end and the next aligned token's start
            start = spans[-1][1] if spans else 0
            end = next((s[0] for s in found[i + 1:] if s is not None), len(text))
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            span = (start, end)
        spans.append(span)
    return spans


def tokenize_text(text: str, tokenizer: Tokenizer) -> TokenizedText:
    """``text`` as tokens with their characters (:func:`align_tokens`); one token list even
    where the tokenizer splits sentences."""
    tokens = [token for sentence in tokenizer(text) for token in sentence]
    return TokenizedText(text, tuple(tokens), tuple(align_tokens(text, tokens)))


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
