"""Vocabularies of words and characters, and sentences -> batches of id tensors (:class:`Indexer`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from contextvec.io.word_vectors import WordVectors

PAD, UNK = 0, 1
Encoded = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]
"""One sentence's word ids, char ids and n-gram ids (None without n-grams)."""
MAX_CHARS = 30
"""Characters per token seen by the char CNN (longer tokens are cut; CoNLL's longest is 61)."""


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


NGRAM_SIZES = (1, 2, 3, 4)


def char_ngrams(word: str) -> list[str]:
    """The unique character n-grams of ``word`` (Hashimoto et al. 2016): n = 1..4 over the word
    with boundary marks (``<`` before, ``>`` after: a word's start and end differ from its inside;
    the bare marks are not n-grams), case kept, the word cut at ``MAX_CHARS``; first-seen order."""
    marked = f"<{word[:MAX_CHARS]}>"
    grams = (marked[i:i + n] for n in NGRAM_SIZES for i in range(len(marked) - n + 1))
    return list(dict.fromkeys(g for g in grams if g not in ("<", ">")))


def ngram_vocabulary(sentences: Iterable[Sequence[str]]) -> Vocabulary:
    """The n-grams of the words of ``sentences`` (the training split): an n-gram never seen in
    training has no embedding and is left out of a word's mean."""
    return Vocabulary(g for sentence in sentences for word in sentence for g in char_ngrams(word))


def encode_ngrams(vocabulary: Vocabulary, sentence: Sequence[str]) -> torch.Tensor:
    """(tokens, most n-grams) ids of each token's known n-grams, padded with ``PAD``."""
    ids = [[vocabulary.stoi[g] for g in char_ngrams(word) if g in vocabulary.stoi] for word in sentence]
    width = max(1, max(map(len, ids)))
    # One tensor from padded lists: a tensor per token costs more than the lookups.
    return torch.tensor([row + [PAD] * (width - len(row)) for row in ids], dtype=torch.long)


def _random_embeddings(rows: int, dim: int, generator: torch.Generator | None = None) -> np.ndarray:
    # Uniform with variance 1/dim: vectors of about unit length, like typical pretrained ones.
    bound = math.sqrt(3.0 / dim)
    # on the CPU even where a model is built on the meta device (to learn its shapes)
    return (torch.rand(rows, dim, generator=generator, device="cpu") * 2 * bound - bound).numpy()


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
    ngrams: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return Batch(self.tokens, self.words.to(device), self.chars.to(device), self.mask.to(device),
                     move(self.layers), move(self.targets), move(self.ngrams))


class Indexer:
    """Sentences (+ labels, + precomputed layers) -> :class:`Batch` tensors."""

    def __init__(self, words: Vocabulary, chars: Vocabulary, labels: Sequence[str],
                 ngrams: Vocabulary | None = None) -> None:
        self.words = words
        self.chars = chars
        self.ngrams = ngrams
        self.labels = list(labels)
        self.label_ids = {label: i for i, label in enumerate(self.labels)}

    def label_id(self, label: str) -> int:
        if label not in self.label_ids:
            raise ValueError(f"label {label!r} is not among the training labels {self.labels}")
        return self.label_ids[label]

    def encode(self, sentence: Sequence[str]) -> Encoded:
        """Word ids (n,), char ids (n, MAX_CHARS) and (with n-grams) n-gram ids (n, k) of one
        sentence (cache them for reuse)."""
        words = torch.tensor([self.words[w.lower()] for w in sentence], dtype=torch.long)
        rows = [[self.chars[c] for c in word[:MAX_CHARS]] for word in sentence]
        chars = torch.tensor([row + [PAD] * (MAX_CHARS - len(row)) for row in rows],
                             dtype=torch.long).reshape(len(sentence), MAX_CHARS)
        if self.ngrams is None:
            return words, chars, None
        return words, chars, encode_ngrams(self.ngrams, sentence)

    def batch(
        self,
        sentences: Sequence[Sequence[str]],
        labels: Sequence[Sequence[str]] | Sequence[str] | None = None,
        layers: Sequence[np.ndarray] | None = None,
        encoded: Sequence[Encoded] | None = None,
    ) -> Batch:
        """``labels``: per-token tags (tagging), one label per sentence (classification) or None;
        ``layers``: one ``(num_layers, n_tokens, dim)`` array per sentence or None; ``encoded``:
        :meth:`encode` of each sentence if already computed."""
        lengths = [len(s) for s in sentences]
        if not sentences or min(lengths) < 1:
            raise ValueError("a batch needs at least one sentence and no empty sentence")
        encoded = encoded if encoded is not None else [self.encode(s) for s in sentences]
        words = pad_sequence([e[0] for e in encoded], batch_first=True, padding_value=PAD)
        chars = pad_sequence([e[1] for e in encoded], batch_first=True, padding_value=PAD)
        time = words.shape[1]
        ngrams = None
        if self.ngrams is not None:
            most = max(e[2].shape[1] for e in encoded)
            ngrams = torch.full((len(encoded), time, most), PAD, dtype=torch.long)
            for b, e in enumerate(encoded):
                ngrams[b, :e[2].shape[0], :e[2].shape[1]] = e[2]
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
        return Batch([list(s) for s in sentences], words, chars, mask, stacked, targets, ngrams)
