"""The one container of labelled task data: sentences, their labels and, once attached, features.

``labels`` holds one tag per token (tagging tasks) or one class per sentence (classification);
:class:`TaggedCorpus` is the tagging view that checks the per-token lengths and names the labels
``tags``. ``LabeledSentences`` is the name the readers of classification files use.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Split:
    """One data split. ``labels``: per-token tags (tagging) or one label per sentence;
    ``features``: the encoder's layers per sentence, ``(num_layers, n_tokens, dim)``, or None."""

    sentences: list[list[str]]
    labels: list
    source: str = "<string>"
    features: list[np.ndarray] | None = None

    def __post_init__(self) -> None:
        if len(self.sentences) != len(self.labels):
            raise ValueError(f"{self.source}: {len(self.sentences)} sentences but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.sentences)

    def subset(self, ids: Sequence[int], source: str) -> Split:
        feats = None if self.features is None else [self.features[i] for i in ids]
        return Split([self.sentences[i] for i in ids], [self.labels[i] for i in ids], source, feats)


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
