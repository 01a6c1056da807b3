"""Training corpora (streamed from plain or gzipped files) and the LM vocabulary."""

from __future__ import annotations

import glob
import itertools
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from contextvec.io.text_lines import open_text, read_once
from contextvec.text.chars import BOS_TOKEN, EOS_TOKEN
from contextvec.text.tokenize import Tokenizer, TokenizerName

UNK_TOKEN = "<UNK>"
SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


def expand_paths(patterns: Iterable[str | os.PathLike]) -> list[Path]:
    """Files named by paths or glob patterns, sorted within each pattern; error if none match,
    if one is a directory or an empty (0-byte) file."""
    paths: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(str(pattern))) if glob.has_magic(str(pattern)) else [pattern]
        if not matches:
            raise FileNotFoundError(f"no file matches {pattern}")
        for match in matches:
            if os.fspath(match) in ("", "-"):
                raise ValueError("the input path is empty; give text files" if match == "" else
                                 "- (standard input) cannot be read more than once; give text files")
            path = Path(match)
            if read_once(path):
                raise ValueError(f"{path} is a pipe, FIFO or device: it can be read only once, and a "
                                 "corpus is read more than once; copy it to a file first")
            if path.is_dir():
                raise ValueError(f"{path} is a directory; give text files (or a glob like "
                                 f"'{path}/*.txt')")
            if not path.is_file():
                raise FileNotFoundError(f"file not found: {path}")
            if path.stat().st_size == 0:
                raise ValueError(f"{path} is empty")
            paths.append(path)
    return paths


def _lines(path: Path, skip: int = 0) -> Iterator[str]:
    with open_text(path, errors="replace") as f:  # .gz and a byte-order mark handled there
        yield from itertools.islice(f, skip, None)


def _round_robin(paths: list[Path], skip: int = 0) -> Iterator[str]:
    """One line of each file in turn; files that run out drop out of the rotation."""
    readers = [_lines(p, skip) for p in paths]
    while readers:
        for reader in list(readers):
            line = next(reader, None)
            if line is None:
                readers.remove(reader)
            else:
                yield line


def read_sentences(
    paths: Iterable[Path], tokenizer: TokenizerName | str = TokenizerName.WHITESPACE,
    interleave: bool = False, skip_lines: int = 0,
) -> Iterator[list[str]]:
    """Tokenized lines of every file in order (``.gz`` read transparently).

    ``tokenizer``: a :class:`~contextvec.text.tokenize.TokenizerName` or its spelling; ``moses-sentences``
    yields each sentence of a paragraph-per-line corpus separately. Blank lines (document
    separators in the shared corpora) are skipped; invalid UTF-8 is decoded with U+FFFD.
    ``interleave`` reads the files line by line in turn instead of one after the other, so a
    run over shards of different sources (bilm-tf shuffles its shards) sees all of them from the
    first step. ``skip_lines`` skips the first N lines of every file (the part an earlier run
    already read). Memory does not grow with the corpus (one open file per path when
    interleaving).
    """
    tokenize = Tokenizer(tokenizer)
    paths = list(paths)
    if interleave:
        lines = _round_robin(paths, skip_lines)
    else:
        lines = (line for p in paths for line in _lines(p, skip_lines))
    for line in lines:
        for tokens in tokenize(line):
            if tokens:
                yield tokens


class CorpusVocabulary:
    """Token <-> id for the softmax: ``<S>``, ``</S>``, ``<UNK>``, then by descending frequency.

    The frequency order is what the log-uniform sampler of sampled softmax assumes. Saved as
    bilm-tf's vocabulary file: one token per line, id = line number.
    """

    def __init__(self, tokens: list[str]) -> None:
        if tuple(tokens[:3]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, not {tuple(tokens[:3])}")
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(tokens)}
        if len(self.index) != len(tokens):
            raise ValueError("the vocabulary has repeated tokens")

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def bos(self) -> int:
        return 0

    @property
    def eos(self) -> int:
        return 1

    @property
    def unk(self) -> int:
        return 2

    def id(self, token: str) -> int:
        return self.index.get(token, 2)

    @classmethod
    def build(
        cls, sentences: Iterable[list[str]], min_count: int = 1, max_size: int | None = None
    ) -> CorpusVocabulary:
        """Count a corpus (streamed); ties in frequency are broken alphabetically."""
        counts: Counter[str] = Counter()
        for sentence in sentences:
            counts.update(sentence)
        for special in SPECIALS:
            counts.pop(special, None)
        words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max(0, max_size - len(SPECIALS))]
        return cls([*SPECIALS, *words])

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text("\n".join(self.tokens) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike) -> CorpusVocabulary:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return cls([line.strip() for line in lines if line.strip() and line != "!!!MAXTERMID"])
