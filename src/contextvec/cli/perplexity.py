"""``contextvec perplexity``: exact full-softmax perplexity of a trained model on a file."""

from __future__ import annotations

import argparse

from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.text.tokenize import Tokenizer
from contextvec.training.bilm.model_files import evaluate_perplexity, load_model
from contextvec.training.corpus import expand_paths, read_sentences

HELP = "forward, backward and average perplexity of a trained model on held-out text"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = options.add_evaluation_command(
        subparsers, "perplexity", HELP, files="text files or globs (plain or .gz)",
        model="a model directory written by train-bilm, or elmo-en-small (bundled)")
    p.add_argument("--rows", type=common.positive_int, default=32, help="parallel streams")
    p.add_argument("--unroll", type=common.positive_int, default=20, help="tokens per stream per step")
    p.add_argument("--contiguous", action="store_true",
                   help="read the file as --rows contiguous streams, so each sentence is scored "
                        "after its real predecessors (the PTB convention; costs one extra pass)")
    p.add_argument("--tokenizer", choices=Tokenizer.NAMES, default="whitespace",
                   help="how lines become tokens (as in train-bilm)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    options.set_threads(args)
    paths = expand_paths(args.files)
    model, vocab = load_model(args.model)
    ppl = evaluate_perplexity(model, lambda: read_sentences(paths, args.tokenizer), vocab, args.rows,
                              args.unroll, progress=not args.quiet, contiguous=args.contiguous)
    print(f"tokens {ppl.tokens:,}")
    print(f"forward perplexity {ppl.forward:.2f}")
    if ppl.backward is not None:
        print(f"backward perplexity {ppl.backward:.2f}")
    print(f"average perplexity {ppl.average:.2f}")
