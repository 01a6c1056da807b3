"""Running an experiment's plan: one feature pass, the unfinished runs, then tables and figures."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.experiments.plans import EXPERIMENTS, RunSpec
from contextvec.experiments.store import RESULTS_JSON, ResultStore, run_key, split_identity
from contextvec.experiments.summary import ConfigSummary, FinishedRun, summarise
from contextvec.experiments.tables import results_markdown, write_csv, write_text
from contextvec.tasks.split import Split
from contextvec.tasks.train import attach_features, train_task

RESULTS_CSV, RESULTS_MD = "results.csv", "results.md"
WEIGHTS_PNG = "layer_weights.png"


@dataclass
class ExperimentResult:
    """What :func:`run_experiment` did: the runs (plan order), summaries and files written."""

    experiment: str
    metric: str
    runs: list[FinishedRun]
    summary: list[ConfigSummary]
    files: list[Path]
    reused: int
    runtime_s: dict[str, float]


def _features_for(split: Split | None, spec: RunSpec) -> Split | None:
    """The split as ``spec`` consumes it: all layers, the top layer, or no features."""
    if split is None:
        return None
    if not spec.contextual:
        features = None
    elif spec.model_settings.layers == "last":
        features = [f[-1:] for f in split.features]  # views, no copy
    elif spec.model_settings.layers == "mix":
        features = split.features
    else:
        raise ValueError(f"experiments use layers mix or last, not {spec.model_settings.layers!r}")
    return Split(split.sentences, split.labels, split.source, features)


def run_experiment(
    experiment: str,
    plan: Sequence[RunSpec],
    task: str,
    train: Split,
    dev: Split,
    test: Split | None,
    output_dir: str | Path,
    encoder: Encoder | None = None,
    header: dict | None = None,
    cache_dir: str | Path | None = None,
    feature_dtype: str = "float32",
    progress: bool = True,
    log: Callable[[str], None] = tqdm.write,
    overwrite: bool = False,
) -> ExperimentResult:
    """Run the plan's unfinished runs, then write the tables and figures (see
    :mod:`contextvec.experiments`).

    ``header``: extra JSON fields for ``results.json`` (e.g. the command's settings);
    ``overwrite``: ignore the runs stored in ``output_dir`` (they are replaced), run everything.
    """
    from contextvec.experiments.plots import plot_layer_weights, plot_scores  # matplotlib only here

    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; choose from {', '.join(EXPERIMENTS)}")
    if any(spec.contextual for spec in plan) and encoder is None:
        raise ValueError("runs with contextual vectors need an encoder")
    started = time.perf_counter()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    data = {name: None if s is None else split_identity(s) for name, s in
            (("train", train), ("dev", dev), ("test", test))}
    model_id = model_identity(encoder) if encoder is not None else None
    keys = [run_key(spec, task, data, model_id) for spec in plan]
    store = ResultStore(output_dir, experiment, {"task": task, **(header or {})}, fresh=overwrite)
    pending = [spec for spec, key in zip(plan, keys, strict=True) if store.find(key) is None]
    feature_s = 0.0
    if any(spec.contextual for spec in pending):
        feature_s = attach_features(encoder, [s for s in (train, dev, test) if s is not None],
                                    cache_dir=cache_dir, dtype=feature_dtype, progress=progress)
    run_s = 0.0
    bar = tqdm(total=len(plan), desc=experiment, unit="run", disable=not progress)
    for spec, key in zip(plan, keys, strict=True):
        if store.find(key) is not None:
            bar.update()
            continue
        bar.set_postfix_str(spec.name)
        run_started = time.perf_counter()
        report, _ = train_task(task, _features_for(train, spec), _features_for(dev, spec),
                               _features_for(test, spec), spec.model_settings, spec.train_settings,
                               encoder if spec.contextual else None)
        seconds = round(time.perf_counter() - run_started, 3)
        run_s += seconds
        store.add({"run": spec.name, "config": spec.config, "key": key, "runtime_s": seconds,
                   "report": report.to_dict()})
        store.save(keys)  # after every run: an interruption loses at most the current one
        log(f"{spec.name}: dev {report.metric} {report.dev[report.metric]:.4f}, {seconds:.1f} s")
        bar.update()
    bar.close()

    runs = [FinishedRun(spec, store.find(key)) for spec, key in zip(plan, keys, strict=True)]
    metric = runs[0].report["metric"]
    summary = summarise(runs)
    files = [output_dir / name for name in (RESULTS_JSON, RESULTS_CSV, RESULTS_MD,
                                            f"{experiment}.png", WEIGHTS_PNG)]
    write_csv(files[1], runs, metric)
    write_text(files[2], results_markdown(experiment, runs, summary, metric))
    plot_scores(experiment, summary, metric, files[3])
    plot_layer_weights(summary, files[4])
    runtime = {"features": round(feature_s, 3), "runs": round(run_s, 3),
               "all_runs": round(sum(run.record["runtime_s"] for run in runs), 3),
               "total": round(time.perf_counter() - started, 3)}
    store.save(keys, {"metric": metric, "summary": [asdict(s) for s in summary], "runtime_s": runtime})
    return ExperimentResult(experiment, metric, runs, summary, files, len(plan) - len(pending), runtime)
