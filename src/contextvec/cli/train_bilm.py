"""``contextvec train-bilm``: train (or fine-tune) a biLM on a corpus."""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from contextvec.text.tokenize import Tokenizer
from contextvec.training.config import BF16_MODES, PRESETS, TrainConfig
from contextvec.training.corpus import expand_paths, read_sentences
from contextvec.training.trainer import Trainer, evaluate, load_model

HELP = "train a biLM (ELMo) or a forward char-CNN LM (Kim et al.) on a corpus"
OVERRIDES = ("rows", "unroll", "optimizer", "lr", "dropout", "clip", "negatives", "epochs",
             "max_steps", "min_count", "max_vocab", "checkpoint_every", "seed", "tokenizer",
             "token_dropout", "contiguous", "interleave", "lr_halving", "halve_from_epoch",
             "average_from_epoch", "skip_lines", "locked_dropout", "weight_drop", "bf16")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train-bilm", help=HELP, description=HELP)
    p.add_argument("--train", nargs="+", required=True,
                   help="corpus files or globs (plain or .gz), one sentence per line")
    p.add_argument("--valid", nargs="+", help="held-out files: perplexity after each epoch")
    p.add_argument("--output-dir", required=True, help="checkpoints, vocab.txt and model/")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    p.add_argument("--config", help="JSON training config (overrides --preset)")
    p.add_argument("--init", help="a trained model directory (or elmo-en-small, the bundled "
                   "model) to continue from: fine-tuning")
    p.add_argument("--resume", action="store_true", help="continue from the output's checkpoint")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--quiet", action="store_true")
    group = p.add_argument_group("overrides of the preset/config")
    group.add_argument("--rows", type=int, help="parallel streams per step (batch size)")
    group.add_argument("--unroll", type=int, help="tokens per stream per step")
    group.add_argument("--optimizer", choices=("adagrad", "adam", "sgd"))
    group.add_argument("--lr", type=float)
    group.add_argument("--dropout", type=float)
    group.add_argument("--clip", type=float, help="gradient norm clipping (0: off)")
    group.add_argument("--negatives", type=int, help="sampled-softmax negatives (0: full softmax)")
    group.add_argument("--epochs", type=int)
    group.add_argument("--max-steps", type=int)
    group.add_argument("--min-count", type=int)
    group.add_argument("--max-vocab", type=int)
    group.add_argument("--checkpoint-every", type=int, help="steps between checkpoints")
    group.add_argument("--seed", type=int)
    group.add_argument("--tokenizer", choices=Tokenizer.NAMES,
                       help="how lines become tokens: whitespace (pre-tokenized), moses, or "
                       "moses-sentences (paragraph-per-line text split into sentences)")
    group.add_argument("--token-dropout", action=argparse.BooleanOptionalAction, default=None,
                       help="dropout on the first LSTM's input too (Kim et al.: no)")
    group.add_argument("--locked-dropout", action=argparse.BooleanOptionalAction, default=None,
                       help="one dropout mask per stream, shared by a window's steps "
                            "(variational dropout)")
    group.add_argument("--weight-drop", type=float, metavar="P",
                       help="drop this fraction of the LSTMs' recurrent weights in training "
                            "(AWD-LSTM's DropConnect; 0: off)")
    group.add_argument("--contiguous", action=argparse.BooleanOptionalAction, default=None,
                       help="one contiguous part of the corpus per stream (PTB convention)")
    group.add_argument("--interleave", action=argparse.BooleanOptionalAction, default=None,
                       help="read the training files line by line in turn, not one after the "
                       "other (shards of different sources; on in the elmo-* presets)")
    group.add_argument("--skip-lines", type=int, metavar="N",
                       help="start every training file at line N + 1 (continue a model on the "
                            "part of its corpus an earlier run did not read)")
    group.add_argument("--lr-halving", action=argparse.BooleanOptionalAction, default=None,
                       help="halve the lr after an epoch that improves valid perplexity by < 1")
    group.add_argument("--halve-from-epoch", type=int, metavar="N",
                       help="also halve the lr after epoch N and every later one (a fixed-budget "
                            "anneal; may be given when resuming)")
    group.add_argument("--average-from-epoch", type=int, metavar="N",
                       help="average the weights of every step after epoch N (Polyak/ASGD); "
                            "the average is validated and saved, and restarts when the lr "
                            "changes (may be given when resuming)")
    group.add_argument("--bf16", choices=BF16_MODES,
                       help="bfloat16 autocast in training steps: the softmax only, or the whole "
                            "forward pass (evaluation stays float32; pays on CPUs with AVX-512 "
                            "BF16 or AMX, and on GPUs; may be changed when resuming)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    config = TrainConfig.from_file(args.config) if args.config else PRESETS[args.preset]
    changes = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None}
    config = dataclasses.replace(config, **changes)
    before = None
    if args.init and args.valid:
        model, vocab = load_model(args.init)
        valid = expand_paths(args.valid)
        before = evaluate(model, lambda: read_sentences(valid, config.tokenizer), vocab,
                          config.rows, config.unroll, contiguous=config.contiguous)
        print(f"perplexity before fine-tuning: {before.average:.2f}")
    start = time.perf_counter()
    trainer = Trainer(config, args.train, args.output_dir, args.valid, init=args.init,
                      progress=not args.quiet)
    after = trainer.train(resume=args.resume)
    print(f"trained {trainer.step} steps in {time.perf_counter() - start:.0f} s")
    if after is not None:
        label = "after fine-tuning" if before is not None else "valid"
        print(f"perplexity {label}: forward {after.forward:.2f}"
              + (f", backward {after.backward:.2f}" if after.backward is not None else "")
              + f", average {after.average:.2f} ({after.tokens:,} tokens)")
