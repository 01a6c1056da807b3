"""The record of a saved question-answering model: ``task.json`` as :class:`QARecord`.

Format ``contextvec-qa-model``, a version, the kind (``fine-tune``: a BERT with a span head;
``features``: a span model over a frozen encoder's features), the window settings, the
evaluation batch size and the dev scores training reported. The file is data from elsewhere: it
is validated field by field when read, and a fault is one line naming the field.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from contextvec.encoders.registry import SAVED_TASK_FILE
from contextvec.io.untrusted import model_file, read_json
from contextvec.tasks.qa.windows import WindowSettings

FORMAT, VERSION = "contextvec-qa-model", 1
KINDS = ("fine-tune", "features")


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
