"""BERT's pretraining heads (masked LM + next sentence prediction), named as HF's ``BertForPreTraining``.

The module tree is HF's name for name, so a state dict of :class:`BertForPreTraining` is an HF
``BertForPreTraining`` checkpoint: ``bert.*`` (the :class:`BertModel`),
``cls.predictions.transform.dense.*``, ``cls.predictions.transform.LayerNorm.*``,
``cls.predictions.bias``, ``cls.seq_relationship.*``. The MLM decoder's weight is the word
embedding matrix (tied, as in BERT): ``cls.predictions.decoder.weight`` appears in the state
dict as the same tensor and is left out of saved files (:func:`pretraining_state_dict`), as HF
does. The heads add nothing to the encoder's outputs; ``contextvec.load`` reads only ``bert.*``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders.bert.checkpoint import INITIALIZER_RANGE, read_files, write_config, write_weights
from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bert.model import BertModel
from contextvec.io.hf_bert import BertCheckpointError, to_model_keys

TIED_KEYS = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
"""State-dict keys that are other tensors under a second name (never saved)."""


class BertPredictionHeadTransform(nn.Module):
    """dense -> activation -> LayerNorm, applied to a hidden state before the vocabulary logits."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.approximate = config.gelu_approximate

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``LayerNorm(gelu(dense(hidden)))``.

        Args:
            hidden: ``(..., hidden)`` float, hidden states.

        Returns:
            ``(..., hidden)`` float.
        """
        return self.LayerNorm(F.gelu(self.dense(hidden), approximate=self.approximate))


class BertLMPredictionHead(nn.Module):
    """Vocabulary logits: transform, then the (tied) word embeddings plus an output bias."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied: one parameter, two names
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits of hidden states.

        Args:
            hidden: ``(..., hidden)`` float, hidden states (all pieces, or only the masked ones).

        Returns:
            ``(..., vocab)`` float logits.
        """
        return self.decoder(self.transform(hidden)) + self.bias


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embeddings)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


class PreTrainingOutput(NamedTuple):
    """``mlm_logits``: (masked pieces, vocab), the rows where ``mlm_labels != -100`` in row-major
    order (all pieces when no labels are given: (batch, pieces, vocab));
    ``nsp_logits``: (batch, 2), index 0 = "B follows A", 1 = "B is random" (HF's labels)."""

    mlm_logits: torch.Tensor
    nsp_logits: torch.Tensor


class BertForPreTraining(nn.Module):
    """:class:`BertModel` (with pooler) + MLM and NSP heads, HF's ``BertForPreTraining``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=True)
        self.cls = BertPreTrainingHeads(config, self.bert.embeddings.word_embeddings)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        mlm_labels: torch.Tensor | None = None,
    ) -> PreTrainingOutput:
        """Logits of both heads.

        With ``mlm_labels`` the MLM head runs only on the predicted positions: on 15% of the
        pieces, that saves 85% of the vocabulary-sized matmul.

        Args:
            input_ids: ``(batch, pieces)`` long, word-piece ids.
            attention_mask: ``(batch, pieces)``, 1/True at real pieces; all real if omitted.
            token_type_ids: ``(batch, pieces)`` long, segment ids (0 for sentence A, 1 for B).
            mlm_labels: ``(batch, pieces)`` long, the original ids at masked pieces, -100 where
                nothing is predicted.

        Returns:
            ``mlm_logits`` ``(masked pieces, vocab)`` (``(batch, pieces, vocab)`` without
            ``mlm_labels``) and ``nsp_logits`` ``(batch, 2)``, as :class:`PreTrainingOutput`.
        """
        output = self.bert(input_ids, attention_mask, token_type_ids)
        hidden = output.hidden_states[-1]
        if mlm_labels is not None:
            hidden = hidden[mlm_labels != -100]
        assert output.pooler_output is not None
        return PreTrainingOutput(self.cls.predictions(hidden),
                                 self.cls.seq_relationship(output.pooler_output))

    @torch.no_grad()
    def init_weights(self, seed: int | None = None) -> None:
        """BERT's initialisation (HF ``_init_weights``): normal(0, 0.02) weights and embeddings,
        zero biases and padding row, LayerNorm 1 / 0."""
        if seed is not None:
            torch.manual_seed(seed)
        decoder = self.cls.predictions.decoder
        for module in self.modules():
            if module is decoder:  # its weight is the embedding matrix, initialised as one
                continue
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, INITIALIZER_RANGE)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, INITIALIZER_RANGE)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.zeros_(self.cls.predictions.bias)


def pretraining_state_dict(model: BertForPreTraining) -> dict[str, torch.Tensor]:
    """HF ``BertForPreTraining`` tensors to save: the state dict without the tied decoder weight."""
    return {k: v for k, v in model.state_dict().items() if k not in TIED_KEYS}


def save_pretraining_model(model: BertForPreTraining, directory: str | os.PathLike) -> Path:
    """Write an HF ``BertForPreTraining`` directory: ``config.json`` (model_type "bert") and
    ``model.safetensors`` with HF's key names, each atomically. The tokenizer files are the
    caller's to add. Returns the directory."""
    directory = Path(directory)
    write_weights(directory, pretraining_state_dict(model))
    write_config(directory, model.config, "BertForPreTraining", {})
    return directory


def load_pretraining_model(directory: str | os.PathLike) -> BertForPreTraining:
    """:class:`BertForPreTraining` from an HF BERT directory that keeps its pretraining heads
    (``bert.*`` + ``cls.*`` keys; legacy ``gamma``/``beta`` names are read), eval mode."""
    config, path, raw = read_files(Path(directory))
    heads = {k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias"): v
             for k, v in raw.items() if k.startswith("cls.") and k not in TIED_KEYS}
    if not heads or not any(k.startswith("bert.") for k in raw):
        raise BertCheckpointError(f"{path}: no pretraining heads (bert.* and cls.* keys), so no "
                                  "masked-LM / next-sentence scores")
    state = {f"bert.{k}": v for k, v in to_model_keys(raw).items()} | heads
    model = BertForPreTraining(config)
    expected = pretraining_state_dict(model)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise BertCheckpointError(f"{path} does not fit BertForPreTraining: missing {missing}, "
                                  f"unexpected {unexpected}")
    try:
        model.load_state_dict(state, strict=False)  # strict would demand the tied decoder key
    except RuntimeError as e:
        raise BertCheckpointError(f"{path}: {e}") from e
    return model.eval()
