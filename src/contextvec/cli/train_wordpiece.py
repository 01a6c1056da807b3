"""``contextvec train-wordpiece``: a BERT WordPiece vocabulary from a corpus."""

from __future__ import annotations

import argparse

from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.encoders.bert.tokenizer import VOCAB_TXT
from contextvec.training.bert.wordpiece import train_wordpiece
from contextvec.training.corpus import expand_paths

HELP = "train a BERT WordPiece vocabulary (vocab.txt + tokenizer.json) on text files"
OUTPUTS = (VOCAB_TXT, "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = options.add_command(subparsers, "train-wordpiece", HELP)
    p.add_argument("--train", nargs="+", required=True, help="text files or globs (plain or .gz)")
    p.add_argument("--vocab-size", type=common.vocab_size, default=30522, help="pieces in the vocabulary")
    p.add_argument("--output-dir", "--output", dest="output_dir", required=True,
                   help="directory for vocab.txt, tokenizer.json, ...")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                   help="uncased: lower-case and strip accents, or keep case")
    p.add_argument("--min-frequency", type=common.positive_int, default=2,
                   help="rarer merges are not learned")
    p.add_argument("--limit-alphabet", type=common.positive_int, default=1000,
                   help="most frequent characters kept")
    options.add_run_arguments(p, resume=False, threads=False)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    paths = expand_paths(args.train)
    options.prepare_output(args.output_dir, [paths], overwrite=args.overwrite, directory=True)
    options.overwrite_outputs(args, args.output_dir, OUTPUTS)
    output = train_wordpiece(paths, args.vocab_size, args.output_dir,
                             lowercase=args.lowercase, min_frequency=args.min_frequency,
                             limit_alphabet=args.limit_alphabet, progress=not args.quiet)
    size = sum(1 for _ in (output / VOCAB_TXT).open(encoding="utf-8"))
    print(f"{size:,} pieces in {output / VOCAB_TXT}")
