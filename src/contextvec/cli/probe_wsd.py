"""``contextvec probe wsd`` (1-NN word sense disambiguation) and ``contextvec probe neighbours``
(nearest contexts of a word). :func:`add_wsd_parsers` adds both to ``probe``'s task subparsers."""

from __future__ import annotations

import argparse
from pathlib import Path

from contextvec.cli import task_options as opts
from contextvec.cli.common import add_model_arguments, check_output, positive_int
from contextvec.features import FeatureSettings
from contextvec.io.atomic import atomic_path, output_target
from contextvec.jobs import probes as jobs
from contextvec.jobs.choice import EncoderChoice
from contextvec.probes.neighbours import ContextSearch
from contextvec.probes.wsd import VectorSource

WSD_HELP = "word sense disambiguation by nearest sense centroids (ELMo 5.3): F1 per layer"
NEIGHBOURS_HELP = "nearest contexts of a word in a corpus, beside its nearest words by static vectors"


def add_wsd_parsers(tasks: argparse._SubParsersAction) -> None:
    """Register ``wsd`` and ``neighbours`` on the ``probe`` command's task subparsers."""
    wsd = tasks.add_parser("wsd", help=WSD_HELP, description=(
        WSD_HELP + ". Sense centroids of each layer are the mean vectors of the SemCor words of each "
        "sense; an evaluation word gets the sense of its lemma + POS whose centroid is nearest (cosine), "
        "or WordNet's first sense if none of its senses occurs in SemCor. Needs WordNet 3.0 "
        "(apt-get install wordnet-base)."))
    wsd.add_argument("--train", required=True,
                     help="SemCor 3.0: semcor3.0.tar.gz, its extracted directory, or one tag file (required)")
    wsd.add_argument("--eval", required=True, help="Raganato-format *.data.xml (plain or .gz; required)")
    wsd.add_argument("--gold", required=True, help="its *.gold.key.txt (plain or .gz; required)")
    wsd.add_argument("--max-train-sentences", type=positive_int,
                     help="read only the first N SemCor sentences (default: all)")
    wsd.add_argument("--wordnet", help="WordNet 3.0 dict directory (default: $CONTEXTVEC_WORDNET or "
                     "/usr/share/wordnet)")
    add_model_arguments(wsd)
    group = wsd.add_argument_group("features")
    opts.add_feature_arguments(group, embed_batch=False)
    opts.add_embed_batch_argument(group, old_name="--batch-size")
    group.add_argument("--no-cache", action="store_true",
                       help="embed without the feature cache (nothing written to disk; reruns re-embed; "
                       "default: cached)")
    wsd.add_argument("--predictions", metavar="PREFIX",
                     help="write each layer's answers as PREFIX.layerN.key.txt (Raganato key format; "
                     "default: not written)")
    opts.add_output_arguments(wsd)
    wsd.set_defaults(run=_run_wsd)

    nb = tasks.add_parser("neighbours", help=NEIGHBOURS_HELP, description=(
        NEIGHBOURS_HELP + " (ELMo Table 4). Only corpus sentences containing the word are embedded; a "
        "corpus sentence identical to the query is skipped."))
    nb.add_argument("--sentence", required=True,
                    help="the query sentence (tokens separated by spaces; required)")
    nb.add_argument("--word", required=True, help="the query word, a token of --sentence (required)")
    nb.add_argument("--occurrence", type=positive_int, default=1,
                    help="which occurrence of --word in --sentence (default: 1, the first)")
    nb.add_argument("--corpus", required=True,
                    help="one tokenized sentence per line (tokens separated by spaces; plain or .gz; "
                    "required)")
    nb.add_argument("--max-sentences", type=positive_int,
                    help="read only the first N corpus lines (default: all)")
    nb.add_argument("--ignore-case", action="store_true", help="match the word in any case (default: exact)")
    nb.add_argument("--layer", type=int, help="layer to compare (default: the top; negative from the top)")
    nb.add_argument("--top-k", type=positive_int, default=5, help="how many neighbours to show (default: 5)")
    nb.add_argument("--vocab-size", type=positive_int, default=20000,
                    help="nearest words by layer 0 among the N most frequent corpus words (default: 20000)")
    nb.add_argument("--word-vectors", help="static vectors (word2vec or GloVe text/binary, plain or .gz) "
                    "for a second nearest-words list (default: none)")
    nb.add_argument("--max-word-vectors", type=positive_int,
                    help="read only the first N --word-vectors (default: all)")
    add_model_arguments(nb)
    opts.add_embed_batch_argument(nb, old_name="--batch-size")
    opts.add_output_arguments(nb)
    nb.set_defaults(run=_run_neighbours)


def _run_wsd(args: argparse.Namespace) -> None:
    job = jobs.WsdSettings(
        args.train, args.eval, args.gold, args.max_train_sentences, args.wordnet, _encoder(args),
        VectorSource(FeatureSettings(args.cache_dir, args.feature_dtype, args.embed_batch_size),
                     cache=not args.no_cache, progress=not args.quiet), args.threads)
    inputs = [args.train, *opts.check_inputs(args, "eval", "gold")]
    opts.check_outputs(args, inputs, args.output)
    if args.predictions is not None:  # a prefix: checked as a file path, then each file it names
        prefix = output_target(args.predictions)
        for path in sorted(prefix.parent.glob(f"{prefix.name}.layer*.key.txt")):
            check_output(path, inputs=inputs, overwrite=args.overwrite)
    with opts.resumable_features():
        result = jobs.run_wsd(job)
    print("\n".join(result.lines()))
    if args.predictions:
        for layer, answers in result.report.predictions.items():
            with atomic_path(Path(f"{args.predictions}.layer{layer}.key.txt")) as tmp:
                tmp.write_text("".join(f"{i} {k}\n" for i, k in answers.items() if k), encoding="utf-8")
        print(f"wrote {args.predictions}.layer*.key.txt")
    print("\n".join(result.table_lines()))
    if args.output:
        opts.write_json(args.output, result.report.to_dict())


def _run_neighbours(args: argparse.Namespace) -> None:
    job = jobs.NeighboursSettings(
        tuple(args.sentence.split()), args.word, args.corpus, args.occurrence, args.max_sentences,
        ContextSearch(args.layer, args.top_k, args.ignore_case, args.embed_batch_size, not args.quiet),
        args.vocab_size, args.word_vectors, args.max_word_vectors, _encoder(args), args.threads)
    opts.check_outputs(args, opts.check_inputs(args, "corpus", "word_vectors"), args.output)
    result = jobs.run_neighbours(job)
    print("\n".join(result.lines()))
    if args.output:
        opts.write_json(args.output, result.to_dict())


def _encoder(args: argparse.Namespace) -> EncoderChoice:
    return EncoderChoice(args.model, args.options_file, args.weight_file, args.device,
                         precision=args.precision)
