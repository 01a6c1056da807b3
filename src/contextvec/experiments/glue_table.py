"""The outputs of ``experiment glue``: ``results.csv`` (one row per run) and ``results.md`` (the
settings, the BERT paper's Table 1 rows beside ours, the fine-tuning learning rates, the papers'
reported directions measured on these runs), written atomically over every run of the table in
the output directory. Every figure of ours in ``results.md`` is computed from the stored runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from contextvec.experiments.entry import RunContext, Tables
from contextvec.experiments.glue import (
    ENCODERS,
    EXPERIMENT,
    FINE_TUNE,
    GLUE_TASKS,
    MAJORITY,
    NONE,
    GluePlan,
    glue_plan,
)
from contextvec.experiments.plans import RunKind, RunSpec
from contextvec.experiments.seed_scores import cell, mean, mean_difference
from contextvec.experiments.store import ResultStore
from contextvec.experiments.summary import FinishedRun
from contextvec.experiments.tables import markdown_table, write_csv, write_text

RESULTS_CSV, RESULTS_MD = "results.csv", "results.md"
COLUMNS = ("sst2-glue", "cola", "stsb", "mrpc", "rte", "wnli")
"""The table's tasks in the order of the BERT paper's Table 1 (WNLI, outside it, last)."""
HEADINGS = {"sst2-glue": "SST-2 (acc)", "cola": "CoLA (MCC)", "stsb": "STS-B (Spearman)", "mrpc": "MRPC (F1)",
            "rte": "RTE (acc)", "wnli": "WNLI (acc)"}
PAPER_ROWS = {
    "BiLSTM+ELMo+Attn (paper, GLUE test)": {"sst2-glue": "90.4", "cola": "36.0", "stsb": "73.3",
                                            "mrpc": "84.9", "rte": "56.8", "wnli": "—"},
    "BERT-base (paper, GLUE test)": {"sst2-glue": "93.5", "cola": "52.1", "stsb": "85.8", "mrpc": "88.9",
                                     "rte": "66.4", "wnli": "65.1 (majority class)"},
}
"""Devlin et al. (2019), Table 1: GLUE test-set scores from the GLUE server, as the paper reports
them. WNLI is not in Table 1; appendix B.1 says the BERT submission predicted its majority class
(65.1, the majority-class accuracy GLUE reports)."""
ROW_NAMES = {FINE_TUNE: "BERT fine-tuned (ours, best lr)", "elmo": "ELMo, frozen (ours)",
             "cove": "CoVe, frozen (ours)", "bert-features": "BERT features, frozen (ours)",
             NONE: "no contextual vectors (ours)", MAJORITY: "majority class (ours)"}
DIRECTIONS = (
    (FINE_TUNE, "elmo", "Devlin et al. (2019), Table 1: BERT-base > BiLSTM+ELMo+Attn on every task"),
    ("elmo", NONE, "Peters et al. (2018), Table 1: adding ELMo improves every task measured"),
)
"""The papers' reported directions: the first configuration scores higher than the second."""


def _lr_groups(records: Sequence[dict], task: str) -> dict[float, list[float]]:
    out: dict[float, list[float]] = {}
    for r in records:
        if r["task"] == task and r["config"] == FINE_TUNE:
            out.setdefault(r["lr"], []).append(float(r["dev"]))
    return out


def best_lr(records: Sequence[dict], task: str) -> float | None:
    """The fine-tuning learning rate of ``task`` with the best mean dev score (a tie: the larger
    rate, the first the paper lists), or None without fine-tune runs."""
    groups = _lr_groups(records, task)
    return max(groups, key=lambda lr: (mean(groups[lr]), lr)) if groups else None


def scores(records: Sequence[dict]) -> dict[tuple[str, str], list[float]]:
    """Dev scores per (task, configuration); fine-tuning's at its best learning rate."""
    out: dict[tuple[str, str], list[float]] = {}
    chosen = {task: best_lr(records, task) for task in GLUE_TASKS}
    for r in records:
        if r["config"] != FINE_TUNE or r["lr"] == chosen[r["task"]]:
            out.setdefault((r["task"], r["config"]), []).append(float(r["dev"]))
    return out


def _tasks(records: Sequence[dict]) -> list[str]:
    present = {r["task"] for r in records}
    return [t for t in COLUMNS if t in present]


def _settings_lines(records: Sequence[dict], header: dict) -> list[str]:
    sizes = {r["task"]: r["report"]["splits"] for r in records}
    ft, tr = header["fine_tune"], header["train"]
    lrs = sorted({r["lr"] for r in records if r["lr"] is not None}, reverse=True)
    seeds = sorted({r["seed"] for r in records if r["seed"] is not None})
    return [
        f"Models: BERT {header['bert']}; ELMo {header['elmo']}; CoVe {header['cove']}.",
        f"Fine-tuning (every BERT run): batch {ft['batch_size']}, {ft['epochs']} epochs, AdamW with "
        f"weight decay {ft['weight_decay']}, warmup {ft['warmup']:.0%} of the steps then linear decay, "
        f"learning rate chosen from {', '.join(f'{lr:g}' for lr in lrs) or 'none run'} by the mean dev "
        "score over the seeds.",
        f"Frozen-feature models: the pair model (pair tasks) or sentence classifier, hidden "
        f"{header['hidden']}; Adam lr {tr['lr']:g}, batch {tr['batch_size']}, at most {tr['epochs']} epochs, "
        f"patience {tr['patience']}; ELMo: a learned mix of all layers; CoVe: its top layer; BERT: its last "
        "4 layers summed.",
        f"Seeds {' '.join(map(str, seeds))}; --max-sentences {header['max_sentences'] or 'all'}"
        + (" (the first N items of each train file)." if header["max_sentences"] else "."),
        "Items (train / dev): " + "; ".join(f"{t} {sizes[t]['train']['sentences']} / "
                                            f"{sizes[t]['dev']['sentences']}" for t in _tasks(records)) + ".",
    ]


def _main_table(groups: dict, records: Sequence[dict], tasks: Sequence[str]) -> list[str]:
    rows = [[name, *(cells[t] for t in tasks)] for name, cells in PAPER_ROWS.items()]
    for config in (*ENCODERS, MAJORITY):
        if any(c == config for _, c in groups):
            rows.append([ROW_NAMES[config], *(cell(groups.get((t, config)), _lr_note(records, t, config))
                                              for t in tasks)])
    return markdown_table(["system", *(HEADINGS[t] for t in tasks)], ["---", *(["---:"] * len(tasks))], rows)


def _lr_note(records: Sequence[dict], task: str, config: str) -> str:
    lr = best_lr(records, task) if config == FINE_TUNE else None
    return "" if lr is None else f", lr {lr:g}"


def _lr_lines(records: Sequence[dict], tasks: Sequence[str]) -> list[str]:
    rows = []
    for t in tasks:
        chosen = best_lr(records, t)
        for lr, values in sorted(_lr_groups(records, t).items(), reverse=True):
            rows.append([t, f"{lr:g}", cell(values), "chosen" if lr == chosen else ""])
    if not rows:
        return []
    return ["## Fine-tuning: dev score per learning rate", "",
            *markdown_table(["task", "lr", "dev (mean ± std)", ""], ["---", "---:", "---:", "---"], rows), ""]


def _direction_lines(groups: dict, tasks: Sequence[str]) -> list[str]:
    measured_tasks = [t for t in tasks if t != "wnli"]
    lines = ["## The papers' reported directions, measured on these runs", "",
             "Each row: the difference of the mean dev scores (points), and whether it has the reported "
             "sign. WNLI is left out, as Table 1 leaves it out.", "",
             *markdown_table(["direction", "reported by", *measured_tasks],
                             ["---"] * (len(measured_tasks) + 2),
                             [_direction_row(groups, measured_tasks, *row) for row in DIRECTIONS])]
    summary = []
    for better, worse, _ in DIRECTIONS:
        met, not_met = [], []
        for t in measured_tasks:
            diff = mean_difference(groups, t, better, worse)
            if diff is not None:
                (met if diff > 0 else not_met).append(t)
        if met or not_met:
            summary.append(f"- {ROW_NAMES[better]} > {ROW_NAMES[worse]}: met on {len(met)} of "
                           f"{len(met) + len(not_met)} tasks ({', '.join(met) or 'none'}); not met on "
                           f"{', '.join(not_met) or 'none'}.")
    return lines + ([""] + summary if summary else []) + [""]


def _direction_row(groups: dict, tasks: Sequence[str], better: str, worse: str, source: str) -> list[str]:
    diffs = [mean_difference(groups, t, better, worse) for t in tasks]
    cells = ["not run" if d is None else f"{d:+.1f} ({'met' if d > 0 else 'not met'})" for d in diffs]
    return [f"{better} > {worse}", source, *cells]


def results_markdown(records: Sequence[dict], header: dict) -> str:
    """``results.md`` (see the module docstring)."""
    groups, tasks = scores(records), _tasks(records)
    lines = ["# GLUE: the encoders here beside the BERT paper's Table 1", "",
             "The paper's rows are Devlin et al. (2019), Table 1, as the paper reports them: GLUE **test** "
             "sets, scored by the GLUE server. Ours are dev scores on a seeded 10% carved from each task's "
             "train.tsv (GLUE's labeled dev sets are held back), mean ± sample std over seeds (n runs), "
             "×100: other data, so the rows stand side by side, not figure for figure.", "",
             *_settings_lines(records, header), "", *_main_table(groups, records, tasks), ""]
    return "\n".join(lines + _lr_lines(records, tasks) + _direction_lines(groups, tasks))


CSV_FIELDS = ("task", "config", "kind", "lr", "seed", "metric", "dev_score", "dev_scores", "chosen_lr",
              "train_items", "dev_items", "best_epoch", "epochs_run", "runtime_s")


def csv_rows(records: Sequence[dict]) -> list[dict]:
    """``results.csv``'s rows: one per run."""
    chosen = {task: best_lr(records, task) for task in GLUE_TASKS}
    return [{"task": r["task"], "config": r["config"], "kind": r["kind"],
             "lr": "" if r["lr"] is None else r["lr"], "seed": "" if r["seed"] is None else r["seed"],
             "metric": r["metric"], "dev_score": f"{r['dev']:.4f}",
             "dev_scores": " ".join(f"{k}={v:.4f}" for k, v in r["report"]["dev"].items()
                                    if isinstance(v, float)),
             "chosen_lr": "yes" if r["config"] == FINE_TUNE and r["lr"] == chosen[r["task"]] else "",
             "train_items": r["report"]["splits"]["train"]["sentences"],
             "dev_items": r["report"]["splits"]["dev"]["sentences"],
             "best_epoch": r["report"]["best_epoch"], "epochs_run": len(r["report"]["curve"]),
             "runtime_s": r["runtime_s"]} for r in records]


def table_records(store: ResultStore, table_id: str) -> list[dict]:
    """The stored runs of the table ``table_id`` in table order; of two runs of one (task, config,
    lr, seed), the one finished last."""
    latest: dict[tuple, dict] = {}
    for record in sorted(store.records, key=lambda r: r.get("finished", "")):
        if record.get("table") == table_id:
            latest[(record["task"], record["config"], record["lr"], record["seed"])] = record
    order = {c: i for i, c in enumerate((*ENCODERS, MAJORITY))}
    return sorted(latest.values(), key=lambda r: (GLUE_TASKS.index(r["task"]), order[r["config"]],
                                                  -(r["lr"] or 0), r["seed"] or 0))


def write_outputs(output_dir: Path, records: Sequence[dict], header: dict) -> tuple[list[Path], str]:
    """Write results.csv and results.md over ``records``; returns (files, markdown)."""
    if not records:
        raise ValueError(f"no finished run in {output_dir}: nothing to tabulate")
    files = [output_dir / RESULTS_CSV, output_dir / RESULTS_MD]
    write_csv(files[0], CSV_FIELDS, csv_rows(records))
    markdown = results_markdown(records, header)
    write_text(files[1], markdown)
    return files, markdown


@dataclass(frozen=True)
class GlueTable:
    """The BERT paper's Table 1 as an entry of the framework: one task's runs (``plan``) added to
    the table over every task stored in the output directory under the same ``table_id``."""

    task: str
    settings: GluePlan
    name: str = EXPERIMENT

    def plan(self) -> list[RunSpec]:
        return glue_plan(self.task, self.settings)

    def record(self, run: RunContext) -> dict:
        spec, report = run.spec, run.report
        t = spec.train_settings
        return {"run": f"{run.task}, {spec.name}", "config": spec.config, "task": run.task,
                "kind": spec.kind.value, "lr": t.lr if spec.kind is RunKind.FINE_TUNE else None,
                "seed": None if t is None else t.seed, "metric": report["metric"],
                "dev": report["dev"][report["metric"]], "table": self.settings.table_id,
                "key": run.key, "runtime_s": run.runtime_s, "report": report,
                "finished": datetime.now(UTC).isoformat()}

    def follow_up(self, store: ResultStore, task: str) -> list[RunSpec]:
        return []

    def write(self, output_dir: Path, store: ResultStore, runs: list[FinishedRun], header: dict) -> Tables:
        files, markdown = write_outputs(output_dir, table_records(store, self.settings.table_id), header)
        return Tables(files, markdown, [markdown])
