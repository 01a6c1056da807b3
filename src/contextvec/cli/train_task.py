"""``contextvec train-task``: train a task model (NER, SST-5, SST-2, TREC, GLUE's small tasks) with
or without contextual vectors and report dev (and test) scores as JSON. The tasks come from the task table
(:mod:`contextvec.tasks.spec`)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.documents.settings import CONTEXTS, Context
from contextvec.features import FeatureSettings
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.jobs.qa import QAFiles, TrainQASettings, run_train_qa
from contextvec.jobs.train_task import TrainMode, TrainTaskSettings, run_train_task
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.qa.frozen import SpanTrainSettings
from contextvec.tasks.qa.windows import WindowSettings
from contextvec.tasks.spec import TASK_SPECS, TASKS, TaskSpec, get_task
from contextvec.tasks.train import TrainSettings

HELP = ("train a task model (NER, SST, TREC, GLUE's tasks, your sentence pairs) with or without "
        "contextual vectors, or fine-tune BERT")
DESCRIPTION = HELP + ". " + "; ".join(f"{name}: {spec.summary}" for name, spec in TASK_SPECS.items()) + """.
Contextual vectors: learned scalar mixes (or a fixed combination, --layers) of the frozen encoder's
layers at the biLSTM input (and output), computed once per dataset through the feature cache.
Sentence-pair tasks (mrpc, rte, stsb, wnli) train a pair model: a shared biLSTM over both
sentences, attention between them, an MLP over [u; v; |u-v|; u*v]; stsb predicts a score.
--fine-tune instead trains the whole BERT of --model with a token (ner) or sequence classification
head.
squad: SQuAD v1.1 JSON (--dev optional: 15% of train's articles); --fine-tune trains BERT with
a span head on [CLS] question [SEP] context window [SEP] rows, otherwise a span model over the frozen
encoder's layers (or, --no-contextual, over its own word embeddings); scored with SQuAD's official
exact match and F1."""

QA_TASK = "squad"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train-task", help=HELP, description=DESCRIPTION)
    p.add_argument("task", choices=(*TASKS, QA_TASK), help="the task")
    opts.add_data_arguments(p, "test file: scored once with the best-on-dev model")
    common.add_model_arguments(p)
    opts.add_contextual_arguments(p)
    p.add_argument("--context", choices=CONTEXTS, default=Context.SENTENCE.value,
                   help="what a sentence's frozen features see: the sentence alone, or its whole "
                   "document (ner: -DOCSTART- lines; Encoder.embed_document) (default: sentence)")
    opts.add_task_model_arguments(p)
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
    q = p.add_argument_group("question answering (squad)")
    w = WindowSettings()
    q.add_argument("--max-length", type=common.positive_int, default=w.max_length,
                   help=f"pieces per BERT row, [CLS] question [SEP] window [SEP] (default: {w.max_length})")
    q.add_argument("--stride", type=common.positive_int, default=w.stride,
                   help=f"pieces from one context window's start to the next's (default: {w.stride})")
    q.add_argument("--max-query", type=common.positive_int, default=w.max_query,
                   help=f"a question's pieces kept (default: {w.max_query})")
    q.add_argument("--max-answer-length", type=common.positive_int, default=w.max_answer_length,
                   help=f"the longest answer decoded, in pieces (default: {w.max_answer_length})")
    opts.add_output_arguments(p)
    p.add_argument("--save-model", metavar="DIR",
                   help="write the trained model (best on dev) here for `contextvec predict` and "
                   "contextvec.tasks.load_task_model (a fine-tuned BERT: an HF directory; "
                   "default: not saved)")
    p.set_defaults(run=run)


def _model_settings(args: argparse.Namespace, task: TaskSpec) -> ModelSettings:
    # --last-layer-only is an alias of --layers last
    if args.last_layer_only and args.layers not in (None, "last"):
        raise ValueError(f"--last-layer-only is --layers last: it contradicts --layers {args.layers}")
    return task.model_settings(
        word_dim=args.word_dim, char_cnn=args.char_cnn, hidden=args.hidden, classifier=args.classifier,
        char_ngram_dim=args.char_ngrams, lstm_layers=args.lstm_layers, dropout=args.dropout,
        placement="none" if args.no_contextual else args.placement, layer_norm=args.layer_norm,
        mix_dropout=args.mix_dropout, layers="last" if args.last_layer_only else (args.layers or "mix"),
        tag_scheme=args.tag_scheme, constrained=not args.no_constraints)


def _training(args: argparse.Namespace) -> TrainSettings | FineTuneSettings:
    # --epochs, --lr and --clip default by mode: given ones only.
    given = {k: getattr(args, k) for k in ("epochs", "lr", "clip") if getattr(args, k) is not None}
    shared = {"batch_size": args.batch_size, "seed": args.seed, "train_fraction": args.train_fraction,
              "device": args.device, "progress": not args.quiet, **given}
    if args.fine_tune:
        return FineTuneSettings(warmup=args.warmup, weight_decay=args.weight_decay, **shared)
    return TrainSettings(patience=args.patience, l2=args.l2, **shared)


def settings(args: argparse.Namespace) -> TrainTaskSettings:
    """The job's settings from the options (refusing the combinations that contradict each other)."""
    if args.fine_tune:
        frozen_only = {"--no-contextual": args.no_contextual, "--options-file/--weight-file":
                       args.options_file or args.weight_file, "--word-vectors": args.word_vectors,
                       "--layers/--last-layer-only": args.layers or args.last_layer_only,
                       "--layer-norm": args.layer_norm, "--classifier bcn": args.classifier == "bcn",
                       "--char-ngrams": args.char_ngrams}
        if given := [name for name, value in frozen_only.items() if value]:
            raise ValueError(f"{', '.join(given)}: options of the frozen-feature task model, "
                             "not of --fine-tune")
    elif args.no_contextual and (args.model or args.options_file or args.weight_file):
        raise ValueError("--no-contextual uses no model: drop --model/--options-file/--weight-file")
    elif args.no_contextual and (args.layer_norm or args.last_layer_only or args.layers):
        raise ValueError("--layer-norm and --layers need contextual vectors (not --no-contextual)")
    mode = TrainMode.FINE_TUNE if args.fine_tune else (
        TrainMode.NO_CONTEXTUAL if args.no_contextual else TrainMode.CONTEXTUAL)
    task = get_task(args.task)
    return TrainTaskSettings(
        task, TaskFiles(args.train, args.dev, args.test, args.max_sentences), mode,
        EncoderChoice(args.model, args.options_file, args.weight_file, args.device, precision=args.precision),
        None if args.fine_tune else _model_settings(args, task), _training(args),
        FeatureSettings(args.cache_dir, args.feature_dtype, args.embed_batch_size),
        args.word_vectors, args.word_vectors_format, args.save_model, args.threads, args.context)


def qa_settings(args: argparse.Namespace) -> TrainQASettings:
    """The question-answering job's settings (``train-task squad``): BERT fine-tuned, or the span
    model over a frozen encoder's layers (or, ``--no-contextual``, over its own embeddings)."""
    if args.test:
        raise ValueError("squad scores --dev; score another file with contextvec predict --score")
    if args.context != Context.SENTENCE:
        raise ValueError("--context document: squad's contexts are read whole already; drop --context")
    encoder = EncoderChoice(args.model, args.options_file, args.weight_file, args.device,
                            precision=args.precision)
    files = QAFiles(args.train, args.dev, args.max_sentences)
    if args.fine_tune:
        windows = WindowSettings(args.max_length, args.stride, args.max_query, args.max_answer_length)
        return TrainQASettings(files, TrainMode.FINE_TUNE, encoder, _training(args), windows, args.save_model,
                               args.threads)
    if args.classifier != "pool" or args.word_vectors or args.char_ngrams:
        raise ValueError("--classifier, --word-vectors and --char-ngrams are not options of the squad "
                         "span model")
    mode = TrainMode.NO_CONTEXTUAL if args.no_contextual else TrainMode.CONTEXTUAL
    base = SpanTrainSettings()
    given = {"word_dim": args.word_dim, "char_cnn": args.char_cnn, "hidden": args.hidden,
             "lstm_layers": args.lstm_layers, "dropout": args.dropout, "mix_dropout": args.mix_dropout,
             "layer_norm": args.layer_norm or None, "layers": args.layers,
             "placement": "none" if args.no_contextual else (args.placement or "input")}
    model = replace(base.model, **{k: v for k, v in given.items() if v is not None})
    training = _training(args)
    span = SpanTrainSettings(model, replace(base.span, max_answer_length=args.max_answer_length), training,
                             FeatureSettings(args.cache_dir, args.feature_dtype, args.embed_batch_size))
    return TrainQASettings(files, mode, encoder, span, None, args.save_model, args.threads)


def run(args: argparse.Namespace) -> None:
    inputs = opts.check_inputs(args, "train", "dev", "test", "word_vectors")
    opts.check_outputs(args, inputs, args.output)
    if args.save_model is not None:  # "" too: refused, never skipped
        common.check_output(args.save_model, inputs=[args.model], overwrite=args.overwrite, directory=True)
    if args.task == QA_TASK:
        result = run_train_qa(qa_settings(args))
    else:
        with opts.resumable_features():
            result = run_train_task(settings(args))
    print("\n".join(result.lines()))
    if args.output:
        opts.write_json(args.output, result.report.to_dict())
