"""Dev scores over seeds as the experiment tables print them (:mod:`.glue_table`, :mod:`.rep_table`):
the mean, a ``mean ± std (n=...)`` cell, and the difference of two configurations' means that the
papers' reported directions are measured by."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def cell(values: Sequence[float] | None, note: str = "") -> str:
    """``mean ± sample std (n=runs{note})``, ×100; one run has no std (``mean (n=1)``); empty where
    there is no run."""
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0] * 100:.1f} (n=1{note})"
    return f"{mean(values) * 100:.1f} ± {statistics.stdev(values) * 100:.1f} (n={len(values)}{note})"


def mean_difference(groups: Mapping[tuple[str, str], Sequence[float]], task: str, better: str,
                    worse: str) -> float | None:
    """The mean score of ``better`` minus that of ``worse`` on ``task`` in points (×100), from
    ``groups`` (scores per (task, configuration)); None where either has no run."""
    a, b = groups.get((task, better)), groups.get((task, worse))
    if not a or not b:
        return None
    return (mean(a) - mean(b)) * 100
