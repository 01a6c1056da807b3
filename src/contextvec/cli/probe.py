"""``contextvec probe``: linear probes of a frozen encoder's layers (``probe pos``: POS tagging)."""

from __future__ import annotations

import argparse

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.cli.probe_wsd import add_wsd_parsers
from contextvec.features import FeatureSettings
from contextvec.jobs.choice import EncoderChoice
from contextvec.jobs.probes import PosProbeSettings, run_pos_probe
from contextvec.probes.linear import ProbeSettings
from contextvec.tasks.readers.conllu import TAG_COLUMNS

HELP = "linear probes of each frozen layer and of a learned scalar mix"
POS_HELP = "POS tagging probe on CoNLL-U files (UD): accuracy per layer and for the scalar mix"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("probe", help=HELP, description=HELP)
    tasks = p.add_subparsers(dest="task", required=True, metavar="TASK")
    pos = tasks.add_parser("pos", help=POS_HELP, description=POS_HELP + ". Only syntactic words "
                           "are tagged: multiword-token ranges (1-2) and empty nodes (8.1) are skipped.")
    pos.add_argument("--train", required=True, help="training CoNLL-U file (plain or .gz; required)")
    pos.add_argument("--dev", required=True, help="dev CoNLL-U file: selects each probe's epoch (required)")
    pos.add_argument("--test", help="test CoNLL-U file: reported, never used to select (default: none)")
    pos.add_argument("--tag", choices=TAG_COLUMNS, default="upos", help="column to predict (default: upos)")
    pos.add_argument("--max-sentences", type=common.positive_int,
                     help="read only the first N sentences of each file, test included (default: all)")
    common.add_model_arguments(pos)
    _add_training_arguments(pos)
    pos.set_defaults(run=run_pos)
    add_wsd_parsers(tasks)


def _add_training_arguments(p: argparse.ArgumentParser) -> None:
    d = ProbeSettings()
    group = p.add_argument_group("probe training")
    opts.add_training_arguments(
        group, epochs=d.epochs, lr=d.lr, batch_size=d.batch_size, seed=d.seed,
        epochs_help=f"epochs (default: {d.epochs})", lr_help=f"Adam learning rate (default: {d.lr})",
        batch_help=f"tokens per step (default: {d.batch_size}); >= training tokens: full batch")
    group.add_argument("--weight-decay", type=common.non_negative_float, default=d.weight_decay,
                       help=f"L2 on the classifiers (default: {d.weight_decay})")
    opts.add_feature_arguments(p.add_argument_group("features"))
    opts.add_output_arguments(p)


def run_pos(args: argparse.Namespace) -> None:
    job = PosProbeSettings(
        args.train, args.dev, args.test, args.tag, args.max_sentences,
        EncoderChoice(args.model, args.options_file, args.weight_file, args.device, precision=args.precision),
        ProbeSettings(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, seed=args.seed,
                      weight_decay=args.weight_decay, device=args.device),
        FeatureSettings(args.cache_dir, args.feature_dtype, args.embed_batch_size), not args.quiet,
        args.threads)
    inputs = opts.check_inputs(args, "train", "dev", "test")
    opts.check_outputs(args, inputs, args.output)
    with opts.resumable_features():
        result = run_pos_probe(job)
    print("\n".join(result.lines()))
    if args.output:
        opts.write_json(args.output, result.report.to_dict())
