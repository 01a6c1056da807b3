"""CoVe's Table 2 (McCann et al. 2017): which representation helps the BCN (``contextvec
experiment representations``).

Every run trains CoVe's biattentive classification network
(:class:`~contextvec.tasks.models.BCNClassifier`) with the same hyper-parameters on the same fixed
word vectors; only what is added to them differs (:data:`REPRESENTATIONS`):

- ``words``: the fixed word vectors alone (CoVe's GloVe; here the word vectors the CoVe model
  was trained with, or ``--word-vectors``);
- ``words+char``: + character n-gram embeddings trained with the task (Hashimoto et al. 2016);
- ``words+cove``: + CoVe, the MT-LSTM's top biLSTM layer. CoVe's encoder layers are
  ``[GloVe(w); biLSTM_k(w)]`` (docs/cove.md); :class:`~contextvec.encoders.cove.CoveContext`
  drops the word-vector half, so the BCN reads ``[GloVe(w); CoVe(w)]`` with the word vectors once,
  as the paper's ``w~``;
- ``words+cove+char``;
- ``words+elmo``: + ELMo, a learned scalar mix of all its layers at the BCN input;
- ``words+bert``: + BERT (frozen), the sum of its last four layers.

``pool_plan`` adds the simpler pooling classifier (``--classifier pool``) on the representation
that is best for the BCN, so the table compares BCN-with-best and pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextvec.experiments.plans import RunSpec
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.train import TrainSettings

EXPERIMENT = "representations"
POOL_PREFIX = "pool: "
"""Config name prefix of the pooling-classifier baseline runs (``pool: words+elmo``)."""


@dataclass(frozen=True)
class Representation:
    """What a run adds to the fixed word vectors: an encoder (``cove``, ``elmo``, ``bert`` or
    None) read as ``layers``, and/or character n-grams."""

    name: str
    encoder: str | None
    layers: str = "mix"
    char_ngrams: bool = False


REPRESENTATIONS: dict[str, Representation] = {r.name: r for r in (
    Representation("words", None),
    Representation("words+char", None, char_ngrams=True),
    Representation("words+cove", "cove", "last"),
    Representation("words+cove+char", "cove", "last", True),
    Representation("words+elmo", "elmo"),
    Representation("words+bert", "bert", "sum_last_4"),
)}


def check_representations(names: Sequence[str]) -> list[str]:
    """``names`` in table order, each known and given once (a one-line ValueError otherwise)."""
    unknown = [n for n in names if n not in REPRESENTATIONS]
    if unknown:
        raise ValueError(f"unknown representation {unknown[0]!r}; choose from {', '.join(REPRESENTATIONS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"--representations names one twice: {' '.join(names)}")
    return [n for n in REPRESENTATIONS if n in names]


def bcn_settings(representation: Representation, base: ModelSettings, char_dim: int) -> ModelSettings:
    """The BCN's settings for ``representation`` (``base``: the shared hyper-parameters)."""
    return replace(base, classifier="bcn", placement="input" if representation.encoder else "none",
                   layers=representation.layers, char_ngram_dim=char_dim if representation.char_ngrams else 0)


@dataclass(frozen=True)
class RepresentationsPlan:
    """The runs of one task's part of the table: ``names`` x ``seeds`` BCN runs on the shared
    hyper-parameters (``model``, ``train``); ``char_dim``: the n-gram embeddings' size of the
    ``+char`` rows; ``pool_baseline``: then the pooling classifier on the best representation;
    ``table_id``: the shared settings' hash (runs of another stay in ``results.json``, not in
    the table)."""

    names: tuple[str, ...]
    seeds: tuple[int, ...]
    model: ModelSettings
    train: TrainSettings
    table_id: str
    char_dim: int = 100
    pool_baseline: bool = False


def representations_plan(names: Sequence[str], base: ModelSettings, train: TrainSettings,
                         seeds: Sequence[int], char_dim: int = 100) -> list[RunSpec]:
    """One BCN run per (representation, seed), representations in table order."""
    if not seeds:
        raise ValueError("give at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds names one twice: {' '.join(map(str, seeds))}")
    out = []
    for name in check_representations(names):
        rep = REPRESENTATIONS[name]
        model = bcn_settings(rep, base, char_dim)
        out += [RunSpec(name, model, replace(train, seed=seed), rep.encoder) for seed in seeds]
    return out


def pool_plan(best: str, base: ModelSettings, train: TrainSettings, seeds: Sequence[int],
              char_dim: int = 100) -> list[RunSpec]:
    """The pooling classifier on the representation ``best`` (same inputs, same training)."""
    rep = REPRESENTATIONS[best]
    model = replace(bcn_settings(rep, base, char_dim), classifier="pool")
    return [RunSpec(POOL_PREFIX + best, model, replace(train, seed=seed), rep.encoder) for seed in seeds]


def representation_of(spec: RunSpec) -> str:
    """The representation a run of the table reads (a pooling run's too)."""
    return spec.config.removeprefix(POOL_PREFIX)
