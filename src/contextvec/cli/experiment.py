"""``contextvec experiment``: the ELMo paper's analyses on a task (layers, placement, sample
efficiency) as tables, JSON and PNG figures in one output directory; see tasks/experiments.py."""

from __future__ import annotations

import argparse
import sys
import time

import torch

from contextvec.api import DEFAULT_MODEL
from contextvec.cli.common import add_model_arguments, load_model
from contextvec.cli.train_task import TASK_DEFAULTS, read_splits
from contextvec.tasks.experiments import (
    DEFAULT_FRACTIONS,
    RunSpec,
    layers_plan,
    percent,
    placement_plan,
    run_experiment,
    sample_efficiency_plan,
)
from contextvec.tasks.features import CACHE_ENV, DTYPES
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.train import TASKS, TrainSettings

HELP = "the ELMo paper's analyses: last layer vs all layers, placement, sample efficiency"
RUNS = """Each experiment trains the train-task model once per configuration
(and seed, and training fraction) on features computed once per split, and writes results.csv,
results.md, results.json, <experiment>.png and layer_weights.png (the learned mix weights) to
--output-dir. Finished runs are kept in results.json as they complete: rerunning the same command
skips them, so an interrupted experiment continues where it stopped."""
DESCRIPTION = f"{HELP}. {RUNS}"
EXPERIMENT_HELP = {
    "layers": "last layer only vs all layers with lambda 1 and 0.001 (ELMo Table 2)",
    "placement": "the mix at the biLSTM input vs at input and output (ELMo Table 3)",
    "sample-efficiency": "with and without contextual vectors on fractions of train (ELMo Figure 1)",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("experiment", help=HELP, description=DESCRIPTION)
    experiments = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, text in EXPERIMENT_HELP.items():
        sub = experiments.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}. {RUNS}")
        _add_common_arguments(sub)
        if name != "placement":
            sub.add_argument("--placement", choices=("input", "input+output"), default="input",
                             help="where the contextual mixes enter the model (input)")
        if name != "layers":
            sub.add_argument("--l2", type=float, default=0.001,
                             help="lambda of the L2 penalty on the mix weights (0.001)")
        if name == "sample-efficiency":
            sub.add_argument("--fractions", type=float, nargs="+", default=list(DEFAULT_FRACTIONS),
                             metavar="F", help="training fractions, each in (0, 1] "
                             f"({' '.join(f'{f:g}' for f in DEFAULT_FRACTIONS)})")
        else:
            sub.add_argument("--baseline", action="store_true",
                             help="also train the model without contextual vectors")
        sub.set_defaults(run=run)


def _add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", choices=TASKS, help="the task (as train-task)")
    p.add_argument("--train", required=True, help="training file (plain or .gz)")
    p.add_argument("--dev", help="dev file: selects the epoch (required except for trec)")
    p.add_argument("--test", help="test file (optional): scored once per run with the best-on-dev model")
    p.add_argument("--max-sentences", type=int, help="read only the first N sentences of each file")
    p.add_argument("--output-dir", required=True,
                   help="results.{csv,md,json} and the PNGs go here; finished runs here are reused")
    add_model_arguments(p)
    m = p.add_argument_group("task model (as train-task)")
    m.add_argument("--hidden", type=int, help="biLSTM units per direction (100)")
    m.add_argument("--layer-norm", action="store_true", help="layer-normalise each layer before mixing")
    f = p.add_argument_group("features")
    f.add_argument("--cache-dir",
                   help=f"feature cache (default: ${CACHE_ENV} or ~/.cache/contextvec/features)")
    f.add_argument("--feature-dtype", choices=DTYPES, default="float32",
                   help="stored (and in-memory) precision of the features (float32)")
    t = p.add_argument_group("training (every run)")
    d = TrainSettings()
    t.add_argument("--epochs", type=int, default=d.epochs, help=f"at most N epochs ({d.epochs})")
    t.add_argument("--patience", type=int, default=d.patience,
                   help=f"stop after N epochs without a better dev score ({d.patience})")
    t.add_argument("--lr", type=float, default=d.lr, help=f"Adam learning rate ({d.lr})")
    t.add_argument("--batch-size", type=int, default=d.batch_size,
                   help=f"sentences per batch ({d.batch_size})")
    t.add_argument("--seed", type=int, default=d.seed, help=f"random seed ({d.seed})")
    t.add_argument("--seeds", type=int, nargs="+", metavar="S",
                   help="repeat every configuration with these seeds; mean and std are reported "
                   "(default: --seed)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _base_settings(args: argparse.Namespace) -> tuple[ModelSettings, TrainSettings]:
    defaults = TASK_DEFAULTS[args.task]
    model = ModelSettings(
        word_dim=defaults["word_dim"], char_cnn=defaults["char_cnn"], lstm_layers=defaults["lstm_layers"],
        hidden=args.hidden or defaults["hidden"], placement=getattr(args, "placement", "input"),
        layer_norm=args.layer_norm,
    )
    train = TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr, batch_size=args.batch_size,
                          l2=getattr(args, "l2", TrainSettings.l2), seed=args.seed, device=args.device,
                          progress=not args.quiet)
    return model, train


def _plan(args: argparse.Namespace) -> list[RunSpec]:
    model, train = _base_settings(args)
    seeds = args.seeds or [args.seed]
    if args.experiment == "layers":
        return layers_plan(model, train, seeds, args.baseline)
    if args.experiment == "placement":
        return placement_plan(model, train, seeds, args.baseline)
    return sample_efficiency_plan(model, train, seeds, args.fractions)


def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    if args.threads:
        torch.set_num_threads(args.threads)
    plan = _plan(args)  # settings errors before any reading or loading
    train, dev, test = read_splits(args)
    encoder = load_model(args)
    header = {"model": args.model or args.options_file or f"bundled {DEFAULT_MODEL}",
              "files": {"train": args.train, "dev": args.dev, "test": args.test},
              "max_sentences": args.max_sentences}
    try:
        result = run_experiment(
            args.experiment, plan, args.task, train, dev, test, args.output_dir, encoder, header,
            cache_dir=args.cache_dir, feature_dtype=args.feature_dtype, progress=not args.quiet,
        )
    except KeyboardInterrupt:
        print(f"\ncontextvec: interrupted; finished runs are kept in {args.output_dir}/results.json, "
              "rerun the same command to continue", file=sys.stderr)
        raise SystemExit(130) from None
    for s in result.summary:
        std = f" ± {s.dev[1]:.4f}" if len(s.seeds) > 1 else ""
        print(f"{s.config}, train {percent(s.fraction)}: dev {result.metric} {s.dev[0]:.4f}{std}")
    rt = result.runtime_s
    print(f"{len(result.runs)} runs ({result.reused} reused from results.json); runtime: features "
          f"{rt['features']:.1f} s, runs {rt['runs']:.1f} s, total {time.perf_counter() - started:.1f} s")
    print("wrote " + ", ".join(str(path) for path in result.files))
