"""``contextvec train-mt``: train CoVe's attentional translation model (its encoder is CoVe)."""

from __future__ import annotations

import argparse
import time

from contextvec.choices import spellings
from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.text.tokenize import LINE_TOKENIZERS
from contextvec.training.corpus import expand_paths
from contextvec.training.mt.config import MT_OPTIMIZERS, BleuTokenize, MTTrainSettings, Selection
from contextvec.training.mt.data import MTFiles
from contextvec.training.mt.trainer import MTTrainer

HELP = "train CoVe's attentional seq2seq translation model (MT-LSTM encoder) on parallel files"
MODEL = (  # option, type, help
    ("hidden_size", common.positive_int, "MT-LSTM units per direction; the decoder has twice as many"),
    ("num_layers", common.positive_int, "encoder and decoder layers"),
    ("target_dim", common.positive_int, "target embedding size"),
    ("dropout", common.probability, "dropout"),
    ("max_word_vectors", common.positive_int, "read only the first N word vectors (default: all)"),
    ("min_count", common.positive_int, "target vocabulary: minimum count"),
    ("max_vocab", common.positive_int, "target vocabulary: maximum size (default: no limit)"),
)
TRAINING = (
    ("batch_size", common.positive_int, "sentence pairs per step"),
    ("max_length", common.positive_int, "leave out training pairs with a longer side (default: none)"),
    ("lr", common.positive_float, "learning rate (default: 0.001 with adam, 1.0 with sgd)"),
    ("clip", common.non_negative_float, "gradient norm clipping, 0: off"),
    ("epochs", common.positive_int, "passes over the training pairs"),
    ("max_steps", common.positive_int, "stop after this many steps (default: none)"),
    ("checkpoint_every", common.non_negative_int, "steps between checkpoints (0: at epoch ends only)"),
    ("valid_beam", common.positive_int, "beam for the valid BLEU (1: greedy)"),
    ("seed", common.seed, "random seed"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    defaults = MTTrainSettings()
    p = options.add_command(subparsers, "train-mt", HELP)
    p.add_argument("--train-src", required=True, help="source (English) training file, plain or .gz")
    p.add_argument("--train-tgt", required=True, help="target (German) training file, line-aligned")
    p.add_argument("--valid-src", help="source validation file (perplexity and BLEU after each epoch)")
    p.add_argument("--valid-tgt", help="target validation file")
    p.add_argument("--word-vectors", required=True,
                   help="fixed source word vectors (GloVe or word2vec text/binary)")
    p.add_argument("--output-dir", required=True,
                   help="checkpoint.pt, vocabularies and model/ (the best model on valid)")
    options.add_run_arguments(p)
    options.add_device_argument(p)
    for title, table in (("model", MODEL), ("training", TRAINING)):
        group = p.add_argument_group(title)
        for name, kind, text in table:
            default = None if name == "lr" else getattr(defaults, name)  # lr: the optimizer's
            group.add_argument("--" + name.replace("_", "-"), type=kind, default=default, help=text)
    g = p.add_argument_group("choices")
    g.add_argument("--trainable-unk", action=argparse.BooleanOptionalAction, default=False,
                   help="learn the vector of source words without a word vector (else zero, fixed)")
    g.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=None,
                   help="look source words up lower-cased (default: if the vectors are all lower-case)")
    g.add_argument("--optimizer", choices=MT_OPTIMIZERS, default="adam",
                   help="adam (lr 0.001) or sgd (lr 1.0, halved when valid perplexity rises)")
    g.add_argument("--lr-halving", action=argparse.BooleanOptionalAction, default=None,
                   help="halve the lr after an epoch whose valid perplexity rose (default: with sgd)")
    g.add_argument("--select", choices=spellings(Selection), default="bleu",
                   help="what 'best on valid' means for model/")
    g.add_argument("--bleu-tokenize", choices=spellings(BleuTokenize), default="none",
                   help="sacrebleu tokenization: none (tokenized BLEU of the given tokens) or 13a")
    g.add_argument("--tokenizer", choices=LINE_TOKENIZERS, default="whitespace",
                   help="how lines become tokens (whitespace: pre-tokenized files)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    options.set_threads(args)
    inputs = [args.train_src, args.train_tgt, args.word_vectors, args.valid_src, args.valid_tgt]
    expand_paths([path for path in inputs if path is not None])  # each a non-empty file
    options.prepare_output(args.output_dir, inputs, overwrite=args.overwrite, resume=args.resume,
                   directory=True)
    options.overwrite_outputs(args, args.output_dir, MTTrainer.outputs)
    names = [f.name for f in MTTrainSettings.__dataclass_fields__.values()]
    config = MTTrainSettings(**{k: getattr(args, k) for k in names})
    start = time.perf_counter()
    files = MTFiles(args.train_src, args.train_tgt, args.word_vectors, args.valid_src, args.valid_tgt)
    trainer = MTTrainer(config, files, args.output_dir, progress=not args.quiet, device=args.device)
    history = trainer.train(resume=args.resume)
    print(f"trained {trainer.step} steps in {time.perf_counter() - start:.0f} s")
    chosen = [h for h in history if h.get("best")]  # the last one flagged is the best
    if chosen:
        best = chosen[-1]
        print(f"best on valid: epoch {best['epoch']}, perplexity {best['valid_perplexity']:.2f}, "
              f"BLEU {best['valid_bleu']:.2f}")
