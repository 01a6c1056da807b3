"""``contextvec train-bert``: pretrain a BERT (masked LM + next sentence prediction) on a corpus."""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from contextvec.training.bert_trainer import PRESETS, BertTrainConfig, BertTrainer

HELP = "pretrain a BERT (masked LM + next sentence prediction) on document-structured text"
OVERRIDES = ("batch_size", "max_steps", "lr", "warmup_steps", "weight_decay", "clip", "max_seq_length",
             "masked_lm_prob", "whole_word_mask", "short_seq_prob", "bf16", "checkpoint_every",
             "seed", "lowercase", "sentences", "pool_size")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train-bert", help=HELP, description=HELP)
    p.add_argument("--train", nargs="+", required=True,
                   help="corpus files or globs (plain or .gz): a paragraph or sentence per line, a "
                   "blank line between documents")
    p.add_argument("--valid", nargs="+", help="held-out files: MLM/NSP scores at the end")
    p.add_argument("--output-dir", required=True, help="checkpoint, tokenizer/ and model/")
    p.add_argument("--vocab", help="a tokenizer directory (contextvec train-wordpiece); default: "
                   "train one of --vocab-size on the training files")
    p.add_argument("--preset", choices=sorted(PRESETS), default="bert-tiny")
    p.add_argument("--config", help="JSON training config (overrides --preset)")
    p.add_argument("--resume", action="store_true", help="continue from the output's checkpoint")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--quiet", action="store_true")
    group = p.add_argument_group("overrides of the preset/config")
    group.add_argument("--batch-size", type=int, help="global batch of sentence pairs")
    group.add_argument("--max-steps", type=int, help="updates (the learning rate reaches 0 there)")
    group.add_argument("--lr", type=float, help="peak learning rate")
    group.add_argument("--warmup-steps", type=int)
    group.add_argument("--weight-decay", type=float)
    group.add_argument("--clip", type=float, help="gradient norm clipping (0: off)")
    group.add_argument("--max-seq-length", type=int, help="pieces per pair, [CLS] and [SEP]s included")
    group.add_argument("--masked-lm-prob", type=float)
    group.add_argument("--whole-word-mask", action=argparse.BooleanOptionalAction, default=None,
                       help="mask all pieces of a word together")
    group.add_argument("--short-seq-prob", type=float, help="share of pairs with a random shorter length")
    group.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                       help="bfloat16 autocast")
    group.add_argument("--dropout", type=float, help="hidden and attention dropout")
    group.add_argument("--vocab-size", type=int, help="size of the vocabulary trained without --vocab")
    group.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=None,
                       help="lower-case (uncased) vocabulary trained without --vocab")
    group.add_argument("--sentences", action=argparse.BooleanOptionalAction, default=None,
                       help="split lines into sentences (--no-sentences: a line is a segment)")
    group.add_argument("--pool-size", type=int, help="runs kept for random next segments")
    group.add_argument("--checkpoint-every", type=int, help="steps between checkpoints")
    group.add_argument("--seed", type=int)
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace) -> BertTrainConfig:
    config = BertTrainConfig.from_file(args.config) if args.config else PRESETS[args.preset]
    changes = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None}
    model = {}
    if args.dropout is not None:
        model = {"hidden_dropout_prob": args.dropout, "attention_probs_dropout_prob": args.dropout}
    if args.vocab_size is not None:
        model["vocab_size"] = args.vocab_size
    if model:
        changes["model"] = dataclasses.replace(config.model, **model)
    return dataclasses.replace(config, **changes)


def run(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    trainer = BertTrainer(config_from_args(args), args.train, args.output_dir, args.valid,
                          vocab=args.vocab, progress=not args.quiet)
    scores = trainer.train(resume=args.resume)
    if trainer.rank == 0:
        print(f"trained {trainer.step} steps ({trainer.tokens_seen:,} pieces) in "
              f"{time.perf_counter() - start:.0f} s")
        if scores is not None:
            print(f"valid: {scores}")
