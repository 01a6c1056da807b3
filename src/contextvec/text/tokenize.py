"""Turning user input into token lists."""

from __future__ import annotations

from collections.abc import Sequence

Sentence = str | Sequence[str]
"""A sentence: a whitespace-tokenized string, or a sequence of tokens."""


def as_tokens(sentence: Sentence) -> list[str]:
    """Tokens of a sentence; a string is split on whitespace (``str.split()``).

    Tokens given as a list are kept as they are, including empty strings.
    """
    if isinstance(sentence, str):
        return sentence.split()
    tokens = list(sentence)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"tokens must be str, got {type(token).__name__}: {token!r}")
    return tokens
