"""Raganato et al.'s WSD scorer (Raganato, Camacho-Collados and Navigli 2017): an answer is correct
if it is one of the instance's gold keys; every gold instance counts in recall."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    """Raganato-style scores of one system on one evaluation set."""

    precision: float
    recall: float
    f1: float
    correct: int
    answered: int
    total: int


def wsd_score(predictions: Mapping[str, str | None], gold: Mapping[str, Collection[str]]) -> Score:
    """Score single-key ``predictions`` (instance id -> key, None = no answer) against ``gold``
    (id -> keys). Every gold instance counts in recall; a prediction for an unknown id is an error."""
    if extra := set(predictions) - set(gold):
        raise ValueError(f"{len(extra)} predictions for instances without gold keys, e.g. {min(extra)}")
    answered = sum(predictions.get(i) is not None for i in gold)
    correct = sum(predictions.get(i) is not None and predictions[i] in keys for i, keys in gold.items())
    total = len(gold)
    precision = correct / answered if answered else 0.0
    recall = correct / total if total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(precision, recall, f1, correct, answered, total)
