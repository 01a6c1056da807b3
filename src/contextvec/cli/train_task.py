"""``contextvec train-task``: train a task model (NER, SST-5, SST-2, TREC-6) with or without
contextual vectors and report dev (and test) scores as JSON. The tasks come from the task table
(:mod:`contextvec.tasks.spec`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from contextvec.api import DEFAULT_MODEL, is_hf_bert_dir
from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.io.word_vectors import FORMATS, load_word_vectors
from contextvec.tasks.finetune import FineTuneSettings, fine_tune
from contextvec.tasks.fit import FitSettings, TaskReport
from contextvec.tasks.models import CLASSIFIERS, LAYERS, ModelSettings, wanted_words
from contextvec.tasks.readers import DEV_SPLIT_SEED
from contextvec.tasks.saved import encoder_reference, save_fine_tuned, save_task_model
from contextvec.tasks.schemes import SCHEMES
from contextvec.tasks.spec import TASK_SPECS, TASKS, get_task
from contextvec.tasks.split import Split, subsample
from contextvec.tasks.train import TrainSettings, attach_features, train_task

HELP = ("train a task model (ner, sst5, sst2, trec, trec50) with or without contextual vectors, "
        "or fine-tune BERT")
DESCRIPTION = HELP + ". " + "; ".join(f"{name}: {spec.summary}" for name, spec in TASK_SPECS.items()) + """.
Contextual vectors: learned scalar mixes (or a fixed combination, --layers) of the frozen encoder's
layers at the biLSTM input (and output), computed once per dataset through the feature cache.
--fine-tune instead trains the whole BERT of --model with a token (ner) or sequence classification
head."""
BCN_HIDDEN = 300
"""The BCN's hidden size in CoVe (McCann et al. 2017, section 5)."""
DEFAULTS_BY_TASK = ", ".join(f"{name} {spec.model_defaults['word_dim']}" for name, spec in TASK_SPECS.items())


def layer_combination(text: str) -> str:
    """argparse type of ``--layers``: the Python spelling (``sum_last_4``); the earlier
    ``sum-last-4`` is still read."""
    return text.replace("-", "_")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train-task", help=HELP, description=DESCRIPTION)
    p.add_argument("task", choices=TASKS, help="the task")
    opts.add_data_arguments(p, "test file: scored once with the best-on-dev model")
    common.add_model_arguments(p)
    ctx = p.add_argument_group("contextual vectors")
    ctx.add_argument("--no-contextual", action="store_true",
                     help="baseline without contextual vectors (no encoder is loaded)")
    ctx.add_argument("--placement", choices=("input", "input+output"), default="input",
                     help="where the mixes enter: [x; ELMo] at the biLSTM input, and [h; ELMo'] at "
                     "its output (default: input)")
    ctx.add_argument("--layer-norm", action="store_true",
                     help="layer-normalise each layer before mixing (default: off)")
    ctx.add_argument("--l2", type=common.non_negative_float, default=0.001,
                     help="lambda of the L2 penalty on the mix weights "
                     "(default: 0.001; 1.0 ~ equal average)")
    ctx.add_argument("--mix-dropout", type=common.probability, default=0.5,
                     help="dropout on each mix (default: 0.5)")
    ctx.add_argument("--layers", type=layer_combination, choices=LAYERS,
                     help="mix: learned scalar mixes of all layers (default); last, sum_last_4, "
                     "concat_last_4: that fixed combination (BERT paper Table 7), no mix weights")
    ctx.add_argument("--last-layer-only", action="store_true", help="the same as --layers last")
    opts.add_feature_arguments(ctx)
    m = p.add_argument_group("task model (defaults depend on the task)")
    m.add_argument("--word-vectors", help="initialise word embeddings from a GloVe/word2vec file "
                   "(looked up lowercased; default: random init)")
    m.add_argument("--word-vectors-format", choices=FORMATS, default="auto",
                   help="format of --word-vectors (default: auto)")
    m.add_argument("--word-dim", type=common.positive_int,
                   help=f"random word embedding size (default: {DEFAULTS_BY_TASK})")
    m.add_argument("--char-cnn", action=argparse.BooleanOptionalAction,
                   help="char CNN in the token representation (default: ner on, others off)")
    m.add_argument("--char-ngrams", type=common.non_negative_int, default=0, metavar="DIM",
                   help="add character n-gram embeddings of this size to each word (the mean of its 1- to "
                   "4-grams, trained with the task; Hashimoto et al. 2016, CoVe's 'Char': 100) "
                   "(default: 0, none)")
    m.add_argument("--hidden", type=common.positive_int,
                   help="biLSTM units per direction (default: 100; --classifier bcn: 300)")
    m.add_argument("--lstm-layers", type=common.positive_int, help="biLSTM layers (default: ner 2, others 1)")
    m.add_argument("--dropout", type=common.probability, default=0.5,
                   help="dropout in the task model (default: 0.5)")
    m.add_argument("--classifier", choices=CLASSIFIERS, default="pool",
                   help="sentence tasks: pool = biLSTM + max/mean pooling + MLP; bcn = CoVe's biattentive "
                   "classification network (hidden 300 unless --hidden; contextual vectors at its input) "
                   "(default: pool)")
    m.add_argument("--tag-scheme", choices=SCHEMES, default="bio",
                   help="NER tags the model predicts (bio = IOB2; bioul = BIOES, as allennlp's NER); "
                   "scoring is on IOB2 always (default: bio)")
    m.add_argument("--no-constraints", action="store_true",
                   help="NER: no transition constraints in the CRF (default: constrained)")
    f = p.add_argument_group("fine-tuning BERT (instead of a frozen-feature task model)")
    ft = FineTuneSettings()
    f.add_argument("--fine-tune", action="store_true",
                   help="train the whole BERT of --model (an HF BERT directory) with a token (ner) or "
                   "sequence classification head; the task-model and feature options do not apply")
    f.add_argument("--warmup", type=common.probability, default=ft.warmup,
                   help=f"fraction of the steps with a linearly rising learning rate (default: {ft.warmup})")
    f.add_argument("--weight-decay", type=common.non_negative_float, default=ft.weight_decay,
                   help=f"AdamW weight decay, not on biases and LayerNorm (default: {ft.weight_decay})")
    t = p.add_argument_group("training")
    d = TrainSettings()
    opts.add_training_arguments(
        t, epochs=None, lr=None, batch_size=d.batch_size, seed=d.seed,
        epochs_help=f"at most N epochs (default: {d.epochs}; --fine-tune: exactly N, {ft.epochs})",
        lr_help=f"learning rate (default: Adam {d.lr}; --fine-tune: AdamW peak {ft.lr})",
        batch_help=f"sentences per training batch (default: {d.batch_size})")
    t.add_argument("--patience", type=common.positive_int, default=d.patience,
                   help=f"stop after N epochs without a better dev score (default: {d.patience}; "
                   "not --fine-tune)")
    t.add_argument("--clip", type=common.positive_float,
                   help=f"gradient-norm clipping (default: {d.clip}; --fine-tune: {ft.clip})")
    t.add_argument("--train-fraction", type=opts.fraction, default=1.0,
                   help="train on a seeded random fraction of the training sentences (default: 1.0)")
    opts.add_output_arguments(p)
    p.add_argument("--save-model", metavar="DIR",
                   help="write the trained model (best on dev) here for `contextvec predict` and "
                   "contextvec.tasks.load_task_model (a fine-tuned BERT: an HF directory; "
                   "default: not saved)")
    p.set_defaults(run=run)


def _model_settings(args: argparse.Namespace) -> ModelSettings:
    defaults = get_task(args.task).model_defaults

    def pick(name: str):
        value = getattr(args, name)
        return defaults[name] if value is None else value

    if args.classifier == "bcn" and args.placement != "input":
        raise ValueError("--classifier bcn reads contextual vectors at its input only: drop --placement")
    hidden = BCN_HIDDEN if args.classifier == "bcn" and args.hidden is None else pick("hidden")
    return ModelSettings(
        word_dim=pick("word_dim"), char_cnn=pick("char_cnn"), hidden=hidden, classifier=args.classifier,
        char_ngram_dim=args.char_ngrams,
        lstm_layers=pick("lstm_layers"), dropout=args.dropout,
        placement="none" if args.no_contextual else args.placement,
        layer_norm=args.layer_norm, mix_dropout=args.mix_dropout, layers=_layers(args),
        tag_scheme=args.tag_scheme, constrained=not args.no_constraints,
    )


def _layers(args: argparse.Namespace) -> str:
    """``--layers`` (or its alias ``--last-layer-only``) as a ModelSettings value."""
    if args.last_layer_only and args.layers not in (None, "last"):
        raise ValueError(f"--last-layer-only is --layers last: it contradicts --layers {args.layers}")
    return "last" if args.last_layer_only else (args.layers or "mix")


def _given(value: float | None, default: float) -> float:
    """An option whose default depends on the mode (task model or --fine-tune)."""
    return default if value is None else value


def read_splits(args: argparse.Namespace) -> tuple[Split, Split, Split | None]:
    """Train, dev and test (or None) from ``--train/--dev/--test``; trec without ``--dev`` carves
    a seeded 10% of train as dev."""
    return get_task(args.task).load_splits(args.train, args.dev, args.test, args.max_sentences)


def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    inputs = opts.check_inputs(args, "train", "dev", "test", "word_vectors")
    opts.check_outputs(args, inputs, args.output)
    if args.save_model is not None:  # "" too: refused, never skipped
        common.check_output(args.save_model, inputs=[args.model], overwrite=args.overwrite, directory=True)
    report = _run_fine_tune(args) if args.fine_tune else _run_task_model(args)
    report.runtime_s["total"] = round(time.perf_counter() - started, 3)
    carved = args.dev is None and get_task(args.task).carves_dev
    report.extra.update({
        "dev_carved_from_train": carved, "dev_split_seed": DEV_SPLIT_SEED if carved else None,
        "max_sentences": args.max_sentences,
    })
    _print_summary(report, args)
    if args.output:
        opts.write_json(args.output, report.to_dict())


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
        encoder = common.load_model(args)
        with opts.resumable_features():
            feature_seconds = attach_features(
                encoder, splits, layers=model_settings.layers, cache_dir=args.cache_dir,
                dtype=args.feature_dtype, batch_size=args.embed_batch_size, progress=not args.quiet,
            )
    report, model = train_task(args.task, train, dev, test, model_settings, settings, encoder, vectors)
    report.runtime_s["features"] = round(feature_seconds, 3)
    saved = None
    if args.save_model:
        saved = str(save_task_model(
            args.save_model, args.task, model, reported=_reported(report), encoder=encoder,
            encoder_ref=None if encoder is None else encoder_reference(
                args.model or (None if args.options_file else DEFAULT_MODEL), args.options_file,
                args.weight_file),
            features={"dtype": args.feature_dtype, "embed_batch_size": args.embed_batch_size},
            eval_batch_size=max(settings.batch_size, 64), seen_mentions=_seen(args.task, train, settings),
        ))
    report.extra.update({
        "model": None if args.no_contextual else opts.model_name(args), "contextual": not args.no_contextual,
        "fine_tune": False, "word_vectors": args.word_vectors,
        "word_vectors_loaded": None if vectors is None else len(vectors.words), "saved_model": saved,
    })
    return report


def _run_fine_tune(args: argparse.Namespace) -> TaskReport:
    """``--fine-tune``: the whole BERT of ``--model`` with a task head (tasks/finetune.py)."""
    frozen_only = {"--no-contextual": args.no_contextual, "--options-file/--weight-file":
                   args.options_file or args.weight_file, "--word-vectors": args.word_vectors,
                   "--layers/--last-layer-only": args.layers or args.last_layer_only,
                   "--layer-norm": args.layer_norm, "--classifier bcn": args.classifier == "bcn",
                   "--char-ngrams": args.char_ngrams}
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
    saved = None
    if args.save_model:
        saved = str(save_fine_tuned(
            args.save_model, args.task, model, base_model=args.model, reported=_reported(report),
            eval_batch_size=max(settings.batch_size, 64), seen_mentions=_seen(args.task, train, settings),
        ))
    report.extra.update({"model": args.model, "contextual": True, "fine_tune": True, "saved_model": saved})
    return report


def _seen(task: str, train: Split, settings: FitSettings) -> set[str] | None:
    """The entity mentions of the training sentences the model saw (NER's seen/unseen scores)."""
    return get_task(task).seen_mentions(subsample(train, settings.train_fraction, settings.seed))


def _reported(report: TaskReport) -> dict:
    """The scores a saved model keeps: the metric on dev (and test) as training reported it."""
    return {"metric": report.metric, "dev": report.dev[report.metric],
            "test": None if report.test is None else report.test[report.metric]}


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
        print(f"saved the model to {report.extra['saved_model']} (run it with: contextvec predict "
              f"{report.extra['saved_model']} INPUT)")
