"""What a finished run says about the layers: its learned scalar mixes and its scores per layer.

One reader for every file that holds them, so a chart needs no knowledge of their formats:

- a saved task model (``train-task --save-model DIR``): each mix's weights, read from its
  ``model.safetensors`` and softmax-normalised, and gamma;
- a ``train-task --output`` report: the same, as training recorded them;
- a ``probe pos --output`` report: the accuracy of each layer's probe and of the mix probe, and
  the mix probe's weights and gamma;
- a ``probe wsd --output`` report: each layer's F1 (and the first-sense baseline);
- an experiment's ``results.json``: every run's mixes, named by its run.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

# What contextvec.tasks.saved and the experiments write, named here rather than imported: they
# need the tasks extra, and the server reads reports with the server extra alone.
FORMAT, TASK_FILE, WEIGHTS = "contextvec-task-model", "task.json", "model.safetensors"
MIX_NAMES = ("input", "output")
"""Names of a task model's mixes, in order (placement ``input+output`` has both)."""

MIX_PARAMETER = re.compile(r"(?:^|\.)mixes\.(\d+)\.(weights|gamma)$")
"""A scalar mix's parameters in a saved task model's weights."""


@dataclass(frozen=True)
class Mix:
    """One learned scalar mix: ``weights`` softmax-normalised (they sum to 1), one per layer."""

    name: str
    weights: list[float]
    gamma: float


@dataclass(frozen=True)
class LayerScore:
    """A score of one layer (``layer`` None: of the mix, or of another probe over all layers)."""

    name: str
    layer: int | None
    dev: float
    test: float | None = None


@dataclass(frozen=True)
class LayerReport:
    """What a run found about the layers (see the module docstring for the kinds).

    Attributes:
        kind: ``task-model``, ``task-report``, ``probe``, ``probe-wsd`` or ``experiment``.
        title: what it is (the task, the probe's tags, the experiment).
        metric: the name of ``scores``' values (``accuracy``, ``f1``, ...), None if no scores.
        mixes: the learned mixes.
        scores: the scores per layer.
        baselines: named reference scores (the majority class, the first sense).
    """

    kind: str
    title: str
    metric: str | None = None
    mixes: list[Mix] = field(default_factory=list)
    scores: list[LayerScore] = field(default_factory=list)
    baselines: dict[str, float] = field(default_factory=dict)


def softmax(weights: np.ndarray) -> list[float]:
    """The normalised weights a :class:`~contextvec.embedder.ScalarMix` applies to its raw ones."""
    w = np.asarray(weights, dtype=np.float64).ravel()
    e = np.exp(w - w.max())
    return [float(x) for x in e / e.sum()]


def read_layer_report(path: str | os.PathLike) -> LayerReport:
    """The layer report of a saved task model's directory or a JSON report file.

    Raises:
        FileNotFoundError: no such file or directory, or a task model's file missing.
        ValueError: a file that is not one of the kinds (its format is named in the message).
    """
    path = Path(path)
    if path.is_dir():
        return _task_model(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file or directory")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    return layer_report(document, path.name)


def layer_report(document: object, title: str = "") -> LayerReport:
    """The layer report of a JSON document already read (a report file's content).

    Raises:
        ValueError: a document of none of the kinds, or one missing what its kind needs.
    """
    if not isinstance(document, dict):
        raise ValueError("not a report: expected a JSON object")
    try:
        if "experiment" in document and "runs" in document:
            return _experiment(document)
        if "probes" in document:
            return _probe(document, title)
        if "first_sense" in document and "layers" in document:
            return _wsd(document, title)
        if "mixes" in document and "metric" in document:
            return _task_report(document)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise ValueError(f"a report that does not hold what its kind needs ({type(error).__name__}: "
                         f"{error})") from None
    raise ValueError("not a report contextvec writes: expected a train-task, probe pos or probe wsd "
                     "report, or an experiment's results.json")


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return float(value)


def _optional(value: object) -> float | None:
    return None if value is None else _number(value)


def _mixes(mixes: list, prefix: str = "") -> list[Mix]:
    names = MIX_NAMES if len(mixes) <= len(MIX_NAMES) else [str(i) for i in range(len(mixes))]
    return [Mix(f"{prefix}{name}", [_number(w) for w in mix["weights"]], _number(mix["gamma"]))
            for name, mix in zip(names, mixes, strict=False)]


def _task_report(document: dict) -> LayerReport:
    metric = str(document["metric"])
    return LayerReport("task-report", f"{document.get('task', 'task')} ({metric})", metric,
                       _mixes(document["mixes"]))


def _probe(document: dict, title: str) -> LayerReport:
    scores, mixes = [], []
    for probe in document["probes"]:
        scores.append(LayerScore(str(probe["name"]), probe["layer"], _number(probe["dev_accuracy"]),
                                 _optional(probe.get("test_accuracy"))))
        if probe.get("mix_weights") is not None:
            mixes.append(Mix(str(probe["name"]), [_number(w) for w in probe["mix_weights"]],
                             _number(probe["mix_gamma"])))
    baselines = {f"majority ({split})": _number(v) for split, v in document["majority_baseline"].items()}
    what = " ".join(str(document[k]) for k in ("task", "tag") if document.get(k)) or title
    return LayerReport("probe", f"linear probes: {what}" if what else "linear probes", "accuracy", mixes,
                       scores, baselines)


def _wsd(document: dict, title: str) -> LayerReport:
    scores = [LayerScore(f"layer {row['layer']}", int(row["layer"]), _number(row["f1"]))
              for row in document["layers"]]
    return LayerReport("probe-wsd", f"word sense disambiguation: {title}" if title else
                       "word sense disambiguation", "f1", [], scores,
                       {"first sense": _number(document["first_sense"]["f1"])})


def _experiment(document: dict) -> LayerReport:
    mixes = []
    for run in document["runs"]:
        mixes += _mixes(run["report"]["mixes"], f"{run['run']}: ")
    return LayerReport("experiment", f"experiment {document['experiment']}", None, mixes)


def _task_model(directory: Path) -> LayerReport:
    if not (directory / TASK_FILE).is_file():
        raise FileNotFoundError(f"{directory} is not a saved task model: {TASK_FILE} is missing")
    try:
        config = json.loads((directory / TASK_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{directory / TASK_FILE}: not valid JSON ({error})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ValueError(f"{directory / TASK_FILE}: not a contextvec task model (format {FORMAT!r})")
    if not (directory / WEIGHTS).is_file():
        raise FileNotFoundError(f"{directory} is not a saved task model: {WEIGHTS} is missing")
    try:
        tensors = load_file(str(directory / WEIGHTS))
    except (SafetensorError, OSError) as error:
        raise ValueError(f"{directory / WEIGHTS}: not a safetensors file ({error})") from None
    found: dict[int, dict[str, np.ndarray]] = {}
    for name, tensor in tensors.items():
        if (m := MIX_PARAMETER.search(name)) is not None:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = tensor
    raw = [{"weights": softmax(p["weights"]), "gamma": float(np.asarray(p["gamma"]).ravel()[0])}
           for _, p in sorted(found.items()) if {"weights", "gamma"} <= set(p)]
    reported = config.get("reported") or {}
    metric = reported.get("metric")
    title = f"{config.get('task', 'task')} model {directory.name}"
    scores = ([LayerScore("mix", None, _number(reported["dev"]), _optional(reported.get("test")))]
              if metric and reported.get("dev") is not None else [])
    return LayerReport("task-model", title, metric, _mixes(raw), scores)
