"""The one container of labelled task data: sentences, their labels and, once attached, features.

``labels`` holds one tag per token (tagging tasks), one class per sentence (classification), one
float score per item (regression: STS-B) or None per item (an unlabeled file: GLUE's test.tsv).
Pair tasks (MRPC, RTE, STS-B, WNLI) keep each item's second sentence in ``second``.
:class:`TaggedCorpus` is the tagging view that checks the per-token lengths and names the labels
``tags``. ``LabeledSentences`` is the name the readers of classification files use.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEV_SPLIT_SEED = 0
"""Seed of the dev carve-out (fixed, so that every training seed sees the same dev set)."""


@dataclass
class Split:
    """One data split. ``labels``: per-token tags (tagging), one label per item (a class string or a
    float score), or None per item in an unlabeled file; ``features``: the encoder's layers per
    first sentence, ``(num_layers, n_tokens, dim)``, or None; ``second``/``second_features``: the
    second sentence of each item of a pair task and its layers; ``ids``: the file's own id of each
    item (GLUE's index column, or the row number); ``documents``: each item's document, counting
    from 0 in file order, where the reader marks documents (CoNLL-2003's ``-DOCSTART-``), else
    None."""

    sentences: list[list[str]]
    labels: list
    source: str = "<string>"
    features: list[np.ndarray] | None = None
    second: list[list[str]] | None = None
    second_features: list[np.ndarray] | None = None
    ids: list[str] | None = None
    documents: list[int] | None = None

    def __post_init__(self) -> None:
        if len(self.sentences) != len(self.labels):
            raise ValueError(f"{self.source}: {len(self.sentences)} sentences but {len(self.labels)} labels")
        for name in ("second", "ids", "documents"):
            other = getattr(self, name)
            if other is not None and len(other) != len(self.sentences):
                raise ValueError(f"{self.source}: {len(self.sentences)} sentences but {len(other)} {name}")

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def pair(self) -> bool:
        """Items are sentence pairs."""
        return self.second is not None

    @property
    def labeled(self) -> bool:
        """Every item has a label (an unlabeled file has None for each)."""
        return all(label is not None for label in self.labels)

    @property
    def num_tokens(self) -> int:
        """The tokens of every sentence, both of a pair counted."""
        return sum(self.item_lengths)

    @property
    def item_lengths(self) -> list[int]:
        """The tokens of each item (a pair's two sentences together): what length batching sorts by."""
        if self.second is None:
            return [len(s) for s in self.sentences]
        return [len(a) + len(b) for a, b in zip(self.sentences, self.second, strict=True)]

    @property
    def all_sentences(self) -> list[list[str]]:
        """Every sentence of the split: the first ones, then a pair task's second ones."""
        return self.sentences + (self.second or [])

    def subset(self, ids: Sequence[int], source: str) -> Split:
        def pick(items: list | None) -> list | None:
            return None if items is None else [items[i] for i in ids]

        return Split(pick(self.sentences), pick(self.labels), source, pick(self.features), pick(self.second),
                     pick(self.second_features), pick(self.ids), pick(self.documents))


LabeledSentences = Split
"""Sentences with one class label each (what the SST and TREC readers return)."""


class TaggedCorpus(Split):
    """Sentences with one tag per word (``tags`` = ``labels``): CoNLL-2003, CoNLL-U."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for i, (words, tags) in enumerate(zip(self.sentences, self.labels, strict=True)):
            if len(words) != len(tags):
                raise ValueError(f"{self.source}: sentence {i + 1} has {len(words)} words, {len(tags)} tags")

    @property
    def tags(self) -> list[list[str]]:
        return self.labels


def subsample(split: Split, fraction: float, seed: int) -> Split:
    """A seeded random ``fraction`` of the split (at least one sentence), in file order."""
    if fraction >= 1:
        return split
    n = max(1, round(len(split) * fraction))
    ids = sorted(random.Random(seed).sample(range(len(split)), n))
    return split.subset(ids, f"{split.source} ({fraction:g} sample, seed {seed})")


def carve_dev(data: Split, fraction: float = 0.1, seed: int = DEV_SPLIT_SEED) -> tuple[Split, Split]:
    """Split ``data`` into (train, dev): a seeded random ``fraction`` (rounded, at least 1) is dev.

    Both parts keep the file order and every field of the items (second sentences, ids). The
    same data, fraction and seed give the same split.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), not {fraction}")
    n_dev = max(1, round(len(data) * fraction))
    if n_dev >= len(data):
        raise ValueError(f"{data.source}: {len(data)} sentences are too few to carve out a dev set")
    dev_ids = set(random.Random(seed).sample(range(len(data)), n_dev))

    def pick(keep: bool, name: str) -> Split:
        return data.subset([i for i in range(len(data)) if (i in dev_ids) == keep],
                           f"{data.source} ({name}, seed {seed})")

    return pick(False, f"train minus {fraction:.0%} dev"), pick(True, f"{fraction:.0%} dev carve-out")
