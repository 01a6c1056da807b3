"""GLUE's small tasks as distributed (``download_glue_data.py``'s TSVs): CoLA, SST-2, MRPC, RTE,
STS-B, WNLI, train (labeled) and test (unlabeled) files.

Layouts (:data:`GLUE_FORMATS`): a header row in every file except CoLA's train (columns source,
label, original mark, sentence); MRPC's train: Quality, #1 ID, #2 ID, #1 String, #2 String (with a
UTF-8 byte-order mark, dropped); RTE and WNLI: index, sentence1, sentence2, label; STS-B: ten
columns, the score last; SST-2: sentence, label. A test file has GLUE's test header instead (the
index column, then the text columns, no label): its items get the label None. Which of the two a
file is, its first row says.

Fields are split at tabs as GLUE's own loader splits them (``csv`` with ``quotechar=None``): a
quote character is ordinary text, never a field's delimiter. CoLA's, RTE's, STS-B's and WNLI's
text is raw: it is tokenized with the library's ``moses`` tokenizer, the tokenization ELMo and
CoVe were trained on. MRPC's and SST-2's text is tokenized already (PTB-style, as ``moses``
writes it), so it is split at whitespace: ``moses`` run again would split a tokenized ``'s`` into
``'`` and ``s``.
Each item keeps an id (``Split.ids``): the file's index column, or the row number (counted from
0 after the header) where train has none (CoLA, SST-2, MRPC).

The same reader takes a user's own sentence pairs (:data:`GLUE_FORMATS` ``pairs`` and
``pair-scores``): a header row ``sentence1, sentence2, label`` (any class names) or
``sentence1, sentence2, score`` (any finite number), raw text tokenized with ``moses``; their
unlabeled files have the header ``index, sentence1, sentence2``, as GLUE's test files.

Malformed rows are refused with one line naming the file and line: a wrong column count, a
missing or unknown label, a score that is not a number or outside the task's range (STS-B: 0-5),
a sentence with no tokens.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from contextvec.tasks.readers.lines import check_max, located_decode_errors, numbered_lines, open_task_file
from contextvec.tasks.split import Split
from contextvec.text.tokenize import Tokenizer, TokenizerName

STSB_RANGE = (0.0, 5.0)
"""STS-B's similarity scores: 0 (unrelated) to 5 (equivalent)."""


@dataclass(frozen=True)
class GlueFormat:
    """The columns of one task's files. ``train``: the train file's column names (``train_header``:
    whether the file starts with them); ``text``/``label``/``index``: the train columns of the
    sentence(s), the label and the id (None: the row number); ``test``: the test file's header
    (its index column first), ``test_text`` its sentence columns; ``labels``: the classes, or None
    for a score within ``score_range``; ``tokenized``: the text is tokenized already (split at
    spaces: the ``moses`` tokenizer would split a tokenized ``'s`` again, into ``'`` and ``s``)."""

    name: str
    train: tuple[str, ...]
    text: tuple[int, ...]
    label: int
    index: int | None
    test: tuple[str, ...]
    test_text: tuple[int, ...]
    labels: tuple[str, ...] | None
    train_header: bool = True
    score_range: tuple[float, float] | None = None
    tokenized: bool = False
    open_labels: bool = False
    """Classes are whatever the file holds (a user's own pairs), not a fixed set."""
    glue: bool = True
    """GLUE's own files (False: a user's own pairs in a layout of contextvec's)."""

    @property
    def layout(self) -> str:
        """How messages name the files: GLUE's, or a user's own pairs."""
        return f"GLUE's {self.name}" if self.glue else f"a {self.name}"

    @property
    def pair(self) -> bool:
        return len(self.text) == 2


_PAIR_NLI = {"train": ("index", "sentence1", "sentence2", "label"), "text": (1, 2), "label": 3, "index": 0,
             "test": ("index", "sentence1", "sentence2"), "test_text": (1, 2)}
_OWN_PAIRS = {"text": (0, 1), "label": 2, "index": None, "test": ("index", "sentence1", "sentence2"),
              "test_text": (1, 2), "labels": None, "glue": False}
_STSB_TEST = ("index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
              "sentence2")
GLUE_FORMATS: Mapping[str, GlueFormat] = MappingProxyType({
    "cola": GlueFormat("CoLA", ("source", "label", "original mark", "sentence"), (3,), 1, None,
                       ("index", "sentence"), (1,), ("0", "1"), train_header=False),
    "sst2-glue": GlueFormat("SST-2", ("sentence", "label"), (0,), 1, None, ("index", "sentence"), (1,),
                            ("0", "1"), tokenized=True),
    "mrpc": GlueFormat("MRPC", ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"), (3, 4), 0, None,
                       ("index", "#1 ID", "#2 ID", "#1 String", "#2 String"), (3, 4), ("0", "1"),
                       tokenized=True),
    "rte": GlueFormat("RTE", labels=("entailment", "not_entailment"), **_PAIR_NLI),
    "wnli": GlueFormat("WNLI", labels=("0", "1"), **_PAIR_NLI),
    "stsb": GlueFormat("STS-B", (*_STSB_TEST, "score"), (7, 8), 9, 0, _STSB_TEST, (7, 8), None,
                       score_range=STSB_RANGE),
    "pairs": GlueFormat("pairs TSV", ("sentence1", "sentence2", "label"), open_labels=True, **_OWN_PAIRS),
    "pair-scores": GlueFormat("pair-scores TSV", ("sentence1", "sentence2", "score"), **_OWN_PAIRS),
})
"""The layout of each GLUE task's train and test files, and of a user's own pairs (``pairs``,
``pair-scores``), by contextvec's task name."""


@cache
def _tokenizer(tokenized: bool) -> Tokenizer:
    return Tokenizer(TokenizerName.WHITESPACE if tokenized else TokenizerName.MOSES)


def _label(fmt: GlueFormat, text: str, where: str) -> str | float:
    if not text.strip():
        wanted = f"one of {', '.join(fmt.labels)}" if fmt.labels else "a score"
        raise ValueError(f"{where}: no label in column {fmt.label + 1} ({fmt.train[fmt.label]}); "
                         f"expected {wanted}")
    if fmt.open_labels:
        return text
    if fmt.labels is not None:
        if text not in fmt.labels:
            raise ValueError(f"{where}: unknown label {text!r}; {fmt.name}'s labels are "
                             f"{', '.join(fmt.labels)}")
        return text
    try:
        score = float(text)
    except ValueError:
        raise ValueError(f"{where}: score {text!r} is not a number") from None
    if not math.isfinite(score):
        raise ValueError(f"{where}: score {text!r} is not a finite number")
    low, high = fmt.score_range or (-math.inf, math.inf)
    if not low <= score <= high:
        raise ValueError(f"{where}: score {text} is outside {fmt.name}'s range {low:g} to {high:g}")
    return score


def read_glue(task: str, path: str | os.PathLike, max_sentences: int | None = None) -> Split:
    """A GLUE train or test file of ``task`` (a key of :data:`GLUE_FORMATS`; plain or ``.gz``) ->
    a :class:`Split`: first sentences, labels (class strings, float scores, or None per item of a
    test file), second sentences of a pair task, ids. ``max_sentences``: the first N items."""
    fmt = GLUE_FORMATS[task]
    check_max(max_sentences)
    expected = f"{fmt.layout} train.tsv or test.tsv"
    sentences: list[list[str]] = []
    second: list[list[str]] = []
    labels: list[str | float | None] = []
    ids: list[str] = []
    with located_decode_errors(path, expected), open_task_file(path) as stream:
        rows = csv.reader((line for _, line in numbered_lines(stream)), delimiter="\t", quotechar=None)
        try:
            first = next(rows, None)
            if first is None:
                raise ValueError(f"{path}: no rows (an empty file?)")
            labeled = tuple(first) != fmt.test
            if labeled and fmt.train_header and tuple(first) != fmt.train:
                raise ValueError(
                    f"{path}, line 1: not a header of {expected}: expected {_tabbed(fmt.train)!r} (train) or "
                    f"{_tabbed(fmt.test)!r} (test), found {_tabbed(first)[:120]!r}")
            columns = fmt.train if labeled else fmt.test
            text = fmt.text if labeled else fmt.test_text
            index = fmt.index if labeled else 0
            pending = [first] if labeled and not fmt.train_header else []
            tokenize = _tokenizer(fmt.tokenized)
            for row, fields in enumerate(itertools.islice(itertools.chain(pending, rows), max_sentences)):
                where = f"{path}, line {rows.line_num}"
                if len(fields) != len(columns):
                    raise ValueError(f"{where}: {len(fields)} tab-separated columns, expected {len(columns)} "
                                     f"({', '.join(columns)}: {fmt.layout} "
                                     f"{'train' if labeled else 'test'} layout)")
                tokens = []
                for column in text:
                    words = tokenize(fields[column])[0]
                    if not words:
                        raise ValueError(f"{where}: empty {columns[column]} (column {column + 1})")
                    tokens.append(words)
                sentences.append(tokens[0])
                if fmt.pair:
                    second.append(tokens[1])
                labels.append(_label(fmt, fields[fmt.label], where) if labeled else None)
                ids.append(str(row) if index is None else fields[index])
        except csv.Error as error:
            raise ValueError(f"{path}, line {rows.line_num}: {error}") from None
    if not sentences:
        raise ValueError(f"{path}: no items after the header")
    return Split(sentences, labels, str(path), second=second if fmt.pair else None, ids=ids)


def _tabbed(fields: tuple[str, ...] | list[str]) -> str:
    return "\t".join(fields)

