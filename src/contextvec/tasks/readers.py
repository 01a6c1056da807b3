"""Readers for the task-model datasets: CoNLL-2003 NER, SST (5 and 2 classes), TREC-6.

Every reader takes a plain or ``.gz`` path, an optional ``max_sentences`` (the first N items of
the file, for quick runs), and raises a ``ValueError`` naming the file and line for malformed
input; nothing is skipped silently.

- **CoNLL-2003** (:func:`read_conll2003`): four space-separated columns ``token POS chunk NER``,
  blank lines between sentences, ``-DOCSTART- -X- O O`` lines between documents (dropped: they
  are not sentences). Tags are kept as in the file, i.e. the original **IOB1** scheme (``B-``
  only where two entities of one type touch); :func:`iob1_to_iob2` converts to IOB2 (BIO).
- **SST** (:func:`read_sst`): one PTB-style tree per line, every node labelled 0-4; the root
  label is the sentence label and the leaves are the tokens. ``sst5`` keeps the five classes;
  ``sst2`` maps 0,1 -> ``negative`` and 3,4 -> ``positive`` and drops root label 2 (neutral).
  The treebank's PTB escapes are undone so that tokens look like the raw text an encoder was
  trained on: ``-LRB-`` -> ``(``, ``-RRB-`` -> ``)``, ``-LSB-``/``-RSB-`` -> ``[``/``]``,
  ``-LCB-``/``-RCB-`` -> ``{``/``}``, ``\\/`` -> ``/``, ``\\*`` -> ``*``. The quote tokens
  `````` and ``''`` are kept (they are also how PTB-tokenized news, ELMo's training text, writes
  quotes).
- **TREC** (:func:`read_trec`): one question per line, ``COARSE:fine tokens...``; the label is the
  coarse class (6 labels: ABBR DESC ENTY HUM LOC NUM). The file is **latin-1** (the official
  ``train_5500.label`` has one 0xF0 byte), so it is decoded as latin-1, which maps every byte to
  one character and cannot fail. TREC has no dev split: :func:`carve_dev` takes a seeded random
  10% of train (seed :data:`DEV_SPLIT_SEED`, independent of the training seed so every run
  evaluates on the same dev questions).
"""

from __future__ import annotations

import gzip
import itertools
import os
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from contextvec.tasks.data import TaggedCorpus

SST_VARIANTS = ("sst5", "sst2")
SST2_LABELS = {"0": "negative", "1": "negative", "3": "positive", "4": "positive"}
TREC_COARSE = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
DEV_SPLIT_SEED = 0
"""Seed of the TREC dev carve-out (fixed, so that every training seed sees the same dev set)."""

_PTB_UNESCAPE = {
    "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
}
_TAG = re.compile(r"^(O|[IB]-[^\s-][^\s]*)$")
_TREE_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass(frozen=True)
class LabeledSentences:
    """Parallel lists: ``sentences[i]`` (tokens) has the class label ``labels[i]``."""

    sentences: list[list[str]]
    labels: list[str]
    source: str = "<string>"

    def __post_init__(self) -> None:
        if len(self.sentences) != len(self.labels):
            raise ValueError(f"{self.source}: {len(self.sentences)} sentences, {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.sentences)


def open_task_file(path: str | os.PathLike, encoding: str = "utf-8") -> TextIO:
    """Open a text file for reading, gunzipping it if its name ends in ``.gz``."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return path.open("r", encoding=encoding, newline="")


def _check_max(max_sentences: int | None) -> None:
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, not {max_sentences}")


def _lines(stream: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line break)."""
    for number, line in enumerate(stream, start=1):
        yield number, line.rstrip("\n").rstrip("\r")


# ---------------------------------------------------------------- CoNLL-2003


def iter_conll2003(stream: Iterable[str], source: str = "<string>") -> Iterator[tuple[list[str], list[str]]]:
    """Yield ``(tokens, ner_tags)`` per sentence of a CoNLL-2003 stream (IOB1 tags, unchanged)."""
    tokens: list[str] = []
    tags: list[str] = []
    for number, line in _lines(stream):
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


def parse_conll2003(text: str, max_sentences: int | None = None, source: str = "<string>") -> TaggedCorpus:
    """A CoNLL-2003 string -> :class:`TaggedCorpus` of tokens and IOB1 NER tags."""
    return _tagged(iter_conll2003(text.splitlines(keepends=True), source), max_sentences, source)


def read_conll2003(path: str | os.PathLike, max_sentences: int | None = None) -> TaggedCorpus:
    """A CoNLL-2003 file (plain or ``.gz``) -> :class:`TaggedCorpus` of tokens and IOB1 NER tags."""
    with open_task_file(path) as stream:
        return _tagged(iter_conll2003(stream, str(path)), max_sentences, str(path))


def _tagged(
    pairs: Iterator[tuple[list[str], list[str]]], max_sentences: int | None, source: str
) -> TaggedCorpus:
    _check_max(max_sentences)
    taken = list(itertools.islice(pairs, max_sentences))
    if not taken:
        raise ValueError(f"{source}: no sentences")
    return TaggedCorpus([t for t, _ in taken], [g for _, g in taken], source)


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 -> IOB2 (BIO): an ``I-X`` that starts an entity (after ``O`` or another type) becomes
    ``B-X``. ``B-X`` (IOB1: a new entity right after one of the same type) stays ``B-X``."""
    out: list[str] = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            out.append("B-" + tag[2:])
        else:
            out.append(tag)
        previous = tag
    return out


def iob2_to_iob1(tags: Sequence[str]) -> list[str]:
    """IOB2 (BIO) -> IOB1: ``B-X`` stays only where it follows an ``X`` entity, else ``I-X``."""
    out: list[str] = []
    previous = "O"
    for tag in tags:
        if tag.startswith("B-") and not (previous != "O" and previous[2:] == tag[2:]):
            out.append("I-" + tag[2:])
        else:
            out.append(tag)
        previous = tag
    return out


def iob2_to_bioul(tags: Sequence[str]) -> list[str]:
    """IOB2 (BIO) -> BIOUL (BIOES): a one-token entity is ``U-X``, the last token of a longer one
    ``L-X``."""
    out: list[str] = []
    for i, tag in enumerate(tags):
        following = tags[i + 1] if i + 1 < len(tags) else "O"
        continued = following == "I-" + tag[2:]
        if tag.startswith("B-") and not continued:
            out.append("U-" + tag[2:])
        elif tag.startswith("I-") and not continued:
            out.append("L-" + tag[2:])
        else:
            out.append(tag)
    return out


def bioul_to_iob2(tags: Sequence[str]) -> list[str]:
    """BIOUL (BIOES) -> IOB2 (BIO): ``U-X`` -> ``B-X``, ``L-X`` -> ``I-X``."""
    return ["B-" + t[2:] if t.startswith("U-") else "I-" + t[2:] if t.startswith("L-") else t for t in tags]


# ---------------------------------------------------------------- SST


def parse_tree(line: str, where: str = "<string>") -> tuple[str, list[str]]:
    """A PTB-style SST tree -> (root label, leaf tokens with PTB escapes undone)."""
    items = _TREE_TOKEN.findall(line)
    if len(items) < 4 or items[0] != "(" or items[-1] != ")":
        raise ValueError(f"{where}: not a tree: {line[:80]!r}")
    depth = 0
    leaves: list[str] = []
    for i, item in enumerate(items):
        if item == "(":
            depth += 1
            if i + 1 >= len(items) or items[i + 1] in ("(", ")"):
                raise ValueError(f"{where}: a node without a label at item {i}")
        elif item == ")":
            depth -= 1
            if depth < 0 or (depth == 0 and i != len(items) - 1):
                raise ValueError(f"{where}: unbalanced brackets")
        elif items[i - 1] != "(":  # not a label: a leaf
            leaves.append(unescape_ptb(item))
    if depth != 0:
        raise ValueError(f"{where}: unbalanced brackets")
    if not leaves:
        raise ValueError(f"{where}: a tree without leaves")
    return items[1], leaves


def unescape_ptb(token: str) -> str:
    """Undo the PTB escapes of SST leaves (see the module docstring)."""
    token = _PTB_UNESCAPE.get(token, token)
    return token.replace("\\/", "/").replace("\\*", "*")


def read_sst(
    path: str | os.PathLike, variant: str = "sst5", max_sentences: int | None = None
) -> LabeledSentences:
    """SST trees (plain or ``.gz``) -> sentences with their root labels.

    ``sst5``: labels ``"0"`` .. ``"4"``; ``sst2``: ``negative``/``positive``, neutral roots dropped
    (``max_sentences`` counts the kept sentences).
    """
    if variant not in SST_VARIANTS:
        raise ValueError(f"variant must be one of {SST_VARIANTS}, not {variant!r}")
    _check_max(max_sentences)
    sentences: list[list[str]] = []
    labels: list[str] = []
    with open_task_file(path) as stream:
        for number, line in _lines(stream):
            if max_sentences is not None and len(sentences) >= max_sentences:
                break
            if not line.strip():
                raise ValueError(f"{path}, line {number}: empty line (expected one tree per line)")
            label, tokens = parse_tree(line, f"{path}, line {number}")
            if label not in ("0", "1", "2", "3", "4"):
                raise ValueError(f"{path}, line {number}: root label {label!r} is not 0-4")
            if variant == "sst2":
                if label == "2":
                    continue
                label = SST2_LABELS[label]
            sentences.append(tokens)
            labels.append(label)
    if not sentences:
        raise ValueError(f"{path}: no sentences")
    return LabeledSentences(sentences, labels, str(path))


# ---------------------------------------------------------------- TREC


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


def read_trec(path: str | os.PathLike, max_sentences: int | None = None) -> LabeledSentences:
    """A TREC label file (plain or ``.gz``, latin-1) -> questions with their coarse labels."""
    _check_max(max_sentences)
    sentences: list[list[str]] = []
    labels: list[str] = []
    with open_task_file(path, encoding="latin-1") as stream:
        for number, line in _lines(stream):
            if max_sentences is not None and len(sentences) >= max_sentences:
                break
            if not line.strip():
                raise ValueError(f"{path}, line {number}: empty line")
            label, tokens = parse_trec_line(line, f"{path}, line {number}")
            sentences.append(tokens)
            labels.append(label)
    if not sentences:
        raise ValueError(f"{path}: no questions")
    return LabeledSentences(sentences, labels, str(path))


def carve_dev(
    data: LabeledSentences, fraction: float = 0.1, seed: int = DEV_SPLIT_SEED
) -> tuple[LabeledSentences, LabeledSentences]:
    """Split ``data`` into (train, dev): a seeded random ``fraction`` (rounded, at least 1) is dev.

    Both parts keep the file order. The same data, fraction and seed give the same split.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), not {fraction}")
    n_dev = max(1, round(len(data) * fraction))
    if n_dev >= len(data):
        raise ValueError(f"{data.source}: {len(data)} sentences are too few to carve out a dev set")
    dev_ids = set(random.Random(seed).sample(range(len(data)), n_dev))

    def pick(keep: bool, name: str) -> LabeledSentences:
        ids = [i for i in range(len(data)) if (i in dev_ids) == keep]
        return LabeledSentences([data.sentences[i] for i in ids], [data.labels[i] for i in ids],
                                f"{data.source} ({name}, seed {seed})")

    return pick(False, f"train minus {fraction:.0%} dev"), pick(True, f"{fraction:.0%} dev carve-out")
