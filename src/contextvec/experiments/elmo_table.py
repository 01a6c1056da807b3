"""The ELMo paper's analyses as entries of the experiment framework (``layers``, ``placement``,
``sample-efficiency``): what a finished run is stored as, and ``results.csv``, ``results.md``,
``<experiment>.png`` and ``layer_weights.png`` over the plan's runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from contextvec.experiments.entry import RunContext, Tables
from contextvec.experiments.plans import EXPERIMENTS, RunSpec, percent
from contextvec.experiments.store import RESULTS_JSON, ResultStore
from contextvec.experiments.summary import ConfigSummary, FinishedRun, summarise
from contextvec.experiments.tables import markdown_table, write_csv, write_text

RESULTS_CSV, RESULTS_MD = "results.csv", "results.md"
WEIGHTS_PNG = "layer_weights.png"


def _format_weights(weights: dict[str, list[float]]) -> str:
    return "; ".join(f"{name} {' '.join(f'{w:.3f}' for w in ws)}" for name, ws in weights.items())


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


CSV_FIELDS = ("run", "config", "setting", "contextual", "placement", "layers", "lambda", "train_fraction",
              "seed", "train_sentences", "dev_{metric}", "test_{metric}", "best_epoch", "epochs_run",
              "mix_weights", "mix_gammas", "runtime_s")


def csv_rows(runs: Sequence[FinishedRun], metric: str) -> list[dict]:
    """``results.csv``'s rows: one per run."""
    rows = []
    for run in runs:
        m, t, r = run.spec.model_settings, run.spec.train_settings, run.report
        rows.append({
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
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    aligns = ["---:" if h.startswith(("dev", "test", "best", "runtime", "seeds", "train")) else "---"
              for h in header]
    return markdown_table(header, aligns, rows)


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


def summary_lines(summary: Sequence[ConfigSummary], metric: str) -> list[str]:
    """One line per configuration and fraction: the mean dev score (± std over several seeds)."""
    lines = []
    for s in summary:
        std = f" ± {s.dev[1]:.4f}" if len(s.seeds) > 1 else ""
        lines.append(f"{s.config}, train {percent(s.fraction)}: dev {metric} {s.dev[0]:.4f}{std}")
    return lines


@dataclass(frozen=True)
class ElmoAnalysis:
    """One of the ELMo paper's analyses on one task (``name``: ``layers``, ``placement`` or
    ``sample-efficiency``) as an entry of the framework; ``runs``: its plan (:mod:`.plans`)."""

    name: str
    runs: tuple[RunSpec, ...]

    def __post_init__(self) -> None:
        if self.name not in EXPERIMENTS:
            raise ValueError(f"unknown experiment {self.name!r}; choose from {', '.join(EXPERIMENTS)}")

    def plan(self) -> list[RunSpec]:
        return list(self.runs)

    def record(self, run: RunContext) -> dict:
        return {"run": run.spec.name, "config": run.spec.config, "key": run.key, "runtime_s": run.runtime_s,
                "report": run.report}

    def follow_up(self, store: ResultStore, task: str) -> list[RunSpec]:
        return []

    def write(self, output_dir: Path, store: ResultStore, runs: list[FinishedRun], header: dict) -> Tables:
        from contextvec.experiments.plots import plot_layer_weights, plot_scores  # matplotlib only here

        metric = runs[0].report["metric"]
        summary = summarise(runs)
        files = [output_dir / name for name in (RESULTS_JSON, RESULTS_CSV, RESULTS_MD,
                                                f"{self.name}.png", WEIGHTS_PNG)]
        write_csv(files[1], [f.format(metric=metric) for f in CSV_FIELDS], csv_rows(runs, metric))
        markdown = results_markdown(self.name, runs, summary, metric)
        write_text(files[2], markdown)
        plot_scores(self.name, summary, metric, files[3])
        plot_layer_weights(summary, files[4])
        return Tables(files, markdown, summary_lines(summary, metric),
                      {"metric": metric, "summary": [asdict(s) for s in summary]}, metric)
