"""BERT fine-tuned for extractive question answering (the BERT paper, section 4.2).

Rows are ``[CLS] question [SEP] context window [SEP]`` (:mod:`~contextvec.tasks.qa.windows`);
``qa_outputs`` over the last layer gives each piece a start and an end logit
(:class:`~contextvec.encoders.bert.finetune.BertForQuestionAnswering`), trained with the mean
of the start and end cross-entropies. The recipe is the paper's fine-tuning one
(:class:`~contextvec.tasks.finetune.FineTuneSettings`: AdamW, lr 5e-5 with linear warmup and
decay, batches of 32 rows, 3 epochs, the best epoch on dev kept by F1). An answer is the best
span of at most ``max_answer_length`` pieces across the question's windows
(:mod:`~contextvec.tasks.qa.decode`), and its text is the context's own characters.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict

import torch

from contextvec.encoders.bert.finetune import BertForQuestionAnswering
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.tasks import fit as fitting
from contextvec.tasks.finetune import FineTuneSettings, warmup_linear_decay
from contextvec.tasks.fit import TaskReport
from contextvec.tasks.qa.decode import SpanAnswer, best_answers, window_spans
from contextvec.tasks.qa.metric import squad_scores
from contextvec.tasks.qa.squad import Question, SquadData
from contextvec.tasks.qa.windows import Window, WindowSettings, batch_windows, make_windows
from contextvec.text.batching import length_batches
from contextvec.training.optim import bert_parameter_groups


class BertReader:
    """A BERT question-answering model with its tokenizer and window settings: answers
    questions on contexts (:meth:`answer`, :meth:`predict`)."""

    def __init__(self, model: BertForQuestionAnswering, tokenizer: WordPieceTokenizer,
                 windows: WindowSettings, batch_size: int = 64, device: str = "cpu") -> None:
        positions = model.config.max_position_embeddings
        if windows.max_length > positions:
            raise ValueError(f"max_length {windows.max_length} is over the model's {positions} positions")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.windows = windows
        self.batch_size = batch_size
        self.device = device

    @torch.no_grad()
    def answer_questions(self, questions: Sequence[Question], n_best: int = 1,
                         batch_size: int | None = None) -> list[list[SpanAnswer]]:
        """Each question's ``n_best`` answers, best first; windows of similar length are batched
        together, so an answer does not depend on the other questions asked with it."""
        self.model.eval()
        windows = make_windows(questions, self.tokenizer, self.windows)
        spans: list = [None] * len(windows)
        pad = self.model.config.pad_token_id
        for ids in length_batches([len(w.ids) for w in windows], batch_size or self.batch_size):
            batch = batch_windows([windows[i] for i in ids], pad).to(self.device)
            logits = self.model(batch.input_ids, batch.attention_mask, batch.token_type_ids)
            found = window_spans(logits.start_logits, logits.end_logits, batch.starts, batch.ends,
                                 self.windows.max_answer_length, max(self.windows.n_best, n_best))
            for row, i in enumerate(ids):
                spans[i] = tuple(t[row].tolist() for t in found)
        return best_answers(windows, spans, [q.context for q in questions], n_best)

    def predict(self, data: SquadData | Sequence[Question], batch_size: int | None = None) -> dict[str, str]:
        """``{question_id: answer_text}``, the official predictions file's content."""
        questions = data.questions if isinstance(data, SquadData) else data
        answers = self.answer_questions(questions, 1, batch_size)
        return {q.id: a[0].text for q, a in zip(questions, answers, strict=True)}

    def answer(self, question: str, context: str, n_best: int = 1) -> list[SpanAnswer]:
        """The ``n_best`` answers to one question on one context."""
        return self.answer_questions([Question("q", question, context, ())], n_best)[0]


def _loss(model: BertForQuestionAnswering, windows: Sequence[Window], pad: int, device: str) -> torch.Tensor:
    batch = batch_windows(windows, pad).to(device)
    logits = model(batch.input_ids, batch.attention_mask, batch.token_type_ids)
    targets = torch.tensor([w.target for w in windows], device=device)
    return model.loss(logits, targets[:, 0], targets[:, 1])


def fine_tune_qa(
    train: SquadData, dev: SquadData, model_dir: str | os.PathLike, settings: FineTuneSettings,
    windows: WindowSettings | None = None,
) -> tuple[TaskReport, BertReader]:
    """Fine-tune the HF BERT of ``model_dir`` on ``train``'s questions, keep the epoch best on
    ``dev`` by the official F1, and report dev's exact match and F1 (percentages)."""
    for split in (train, dev):
        if not split.labeled:
            raise ValueError(f"{split.source}: a question without answers cannot be trained or scored on")
    windows = windows or WindowSettings()
    fitting.seed_everything(settings.seed)
    if settings.train_fraction < 1:
        keep = round(settings.train_fraction * len(train))
        train = train.first(max(1, keep))
    model = BertForQuestionAnswering.from_pretrained(model_dir, seed=settings.seed).to(settings.device)
    tokenizer = WordPieceTokenizer.from_directory(model_dir)
    reader = BertReader(model, tokenizer, windows, fitting.eval_batch_size(settings), settings.device)
    train_windows = make_windows(train.questions, tokenizer, windows, train=True)
    pad, device = model.config.pad_token_id, settings.device

    def dev_f1() -> float:
        return squad_scores(dev, reader.predict(dev))["f1"] / 100

    optimizer = torch.optim.AdamW(bert_parameter_groups(model, settings.weight_decay), lr=settings.lr)
    total_steps = settings.epochs * -(-len(train_windows) // settings.batch_size)
    warmup_steps = round(settings.warmup * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(warmup_steps, total_steps))
    result = fitting.fit(
        model, lengths=[len(w.ids) for w in train_windows],
        objective=fitting.Objective(lambda ids: _loss(model, [train_windows[i] for i in ids], pad, device),
                            dev_f1, "f1"),
        optimisation=fitting.Optimisation(optimizer, model.parameters(), scheduler), settings=settings,
    )
    started = time.perf_counter()
    dev_scores = squad_scores(dev, reader.predict(dev))
    eval_seconds = time.perf_counter() - started
    pieces = sum(len(w.ids) for w in train_windows)
    report = TaskReport(
        task="squad", metric="f1", best_epoch=result.best_epoch, dev=dev_scores, test=None,
        curve=result.curve, mixes=[], labels=[],
        splits={name: {"source": split.source, "questions": len(split), "articles": split.num_articles}
                for name, split in (("train", train), ("dev", dev))},
        parameters={"trainable": sum(p.numel() for p in model.parameters()),
                    "head": sum(p.numel() for p in model.head.parameters())},
        model_settings={"mode": "fine-tune", "head": type(model).__name__, "model": str(model_dir),
                        "windows": asdict(windows)},
        train_settings=asdict(settings),
        runtime_s=fitting.runtime_summary(pieces, len(train_windows), result, eval_seconds),
        extra={"train_windows": len(train_windows), "train_pieces": pieces,
               "windows_without_answer": sum(w.target == (0, 0) for w in train_windows),
               "warmup_steps": warmup_steps, "total_steps": total_steps},
    )
    return report, reader
