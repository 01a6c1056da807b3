"""The ELMo paper's analyses over the task models (``contextvec experiment``).

Each experiment is a list of task-model runs (:class:`RunSpec`) compared on one dataset:

- ``layers`` (ELMo Table 2): the top layer only, versus a learned mix of all layers with
  lambda = 1 (weights pushed towards an equal average) and lambda = 0.001;
- ``placement`` (ELMo Table 3): the mix at the biLSTM input, versus at its input and output;
- ``sample-efficiency`` (ELMo Figure 1): with and without contextual vectors on seeded random
  fractions of the training set.

Every configuration can be repeated with several seeds (mean and sample std reported), and
``layers``/``placement`` can add a baseline without contextual vectors.

**One feature pass.** The encoder's layers are computed once per split
(:func:`~contextvec.tasks.train.attach_features`, all layers, through the disk cache); each run
gets views of them: all layers for a learned mix, the top layer for ``last``, none for the
baseline. :func:`~contextvec.tasks.train.train_task` cuts train to the run's fraction itself.

**Resumable.** ``results.json`` in the output directory is rewritten atomically after every
finished run. Each run is stored with its key: task, hashes of the data splits (tokens and
labels), the encoder's weight hash (:func:`~contextvec.tasks.features.model_identity`; none for
baseline runs) and all model and training settings. A rerun with the same output directory
skips every run whose key is already there, so an interrupted experiment continues where it
stopped; runs stored under other keys (e.g. an earlier ``--epochs``) are kept in
``other_runs`` and reused if their settings come back.

Outputs (:mod:`contextvec.tasks.plots` draws the figures): ``results.csv`` (one row per run),
``results.md`` (the runs, then mean +- std per configuration), ``results.json``,
``<experiment>.png`` and ``layer_weights.png`` (ELMo Figure 2), all written atomically.
"""

from __future__ import annotations

import csv
import hashlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.io.atomic import atomic_path
from contextvec.tasks.features import model_identity
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.train import Split, TrainSettings, attach_features, train_task

EXPERIMENTS = ("layers", "placement", "sample-efficiency")
DEFAULT_FRACTIONS = (0.001, 0.01, 0.1, 0.5, 1.0)
MIX_NAMES = ("input", "output")
"""Names of the mixes in ``TaskReport.mixes`` order (placement ``input+output`` has both)."""
BASELINE = "no contextual vectors"
WITH, WITHOUT = "with contextual vectors", "without contextual vectors"
RESULTS_JSON, RESULTS_CSV, RESULTS_MD = "results.json", "results.csv", "results.md"
WEIGHTS_PNG = "layer_weights.png"


@dataclass(frozen=True)
class RunSpec:
    """One task-model training. ``config``: the compared setting; runs of one config differ
    only in seed and training fraction, and are summarised together per fraction."""

    config: str
    model_settings: ModelSettings
    train_settings: TrainSettings

    @property
    def contextual(self) -> bool:
        return self.model_settings.placement != "none"

    @property
    def learned_mix(self) -> bool:
        return self.contextual and self.model_settings.layers == "mix"

    @property
    def name(self) -> str:
        fraction = self.train_settings.train_fraction
        share = f", {percent(fraction)} of train" if fraction < 1 else ""
        return f"{self.config}{share}, seed {self.train_settings.seed}"

    @property
    def setting(self) -> str:
        """The settings that vary between experiments' runs, in words."""
        m, t = self.model_settings, self.train_settings
        parts = [f"placement {m.placement}"]
        if self.contextual:
            parts.append(f"layers {m.layers}")
            if self.learned_mix:
                parts.append(f"lambda {t.l2:g}")
        return ", ".join(parts + [f"train {percent(t.train_fraction)}", f"seed {t.seed}"])


def percent(fraction: float) -> str:
    """0.001 -> '0.1%', 0.5 -> '50%'."""
    return f"{fraction * 100:.3g}%"


def _expand(configs: Sequence[tuple[str, ModelSettings, TrainSettings]], seeds: Sequence[int],
            fractions: Sequence[float] = (1.0,)) -> list[RunSpec]:
    if not seeds:
        raise ValueError("give at least one seed")
    return [RunSpec(config, model, replace(train, seed=seed, train_fraction=fraction))
            for fraction in fractions for config, model, train in configs for seed in seeds]


def _baseline(model: ModelSettings, train: TrainSettings) -> tuple[str, ModelSettings, TrainSettings]:
    return BASELINE, replace(model, placement="none", layers="mix", layer_norm=False), train


def layers_plan(model: ModelSettings, train: TrainSettings, seeds: Sequence[int],
                baseline: bool = False) -> list[RunSpec]:
    """ELMo Table 2: last layer only; all layers with lambda 1 and 0.001 (at ``model.placement``)."""
    if model.placement == "none":
        raise ValueError("the layers experiment needs contextual vectors (placement input or input+output)")
    mix = replace(model, layers="mix")
    configs = [("last layer", replace(model, layers="last"), train),
               ("all layers, lambda=1", mix, replace(train, l2=1.0)),
               ("all layers, lambda=0.001", mix, replace(train, l2=0.001))]
    return _expand(configs + ([_baseline(model, train)] if baseline else []), seeds)


def placement_plan(model: ModelSettings, train: TrainSettings, seeds: Sequence[int],
                   baseline: bool = False) -> list[RunSpec]:
    """ELMo Table 3: the mix at the biLSTM input, or at its input and output."""
    configs = [("input", replace(model, placement="input"), train),
               ("input+output", replace(model, placement="input+output"), train)]
    return _expand(configs + ([_baseline(model, train)] if baseline else []), seeds)


def sample_efficiency_plan(model: ModelSettings, train: TrainSettings, seeds: Sequence[int],
                           fractions: Sequence[float] = DEFAULT_FRACTIONS) -> list[RunSpec]:
    """ELMo Figure 1: with and without contextual vectors at each training fraction."""
    if model.placement == "none":
        raise ValueError("the sample-efficiency experiment needs a placement for the contextual runs")
    bad = [f for f in fractions if not 0 < f <= 1]
    if bad or not fractions:
        raise ValueError(f"fractions must be in (0, 1], got {list(fractions)}")
    _, without, _ = _baseline(model, train)
    return _expand([(WITH, model, train), (WITHOUT, without, train)], seeds, sorted(set(fractions)))


def split_identity(split: Split) -> str:
    """A sha256 hex digest of a split's tokens and labels."""
    text = json.dumps([split.sentences, split.labels], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _normalised(value: object) -> object:
    """JSON round trip, so keys built now compare equal to keys read back (tuples -> lists)."""
    return json.loads(json.dumps(value, sort_keys=True))


def run_key(spec: RunSpec, task: str, data: dict[str, str | None], model_id: str | None) -> dict:
    """What a finished run is found by in ``results.json`` (see the module docstring)."""
    train = asdict(spec.train_settings)
    del train["progress"]  # never changes a result
    return _normalised({
        "task": task, "data": data, "model": model_id if spec.contextual else None,
        "model_settings": asdict(spec.model_settings), "train_settings": train,
    })


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


class ResultStore:
    """``results.json`` of an output directory: finished runs by key, saved atomically."""

    def __init__(self, output_dir: Path, experiment: str, header: dict) -> None:
        self.path = output_dir / RESULTS_JSON
        self.experiment = experiment
        self.header = header
        self.records: list[dict] = []
        if self.path.exists():
            stored = json.loads(self.path.read_text(encoding="utf-8"))
            if stored.get("experiment") != experiment:
                raise ValueError(f"{self.path} holds the {stored.get('experiment')!r} experiment, not "
                                 f"{experiment!r}: give another --output-dir")
            self.records = stored["runs"] + stored.get("other_runs", [])

    def find(self, key: dict) -> dict | None:
        return next((r for r in self.records if r["key"] == key), None)

    def add(self, record: dict) -> None:
        self.records = [r for r in self.records if r["key"] != record["key"]] + [record]

    def save(self, plan_keys: Sequence[dict], extra: dict | None = None) -> None:
        """Write the plan's finished runs in plan order, then every other stored run."""
        in_plan = [r for key in plan_keys if (r := self.find(key)) is not None]
        others = [r for r in self.records if r["key"] not in plan_keys]
        document = {"experiment": self.experiment, **self.header, **(extra or {}),
                    "runs": in_plan, "other_runs": others}
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


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
) -> ExperimentResult:
    """Run the plan's unfinished runs, then write the tables and figures (module docstring).

    ``header``: extra JSON fields for ``results.json`` (e.g. the command's settings).
    """
    from contextvec.tasks.plots import plot_layer_weights, plot_scores  # matplotlib only here

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
    store = ResultStore(output_dir, experiment, {"task": task, **(header or {})})
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
    _write_csv(files[1], runs, metric)
    _write_text(files[2], results_markdown(experiment, runs, summary, metric))
    plot_scores(experiment, summary, metric, files[3])
    plot_layer_weights(summary, files[4])
    runtime = {"features": round(feature_s, 3), "runs": round(run_s, 3),
               "all_runs": round(sum(run.record["runtime_s"] for run in runs), 3),
               "total": round(time.perf_counter() - started, 3)}
    store.save(keys, {"metric": metric, "summary": [asdict(s) for s in summary], "runtime_s": runtime})
    return ExperimentResult(experiment, metric, runs, summary, files, len(plan) - len(pending), runtime)


def _write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _format_weights(weights: dict[str, list[float]]) -> str:
    return "; ".join(f"{name} {' '.join(f'{w:.3f}' for w in ws)}" for name, ws in weights.items())


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _write_csv(path: Path, runs: Sequence[FinishedRun], metric: str) -> None:
    fields = ["run", "config", "setting", "contextual", "placement", "layers", "lambda", "train_fraction",
              "seed", "train_sentences", f"dev_{metric}", f"test_{metric}", "best_epoch", "epochs_run",
              "mix_weights", "mix_gammas", "runtime_s"]
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for run in runs:
            m, t, r = run.spec.model_settings, run.spec.train_settings, run.report
            writer.writerow({
                "run": run.spec.name, "config": run.spec.config, "setting": run.spec.setting,
                "contextual": run.spec.contextual, "placement": m.placement,
                "layers": m.layers if run.spec.contextual else "",
                "lambda": t.l2 if run.spec.learned_mix else "",
                "train_fraction": t.train_fraction, "seed": t.seed,
                "train_sentences": r["splits"]["train"]["sentences"],
                f"dev_{metric}": _score(run.score("dev")), f"test_{metric}": _score(run.score("test")),
                "best_epoch": r["best_epoch"], "epochs_run": len(r["curve"]),
                "mix_weights": _format_weights(run.mix_weights()),
                "mix_gammas": " ".join(f"{mix['gamma']:.3f}" for mix in r["mixes"]),
                "runtime_s": run.record["runtime_s"],
            })


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    aligns = ["---:" if h.startswith(("dev", "test", "best", "runtime", "seeds", "train")) else "---"
              for h in header]
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |",
            *("| " + " | ".join(row) + " |" for row in rows)]


def results_markdown(experiment: str, runs: Sequence[FinishedRun], summary: Sequence[ConfigSummary],
                     metric: str) -> str:
    """``results.md``: one row per run, then mean +- std per configuration and fraction."""
    has_test = any(run.score("test") is not None for run in runs)
    header = ["run", "setting", f"dev {metric}", *([f"test {metric}"] if has_test else []),
              "best epoch", "mix weights", "runtime s"]
    rows = [[run.spec.name, run.spec.setting, _score(run.score("dev")),
             *([_score(run.score("test"))] if has_test else []), str(run.report["best_epoch"]),
             _format_weights(run.mix_weights()), f"{run.record['runtime_s']:.1f}"] for run in runs]

    def pm(value: tuple[float, float] | None, seeds: int) -> str:
        if value is None:
            return ""
        return f"{value[0]:.4f} ± {value[1]:.4f}" if seeds > 1 else f"{value[0]:.4f}"  # no std of one

    summary_header = ["configuration", "train", "seeds", f"dev {metric}",
                      *([f"test {metric}"] if has_test else []), "mean mix weights"]
    summary_rows = [[s.config, percent(s.fraction), str(len(s.seeds)), pm(s.dev, len(s.seeds)),
                     *([pm(s.test, len(s.seeds))] if has_test else []), _format_weights(s.weights)]
                    for s in summary]
    task = runs[0].report["task"]
    lines = [f"# {experiment}: {task}", "", "## Runs", "", *_table(header, rows), "",
             "## Mean ± sample std over seeds", "", *_table(summary_header, summary_rows), ""]
    return "\n".join(lines)
