"""``contextvec probe``: linear probes of a frozen encoder's layers (``probe pos``: POS tagging)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from contextvec.api import DEFAULT_MODEL
from contextvec.cli.common import add_model_arguments, load_model
from contextvec.cli.probe_wsd import add_wsd_parsers
from contextvec.io.atomic import atomic_path
from contextvec.tasks.data import TAG_COLUMNS, read_conllu
from contextvec.tasks.features import CACHE_ENV, DTYPES
from contextvec.tasks.probes import ProbeSettings, format_table, probe_tagging

HELP = "linear probes of each frozen layer and of a learned scalar mix"
POS_HELP = "POS tagging probe on CoNLL-U files (UD): accuracy per layer and for the scalar mix"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("probe", help=HELP, description=HELP)
    tasks = p.add_subparsers(dest="task", required=True, metavar="TASK")
    pos = tasks.add_parser("pos", help=POS_HELP, description=POS_HELP + ". Only syntactic words "
                           "are tagged: multiword-token ranges (1-2) and empty nodes (8.1) are skipped.")
    pos.add_argument("--train", required=True, help="training CoNLL-U file (plain or .gz)")
    pos.add_argument("--dev", required=True, help="dev CoNLL-U file: selects each probe's epoch")
    pos.add_argument("--test", help="test CoNLL-U file (optional): reported, never used to select")
    pos.add_argument("--tag", choices=TAG_COLUMNS, default="upos", help="column to predict (upos)")
    pos.add_argument("--max-sentences", type=int,
                     help="read only the first N sentences of each file, test included (quick runs)")
    add_model_arguments(pos)
    _add_training_arguments(pos)
    pos.set_defaults(run=run_pos)
    add_wsd_parsers(tasks)


def _add_training_arguments(p: argparse.ArgumentParser) -> None:
    d = ProbeSettings()
    group = p.add_argument_group("probe training")
    group.add_argument("--epochs", type=int, default=d.epochs, help=f"epochs ({d.epochs})")
    group.add_argument("--lr", type=float, default=d.lr, help=f"Adam learning rate ({d.lr})")
    group.add_argument("--batch-size", type=int, default=d.batch_size,
                       help=f"tokens per step ({d.batch_size}); >= training tokens: full batch")
    group.add_argument("--weight-decay", type=float, default=d.weight_decay,
                       help=f"L2 on the classifiers ({d.weight_decay})")
    group.add_argument("--seed", type=int, default=d.seed, help=f"random seed ({d.seed})")
    group = p.add_argument_group("features")
    group.add_argument("--cache-dir", help=f"feature cache (default: ${CACHE_ENV} or "
                       "~/.cache/contextvec/features)")
    group.add_argument("--feature-dtype", choices=DTYPES, default="float32",
                       help="stored precision of the cached features (float32)")
    group.add_argument("--embed-batch-size", type=int, default=64,
                       help="sentences per encoder batch when computing features (64)")
    p.add_argument("--output", help="write the results as JSON here (atomically)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run_pos(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    splits = {
        name: read_conllu(path, args.tag, args.max_sentences)
        for name, path in (("train", args.train), ("dev", args.dev), ("test", args.test)) if path
    }
    encoder = load_model(args)
    settings = ProbeSettings(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                             seed=args.seed, weight_decay=args.weight_decay, device=args.device)
    try:
        report = probe_tagging(encoder, splits["train"], splits["dev"], splits.get("test"), settings,
                               cache_dir=args.cache_dir, feature_dtype=args.feature_dtype,
                               embed_batch_size=args.embed_batch_size, progress=not args.quiet)
    except KeyboardInterrupt:
        # The feature cache resumes by itself: the same command continues from finished chunks.
        print("\ncontextvec: interrupted; finished feature chunks are kept, rerun the same command",
              file=sys.stderr)
        raise SystemExit(130) from None
    report.runtime_s["including_loading"] = round(time.perf_counter() - started, 3)
    report.extra.update({"task": "pos", "tag": args.tag, "model": _model_name(args)})
    sizes = ", ".join(f"{k} {v['sentences']} sent / {v['tokens']} tok" for k, v in report.splits.items())
    print(f"POS ({args.tag}) probe of {_model_name(args)}: {encoder.num_layers} layers x "
          f"{encoder.output_dim} dims, {len(report.labels)} tags; {sizes}")
    print(format_table(report))
    rt = report.runtime_s
    print(f"runtime: features {rt['features']:.1f} s, probes {rt['train']:.1f} s, "
          f"total {rt['including_loading']:.1f} s")
    if args.output:
        with atomic_path(args.output) as tmp:
            tmp.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")


def _model_name(args: argparse.Namespace) -> str:
    return args.model or args.options_file or f"bundled {DEFAULT_MODEL}"
