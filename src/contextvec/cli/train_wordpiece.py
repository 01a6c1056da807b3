"""``contextvec train-wordpiece``: a BERT WordPiece vocabulary from a corpus."""

from __future__ import annotations

import argparse

from contextvec.training.bert_data import train_wordpiece
from contextvec.training.corpus import expand_paths

HELP = "train a BERT WordPiece vocabulary (vocab.txt + tokenizer.json) on text files"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train-wordpiece", help=HELP, description=HELP)
    p.add_argument("--train", nargs="+", required=True, help="text files or globs (plain or .gz)")
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--output", required=True, help="directory for vocab.txt, tokenizer.json, ...")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                   help="uncased: lower-case and strip accents (default) or keep case")
    p.add_argument("--min-frequency", type=int, default=2, help="rarer merges are not learned")
    p.add_argument("--limit-alphabet", type=int, default=1000, help="most frequent characters kept")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    output = train_wordpiece(expand_paths(args.train), args.vocab_size, args.output,
                             lowercase=args.lowercase, min_frequency=args.min_frequency,
                             limit_alphabet=args.limit_alphabet, progress=not args.quiet)
    size = sum(1 for _ in (output / "vocab.txt").open(encoding="utf-8"))
    print(f"{size:,} pieces in {output / 'vocab.txt'}")
