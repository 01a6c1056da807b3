"""BERT (Devlin et al., 2019) as an encoder: embeddings, post-LayerNorm transformer layers, pooler.

The module tree follows HF ``modeling_bert.py`` name for name, so a ``BertModel`` state dict
is an HF checkpoint's (``embeddings.word_embeddings.weight``,
``encoder.layer.0.attention.self.query.weight``, ``pooler.dense.weight``, ...); ``LayerNorm``
keeps its TensorFlow-era capital letters for that reason. Attention runs through
``torch.nn.functional.scaled_dot_product_attention`` with a boolean padding mask. Everything
here works on word pieces; words, windows and tokenizers live in ``encoder.py``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders.bert.config import BertConfig


class BertModelOutput(NamedTuple):
    """``hidden_states``: ``num_hidden_layers + 1`` tensors (batch, pieces, hidden), the
    embedding output first; ``pooler_output``: (batch, hidden), or None without a pooler."""

    hidden_states: tuple[torch.Tensor, ...]
    pooler_output: torch.Tensor | None


class BertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        length = input_ids.shape[1]
        if length > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"{length} pieces exceed max_position_embeddings "
                f"{self.position_embeddings.num_embeddings} (BertEncoder slides a window over them)"
            )
        positions = torch.arange(length, device=input_ids.device)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention over the whole sequence (no causal mask)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``mask``: None, or bool (batch, 1, 1, pieces), True where a key may be attended to."""
        q = self._heads(self.query(hidden))
        k = self._heads(self.key(hidden))
        v = self._heads(self.value(hidden))
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout_prob if self.training else 0.0
        )
        return out.transpose(1, 2).reshape(hidden.shape)


class BertResidualOutput(nn.Module):
    """Projection to ``hidden_size``, dropout, residual, LayerNorm (post-LN): HF's
    ``BertSelfOutput`` (after attention, input ``hidden_size``) and ``BertOutput`` (after the
    feed-forward expansion, input ``intermediate_size``) differ only in the input width."""

    def __init__(self, config: BertConfig, input_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(input_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden)) + residual)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertResidualOutput(config, config.hidden_size)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.output(self.self(hidden, mask), hidden)


class BertIntermediate(nn.Module):
    """Feed-forward expansion to ``intermediate_size`` with GELU (exact or tanh, per config)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.approximate = config.gelu_approximate

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(hidden), approximate=self.approximate)


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertResidualOutput(config, config.intermediate_size)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        attended = self.attention(hidden, mask)
        return self.output(self.intermediate(attended), attended)


class BertLayerStack(nn.Module):
    """The stack of transformer layers: HF's ``BertEncoder``, checkpoint keys ``encoder.layer.N``
    (contextvec's word-level encoder is :class:`contextvec.encoders.bert.encoder.BertEncoder`)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> list[torch.Tensor]:
        """The output of every layer (not including the input)."""
        outputs = []
        for layer in self.layer:
            hidden = layer(hidden, mask)
            outputs.append(hidden)
        return outputs


class BertPooler(nn.Module):
    """tanh(dense(first piece)): the [CLS] summary vector of the pretraining NSP head."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    """Word-piece ids in, every hidden state and the pooled [CLS] vector out.

    ``add_pooling_layer=False`` builds the model without a pooler (for checkpoints saved
    without one, such as HF's ``BertForMaskedLM``); ``pooler_output`` is then None.
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertLayerStack(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """``input_ids``, ``attention_mask`` (1/True at real pieces), ``token_type_ids``:
        (batch, pieces). Padded positions get vectors too; they are meaningless."""
        mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            mask = attention_mask.bool()[:, None, None, :]
        embedded = self.embeddings(input_ids, token_type_ids)
        hidden_states = (embedded, *self.encoder(embedded, mask))
        pooled = self.pooler(hidden_states[-1]) if self.pooler is not None else None
        return BertModelOutput(hidden_states, pooled)
