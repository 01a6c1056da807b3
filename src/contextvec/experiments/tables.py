"""``results.csv`` and ``results.md`` of an experiment."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from contextvec.experiments.plans import percent
from contextvec.experiments.summary import ConfigSummary, FinishedRun
from contextvec.io.atomic import atomic_path


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _format_weights(weights: dict[str, list[float]]) -> str:
    return "; ".join(f"{name} {' '.join(f'{w:.3f}' for w in ws)}" for name, ws in weights.items())


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def write_csv(path: Path, runs: Sequence[FinishedRun], metric: str) -> None:
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
