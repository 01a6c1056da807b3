"""``contextvec experiment``: the ELMo paper's analyses on a task (layers, placement, sample
efficiency), CoVe's Table 2 (representations) and the BERT paper's Table 1 on GLUE (glue) as
tables, JSON and PNG figures in one output directory; see experiments/."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.cli.experiment_glue import add_glue_parser
from contextvec.cli.experiment_representations import add_representations_parser
from contextvec.cli.experiment_squad import add_squad_parser
from contextvec.experiments import DEFAULT_FRACTIONS, RunnerSettings
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.jobs.experiments import AnalysisSettings, run_analysis
from contextvec.tasks.models import MIX_PLACEMENTS
from contextvec.tasks.spec import TASKS, get_task
from contextvec.tasks.train import TrainSettings

HELP = "the ELMo paper's analyses: last layer vs all layers, placement, sample efficiency"
"""The command table's help line (cli/main.py's COMMANDS); the subcommands list CoVe's Table 2 and
the BERT paper's Table 1 too."""
RUNS = """Each experiment trains the train-task model once per configuration
(and seed, and training fraction) on features computed once per split, and writes results.csv,
results.md, results.json, <experiment>.png and layer_weights.png (the learned mix weights) to
--output-dir. Finished runs are kept in results.json as they complete: rerunning the same command
with --resume skips them, so an interrupted experiment continues where it stopped."""
DESCRIPTION = (f"{HELP}; CoVe's Table 2 (representations), the BERT paper's Table 1 on GLUE (glue) and "
               f"representations on extractive QA (squad), each with its own outputs. {RUNS}")
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
            sub.add_argument("--placement", choices=MIX_PLACEMENTS, default="input",
                             help="where the contextual mixes enter the model (default: input)")
        if name != "layers":
            sub.add_argument("--l2", type=common.non_negative_float, default=0.001,
                             help="lambda of the L2 penalty on the mix weights (default: 0.001)")
        if name == "sample-efficiency":
            sub.add_argument("--fractions", type=opts.fraction, nargs="+", default=list(DEFAULT_FRACTIONS),
                             metavar="F", help="training fractions, each in (0, 1] (default: "
                             f"{' '.join(f'{f:g}' for f in DEFAULT_FRACTIONS)})")
        else:
            sub.add_argument("--baseline", action="store_true",
                             help="also train the model without contextual vectors (default: off)")
        sub.set_defaults(run=run)
    add_representations_parser(experiments)
    add_glue_parser(experiments)
    add_squad_parser(experiments)


def _add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", choices=TASKS, help="the task (as train-task)")
    opts.add_data_arguments(p, "test file: scored once per run with the best-on-dev model")
    p.add_argument("--output-dir", required=True,
                   help="results.{csv,md,json} and the PNGs go here (required)")
    p.add_argument("--resume", action="store_true",
                   help="continue the experiment in --output-dir: its finished runs are reused "
                   "(default: off)")
    common.add_overwrite_argument(p)
    common.add_model_arguments(p)
    m = p.add_argument_group("task model (as train-task)")
    m.add_argument("--hidden", type=common.positive_int, help="biLSTM units per direction (default: 100)")
    m.add_argument("--layer-norm", action="store_true",
                   help="layer-normalise each layer before mixing (default: off)")
    opts.add_feature_arguments(p.add_argument_group("features"), embed_batch=False)
    t = p.add_argument_group("training (every run)")
    d = TrainSettings()
    opts.add_training_arguments(
        t, epochs=d.epochs, lr=d.lr, batch_size=d.batch_size, seed=d.seed,
        epochs_help=f"at most N epochs (default: {d.epochs})",
        lr_help=f"Adam learning rate (default: {d.lr})",
        batch_help=f"sentences per training batch (default: {d.batch_size})")
    t.add_argument("--patience", type=common.positive_int, default=d.patience,
                   help=f"stop after N epochs without a better dev score (default: {d.patience})")
    t.add_argument("--seeds", type=common.seed, nargs="+", metavar="S",
                   help="repeat every configuration with these seeds; mean and std are reported "
                   "(default: --seed)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (default: shown)")


def settings(args: argparse.Namespace) -> AnalysisSettings:
    if args.resume and args.overwrite:
        raise ValueError("--resume reuses the finished runs in --output-dir, --overwrite discards them: "
                         "give one")
    model = get_task(args.task).model_settings(
        hidden=args.hidden, placement=getattr(args, "placement", "input"), layer_norm=args.layer_norm)
    training = TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr,
                             batch_size=args.batch_size, l2=getattr(args, "l2", TrainSettings.l2),
                             seed=args.seed, device=args.device, progress=not args.quiet)
    runner = RunnerSettings(Path(args.output_dir), cache_dir=args.cache_dir, feature_dtype=args.feature_dtype,
                            progress=not args.quiet, overwrite=args.overwrite)
    return AnalysisSettings(
        args.experiment, args.task, TaskFiles(args.train, args.dev, args.test, args.max_sentences), runner,
        model, training, tuple(args.seeds or [args.seed]),
        EncoderChoice(args.model, args.options_file, args.weight_file, args.device, precision=args.precision),
        getattr(args, "baseline", False), tuple(getattr(args, "fractions", DEFAULT_FRACTIONS)), args.threads)


def run(args: argparse.Namespace) -> None:
    job = settings(args)  # settings errors before any reading or loading
    inputs = opts.check_inputs(args, "train", "dev", "test")
    common.check_output(args.output_dir, inputs=inputs, overwrite=args.overwrite, resume=args.resume,
                        directory=True)
    with opts.resumable_features(f"finished runs are kept in {args.output_dir}/results.json, rerun the same "
                                 "command with --resume to continue"):
        result = run_analysis(job)
    print("\n".join(result.lines))
    rt = result.runtime_s
    print(f"{result.trained + result.reused} runs ({result.reused} reused from results.json); runtime: "
          f"features {rt['features']:.1f} s, runs {rt['runs']:.1f} s, total {rt['including_loading']:.1f} s")
    print("wrote " + ", ".join(str(path) for path in result.files))
