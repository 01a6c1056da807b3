"""Saved question-answering models: ``train-task squad --save-model DIR`` and :func:`load_qa_model`.

**Layout of DIR.** ``task.json`` is a :class:`QARecord` (format ``contextvec-qa-model``, a
version, the kind, the window settings, the evaluation batch size and the dev scores training
reported). A fine-tuned BERT (kind ``fine-tune``) is also an HF directory
(``BertForQuestionAnswering``'s ``config.json``, ``model.safetensors``, the tokenizer files) that
``transformers`` reads too. The directory is written beside its final name and renamed into
place, so it is complete or absent.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Protocol

from contextvec.encoders.bert.finetune import BertForQuestionAnswering
from contextvec.encoders.bert.loader import check_tokenizer_files
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.registry import SAVED_TASK_FILE
from contextvec.io import hf_bert
from contextvec.io.atomic import atomic_directory
from contextvec.io.untrusted import model_file, read_json
from contextvec.tasks.qa.decode import SpanAnswer
from contextvec.tasks.qa.squad import Question, SquadData
from contextvec.tasks.qa.windows import WindowSettings

FORMAT, VERSION = "contextvec-qa-model", 1
KINDS = ("fine-tune", "features")


class QAModel(Protocol):
    """What every saved kind answers with."""

    def answer_questions(self, questions: list[Question], n_best: int = 1,
                         batch_size: int | None = None) -> list[list[SpanAnswer]]: ...

    def predict(self, data: SquadData | list[Question], batch_size: int | None = None) -> dict[str, str]: ...

    def answer(self, question: str, context: str, n_best: int = 1) -> list[SpanAnswer]: ...


@dataclass(frozen=True)
class QARecord:
    """``task.json`` of a saved question-answering model (validated when read)."""

    kind: str
    windows: WindowSettings = field(default_factory=WindowSettings)
    eval_batch_size: int = 64
    reported: dict = field(default_factory=dict)
    """The dev scores training reported (``exact_match``, ``f1``: percentages)."""
    base_model: str | None = None
    """The model fine-tuned, as given (a record, not read back)."""
    format: str = FORMAT
    version: int = VERSION
    task: str = "squad"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if isinstance(self.eval_batch_size, bool) or not isinstance(self.eval_batch_size, int) \
                or self.eval_batch_size < 1:
            raise ValueError(f"eval_batch_size must be a positive integer, not {self.eval_batch_size!r}")

    def to_json(self) -> dict:
        return {"format": self.format, "version": self.version, **{
            k: v for k, v in asdict(self).items() if k not in ("format", "version")}}

    @classmethod
    def from_json(cls, value: object, source: str) -> QARecord:
        """The record of a ``task.json`` already parsed; one line naming the field on any fault."""
        if not isinstance(value, dict) or value.get("format") != FORMAT:
            raise ValueError(f"{source}: not a contextvec question-answering model (format {FORMAT!r})")
        if value.get("version") != VERSION:
            raise ValueError(f"{source}: format version {value.get('version')!r}; this contextvec reads "
                             f"version {VERSION}")
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(value) - known):
            raise ValueError(f"{source}: unknown field {unknown[0]!r}")
        windows = value.get("windows", {})
        window_fields = {f.name for f in fields(WindowSettings)}
        if not isinstance(windows, dict) or set(windows) - window_fields or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in windows.values()):
            raise ValueError(f"{source}: windows must be an object of integers named "
                             f"{', '.join(sorted(window_fields))}")
        if not isinstance(value.get("reported", {}), dict):
            raise ValueError(f"{source}: reported must be an object")
        try:
            return cls(**{**value, "windows": WindowSettings(**windows)})
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: {error}") from None


def is_qa_model(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds a saved question-answering model (by its ``task.json``)."""
    path = Path(directory) / SAVED_TASK_FILE
    if not path.is_file():
        return False
    try:
        value = read_json(model_file(Path(directory), SAVED_TASK_FILE))
    except (OSError, ValueError):
        return False
    return isinstance(value, dict) and value.get("format") == FORMAT


def save_bert_reader(directory: str | os.PathLike, reader, *, base_model: str, reported: dict) -> Path:
    """Write a fine-tuned :class:`~contextvec.tasks.qa.bert.BertReader` as an HF directory with
    the tokenizer of ``base_model``, plus ``task.json``."""
    with atomic_directory(directory) as tmp:
        reader.model.save_pretrained(tmp, tokenizer_dir=base_model)
        write_record(tmp, QARecord("fine-tune", reader.windows, reader.batch_size, reported, str(base_model)))
    return Path(directory)


def write_record(directory: Path, record: QARecord) -> None:
    """``task.json`` of ``record`` in ``directory`` (the folder being saved)."""
    (directory / SAVED_TASK_FILE).write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")


def read_record(directory: str | os.PathLike) -> QARecord:
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory (a saved question-answering model is one)")
    if not os.path.lexists(directory / SAVED_TASK_FILE):
        raise FileNotFoundError(f"{directory} is not a saved model: {SAVED_TASK_FILE} is missing")
    path = model_file(directory, SAVED_TASK_FILE)
    return QARecord.from_json(read_json(path), str(path))


def load_qa_model(directory: str | os.PathLike, device: str = "cpu") -> QAModel:
    """A model saved by ``train-task squad --save-model DIR``, ready to answer.

    Raises:
        FileNotFoundError: no directory, or a file of the saved model missing.
        ValueError: not a question-answering model, a format version this contextvec does not
            read, or weights that do not fit.
    """
    from contextvec.tasks.qa.bert import BertReader

    record = read_record(directory)
    directory = Path(directory)
    if record.kind == "features":
        from contextvec.tasks.qa.frozen import load_span_model

        return load_span_model(directory, record, device)
    for name in (hf_bert.CONFIG_NAME, hf_bert.SAFETENSORS_NAME):  # before the HF reader opens them
        model_file(directory, name)
    check_tokenizer_files(directory)
    model = BertForQuestionAnswering.from_pretrained(directory).to(device)
    return BertReader(model, WordPieceTokenizer.from_directory(directory), record.windows,
                      record.eval_batch_size, device)
