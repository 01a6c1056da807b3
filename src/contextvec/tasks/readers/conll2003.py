"""CoNLL-2003 NER files: four space-separated columns ``token POS chunk NER``, blank lines between
sentences, ``-DOCSTART- -X- O O`` lines between documents (dropped: they are not sentences). Tags
are kept as in the file, i.e. the original **IOB1** scheme (``B-`` only where two entities of one
type touch); :func:`~contextvec.tasks.schemes.iob1_to_iob2` converts to IOB2 (BIO)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

from contextvec.tasks.readers.lines import located_decode_errors, numbered_lines, open_task_file, take
from contextvec.tasks.split import TaggedCorpus

_TAG = re.compile(r"^(O|[IB]-[^\s-][^\s]*)$")
FORMAT = "a CoNLL-2003 file: UTF-8, one 'token POS chunk NER' line per token, blank lines between sentences"


def iter_conll2003(stream: Iterable[str], source: str = "<string>") -> Iterator[tuple[list[str], list[str]]]:
    """Yield ``(tokens, ner_tags)`` per sentence of a CoNLL-2003 stream (IOB1 tags, unchanged)."""
    tokens: list[str] = []
    tags: list[str] = []
    for number, line in numbered_lines(stream):
        if not line.strip():
            if tokens:
                yield tokens, tags
                tokens, tags = [], []
            continue
        columns = line.split()
        if columns[0] == "-DOCSTART-":
            if tokens:
                raise ValueError(f"{source}, line {number}: -DOCSTART- inside a sentence "
                                 "(no blank line before it)")
            continue
        if len(columns) != 4:
            raise ValueError(f"{source}, line {number}: expected 4 columns (token POS chunk NER), "
                             f"got {len(columns)}: {line!r}")
        if not _TAG.match(columns[3]):
            raise ValueError(f"{source}, line {number}: bad NER tag {columns[3]!r} (expected O, I-X or B-X)")
        tokens.append(columns[0])
        tags.append(columns[3])
    if tokens:
        yield tokens, tags


def _tagged(pairs: Iterator[tuple[list[str], list[str]]], max_sentences: int | None,
            source: str) -> TaggedCorpus:
    taken = take(pairs, max_sentences, source)
    return TaggedCorpus([t for t, _ in taken], [g for _, g in taken], source)


def parse_conll2003(text: str, max_sentences: int | None = None, source: str = "<string>") -> TaggedCorpus:
    """A CoNLL-2003 string -> :class:`TaggedCorpus` of tokens and IOB1 NER tags."""
    return _tagged(iter_conll2003(text.splitlines(keepends=True), source), max_sentences, source)


def read_conll2003(path: str | os.PathLike, max_sentences: int | None = None) -> TaggedCorpus:
    """A CoNLL-2003 file (plain or ``.gz``) -> :class:`TaggedCorpus` of tokens and IOB1 NER tags."""
    with located_decode_errors(path, FORMAT), open_task_file(path) as stream:
        return _tagged(iter_conll2003(stream, str(path)), max_sentences, str(path))
