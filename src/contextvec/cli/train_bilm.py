"""``contextvec train-bilm``: train (or fine-tune) a biLM on a corpus."""

from __future__ import annotations

import argparse
import sys
import time

from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.text.tokenize import Tokenizer
from contextvec.training.bilm.config import BF16_MODES, OPTIMIZERS, PRESETS, BiLMTrainSettings
from contextvec.training.bilm.model_files import (
    FINE_TUNING_LR_FACTOR,
    evaluate_perplexity,
    fine_tuning_config,
    load_model,
)
from contextvec.training.bilm.trainer import Trainer
from contextvec.training.corpus import expand_paths, read_sentences

HELP = "train a biLM (ELMo) or a forward char-CNN LM (Kim et al.) on a corpus"
VALUES = (  # option, type, help: overrides of the preset/config
    ("rows", common.positive_int, "parallel streams per step (batch size)"),
    ("unroll", common.positive_int, "tokens per stream per step"),
    ("lr", common.positive_float, "learning rate"),
    ("dropout", common.probability, "dropout on the LSTMs' and the softmax's inputs"),
    ("clip", common.non_negative_float, "gradient norm clipping (0: off)"),
    ("negatives", common.non_negative_int, "sampled-softmax negatives (0: full softmax)"),
    ("epochs", common.positive_int, "passes over the corpus"),
    ("max_steps", common.positive_int, "stop after this many steps"),
    ("min_count", common.positive_int, "vocabulary: minimum count"),
    ("max_vocab", common.positive_int, "vocabulary: maximum size"),
    ("checkpoint_every", common.non_negative_int, "steps between checkpoints (0: at epoch ends only)"),
    ("seed", common.seed, "random seed"),
    ("weight_drop", common.probability, "drop this fraction of the LSTMs' recurrent weights in training "
                                        "(AWD-LSTM's DropConnect; 0: off)"),
    ("skip_lines", common.non_negative_int, "start every training file at line N + 1 (continue a model on "
                                            "the part of its corpus an earlier run did not read)"),
    ("halve_from_epoch", common.non_negative_int, "also halve the lr after epoch N and every later one (a "
                                                  "fixed-budget anneal; may be given when resuming)"),
    ("average_from_epoch", common.non_negative_int,
     "average the weights of every step after epoch N (Polyak/ASGD); the average is validated and "
     "saved, and restarts when the lr changes (may be given when resuming)"),
)
CHOICES = (
    ("optimizer", OPTIMIZERS, "optimizer"),
    ("tokenizer", Tokenizer.NAMES, "how lines become tokens: whitespace (pre-tokenized), moses, or "
                                   "moses-sentences (paragraph-per-line text split into sentences)"),
    ("bf16", BF16_MODES, "bfloat16 autocast in training steps: the softmax only, or the whole forward "
                         "pass (evaluation stays float32; pays on CPUs with AVX-512 BF16 or AMX, and "
                         "on GPUs; may be changed when resuming)"),
)
FLAGS = {  # field: help
    "token_dropout": "dropout on the first LSTM's input too (Kim et al.: no)",
    "locked_dropout": "one dropout mask per stream, shared by a window's steps (variational dropout)",
    "contiguous": "one contiguous part of the corpus per stream (PTB convention)",
    "interleave": "read the training files line by line in turn, not one after the other (shards "
                  "of different sources; on in the elmo-* presets)",
    "lr_halving": "halve the lr after an epoch that improves valid perplexity by < 1",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = options.add_command(subparsers, "train-bilm", HELP)
    p.add_argument("--train", nargs="+", required=True,
                   help="corpus files or globs (plain or .gz), one sentence per line")
    p.add_argument("--valid", nargs="+", help="held-out files: perplexity after each epoch")
    p.add_argument("--output-dir", required=True, help="checkpoints, vocab.txt and model/")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="training settings, see docs/training.md (needed unless --config or --init is "
                   f"given; with --init, default: the initial model's recorded settings at "
                   f"{FINE_TUNING_LR_FACTOR:g} x its learning rate, full softmax; tiny is for tests)")
    p.add_argument("--config", help="JSON training config (instead of --preset)")
    p.add_argument("--init", help="a trained model directory (or elmo-en-small, the bundled "
                   "model) to continue from: fine-tuning; perplexity on --valid is printed before "
                   "and after")
    options.add_run_arguments(p)
    options.add_overrides(p, VALUES, CHOICES, FLAGS)
    p.set_defaults(run=run)


def base_config(args: argparse.Namespace) -> BiLMTrainSettings:
    """--config, else --preset, else (with --init) the initial model's fine-tuning settings; with
    --init, a tokenizer other than whitespace or than the model's is said on stderr (the text is
    read with the model's recorded tokenizer unless --tokenizer is given, as for text that is
    already tokenized the model's way)."""
    if args.config:
        return BiLMTrainSettings.from_file(args.config)
    if args.preset:
        return PRESETS[args.preset]
    model, _ = load_model(args.init)
    config = fine_tuning_config(args.init, model.config)
    softmax = f"{config.negatives} sampled negatives" if config.negatives else "full softmax"
    print(f"fine-tuning {args.init} with its recorded settings: {config.optimizer}, lr {config.lr:g}, "
          f"{config.rows} x {config.unroll} tokens a step, {softmax}, tokenizer {config.tokenizer}")
    if args.tokenizer is None and config.tokenizer != BiLMTrainSettings.tokenizer:
        print(f"train-bilm: reading the text with {args.init}'s tokenizer, {config.tokenizer} (not "
              f"{BiLMTrainSettings.tokenizer}): the one its vocabulary was made with", file=sys.stderr)
    elif args.tokenizer is not None and args.tokenizer != config.tokenizer:
        print(f"train-bilm: reading the text with --tokenizer {args.tokenizer}, not {args.init}'s "
              f"{config.tokenizer}: its tokens must be cut as the model's vocabulary was", file=sys.stderr)
    return config


def run(args: argparse.Namespace) -> None:
    if not (args.preset or args.config or args.init):  # before --overwrite removes anything
        raise ValueError(f"train-bilm needs --preset ({', '.join(sorted(PRESETS))}; see "
                         "docs/training.md), --config FILE or --init MODEL")
    options.set_threads(args)
    options.prepare_output(args.output_dir, [args.train, args.valid], overwrite=args.overwrite,
                   resume=args.resume, directory=True)
    options.overwrite_outputs(args, args.output_dir, Trainer.outputs)
    config = options.overrides(base_config(args), args, [*(n for n, *_ in VALUES + CHOICES), *FLAGS])
    before = None
    if args.init and args.valid:
        model, vocab = load_model(args.init)
        valid = expand_paths(args.valid)
        before = evaluate_perplexity(model, lambda: read_sentences(valid, config.tokenizer), vocab,
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
