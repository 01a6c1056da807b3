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

:func:`sense_separation` reads the senses off those similarities when each sentence's sense is
marked: per layer, whether occurrences of the same sense are closer than occurrences of different
senses, by how much, and which layer separates them best; :func:`read_marked` reads the marks
(``[river] We sat on the bank .``). Its words come from the numbers, so they hold for any model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contextvec.encoders.base import Encoder
from contextvec.features import FeatureFile, FeatureSettings, cached_features
from contextvec.probes.neighbours import occurrences

DECIMALS = 3
"""Decimals the demo and the explorer page print a similarity with."""

SHOWN_MARGIN = 0.5 * 10.0 ** -DECIMALS
"""The least margin that counts as separating the senses: a smaller one prints as 0.000, and a
layer whose printed margin is 0.000 is not said to separate anything (a context-free layer's
cosines are 1 up to float rounding)."""

SENSE_MARK = re.compile(r"\[([^\[\]\s]+)\]\s+(.*)")
"""A line marked with its word's sense: ``[river] We sat on the bank .`` (the page's syntax too)."""

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
        with FeatureFile.open(self.path) as features:
            self.layers = features.mapped_layers()  # read through the page cache on demand
            lengths = features.lengths
        self.num_layers = int(self.layers.shape[0])
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


def read_marked(lines: Sequence[str]) -> tuple[list[str], list[str | None]]:
    """``(texts, senses)`` of lines that may start with a sense mark, ``[sense] text``.

    Blank lines are skipped; an unmarked line's sense is None.
    """
    texts: list[str] = []
    senses: list[str | None] = []
    for line in lines:
        if not line.strip():
            continue
        found = SENSE_MARK.fullmatch(line.strip())
        texts.append(found.group(2) if found else line.strip())
        senses.append(found.group(1) if found else None)
    return texts, senses


def _fmt(value: float) -> str:
    """``value`` at the printed decimals; a rounding error below them prints as 0.000, not -0.000."""
    return f"{round(value, DECIMALS) + 0.0:.{DECIMALS}f}"


def _label(name: str) -> str:
    """``biLSTM-1`` of the layer name ``1 biLSTM-1``."""
    return name.split(maxsplit=1)[-1]


@dataclass(frozen=True)
class LayerSeparation:
    """How far one layer keeps a word's senses apart.

    Attributes:
        layer: the layer's index.
        name: its name (``Encoder.layer_names()``).
        same: the mean cosine similarity of pairs of occurrences of the same sense.
        different: the mean over pairs of different senses.
        margin: ``same - different``.
        separates: the margin is at least ``SHOWN_MARGIN``.
        every_pair: the farthest same-sense pair is closer than the closest different-sense pair.
        farthest_same: the lowest same-sense similarity.
        closest_different: the highest different-sense similarity.
        means: the mean similarity of each kind of pair, keyed by its sense (``river``) or two
            senses (``money/river``), in the order the senses first occur.
    """

    layer: int
    name: str
    same: float
    different: float
    margin: float
    separates: bool
    every_pair: bool
    farthest_same: float
    closest_different: float
    means: dict[str, float]

    def verdict(self) -> str:
        """What the numbers say, in a few words (the margin at the printed decimals)."""
        if not self.separates:
            return f"margin {_fmt(self.margin)}: does not separate the senses"
        pairs = (f"the farthest same-sense pair {_fmt(self.farthest_same)}, the closest "
                 f"different-sense pair {_fmt(self.closest_different)}")
        if self.every_pair:
            return f"margin {_fmt(self.margin)}: separates the senses, every pair ({pairs})"
        return f"margin {_fmt(self.margin)}: separates the senses on average, not every pair ({pairs})"


@dataclass(frozen=True)
class SenseSeparation:
    """A word's senses, layer by layer (:func:`sense_separation`).

    Attributes:
        senses: each compared occurrence's sense, in reading order.
        layers: one :class:`LayerSeparation` per layer.
        best: the index of the layer with the largest margin among those that separate the
            senses (None: no layer does).
    """

    senses: list[str]
    layers: list[LayerSeparation]
    best: int | None

    def summary(self) -> str:
        """One or two sentences that say which layer separates the senses best and by how much,
        or that none does; every number in them is one the layers hold."""
        if self.best is None:
            top = max(self.layers, key=lambda s: s.margin)
            return ("No layer separates the senses: in every layer, pairs of different senses are "
                    "on average as close as pairs of the same sense, or closer (the largest margin, "
                    f"{_label(top.name)}'s, is {_fmt(top.margin)}).")
        best = self.layers[self.best]
        text = (f"{_label(best.name)} separates the senses best, by a margin of {_fmt(best.margin)} "
                f"(same-sense pairs {_fmt(best.same)} on average, different-sense pairs "
                f"{_fmt(best.different)}")
        text += ("; every same-sense pair is closer than every different-sense pair)." if best.every_pair
                 else "; not every same-sense pair is closer than every different-sense pair).")
        others = sorted((s for s in self.layers if s.separates and s.layer != best.layer),
                        key=lambda s: -s.margin)
        if others:
            return text + " Next: " + ", ".join(f"{_label(s.name)} by {_fmt(s.margin)}" for s in others) + "."
        return text + " No other layer separates them."


def sense_separation(result: WordAcrossContexts, senses: Sequence[str], names: Sequence[str]
                     ) -> SenseSeparation:
    """Whether each layer keeps the senses of a word apart: the mean similarity of same-sense
    pairs of occurrences against that of different-sense pairs.

    Args:
        result: the word's occurrences compared (:func:`word_across_contexts`).
        senses: the word's sense in each sentence ``result`` was computed from (every occurrence
            in a sentence takes its sentence's sense).
        names: the layers' names, ``result.similarity.shape[0]`` of them.

    Returns:
        Per layer the means, their margin and whether it separates; the best layer.

    Raises:
        ValueError: too few senses given, or no pair of the same sense or none of different
            senses among the occurrences.
    """
    last = max(i for i, _ in result.occurrences)
    if len(senses) <= last:
        raise ValueError(f"{len(senses)} senses for sentences up to #{last + 1}: give one sense per sentence")
    marks = np.array([senses[i] for i, _ in result.occurrences], dtype=object)
    upper = np.triu_indices(len(marks), k=1)
    alike = marks[upper[0]] == marks[upper[1]]
    if alike.all() or not alike.any():
        kind = "different senses" if alike.all() else "the same sense"
        raise ValueError(f"no two occurrences of {kind}: give at least two sentences of one sense "
                         "and one of another")
    order = list(dict.fromkeys(marks))
    first, second = (np.array([order.index(m) for m in marks[side]]) for side in upper)
    kinds = {(a, a): order[a] for a in range(len(order))}  # one sense first, then two
    kinds |= {(a, b): f"{order[a]}/{order[b]}" for a in range(len(order)) for b in range(a + 1, len(order))}
    pair_kind = [kinds[min(a, b), max(a, b)] for a, b in zip(first, second, strict=True)]
    present = [kind for kind in kinds.values() if kind in pair_kind]
    layers = []
    for k, (matrix, name) in enumerate(zip(result.similarity, names, strict=True)):
        values = matrix[upper].astype(np.float64)
        same, different = values[alike], values[~alike]
        margin = float(same.mean() - different.mean())
        means = {kind: float(values[[p == kind for p in pair_kind]].mean()) for kind in present}
        layers.append(LayerSeparation(k, name, float(same.mean()), float(different.mean()), margin,
                                      margin >= SHOWN_MARGIN, bool(same.min() > different.max()),
                                      float(same.min()), float(different.max()), means))
    separating = [s for s in layers if s.separates]
    best = max(separating, key=lambda s: s.margin).layer if separating else None
    return SenseSeparation([str(m) for m in marks], layers, best)


def nearest_sense(sense: str, ranked: Sequence[tuple[float, str]], top_k: int) -> str:
    """Whether a query's nearest context shares its sense, in one sentence from the numbers.

    Args:
        sense: the query word's sense.
        ranked: ``(similarity, sense)`` of every context of the word, nearest first.
        top_k: the contexts shown: the sentence also says how many of them share the sense.
    """
    own = next((value for value, s in ranked if s == sense), None)
    other = next(((value, s) for value, s in ranked if s != sense), None)
    if own is None:
        return f"no context of its sense ({sense}) is in the set"
    shown = sum(s == sense for _, s in ranked[:top_k])
    count = f"{shown} of the {min(top_k, len(ranked))} nearest share its sense ({sense})"
    if other is None:
        return f"{count}; every context is of its sense"
    if round(own, DECIMALS) > round(other[0], DECIMALS):
        return f"{count}; the nearest is of its sense ({_fmt(own)}; of another: {_fmt(other[0])})"
    if round(own, DECIMALS) < round(other[0], DECIMALS):
        return (f"{count}; the nearest is of another sense ({other[1]}, {_fmt(other[0])}; "
                f"its own sense: {_fmt(own)})")
    return f"{count}; the nearest of its sense and of another ({other[1]}) tie at {_fmt(own)}"
