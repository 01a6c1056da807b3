"""``contextvec train-word-vectors``: static word vectors with gensim (the GloVe stand-in)."""

from __future__ import annotations

import argparse

from contextvec.text.tokenize import Tokenizer
from contextvec.training.word2vec import ALGORITHMS, WordVectorConfig, train_word_vectors

HELP = "train static word vectors (word2vec or fastText, via gensim) on a corpus"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    defaults = WordVectorConfig()
    p = subparsers.add_parser("train-word-vectors", help=HELP, description=HELP)
    p.add_argument("--train", nargs="+", required=True, help="corpus files or globs (plain or .gz)")
    p.add_argument("--output", required=True, help="vectors file (written atomically; .gz: gzipped)")
    p.add_argument("--format", choices=("word2vec", "glove", "word2vec-binary"), default="word2vec",
                   help="output format (default: word2vec text, with a 'count dim' header)")
    p.add_argument("--algorithm", choices=ALGORITHMS, default=defaults.algorithm)
    p.add_argument("--dim", type=int, default=defaults.dim)
    p.add_argument("--window", type=int, default=defaults.window)
    p.add_argument("--min-count", type=int, default=defaults.min_count)
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--sg", action="store_true", help="skip-gram (default: CBOW)")
    p.add_argument("--negative", type=int, default=defaults.negative, help="negative samples")
    p.add_argument("--max-vocab", type=int, help="keep at most this many most frequent words")
    p.add_argument("--tokenizer", choices=Tokenizer.NAMES, default=defaults.tokenizer,
                   help="how lines become tokens (default: moses-sentences, for running text; "
                   "whitespace for pre-tokenized files)")
    p.add_argument("--lowercase", action="store_true", help="lower-case tokens first")
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--threads", type=int, default=1,
                   help="gensim worker threads (1: deterministic; default 1)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    config = WordVectorConfig(
        dim=args.dim, algorithm=args.algorithm, window=args.window, min_count=args.min_count,
        epochs=args.epochs, sg=args.sg, negative=args.negative, lowercase=args.lowercase,
        tokenizer=args.tokenizer, max_vocab=args.max_vocab, seed=args.seed,
    )
    train_word_vectors(args.train, args.output, config, threads=args.threads,
                       output_format=args.format, progress=not args.quiet)
