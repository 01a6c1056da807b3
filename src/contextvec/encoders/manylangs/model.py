"""The ELMoForManyLangs biLM: a token layer of word embedding + char-CNN under ELMo's LSTMs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from contextvec.encoders.bilm.char_cnn import CharCNN
from contextvec.encoders.bilm.lstm import ProjectedLSTMLayer
from contextvec.encoders.bilm.model import BiLMOutput, run_bilstm
from contextvec.encoders.manylangs.config import BOS, EOS, OOV, PAD, ManyLangsConfig, ManyLangsVocabulary


class ManyLangsTokenEmbedder(nn.Module):
    """Token vectors ``projection([word_embedding(word); highway(char_cnn(chars))])``.

    The char-CNN is ELMo's (embed, convolve, max-pool, activate, highway) over the model's own
    character ids; its padding character has a learned embedding like any other.
    """

    def __init__(self, config: ManyLangsConfig, word_padding: int | None, char_padding: int | None) -> None:
        super().__init__()
        self.word_embedding = (
            nn.Embedding(config.n_words, config.word_dim, padding_idx=word_padding)
            if config.word_dim else None
        )
        self.char_cnn = (
            CharCNN(config.cnn_config(), n_characters=config.n_characters, padding_id=char_padding,
                    project=False)
            if config.char_dim else None
        )
        self.projection = nn.Linear(config.word_dim + config.n_filters, config.projection_dim)

    def forward(self, word_ids: torch.Tensor | None, char_ids: torch.Tensor | None) -> torch.Tensor:
        """One context-independent vector per token, from its word and/or its characters.

        Args:
            word_ids: ``(tokens,)`` long word ids, or None where the model has no word embeddings.
            char_ids: ``(tokens, characters)`` long character ids, or None where the model has no
                character CNN.

        Returns:
            ``(tokens, projection_dim)`` float.
        """
        parts = []
        if self.word_embedding is not None:
            parts.append(self.word_embedding(word_ids))
        if self.char_cnn is not None:
            parts.append(self.char_cnn(char_ids))
        return self.projection(torch.cat(parts, dim=-1))


class ManyLangsBiLM(nn.Module):
    """The biLM of an ELMoForManyLangs model, for representations.

    Layer 0 is the token vector duplicated ``[x; x]``; layer k >= 1 is ``[forward_k; backward_k]``
    (ELMo's LSTMs: projected, clipped, residual from the second layer on; the forget gate's
    bias is all in the weights, with nothing added at run time). Each sentence is read between
    the tokens ``<bos>`` and ``<eos>``, whose rows are removed from the output, and starts from
    the zero state.
    """

    def __init__(self, config: ManyLangsConfig, vocabulary: ManyLangsVocabulary) -> None:
        super().__init__()
        vocabulary.check(config)
        self.config = config
        self.vocabulary = vocabulary
        self.chars = vocabulary.char_vocabulary(config.max_characters_per_token)
        words = vocabulary.words
        self.token_encoder = ManyLangsTokenEmbedder(
            config, words[PAD] if words else None, self.chars.padding if self.chars else None
        )
        p = config.projection_dim
        self.layers = nn.ModuleList(
            ProjectedLSTMLayer(p, config.lstm_dim, p, config.cell_clip, config.proj_clip, forget_bias=0.0)
            for _ in range(config.n_layers)
        )

    def embed_words(self, tokens: Sequence[str]) -> torch.Tensor:
        """Token vectors ``(len(tokens), projection_dim)``. A token longer than
        ``max_characters_per_token - 2`` characters is cut to that length first, for its word
        as for its characters, as the original reader does."""
        device = self.token_encoder.projection.weight.device
        if not tokens:
            return self.token_encoder.projection.weight.new_zeros(0, self.config.projection_dim)
        max_chars = self.config.max_characters_per_token
        clipped = [t if t in (BOS, EOS) else t[: max_chars - 2] for t in tokens]
        word_ids = char_ids = None
        if self.vocabulary.words is not None:
            words = self.vocabulary.words
            ids = np.array([words.get(t, words[OOV]) for t in clipped], dtype=np.int64)
            word_ids = torch.from_numpy(ids).to(device)
        if self.chars is not None:
            char_ids = torch.from_numpy(self.chars.encode(clipped)).to(device)
        return self.token_encoder(word_ids, char_ids)

    def boundary_vectors(self) -> torch.Tensor:
        """Token vectors of ``<bos>`` and ``<eos>``, shape (2, projection_dim)."""
        return self.embed_words([BOS, EOS])

    def contextualize(
        self, tokens: torch.Tensor, mask: torch.Tensor, boundaries: torch.Tensor | None = None,
        distinct: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> BiLMOutput:
        """Run the LSTM stacks over token vectors ``(batch, time, projection_dim)`` whose real
        tokens (``mask``, ``(batch, time)``) form a prefix of each row; ``boundaries`` are the
        ``<bos>``/``<eos>`` vectors (computed if omitted); ``distinct``: the batch's distinct
        token vectors and which one each real token is (see
        :func:`~contextvec.encoders.bilm.model.run_bilstm`)."""
        if boundaries is None:
            boundaries = self.boundary_vectors()
        return run_bilstm(self.layers, tokens, mask, boundaries, skip_connections=True,
                          distinct=distinct)
