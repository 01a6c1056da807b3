"""``contextvec eval-bert``: held-out masked-LM accuracy / perplexity and NSP accuracy of a BERT."""

from __future__ import annotations

import argparse

import torch

from contextvec.encoders.bert.heads import load_pretraining_model
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.training.bert_trainer import EVAL_SEED, evaluate
from contextvec.training.corpus import expand_paths

HELP = "masked-LM accuracy and perplexity and NSP accuracy of a BERT with pretraining heads"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval-bert", help=HELP, description=HELP)
    p.add_argument("files", nargs="+", help="held-out files or globs, a blank line between documents")
    p.add_argument("--model", required=True,
                   help="HF BERT directory with pretraining heads (train-bert's model/)")
    p.add_argument("--max-seq-length", type=int,
                   help="pieces per pair (default: 128, or the model's max_position_embeddings if less)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=EVAL_SEED, help="fixes masking and pairing")
    p.add_argument("--masked-lm-prob", type=float, default=0.15)
    p.add_argument("--whole-word-mask", action="store_true")
    p.add_argument("--no-sentences", dest="sentences", action="store_false",
                   help="a line is a segment (default: split lines into sentences)")
    p.add_argument("--max-pairs", type=int, help="stop after this many pairs")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_pretraining_model(args.model).to(args.device)
    tokenizer = WordPieceTokenizer.from_directory(args.model)
    length = args.max_seq_length or min(128, model.config.max_position_embeddings)
    scores = evaluate(model, tokenizer, expand_paths(args.files), length, args.batch_size, args.seed,
                      args.masked_lm_prob, args.whole_word_mask, sentences=args.sentences,
                      max_pairs=args.max_pairs, progress=not args.quiet)
    print(scores)
