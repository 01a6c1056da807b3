"""How a file splits into documents: blank lines between them, or WikiText's articles.

``blank-lines`` is :func:`~contextvec.io.documents.iter_documents`' reading (one sentence per
line, blank or ``-DOCSTART-`` lines between documents). ``wikitext`` reads the tokenized WikiText
files (``wiki.*.tokens``): an article starts at each ``" = Title = "`` line (exactly one ``=``
on each side; ``" = = Section = = "`` lines are headings inside the article), blank lines
separate paragraphs, not articles, and each paragraph line is cut into sentences after every
``.``, ``?`` and ``!`` token (WikiText writes a decimal point as ``@.@``, so these end sentences).
Heading lines, the title's included, are kept as sentences of their article, as they stand.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from enum import StrEnum

from contextvec.choices import checked_choice, spellings
from contextvec.io.documents import iter_documents
from contextvec.io.text_lines import EmptyLines, InputError, InvalidUtf8, check_scan, read_lines, scan_lines


class DocumentFormat(StrEnum):
    """Where a file's documents begin and end."""

    BLANK_LINES = "blank-lines"
    """One sentence per line; blank or ``-DOCSTART-`` lines between documents."""
    WIKITEXT = "wikitext"
    """WikiText's articles, each from its ``" = Title = "`` line; paragraphs cut into sentences."""


DOCUMENT_FORMATS = spellings(DocumentFormat)
"""The spellings of :class:`DocumentFormat`: ``blank-lines``, ``wikitext``."""

SENTENCE_ENDS = frozenset({".", "?", "!"})
"""The tokens after which a WikiText paragraph is cut into sentences."""


def as_document_format(value: DocumentFormat | str) -> DocumentFormat:
    """``value`` as a :class:`DocumentFormat`; a ``ValueError`` naming the choices for any other."""
    return checked_choice(DocumentFormat, value, "document format")


def is_wikitext_title(line: str) -> bool:
    """Whether ``line`` is a WikiText article title, ``" = Title = "`` (not ``" = = Section = = "``)."""
    fields = line.split()
    return len(fields) >= 3 and fields[0] == fields[-1] == "=" and "=" not in (fields[1], fields[-2])


def split_after_sentence_ends(line: str) -> list[str]:
    """A tokenized paragraph cut into sentences after each ``.``, ``?`` and ``!`` token."""
    sentences: list[str] = []
    current: list[str] = []
    for token in line.split():
        current.append(token)
        if token in SENTENCE_ENDS:
            sentences.append(" ".join(current))
            current = []
    if current:
        sentences.append(" ".join(current))
    return sentences


def iter_wikitext_articles(path: str | os.PathLike) -> Iterator[list[str]]:
    """The articles of a tokenized WikiText file one at a time, each its sentences in order.

    The file is checked for invalid UTF-8 first (as :func:`iter_documents` with ``"error"``);
    one article is held at a time.

    Raises:
        InputError: invalid UTF-8 (named by line); text before the first title line (named by
            line); a file without any title line.
    """
    check_scan(scan_lines(path), EmptyLines.KEEP, InvalidUtf8.ERROR)
    return _articles(path)


def _articles(path: str | os.PathLike) -> Iterator[list[str]]:
    article: list[str] | None = None
    for index, line in read_lines(path):
        if not line.strip():
            continue
        if is_wikitext_title(line):
            if article:
                yield article
            article = [line.strip()]
        elif article is None:
            raise InputError(f"{path}, line {index + 1}: text before the first ' = Title = ' line "
                             "(a WikiText article starts at its title)")
        else:
            article.extend(split_after_sentence_ends(line))
    if article is None:
        raise InputError(f"{path} holds no WikiText article: no ' = Title = ' line")
    yield article


def iter_documents_as(path: str | os.PathLike, document_format: DocumentFormat | str) -> Iterator[list[str]]:
    """The documents of ``path`` read as ``document_format`` says, each its sentences (lines) in
    order, one held at a time; invalid UTF-8 is an error."""
    if as_document_format(document_format) is DocumentFormat.WIKITEXT:
        return iter_wikitext_articles(path)
    return iter_documents(path)
