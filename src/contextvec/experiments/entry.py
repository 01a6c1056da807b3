"""What makes an experiment an entry of the framework (plan -> runner -> store -> table): its plan,
how a finished run is stored, which runs follow from the stored ones, and its tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from contextvec.experiments.plans import RunSpec
from contextvec.experiments.store import ResultStore
from contextvec.experiments.summary import FinishedRun


@dataclass
class Tables:
    """What an entry wrote: the files, ``results.md``'s text, the lines a command prints, and
    (``extra``) fields for ``results.json`` (written with the runtime, after the tables)."""

    files: list[Path]
    markdown: str
    lines: list[str]
    extra: dict | None = None
    metric: str = "accuracy"


@dataclass(frozen=True)
class RunContext:
    """A finished run as the entry stores it."""

    task: str
    spec: RunSpec
    key: dict
    runtime_s: float
    report: dict = field(repr=False)


class Experiment(Protocol):
    """An experiment of the framework (:func:`~contextvec.experiments.runner.run_experiment`)."""

    name: str

    def plan(self) -> list[RunSpec]:
        """The runs, in table order."""

    def record(self, run: RunContext) -> dict:
        """A finished run as ``results.json`` stores it (``key``, ``runtime_s``, ``report`` included)."""

    def follow_up(self, store: ResultStore, task: str) -> list[RunSpec]:
        """Runs that depend on the stored ones (after the plan's have finished); none by default."""

    def write(self, output_dir: Path, store: ResultStore, runs: list[FinishedRun], header: dict) -> Tables:
        """Write the tables and figures; ``runs``: the plan's runs with their stored records."""
