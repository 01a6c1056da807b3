"""A BERT checkpoint's sentence vectors as sentence-transformers makes them.

sentence-transformers pools the top layer over every word piece of the sentence, [CLS] and
[SEP] included (its attention mask covers them), not over words; so this works on pieces,
beside :class:`~contextvec.encoders.bert.encoder.BertEncoder`'s word vectors. The pooling is
the checkpoint's own (:mod:`contextvec.io.sentence_transformers`), or for a checkpoint without
one what sentence-transformers builds for it: the mean, not normalised.

A sentence is never cut: one longer than ``max_seq_length`` pieces (where sentence-transformers
would truncate it) is refused by the caller, which asks :meth:`BertSentenceEncoder.pieces` first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from contextvec.encoders.bert.encoder import BertEncoder
from contextvec.io.sentence_transformers import SentencePooling


class BertSentenceEncoder:
    """``encoder``'s model and tokenizer, pooled to one vector per sentence by ``pooling``."""

    def __init__(self, encoder: BertEncoder, pooling: SentencePooling | None = None) -> None:
        self.encoder = encoder
        self.pooling = pooling or SentencePooling()
        positions = encoder.config.max_position_embeddings
        self.max_pieces = min(self.pooling.max_seq_length or positions, positions)
        self.output_dim = encoder.output_dim * len(self.pooling.modes)

    def pieces(self, sentences: Sequence[Sequence[str]]) -> list[list[int]]:
        """Each sentence's piece ids, [CLS] first and [SEP] last (words lower-cased first if the
        model says ``do_lower_case``)."""
        if self.pooling.lowercase:
            sentences = [[word.lower() for word in words] for words in sentences]
        return [pieces.ids for pieces in self.encoder.tokenizer.encode_batch(sentences)]

    def embed_pieces(self, rows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """One float32 vector ``(output_dim,)`` per row of piece ids, in one unpadded forward."""
        if not rows:
            return []
        longest = max(len(row) for row in rows)
        if longest > self.max_pieces:
            raise ValueError(f"{longest} word pieces, over this model's limit of {self.max_pieces}")
        model = self.encoder.model
        device = model.embeddings.word_embeddings.weight.device
        lengths = [len(row) for row in rows]
        ids = torch.tensor([piece for row in rows for piece in row], dtype=torch.long, device=device)
        with torch.inference_mode():
            top = model.forward_unpadded(ids, lengths)[-1].float()
            vectors = torch.stack([self._pool(states) for states in top.split(lengths)])
            if self.pooling.normalize:
                norms = vectors.norm(dim=1, keepdim=True)
                if not bool((norms > 0).all()):  # F.normalize would return it unchanged
                    raise ValueError("a sentence vector has zero length: it cannot be normalised")
                vectors = vectors / norms
        return list(vectors.cpu().numpy())

    def _pool(self, states: torch.Tensor) -> torch.Tensor:
        """One row's (pieces, hidden) top layer -> its sentence vector, as sentence-transformers'
        ``Pooling`` computes each mode (float32, every piece counted)."""
        n = states.shape[0]
        parts = []
        for mode in self.pooling.modes:
            if mode == "cls_token":
                parts.append(states[0])
            elif mode == "max_tokens":
                parts.append(states.max(dim=0).values)
            elif mode == "mean_tokens":
                parts.append(states.sum(dim=0) / n)
            elif mode == "mean_sqrt_len_tokens":
                parts.append(states.sum(dim=0) / n ** 0.5)
            elif mode == "weightedmean_tokens":
                weights = torch.arange(1, n + 1, dtype=states.dtype, device=states.device)
                parts.append((states * weights[:, None]).sum(dim=0) / weights.sum())
            else:  # lasttoken: [SEP]
                parts.append(states[-1])
        return torch.cat(parts)
