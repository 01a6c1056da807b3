"""Running a saved task model on a file as one call (``contextvec predict``'s job, and its Python
API): :func:`run_predict` takes one :class:`PredictSettings` and a text stream for the
predictions, and returns a :class:`PredictResult` with the counts, times and scores.

Text input (one sentence per line) is streamed in chunks of :data:`TEXT_CHUNK` sentences
(bounded memory); a task file is read whole by the task's reader and predicted as one split,
exactly as ``train-task`` scored it."""

from __future__ import annotations

import contextlib
import gzip
import json
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
"""Sentences per streamed chunk of text input."""
STDIN = "-"


class InputFormat(StrEnum):
    TEXT = "text"  # one sentence per line, tokenized
    TASK = "task"  # the task's own file format, read by its reader


class OutputFormat(StrEnum):
    JSONL = "jsonl"  # {"tokens", "label"} or {"tokens", "tags"} per line
    CONLL = "conll"  # NER: "token TAG" lines (IOB2), a blank line after each sentence


@dataclass(frozen=True)
class PredictSettings:
    """A saved model (``model_dir``) run on ``input`` (a file, plain or ``.gz``, or ``-``: stdin).
    ``score``: the task metric against a task file's labels; ``max_sentences``: a task file's
    first N; ``batch_size``/``embed_batch_size``: None = the ones training used."""

    model_dir: str | os.PathLike
    input: str
    format: InputFormat = InputFormat.TEXT
    tokenizer: TokenizerName = TokenizerName.WHITESPACE
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
        object.__setattr__(self, "tokenizer", as_tokenizer_name(self.tokenizer, one_per_line=True))
        if self.max_sentences and self.format is not InputFormat.TASK:
            raise ValueError("--max-sentences is for --format task (text input is streamed whole)")
        if self.score and self.format is not InputFormat.TASK:
            raise ValueError("--score needs labels: give the task's own file with --format task")
        if self.input == "":
            raise ValueError("INPUT is an empty path; give a file, or - for standard input")


@dataclass
class PredictResult:
    """What :func:`run_predict` did: sentences predicted, seconds (loading apart), and with
    ``score`` the task's scores (``metric``; the dev score training reported beside it)."""

    task: str
    source: str
    count: int
    seconds: float
    loading_s: float
    metric: str
    scores: dict | None = None
    reported_dev: float | None = None

    def timing_line(self) -> str:
        return (f"predicted {self.count} sentences in {self.seconds:.2f} s "
                f"({self.count / max(self.seconds, 1e-9):.1f} sentences/s; loading {self.loading_s:.1f} s)")

    def score_line(self) -> str:
        """The scores for people, to 4 decimals as ``train-task`` prints them (``scores`` and
        ``reported_dev`` keep the exact values)."""
        reported = ("no dev score" if self.reported_dev is None
                    else f"dev {self.metric} {self.reported_dev:.4f}")
        return (f"{self.task} {self.metric} {self.scores[self.metric]:.4f} on {self.count} sentences of "
                f"{self.source} (training reported {reported})")


def _text_sentences(stream: BinaryIO, source: str, tokenizer_name: TokenizerName) -> Iterator[list[str]]:
    """Tokenized lines; each line is decoded on its own, so a bad byte is reported at its line.
    A file without a line is refused, as ``contextvec embed`` refuses one."""
    tokenize = Tokenizer(tokenizer_name)
    number = 0
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{source}, line {number}: not UTF-8 ({error.reason})") from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark would join the first token
        tokens = tokenize(line)[0] if line.strip() else []
        if not tokens:
            raise ValueError(f"{source}, line {number}: empty line (expected one sentence per line)")
        yield tokens
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


def _write(stream: TextIO, tokens: list[str], predicted: object, conll: bool) -> None:
    if conll:
        stream.write("".join(f"{t} {tag}\n" for t, tag in zip(tokens, predicted, strict=True)) + "\n")
    else:
        key = "tags" if isinstance(predicted, list) else "label"
        stream.write(json.dumps({"tokens": tokens, key: predicted}, ensure_ascii=False) + "\n")


def run_predict(settings: PredictSettings, out: TextIO | None) -> PredictResult:
    """Load the model, predict every sentence of ``settings.input`` and write each to ``out`` (None:
    not written) as it comes; score them with ``settings.score``."""
    import torch

    from contextvec.tasks.saved import load_task_model

    s = settings
    if s.threads:
        torch.set_num_threads(s.threads)
    started = time.perf_counter()
    model = load_task_model(s.model_dir, device=s.device)
    conll = s.output_format is OutputFormat.CONLL
    if conll and not model.tagging:
        raise ValueError(f"--output-format conll is for NER; {model.spec.name} predicts a label per sentence")
    split = None
    if s.format is InputFormat.TASK:  # read whole and predicted as one split, as train-task scored it
        split = (_read_task_stdin(model.spec, s.max_sentences) if s.input == STDIN
                 else model.spec.load(s.input, s.max_sentences))
    loaded = time.perf_counter() - started
    predictions, source = [], "<stdin>" if s.input == STDIN else s.input
    with _opened_input(s.input) if split is None else contextlib.nullcontext() as stream:
        sentences = split.sentences if split is not None else _text_sentences(stream, source, s.tokenizer)
        chunk = len(split) if split is not None else TEXT_CHUNK
        stream_out = model.predict_stream(sentences, chunk, s.batch_size, s.embed_batch_size)
        with tqdm(unit="sent", desc="predict", disable=not s.progress,
                  total=None if split is None else chunk) as bar:
            for tokens, predicted in stream_out:
                if out is not None:
                    _write(out, tokens, predicted, conll)
                predictions.append(predicted if s.score else None)
                bar.update(1)
    seconds = time.perf_counter() - started - loaded
    result = PredictResult(model.spec.name, source, len(predictions), seconds, loaded, model.spec.metric)
    if s.score:
        result.scores = model.score(split, predictions)
        result.reported_dev = (model.config.get("reported") or {}).get("dev")
    return result
