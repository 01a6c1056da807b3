"""``contextvec train-task``: train a task model (NER, SST-5, SST-2, TREC-6) with or without
contextual vectors and report dev (and test) scores as JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from contextvec.api import DEFAULT_MODEL
from contextvec.cli.common import add_model_arguments, load_model
from contextvec.io.atomic import atomic_path
from contextvec.io.word_vectors import FORMATS, load_word_vectors
from contextvec.tasks.crf import SCHEMES
from contextvec.tasks.features import CACHE_ENV, DTYPES
from contextvec.tasks.models import ModelSettings, wanted_words
from contextvec.tasks.readers import DEV_SPLIT_SEED, LabeledSentences, carve_dev
from contextvec.tasks.train import (
    TASKS,
    Split,
    TaskReport,
    TrainSettings,
    attach_features,
    load_split,
    train_task,
)

HELP = "train a task model (ner, sst5, sst2, trec) with or without contextual vectors"
DESCRIPTION = HELP + """.
ner: biLSTM-CRF over [word embedding; char CNN] on CoNLL-2003 files (IOB1; scored with seqeval on
IOB2). sst5/sst2: Stanford Sentiment Treebank PTB trees (root label; sst2 drops neutral). trec: TREC
label files (coarse 6 classes; without --dev a seeded 10% of train is the dev set). Contextual
vectors: learned scalar mixes of the frozen encoder's layers at the biLSTM input (and output),
computed once per dataset through the feature cache."""

# Per-task model defaults: the NER tagger of Lample et al. / Peters et al. (small), and a simple
# classifier (no char CNN: sentence labels depend little on spelling).
TASK_DEFAULTS = {
    "ner": {"word_dim": 50, "char_cnn": True, "lstm_layers": 2, "hidden": 100},
    "sst5": {"word_dim": 100, "char_cnn": False, "lstm_layers": 1, "hidden": 100},
    "sst2": {"word_dim": 100, "char_cnn": False, "lstm_layers": 1, "hidden": 100},
    "trec": {"word_dim": 100, "char_cnn": False, "lstm_layers": 1, "hidden": 100},
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train-task", help=HELP, description=DESCRIPTION)
    p.add_argument("task", choices=TASKS, help="the task")
    p.add_argument("--train", required=True, help="training file (plain or .gz)")
    p.add_argument("--dev", help="dev file: selects the epoch (required except for trec)")
    p.add_argument("--test", help="test file (optional): scored once with the best-on-dev model")
    p.add_argument("--max-sentences", type=int, help="read only the first N sentences of each file")
    add_model_arguments(p)
    ctx = p.add_argument_group("contextual vectors")
    ctx.add_argument("--no-contextual", action="store_true",
                     help="baseline without contextual vectors (no encoder is loaded)")
    ctx.add_argument("--placement", choices=("input", "input+output"), default="input",
                     help="where the mixes enter: [x; ELMo] at the biLSTM input, and [h; ELMo'] at "
                     "its output (input)")
    ctx.add_argument("--layer-norm", action="store_true", help="layer-normalise each layer before mixing")
    ctx.add_argument("--l2", type=float, default=0.001,
                     help="lambda of the L2 penalty on the mix weights (0.001; 1.0 ~ equal average)")
    ctx.add_argument("--mix-dropout", type=float, default=0.5, help="dropout on each mix (0.5)")
    ctx.add_argument("--last-layer-only", action="store_true",
                     help="use only the top layer (a fixed mix) instead of learned mixes")
    ctx.add_argument("--cache-dir",
                     help=f"feature cache (default: ${CACHE_ENV} or ~/.cache/contextvec/features)")
    ctx.add_argument("--feature-dtype", choices=DTYPES, default="float32",
                     help="stored (and in-memory) precision of the features (float32)")
    ctx.add_argument("--embed-batch-size", type=int, default=64,
                     help="sentences per encoder batch when computing features (64)")
    m = p.add_argument_group("task model (defaults depend on the task)")
    m.add_argument("--word-vectors", help="initialise word embeddings from a GloVe/word2vec file "
                   "(looked up lowercased; default: random init)")
    m.add_argument("--word-vectors-format", choices=FORMATS, default="auto", help="(auto)")
    m.add_argument("--word-dim", type=int, help="random word embedding size (ner 50, others 100)")
    m.add_argument("--char-cnn", action=argparse.BooleanOptionalAction,
                   help="char CNN in the token representation (ner: on, others: off)")
    m.add_argument("--hidden", type=int, help="biLSTM units per direction (100)")
    m.add_argument("--lstm-layers", type=int, help="biLSTM layers (ner 2, others 1)")
    m.add_argument("--dropout", type=float, default=0.5, help="dropout in the task model (0.5)")
    m.add_argument("--tag-scheme", choices=SCHEMES, default="bio",
                   help="NER tags the model predicts (bio = IOB2); scoring is on IOB2 always")
    m.add_argument("--no-constraints", action="store_true", help="NER: no transition constraints in the CRF")
    t = p.add_argument_group("training")
    d = TrainSettings()
    t.add_argument("--epochs", type=int, default=d.epochs, help=f"at most N epochs ({d.epochs})")
    t.add_argument("--patience", type=int, default=d.patience,
                   help=f"stop after N epochs without a better dev score ({d.patience})")
    t.add_argument("--lr", type=float, default=d.lr, help=f"Adam learning rate ({d.lr})")
    t.add_argument("--batch-size", type=int, default=d.batch_size,
                   help=f"sentences per batch ({d.batch_size})")
    t.add_argument("--clip", type=float, default=d.clip, help=f"gradient-norm clipping ({d.clip})")
    t.add_argument("--seed", type=int, default=d.seed, help=f"random seed ({d.seed})")
    t.add_argument("--train-fraction", type=float, default=1.0,
                   help="train on a seeded random fraction of the training sentences (1.0)")
    p.add_argument("--output", help="write the results as JSON here (atomically)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(run=run)


def _model_settings(args: argparse.Namespace) -> ModelSettings:
    defaults = TASK_DEFAULTS[args.task]

    def pick(name: str):
        value = getattr(args, name)
        return defaults[name] if value is None else value

    return ModelSettings(
        word_dim=pick("word_dim"), char_cnn=pick("char_cnn"), hidden=pick("hidden"),
        lstm_layers=pick("lstm_layers"), dropout=args.dropout,
        placement="none" if args.no_contextual else args.placement,
        layer_norm=args.layer_norm, mix_dropout=args.mix_dropout, last_layer_only=args.last_layer_only,
        tag_scheme=args.tag_scheme, constrained=not args.no_constraints,
    )


def _model_name(args: argparse.Namespace) -> str | None:
    if args.no_contextual:
        return None
    return args.model or args.options_file or f"bundled {DEFAULT_MODEL}"


def _read_splits(args: argparse.Namespace) -> tuple[Split, Split, Split | None]:
    if not args.dev and args.task != "trec":
        raise ValueError(f"{args.task} needs --dev (only trec carves a dev set out of train)")
    train = load_split(args.task, args.train, args.max_sentences)
    if args.dev:
        dev = load_split(args.task, args.dev, args.max_sentences)
    else:
        rest, carved = carve_dev(LabeledSentences(train.sentences, train.labels, train.source))
        train = Split(rest.sentences, rest.labels, rest.source)
        dev = Split(carved.sentences, carved.labels, carved.source)
    test = load_split(args.task, args.test, args.max_sentences) if args.test else None
    return train, dev, test


def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    if args.no_contextual and (args.model or args.options_file or args.weight_file):
        raise ValueError("--no-contextual uses no model: drop --model/--options-file/--weight-file")
    if args.no_contextual and (args.layer_norm or args.last_layer_only):
        raise ValueError("--layer-norm and --last-layer-only need contextual vectors (not --no-contextual)")
    if args.threads:
        torch.set_num_threads(args.threads)
    model_settings = _model_settings(args)
    settings = TrainSettings(
        epochs=args.epochs, patience=args.patience, lr=args.lr, batch_size=args.batch_size, clip=args.clip,
        l2=args.l2, seed=args.seed, train_fraction=args.train_fraction, device=args.device,
        progress=not args.quiet,
    )
    train, dev, test = _read_splits(args)
    splits = [s for s in (train, dev, test) if s is not None]
    vectors = None
    if args.word_vectors:
        vectors = load_word_vectors(args.word_vectors, args.word_vectors_format,
                                    keep=wanted_words(s for split in splits for s in split.sentences))
    encoder = None
    feature_seconds = 0.0
    if not args.no_contextual:
        encoder = load_model(args)
        try:
            feature_seconds = attach_features(
                encoder, splits, top_only=args.last_layer_only, cache_dir=args.cache_dir,
                dtype=args.feature_dtype, batch_size=args.embed_batch_size, progress=not args.quiet,
            )
        except KeyboardInterrupt:
            print("\ncontextvec: interrupted; finished feature chunks are kept, rerun the same command",
                  file=sys.stderr)
            raise SystemExit(130) from None
    report, _ = train_task(args.task, train, dev, test, model_settings, settings, encoder, vectors)
    report.runtime_s["features"] = round(feature_seconds, 3)
    report.runtime_s["total"] = round(time.perf_counter() - started, 3)
    report.extra.update({
        "model": _model_name(args), "contextual": not args.no_contextual,
        "word_vectors": args.word_vectors,
        "word_vectors_loaded": None if vectors is None else len(vectors.words),
        "dev_carved_from_train": args.task == "trec" and not args.dev,
        "dev_split_seed": DEV_SPLIT_SEED if args.task == "trec" and not args.dev else None,
        "max_sentences": args.max_sentences,
    })
    _print_summary(report, args)
    if args.output:
        with atomic_path(args.output) as tmp:
            tmp.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")


def _print_summary(report: TaskReport, args: argparse.Namespace) -> None:
    metric = report.metric
    what = _model_name(args) or "no contextual vectors"
    sizes = ", ".join(f"{k} {v['sentences']} sent" for k, v in report.splits.items())
    print(f"{args.task} with {what} ({report.model_settings['placement']}); {sizes}")
    print(f"best epoch {report.best_epoch} of {len(report.curve)}: dev {metric} {report.dev[metric]:.4f}"
          + (f", test {metric} {report.test[metric]:.4f}" if report.test else ""))
    for i, mix in enumerate(report.mixes):
        weights = " ".join(f"{w:.3f}" for w in mix["weights"])
        print(f"mix {i}: weights {weights}, gamma {mix['gamma']:.3f}")
    rt = report.runtime_s
    print(f"runtime: features {rt['features']:.1f} s, training {rt['train']:.1f} s "
          f"({rt['train_tokens_per_s']:.0f} tokens/s), total {rt['total']:.1f} s")
