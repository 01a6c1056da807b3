"""CoNLL-U files -> token lists + one tag per token (the POS probe's data).

Only the syntactic words of a CoNLL-U sentence are kept, as in UD's POS tagging evaluation:

- **Multiword tokens** (ids like ``1-2``, e.g. ``don't`` over the words ``do`` + ``n't``) are
  skipped; their words (lines ``1`` and ``2``) carry the tags and are kept.
- **Empty nodes** (decimal ids like ``8.1``, enhanced-dependency ellipsis) are skipped: they are
  not in the surface sentence and have no tag of their own in the basic layer.

A word without the requested tag (``_``) is an error naming the file, the sentence and the word,
never a silent skip.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from typing import TextIO

from contextvec.extras import needs
from contextvec.tasks.readers.lines import located_decode_errors, open_task_file, take
from contextvec.tasks.split import TaggedCorpus

with needs("tasks"):
    import conllu
    from conllu.exceptions import ParseException

FORMAT = "a CoNLL-U file: UTF-8, one tab-separated 10-column line per word, blank lines between sentences"
TAG_COLUMNS = ("upos", "xpos")
"""CoNLL-U columns a tagging task can predict: column 4 (UPOS) or column 5 (XPOS)."""


def _is_word(token_id: object) -> bool:
    # conllu parses "3" as 3, "1-2" as (1, "-", 2) and "8.1" as (8, ".", 1).
    return isinstance(token_id, int)


def _tagged_words(sentence: conllu.TokenList, tag: str, where: str) -> tuple[list[str], list[str]]:
    words, tags = [], []
    for token in sentence:
        if not _is_word(token["id"]):
            continue
        value = token[tag]
        if value is None:  # conllu reads "_" as None
            raise ValueError(f"{where}, word {token['id']} ({token['form']!r}): no {tag} tag")
        words.append(token["form"])
        tags.append(value)
    if not words:
        raise ValueError(f"{where}: no words (only multiword tokens or empty nodes)")
    return words, tags


def iter_conllu(
    stream: TextIO | Iterable[str], tag: str = "upos", source: str = "<string>"
) -> Iterator[tuple[list[str], list[str]]]:
    """Yield ``(words, tags)`` per sentence of a CoNLL-U stream (see the module docstring)."""
    if tag not in TAG_COLUMNS:
        raise ValueError(f"tag must be one of {TAG_COLUMNS}, not {tag!r}")
    sentences = conllu.parse_incr(stream)
    number = 0
    while True:
        try:
            sentence = next(sentences)
        except StopIteration:
            return
        except ParseException as e:
            raise ValueError(f"{source}: CoNLL-U error after sentence {number}: {e}") from e
        number += 1
        sent_id = sentence.metadata.get("sent_id")
        where = f"{source}: sentence {number}" + (f" ({sent_id})" if sent_id else "")
        yield _tagged_words(sentence, tag, where)


def _collect(pairs: Iterator[tuple[list[str], list[str]]], max_sentences: int | None,
             source: str) -> TaggedCorpus:
    taken = take(pairs, max_sentences, source)
    return TaggedCorpus([w for w, _ in taken], [t for _, t in taken], source)


def parse_conllu(
    text: str, tag: str = "upos", max_sentences: int | None = None, source: str = "<string>"
) -> TaggedCorpus:
    """A CoNLL-U string -> :class:`TaggedCorpus` (the first ``max_sentences`` sentences)."""
    return _collect(iter_conllu(io.StringIO(text), tag, source), max_sentences, source)


def read_conllu(
    path: str | os.PathLike, tag: str = "upos", max_sentences: int | None = None
) -> TaggedCorpus:
    """A CoNLL-U file (plain or ``.gz``) -> :class:`TaggedCorpus`.

    With ``max_sentences`` only the first sentences are read (the rest of the file is not parsed).
    """
    with located_decode_errors(path, FORMAT), open_task_file(path) as stream:
        return _collect(iter_conllu(stream, tag, str(path)), max_sentences, str(path))
