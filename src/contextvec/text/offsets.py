"""Tokens that know their characters: each token's ``[start, end)`` in the original string.

Offsets are Python ``str`` indices (code points, end exclusive): an emoji beyond the BMP is one
index, a letter and its combining accent are two. ``text[start:end]`` is the token wherever the
tokenizer kept the characters as they were (always for ``whitespace``). sacremoses may alter a
token (it drops control characters; with its default XML escaping, which
:class:`~contextvec.text.tokenize.Tokenizer` turns off, ``"`` becomes ``&quot;``): such a token
spans the characters it came from, found by a character alignment of the tokens with the text
(:func:`align_tokens`).
"""

from __future__ import annotations

import difflib
import functools
import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from contextvec.text.tokenize import Tokenizer, TokenizerName, as_tokenizer_name

Span = tuple[int, int]
"""Characters ``[start, end)`` of a token in its text."""


@dataclass(frozen=True)
class TokenizedText:
    """A string, its sentences as tokens, and each token's characters in the string.

    ``sentences[i][j]`` is token ``j`` of sentence ``i`` and ``sentence_spans[i][j]`` its
    ``(start, end)`` in ``text`` (:data:`Span`); spans increase and never overlap, across
    sentences too. A sentence has at least one token. ``tokens`` and ``spans`` are the same,
    all sentences in one sequence, and ``len()`` counts the tokens.
    """

    text: str
    sentences: tuple[tuple[str, ...], ...]
    sentence_spans: tuple[tuple[Span, ...], ...]

    @functools.cached_property
    def tokens(self) -> tuple[str, ...]:
        """Every sentence's tokens, in order."""
        return tuple(token for sentence in self.sentences for token in sentence)

    @functools.cached_property
    def spans(self) -> tuple[Span, ...]:
        """Every token's ``(start, end)``, in order (as :attr:`tokens`)."""
        return tuple(span for spans in self.sentence_spans for span in spans)

    def __len__(self) -> int:
        return len(self.tokens)

    def characters(self, first: int, last: int) -> Span:
        """``[start, end)`` of tokens ``first`` to ``last`` (indices into :attr:`tokens`, both
        included) in the text."""
        return self.spans[first][0], self.spans[last][1]


def _exact_length(text: str, at: int, token: str) -> int | None:
    """How many characters of ``text`` from ``at`` are ``token``, as it is or as the characters
    its XML escapes stand for (``&amp;`` for ``&``); None where they are neither."""
    if text.startswith(token, at):
        return len(token)
    plain = html.unescape(token) if "&" in token else token
    return len(plain) if plain != token and text.startswith(plain, at) else None


# Token characters one difflib alignment covers. A short window keeps its time small (it grows
# faster than linearly where alterations are dense) and leaves few repeated words to pair wrongly.
_WINDOW = 64


def _after_characters(text: str, at: int, count: int) -> int:
    """The position after ``count`` characters of ``text`` from ``at`` (or its end), not
    counting those a tokenizer may drop: whitespace, control and format characters."""
    while at < len(text) and count > 0:
        count -= text[at].isprintable() and not text[at].isspace()
        at += 1
    return at


def _aligned_window(text: str, start: int, stop: int, keys: Sequence[str]) -> list[Span]:
    """Spans of ``keys`` in ``text[start:stop]`` by a character alignment (difflib)."""
    # a separator that equals no character between keys: no match runs across two keys
    # (which paired "anarchist" + "s" of "anarchist society" with a later "anarchists")
    joined: list[str | None] = []
    for key in keys:
        joined.extend(key)
        joined.append(None)
    where = [-1] * len(joined)  # the text position of each aligned token character
    matcher = difflib.SequenceMatcher(None, joined, text[start:stop], autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            where[block.a + k] = start + block.b + k
    found: list[Span | None] = []
    at = 0
    for key in keys:
        positions = [p for p in where[at:at + len(key)] if p >= 0]
        found.append((positions[0], positions[-1] + 1) if positions else None)
        at += len(key) + 1
    spans: list[Span] = []
    for i, span in enumerate(found):
        if span is None:  # between the previous token's end and the next aligned token's start
            first = spans[-1][1] if spans else start
            end = next((s[0] for s in found[i + 1:] if s is not None), stop)
            while first < end and text[first].isspace():
                first += 1
            while end > first and text[end - 1].isspace():
                end -= 1
            span = (first, end)
        spans.append(span)
    return spans


def align_tokens(text: str, tokens: Sequence[str]) -> list[Span]:
    """``[start, end)`` of every token in ``text``, in order and without overlap.

    Where the tokens are ``text``'s characters between whitespace (the usual case), each span
    holds its token exactly; a token that is the XML escape of the text (``&quot;`` for ``"``)
    spans the characters it escapes. From a token found neither way, the tokens' characters (a
    token's XML escapes read as the characters they stand for, unless the text holds the token
    as it is) are aligned with the text's (``difflib``'s longest matching blocks, a window of
    tokens at a time, until tokens are found exactly again): a token spans from its first to
    its last aligned character, and a token none of whose characters align spans the text
    between its neighbours, whitespace trimmed. A token the tokenizer invented, with no
    characters of its own in the text, gets a zero-width span where it belongs: at the first
    non-space character after the token before it (or where the next token starts, when none
    is between).
    """
    spans: list[Span] = []
    at = i = 0
    while i < len(tokens):
        while at < len(text) and text[at].isspace():
            at += 1
        length = _exact_length(text, at, tokens[i])
        if length is not None:
            spans.append((at, at + length))
            at += length
            i += 1
            continue
        # a token's characters are its own where the text holds them, else those its escapes stand for
        keys: list[str] = []
        size = 0
        while i + len(keys) < len(tokens) and size < _WINDOW:
            token = tokens[i + len(keys)]
            keys.append(token if "&" not in token or token in text else html.unescape(token))
            size += len(keys[-1])
        last = i + len(keys) == len(tokens)
        # the text of the window's tokens with room for altered characters (the last window: all
        # the rest); the window's later half is aligned again by the next window, which sees the
        # text beyond it
        stop = len(text) if last else _after_characters(text, at, size + size // 4 + 16)
        window = _aligned_window(text, at, stop, keys)
        keep = len(window) if last else max(1, len(window) // 2)
        spans.extend(window[:keep])
        at, i = spans[-1][1], i + keep
    return spans


def align_sentences(text: str, sentences: Sequence[Sequence[str]]) -> TokenizedText:
    """``sentences`` (token lists of ``text``, in order) with their characters in ``text``, all
    tokens aligned at once (:func:`align_tokens`); sentences without tokens are dropped."""
    kept = [tuple(sentence) for sentence in sentences if len(sentence)]
    return TokenizedText(text, tuple(kept), _aligned(text, kept))


def _aligned(text: str, sentences: Sequence[tuple[str, ...]],
             offset: int = 0) -> tuple[tuple[Span, ...], ...]:
    """Each sentence's spans in ``text`` (:func:`align_tokens`), ``offset`` added to each: where
    ``text`` starts in the string the spans are into."""
    spans = align_tokens(text, [token for sentence in sentences for token in sentence])
    grouped, at = [], 0
    for sentence in sentences:
        grouped.append(tuple((start + offset, end + offset) for start, end in spans[at:at + len(sentence)]))
        at += len(sentence)
    return tuple(grouped)


# The line breaks of contextvec's text files (io/text_lines.py): Unicode line separators inside
# a line are characters of the line, as there.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """``(start, line)`` for each line of ``text``, without its line break."""
    start = 0
    for brk in _LINE_BREAK.finditer(text):
        yield start, text[start:brk.start()]
        start = brk.end()
    yield start, text[start:]


@functools.lru_cache(maxsize=8)
def _tokenizer(name: TokenizerName, lang: str) -> Tokenizer:
    """One tokenizer per name and language: moses reads its tables when it is made."""
    return Tokenizer(name, lang)


def tokenize_with_offsets(text: str, tokenizer: TokenizerName | str = TokenizerName.WHITESPACE,
                          lang: str = "en") -> TokenizedText:
    """The sentences of ``text`` as tokens, with each token's ``(start, end)`` in ``text``.

    Each line (ending at ``\\n``, ``\\r\\n`` or ``\\r``, as contextvec reads files) is one
    sentence for ``whitespace`` and ``moses``; ``moses-sentences`` splits each line into
    sentences (:func:`~contextvec.text.tokenize.split_sentences`). A blank line, or one whose
    characters the tokenizer drops, gives no sentence. Spans are into ``text`` itself (code
    points, end exclusive; see :func:`align_tokens` for the tokens moses alters).

    Raises:
        TypeError: ``text`` is not a ``str``.
        ValueError: ``tokenizer`` is none of :class:`~contextvec.text.tokenize.TokenizerName`.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    tokenize = _tokenizer(as_tokenizer_name(tokenizer), lang)
    sentences: list[tuple[str, ...]] = []
    spans: list[tuple[Span, ...]] = []
    for start, line in _lines(text):
        if not line.strip():
            continue
        kept = [tuple(sentence) for sentence in tokenize(line) if sentence]
        sentences.extend(kept)
        spans.extend(_aligned(line, kept, offset=start))
    return TokenizedText(text, tuple(sentences), tuple(spans))
