"""``contextvec experiment squad``: which representation helps extractive QA, one table
(experiments/squad.py runs it; jobs/qa.py reads the files)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.experiments.squad import REPRESENTATIONS, SquadExperimentSettings
from contextvec.features import FeatureSettings
from contextvec.jobs.qa import QAExperimentSettings, QAFiles, run_qa_experiment
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.qa.frozen import SpanTrainSettings

SQUAD_HELP = "which representation helps extractive QA: the span model over none, ELMo, CoVe, BERT features"
SQUAD_RUNS = """One run per representation and seed on one SQuAD-format file (dev: --dev, or 15% of
train's articles): BiDAF's span model over its own word embeddings alone (none), over ELMo's scalar
mix, CoVe's top layer or BERT's last four layers summed, and (bert-finetune) the whole BERT
fine-tuned with a span head. results.json keeps each run as it finishes (--resume skips them);
results.md and results.csv give exact match and F1, mean and std over the seeds."""
DEFAULT_COVE = "cove-en-multi30k"


def add_squad_parser(experiments: argparse._SubParsersAction) -> None:
    """Register ``squad`` on the ``experiment`` command's subparsers."""
    p = experiments.add_parser("squad", help=SQUAD_HELP, description=f"{SQUAD_HELP}. {SQUAD_RUNS}")
    p.add_argument("--train", required=True, help="a SQuAD v1.1 JSON file (plain or .gz; required)")
    p.add_argument("--dev", help="dev file (default: a seeded 15%% of train's articles)")
    p.add_argument("--max-sentences", type=common.positive_int,
                   help="read only the first N questions of each file (default: all)")
    p.add_argument("--output-dir", required=True, help="results.{json,md,csv} go here (required)")
    p.add_argument("--resume", action="store_true",
                   help="add to the experiment in --output-dir: its finished runs are reused (default: off)")
    p.add_argument("--representations", nargs="+", metavar="REP", choices=REPRESENTATIONS,
                   help=f"of {' '.join(REPRESENTATIONS)} (default: none, elmo, cove; all with --bert)")
    p.add_argument("--seeds", type=common.seed, nargs="+", default=[0, 1, 2], metavar="S",
                   help="one run per seed; mean and std are reported (default: 0 1 2)")
    e = p.add_argument_group("models")
    e.add_argument("--elmo", help="ELMo: a bundled or published name, or a directory (default: the bundled "
                   "model)")
    e.add_argument("--cove", default=DEFAULT_COVE, help=f"CoVe (default: {DEFAULT_COVE})")
    e.add_argument("--bert", help="BERT: an HF BERT directory (needed by bert-features and bert-finetune)")
    opts.add_feature_arguments(e, embed_batch=False)
    s = SpanTrainSettings()
    m = p.add_argument_group("the span model (every frozen run)")
    m.add_argument("--epochs", type=common.positive_int, default=s.fit.epochs,
                   help=f"at most N epochs (default: {s.fit.epochs}; bert-finetune: 3)")
    m.add_argument("--patience", type=common.positive_int, default=s.fit.patience,
                   help=f"stop after N epochs without a better dev F1 (default: {s.fit.patience})")
    m.add_argument("--hidden", type=common.positive_int, default=s.model.hidden,
                   help=f"biLSTM units per direction (default: {s.model.hidden})")
    m.add_argument("--modelling-layers", type=common.positive_int, default=s.span.modelling_layers,
                   help=f"layers of the modelling biLSTM (default: {s.span.modelling_layers})")
    m.add_argument("--threads", type=common.thread_count, help="torch CPU threads (default: torch's choice)")
    m.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    m.add_argument("--quiet", action="store_true", help="no progress bars (default: shown)")
    p.set_defaults(run=run)


def settings(args: argparse.Namespace) -> QAExperimentSettings:
    base = SpanTrainSettings()
    progress = not args.quiet
    span = SpanTrainSettings(
        model=replace(base.model, hidden=args.hidden),
        span=replace(base.span, modelling_layers=args.modelling_layers),
        fit=replace(base.fit, epochs=args.epochs, patience=args.patience, device=args.device,
                    progress=progress),
        features=FeatureSettings(args.cache_dir, args.feature_dtype, base.features.batch_size),
    )
    runs = SquadExperimentSettings(
        tuple(args.representations or (REPRESENTATIONS if args.bert else REPRESENTATIONS[:3])),
        tuple(args.seeds),
        {"elmo": args.elmo, "cove": args.cove, "bert": args.bert},
        span, FineTuneSettings(device=args.device, progress=progress))
    return QAExperimentSettings(QAFiles(args.train, args.dev, args.max_sentences), args.output_dir, runs,
                                args.resume, args.threads)


def run(args: argparse.Namespace) -> None:
    opts.check_inputs(args, "train", "dev")
    result = run_qa_experiment(settings(args))
    print("\n".join(result.lines()))
