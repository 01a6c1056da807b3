"""``contextvec train-task``: train a task model (NER, SST-5, SST-2, TREC-6) with or without
contextual vectors and report dev (and test) scores as JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from contextvec.api import DEFAULT_MODEL, is_hf_bert_dir
from contextvec.cli.common import add_model_arguments, load_model
from contextvec.io.atomic import atomic_path
from contextvec.io.word_vectors import FORMATS, load_word_vectors
from contextvec.tasks.crf import SCHEMES
from contextvec.tasks.features import CACHE_ENV, DTYPES
from contextvec.tasks.finetune import FineTuneSettings, fine_tune
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

HELP = "train a task model (ner, sst5, sst2, trec) with or without contextual vectors, or fine-tune BERT"
DESCRIPTION = HELP + """.
ner: biLSTM-CRF over [word embedding; char CNN] on CoNLL-2003 files (IOB1; scored with seqeval on
IOB2). sst5/sst2: Stanford Sentiment Treebank PTB trees (root label; sst2 drops neutral). trec: TREC
label files (coarse 6 classes; without --dev a seeded 10% of train is the dev set). Contextual
vectors: learned scalar mixes (or a fixed combination, --layers) of the frozen encoder's layers at
the biLSTM input (and output), computed once per dataset through the feature cache. --fine-tune
instead trains the whole BERT of --model with a token (ner) or sequence classification head."""

# Per-task model defaults: the NER tagger of Lample et al. / Peters et al. (small), and a simple
# classifier (no char CNN: sentence labels depend little on spelling).
TASK_DEFAULTS = {
    "ner": {"word_dim": 50, "char_cnn": True, "lstm_layers": 2, "hidden": 100},
    "sst5": {"word_dim": 100, "char_cnn": False, "lstm_layers": 1, "hidden": 100},
    "sst2": {"word_dim": 100, "char_cnn": False, "lstm_layers": 1, "hidden": 100},
    "trec": {"word_dim": 100, "char_cnn": False, "lstm_layers": 1, "hidden": 100},
}
LAYER_CHOICES = ("mix", "last", "sum-last-4", "concat-last-4")


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
    ctx.add_argument("--layers", choices=LAYER_CHOICES,
                     help="mix: learned scalar mixes of all layers (default); last, sum-last-4, "
                     "concat-last-4: that fixed combination (BERT paper Table 7), no mix weights")
    ctx.add_argument("--last-layer-only", action="store_true", help="the same as --layers last")
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
                   help="NER tags the model predicts (bio = IOB2; bioul = BIOES, as allennlp's NER); "
                   "scoring is on IOB2 always")
    m.add_argument("--no-constraints", action="store_true", help="NER: no transition constraints in the CRF")
    f = p.add_argument_group("fine-tuning BERT (instead of a frozen-feature task model)")
    ft = FineTuneSettings()
    f.add_argument("--fine-tune", action="store_true",
                   help="train the whole BERT of --model (an HF BERT directory) with a token (ner) or "
                   "sequence classification head; the task-model and feature options do not apply")
    f.add_argument("--warmup", type=float, default=ft.warmup,
                   help=f"fraction of the steps with a linearly rising learning rate ({ft.warmup})")
    f.add_argument("--weight-decay", type=float, default=ft.weight_decay,
                   help=f"AdamW weight decay, not on biases and LayerNorm ({ft.weight_decay})")
    f.add_argument("--save-model", metavar="DIR",
                   help="write the fine-tuned model (best on dev) as an HF directory here")
    t = p.add_argument_group("training")
    d = TrainSettings()
    t.add_argument("--epochs", type=int,
                   help=f"at most N epochs ({d.epochs}; --fine-tune: exactly N, {ft.epochs})")
    t.add_argument("--patience", type=int, default=d.patience,
                   help=f"stop after N epochs without a better dev score ({d.patience}; not --fine-tune)")
    t.add_argument("--lr", type=float,
                   help=f"learning rate: Adam {d.lr}; --fine-tune: AdamW peak {ft.lr}")
    t.add_argument("--batch-size", type=int, default=d.batch_size,
                   help=f"sentences per batch ({d.batch_size})")
    t.add_argument("--clip", type=float, help=f"gradient-norm clipping ({d.clip}; --fine-tune: {ft.clip})")
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
        layer_norm=args.layer_norm, mix_dropout=args.mix_dropout, layers=_layers(args),
        tag_scheme=args.tag_scheme, constrained=not args.no_constraints,
    )


def _layers(args: argparse.Namespace) -> str:
    """``--layers`` (or its alias ``--last-layer-only``) as a ModelSettings value."""
    if args.last_layer_only and args.layers not in (None, "last"):
        raise ValueError(f"--last-layer-only is --layers last: it contradicts --layers {args.layers}")
    return "last" if args.last_layer_only else (args.layers or "mix").replace("-", "_")


def _given(value: float | None, default: float) -> float:
    """An option whose default depends on the mode (task model or --fine-tune)."""
    return default if value is None else value


def _model_name(args: argparse.Namespace) -> str | None:
    if args.no_contextual:
        return None
    return args.model or args.options_file or f"bundled {DEFAULT_MODEL}"


def read_splits(args: argparse.Namespace) -> tuple[Split, Split, Split | None]:
    """Train, dev and test (or None) from ``--train/--dev/--test``; trec without ``--dev`` carves
    a seeded 10% of train as dev."""
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
    if args.save_model and not args.fine_tune:
        raise ValueError("--save-model writes a fine-tuned BERT: it needs --fine-tune")
    report = _run_fine_tune(args) if args.fine_tune else _run_task_model(args)
    report.runtime_s["total"] = round(time.perf_counter() - started, 3)
    report.extra.update({
        "dev_carved_from_train": args.task == "trec" and not args.dev,
        "dev_split_seed": DEV_SPLIT_SEED if args.task == "trec" and not args.dev else None,
        "max_sentences": args.max_sentences,
    })
    _print_summary(report, args)
    if args.output:
        with atomic_path(args.output) as tmp:
            tmp.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")


def _run_task_model(args: argparse.Namespace) -> TaskReport:
    if args.no_contextual and (args.model or args.options_file or args.weight_file):
        raise ValueError("--no-contextual uses no model: drop --model/--options-file/--weight-file")
    if args.no_contextual and (args.layer_norm or args.last_layer_only or args.layers):
        raise ValueError("--layer-norm and --layers need contextual vectors (not --no-contextual)")
    if args.threads:
        torch.set_num_threads(args.threads)
    model_settings = _model_settings(args)
    d = TrainSettings()
    settings = TrainSettings(
        epochs=_given(args.epochs, d.epochs), patience=args.patience, lr=_given(args.lr, d.lr),
        batch_size=args.batch_size, clip=_given(args.clip, d.clip), l2=args.l2, seed=args.seed,
        train_fraction=args.train_fraction, device=args.device, progress=not args.quiet,
    )
    train, dev, test = read_splits(args)
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
                encoder, splits, layers=model_settings.layers, cache_dir=args.cache_dir,
                dtype=args.feature_dtype, batch_size=args.embed_batch_size, progress=not args.quiet,
            )
        except KeyboardInterrupt:
            print("\ncontextvec: interrupted; finished feature chunks are kept, rerun the same command",
                  file=sys.stderr)
            raise SystemExit(130) from None
    report, _ = train_task(args.task, train, dev, test, model_settings, settings, encoder, vectors)
    report.runtime_s["features"] = round(feature_seconds, 3)
    report.extra.update({
        "model": _model_name(args), "contextual": not args.no_contextual, "fine_tune": False,
        "word_vectors": args.word_vectors,
        "word_vectors_loaded": None if vectors is None else len(vectors.words),
    })
    return report


def _run_fine_tune(args: argparse.Namespace) -> TaskReport:
    """``--fine-tune``: the whole BERT of ``--model`` with a task head (tasks/finetune.py)."""
    frozen_only = {"--no-contextual": args.no_contextual, "--options-file/--weight-file":
                   args.options_file or args.weight_file, "--word-vectors": args.word_vectors,
                   "--layers/--last-layer-only": args.layers or args.last_layer_only,
                   "--layer-norm": args.layer_norm}
    given = [name for name, value in frozen_only.items() if value]
    if given:
        raise ValueError(f"{', '.join(given)}: options of the frozen-feature task model, not of --fine-tune")
    if not args.model:
        raise ValueError("--fine-tune needs --model BERT_DIR (a Hugging Face BERT directory)")
    if not is_hf_bert_dir(Path(args.model)):
        raise ValueError(f"--fine-tune trains BERT, and {args.model} is not a Hugging Face BERT directory "
                         "(config.json of model_type \"bert\" + weights); ELMo and CoVe models give frozen "
                         "features: drop --fine-tune")
    if args.threads:
        torch.set_num_threads(args.threads)
    d = FineTuneSettings()
    settings = FineTuneSettings(
        epochs=_given(args.epochs, d.epochs), lr=_given(args.lr, d.lr), batch_size=args.batch_size,
        warmup=args.warmup, weight_decay=args.weight_decay, clip=_given(args.clip, d.clip), seed=args.seed,
        train_fraction=args.train_fraction, device=args.device, progress=not args.quiet,
    )
    train, dev, test = read_splits(args)
    report, model = fine_tune(args.task, train, dev, test, args.model, settings)
    saved = str(model.save_pretrained(args.save_model, tokenizer_dir=args.model)) if args.save_model else None
    report.extra.update({"model": args.model, "contextual": True, "fine_tune": True, "saved_model": saved})
    return report


def _print_summary(report: TaskReport, args: argparse.Namespace) -> None:
    metric = report.metric
    what = report.extra["model"] or "no contextual vectors"
    how = "fine-tuned" if args.fine_tune else report.model_settings["placement"]
    sizes = ", ".join(f"{k} {v['sentences']} sent" for k, v in report.splits.items())
    print(f"{args.task} with {what} ({how}); {sizes}")
    print(f"best epoch {report.best_epoch} of {len(report.curve)}: dev {metric} {report.dev[metric]:.4f}"
          + (f", test {metric} {report.test[metric]:.4f}" if report.test else ""))
    for name, scores in (("dev", report.dev), ("test", report.test)):
        if scores and "by_mention" in scores:
            seen, unseen = scores["by_mention"]["seen"], scores["by_mention"]["unseen"]
            print(f"{name} f1 by mention: seen in train {seen['f1']:.4f} ({seen['gold']} entities), "
                  f"unseen {unseen['f1']:.4f} ({unseen['gold']})")
    for i, mix in enumerate(report.mixes):
        weights = " ".join(f"{w:.3f}" for w in mix["weights"])
        print(f"mix {i}: weights {weights}, gamma {mix['gamma']:.3f}")
    rt = report.runtime_s
    features = f"features {rt['features']:.1f} s, " if "features" in rt else ""
    print(f"runtime: {features}training {rt['train']:.1f} s ({rt['train_tokens_per_s']:.0f} tokens/s, "
          f"{rt['train_sentences_per_s']:.1f} sentences/s), total {rt['total']:.1f} s")
    if report.extra.get("saved_model"):
        print(f"saved the fine-tuned model to {report.extra['saved_model']}")
