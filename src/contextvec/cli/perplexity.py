"""``contextvec perplexity``: exact full-softmax perplexity of a trained model on a file."""

from __future__ import annotations

import argparse

from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.documents.settings import CONTEXTS
from contextvec.io.document_formats import DOCUMENT_FORMATS, DocumentFormat
from contextvec.text.tokenize import Tokenizer
from contextvec.training.bilm.context import evaluate_context_perplexity, read_token_documents
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
    p.add_argument("--context", choices=CONTEXTS,
                   help="read the input as documents (--documents) and score every sentence alone "
                        "from the zero state (sentence), or every document's sentences in order "
                        "with the LSTM states carried between them and reset at each document "
                        "(document); the same tokens either way. Without it, sentences are dealt "
                        "to the --rows streams as in training")
    p.add_argument("--documents", choices=DOCUMENT_FORMATS,
                   help="how --context splits the input into documents: blank-lines (default: "
                        "blank or -DOCSTART- lines between documents, one sentence per line, as "
                        "embed --documents) or wikitext (an article from each ' = Title = ' line, "
                        "paragraphs cut into sentences after . ? ! tokens)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    options.set_threads(args)
    paths = expand_paths(args.files)
    if args.context is None and args.documents:
        raise ValueError("--documents needs --context")
    if args.context is not None and args.contiguous:
        raise ValueError("--contiguous: not with --context, which sets where states are carried")
    model, vocab = load_model(args.model)
    if args.context is None:
        ppl = evaluate_perplexity(model, lambda: read_sentences(paths, args.tokenizer), vocab, args.rows,
                                  args.unroll, progress=not args.quiet, contiguous=args.contiguous)
    else:
        documents = read_token_documents(paths, args.documents or DocumentFormat.BLANK_LINES, args.tokenizer)
        ppl = evaluate_context_perplexity(model, documents, vocab, args.context, args.rows, args.unroll,
                                          progress=not args.quiet)
    print(f"tokens {ppl.tokens:,}")
    print(f"forward perplexity {ppl.forward:.2f}")
    if ppl.backward is not None:
        print(f"backward perplexity {ppl.backward:.2f}")
    print(f"average perplexity {ppl.average:.2f}")
