"""What BERT's task heads share (:class:`BertWithHead`): a :class:`BertModel` (attribute ``bert``)
plus one linear head whose state-dict names are the HF checkpoint's, read from and written to HF
directories (``from_pretrained``/``save_pretrained``; see :mod:`contextvec.encoders.bert.finetune`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Self

import torch
from torch import nn

from contextvec.encoders.bert.checkpoint import INITIALIZER_RANGE, read_files, write_config, write_weights
from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bert.loader import build_model
from contextvec.encoders.bert.model import BertModel, BertModelOutput
from contextvec.encoders.bert.tokenizer import (
    SPECIAL_TOKENS_MAP,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    VOCAB_TXT,
)
from contextvec.io.atomic import atomic_path
from contextvec.io.hf_bert import CONFIG_NAME, BertCheckpointError, to_model_keys

TOKENIZER_FILES = (TOKENIZER_JSON, VOCAB_TXT, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)


def _normal(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator) * INITIALIZER_RANGE


class BertWithHead(nn.Module):
    """What the four heads share: a :class:`BertModel`, one linear head, labels, and reading
    and writing HF directories (see the module docstring)."""

    head_name: ClassVar[str] = "classifier"
    with_pooler: ClassVar[bool] = True
    fixed_outputs: ClassVar[int | None] = None
    """Outputs of a head that has no labels (QA: start/end, multiple choice: one score)."""
    with_dropout: ClassVar[bool] = True
    """Dropout (``hidden_dropout_prob``) before the head; HF's QA model has none."""

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
        if self.with_dropout:
            self.dropout = nn.Dropout(bert.config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ):
        """Run BERT on a padded batch of word-piece rows, then the head.

        Args:
            input_ids: ``(batch, pieces)`` long, word-piece ids.
            attention_mask: ``(batch, pieces)``, 1/True at real pieces; all real if omitted.
            token_type_ids: ``(batch, pieces)`` long, segment ids; all 0 if omitted.

        Returns:
            The head's output, each class says: ``(batch, labels)`` logits for sequence
            classification, ``(batch, pieces, labels)`` for token classification, a
            :class:`~contextvec.encoders.bert.qa.SpanLogits` of ``(batch, pieces)`` each for
            question answering.
        """
        return self._head(self.bert(input_ids, attention_mask, token_type_ids))

    def _head(self, output: BertModelOutput):
        raise NotImplementedError

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
        config, path, raw = read_files(directory)
        prefix = f"{cls.head_name}."
        head = {k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)}
        stored = json.loads((directory / CONFIG_NAME).read_text(encoding="utf-8"))
        labels = cls._labels(stored, head, labels, num_labels, str(path))
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
        write_weights(directory, self.state_dict())
        if tokenizer_dir is not None and Path(tokenizer_dir).resolve() != directory.resolve():
            for name in TOKENIZER_FILES:
                if (Path(tokenizer_dir) / name).is_file():
                    with atomic_path(directory / name) as tmp:
                        shutil.copyfile(Path(tokenizer_dir) / name, tmp)
        labels = {} if self.fixed_outputs is not None else {
            "id2label": {str(i): label for i, label in enumerate(self.labels)},
            "label2id": {label: i for i, label in enumerate(self.labels)},
        }
        write_config(directory, self.config, type(self).__name__, labels | self.config_extras())
        return directory

    def config_extras(self) -> dict:
        """What a head adds to the saved ``config.json`` beyond the encoder's settings and labels."""
        return {}
