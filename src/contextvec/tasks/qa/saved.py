"""Saved question-answering models: ``train-task squad --save-model DIR`` and :func:`load_qa_model`.

**Layout of DIR.** ``task.json`` is a :class:`~contextvec.tasks.qa.record.QARecord` (format
``contextvec-qa-model``, a version, the kind, the window settings, the evaluation batch size and
the dev scores training reported). A fine-tuned BERT (kind ``fine-tune``) is also an HF directory
(``BertForQuestionAnswering``'s ``config.json``, ``model.safetensors``, the tokenizer files) that
``transformers`` reads too. The directory is written beside its final name and renamed into
place, so it is complete or absent.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Protocol

from contextvec.encoders.bert.finetune import BertForQuestionAnswering
from contextvec.encoders.bert.loader import check_tokenizer_files
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.precision import Precision, apply_precision, as_precision
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


def check_reading(max_length: int | None, precision: Precision | str) -> Precision:
    """How a saved model is to read at inference, checked as far as it can be without the model:
    ``max_length`` None or a whole number of pieces >= 1; ``precision`` returned as a
    :class:`~contextvec.encoders.precision.Precision`. :func:`load_qa_model` checks the rest."""
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                   or max_length < 1):
        raise ValueError(f"max_length must be a whole number of pieces >= 1, not {max_length!r}")
    return as_precision(precision)


def load_qa_model(directory: str | os.PathLike, device: str = "cpu", *, max_length: int | None = None,
                  precision: Precision | str = Precision.FP32) -> QAModel:
    """A model saved by ``train-task squad --save-model DIR``, ready to answer.

    Args:
        directory: the saved model's directory.
        device: where to run the model.
        max_length: a fine-tuned BERT's pieces per row at inference, instead of the saved
            ``max_length`` (None: the saved one); the stride between windows stays the saved
            one. At most the model's positions, and room for ``max_query`` question pieces and
            3 special pieces. Not for a span model over frozen features, which reads each
            context whole.
        precision: the weight precision of inference
            (:func:`~contextvec.encoders.precision.apply_precision`): a fine-tuned BERT's
            encoder (its span head stays float32), or a span model's frozen encoder.

    Raises:
        FileNotFoundError: no directory, or a file of the saved model missing.
        ValueError: not a question-answering model, a format version this contextvec does not
            read, weights that do not fit, a ``max_length`` that does not fit the model or is
            given for a span model, a ``precision`` this CPU or device cannot run or given for
            a span model without an encoder.
    """
    precision = check_reading(max_length, precision)
    record = read_record(directory)
    directory = Path(directory)
    if record.kind == "features":
        return _span_reader(directory, record, device, max_length, precision)
    windows = record.windows
    if max_length is not None:
        windows = dataclasses.replace(windows, max_length=max_length)
    for name in (hf_bert.CONFIG_NAME, hf_bert.SAFETENSORS_NAME):  # before the HF reader opens them
        model_file(directory, name)
    check_tokenizer_files(directory)
    model = BertForQuestionAnswering.from_pretrained(directory).to(device)
    # The head is one (hidden -> 2) product per piece: rounding it would save nothing and fall
    # straight on the scores.
    apply_precision(model.bert, precision)
    return BertReader(model, WordPieceTokenizer.from_directory(directory), windows,
                      record.eval_batch_size, device)


def _span_reader(directory: Path, record: QARecord, device: str, max_length: int | None,
                 precision: Precision) -> QAModel:
    if max_length is not None:
        raise ValueError(f"{directory}: max_length is for fine-tuned BERT readers, which read a context in "
                         "windows; this span model over frozen features reads each context whole")
    reader = load_span_model(directory, record, device)
    if precision is not Precision.FP32:
        if reader.encoder is None:
            raise ValueError(f"{directory}: precision {precision} converts a model's encoder; this span "
                             "model reads no contextual vectors (trained with --no-contextual)")
        apply_precision(reader.encoder, precision)
    return reader
