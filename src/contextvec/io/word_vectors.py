"""Static word vectors (GloVe, word2vec): read three file formats, write them atomically.

Formats (all may be gzipped, ``.gz``):

- ``glove``: one ``word v1 ... vd`` line per word, no header (GloVe's release format).
- ``word2vec``: the same lines after a ``count dim`` header line (word2vec's and gensim's text
  format). A trailing space before the newline (word2vec.c writes one) is fine.
- ``word2vec-binary``: the ``count dim`` header line, then per word ``word`` + a space +
  ``dim`` little-endian float32 values, optionally followed by a newline (word2vec.c writes
  one, gensim does not).

In the text formats a word is everything before the last ``dim`` fields, so words with spaces
(a few in GloVe 840B) load. Broken files raise :class:`WordVectorsError` naming the line (or the
record, in the binary format): a ragged or truncated line, unparsable numbers, a header count
that does not match the records, a repeated word. Nothing is skipped silently.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Container, Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

from contextvec.choices import checked_choice, spellings
from contextvec.io.atomic import atomic_path


class WordVectorFormat(StrEnum):
    """A word-vector file's format (the module docstring describes each)."""

    AUTO = "auto"
    """Reading only: told apart by the file's first line (:func:`detect_format`)."""
    GLOVE = "glove"
    WORD2VEC = "word2vec"
    WORD2VEC_BINARY = "word2vec-binary"


FORMATS = spellings(WordVectorFormat)
"""The formats :func:`load_word_vectors` reads."""
WRITTEN_FORMATS = FORMATS[1:]
"""The formats :func:`save_word_vectors` writes (all but ``auto``)."""
_CHUNK = 1 << 20
_MAX_WORD_BYTES = 1 << 16


class WordVectorsError(ValueError):
    """A word-vector file that cannot be read as the format says."""


class WordVectors(NamedTuple):
    """``words[i]`` has the vector ``vectors[i]``; ``vectors`` is float32 ``(len(words), dim)``."""

    words: list[str]
    vectors: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def index(self) -> dict[str, int]:
        """Word -> row."""
        return {w: i for i, w in enumerate(self.words)}


def _open(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def _parse_header(line: bytes, path: Path) -> tuple[int, int] | None:
    parts = line.split()
    if len(parts) != 2:
        return None
    try:
        count, dim = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    if count < 0 or dim < 1:
        raise WordVectorsError(f"{path}, line 1: bad header {line.decode('latin-1').strip()!r}")
    return count, dim


def detect_format(path: str | os.PathLike) -> str:
    """``glove``, ``word2vec`` or ``word2vec-binary``, from the first line(s) of the file.

    A ``count dim`` first line means word2vec; it is the text format if the next line decodes
    as UTF-8 text with a word and ``dim`` numbers, else the binary format.
    """
    path = Path(path)
    with _open(path) as f:
        first = f.readline(_CHUNK)
        header = _parse_header(first, path)
        if header is None:
            return "glove"
        second = f.readline(_CHUNK)
    try:
        fields = second.decode("utf-8").rstrip().split(" ")
        if len(fields) > header[1]:
            np.asarray(fields[-header[1]:], dtype=np.float32)
            return "word2vec"
    except (UnicodeDecodeError, ValueError):
        pass
    return "word2vec-binary"


def load_word_vectors(
    path: str | os.PathLike,
    format: WordVectorFormat | str = WordVectorFormat.AUTO,
    *,
    max_words: int | None = None,
    keep: Container[str] | None = None,
    duplicates: str = "error",
    errors: str = "strict",
) -> WordVectors:
    """Read a word-vector file (see the module docstring for the formats).

    ``max_words``: stop after the first that many records of the file (vectors are usually
    sorted by frequency). ``keep``: only words in this set are returned (the rest of the file is
    still checked). ``duplicates``: ``"error"`` or ``"first"`` (keep the first vector of a
    repeated word). ``errors``: how invalid UTF-8 in words is decoded (``"strict"`` raises,
    naming the line; ``"replace"`` as Python's codecs).
    """
    path = Path(path)
    format = checked_choice(WordVectorFormat, format, "word-vector format")
    if duplicates not in ("error", "first"):
        raise ValueError(f"duplicates must be 'error' or 'first', not {duplicates!r}")
    if not path.is_file():
        raise FileNotFoundError(f"word-vector file not found: {path}")
    if format is WordVectorFormat.AUTO:
        format = WordVectorFormat(detect_format(path))
    records = _read_binary(path, errors) if format == "word2vec-binary" else _read_text(
        path, format == "word2vec", errors
    )
    try:
        return _collect(path, records, max_words, keep, duplicates)
    except (EOFError, gzip.BadGzipFile) as e:
        raise WordVectorsError(f"{path}: truncated or corrupt gzip file ({e})") from e


def _collect(
    path: Path,
    records: Iterator[tuple[str, str, np.ndarray]],
    max_words: int | None,
    keep: Container[str] | None,
    duplicates: str,
) -> WordVectors:
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: dict[str, str] = {}
    dim = 0
    for n, (where, word, vector) in enumerate(records):
        if max_words is not None and n >= max_words:
            break
        dim = len(vector)
        if word in seen:
            if duplicates == "error":
                raise WordVectorsError(f"{path}, {where}: repeated word {word!r} (first at "
                                       f"{seen[word]}); pass duplicates='first' to keep the first")
            continue
        seen[word] = where
        if not np.isfinite(vector).all():
            raise WordVectorsError(f"{path}, {where}: NaN or infinite value in the vector of {word!r}")
        if keep is None or word in keep:
            words.append(word)
            rows.append(vector)
    if not seen:
        raise WordVectorsError(f"{path}: no word vectors in the file")
    vectors = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
    return WordVectors(words, vectors.astype(np.float32, copy=False))


def _read_text(path: Path, header: bool, errors: str) -> Iterator[tuple[str, str, np.ndarray]]:
    """``(where, word, vector)`` per line of a GloVe (no header) or word2vec text file."""
    with _open(path) as f:
        count, dim, start = None, None, 1
        if header:
            first = f.readline()
            parsed = _parse_header(first, path)
            if parsed is None:
                raise WordVectorsError(f"{path}, line 1: expected a 'count dim' header, found "
                                       f"{first[:80].decode('utf-8', 'replace').strip()!r}")
            count, dim = parsed
            start = 2
        n = 0
        for number, raw in enumerate(f, start):
            where = f"line {number}"
            if not raw.endswith(b"\n"):
                raise WordVectorsError(f"{path}, {where}: the last line has no newline (truncated "
                                       "file?)")
            try:
                line = raw.decode("utf-8", errors)
            except UnicodeDecodeError as e:
                raise WordVectorsError(f"{path}, {where}: invalid UTF-8 ({e.reason}); pass "
                                       "errors='replace' to load it anyway") from e
            fields = line.rstrip().split(" ")
            if dim is None:  # GloVe: the first line fixes the dimension
                dim = len(fields) - 1
                if dim < 1:
                    raise WordVectorsError(f"{path}, {where}: expected a word and numbers, found "
                                           f"{line.strip()[:80]!r}")
            if len(fields) < dim + 1 or not fields[0]:
                raise WordVectorsError(
                    f"{path}, {where}: expected a word and {dim} numbers, found {len(fields) - 1} "
                    "fields after the word (ragged or truncated line)"
                )
            if count is not None and n >= count:
                raise WordVectorsError(f"{path}, {where}: more vectors than the header's {count}")
            try:
                vector = np.asarray(fields[-dim:], dtype=np.float32)
            except ValueError as e:
                raise WordVectorsError(f"{path}, {where}: not a number in the vector ({e})") from e
            n += 1
            yield where, " ".join(fields[:-dim]), vector
        if count is not None and n < count:
            raise WordVectorsError(f"{path}: the header says {count} vectors but the file ends "
                                   f"after {n} (line {n + 2} is missing: truncated file)")


def _read_binary(path: Path, errors: str) -> Iterator[tuple[str, str, np.ndarray]]:
    """``(where, word, vector)`` per record of a word2vec binary file (read in chunks)."""
    with _open(path) as f:
        parsed = _parse_header(f.readline(), path)
        if parsed is None:
            raise WordVectorsError(f"{path}, line 1: expected a 'count dim' header")
        count, dim = parsed
        size = 4 * dim
        buf, pos = b"", 0
        for n in range(count):
            where = f"record {n + 1} of {count}"
            # The word: up to a space, after an optional newline (word2vec.c ends records with one).
            while True:
                end = buf.find(b" ", pos)
                if end >= 0 or len(buf) - pos > _MAX_WORD_BYTES:
                    break
                more = f.read(_CHUNK)
                if not more:
                    raise WordVectorsError(f"{path}, {where}: the file ends before the word "
                                           "(truncated file)")
                buf, pos = buf[pos:] + more, 0
            if end < 0:
                raise WordVectorsError(f"{path}, {where}: no space after the word within "
                                       f"{_MAX_WORD_BYTES} bytes (not word2vec binary?)")
            raw_word = buf[pos:end].lstrip(b"\n")
            pos = end + 1
            try:
                word = raw_word.decode("utf-8", errors)
            except UnicodeDecodeError as e:
                raise WordVectorsError(f"{path}, {where}: invalid UTF-8 in the word ({e.reason}); "
                                       "pass errors='replace' to load it anyway") from e
            if not word:
                raise WordVectorsError(f"{path}, {where}: empty word")
            if len(buf) - pos < size:
                # Chunks as the file gives them, joined once: a header's dim never sizes a read,
                # so a file declaring more than it holds costs no more memory than it holds.
                parts, have = [buf[pos:]], len(buf) - pos
                while have < size:
                    more = f.read(_CHUNK)
                    if not more:
                        raise WordVectorsError(
                            f"{path}, {where} ({word!r}): the file ends after {have} of the "
                            f"vector's {size} bytes (truncated file)"
                        )
                    parts.append(more)
                    have += len(more)
                buf, pos = b"".join(parts), 0
            vector = np.frombuffer(buf, dtype="<f4", count=dim, offset=pos).astype(np.float32)
            pos += size
            yield where, word, vector
        if buf[pos:].strip() or f.read(1).strip():
            raise WordVectorsError(f"{path}: data after the header's {count} records")


def save_word_vectors(
    path: str | os.PathLike,
    words: Sequence[str],
    vectors: np.ndarray,
    format: WordVectorFormat | str = WordVectorFormat.WORD2VEC,
) -> Path:
    """Write vectors atomically as ``word2vec`` text (default), ``glove`` or ``word2vec-binary``.

    Text values are the shortest decimal strings that read back to the same float32, so a
    write/read round trip is exact. ``.gz`` paths are gzipped. Words must be non-empty and
    free of whitespace (other tools split on it).
    """
    path = Path(path)
    vectors = np.asarray(vectors, dtype=np.float32)
    format = checked_choice(WordVectorFormat, format, "word-vector format", among=WRITTEN_FORMATS)
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(f"need a ({len(words)}, dim) matrix, got shape {vectors.shape}")
    for word in words:
        if not word or word.split() != [word]:
            raise ValueError(f"cannot write the word {word!r}: words must be non-empty, without "
                             "whitespace")
    count, dim = vectors.shape
    little = vectors.astype("<f4", copy=False)
    with atomic_path(path) as tmp:
        gz = path.suffix == ".gz"
        with gzip.GzipFile(tmp, "wb", mtime=0) if gz else open(tmp, "wb") as out:  # noqa: SIM115
            if format != "glove":
                out.write(f"{count} {dim}\n".encode())
            for word, row in zip(words, little, strict=True):
                if format == "word2vec-binary":
                    out.write(word.encode("utf-8") + b" " + row.tobytes() + b"\n")
                else:  # str(np.float32) is the shortest string that reads back to the same value
                    out.write(f"{word} {' '.join(map(str, row))}\n".encode())
    return path
