"""Task models with and without contextual vectors: a biLSTM-CRF tagger and a sentence classifier.

Both models read tokens through the same input layer and the same biLSTM encoder:

- **Token representation** ``x``: a word embedding (random init, or a word2vec/GloVe file, see
  :func:`build_vocabularies`; trained with the model) and, optionally, a small character CNN
  (:class:`CharCNN`: char embeddings, one convolution, max over the characters; Lample et al.
  2016, Ma & Hovy 2016). Words are looked up **lowercased** (like Senna's and GloVe 6B's
  vocabularies); case reaches the model through the characters and the contextual vectors.
  During training a word seen once in train is replaced by UNK with probability
  ``word_unk_rate`` (Lample et al.), so the UNK vector is trained for unseen words.
- **Contextual vectors** (ELMo, Peters et al. 2018, section 3.3): a
  :class:`~contextvec.embedder.ContextualEmbedder` over the frozen encoder gives one learned
  scalar mix per place: ``input`` concatenates ``ELMo_task`` to ``x`` at the biLSTM input
  (``[x; ELMo_task]``); ``input+output`` also concatenates a second mix ``ELMo_task'`` to the
  biLSTM output (``[h; ELMo_task']``). With a fixed ``layers`` combination instead of ``mix``
  (``last``, ``sum_last_4``, ``concat_last_4``: the BERT paper's feature-based NER study, Table 7,
  via :func:`~contextvec.encoders.bert.combine_layers`) the embedder sees one combined layer
  (:class:`FixedLayers`) and its mixes are frozen at weight 1, gamma 1 (no mix penalty).
  For speed the encoder's layers can be computed once per dataset and passed in with each
  batch (``Batch.layers``, the same mixes and dropout are then applied to them); without them
  the embedder runs the encoder itself, so a trained model also tags new text.
- :class:`NerTagger`: ``x`` -> biLSTM (1-2 layers) -> linear -> :class:`~contextvec.tasks.crf.CRF`
  with the transition constraints of its tag scheme (the biLSTM-CRF of Lample et al. 2016 and
  Peters et al. 2017/2018).
- :class:`SentenceClassifier`: ``x`` -> biLSTM -> ``[max; mean]`` pooling over the tokens -> MLP
  (one ReLU hidden layer) -> softmax. A deliberately simple model (not CoVe's biattentive
  classification network), the same for SST-5, SST-2 and TREC-6.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

from contextvec.embedder.module import ContextualEmbedder
from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.encoders.bert.combine import LAYER_COMBINATIONS, combine_layers
from contextvec.io.word_vectors import WordVectors
from contextvec.tasks.crf import CRF, allowed_transitions

PAD, UNK = 0, 1
PLACEMENTS = ("none", "input", "input+output")
LAYERS = ("mix", *LAYER_COMBINATIONS)
"""How the encoder's layers enter: learned scalar mixes, or a fixed combination."""
MAX_CHARS = 30
"""Characters per token seen by the char CNN (longer tokens are cut; CoNLL's longest is 61)."""


@dataclass(frozen=True)
class ModelSettings:
    """Hyperparameters of the task models (defaults: small models that train on a CPU)."""

    word_dim: int = 50
    char_cnn: bool = True
    char_dim: int = 16
    char_filters: int = 64
    char_width: int = 3
    hidden: int = 100
    lstm_layers: int = 2
    dropout: float = 0.5
    mlp_hidden: int = 100
    word_unk_rate: float = 0.5
    placement: str = "none"
    layer_norm: bool = False
    mix_dropout: float = 0.5
    layers: str = "mix"
    tag_scheme: str = "bio"
    constrained: bool = True

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, not {self.placement!r}")
        if self.layers not in LAYERS:
            raise ValueError(f"layers must be one of {LAYERS}, not {self.layers!r}")
        if self.lstm_layers < 1 or self.hidden < 1 or self.word_dim < 1:
            raise ValueError(f"lstm_layers, hidden and word_dim must be >= 1: {self}")
        if not 0 <= self.dropout < 1 or not 0 <= self.mix_dropout < 1 or not 0 <= self.word_unk_rate <= 1:
            raise ValueError(f"dropout rates must be in [0, 1): {self}")

    @property
    def num_mixes(self) -> int:
        return {"none": 0, "input": 1, "input+output": 2}[self.placement]


class Vocabulary:
    """Strings <-> ids with ``<pad>`` = 0 and ``<unk>`` = 1; ``counts`` from the training data."""

    def __init__(self, items: Iterable[str], counts: Counter[str] | None = None) -> None:
        self.itos = ["<pad>", "<unk>"]
        self.stoi: dict[str, int] = {}
        for item in items:
            if item not in self.stoi and item not in ("<pad>", "<unk>"):
                self.stoi[item] = len(self.itos)
                self.itos.append(item)
        self.stoi.update({"<pad>": PAD, "<unk>": UNK})
        self.counts = counts or Counter()

    def __len__(self) -> int:
        return len(self.itos)

    def __getitem__(self, item: str) -> int:
        return self.stoi.get(item, UNK)

    def singletons(self) -> torch.Tensor:
        """(len,) bool: True for items seen exactly once in the training data."""
        return torch.tensor([self.counts.get(s, 0) == 1 for s in self.itos], dtype=torch.bool)


class _LowercaseKeep(Container[str]):
    """Keeps the word-vector rows whose lowercased word is wanted."""

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and word.lower() in self.wanted


def wanted_words(sentences: Iterable[Sequence[str]]) -> _LowercaseKeep:
    """The ``keep`` argument of :func:`contextvec.io.word_vectors.load_word_vectors` that loads only
    vectors for (lowercased) words of ``sentences``."""
    return _LowercaseKeep({w.lower() for s in sentences for w in s})


def build_vocabularies(
    train: Sequence[Sequence[str]],
    other: Sequence[Sequence[str]] = (),
    vectors: WordVectors | None = None,
) -> tuple[Vocabulary, Vocabulary, np.ndarray | None]:
    """(word vocabulary, char vocabulary, initial word-embedding matrix or None).

    Words (lowercased) are those of ``train``. With ``vectors``, the words of ``other`` (dev and
    test) that have a pretrained vector are added too, as usual with pretrained embeddings: a dev
    word seen only by the vector file keeps that vector instead of UNK. A cased vector file
    serves a lowercased word with its first row whose lowercased word matches (files are sorted
    by frequency). Rows without a vector are drawn at random like the random init.
    Characters (case kept) are those of ``train``.
    """
    counts = Counter(w.lower() for s in train for w in s)
    pretrained: dict[str, np.ndarray] = {}
    if vectors is not None:
        for word, row in zip(vectors.words, vectors.vectors, strict=True):
            pretrained.setdefault(word.lower(), row)
    words = list(counts)
    if vectors is not None:
        words += [w.lower() for s in other for w in s if w.lower() in pretrained]
    vocab = Vocabulary(words, counts)
    chars = Vocabulary(c for s in train for w in s for c in w)
    if vectors is None:
        return vocab, chars, None
    matrix = _random_embeddings(len(vocab), vectors.dim)
    for i, word in enumerate(vocab.itos):
        if word in pretrained:
            matrix[i] = pretrained[word]
    matrix[PAD] = 0.0
    return vocab, chars, matrix


def _random_embeddings(rows: int, dim: int, generator: torch.Generator | None = None) -> np.ndarray:
    # Uniform with variance 1/dim: vectors of about unit length, like typical pretrained ones.
    bound = math.sqrt(3.0 / dim)
    return (torch.rand(rows, dim, generator=generator) * 2 * bound - bound).numpy()


def check_layers(layers: str, num_layers: int) -> None:
    """Raise if an encoder of ``num_layers`` layers cannot give the ``layers`` combination."""
    if layers in ("sum_last_4", "concat_last_4") and num_layers < 4:
        raise ValueError(f"layers {layers} needs an encoder of at least 4 layers, this one has {num_layers}")


class FixedLayers(Encoder):
    """One fixed combination of another encoder's layers (``num_layers`` = 1): ``last``,
    ``sum_last_4`` or ``concat_last_4`` (:func:`~contextvec.encoders.bert.combine_layers`)."""

    def __init__(self, encoder: Encoder, how: str) -> None:
        super().__init__()
        if how not in LAYER_COMBINATIONS:
            raise ValueError(f"how must be one of {LAYER_COMBINATIONS}, not {how!r}")
        check_layers(how, encoder.num_layers)
        self.inner = encoder
        self.how = how
        self.num_layers = 1
        self.output_dim = encoder.output_dim * (4 if how == "concat_last_4" else 1)

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        layers, mask = self.inner(sentences)
        return EncoderOutput(combine_layers(layers, self.how)[None], mask)


def contextual_embedder(encoder: Encoder, settings: ModelSettings) -> ContextualEmbedder:
    """The embedder a task model with ``settings`` uses (see the module docstring)."""
    if settings.layers != "mix":
        embedder = ContextualEmbedder(FixedLayers(encoder, settings.layers), settings.num_mixes,
                                      settings.layer_norm, settings.mix_dropout)
        for mix in embedder.mixes:
            mix.requires_grad_(False)  # one layer, weight 1 and gamma 1: a fixed mix
        return embedder
    return ContextualEmbedder(encoder, settings.num_mixes, settings.layer_norm, settings.mix_dropout)


@dataclass
class Batch:
    """One batch of model input. ``layers`` (num_layers, batch, time, dim): precomputed encoder
    layers, or None to run the encoder; ``targets``: (batch, time) tag ids or (batch,) labels."""

    tokens: list[list[str]]
    words: torch.Tensor
    chars: torch.Tensor
    mask: torch.Tensor
    layers: torch.Tensor | None = None
    targets: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return Batch(self.tokens, self.words.to(device), self.chars.to(device), self.mask.to(device),
                     move(self.layers), move(self.targets))


class Indexer:
    """Sentences (+ labels, + precomputed layers) -> :class:`Batch` tensors."""

    def __init__(self, words: Vocabulary, chars: Vocabulary, labels: Sequence[str]) -> None:
        self.words = words
        self.chars = chars
        self.labels = list(labels)
        self.label_ids = {label: i for i, label in enumerate(self.labels)}

    def label_id(self, label: str) -> int:
        if label not in self.label_ids:
            raise ValueError(f"label {label!r} is not among the training labels {self.labels}")
        return self.label_ids[label]

    def encode(self, sentence: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Word ids (n,) and char ids (n, MAX_CHARS) of one sentence (cache them for reuse)."""
        words = torch.tensor([self.words[w.lower()] for w in sentence], dtype=torch.long)
        chars = torch.zeros(len(sentence), MAX_CHARS, dtype=torch.long)
        for t, word in enumerate(sentence):
            ids = [self.chars[c] for c in word[:MAX_CHARS]]
            chars[t, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return words, chars

    def batch(
        self,
        sentences: Sequence[Sequence[str]],
        labels: Sequence[Sequence[str]] | Sequence[str] | None = None,
        layers: Sequence[np.ndarray] | None = None,
        encoded: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> Batch:
        """``labels``: per-token tags (tagging), one label per sentence (classification) or None;
        ``layers``: one ``(num_layers, n_tokens, dim)`` array per sentence or None; ``encoded``:
        :meth:`encode` of each sentence if already computed."""
        lengths = [len(s) for s in sentences]
        if not sentences or min(lengths) < 1:
            raise ValueError("a batch needs at least one sentence and no empty sentence")
        encoded = encoded if encoded is not None else [self.encode(s) for s in sentences]
        words = pad_sequence([w for w, _ in encoded], batch_first=True, padding_value=PAD)
        chars = pad_sequence([c for _, c in encoded], batch_first=True, padding_value=PAD)
        time = words.shape[1]
        mask = torch.arange(time).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
        targets = None
        if labels is not None and not isinstance(labels[0], str):
            targets = pad_sequence(
                [torch.tensor([self.label_id(t) for t in tags], dtype=torch.long) for tags in labels],
                batch_first=True,
            )
        elif labels is not None:
            targets = torch.tensor([self.label_id(str(label)) for label in labels])
        stacked = None
        if layers is not None:
            first = layers[0]
            stacked = torch.zeros(first.shape[0], len(sentences), time, first.shape[2])
            for b, array in enumerate(layers):
                if array.shape[1] != lengths[b]:
                    raise ValueError(f"features of {array.shape[1]} tokens for a sentence of {lengths[b]}")
                stacked[:, b, : lengths[b]] = torch.from_numpy(np.asarray(array, dtype=np.float32))
        return Batch([list(s) for s in sentences], words, chars, mask, stacked, targets)


class CharCNN(nn.Module):
    """Character embeddings -> one convolution -> max over the token's characters (padding excluded)."""

    def __init__(self, num_chars: int, char_dim: int, filters: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=PAD)
        self.conv = nn.Conv1d(char_dim, filters, width, padding=width // 2)
        self.output_dim = filters

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """(batch, time, max_chars) ids -> (batch, time, filters)."""
        batch, time, width = chars.shape
        flat = chars.reshape(batch * time, width)
        x = self.conv(self.embedding(flat).transpose(1, 2))[:, :, :width]  # (tokens, filters, chars)
        x = x.masked_fill((flat == PAD).unsqueeze(1), float("-inf")).max(dim=2).values
        x = torch.where(torch.isinf(x), torch.zeros_like(x), x)  # padding tokens (no characters)
        return x.reshape(batch, time, -1)


class TokenEmbedder(nn.Module):
    """``[word embedding; char CNN]`` per token (the non-contextual representation ``x``)."""

    def __init__(
        self,
        words: Vocabulary,
        chars: Vocabulary,
        settings: ModelSettings,
        pretrained: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        dim = settings.word_dim if pretrained is None else pretrained.shape[1]
        initial = _random_embeddings(len(words), dim) if pretrained is None else pretrained
        self.words = nn.Embedding(len(words), dim, padding_idx=PAD)
        with torch.no_grad():
            self.words.weight.copy_(torch.from_numpy(np.asarray(initial, dtype=np.float32)))
            self.words.weight[PAD] = 0.0
        self.register_buffer("singletons", words.singletons())
        self.word_unk_rate = settings.word_unk_rate
        self.chars = (
            CharCNN(len(chars), settings.char_dim, settings.char_filters, settings.char_width)
            if settings.char_cnn else None
        )
        self.output_dim = dim + (self.chars.output_dim if self.chars is not None else 0)

    def forward(self, words: torch.Tensor, chars: torch.Tensor) -> torch.Tensor:
        if self.training and self.word_unk_rate > 0:
            coin = torch.rand(words.shape, device=words.device) < self.word_unk_rate
            drop = self.singletons[words] & coin
            words = words.masked_fill(drop, UNK)
        x = self.words(words)
        if self.chars is not None:
            x = torch.cat([x, self.chars(chars)], dim=-1)
        return x


class _BiLSTMModel(nn.Module):
    """Shared trunk: token representation (+ input mix) -> biLSTM (+ output mix)."""

    def __init__(
        self,
        tokens: TokenEmbedder,
        settings: ModelSettings,
        contextual: ContextualEmbedder | None,
    ) -> None:
        super().__init__()
        if (contextual is None) != (settings.num_mixes == 0):
            raise ValueError(f"placement {settings.placement!r} needs "
                             f"{'a' if settings.num_mixes else 'no'} contextual embedder")
        if contextual is not None and len(contextual.mixes) != settings.num_mixes:
            raise ValueError(f"the embedder has {len(contextual.mixes)} mixes, "
                             f"placement needs {settings.num_mixes}")
        self.settings = settings
        self.tokens = tokens
        self.contextual = contextual
        context_dim = contextual.output_dim if contextual is not None else 0
        self.dropout = nn.Dropout(settings.dropout)
        self.lstm = nn.LSTM(
            tokens.output_dim + context_dim, settings.hidden, num_layers=settings.lstm_layers,
            batch_first=True, bidirectional=True,
            dropout=settings.dropout if settings.lstm_layers > 1 else 0.0,
        )
        self.output_dim = 2 * settings.hidden + (context_dim if settings.num_mixes == 2 else 0)

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

    def encode(self, batch: Batch) -> torch.Tensor:
        """(batch, time, output_dim) features of each token."""
        x = self.dropout(self.tokens(batch.words, batch.chars))
        mixes = self.mixes(batch)
        if mixes:
            x = torch.cat([x, mixes[0]], dim=-1)
        lengths = batch.mask.sum(1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        h = self.dropout(h)
        if len(mixes) == 2:
            h = torch.cat([h, mixes[1]], dim=-1)
        return h

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


class NerTagger(_BiLSTMModel):
    """biLSTM-CRF sequence tagger (see the module docstring)."""

    def __init__(
        self,
        tokens: TokenEmbedder,
        labels: Sequence[str],
        settings: ModelSettings,
        contextual: ContextualEmbedder | None = None,
    ) -> None:
        super().__init__(tokens, settings, contextual)
        self.labels = list(labels)
        self.project = nn.Linear(self.output_dim, len(labels))
        if settings.constrained:
            self.crf = CRF(len(labels), *allowed_transitions(self.labels, settings.tag_scheme))
        else:
            self.crf = CRF(len(labels))

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


class SentenceClassifier(_BiLSTMModel):
    """biLSTM, ``[max; mean]`` pooling over tokens, MLP (see the module docstring)."""

    def __init__(
        self,
        tokens: TokenEmbedder,
        labels: Sequence[str],
        settings: ModelSettings,
        contextual: ContextualEmbedder | None = None,
    ) -> None:
        super().__init__(tokens, settings, contextual)
        self.labels = list(labels)
        self.mlp = nn.Sequential(
            nn.Linear(2 * self.output_dim, settings.mlp_hidden), nn.ReLU(), nn.Dropout(settings.dropout),
            nn.Linear(settings.mlp_hidden, len(labels)),
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
