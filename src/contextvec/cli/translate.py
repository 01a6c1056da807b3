"""``contextvec translate`` and ``contextvec bleu``: use a model trained by ``train-mt``."""

from __future__ import annotations

import argparse
import json
import sys

from contextvec.choices import spellings
from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.io.atomic import atomic_path
from contextvec.text.tokenize import LINE_TOKENIZERS
from contextvec.training.mt.config import BleuTokenize
from contextvec.training.mt.data import read_parallel_side, tokenize_lines
from contextvec.training.mt.translator import bleu, bleu_signature, load_translator, translate

HELP = "translate a file with a model trained by train-mt"
BLEU_HELP = "translate a source file and score it against references (sacrebleu, uncased)"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a train-mt output directory or its model/")
    p.add_argument("--beam", type=common.positive_int, default=5, help="beam size (1: greedy)")
    p.add_argument("--length-penalty", type=common.non_negative_float, default=0.0,
                   help="GNMT length normalisation alpha for the beam's final choice (0: off)")
    p.add_argument("--batch-size", type=common.positive_int, default=64,
                   help="sentences per batch (divided by the beam)")
    p.add_argument("--tokenizer", choices=LINE_TOKENIZERS, default="whitespace",
                   help="how input lines become tokens (whitespace: pre-tokenized input)")
    options.add_device_argument(p)
    options.add_run_arguments(p, resume=False)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = options.add_command(subparsers, "translate", HELP)
    p.add_argument("input", help="source sentences, one per line (plain or .gz)")
    _common(p)
    p.add_argument("--output", help="output file (written atomically; default: stdout)")
    p.set_defaults(run=run_translate)

    b = options.add_command(subparsers, "bleu", BLEU_HELP)
    b.add_argument("--src", required=True, help="source file, one sentence per line")
    b.add_argument("--ref", required=True, help="reference translations, line-aligned")
    _common(b)
    b.add_argument("--tokenize", choices=spellings(BleuTokenize), default="none",
                   help="sacrebleu tokenization: none (tokenized BLEU on the given tokens, for "
                   "Moses-tokenized references) or 13a")
    b.add_argument("--output", help="also write the translations here (default: not written)")
    b.add_argument("--json", action="store_true", help="print the score as JSON")
    b.set_defaults(run=run_bleu)


def _translate_file(args: argparse.Namespace, path: str) -> list[str]:
    options.set_threads(args)
    model, vocab = load_translator(args.model, args.device)
    sources = tokenize_lines(read_parallel_side(path), args.tokenizer)
    hyps = translate(model, vocab, sources, beam=args.beam, batch_size=args.batch_size,
                     length_penalty=args.length_penalty, progress=not args.quiet)
    return [" ".join(h) for h in hyps]


def _write(lines: list[str], output: str | None) -> None:
    text = "".join(line + "\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
        return
    with atomic_path(output) as tmp:
        tmp.write_text(text, encoding="utf-8")


def run_translate(args: argparse.Namespace) -> None:
    options.prepare_output(args.output, [args.input], overwrite=args.overwrite)
    _write(_translate_file(args, args.input), args.output)


def run_bleu(args: argparse.Namespace) -> None:
    options.prepare_output(args.output, [args.src, args.ref], overwrite=args.overwrite)
    refs = read_parallel_side(args.ref)
    n_src = len(read_parallel_side(args.src))
    if n_src != len(refs):
        raise ValueError(f"{args.src} has {n_src} lines but {args.ref} has {len(refs)}")
    hyps = _translate_file(args, args.src)
    if args.output:
        _write(hyps, args.output)
    score = bleu([h.split() for h in hyps], tokenize_lines(refs, args.tokenizer), args.tokenize)
    signature = bleu_signature(args.tokenize)
    if args.json:
        print(json.dumps({"bleu": score.score, "beam": args.beam, "sentences": len(hyps),
                          "signature": signature, "score": str(score)}))
    else:
        print(f"{score} (beam {args.beam})")
        print(f"signature: {signature}")
