"""TREC question classification: one question per line, ``COARSE:fine tokens...``; the label is
the coarse class (TREC-6: ABBR DESC ENTY HUM LOC NUM; :func:`read_trec`) or the whole
``COARSE:fine`` pair (TREC-50, the fine classes, 50 in train_5500; ``read_trec(..., fine=True)``).
The file is **latin-1** (the official ``train_5500.label`` has one 0xF0 byte), so it is decoded
as latin-1, which maps every byte to one character and cannot fail. TREC has no dev split:
:func:`~contextvec.tasks.split.carve_dev` takes a seeded random 10% of train (seed
:data:`~contextvec.tasks.split.DEV_SPLIT_SEED`, independent
of the training seed so every run evaluates on the same dev questions; TREC-6 and TREC-50 carve
the same questions)."""

from __future__ import annotations

import os

from contextvec.tasks.readers.lines import line_items
from contextvec.tasks.split import LabeledSentences

TREC_COARSE = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
FORMAT = "TREC questions: one 'COARSE:fine question words' line per question"


def parse_trec_line(line: str, where: str = "<string>") -> tuple[str, list[str]]:
    """``COARSE:fine tokens...`` -> (coarse label, tokens)."""
    head, _, rest = line.partition(" ")
    coarse, colon, fine = head.partition(":")
    tokens = rest.split()
    if not colon or not fine or coarse not in TREC_COARSE:
        raise ValueError(f"{where}: expected 'COARSE:fine question' with COARSE in "
                         f"{', '.join(TREC_COARSE)}: {line[:80]!r}")
    if not tokens:
        raise ValueError(f"{where}: a label without a question")
    return coarse, tokens


def _fine(line: str, where: str) -> tuple[str, list[str]]:
    _, tokens = parse_trec_line(line, where)  # checks the line
    return line.partition(" ")[0], tokens


def read_trec(
    path: str | os.PathLike, max_sentences: int | None = None, fine: bool = False
) -> LabeledSentences:
    """A TREC label file (plain or ``.gz``, latin-1) -> questions with their coarse labels, or
    (``fine``) their ``COARSE:fine`` labels."""
    return line_items(path, _fine if fine else parse_trec_line, max_sentences, FORMAT,
                      encoding="latin-1", what="questions")
