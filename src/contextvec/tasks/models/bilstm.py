"""The biLSTM task models: :class:`NerTagger` (CRF) and :class:`SentenceClassifier` (pooling + MLP),
and their shared input layer (:class:`TaskModelBase`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from contextvec.embedder.module import ContextualEmbedder
from contextvec.tasks.crf import CRF, allowed_transitions
from contextvec.tasks.models.settings import ModelSettings
from contextvec.tasks.models.vocab import PAD, UNK, Batch, Vocabulary, _random_embeddings


def _given_as_asked(part: object | None, asked: bool, setting: str, article: str, what: str) -> None:
    """A one-line ``ValueError`` where an optional ``part`` is given though ``setting`` asks for
    none, or missing though it asks for one: "{setting} needs {article or no} {what}"."""
    if (part is None) == asked:
        raise ValueError(f"{setting} needs {article if asked else 'no'} {what}")


class WordCharCNN(nn.Module):
    """Character embeddings -> one convolution -> max over the token's characters (padding excluded)."""

    def __init__(self, num_chars: int, char_dim: int, filters: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=PAD)
        self.conv = nn.Conv1d(char_dim, filters, width, padding=width // 2)
        self.output_dim = filters

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """One vector per token from its characters.

        Args:
            chars: ``(batch, timesteps, characters)`` long character ids, ``PAD`` after each
                token's characters and at padded tokens.

        Returns:
            ``(batch, timesteps, filters)`` float; zeros at tokens without characters.
        """
        batch, time, width = chars.shape
        flat = chars.reshape(batch * time, width)
        x = self.conv(self.embedding(flat).transpose(1, 2))[:, :, :width]  # (tokens, filters, chars)
        x = x.masked_fill((flat == PAD).unsqueeze(1), float("-inf")).max(dim=2).values
        x = torch.where(torch.isinf(x), torch.zeros_like(x), x)  # padding tokens (no characters)
        return x.reshape(batch, time, -1)


class NgramEmbedder(nn.Module):
    """(batch, time, n-grams) ids -> (batch, time, dim): the mean of each token's n-gram vectors
    (:func:`~contextvec.tasks.models.vocab.char_ngrams`; a token with none gets zeros). Initialised
    like the random word embeddings, trained with the task."""

    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(size, dim, padding_idx=PAD)
        with torch.no_grad():
            self.embedding.weight.copy_(torch.from_numpy(np.asarray(_random_embeddings(size, dim))))
            self.embedding.weight[PAD] = 0.0
        self.output_dim = dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """The mean of each token's n-gram vectors.

        Args:
            ids: ``(batch, timesteps, ngrams)`` long n-gram ids, ``PAD`` after each token's n-grams.

        Returns:
            ``(batch, timesteps, dim)`` float; zeros at tokens without n-grams.
        """
        known = (ids != PAD).sum(-1, keepdim=True).clamp(min=1)
        return self.embedding(ids).sum(-2) / known


class TokenEmbedder(nn.Module):
    """``[word embedding; char CNN; char n-grams]`` per token (the non-contextual representation
    ``x``; the char CNN and the n-gram embeddings each optional)."""

    def __init__(
        self,
        words: Vocabulary,
        chars: Vocabulary,
        settings: ModelSettings,
        pretrained: np.ndarray | None = None,
        ngrams: Vocabulary | None = None,
    ) -> None:
        super().__init__()
        _given_as_asked(ngrams, settings.char_ngram_dim != 0, f"char_ngram_dim {settings.char_ngram_dim}",
                        "an", "n-gram vocabulary")
        dim = settings.word_dim if pretrained is None else pretrained.shape[1]
        initial = _random_embeddings(len(words), dim) if pretrained is None else pretrained
        self.words = nn.Embedding(len(words), dim, padding_idx=PAD)
        with torch.no_grad():
            self.words.weight.copy_(torch.from_numpy(np.asarray(initial, dtype=np.float32)))
            self.words.weight[PAD] = 0.0
        if settings.fixed_word_vectors:
            if pretrained is None:
                raise ValueError("fixed_word_vectors needs pretrained word vectors (a word-vector file)")
            self.words.weight.requires_grad_(False)
        self.register_buffer("singletons", words.singletons())
        self.word_unk_rate = settings.word_unk_rate
        self.chars = (
            WordCharCNN(len(chars), settings.char_dim, settings.char_filters, settings.char_width)
            if settings.char_cnn else None
        )
        self.ngrams = NgramEmbedder(len(ngrams), settings.char_ngram_dim) if ngrams is not None else None
        self.output_dim = dim + sum(m.output_dim for m in (self.chars, self.ngrams) if m is not None)

    def forward(
        self, words: torch.Tensor, chars: torch.Tensor, ngrams: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The non-contextual representation ``x`` of every token.

        In training, singleton words are replaced by ``UNK`` at rate ``word_unk_rate``.

        Args:
            words: ``(batch, timesteps)`` long word ids.
            chars: ``(batch, timesteps, characters)`` long character ids (read only with the char CNN).
            ngrams: ``(batch, timesteps, ngrams)`` long n-gram ids, required with n-gram embeddings.

        Returns:
            ``(batch, timesteps, output_dim)`` float: the word embedding, then the char CNN's and
            the n-gram embedder's vectors where the model has them.

        Raises:
            ValueError: a model with n-gram embeddings and no ``ngrams``.
        """
        if self.training and self.word_unk_rate > 0:
            coin = torch.rand(words.shape, device=words.device) < self.word_unk_rate
            drop = self.singletons[words] & coin
            words = words.masked_fill(drop, UNK)
        x = self.words(words)
        if self.chars is not None:
            x = torch.cat([x, self.chars(chars)], dim=-1)
        if self.ngrams is not None:
            if ngrams is None:
                raise ValueError("this model reads character n-grams: the batch has none")
            x = torch.cat([x, self.ngrams(ngrams)], dim=-1)
        return x


class TaskModelBase(nn.Module):
    """What every task model shares: the token representation ``x``, the contextual embedder's
    mixes and the labels; a subclass builds its layers in :meth:`_build` (called last, so
    parameters keep their order and seeded runs their initialisation)."""

    def __init__(
        self,
        tokens: TokenEmbedder,
        labels: Sequence[str],
        settings: ModelSettings,
        contextual: ContextualEmbedder | None = None,
    ) -> None:
        super().__init__()
        _given_as_asked(contextual, settings.num_mixes != 0, f"placement {settings.placement.value!r}",
                        "a", "contextual embedder")
        if contextual is not None and len(contextual.mixes) != settings.num_mixes:
            raise ValueError(f"the embedder has {len(contextual.mixes)} mixes, "
                             f"placement needs {settings.num_mixes}")
        self.settings = settings
        self.tokens = tokens
        self.contextual = contextual
        self.context_dim = contextual.output_dim if contextual is not None else 0
        self.dropout = nn.Dropout(settings.dropout)
        self.labels = list(labels)
        self._build()

    def _build(self) -> None:
        raise NotImplementedError

    def inputs(self, batch: Batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``[x; ELMo_task]`` per token (dropout on ``x``) and the mixes (the second, if any, is
        for the output)."""
        x = self.dropout(self.tokens(batch.words, batch.chars, batch.ngrams))
        mixes = self.mixes(batch)
        return (torch.cat([x, mixes[0]], dim=-1) if mixes else x), mixes

    def mixes(self, batch: Batch) -> list[torch.Tensor]:
        """The contextual embedder's mixes for the batch: from ``batch.layers`` when given."""
        if self.contextual is None:
            return []
        if batch.layers is None:
            return self.contextual(batch.tokens).mixes
        if batch.layers.shape[0] != self.contextual.mixes[0].weights.shape[0]:
            raise ValueError(f"{batch.layers.shape[0]} precomputed layers for mixes over "
                             f"{self.contextual.mixes[0].weights.shape[0]}")
        # The same computation as ContextualEmbedder.forward, on layers computed beforehand.
        return [self.contextual.dropout(mix(batch.layers, batch.mask)) for mix in self.contextual.mixes]

    def mix_penalty(self, coefficient: float) -> torch.Tensor:
        """ELMo's ``lambda * ||w||^2`` on the trainable mixes (zero for a fixed or no mix)."""
        device = self.tokens.words.weight.device
        if self.contextual is None or self.settings.layers != "mix" or coefficient == 0:
            return torch.zeros((), device=device)
        return self.contextual.l2_penalty(coefficient).to(device)

    def mix_summary(self) -> list[dict[str, object]]:
        """Each mix's softmax-normalised layer weights and gamma (for the results file)."""
        if self.contextual is None:
            return []
        with torch.no_grad():
            return [{"weights": [round(float(w), 6) for w in mix.normalized_weights()],
                     "gamma": round(float(mix.gamma), 6)} for mix in self.contextual.mixes]


class BiLSTMModel(TaskModelBase):
    """Token representation (+ input mix) -> biLSTM (+ output mix); each model adds its head over
    ``labels`` (:meth:`_add_head`, after the biLSTM: parameters keep their order and seeded runs
    their initialisation)."""

    def _build(self) -> None:
        settings = self.settings
        self.lstm = nn.LSTM(
            self.tokens.output_dim + self.context_dim, settings.hidden, num_layers=settings.lstm_layers,
            batch_first=True, bidirectional=True,
            dropout=settings.dropout if settings.lstm_layers > 1 else 0.0,
        )
        self.output_dim = 2 * settings.hidden + (self.context_dim if settings.num_mixes == 2 else 0)
        self._add_head()

    def _add_head(self) -> None:
        raise NotImplementedError

    def encode(self, batch: Batch) -> torch.Tensor:
        """(batch, time, output_dim) features of each token."""
        x, mixes = self.inputs(batch)
        lengths = batch.mask.sum(1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        h = self.dropout(h)
        if len(mixes) == 2:
            h = torch.cat([h, mixes[1]], dim=-1)
        return h


class NerTagger(BiLSTMModel):
    """biLSTM-CRF sequence tagger (see :mod:`contextvec.tasks.models`)."""

    def _add_head(self) -> None:
        self.project = nn.Linear(self.output_dim, len(self.labels))
        if self.settings.constrained:
            self.crf = CRF(len(self.labels), *allowed_transitions(self.labels, self.settings.tag_scheme))
        else:
            self.crf = CRF(len(self.labels))

    def emissions(self, batch: Batch) -> torch.Tensor:
        return self.project(self.encode(batch))

    def loss(self, batch: Batch) -> torch.Tensor:
        """Mean negative log-likelihood per sentence."""
        assert batch.targets is not None
        return self.crf.neg_log_likelihood(self.emissions(batch), batch.targets, batch.mask).mean()

    def predict(self, batch: Batch) -> list[list[str]]:
        """Viterbi tags of each sentence."""
        paths, _ = self.crf.viterbi(self.emissions(batch), batch.mask)
        return [[self.labels[i] for i in path] for path in paths]


class SentenceClassifier(BiLSTMModel):
    """biLSTM, ``[max; mean]`` pooling over tokens, MLP (see :mod:`contextvec.tasks.models`)."""

    def _add_head(self) -> None:
        self.mlp = nn.Sequential(
            nn.Linear(2 * self.output_dim, self.settings.mlp_hidden), nn.ReLU(),
            nn.Dropout(self.settings.dropout), nn.Linear(self.settings.mlp_hidden, len(self.labels)),
        )

    def logits(self, batch: Batch) -> torch.Tensor:
        h = self.encode(batch)
        m = batch.mask.unsqueeze(-1)
        pooled_max = h.masked_fill(~m, float("-inf")).max(dim=1).values
        pooled_mean = (h * m).sum(1) / m.sum(1).clamp(min=1)
        return self.mlp(torch.cat([pooled_max, pooled_mean], dim=-1))

    def loss(self, batch: Batch) -> torch.Tensor:
        """Mean cross-entropy per sentence."""
        assert batch.targets is not None
        return F.cross_entropy(self.logits(batch), batch.targets)

    def predict(self, batch: Batch) -> list[str]:
        return [self.labels[i] for i in self.logits(batch).argmax(-1).tolist()]
