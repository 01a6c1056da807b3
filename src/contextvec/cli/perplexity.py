"""``contextvec perplexity``: exact full-softmax perplexity of a trained model on a file."""

from __future__ import annotations

import argparse

import torch

from contextvec.text.tokenize import Tokenizer
from contextvec.training.corpus import expand_paths, read_sentences
from contextvec.training.trainer import evaluate, load_model

HELP = "forward, backward and average perplexity of a trained model on held-out text"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("perplexity", help=HELP, description=HELP)
    p.add_argument("files", nargs="+", help="text files or globs (plain or .gz)")
    p.add_argument("--model", required=True,
                   help="a model directory written by train-bilm, or elmo-en-small (bundled)")
    p.add_argument("--rows", type=int, default=32, help="parallel streams (32)")
    p.add_argument("--unroll", type=int, default=20, help="tokens per stream per step (20)")
    p.add_argument("--contiguous", action="store_true",
                   help="read the file as --rows contiguous streams, so each sentence is scored "
                        "after its real predecessors (the PTB convention; costs one extra pass)")
    p.add_argument("--tokenizer", choices=Tokenizer.NAMES, default="whitespace",
                   help="how lines become tokens (as in train-bilm; default whitespace)")
    p.add_argument("--threads", type=int)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    model, vocab = load_model(args.model)
    paths = expand_paths(args.files)
    ppl = evaluate(model, lambda: read_sentences(paths, args.tokenizer), vocab, args.rows, args.unroll,
                   progress=not args.quiet, contiguous=args.contiguous)
    print(f"tokens {ppl.tokens:,}")
    print(f"forward perplexity {ppl.forward:.2f}")
    if ppl.backward is not None:
        print(f"backward perplexity {ppl.backward:.2f}")
    print(f"average perplexity {ppl.average:.2f}")
