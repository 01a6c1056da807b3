"""Saved question-answering models: ``train-task squad --save-model DIR`` and :func:`load_qa_model`.

**Layout of DIR.** ``task.json`` is a :class:`~contextvec.tasks.qa.record.QARecord` (format
``contextvec-qa-model``, a version, the kind, the window settings, the evaluation batch size and
the dev scores training reported). A fine-tuned BERT (kind ``fine-tune``) is also an HF directory
(``BertForQuestionAnswering``'s ``config.json``, ``model.safetensors``, the tokenizer files) that
``transformers`` reads too. The directory is written beside its final name and renamed into
place, so it is complete or absent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from contextvec.encoders.bert.finetune import BertForQuestionAnswering
from contextvec.encoders.bert.loader import check_tokenizer_files
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.io import hf_bert
from contextvec.io.atomic import atomic_directory
from contextvec.io.untrusted import model_file
from contextvec.tasks.qa.bert import BertReader
from contextvec.tasks.qa.decode import SpanAnswer
from contextvec.tasks.qa.record import QARecord, read_record, write_record
from contextvec.tasks.qa.span_saved import load_span_model
from contextvec.tasks.qa.squad import Question, SquadData


class QAModel(Protocol):
    """What every saved kind answers with."""

    def answer_questions(self, questions: list[Question], n_best: int = 1,
                         batch_size: int | None = None) -> list[list[SpanAnswer]]: ...

    def predict(self, data: SquadData | list[Question], batch_size: int | None = None) -> dict[str, str]: ...

    def answer(self, question: str, context: str, n_best: int = 1) -> list[SpanAnswer]: ...


def save_bert_reader(directory: str | os.PathLike, reader: BertReader, *, base_model: str,
                     reported: dict) -> Path:
    """Write a fine-tuned :class:`~contextvec.tasks.qa.bert.BertReader` as an HF directory with
    the tokenizer of ``base_model``, plus ``task.json``."""
    with atomic_directory(directory) as tmp:
        reader.model.save_pretrained(tmp, tokenizer_dir=base_model)
        write_record(tmp, QARecord("fine-tune", reader.windows, reader.batch_size, reported, str(base_model)))
    return Path(directory)


def load_qa_model(directory: str | os.PathLike, device: str = "cpu") -> QAModel:
    """A model saved by ``train-task squad --save-model DIR``, ready to answer.

    Raises:
        FileNotFoundError: no directory, or a file of the saved model missing.
        ValueError: not a question-answering model, a format version this contextvec does not
            read, or weights that do not fit.
    """
    record = read_record(directory)
    directory = Path(directory)
    if record.kind == "features":
        return load_span_model(directory, record, device)
    for name in (hf_bert.CONFIG_NAME, hf_bert.SAFETENSORS_NAME):  # before the HF reader opens them
        model_file(directory, name)
    check_tokenizer_files(directory)
    model = BertForQuestionAnswering.from_pretrained(directory).to(device)
    return BertReader(model, WordPieceTokenizer.from_directory(directory), record.windows,
                      record.eval_batch_size, device)
