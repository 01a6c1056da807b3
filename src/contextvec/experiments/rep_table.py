"""The outputs of ``experiment representations``: ``results.csv`` (one row per run),
``results.md`` (the settings, mean ± std over seeds per task and representation, the CoVe paper's
reported directions beside the measured differences, BCN-with-best vs pool) and
``representations.png``; all written atomically, always over every run of the table. Every line
of ``results.md`` is computed from the runs and the settings they were given."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from contextvec.experiments.entry import RunContext, Tables
from contextvec.experiments.plans import RunSpec
from contextvec.experiments.representations import (
    EXPERIMENT,
    POOL_PREFIX,
    REPRESENTATIONS,
    RepresentationsPlan,
    pool_plan,
    representation_of,
    representations_plan,
)
from contextvec.experiments.seed_scores import cell, mean, mean_difference
from contextvec.experiments.store import ResultStore
from contextvec.experiments.summary import FinishedRun
from contextvec.experiments.tables import markdown_table, table_row, write_csv, write_text
from contextvec.extras import needs
from contextvec.io.atomic import atomic_path
from contextvec.tasks.spec import TASKS

with needs("tasks"):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

RESULTS_CSV, RESULTS_MD, PLOT_PNG = "results.csv", "results.md", "representations.png"
PAPER_DIRECTIONS = (("words+cove", "words"), ("words+cove+char", "words+char"))
"""What the CoVe paper reports (McCann et al. 2017, Table 2): on every one of its tasks, each
first representation gives the BCN a higher accuracy than the second."""


def _groups(records: Sequence[dict]) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    for r in records:
        out.setdefault((r["task"], r["config"]), []).append(float(r["dev"]))
    return out


def _configs(records: Sequence[dict]) -> list[str]:
    present = {r["config"] for r in records}
    bcn = [n for n in REPRESENTATIONS if n in present]
    return bcn + sorted(c for c in present if c.startswith(POOL_PREFIX))


def _tasks(records: Sequence[dict]) -> list[str]:
    present = {r["task"] for r in records}
    return [t for t in TASKS if t in present]


CSV_FIELDS = ("task", "config", "representation", "classifier", "seed", "train_sentences", "dev_accuracy",
              "best_epoch", "epochs_run", "runtime_s")


def csv_rows(records: Sequence[dict]) -> list[dict]:
    """``results.csv``'s rows: one per run."""
    return [{"task": r["task"], "config": r["config"], "representation": r["representation"],
             "classifier": r["classifier"], "seed": r["seed"],
             "train_sentences": r["report"]["splits"]["train"]["sentences"],
             "dev_accuracy": f"{r['dev']:.4f}",
             "best_epoch": r["report"]["best_epoch"], "epochs_run": len(r["report"]["curve"]),
             "runtime_s": r["runtime_s"]} for r in records]


def _settings_lines(records: Sequence[dict], header: dict) -> list[str]:
    first = records[0]["report"]
    m, t = first["model_settings"], first["train_settings"]
    sizes = {}
    for r in records:
        s = r["report"]["splits"]
        sizes[r["task"]] = f"{r['task']} train {s['train']['sentences']}, dev {s['dev']['sentences']}"
    return [
        f"Word vectors (fixed): {header.get('word_vectors')}; CoVe: {header.get('cove')}; "
        f"ELMo: {header.get('elmo')}; BERT: {header.get('bert')} (sum of the last 4 layers).",
        f"BCN hidden {m['hidden']}, dropout {m['dropout']}, char n-grams {header.get('char_ngrams')}-d; "
        f"Adam lr {t['lr']}, batch {t['batch_size']}, at most {t['epochs']} epochs, "
        f"patience {t['patience']}; device {t.get('device', 'cpu')}; "
        f"--max-train {header.get('max_train') or 'all'}"
        + (" (a seeded subsample of train)." if header.get("max_train") else " (every training sentence)."),
        "Sentences: " + "; ".join(sizes[task] for task in _tasks(records)) + ".",
    ]


def results_markdown(records: Sequence[dict], header: dict) -> str:
    """``results.md`` (see the module docstring)."""
    groups, tasks = _groups(records), _tasks(records)
    lines = ["# Which representation helps the BCN (the comparison of the CoVe paper's Table 2)", "",
             "Dev accuracy (%), mean ± sample std over seeds (n = seeds), every run through CoVe's BCN "
             "on the same fixed word vectors; `pool:` rows are the simpler pooling classifier on the "
             "representation that is best for the BCN on that task.", "",
             *_settings_lines(records, header), "",
             *markdown_table(["representation", *tasks], ["---", *(["---:"] * len(tasks))],
                             [[c, *(cell(groups.get((t, c))) for t in tasks)] for c in _configs(records)])]
    lines += _direction_lines(groups, tasks)
    lines += _pool_lines(records, groups, tasks)
    return "\n".join(lines)


def _direction_lines(groups: dict, tasks: Sequence[str]) -> list[str]:
    """The paper's reported directions beside the differences of these runs' means."""
    lines = ["## The CoVe paper's reported directions and these runs", "",
             "McCann et al. (2017), Table 2, report each comparison below > 0 on every task they ran. "
             "Here: the difference of the mean dev accuracies (points).", "",
             *markdown_table(["comparison", "the paper reports", *tasks], ["---"] * (len(tasks) + 2), [])]
    summary = []
    for better, worse in PAPER_DIRECTIONS:
        cells, agree, measured = [], [], 0
        for t in tasks:
            diff = mean_difference(groups, t, better, worse)
            if diff is None:
                cells.append("not run")
                continue
            measured += 1
            if diff > 0:
                agree.append(t)
            cells.append(f"{diff:+.1f} ({'same direction' if diff > 0 else 'opposite direction'})")
        lines.append(table_row([f"{better} − {worse}", f"{better} > {worse}", *cells]))
        if measured:
            summary.append(f"{better} > {worse} on {len(agree)} of the {measured} task(s) with both "
                           f"({', '.join(agree) or 'none'})")
    return lines + ([""] + ["Here: " + "; ".join(summary) + "."] if summary else []) + [""]


def _pool_lines(records: Sequence[dict], groups: dict, tasks: Sequence[str]) -> list[str]:
    pools = {r["task"]: r["config"] for r in records if r["config"].startswith(POOL_PREFIX)}
    if not pools:
        return []
    lines = ["## BCN with its best representation vs the pooling classifier", "",
             *markdown_table(["task", "best for the BCN", "BCN", "pool", "BCN ≥ pool"], ["---"] * 5, [])]
    for t in tasks:
        bcn = {c: v for (task, c), v in groups.items() if task == t and not c.startswith(POOL_PREFIX)}
        if t not in pools or not bcn:
            continue
        best = max(bcn, key=lambda c: mean(bcn[c]))
        pool = groups[(t, pools[t])]
        on = pools[t].removeprefix(POOL_PREFIX)
        lines.append(table_row([t, best, cell(bcn[best]), f"{cell(pool)} on {on}",
                           "yes" if mean(bcn[best]) >= mean(pool) else "no"]))
    return lines + [""]


def plot(records: Sequence[dict], path: Path) -> None:
    """Bars of mean dev accuracy per task (groups) and representation, sample std as error bars."""
    groups, tasks, configs = _groups(records), _tasks(records), _configs(records)
    figure = Figure(figsize=(max(7.0, 1.1 * len(tasks) * len(configs) / 2 + 2), 4.8))
    ax = figure.add_subplot()
    width = 0.8 / len(configs)
    lows, highs = [], []
    for k, config in enumerate(configs):
        xs, means, stds = [], [], []
        for j, task in enumerate(tasks):
            values = groups.get((task, config))
            if values:
                xs.append(j + (k - (len(configs) - 1) / 2) * width)
                means.append(mean(values) * 100)
                stds.append(statistics.stdev(values) * 100 if len(values) > 1 else 0.0)
        bars = ax.bar(xs, means, width, yerr=stds, capsize=2, label=config,
                      hatch="//" if config.startswith(POOL_PREFIX) else None)
        ax.bar_label(bars, fmt="%.1f", fontsize=6)
        lows += [m - s for m, s in zip(means, stds, strict=True)]
        highs += [m + s for m, s in zip(means, stds, strict=True)]
    # Representations differ by a few points: zoom the axis onto the scores.
    margin = max(0.15 * (max(highs) - min(lows)), 0.5)
    ax.set_ylim(max(0.0, min(lows) - 2 * margin), min(100.0, max(highs) + 2 * margin))
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("dev accuracy (%)")
    ax.set_title("BCN dev accuracy by representation (mean ± std over seeds)")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    FigureCanvasAgg(figure)  # an explicit Agg canvas: no global pyplot state, no display
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)


def write_outputs(output_dir: Path, records: Sequence[dict], header: dict) -> tuple[list[Path], str]:
    """Write results.csv, results.md and the plot over ``records``; returns (files, markdown)."""
    if not records:
        raise ValueError(f"no finished run in {output_dir}: nothing to tabulate")
    order = {t: i for i, t in enumerate(TASKS)}
    configs = {c: i for i, c in enumerate(_configs(records))}
    records = sorted(records, key=lambda r: (order[r["task"]], configs[r["config"]], r["seed"]))
    files = [output_dir / RESULTS_CSV, output_dir / RESULTS_MD, output_dir / PLOT_PNG]
    write_csv(files[0], CSV_FIELDS, csv_rows(records))
    markdown = results_markdown(records, header)
    write_text(files[1], markdown)
    plot(records, files[2])
    return files, markdown


def table_records(store: ResultStore, table_id: str) -> list[dict]:
    """The stored runs of the table ``table_id``, as the table and :func:`best_representation`
    read them; of two runs of one (task, config, seed) (e.g. on other data), the one finished last."""
    latest: dict[tuple, dict] = {}
    for record in sorted(store.records, key=lambda r: r.get("finished", "")):
        if record.get("table") == table_id:
            latest[(record["task"], record["config"], record["seed"])] = record
    return list(latest.values())


def best_representation(records: Sequence[dict], task: str) -> str | None:
    """The BCN representation of ``task`` with the best mean dev score among ``records``."""
    scores: dict[str, list[float]] = {}
    for r in records:
        if r["task"] == task and not r["config"].startswith(POOL_PREFIX):
            scores.setdefault(r["config"], []).append(r["dev"])
    return max(scores, key=lambda name: statistics.fmean(scores[name])) if scores else None


@dataclass(frozen=True)
class RepresentationsTable:
    """CoVe's Table 2 as an entry of the framework: one task's runs (``settings``) added to the
    table over every task stored in the output directory under the same ``table_id``."""

    settings: RepresentationsPlan
    name: str = EXPERIMENT

    def plan(self) -> list[RunSpec]:
        s = self.settings
        return representations_plan(s.names, s.model, s.train, s.seeds, s.char_dim)

    def record(self, run: RunContext) -> dict:
        spec, report = run.spec, run.report
        return {"run": f"{run.task}, {spec.name}", "config": spec.config, "task": run.task,
                "representation": representation_of(spec), "classifier": spec.model_settings.classifier,
                "seed": spec.train_settings.seed, "dev": report["dev"][report["metric"]],
                "table": self.settings.table_id, "key": run.key, "runtime_s": run.runtime_s, "report": report,
                "finished": datetime.now(UTC).isoformat()}

    def follow_up(self, store: ResultStore, task: str) -> list[RunSpec]:
        s = self.settings
        best = best_representation(table_records(store, s.table_id), task) if s.pool_baseline else None
        return [] if best is None else pool_plan(best, s.model, s.train, s.seeds, s.char_dim)

    def write(self, output_dir: Path, store: ResultStore, runs: list[FinishedRun], header: dict) -> Tables:
        files, markdown = write_outputs(output_dir, table_records(store, self.settings.table_id), header)
        return Tables(files, markdown, [markdown])
