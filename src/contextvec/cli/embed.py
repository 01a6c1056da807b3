"""``contextvec embed``: a text file (one tokenized sentence per line) -> HDF5 of vectors."""

from __future__ import annotations

import argparse

from contextvec.bulk import embed_file
from contextvec.cli.common import add_model_arguments, load_model
from contextvec.io.text_lines import EMPTY_LINE_POLICIES, INVALID_UTF8_POLICIES

HELP = "embed a file of whitespace-tokenized sentences into HDF5 (allennlp `elmo` layout)"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("embed", help=HELP, description=HELP)
    p.add_argument("input_file", help="UTF-8 text, one whitespace-tokenized sentence per line")
    p.add_argument("output_file", help="HDF5 file to write")
    layers = p.add_mutually_exclusive_group(required=True)
    layers.add_argument("--all", dest="layers", action="store_const", const="all",
                        help="every layer: datasets of shape (layers, tokens, dim)")
    layers.add_argument("--top", dest="layers", action="store_const", const="top",
                        help="the top layer: (tokens, dim)")
    layers.add_argument("--average", dest="layers", action="store_const", const="average",
                        help="the mean of the layers: (tokens, dim)")
    add_model_arguments(p)
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (64)")
    p.add_argument("--max-tokens", type=int, default=4096,
                   help="padded tokens per batch at most (4096); longer sentences run alone")
    p.add_argument("--use-sentence-keys", action="store_true",
                   help="key datasets by sentence text instead of line index (no '/', unique)")
    p.add_argument("--forget-sentences", action="store_true",
                   help="do not write the sentence_to_index dataset")
    p.add_argument("--resume", action="store_true",
                   help="finish an interrupted run, computing only what is missing")
    p.add_argument("--empty-lines", choices=EMPTY_LINE_POLICIES, default="error",
                   help="error (default): refuse, naming the lines; keep: a 0-token dataset")
    p.add_argument("--invalid-utf8", choices=INVALID_UTF8_POLICIES, default="error",
                   help="error (default): refuse, naming the lines; replace: decode with U+FFFD")
    p.add_argument("--chunk-lines", type=int, default=2048,
                   help="lines per resumable shard (2048); a resumed run keeps the first value")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    encoder = load_model(args)
    path = embed_file(
        encoder, args.input_file, args.output_file, layers=args.layers,
        batch_size=args.batch_size, max_tokens=args.max_tokens,
        sentence_keys=args.use_sentence_keys, forget_sentences=args.forget_sentences,
        resume=args.resume, empty_lines=args.empty_lines, invalid_utf8=args.invalid_utf8,
        chunk_lines=args.chunk_lines, progress=not args.quiet,
    )
    print(f"wrote {path}")
