"""Files of documents: one sentence per line, documents apart.

A document ends at one or more blank (empty or whitespace-only) lines, or at a CoNLL
``-DOCSTART-`` line (the word alone, or followed by CoNLL's columns: ``-DOCSTART- -X- -X- O``),
which is no sentence of either document; separators in a row, at the start or at the end make
no empty document. Lines are read as :mod:`~contextvec.io.text_lines` reads them (plain or
gzipped, a byte-order mark dropped, lines ending at ``\\n``, ``\\r\\n`` or ``\\r``) with its
invalid-UTF-8 policy; its empty-line policy has no place here, where blank lines separate.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from contextvec.choices import checked_choice
from contextvec.io.text_lines import EmptyLines, InputError, InvalidUtf8, check_scan, read_lines, scan_lines

DOCSTART = "-DOCSTART-"
"""The first field of CoNLL's document separator lines."""


def is_separator(line: str) -> bool:
    """Whether ``line`` ends a document: blank, or a ``-DOCSTART-`` line."""
    fields = line.split(maxsplit=1)
    return not fields or fields[0] == DOCSTART


def iter_documents(path: str | os.PathLike,
                   invalid_utf8: InvalidUtf8 | str = InvalidUtf8.ERROR) -> Iterator[list[str]]:
    """The documents of ``path`` one at a time, each its lines in order (without line breaks),
    streamed: one document is held at a time.

    With ``invalid_utf8="error"`` the file is checked in a first pass, before any document comes
    out, so a pipe or FIFO (which can be read only once) is refused; ``"replace"`` reads it once,
    decoding bad bytes as U+FFFD.

    Raises:
        InputError: lines that are not valid UTF-8 (``"error"``), named by line; a truncated
            gzip file; a file without any document (when the iteration reaches its end).
        ValueError: an ``invalid_utf8`` that is none of the choices.
    """
    invalid_utf8 = checked_choice(InvalidUtf8, invalid_utf8, "invalid_utf8")
    if invalid_utf8 is InvalidUtf8.ERROR:
        check_scan(scan_lines(path), EmptyLines.KEEP, invalid_utf8)
    return _documents(path)


def _documents(path: str | os.PathLike) -> Iterator[list[str]]:
    document: list[str] = []
    found = False
    for _, line in read_lines(path):
        if not is_separator(line):
            document.append(line)
        elif document:
            yield document
            found, document = True, []
    if document:
        yield document
    elif not found:
        raise InputError(f"{path} holds no document: it is empty or only blank and {DOCSTART} lines")


def read_documents(path: str | os.PathLike,
                   invalid_utf8: InvalidUtf8 | str = InvalidUtf8.ERROR) -> list[list[str]]:
    """Every document of ``path``, each its lines in order (:func:`iter_documents`, whose
    errors it raises)."""
    return list(iter_documents(path, invalid_utf8))
