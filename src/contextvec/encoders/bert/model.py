"""BERT (Devlin et al., 2019) as an encoder: embeddings, post-LayerNorm transformer layers, pooler.

The module tree follows HF ``modeling_bert.py`` name for name, so a ``BertModel`` state dict
is an HF checkpoint's (``embeddings.word_embeddings.weight``,
``encoder.layer.0.attention.self.query.weight``, ``pooler.dense.weight``, ...); ``LayerNorm``
keeps its TensorFlow-era capital letters for that reason. Attention runs through
``torch.nn.functional.scaled_dot_product_attention`` with a boolean padding mask (in inference,
batches of few scores through two batched matrix products instead). Everything
here works on word pieces; words, windows and tokenizers live in ``encoder.py``.

Inside, the layers work on pieces as rows ``(n, hidden)`` laid out by a
:class:`~contextvec.encoders.bert.unpadded.RowLayout`: :meth:`BertModel.forward` runs a padded
batch as is (HF's interface), :meth:`BertModel.forward_unpadded` runs rows laid end to end, so
that no matrix product is spent on padding (the word-level encoder's path). Query, key and value
run as one matrix product on their concatenated weights, cached until a weight changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders import torch_private
from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bert.unpadded import RowLayout, unpadded_positions
from contextvec.encoders.precision import Int8Role, PackedFloatWeights, run_linear

if TYPE_CHECKING:
    from contextvec.encoders.precision import Pack


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
        """Embed word-piece ids with their positions and token types.

        Args:
            input_ids: ``(batch, pieces)`` long, word-piece ids.
            token_type_ids: ``(batch, pieces)`` long, segment ids (0 for sentence A, 1 for B);
                all 0 if omitted.

        Returns:
            ``(batch, pieces, hidden)`` in the embeddings' dtype.

        Raises:
            ValueError: more pieces than ``max_position_embeddings``.
        """
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

    def forward_unpadded(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``input_ids``, ``positions`` (n,) of unpadded rows, token type 0 -> (n, hidden)."""
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings.weight[0])
        return self.dropout(self.LayerNorm(x))


SMALL_SCORES = 1 << 20
"""Batches of at most this many attention scores (rows x heads x pieces x pieces: 4 MB in
float32) attend through :func:`short_attention` in inference."""


def short_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    bias: torch.Tensor | None) -> torch.Tensor:
    """Softmax attention as two batched matrix products, ``q, k, v`` (rows, heads, T, d),
    ``bias`` (rows, 1, 1, T) float32, added to the scores: -inf at keys that may not be attended
    to (:meth:`RowLayout.score_bias`), or None. Scores and softmax are float32 whatever the
    inputs' dtype; the probabilities take ``v``'s dtype for the second product (bf16 under
    ``precision="bf16"``, whose queries, keys and values come out of a bf16 product anyway).

    While the scores stay small (:data:`SMALL_SCORES`, in cache) this is faster than
    ``scaled_dot_product_attention``'s CPU kernel, whose blocking pays off only on larger ones.
    """
    rows, heads, length, dim = q.shape
    flat = rows * heads

    def rows_of(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        # A conversion goes straight into the contiguous layout (``to`` alone keeps the permuted
        # strides, and the reshape would copy a second time); without one the reshape copies.
        return x.to(dtype, memory_format=torch.contiguous_format).reshape(flat, length, dim)

    scores = torch.bmm(rows_of(q, torch.float32), rows_of(k, torch.float32).transpose(1, 2))
    scores = scores.view(rows, heads, length, length).mul_(dim ** -0.5)
    if bias is not None:
        scores.add_(bias)
    probs = torch.softmax(scores, dim=-1).view(flat, length, length)
    return torch.bmm(probs.to(v.dtype), rows_of(v, v.dtype)).view(rows, heads, length, dim)


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention over the whole sequence (no causal mask)."""

    int8_role = Int8Role.PLAIN
    """int8 on oneDNN: hidden states differ too much in size for one scale per product."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query: nn.Linear | None = nn.Linear(config.hidden_size, config.hidden_size)
        self.key: nn.Linear | None = nn.Linear(config.hidden_size, config.hidden_size)
        self.value: nn.Linear | None = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob
        self.qkv_packed: nn.Module | None = None  # set by pack_weights (lower precision)
        self._fused: tuple[tuple, torch.Tensor, torch.Tensor] | None = None
        self._onednn = PackedFloatWeights()

    def _fused_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Query, key and value weights and biases concatenated (3 * hidden, ...).

        Without gradients the concatenation is cached, keyed on the tensors' storage and version
        counters, so loading or updating a weight in place invalidates it."""
        linears = (self.query, self.key, self.value)
        tensors = [t for linear in linears for t in (linear.weight, linear.bias)]
        if torch.is_grad_enabled():
            return torch.cat(tensors[0::2]), torch.cat(tensors[1::2])
        key = torch_private.weights_key(tensors)
        fused = self._fused
        if fused is None or fused[0] != key:
            fused = (key, torch.cat(tensors[0::2]), torch.cat(tensors[1::2]))
            self._fused = fused
        return fused[1], fused[2]

    def pack_weights(self, pack: Pack) -> None:
        """Replace query, key and value by ``pack`` of their concatenated weights, for
        lower-precision inference (:func:`contextvec.encoders.precision.apply_precision`)."""
        with torch.no_grad():
            weight, bias = self._fused_weights()
        self.qkv_packed = pack(weight)
        self.register_buffer("qkv_bias", bias.detach().float().clone())
        self.query = self.key = self.value = None
        self._fused = None

    def _project(self, hidden: torch.Tensor) -> torch.Tensor:
        """(n, hidden) -> (n, 3 * hidden): queries, keys and values side by side."""
        if self.qkv_packed is not None:  # bf16 stays bf16: attention reads it as it is
            return self.qkv_packed(hidden, self.qkv_bias, float_output=False)
        weight, bias = self._fused_weights()
        return self._onednn.linear("qkv", hidden, weight, bias)

    def forward(self, hidden: torch.Tensor, layout: RowLayout,
                keep: torch.Tensor | None = None) -> torch.Tensor:
        """Multi-head attention of every piece over the pieces of its row.

        Args:
            hidden: ``(n, hidden)`` float, the pieces of all rows laid out by ``layout``.
            layout: where each row's pieces lie in ``hidden`` (dense grid or unpadded: end to end).
            keep: ``(k,)`` long, indices into the n pieces: only those rows are returned (every
                piece still attends to all of its row).

        Returns:
            ``(n, hidden)``, or ``(k, hidden)`` with ``keep``: the heads' outputs side by side,
            before the output projection.
        """
        grid = layout.to_grid(self._project(hidden))                  # (rows, T, 3 * hidden)
        shape = (layout.rows, layout.longest, 3, self.num_heads, self.head_dim)
        q, k, v = grid.view(shape).permute(2, 0, 3, 1, 4)             # each (rows, heads, T, d)
        small = layout.rows * self.num_heads * layout.longest ** 2 <= SMALL_SCORES
        if small and not self.training and not torch.is_grad_enabled():
            out = short_attention(q, k, v, layout.score_bias())
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=layout.mask, dropout_p=self.dropout_prob if self.training else 0.0
            )
        return layout.from_grid(out.transpose(1, 2), keep)


class BertResidualOutput(nn.Module):
    """Projection to ``hidden_size``, dropout, residual, LayerNorm (post-LN): HF's
    ``BertSelfOutput`` (after attention, input ``hidden_size``) and ``BertOutput`` (after the
    feed-forward expansion, input ``intermediate_size``) differ only in the input width."""

    def __init__(self, config: BertConfig, input_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(input_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self._onednn = PackedFloatWeights()

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        # In place on the projection's fresh output: one tensor fewer per layer.
        """Project ``hidden``, add ``residual`` and normalise.

        Args:
            hidden: ``(n, input_size)`` float, the attention or feed-forward output.
            residual: ``(n, hidden)`` float, the input of the sublayer.

        Returns:
            ``(n, hidden)`` float.
        """
        projected = run_linear(self._onednn, "dense", self.dense, hidden)
        return self.LayerNorm(self.dropout(projected).add_(residual))


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertResidualOutput(config, config.hidden_size)

    def forward(self, hidden: torch.Tensor, layout: RowLayout,
                keep: torch.Tensor | None = None) -> torch.Tensor:
        """Self-attention, then projection, residual and LayerNorm.

        Args:
            hidden: ``(n, hidden)`` float, the pieces of all rows laid out by ``layout``.
            layout: where each row's pieces lie in ``hidden``.
            keep: ``(k,)`` long, indices into the n pieces: only those rows are returned.

        Returns:
            ``(n, hidden)``, or ``(k, hidden)`` with ``keep``.
        """
        residual = hidden if keep is None else hidden.index_select(0, keep)
        return self.output(self.self(hidden, layout, keep), residual)


class BertIntermediate(nn.Module):
    """Feed-forward expansion to ``intermediate_size`` with GELU (exact or tanh, per config)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.approximate = config.gelu_approximate
        self._onednn = PackedFloatWeights()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # In inference the GELU runs inside oneDNN's matmul (PackedFloatWeights); in bf16 the
        # result stays bf16 (it only feeds BertOutput's bf16 matmul: no round trip via float32).
        """The feed-forward expansion: ``gelu(hidden @ W.T + b)``.

        Args:
            hidden: ``(n, hidden)`` float.

        Returns:
            ``(n, intermediate_size)``; bf16 under ``precision="bf16"``, else float32.
        """
        return run_linear(self._onednn, "dense", self.dense, hidden, gelu=self.approximate,
                          float_output=False)


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertResidualOutput(config, config.intermediate_size)

    def forward(self, hidden: torch.Tensor, layout: RowLayout,
                keep: torch.Tensor | None = None) -> torch.Tensor:
        """One transformer layer: attention, then the feed-forward block.

        Args:
            hidden: ``(n, hidden)`` float, the pieces of all rows laid out by ``layout``.
            layout: where each row's pieces lie in ``hidden``.
            keep: ``(k,)`` long, indices into the n pieces: only those rows are computed past
                attention.

        Returns:
            ``(n, hidden)``, or ``(k, hidden)`` with ``keep``, in the order of ``keep``.
        """
        attended = self.attention(hidden, layout, keep)
        return self.output(self.intermediate(attended), attended)


class BertLayerStack(nn.Module):
    """The stack of transformer layers: HF's ``BertEncoder``, checkpoint keys ``encoder.layer.N``
    (contextvec's word-level encoder is :class:`contextvec.encoders.bert.encoder.BertEncoder`)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, hidden: torch.Tensor, layout: RowLayout,
                last_rows: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Run every layer in turn.

        Args:
            hidden: ``(n, hidden)`` float, the embedding output laid out by ``layout``.
            layout: where each row's pieces lie in ``hidden``.
            last_rows: ``(k,)`` long, indices into the n pieces: the last layer computes only
                those rows (nothing reads its other rows).

        Returns:
            The output of every layer (not including the input), each ``(n, hidden)``; the last
            ``(k, hidden)`` with ``last_rows``.
        """
        outputs = []
        for index, layer in enumerate(self.layer):
            hidden = layer(hidden, layout, last_rows if index == len(self.layer) - 1 else None)
            outputs.append(hidden)
        return outputs


class BertPooler(nn.Module):
    """tanh(dense(first piece)): the [CLS] summary vector of the pretraining NSP head."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """The pooled [CLS] vector: ``tanh(dense(hidden[:, 0]))``.

        Args:
            hidden: ``(batch, pieces, hidden)`` float, the last hidden state.

        Returns:
            ``(batch, hidden)`` float.
        """
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
        """Every hidden state of a padded batch of word-piece rows.

        Args:
            input_ids: ``(batch, pieces)`` long, word-piece ids.
            attention_mask: ``(batch, pieces)``, 1/True at real pieces; all real if omitted.
            token_type_ids: ``(batch, pieces)`` long, segment ids; all 0 if omitted.

        Returns:
            ``hidden_states``: ``num_hidden_layers + 1`` tensors ``(batch, pieces, hidden)``
            (embedding output first); ``pooler_output``: ``(batch, hidden)``, or None without a
            pooler. Padded positions get vectors too; they are meaningless.
        """
        mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            mask = attention_mask.bool()[:, None, None, :]
        embedded = self.embeddings(input_ids, token_type_ids)
        rows, longest, hidden = embedded.shape
        states = self.encoder(embedded.reshape(rows * longest, hidden), RowLayout.dense(rows, longest, mask))
        hidden_states = (embedded, *(state.view(rows, longest, hidden) for state in states))
        pooled = self.pooler(hidden_states[-1]) if self.pooler is not None else None
        return BertModelOutput(hidden_states, pooled)

    def forward_unpadded(self, input_ids: torch.Tensor, lengths: Sequence[int],
                         last_rows: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Rows of ``lengths`` pieces laid end to end (``input_ids`` (n,), token type 0) ->
        the ``num_hidden_layers + 1`` hidden states (embedding output first), each (n, hidden),
        with no work on padding. No pooler. ``last_rows`` (indices into the n pieces): the last
        state holds only those rows, in that order; its feed-forward skips the rest."""
        limit = self.embeddings.position_embeddings.num_embeddings
        if max(lengths) > limit:
            raise ValueError(f"{max(lengths)} pieces exceed max_position_embeddings {limit} "
                             "(BertEncoder slides a window over them)")
        device = input_ids.device
        layout = RowLayout.unpadded(lengths, device)
        embedded = self.embeddings.forward_unpadded(input_ids, unpadded_positions(lengths).to(device))
        return [embedded, *self.encoder(embedded, layout, last_rows)]
