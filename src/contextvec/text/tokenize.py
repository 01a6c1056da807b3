"""Turning user input into token lists."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import StrEnum

from contextvec.choices import checked_choice, spellings

Sentence = str | Sequence[str]
"""A sentence: a whitespace-tokenized string, or a sequence of tokens."""


def as_tokens(sentence: Sentence) -> list[str]:
    """Tokens of a sentence; a string is split on whitespace (``str.split()``).

    Tokens given as a list are kept as they are, including empty strings.
    """
    if isinstance(sentence, str):
        return sentence.split()
    if isinstance(sentence, bytes):
        raise TypeError(f"a sentence must be str or a list of str, not bytes: {sentence[:30]!r}")
    tokens = list(sentence)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"tokens must be str, got {type(token).__name__}: {token!r}")
    return tokens


def as_sentences(sentences: Iterable[Sentence], what: str = "sentences") -> list[list[str]]:
    """Token lists of a collection of sentences.

    A bare string is refused with a ``TypeError``: iterating it would silently give one
    "sentence" per character.
    """
    refuse_bare_string(sentences, what)
    return [as_tokens(s) for s in sentences]


def refuse_bare_string(sentences: object, what: str = "sentences") -> None:
    """A ``TypeError`` where ``sentences`` is a bare ``str`` or ``bytes``: iterating it would
    silently give one "sentence" per character. The one check of :func:`as_sentences`, alone for
    callers that take token lists as they are (``Encoder.forward``)."""
    if isinstance(sentences, str | bytes):
        raise TypeError(
            f"{what} must be a list of sentences, not a single {type(sentences).__name__}; "
            f"for one sentence pass [{sentences[:30]!r}]"
        )


# A sentence ends at . ! ? (optionally followed by closing quotes or brackets) before whitespace
# and an opening quote/bracket or an upper-case letter or digit. Without a trained model
# (nltk's punkt needs a download) this rule is the dependable part: abbreviations such as
# "Mr. Smith" are split, which costs a language model little.
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'”’)\]]*)\s+(?=[\"'“‘(\[]?[A-Z0-9])")


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of a paragraph of running text (rule-based; see ``_SENTENCE_END``)."""
    parts = _SENTENCE_END.split(paragraph.strip())
    # re.split keeps the captured closing punctuation as separate items: glue it back.
    sentences = [parts[0]]
    for closing, text in zip(parts[1::2], parts[2::2], strict=True):
        sentences[-1] += closing
        sentences.append(text)
    return [s for s in sentences if s]


class TokenizerName(StrEnum):
    """The tokenizers of raw text lines (:class:`Tokenizer`): what every ``tokenizer`` setting
    and ``--tokenizer`` option names."""

    WHITESPACE = "whitespace"
    """``str.split()`` (input already tokenized)."""
    MOSES = "moses"
    """sacremoses' English tokenizer without HTML escaping (the tokenization of the 1B Word
    Benchmark that ELMo was trained on)."""
    MOSES_SENTENCES = "moses-sentences"
    """Running text split into sentences first, then ``moses``: a line gives one token list per
    sentence."""


LINE_TOKENIZERS = (TokenizerName.WHITESPACE.value, TokenizerName.MOSES.value)
"""The tokenizers that keep one line one sentence (parallel files, predictions, the server)."""


def as_tokenizer_name(value: TokenizerName | str, one_per_line: bool = False) -> TokenizerName:
    """``value`` as a :class:`TokenizerName` (with ``one_per_line``, one of
    :data:`LINE_TOKENIZERS`); a ``ValueError`` naming the choices for any other."""
    return checked_choice(TokenizerName, value, "tokenizer", among=LINE_TOKENIZERS if one_per_line else None)


class Tokenizer:
    """A named tokenizer of raw text lines into lists of tokens (:class:`TokenizerName`)."""

    NAMES = spellings(TokenizerName)

    def __init__(self, name: TokenizerName | str = TokenizerName.WHITESPACE, lang: str = "en") -> None:
        name = as_tokenizer_name(name)
        self.name = name
        self._moses = None
        if name is not TokenizerName.WHITESPACE:
            from sacremoses import MosesTokenizer

            self._moses = MosesTokenizer(lang=lang)

    def __call__(self, line: str) -> list[list[str]]:
        """The token lists of one line: one list, or one per sentence (``moses-sentences``)."""
        if self._moses is None:
            return [line.split()]
        texts = split_sentences(line) if self.name is TokenizerName.MOSES_SENTENCES else [line]
        return [self._moses.tokenize(t, escape=False) for t in texts]
