"""Nearest neighbours of a word in context (ELMo, Peters et al. 2018, Table 4).

Given a word in a query sentence, :func:`nearest_contexts` ranks every occurrence of that word in
a corpus by the cosine similarity of its contextual vector (one encoder layer) with the query
word's: the nearest contexts usually share the query's sense ("play" in a sports sentence finds
other plays of the game, not plays on Broadway). For contrast, :func:`nearest_words` lists the
nearest *words* by a context-free vector: the encoder's layer 0 of each word embedded alone (for
ELMo the character CNN, the same vector whatever the context; for BERT the embedding layer of the
word by itself), or a static embedding such as GloVe or word2vec.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.io.text_lines import open_text


@dataclass(frozen=True)
class Context:
    """An occurrence of the word: token ``position`` of corpus sentence ``sentence`` (0-based line
    among the sentences read), and its cosine similarity with the query."""

    sentence: int
    position: int
    tokens: list[str]
    similarity: float

    def marked(self, left: str = "[", right: str = "]") -> str:
        """The sentence with the word in brackets."""
        return mark(self.tokens, self.position, left, right)


def mark(tokens: Sequence[str], position: int, left: str = "[", right: str = "]") -> str:
    """``tokens`` joined by spaces, the one at ``position`` between ``left`` and ``right``."""
    return " ".join(f"{left}{t}{right}" if i == position else t for i, t in enumerate(tokens))


def resolve_layer(encoder: Encoder, layer: int | None) -> int:
    """A layer index in range (None: the top layer; negative counts from the top)."""
    if layer is None:
        return encoder.num_layers - 1
    if not -encoder.num_layers <= layer < encoder.num_layers:
        raise ValueError(f"layer {layer} out of range: the encoder has {encoder.num_layers} layers")
    return layer % encoder.num_layers


def occurrences(
    sentences: Iterable[Sequence[str]], word: str, ignore_case: bool = False
) -> list[tuple[int, int]]:
    """``(sentence, position)`` of every token equal to ``word``."""
    target = word.lower() if ignore_case else word
    return [(i, j) for i, tokens in enumerate(sentences) for j, token in enumerate(tokens)
            if (token.lower() if ignore_case else token) == target]


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


@dataclass(frozen=True)
class ContextSearch:
    """How :func:`nearest_contexts` searches: at ``layer`` (None: the top; negative: from the
    top), the ``top_k`` nearest, the word matched in any case (``ignore_case``) or exactly,
    ``batch_size`` corpus sentences per encoder batch."""

    layer: int | None = None
    top_k: int = 5
    ignore_case: bool = False
    batch_size: int = 64
    progress: bool = True

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.batch_size < 1:
            raise ValueError(f"top_k and batch_size must be >= 1: {self}")


def nearest_contexts(encoder: Encoder, query: Sequence[str], position: int, corpus: Sequence[Sequence[str]],
                     search: ContextSearch = ContextSearch()) -> list[Context]:
    """The ``top_k`` occurrences of ``query[position]`` in ``corpus`` nearest to it at ``layer``.

    Only corpus sentences containing the word are embedded; a corpus sentence identical to the
    query is skipped (it would trivially come first).
    """
    if not 0 <= position < len(query):
        raise ValueError(f"position {position} is outside the query's {len(query)} tokens")
    layer = resolve_layer(encoder, search.layer)
    word = query[position]
    found = [(i, j) for i, j in occurrences(corpus, word, search.ignore_case)
             if list(corpus[i]) != list(query)]
    if not found:
        raise ValueError(f"the corpus has no occurrence of {word!r} (other than the query sentence)")
    query_vector = _unit(encoder.embed([list(query)])[0][layer, position])
    sentence_ids = sorted({i for i, _ in found})
    vectors: dict[int, np.ndarray] = {}
    bar = tqdm(total=len(sentence_ids), unit="sent", desc="embed contexts", disable=not search.progress)
    with bar:
        for row, array in encoder.embed_batches([list(corpus[i]) for i in sentence_ids], search.batch_size):
            vectors[sentence_ids[row]] = array[layer]
            bar.update(1)
    matrix = _unit(np.stack([vectors[i][j] for i, j in found]))
    similarity = matrix @ query_vector
    order = np.argsort(-similarity, kind="stable")[:search.top_k]
    return [Context(found[k][0], found[k][1], list(corpus[found[k][0]]), float(similarity[k])) for k in order]


def vocabulary(sentences: Iterable[Sequence[str]], size: int | None = None) -> list[str]:
    """Word types by decreasing frequency (ties: first seen first), the ``size`` most frequent."""
    counts = Counter(token for tokens in sentences for token in tokens)
    return [w for w, _ in counts.most_common(size)]


def layer0_vectors(encoder: Encoder, words: Sequence[str], batch_size: int = 256,
                   progress: bool = True) -> np.ndarray:
    """Each word's layer-0 vector, the word embedded alone: ``(len(words), dim)`` float32."""
    out = np.empty((len(words), encoder.output_dim), np.float32)
    with tqdm(total=len(words), unit="word", desc="embed words", disable=not progress) as bar:
        for row, array in encoder.embed_batches([[w] for w in words], batch_size):
            out[row] = array[0, 0]
            bar.update(1)
    return out


def nearest_words(
    word: str, words: Sequence[str], vectors: np.ndarray, top_k: int = 5
) -> list[tuple[str, float]] | None:
    """The ``top_k`` words nearest to ``word`` by cosine among ``words`` (rows of ``vectors``),
    ``word`` itself excluded; None if ``word`` is not among them."""
    index = {w: i for i, w in enumerate(words)}
    if word not in index:
        return None
    unit = _unit(np.asarray(vectors, np.float32))
    similarity = unit @ unit[index[word]]
    similarity[index[word]] = -np.inf
    order = np.argsort(-similarity, kind="stable")[:top_k]
    return [(words[k], float(similarity[k])) for k in order if np.isfinite(similarity[k])]


def read_corpus(path: str | os.PathLike, max_sentences: int | None = None) -> list[list[str]]:
    """Token lists of a one-sentence-per-line file (plain or ``.gz``); empty lines stay (as empty
    lists) so that list index = line number - 1."""
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"--max-sentences must be >= 1, not {max_sentences}")
    with open_text(path) as f:
        corpus = [line.split() for line in itertools.islice(f, max_sentences)]
    if not any(corpus):
        raise ValueError(f"{path}: no sentences (an empty file?)")
    return corpus
