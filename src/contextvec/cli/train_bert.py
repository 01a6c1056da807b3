"""``contextvec train-bert``: pretrain a BERT (masked LM + next sentence prediction) on a corpus."""

from __future__ import annotations

import argparse
import dataclasses
import time

from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.training.bert.config import PRESETS, BertTrainSettings
from contextvec.training.bert.trainer import BertTrainer, check_vocab

HELP = "pretrain a BERT (masked LM + next sentence prediction) on document-structured text"
VALUES = {  # type: {field: help}; overrides of the preset/config
    common.positive_int: {
        "batch_size": "global batch of sentence pairs",
        "max_steps": "updates (the learning rate reaches 0 there)",
        "max_seq_length": "pieces per pair, [CLS] and [SEP]s included",
        "pool_size": "runs kept for random next segments",
    },
    common.non_negative_int: {
        "warmup_steps": "steps of linear warmup",
        "checkpoint_every": "steps between checkpoints (0: at the end only)",
    },
    common.seed: {"seed": "random seed"},
    common.positive_float: {"lr": "peak learning rate"},
    common.non_negative_float: {"weight_decay": "AdamW weight decay",
                                "clip": "gradient norm clipping (0: off)"},
    common.probability: {"masked_lm_prob": "share of pieces predicted",
                         "short_seq_prob": "share of pairs with a random shorter length"},
}
OVERRIDES = [(name, kind, text) for kind, fields in VALUES.items() for name, text in fields.items()]
FLAGS = {  # field: help
    "whole_word_mask": "mask all pieces of a word together",
    "bf16": "bfloat16 autocast",
    "lowercase": "lower-case (uncased) vocabulary trained without --vocab",
    "sentences": "split lines into sentences (--no-sentences: a line is a segment)",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = options.add_command(subparsers, "train-bert", HELP)
    p.add_argument("--train", nargs="+", required=True,
                   help="corpus files or globs (plain or .gz): a paragraph or sentence per line, a "
                   "blank line between documents")
    p.add_argument("--valid", nargs="+", help="held-out files: MLM/NSP scores at the end")
    p.add_argument("--output-dir", required=True, help="checkpoint, tokenizer/ and model/")
    p.add_argument("--vocab", help="a tokenizer directory holding vocab.txt, as train-wordpiece writes "
                   "(default: train one of --vocab-size on the training files)")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="training settings, see docs/bert-pretraining.md (needed unless --config is "
                   "given; bert-tiny is for tests)")
    p.add_argument("--config", help="JSON training config (instead of --preset)")
    options.add_run_arguments(p)
    options.add_overrides(p, OVERRIDES, flags=FLAGS)
    group = p.add_argument_group("model overrides")
    group.add_argument("--dropout", type=common.probability,
                       help="hidden and attention dropout" + options.FROM_PRESET)
    group.add_argument("--vocab-size", type=common.vocab_size,
                       help="size of the vocabulary trained without --vocab" + options.FROM_PRESET)
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace) -> BertTrainSettings:
    config = BertTrainSettings.from_file(args.config) if args.config else PRESETS[args.preset]
    config = options.overrides(config, args, [*(name for name, *_ in OVERRIDES), *FLAGS])
    model = {}
    if args.dropout is not None:
        model = {"hidden_dropout_prob": args.dropout, "attention_probs_dropout_prob": args.dropout}
    if args.vocab_size is not None:
        model["vocab_size"] = args.vocab_size
    return dataclasses.replace(config, model=dataclasses.replace(config.model, **model))


def run(args: argparse.Namespace) -> None:
    if not (args.preset or args.config):  # before --overwrite removes anything
        raise ValueError(f"train-bert needs --preset ({', '.join(sorted(PRESETS))}; see "
                         "docs/bert-pretraining.md) or --config FILE")
    if args.vocab is not None:
        check_vocab(args.vocab, "--vocab")
    options.set_threads(args)
    options.prepare_output(args.output_dir, [args.train, args.valid], overwrite=args.overwrite,
                   resume=args.resume, directory=True)
    options.overwrite_outputs(args, args.output_dir, BertTrainer.outputs)
    start = time.perf_counter()
    trainer = BertTrainer(config_from_args(args), args.train, args.output_dir, args.valid,
                          vocab=args.vocab, progress=not args.quiet)
    scores = trainer.train(resume=args.resume)
    if trainer.rank == 0:
        print(f"trained {trainer.step} steps ({trainer.tokens_seen:,} pieces) in "
              f"{time.perf_counter() - start:.0f} s")
        if scores is not None:
            print(f"valid: {scores}")
