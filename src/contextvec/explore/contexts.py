"""What each layer makes of a word in different contexts: how alike its occurrences are, and which
contexts of a corpus are nearest to it (the numbers behind ``contextvec serve``'s explorer page).

:func:`word_across_contexts` compares every occurrence of a word in a few sentences with every
other, layer by layer, by the cosine similarity of their vectors: a context-free layer (ELMo's
character CNN) gives every occurrence the same vector, a contextual layer tells the senses apart
("bank" of a river and "bank" of money drift apart). :class:`ContextIndex` holds a corpus's
vectors (computed once, in the feature cache of :mod:`contextvec.features`) and ranks
the corpus's occurrences of a word by their similarity with the word in a new sentence, per layer
(ELMo, Peters et al. 2018, Table 4; :func:`contextvec.probes.neighbours.nearest_contexts` is the
one-layer, embed-on-demand form).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from contextvec.encoders.base import Encoder
from contextvec.features import FeatureSettings, cached_features
from contextvec.probes.neighbours import occurrences

CHUNK_ROWS = 65536
"""Corpus occurrences compared at a time: bounds the memory of a query for a frequent word."""


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (..., dim) scaled to unit length along the last axis (a zero row stays zero)."""
    vectors = vectors.astype(np.float32, copy=False)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, np.float32(1e-12))


@dataclass(frozen=True)
class Pair:
    """Two occurrences (indices into ``WordAcrossContexts.occurrences``) and their similarity."""

    first: int
    second: int
    similarity: float


@dataclass(frozen=True)
class WordAcrossContexts:
    """One word's occurrences in a few sentences, compared layer by layer.

    Attributes:
        occurrences: ``(sentence, position)`` of each occurrence, in reading order.
        similarity: ``(num_layers, n, n)`` float32 cosine similarities of the occurrences' vectors
            (1 on the diagonal), one matrix per layer.
        closest: per layer, the pair of different occurrences with the highest similarity.
        farthest: per layer, the pair with the lowest.
        total: the occurrences found, those beyond ``most`` included.
    """

    occurrences: list[tuple[int, int]]
    similarity: np.ndarray
    closest: list[Pair]
    farthest: list[Pair]
    total: int


def word_across_contexts(layers: Sequence[np.ndarray], sentences: Sequence[Sequence[str]], word: str,
                         ignore_case: bool = False, most: int | None = None) -> WordAcrossContexts:
    """Compare every occurrence of ``word`` in ``sentences`` with every other, per layer.

    Args:
        layers: each sentence's ``(num_layers, len(sentence), dim)`` array, as ``Encoder.embed``
            gives it.
        sentences: the token lists the arrays belong to.
        word: the token to find (a whole token, compared exactly or ignoring case).
        ignore_case: match ``Bank`` and ``bank``.
        most: compare the first ``most`` occurrences in reading order (None: all).

    Returns:
        The occurrences, their similarity matrices and the closest and farthest pair per layer.

    Raises:
        ValueError: ``word`` occurs fewer than twice (there is nothing to compare).
    """
    everywhere = occurrences(sentences, word, ignore_case)
    if len(everywhere) < 2:
        times = "does not occur" if not everywhere else "occurs once"
        raise ValueError(f"{word!r} {times} in the sentences: give at least two sentences with it")
    found = everywhere[:most]
    vectors = unit_rows(np.stack([layers[i][:, j] for i, j in found], axis=1))  # (L, n, dim)
    similarity = np.clip(vectors @ vectors.transpose(0, 2, 1), -1.0, 1.0)
    upper = np.triu_indices(len(found), k=1)
    closest, farthest = [], []
    for matrix in similarity:
        values = matrix[upper]
        for pick, out in ((np.argmax, closest), (np.argmin, farthest)):
            k = int(pick(values))  # the first of ties: the earliest pair in reading order
            out.append(Pair(int(upper[0][k]), int(upper[1][k]), float(values[k])))
    return WordAcrossContexts(found, similarity, closest, farthest, len(everywhere))


@dataclass(frozen=True)
class NearContext:
    """An occurrence in the corpus: token ``position`` of corpus line ``sentence`` (0-based, among
    the non-blank lines read) and its cosine similarity with the query word."""

    sentence: int
    position: int
    similarity: float


class ContextIndex:
    """A corpus's vectors of every layer, ready to rank the occurrences of any word.

    Build one with :meth:`build` (the vectors are computed once and kept in the feature cache,
    so the next start with the same model and corpus reads them back), then ask :meth:`nearest`.
    The cached vectors are float16 (half the disk of float32; about three significant digits,
    plenty to rank contexts).
    """

    def __init__(self, sentences: Sequence[Sequence[str]], path: str | os.PathLike) -> None:
        self.sentences = [list(s) for s in sentences]
        self.path = Path(path)
        with h5py.File(self.path, "r") as f:
            dataset = f["layers"]
            offset, shape, dtype = dataset.id.get_offset(), dataset.shape, dataset.dtype
            lengths = f["lengths"][()]
            # A contiguous dataset (the cache writes one) is read through the page cache on
            # demand; any other layout is read whole.
            self.layers = (np.memmap(self.path, dtype, "r", offset, shape) if offset is not None
                           else dataset[()])
        self.num_layers = int(shape[0])
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.num_tokens = int(lengths.sum())
        self._positions: dict[bool, dict[str, list[tuple[int, int]]]] = {}

    @classmethod
    def build(cls, encoder: Encoder, sentences: Sequence[Sequence[str]],
              cache_dir: str | os.PathLike | None = None, progress: bool = True,
              label: str = "") -> ContextIndex:
        """Embed ``sentences`` with ``encoder`` (or find them in the cache) and index them.

        Args:
            encoder: the model whose layers are compared.
            sentences: the corpus, one token list per sentence.
            cache_dir: the feature cache (None: ``$CONTEXTVEC_CACHE`` or
                ``~/.cache/contextvec/features``).
            progress: show a progress bar while embedding.
            label: what the corpus is (its file name), kept with the cache entry.
        """
        path = cached_features(encoder, sentences, FeatureSettings(cache_dir=cache_dir, dtype="float16"),
                               progress=progress, label=label)
        return cls(sentences, path)

    def count(self, word: str, ignore_case: bool = False) -> int:
        """How many times ``word`` occurs in the corpus."""
        return len(self._where(word, ignore_case))

    def _where(self, word: str, ignore_case: bool) -> list[tuple[int, int]]:
        if ignore_case not in self._positions:
            table: dict[str, list[tuple[int, int]]] = {}
            for i, tokens in enumerate(self.sentences):
                for j, token in enumerate(tokens):
                    table.setdefault(token.lower() if ignore_case else token, []).append((i, j))
            self._positions[ignore_case] = table
        return self._positions[ignore_case].get(word.lower() if ignore_case else word, [])

    def nearest(self, query: np.ndarray, word: str, top_k: int = 5, ignore_case: bool = False,
                skip: Sequence[str] | None = None) -> list[list[NearContext]]:
        """The ``top_k`` occurrences of ``word`` nearest to ``query``, per layer.

        Args:
            query: ``(num_layers, dim)``: the word's vector in each layer of its sentence.
            word: the token whose occurrences are ranked.
            top_k: contexts per layer.
            ignore_case: match the word ignoring case.
            skip: a sentence (token list) left out if the corpus holds it (the query's own
                sentence would trivially come first).

        Returns:
            Per layer, the nearest contexts by decreasing similarity (ties: corpus order).

        Raises:
            ValueError: the corpus has no occurrence of ``word`` (other than in ``skip``).
        """
        found = self._where(word, ignore_case)
        if skip is not None:
            found = [(i, j) for i, j in found if self.sentences[i] != list(skip)]
        if not found:
            raise ValueError(f"{word!r} does not occur in the corpus ({len(self.sentences)} sentences)")
        rows = self.starts[[i for i, _ in found]] + np.array([j for _, j in found], dtype=np.int64)
        query = unit_rows(query)
        similarity = np.empty((self.num_layers, len(found)), np.float32)
        for start in range(0, len(found), CHUNK_ROWS):
            chunk = rows[start:start + CHUNK_ROWS]
            for layer in range(self.num_layers):
                vectors = unit_rows(np.asarray(self.layers[layer, chunk]))
                similarity[layer, start:start + len(chunk)] = vectors @ query[layer]
        out = []
        for values in similarity:
            order = np.argsort(-values, kind="stable")[:top_k]
            out.append([NearContext(found[k][0], found[k][1], float(values[k])) for k in order])
        return out
