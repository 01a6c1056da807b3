"""``contextvec eval-bert``: held-out masked-LM accuracy / perplexity and NSP accuracy of a BERT."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextvec.cli import common
from contextvec.cli import training_options as options
from contextvec.encoders.bert.heads import load_pretraining_model
from contextvec.encoders.bert.loader import HF_BERT
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.registry import refuse_other_kinds
from contextvec.training.bert.evaluate import EVAL_SEED, EvalSettings, evaluate_pretraining
from contextvec.training.bert.instances import InstanceSettings
from contextvec.training.corpus import expand_paths

HELP = "masked-LM accuracy and perplexity and NSP accuracy of a BERT with pretraining heads"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = options.add_evaluation_command(
        subparsers, "eval-bert", HELP, files="held-out files or globs, a blank line between documents",
        model="HF BERT directory with pretraining heads (train-bert's model/)")
    p.add_argument("--max-seq-length", type=common.positive_int,
                   help=f"pieces per pair (default: {InstanceSettings.max_seq_length}, or the model's "
                        "max_position_embeddings if less)")
    p.add_argument("--batch-size", type=common.positive_int, default=32, help="sentence pairs per batch")
    p.add_argument("--seed", type=common.seed, default=EVAL_SEED,
                   help="fixes masking and pairing")
    p.add_argument("--masked-lm-prob", type=common.probability, default=InstanceSettings.masked_lm_prob,
                   help="share of pieces predicted")
    p.add_argument("--whole-word-mask", action="store_true", help="mask all pieces of a word together")
    p.add_argument("--no-sentences", dest="sentences", action="store_false",
                   help="a line is a segment (default: split lines into sentences)")
    p.add_argument("--max-pairs", type=common.positive_int, help="stop after this many pairs (default: all)")
    options.add_device_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    options.set_threads(args)
    paths = expand_paths(args.files)
    model_dir = _model_dir(args.model)
    refuse_other_kinds(model_dir, (HF_BERT,), "a BERT with its pretraining heads (train-bert's model/)",
                       args.model)
    model = load_pretraining_model(model_dir).to(args.device)
    tokenizer = WordPieceTokenizer.from_directory(model_dir)
    length = args.max_seq_length or min(InstanceSettings.max_seq_length, model.config.max_position_embeddings)
    instances = InstanceSettings(length, args.masked_lm_prob, args.whole_word_mask,
                                 sentences=args.sentences, seed=args.seed)
    settings = EvalSettings(instances, args.batch_size, args.max_pairs, progress=not args.quiet)
    scores = evaluate_pretraining(model, tokenizer, paths, settings)
    print(scores)


def _model_dir(model: str) -> Path:
    """``--model`` as a directory (a bundled model's name resolved), or a one-line error."""
    from contextvec.api import resolve_model

    path = resolve_model(model)
    if not path.is_dir():
        raise FileNotFoundError(f"no model directory {model}: eval-bert needs a BERT with its pretraining "
                                "heads (train-bert's model/)")
    return path
