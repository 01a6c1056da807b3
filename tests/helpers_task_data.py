"""What the task tests share: the task files in ../shared (or their committed excerpts), the
first document of a CoNLL-2003 text, synthetic sentiment, a split whose labels only the top
layer's features carry, and the seeded tiny random ELMo."""

from __future__ import annotations

import random

import numpy as np
import torch
from conftest import SHARED, shared_file

from contextvec.encoders.bilm import PRESETS, ElmoBiLM, ElmoEncoder
from contextvec.tasks.train import Split

TASKS = SHARED / "tasks"
CONLL_TRAIN = TASKS / "conll2003" / "eng.train.gz"
CONLL_DEV = TASKS / "conll2003" / "eng.testa.gz"
# The committed excerpts (tests/data) stand in for these where ../shared is absent: the first
# 62 (SST train) and 57 (SST dev) lines.
SST_TRAIN = shared_file("tasks/sst/trees/train.txt.gz")
SST_DEV = shared_file("tasks/sst/trees/dev.txt.gz")

CONLL_FIRST_DOCUMENT = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

"""
"""A CoNLL-2003 document of two sentences, IOB1 tags, and the blank line after it."""


def tiny_elmo() -> ElmoEncoder:
    """The tiny ELMo preset with seeded random weights, in eval mode."""
    torch.manual_seed(0)
    return ElmoEncoder(ElmoBiLM(PRESETS["tiny"])).eval()


def top_layer_split(n: int, rng: np.random.Generator) -> Split:
    """``n`` sentences of 2-5 tokens "x" (the words carry nothing) labelled "0" or "1", with
    ``(3, tokens, 32)`` features whose top layer's first dimension alone tells the label."""
    labels = [str(rng.integers(2)) for _ in range(n)]
    sentences = [["x"] * int(rng.integers(2, 6)) for _ in range(n)]
    features = []
    for label, sentence in zip(labels, sentences, strict=True):
        layers = rng.normal(size=(3, len(sentence), 32)).astype(np.float32)
        layers[2, :, 0] += 3.0 if label == "1" else -3.0
        features.append(layers)
    return Split(sentences, labels, "synthetic", features)


def sentiment_split(n: int, rng: random.Random) -> Split:
    """``n`` sentences of 4-8 filler words, one of them "good" (label "positive") or "bad"
    ("negative")."""
    sentences, labels = [], []
    for _ in range(n):
        words = [rng.choice(["a", "film", "it", "was", "plot"]) for _ in range(rng.randint(3, 7))]
        label = rng.choice(["positive", "negative"])
        words.insert(rng.randrange(len(words) + 1), "good" if label == "positive" else "bad")
        sentences.append(words)
        labels.append(label)
    return Split(sentences, labels, "synthetic")
