"""What every task reader shares: opening a file, numbering its lines, taking the first N items.

Files are plain or ``.gz``; a UTF-8 byte-order mark is dropped (left in, it would become part of
the first token); a directory, an empty file or bytes that are not UTF-8 get a one-line error
naming the file (and the line, with the format the reader expected: the usual cause is another
task's file).
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from contextvec.io.text_lines import open_text
from contextvec.tasks.split import Split

BOM = "\ufeff"
# What errors="surrogateescape" turns each undecodable byte into.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def open_task_file(path: str | os.PathLike, encoding: str = "utf-8") -> TextIO:
    """Open a task file for reading (plain or ``.gz``; see the module docstring).

    ``encoding`` other than UTF-8 (TREC's latin-1) decodes every byte; a UTF-8 byte-order mark
    is dropped there too.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a task file")
    if encoding.replace("-", "").lower() == "utf8":
        return open_text(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return path.open("r", encoding=encoding, newline="")


@contextmanager
def located_decode_errors(path: str | os.PathLike, expected: str) -> Iterator[None]:
    """Turn a UTF-8 decoding error raised inside the block into a ``ValueError`` naming the file,
    the line and byte, and ``expected`` (the format the reader wanted, e.g. ``"a CoNLL-2003
    file: ..."``). The file is read a second time, only after such an error, to find the line:
    the decoder's own position counts from an internal buffer, not from the file."""
    try:
        yield
    except UnicodeDecodeError as error:
        raise ValueError(_decode_error_message(path, expected, error)) from error


def _decode_error_message(path: str | os.PathLike, expected: str, error: UnicodeDecodeError) -> str:
    with open_text(path, errors="surrogateescape") as stream:
        for number, line in numbered_lines(stream):
            found = _ESCAPED_BYTE.search(line)
            if found:
                byte = ord(found.group()) - 0xDC00
                return (f"{path}, line {number}: not UTF-8 text (byte 0x{byte:02x}); expected {expected} "
                        "(another task's file?)")
    return f"{path}: not UTF-8 text ({error.reason}); expected {expected} (another task's file?)"


def check_max(max_sentences: int | None) -> None:
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, not {max_sentences}")


def numbered_lines(stream: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line break; a byte-order mark dropped)."""
    for number, line in enumerate(stream, start=1):
        if number == 1 and line.startswith(BOM):
            line = line[1:]
        elif number == 1 and line.startswith("\xef\xbb\xbf"):  # the UTF-8 mark read as latin-1
            line = line[3:]
        yield number, line.rstrip("\n").rstrip("\r")


def take(items: Iterator, max_sentences: int | None, source: str, what: str = "sentences") -> list:
    """The first ``max_sentences`` items (all when None); an empty file is an error naming it."""
    check_max(max_sentences)
    taken = list(itertools.islice(items, max_sentences))
    if not taken:
        raise ValueError(f"{source}: no {what} (an empty file?)")
    return taken


def line_items(
    path: str | os.PathLike,
    parse: Callable[[str, str], tuple[str, list[str]] | None],
    max_sentences: int | None,
    expected: str,
    encoding: str = "utf-8",
    what: str = "sentences",
) -> Split:
    """A file of one item per line -> :class:`Split`. ``parse(line, where)`` gives ``(label,
    tokens)``, or None for an item the task drops (not counted by ``max_sentences``); an empty
    line is an error. ``expected`` names the format in the error for a file that is not text of
    ``encoding``."""
    check_max(max_sentences)
    with located_decode_errors(path, expected), open_task_file(path, encoding) as stream:
        def items() -> Iterator[tuple[str, list[str]]]:
            for number, line in numbered_lines(stream):
                if not line.strip():
                    raise ValueError(f"{path}, line {number}: empty line (expected one item per line)")
                item = parse(line, f"{path}, line {number}")
                if item is not None:
                    yield item

        taken = take(items(), max_sentences, str(path), what)
    return Split([tokens for _, tokens in taken], [label for label, _ in taken], str(path))
