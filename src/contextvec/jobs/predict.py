"""Running a saved task model on a file as one call (``contextvec predict``'s job, and its Python
API): :func:`run_predict` takes one :class:`PredictSettings` and a text stream for the
predictions, and returns a :class:`PredictResult` with the counts, times and scores.

Text input (one sentence per line; for a sentence-pair task one pair per line, its two sentences
separated by a tab) is streamed in chunks of :data:`TEXT_CHUNK` items (bounded memory); a task
file is read whole by the task's reader and predicted as one split, exactly as ``train-task``
scored it. Output: JSON lines, CoNLL (NER) or GLUE's submission format (``index``,
``prediction``: the file's own ids, labels as GLUE spells them, STS-B scores clipped to 0-5)."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from tqdm import tqdm

from contextvec.choices import checked_choice
from contextvec.text.tokenize import Tokenizer, TokenizerName, as_tokenizer_name

if TYPE_CHECKING:  # torch-heavy: imported when a prediction runs, not with the settings
    from contextvec.tasks.spec import TaskSpec
    from contextvec.tasks.split import Split

TEXT_CHUNK = 1000
"""Items per streamed chunk of text input."""
STDIN = "-"
PAIR_SEPARATOR = "\t"
"""Between the two sentences of a pair on a line of text input."""
GLUE_HEADER = "index\tprediction\n"


class InputFormat(StrEnum):
    TEXT = "text"  # one sentence per line, tokenized
    TASK = "task"  # the task's own file format, read by its reader


class OutputFormat(StrEnum):
    JSONL = "jsonl"  # {"tokens", "label"}, {"tokens", "tags"}; pairs add "second"; regression: "score"
    CONLL = "conll"  # NER: "token TAG" lines (IOB2), a blank line after each sentence
    GLUE = "glue"  # GLUE tasks: "index<TAB>prediction" rows under that header (GLUE's submission files)


@dataclass(frozen=True)
class PredictSettings:
    """A saved model (``model_dir``) run on ``input`` (a file, plain or ``.gz``, or ``-``: stdin).
    ``score``: the task metric against a task file's labels; ``max_sentences``: a task file's
    first N; ``batch_size``/``embed_batch_size``: None = the ones training used."""

    model_dir: str | os.PathLike
    input: str
    format: InputFormat = InputFormat.TEXT
    tokenizer: TokenizerName | None = None
    """How text lines become tokens; None: as the task's reader tokenized training's text."""
    output_format: OutputFormat = OutputFormat.JSONL
    score: bool = False
    max_sentences: int | None = None
    batch_size: int | None = None
    embed_batch_size: int | None = None
    device: str = "cpu"
    threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        for name, kind in (("format", InputFormat), ("output_format", OutputFormat)):
            object.__setattr__(self, name, checked_choice(kind, getattr(self, name), name))
        if self.tokenizer is not None:
            object.__setattr__(self, "tokenizer", as_tokenizer_name(self.tokenizer, one_per_line=True))
        if self.max_sentences and self.format is not InputFormat.TASK:
            raise ValueError("--max-sentences is for --format task (text input is streamed whole)")
        if self.score and self.format is not InputFormat.TASK:
            raise ValueError("--score needs labels: give the task's own file with --format task")
        if self.input == "":
            raise ValueError("INPUT is an empty path; give a file, or - for standard input")


@dataclass
class PredictResult:
    """What :func:`run_predict` did: items (``unit``: sentences or pairs) predicted, seconds
    (loading apart), and with ``score`` the task's scores (``metric``; the dev score training
    reported beside it)."""

    task: str
    source: str
    count: int
    seconds: float
    loading_s: float
    metric: str
    scores: dict | None = None
    reported_dev: float | None = None
    unit: str = "sentences"

    def timing_line(self) -> str:
        return (f"predicted {self.count} {self.unit} in {self.seconds:.2f} s "
                f"({self.count / max(self.seconds, 1e-9):.1f} {self.unit}/s; loading {self.loading_s:.1f} s)")

    def score_line(self) -> str:
        """The scores for people, to 4 decimals as ``train-task`` prints them, the task's metric
        first, then its other fractions (GLUE's: accuracy, F1, Matthews, Pearson, Spearman);
        ``scores`` and ``reported_dev`` keep the exact values."""
        reported = ("no dev score" if self.reported_dev is None
                    else f"dev {self.metric} {self.reported_dev:.4f}")
        others = "".join(f"; {name} {value:.4f}" for name, value in self.scores.items()
                         if name != self.metric and isinstance(value, float))
        return (f"{self.task} {self.metric} {self.scores[self.metric]:.4f} on {self.count} {self.unit} of "
                f"{self.source} (training reported {reported}){others}")


def _text_items(stream: BinaryIO, source: str, tokenizer_name: TokenizerName,
                pair_task: str | None) -> Iterator[list[str] | tuple[list[str], list[str]]]:
    """Tokenized lines, or for a pair task (``pair_task``: its name) ``(first, second)`` from the
    two halves of a line split at its one tab; each line is decoded on its own, so a bad byte is
    reported at its line. A file without a line is refused, as ``contextvec embed`` refuses one."""
    tokenize = Tokenizer(tokenizer_name)

    def tokens(text: str, where: str, what: str) -> list[str]:
        found = tokenize(text)[0] if text.strip() else []
        if not found:
            raise ValueError(f"{where}: empty {what}")
        return found

    number = 0
    for number, raw in enumerate(stream, start=1):
        where = f"{source}, line {number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{where}: not UTF-8 ({error.reason})") from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark would join the first token
        line = line.rstrip("\r\n")
        if pair_task is None:
            yield tokens(line, where, "line (expected one sentence per line)")
            continue
        halves = line.split(PAIR_SEPARATOR)
        if len(halves) != 2:
            raise ValueError(f"{where}: {pair_task} predicts sentence pairs: expected two sentences "
                             f"separated by one tab, found {len(halves) - 1} tabs")
        yield tokens(halves[0], where, "first sentence"), tokens(halves[1], where, "second sentence")
    if number == 0:
        raise ValueError(f"{source} is empty: there is nothing to predict")


@contextlib.contextmanager
def _opened_input(path: str) -> Iterator[BinaryIO]:
    if path == STDIN:
        yield sys.stdin.buffer
    elif path.endswith(".gz"):
        with gzip.open(path, "rb") as stream:
            yield stream
    else:
        with open(path, "rb") as stream:
            yield stream


def _read_task_stdin(spec: TaskSpec, max_sentences: int | None) -> Split:
    """A task file given as ``-``: copied to a temporary file for the task's reader."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as tmp:
        tmp.write(sys.stdin.read())
    try:
        return spec.load(tmp.name, max_sentences)
    finally:
        Path(tmp.name).unlink(missing_ok=True)


def _glue_value(spec: TaskSpec, predicted: str | float) -> str:
    """A prediction as GLUE's submission files spell it: the class label as the task's files
    spell it, a score clipped to the task's range, to 3 decimals as GLUE's baselines write it."""
    if not spec.regression:
        return str(predicted)
    low, high = spec.label_range or (-math.inf, math.inf)
    return f"{min(max(float(predicted), low), high):.3f}"


def _write(stream: TextIO, spec: TaskSpec, item: object, predicted: object, form: OutputFormat,
           index: str) -> None:
    if form is OutputFormat.CONLL:
        stream.write("".join(f"{t} {tag}\n" for t, tag in zip(item, predicted, strict=True)) + "\n")
    elif form is OutputFormat.GLUE:
        stream.write(f"{index}\t{_glue_value(spec, predicted)}\n")
    else:
        key = "tags" if spec.tagging else "score" if spec.regression else "label"
        row = {"tokens": item[0], "second": item[1]} if spec.pair else {"tokens": item}
        stream.write(json.dumps({**row, key: predicted}, ensure_ascii=False) + "\n")


def run_predict(settings: PredictSettings, out: TextIO | None) -> PredictResult:
    """Load the model, predict every item (sentence or pair) of ``settings.input`` and write each to
    ``out`` (None: not written) as it comes; score them with ``settings.score``."""
    import torch

    from contextvec.tasks.readers.glue import GLUE_FORMATS
    from contextvec.tasks.saved import load_task_model

    s = settings
    if s.threads:
        torch.set_num_threads(s.threads)
    started = time.perf_counter()
    model = load_task_model(s.model_dir, device=s.device)
    spec, form = model.spec, s.output_format
    if form is OutputFormat.CONLL and not model.tagging:
        raise ValueError(f"--output-format conll is for NER; {spec.name} predicts a label per item")
    if form is OutputFormat.GLUE and spec.name not in GLUE_FORMATS:
        raise ValueError(f"--output-format glue is for the GLUE tasks ({', '.join(GLUE_FORMATS)}), "
                         f"not {spec.name}")
    source = "<stdin>" if s.input == STDIN else s.input
    split = None
    if s.format is InputFormat.TASK:  # read whole and predicted as one split, as train-task scored it
        split = (_read_task_stdin(spec, s.max_sentences) if s.input == STDIN
                 else spec.load(s.input, s.max_sentences))
        if s.score and not split.labeled:
            raise ValueError(f"{source} has no labels (GLUE's test.tsv is unlabeled): --score needs a "
                             "labeled file")
    loaded = time.perf_counter() - started
    predictions: list = []
    with _opened_input(s.input) if split is None else contextlib.nullcontext() as stream:
        if split is None:
            tokenizer = s.tokenizer or spec.tokenizer
            items = _text_items(stream, source, tokenizer, spec.name if spec.pair else None)
        else:
            items = zip(split.sentences, split.second, strict=True) if spec.pair else split.sentences
        chunk = len(split) if split is not None else TEXT_CHUNK
        stream_out = model.predict_stream(items, chunk, s.batch_size, s.embed_batch_size)
        ids = split.ids if split is not None and split.ids is not None else None
        if out is not None and form is OutputFormat.GLUE:
            out.write(GLUE_HEADER)
        with tqdm(unit="item", desc="predict", disable=not s.progress,
                  total=None if split is None else chunk) as bar:
            for number, (item, predicted) in enumerate(stream_out):
                if out is not None:  # text input: items numbered from 0, as GLUE's test files number them
                    _write(out, spec, item, predicted, form, ids[number] if ids else str(number))
                predictions.append(predicted if s.score else None)
                bar.update(1)
    seconds = time.perf_counter() - started - loaded
    result = PredictResult(spec.name, source, len(predictions), seconds, loaded, spec.metric,
                           unit="pairs" if spec.pair else "sentences")
    if s.score:
        result.scores = model.score(split, predictions)
        result.reported_dev = (model.config.get("reported") or {}).get("dev")
    return result
