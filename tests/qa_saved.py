"""A saved question-answering model small enough for any test: the tiny random BERT fine-tuned
for nothing, saved as ``train-task squad --fine-tune --save-model`` saves one."""

from __future__ import annotations

from pathlib import Path

from contextvec.encoders.bert.finetune import BertForQuestionAnswering
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.tasks.qa.bert import BertReader
from contextvec.tasks.qa.saved import save_bert_reader
from contextvec.tasks.qa.windows import WindowSettings

TINY_WINDOWS = WindowSettings(max_length=64, stride=16, max_query=16)
"""Rows of the tiny BERT's 64 positions: a context of a few sentences takes several windows."""


def save_tiny_qa_model(directory: Path, bert_dir: Path) -> Path:
    """The tiny BERT of ``bert_dir`` with a seeded random span head, saved at ``directory``."""
    model = BertForQuestionAnswering.from_pretrained(bert_dir, seed=0)
    reader = BertReader(model, WordPieceTokenizer.from_directory(bert_dir), TINY_WINDOWS)
    return save_bert_reader(directory, reader, base_model=str(bert_dir), reported={})
