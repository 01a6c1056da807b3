"""``contextvec train-word-vectors``: static word vectors with gensim (the GloVe stand-in)."""

from __future__ import annotations

import argparse

from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.io.word_vectors import WRITTEN_FORMATS, WordVectorFormat
from contextvec.text.tokenize import Tokenizer
from contextvec.training.corpus import expand_paths
from contextvec.training.word2vec import ALGORITHMS, WordVectorSettings, train_word_vectors

HELP = "train static word vectors (word2vec or fastText, via gensim) on a corpus"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    defaults = WordVectorSettings()
    p = options.add_command(subparsers, "train-word-vectors", HELP)
    p.add_argument("--train", nargs="+", required=True, help="corpus files or globs (plain or .gz)")
    p.add_argument("--output", required=True, help="vectors file (written atomically; .gz: gzipped)")
    default_format = WordVectorFormat.WORD2VEC.value  # listed first
    p.add_argument("--format", choices=(default_format, *(f for f in WRITTEN_FORMATS if f != default_format)),
                   default=default_format,
                   help="output format (word2vec: text, with a 'count dim' header)")
    p.add_argument("--algorithm", choices=ALGORITHMS, default=defaults.algorithm, help="gensim model")
    p.add_argument("--dim", type=common.positive_int32, default=defaults.dim, help="vector size")
    p.add_argument("--window", type=common.positive_int32, default=defaults.window, help="context window")
    p.add_argument("--min-count", type=common.positive_int32, default=defaults.min_count,
                   help="rarer words get no vector")
    p.add_argument("--epochs", type=common.positive_int32, default=defaults.epochs,
                   help="passes over the corpus")
    p.add_argument("--sg", action="store_true", help="skip-gram (default: CBOW)")
    p.add_argument("--negative", type=common.non_negative_int32, default=defaults.negative,
                   help="negative samples")
    p.add_argument("--max-vocab", type=common.positive_int32,
                   help="keep at most this many most frequent words (default: all)")
    p.add_argument("--tokenizer", choices=Tokenizer.NAMES, default=defaults.tokenizer,
                   help="how lines become tokens (moses-sentences: running text; whitespace: "
                   "pre-tokenized files)")
    p.add_argument("--seed", type=common.seed, default=defaults.seed, help="random seed")
    p.add_argument("--threads", type=common.thread_count, default=1,
                   help="gensim worker threads (1: deterministic)")
    p.add_argument("--lowercase", action="store_true", help="lower-case tokens first")
    options.add_run_arguments(p, resume=False, threads=False)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    paths = expand_paths(args.train)
    options.prepare_output(args.output, [paths], overwrite=args.overwrite)
    config = WordVectorSettings(
        dim=args.dim, algorithm=args.algorithm, window=args.window, min_count=args.min_count,
        epochs=args.epochs, sg=args.sg, negative=args.negative, lowercase=args.lowercase,
        tokenizer=args.tokenizer, max_vocab=args.max_vocab, seed=args.seed,
    )
    train_word_vectors([str(p) for p in paths], args.output, config, threads=args.threads,
                       output_format=args.format, progress=not args.quiet)
