"""Finished runs and their summaries per configuration (mean and sample std over seeds)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from contextvec.experiments.plans import RunSpec
from contextvec.explore.layer_report import MIX_NAMES


@dataclass
class FinishedRun:
    """A run of the current plan with its stored record (``report``: a TaskReport dict)."""

    spec: RunSpec
    record: dict

    @property
    def report(self) -> dict:
        return self.record["report"]

    def score(self, split: str) -> float | None:
        scores = self.report[split]
        return None if scores is None else float(scores[self.report["metric"]])

    def mix_weights(self) -> dict[str, list[float]]:
        """Softmax-normalised weights per mix name (``input``, ``output``)."""
        return {name: mix["weights"] for name, mix in zip(MIX_NAMES, self.report["mixes"], strict=False)}


@dataclass
class ConfigSummary:
    """The runs of one configuration at one training fraction, over their seeds."""

    config: str
    fraction: float
    contextual: bool
    learned_mix: bool
    seeds: list[int]
    dev: tuple[float, float]
    test: tuple[float, float] | None
    weights: dict[str, list[float]]
    """Mean softmax weights per mix over the seeds (learned mixes only)."""


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(runs: Sequence[FinishedRun]) -> list[ConfigSummary]:
    """Mean and sample std per (configuration, fraction), in plan order."""
    groups: dict[tuple[str, float], list[FinishedRun]] = {}
    for run in runs:
        groups.setdefault((run.spec.config, run.spec.train_settings.train_fraction), []).append(run)
    out = []
    for (config, fraction), group in groups.items():
        first = group[0].spec
        tests = [run.score("test") for run in group]
        weights = {}
        if first.learned_mix:
            per_run = [run.mix_weights() for run in group]
            weights = {name: [statistics.fmean(w) for w in zip(*(r[name] for r in per_run), strict=True)]
                       for name in per_run[0]}
        out.append(ConfigSummary(
            config, fraction, first.contextual, first.learned_mix,
            [run.spec.train_settings.seed for run in group], _mean_std([run.score("dev") for run in group]),
            None if None in tests else _mean_std(tests), weights,
        ))
    return out
