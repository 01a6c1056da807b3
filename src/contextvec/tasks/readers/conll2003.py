"""CoNLL-2003 NER files: four space-separated columns ``token POS chunk NER``, blank lines between
sentences, ``-DOCSTART- -X- O O`` lines between documents (not sentences: each starts a new
document, kept as ``Split.documents``, every sentence's document index). Tags
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


def iter_conll2003_documents(stream: Iterable[str], source: str = "<string>"
                             ) -> Iterator[tuple[int, list[str], list[str]]]:
    """Yield ``(document, tokens, ner_tags)`` per sentence of a CoNLL-2003 stream (IOB1 tags,
    unchanged): ``document`` counts from 0, and a ``-DOCSTART-`` line after a sentence starts the
    next one (sentences before the first ``-DOCSTART-`` are document 0)."""
    tokens: list[str] = []
    tags: list[str] = []
    document, sentences_in_document = 0, 0
    for number, line in numbered_lines(stream):
        if not line.strip():
            if tokens:
                yield document, tokens, tags
                tokens, tags, sentences_in_document = [], [], sentences_in_document + 1
            continue
        columns = line.split()
        if columns[0] == "-DOCSTART-":
            if tokens:
                raise ValueError(f"{source}, line {number}: -DOCSTART- inside a sentence "
                                 "(no blank line before it)")
            if sentences_in_document:
                document, sentences_in_document = document + 1, 0
            continue
        if len(columns) != 4:
            raise ValueError(f"{source}, line {number}: expected 4 columns (token POS chunk NER), "
                             f"got {len(columns)}: {line!r}")
        if not _TAG.match(columns[3]):
            raise ValueError(f"{source}, line {number}: bad NER tag {columns[3]!r} (expected O, I-X or B-X)")
        tokens.append(columns[0])
        tags.append(columns[3])
    if tokens:
        yield document, tokens, tags


def iter_conll2003(stream: Iterable[str], source: str = "<string>") -> Iterator[tuple[list[str], list[str]]]:
    """Yield ``(tokens, ner_tags)`` per sentence of a CoNLL-2003 stream (IOB1 tags, unchanged)."""
    for _, tokens, tags in iter_conll2003_documents(stream, source):
        yield tokens, tags


def _tagged(sentences: Iterator[tuple[int, list[str], list[str]]], max_sentences: int | None,
            source: str) -> TaggedCorpus:
    taken = take(sentences, max_sentences, source)
    return TaggedCorpus([t for _, t, _ in taken], [g for _, _, g in taken], source,
                        documents=[d for d, _, _ in taken])


def parse_conll2003(text: str, max_sentences: int | None = None, source: str = "<string>") -> TaggedCorpus:
    """A CoNLL-2003 string -> :class:`TaggedCorpus` of tokens, IOB1 NER tags and documents."""
    return _tagged(iter_conll2003_documents(text.splitlines(keepends=True), source), max_sentences, source)


def read_conll2003(path: str | os.PathLike, max_sentences: int | None = None) -> TaggedCorpus:
    """A CoNLL-2003 file (plain or ``.gz``) -> :class:`TaggedCorpus` of tokens, IOB1 NER tags and
    documents."""
    with located_decode_errors(path, FORMAT), open_task_file(path) as stream:
        return _tagged(iter_conll2003_documents(stream, str(path)), max_sentences, str(path))
