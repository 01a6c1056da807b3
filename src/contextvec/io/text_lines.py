"""Reading one-sentence-per-line input files, with a checked, streaming policy for bad lines.

Plain or gzipped (``.gz``) files; a UTF-8 byte-order mark at the start is dropped.
A line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (old Mac files): the line breaks of
Python's text mode, which :func:`open_text` and so every task and corpus reader use too, so a
file has the same lines everywhere in contextvec. Nothing else breaks a line: Unicode line
separators inside a sentence never shift line indices. Line ``i`` (0-based) always maps to
output key ``i``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO

from contextvec.choices import checked_choice, spellings


class EmptyLines(StrEnum):
    """What to do with empty or whitespace-only lines (``--empty-lines``)."""

    ERROR = "error"
    """Refuse the input, naming the lines."""
    KEEP = "keep"
    """Keep them: a sentence of zero tokens."""


class InvalidUtf8(StrEnum):
    """What to do with lines that are not valid UTF-8 (``--invalid-utf8``)."""

    ERROR = "error"
    """Refuse the input, naming the lines."""
    REPLACE = "replace"
    """Decode them with U+FFFD for each bad byte."""


EMPTY_LINE_POLICIES = spellings(EmptyLines)
INVALID_UTF8_POLICIES = spellings(InvalidUtf8)


def as_policies(empty_lines: EmptyLines | str,
                invalid_utf8: InvalidUtf8 | str) -> tuple[EmptyLines, InvalidUtf8]:
    """The two bad-line policies as enums; a ``ValueError`` naming the choices for any other."""
    return (checked_choice(EmptyLines, empty_lines, "empty_lines"),
            checked_choice(InvalidUtf8, invalid_utf8, "invalid_utf8"))


class InputError(ValueError):
    """An input file that the chosen policies do not accept; the message names the lines."""


@dataclass
class InputScan:
    """What one pass over an input file found."""

    n_lines: int = 0
    sha256: str = ""
    empty: list[int] = field(default_factory=list)
    invalid_utf8: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    bad_keys: list[int] = field(default_factory=list)


BOM = b"\xef\xbb\xbf"


def open_text(path: str | os.PathLike, errors: str = "strict") -> IO[str]:
    """Open a UTF-8 text file, plain or gzipped (``.gz``), for reading.

    A UTF-8 byte-order mark is dropped (``utf-8-sig``): left in, it becomes part of the first
    token and changes its vectors. A directory or a truncated gzip file gets a clear error from
    the reader (``IsADirectoryError``, ``EOFError``/``gzip.BadGzipFile``).
    """
    path = input_file(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", errors=errors)
    return open(path, encoding="utf-8-sig", errors=errors)


LINE_BREAK = re.compile(rb"\r\n|\r|\n")
BLOCK = 1 << 20


def _split_lines(f: IO[bytes]) -> Iterator[bytes]:
    """The lines of a binary stream, without their breaks (:data:`LINE_BREAK`), read in
    blocks: a file of lone ``\\r`` has no ``\\n`` for a line-by-line read to stop at."""
    pending = b""
    while block := f.read(BLOCK):
        data = pending + block
        held = b"\r" if data.endswith(b"\r") else b""  # may be the first half of a \r\n
        lines = LINE_BREAK.split(data[:len(data) - len(held)])
        pending = lines.pop() + held
        yield from lines
    if pending:
        lines = LINE_BREAK.split(pending)
        yield from lines[:-1] if lines[-1] == b"" else lines


def input_file(path: str | os.PathLike) -> Path:
    """``path`` as an input file: an empty path (which ``Path`` reads as ``.``) or a directory
    is refused in one line."""
    if os.fspath(path) == "":
        raise ValueError("the input path is empty; give a text file")
    if Path(path).is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a text file")
    return Path(path)


def _raw_lines(path: Path) -> Iterator[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        try:
            for index, raw in enumerate(_split_lines(f)):
                if index == 0 and raw.startswith(BOM):
                    raw = raw[len(BOM):]  # a byte-order mark is not part of the first token
                yield raw
        except (EOFError, gzip.BadGzipFile) as e:
            raise InputError(f"{path}: truncated or corrupt gzip file ({e})") from e


def _describe(kind: str, lines: list[int], hint: str) -> str:
    shown = ", ".join(str(i + 1) for i in lines[:20])
    more = f" and {len(lines) - 20} more" if len(lines) > 20 else ""
    return f"{len(lines)} {kind} at line(s) {shown}{more} (1-based; output key = line - 1); {hint}"


def read_once(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a pipe, FIFO, socket or device (``<(zcat f.gz)``, ``/dev/stdin``):
    what is read from it is gone, so its lines cannot be read a second time."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def scan_lines(path: str | os.PathLike, sentence_keys: bool = False) -> InputScan:
    """One streaming pass: line count, content hash, and the lines each policy cares about.

    With ``sentence_keys`` it also finds duplicate sentences and sentences that cannot be HDF5
    dataset names (containing ``/`` or a NUL, where HDF5 would end the name, ``.``, or empty).
    A pipe or FIFO is refused (:func:`read_once`): the scan is the first of two passes, and the
    second would find it empty.
    """
    if read_once(path):
        raise InputError(f"{path} is a pipe, FIFO or device: its lines can be read only once, and "
                         "they are read twice (checked, then embedded); copy it to a file first")
    scan = InputScan()
    digest = hashlib.sha256()
    seen: set[bytes] = set()
    for index, raw in enumerate(_raw_lines(input_file(path))):
        digest.update(raw + b"\n")
        scan.n_lines += 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            scan.invalid_utf8.append(index)
            text = raw.decode("utf-8", "replace")
        key = text.strip()
        if not key:
            scan.empty.append(index)
        if sentence_keys:
            if "/" in key or "\0" in key or key in (".", ""):
                scan.bad_keys.append(index)
            h = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            if h in seen:
                scan.duplicates.append(index)
            seen.add(h)
    scan.sha256 = digest.hexdigest()
    return scan


def check_scan(scan: InputScan, empty_lines: EmptyLines | str, invalid_utf8: InvalidUtf8 | str) -> None:
    """Raise :class:`InputError` for every kind of line that the policies reject (a
    ``ValueError`` for a policy that is none of the choices)."""
    empty_lines, invalid_utf8 = as_policies(empty_lines, invalid_utf8)
    problems = []
    if scan.empty and empty_lines is EmptyLines.ERROR:
        problems.append(_describe(
            "empty or whitespace-only line(s)", scan.empty,
            "remove them or pass --empty-lines keep to write a (layers, 0, dim) dataset",
        ))
    if scan.invalid_utf8 and invalid_utf8 is InvalidUtf8.ERROR:
        problems.append(_describe(
            "line(s) that are not valid UTF-8", scan.invalid_utf8,
            "fix the encoding or pass --invalid-utf8 replace to decode them with U+FFFD",
        ))
    if scan.duplicates:
        problems.append(_describe(
            "repeated sentence(s)", scan.duplicates,
            "--use-sentence-keys needs unique sentences; use line-index keys instead",
        ))
    # an empty line refused as such is not named twice
    bad_keys = (scan.bad_keys if empty_lines is EmptyLines.KEEP
                else sorted(set(scan.bad_keys) - set(scan.empty)))
    if bad_keys:
        problems.append(_describe(
            "sentence(s) that cannot be HDF5 keys ('/' or a NUL inside, '.', or empty)", bad_keys,
            "use line-index keys instead of --use-sentence-keys",
        ))
    if problems:
        raise InputError("; ".join(problems))


Lines = list[tuple[int, str]]
"""``(line index, text)`` pairs, as :func:`read_lines` yields them: a bulk chunk, a Ray block."""


def read_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(index, text)`` for every line; invalid UTF-8 is decoded with U+FFFD.

    Call :func:`check_scan` first: this is the lenient reading that the policies allow.
    """
    for index, raw in enumerate(_raw_lines(input_file(path))):
        yield index, raw.decode("utf-8", "replace")
