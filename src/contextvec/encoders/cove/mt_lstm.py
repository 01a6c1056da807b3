"""The MT-LSTM: CoVe's encoder, a stack of bidirectional LSTMs over fixed word vectors.

McCann et al. (2017), section 3: GloVe vectors in, a two-layer bidirectional LSTM with 300
units per direction; its outputs are the context vectors, and the attention memory of the
translation decoder (:mod:`contextvec.encoders.cove.seq2seq`).

Parameter names: ``layers.k`` is a one-layer bidirectional ``nn.LSTM``, so layer k's weights
are ``layers.k.weight_ih_l0``, ``layers.k.weight_hh_l0_reverse``, ... (PyTorch's gate order
i, f, g, o and its two biases). The released Salesforce MT-LSTM (one 2-layer ``nn.LSTM``) maps
onto them by renaming ``_l{k}`` to ``layers.{k}.``/``_l0`` (see
:func:`contextvec.encoders.cove.loader.convert_salesforce_mt_lstm`); separate layers give each
layer's output, which a 2-layer ``nn.LSTM`` does not return.

Word vectors are a buffer (``word_vectors``), never trained. Row 0 of the lookup is UNK: out-of-
vocabulary words (and padding) get the ``unk`` vector, zero and frozen by default (as
Salesforce's CoVe, whose GloVe lookup gives OOV words zeros), trainable with
``trainable_unk=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

UNK_ID = 0


@dataclass(frozen=True)
class MTLSTMConfig:
    """``input_dim``: word-vector size (GloVe: 300); ``hidden_size``: units per direction;
    ``lowercase``: lower-case tokens before the lookup (for lower-cased vectors)."""

    input_dim: int = 300
    hidden_size: int = 300
    num_layers: int = 2
    lowercase: bool = False
    trainable_unk: bool = False

    def __post_init__(self) -> None:
        if min(self.input_dim, self.hidden_size, self.num_layers) < 1:
            raise ValueError(f"MT-LSTM sizes must be >= 1: {self}")

    @property
    def output_dim(self) -> int:
        return 2 * self.hidden_size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MTLSTMConfig:
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown MT-LSTM config fields: {sorted(unknown)}")
        return cls(**d)


class MTLSTMOutput(NamedTuple):
    """``embeddings``: (batch, time, input_dim) word vectors; ``layers``: each biLSTM layer's
    output (batch, time, 2 * hidden), zero at padding; ``final``: per layer, the final
    ``(h, c)`` with the two directions concatenated, (batch, 2 * hidden) each."""

    embeddings: torch.Tensor
    layers: list[torch.Tensor]
    final: list[tuple[torch.Tensor, torch.Tensor]]


class MTLSTM(nn.Module):
    """Fixed word vectors -> ``num_layers`` bidirectional LSTM layers (see the module docstring)."""

    def __init__(self, config: MTLSTMConfig, words: Sequence[str],
                 vectors: torch.Tensor | None = None) -> None:
        super().__init__()
        self.config = config
        self.words = list(words)
        self.word_index = {w: i + 1 for i, w in enumerate(self.words)}  # 0: UNK
        if len(self.word_index) != len(self.words):
            raise ValueError("the word list has repeated words")
        if vectors is None:
            vectors = torch.zeros(len(self.words), config.input_dim)
        if tuple(vectors.shape) != (len(self.words), config.input_dim):
            raise ValueError(f"word vectors of shape {tuple(vectors.shape)} for {len(self.words)} "
                             f"words of {config.input_dim} dims")
        self.register_buffer("word_vectors", vectors.detach().float().clone())
        self.unk = nn.Parameter(torch.zeros(config.input_dim), requires_grad=config.trainable_unk)
        self.layers = nn.ModuleList(
            nn.LSTM(config.input_dim if k == 0 else config.output_dim, config.hidden_size,
                    batch_first=True, bidirectional=True)
            for k in range(config.num_layers)
        )

    @property
    def output_dim(self) -> int:
        return self.config.output_dim

    def token_ids(self, tokens: Sequence[str]) -> list[int]:
        """Lookup ids of one sentence: 0 for out-of-vocabulary words, else row + 1."""
        if self.config.lowercase:
            return [self.word_index.get(t.lower(), UNK_ID) for t in tokens]
        return [self.word_index.get(t, UNK_ID) for t in tokens]

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded ids (batch, time) and lengths (batch,) of token lists, on the module's device."""
        return pad_ids([self.token_ids(s) for s in sentences], self.word_vectors.device)

    def embed_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """(batch, time) ids -> (batch, time, input_dim) word vectors (``unk`` at id 0)."""
        rows = self.word_vectors[(ids - 1).clamp(min=0)] if len(self.words) else \
            self.word_vectors.new_zeros(*ids.shape, self.config.input_dim)
        return torch.where((ids == UNK_ID).unsqueeze(-1), self.unk.to(rows.dtype), rows)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, dropout: float = 0.0) -> MTLSTMOutput:
        """Run the biLSTM layers on padded word ids.

        Args:
            ids: ``(batch, timesteps)`` long word ids (0 = unknown word; padding may hold any id).
            lengths: ``(batch,)`` long, the number of real tokens of each row.
            dropout: dropout probability on each layer's input (training only); the returned
                outputs are never dropped out.

        Returns:
            An :class:`MTLSTMOutput`: ``embeddings`` ``(batch, timesteps, input_dim)``, each
            layer's output ``(batch, timesteps, 2 * hidden)`` (zero at padding) and each layer's
            final ``(h, c)``, ``(batch, 2 * hidden)`` each.
        """
        mask = sequence_mask(lengths, ids.shape[1])
        embeddings = self.embed_ids(ids) * mask.unsqueeze(-1)
        x = embeddings
        outputs, final = [], []
        # Packing needs lengths >= 1; an empty sentence runs on one pad and is masked out.
        cpu_lengths = lengths.cpu().clamp(min=1)
        for layer in self.layers:
            inp = nn.functional.dropout(x, dropout, self.training) if dropout else x
            packed = pack_padded_sequence(inp, cpu_lengths, batch_first=True, enforce_sorted=False)
            out, (h, c) = layer(packed)
            x, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
            x = x * mask.unsqueeze(-1)
            outputs.append(x)
            # h, c: (2, batch, hidden) for (forward, backward) -> (batch, 2 * hidden)
            final.append((torch.cat([h[0], h[1]], dim=-1), torch.cat([c[0], c[1]], dim=-1)))
        return MTLSTMOutput(embeddings, outputs, final)


def sequence_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """(batch, max_len) bool, True at positions < length."""
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def pad_ids(sequences: Sequence[Sequence[int]], device: torch.device | str = "cpu",
            pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (batch, longest) long tensor and (batch,) lengths."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    longest = max((len(s) for s in sequences), default=0)
    out = torch.full((len(sequences), max(longest, 1)), pad, dtype=torch.long)
    for i, s in enumerate(sequences):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out.to(device), lengths.to(device)
