"""BERT with task heads for fine-tuning, named as HF's ``BertFor...`` classes.

Each model is a :class:`BertModel` (attribute ``bert``) plus one linear head, and its state dict
is the matching HF checkpoint name for name (``bert.*``, ``classifier.*`` or ``qa_outputs.*``):

- :class:`BertForSequenceClassification`: pooled [CLS] vector -> dropout -> ``classifier``
  (hidden -> labels);
- :class:`BertForTokenClassification`: every piece's last hidden state -> dropout ->
  ``classifier``; :meth:`~BertForTokenClassification.word_logits` scores *words* by their first
  piece (BERT's NER setup). No pooler, as in HF;
- :class:`BertForQuestionAnswering`: ``qa_outputs`` (hidden -> 2) gives start and end logits
  per piece; :func:`best_spans` decodes the answer span. No pooler and no dropout, as in HF;
- :class:`BertForMultipleChoice`: (batch, choices, pieces) rows, each pooled -> dropout ->
  ``classifier`` (hidden -> 1) -> (batch, choices) logits.

Dropout is ``hidden_dropout_prob``. ``from_pretrained(directory, ...)`` reads an HF BERT
directory (any layout :mod:`~contextvec.encoders.bert.loader` reads): the encoder from its
``bert.*`` weights, the head from the checkpoint when it has one (a saved fine-tuned model),
else newly initialised as BERT does (normal(0, 0.02) weights, zero biases) from ``seed``; so is
a pooler the checkpoint lacks. ``save_pretrained`` writes an HF directory that both
``transformers`` and ``contextvec.load`` read. Models come back in eval mode.

Words -> rows of pieces: :func:`word_rows` (every word, long sentences in sliding windows as
:class:`~contextvec.encoders.bert.encoder.BertEncoder` runs them) and :func:`truncated_rows`
(one row per sentence, cut at the position limit: for sentence classification).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, NamedTuple, Self

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bert.encoder import window_spans
from contextvec.encoders.bert.heads import INITIALIZER_RANGE
from contextvec.encoders.bert.loader import (
    CONFIG_NAME,
    SAFETENSORS_NAME,
    BertCheckpointError,
    build_model,
    read_state_dict,
    to_model_keys,
    weights_file,
)
from contextvec.encoders.bert.model import BertModel
from contextvec.encoders.bert.tokenizer import (
    SPECIAL_TOKENS_MAP,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    VOCAB_TXT,
    WordPieces,
)
from contextvec.io.atomic import atomic_path

TOKENIZER_FILES = (TOKENIZER_JSON, VOCAB_TXT, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)


def _normal(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator) * INITIALIZER_RANGE


class _BertWithHead(nn.Module):
    """What the four heads share: a :class:`BertModel`, one linear head, labels, and reading
    and writing HF directories (see the module docstring)."""

    head_name: ClassVar[str] = "classifier"
    with_pooler: ClassVar[bool] = True
    fixed_outputs: ClassVar[int | None] = None
    """Outputs of a head that has no labels (QA: start/end, multiple choice: one score)."""

    def __init__(self, bert: BertModel, labels: Sequence[str] = ()) -> None:
        super().__init__()
        if (bert.pooler is not None) != self.with_pooler:
            which = "with" if self.with_pooler else "without"
            raise ValueError(f"{type(self).__name__} needs a BertModel {which} a pooler")
        self.labels = list(labels)
        outputs = self.fixed_outputs or len(self.labels)
        if outputs < 1:
            raise ValueError(f"{type(self).__name__} needs labels")
        self.config: BertConfig = bert.config
        self.bert = bert
        setattr(self, self.head_name, nn.Linear(bert.config.hidden_size, outputs))

    @property
    def head(self) -> nn.Linear:
        return getattr(self, self.head_name)

    def init_head(self, seed: int = 0) -> None:
        """BERT's initialisation of the head from ``seed``: normal(0, 0.02) weight, zero bias."""
        self._init_head(torch.Generator().manual_seed(seed))

    @torch.no_grad()
    def _init_head(self, generator: torch.Generator) -> None:
        self.head.weight.copy_(_normal(tuple(self.head.weight.shape), generator))
        self.head.bias.zero_()

    @classmethod
    def from_pretrained(
        cls,
        directory: str | os.PathLike,
        labels: Sequence[str] | None = None,
        num_labels: int | None = None,
        seed: int = 0,
    ) -> Self:
        """The model of an HF BERT directory (see the module docstring), eval mode. ``labels``
        name the classes (or ``num_labels`` count them) when the checkpoint has no head of this
        kind; heads with fixed outputs (QA, multiple choice) take neither. A new head is
        initialised from ``seed``."""
        if cls.fixed_outputs is not None and (labels is not None or num_labels is not None):
            raise ValueError(f"{cls.__name__} has {cls.fixed_outputs} fixed output(s): no labels")
        directory = Path(directory)
        config_path = directory / CONFIG_NAME
        config = BertConfig.from_json_file(config_path)
        path = weights_file(directory)
        if path is None:
            raise BertCheckpointError(f"{directory}: needs {SAFETENSORS_NAME} or pytorch_model.bin")
        raw = read_state_dict(path)
        prefix = f"{cls.head_name}."
        head = {k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)}
        labels = cls._labels(
            json.loads(config_path.read_text(encoding="utf-8")), head, labels, num_labels, str(path)
        )
        generator = torch.Generator().manual_seed(seed)
        state = to_model_keys(raw)
        has_pooler = any(k.startswith("pooler.") for k in state)
        if not cls.with_pooler:
            state = {k: v for k, v in state.items() if not k.startswith("pooler.")}
        elif not has_pooler:  # e.g. a BertForMaskedLM checkpoint: a new pooler, as HF gives it
            size = config.hidden_size
            state |= {
                "pooler.dense.weight": _normal((size, size), generator),
                "pooler.dense.bias": torch.zeros(size),
            }
        bert = build_model(config, state, source=str(path))
        model = cls(bert, labels) if cls.fixed_outputs is None else cls(bert)
        if head:
            try:
                model.head.load_state_dict(head)
            except RuntimeError as e:
                raise BertCheckpointError(f"{path}: its {cls.head_name}.* weights do not fit: {e}") from e
        else:
            model._init_head(generator)
        return model.eval()

    @classmethod
    def _labels(
        cls,
        config: dict,
        head: dict[str, torch.Tensor],
        labels: Sequence[str] | None,
        num_labels: int | None,
        source: str,
    ) -> list[str]:
        """The label names: given, else the checkpoint's ``id2label``, else HF's ``LABEL_i``."""
        if cls.fixed_outputs is not None:
            return []
        stored = config.get("id2label") if head else None
        stored_labels = [stored[k] for k in sorted(stored, key=int)] if isinstance(stored, dict) else None
        if stored_labels == [f"LABEL_{i}" for i in range(len(stored_labels or []))]:
            stored_labels = None  # HF's names for unnamed labels: any names fit (the count is checked)
        if labels is not None:
            labels = list(labels)
            if num_labels is not None and num_labels != len(labels):
                raise ValueError(f"num_labels {num_labels} but {len(labels)} labels given")
            if stored_labels is not None and stored_labels != labels:
                raise BertCheckpointError(
                    f"{source}: its {cls.head_name} predicts {stored_labels}, not "
                    f"{labels}; start from a checkpoint without that head"
                )
            return labels
        if stored_labels is not None:
            return stored_labels
        rows = head["weight"].shape[0] if "weight" in head else num_labels
        if rows is None:
            raise ValueError(
                f"{cls.__name__}.from_pretrained needs labels or num_labels (the checkpoint has no head)"
            )
        return [f"LABEL_{i}" for i in range(rows)]

    def save_pretrained(
        self, directory: str | os.PathLike, tokenizer_dir: str | os.PathLike | None = None
    ) -> Path:
        """Write an HF directory: ``model.safetensors`` (HF key names), the tokenizer files found
        in ``tokenizer_dir`` (normally the directory the model came from; None: none) and
        ``config.json`` (``architectures``, ``id2label``/``label2id``), each atomically,
        config.json last. Returns the directory."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
        with atomic_path(directory / SAFETENSORS_NAME) as tmp:
            save_file(tensors, str(tmp), metadata={"format": "pt"})  # HF refuses files without it
        if tokenizer_dir is not None and Path(tokenizer_dir).resolve() != directory.resolve():
            for name in TOKENIZER_FILES:
                if (Path(tokenizer_dir) / name).is_file():
                    with atomic_path(directory / name) as tmp:
                        shutil.copyfile(Path(tokenizer_dir) / name, tmp)
        config = {
            **self.config.to_dict(),
            "architectures": [type(self).__name__],
            "initializer_range": INITIALIZER_RANGE,
        }
        if self.fixed_outputs is None:
            config |= {
                "id2label": {str(i): label for i, label in enumerate(self.labels)},
                "label2id": {label: i for i, label in enumerate(self.labels)},
            }
        with atomic_path(directory / CONFIG_NAME) as tmp:
            tmp.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return directory


class BertForSequenceClassification(_BertWithHead):
    """One label per input row: the pooled [CLS] vector -> dropout -> ``classifier`` (HF's
    ``BertForSequenceClassification``)."""

    def __init__(self, bert: BertModel, labels: Sequence[str]) -> None:
        super().__init__(bert, labels)
        self.dropout = nn.Dropout(bert.config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(rows, pieces) -> (rows, labels) logits."""
        pooled = self.bert(input_ids, attention_mask, token_type_ids).pooler_output
        return self.classifier(self.dropout(pooled))


class WordPieceRows(NamedTuple):
    """Sentences of words as model input (:func:`word_rows`): ``input_ids``/``attention_mask``
    (rows, pieces); ``first_row``/``first_pos`` (words,): where each word's first piece is, all
    words of all sentences in order; ``word_mask`` (sentences, max words): True at real words."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    first_row: torch.Tensor
    first_pos: torch.Tensor
    word_mask: torch.Tensor

    def to(self, device: torch.device | str) -> WordPieceRows:
        return WordPieceRows(*(t.to(device) for t in self))


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Piece-id rows -> ``(input_ids, attention_mask)``, padded to the longest row."""
    longest = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = True
    return ids, mask


def truncated_rows(
    sentences: Sequence[WordPieces], max_pieces: int, pad_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """One row per sentence, [CLS] + its first ``max_pieces - 2`` pieces + [SEP]: what the
    sentence classifier reads (a longer sentence loses its end, as in BERT's own code)."""
    if max_pieces < 3:
        raise ValueError(f"max_pieces must leave room for [CLS], a piece and [SEP], not {max_pieces}")
    return pad_rows(
        [p.ids if len(p.ids) <= max_pieces else [*p.ids[: max_pieces - 1], p.ids[-1]] for p in sentences],
        pad_id,
    )


def word_rows(sentences: Sequence[WordPieces], window: int, pad_id: int = 0) -> WordPieceRows:
    """Rows for word-level scoring (:meth:`BertForTokenClassification.word_logits`).

    ``sentences`` are :meth:`~contextvec.encoders.bert.WordPieceTokenizer.encode_batch` results.
    A sentence of more than ``window`` pieces (at most ``max_position_embeddings - 2``) runs in
    overlapping windows as :class:`~contextvec.encoders.bert.BertEncoder` runs it
    (:func:`~contextvec.encoders.bert.window_spans`): each word is read at its first piece, in
    the window in which that piece is most central. No word is dropped.
    """
    rows: list[list[int]] = []
    first_row: list[int] = []
    first_pos: list[int] = []
    counts = []
    for pieces in sentences:
        cls_id, sep_id = pieces.ids[0], pieces.ids[-1]
        content, words = pieces.ids[1:-1], pieces.word_index[1:-1]
        if not content:
            raise ValueError("word_rows needs sentences of at least one word")
        firsts = [j for j, w in enumerate(words) if j == 0 or words[j - 1] != w]
        counts.append(len(firsts))
        for start, end, keep_start, keep_end in window_spans(len(content), window):
            kept = [j for j in firsts if keep_start <= j < keep_end]
            if kept:  # a window that keeps only continuation pieces supplies no word
                first_row.extend([len(rows)] * len(kept))
                first_pos.extend(j - start + 1 for j in kept)  # +1: [CLS]
                rows.append([cls_id, *content[start:end], sep_id])
    ids, mask = pad_rows(rows, pad_id)
    word_mask = torch.arange(max(counts, default=0))[None] < torch.tensor(counts, dtype=torch.long)[:, None]
    return WordPieceRows(
        ids,
        mask,
        torch.tensor(first_row, dtype=torch.long),
        torch.tensor(first_pos, dtype=torch.long),
        word_mask,
    )


class BertForTokenClassification(_BertWithHead):
    """One label per piece: the last hidden state -> dropout -> ``classifier`` (HF's
    ``BertForTokenClassification``; no pooler). Words are scored at their first piece
    (:meth:`word_logits`)."""

    with_pooler = False

    def __init__(self, bert: BertModel, labels: Sequence[str]) -> None:
        super().__init__(bert, labels)
        self.dropout = nn.Dropout(bert.config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(rows, pieces) -> (rows, pieces, labels) logits."""
        hidden = self.bert(input_ids, attention_mask, token_type_ids).hidden_states[-1]
        return self.classifier(self.dropout(hidden))

    def word_logits(self, rows: WordPieceRows) -> torch.Tensor:
        """(sentences, max words, labels): each word's logits at its first piece; zeros at padding.

        Only the first pieces go through the classifier (the same numbers as :meth:`forward`
        gives there)."""
        hidden = self.bert(rows.input_ids, rows.attention_mask).hidden_states[-1]
        first = self.classifier(self.dropout(hidden[rows.first_row, rows.first_pos]))
        out = first.new_zeros(*rows.word_mask.shape, first.shape[-1])
        out[rows.word_mask] = first
        return out


class SpanLogits(NamedTuple):
    """Start and end logits, (rows, pieces) each."""

    start_logits: torch.Tensor
    end_logits: torch.Tensor


class BertForQuestionAnswering(_BertWithHead):
    """Extractive QA: ``qa_outputs`` (hidden -> 2) on the last hidden state gives each piece a
    start and an end logit (HF's ``BertForQuestionAnswering``; no pooler, no dropout). Rows are
    ``[CLS] question [SEP] context [SEP]`` with token types 0 then 1; :func:`best_spans` decodes."""

    head_name = "qa_outputs"
    with_pooler = False
    fixed_outputs = 2

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> SpanLogits:
        hidden = self.bert(input_ids, attention_mask, token_type_ids).hidden_states[-1]
        start, end = self.qa_outputs(hidden).unbind(-1)
        return SpanLogits(start, end)

    @staticmethod
    def loss(logits: SpanLogits, start_positions: torch.Tensor, end_positions: torch.Tensor) -> torch.Tensor:
        """Mean of the start and end cross-entropies (HF's loss); a position outside the row
        (HF's marker of an answer cut off by truncation) is ignored."""
        length = logits.start_logits.shape[1]
        start = start_positions.clamp(0, length)
        end = end_positions.clamp(0, length)
        return (
            F.cross_entropy(logits.start_logits, start, ignore_index=length)
            + F.cross_entropy(logits.end_logits, end, ignore_index=length)
        ) / 2


def context_mask(token_type_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(rows, pieces) bool: the context pieces of ``[CLS] question [SEP] context [SEP]`` rows,
    i.e. token type 1 without the closing [SEP]."""
    mask = (token_type_ids == 1) & attention_mask.bool()
    last = mask.shape[1] - 1 - mask.flip(1).int().argmax(1)  # the last context-segment piece
    mask[torch.arange(mask.shape[0], device=mask.device), last] = False
    return mask


def best_spans(
    start_logits: torch.Tensor, end_logits: torch.Tensor, allowed: torch.Tensor, max_answer_length: int = 30
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best answer span of each row: ``(start, end, score)``, (rows,) each.

    Maximises ``start_logits[i] + end_logits[j]`` over ``i <= j < i + max_answer_length`` with
    both ends where ``allowed`` (rows, pieces) is True (the context: :func:`context_mask`).
    """
    if max_answer_length < 1:
        raise ValueError(f"max_answer_length must be >= 1, not {max_answer_length}")
    if not allowed.any(1).all():
        raise ValueError("every row needs at least one allowed piece")
    length = start_logits.shape[1]
    positions = torch.arange(length, device=start_logits.device)
    offset = positions[None, :] - positions[:, None]  # end - start
    valid = ((offset >= 0) & (offset < max_answer_length))[None] & allowed[:, :, None] & allowed[:, None, :]
    scores = (start_logits[:, :, None] + end_logits[:, None, :]).masked_fill(~valid, float("-inf"))
    best, flat = scores.flatten(1).max(1)
    return flat // length, flat % length, best


class BertForMultipleChoice(_BertWithHead):
    """Scores choices: input (batch, choices, pieces), every row pooled -> dropout ->
    ``classifier`` (hidden -> 1) -> (batch, choices) logits, trained with cross-entropy over the
    choices (HF's ``BertForMultipleChoice``)."""

    fixed_outputs = 1

    def __init__(self, bert: BertModel) -> None:
        super().__init__(bert)
        self.dropout = nn.Dropout(bert.config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        batch, choices, length = input_ids.shape

        def flat(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.reshape(batch * choices, length)

        pooled = self.bert(flat(input_ids), flat(attention_mask), flat(token_type_ids)).pooler_output
        return self.classifier(self.dropout(pooled)).view(batch, choices)
