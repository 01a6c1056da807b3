"""``contextvec probe wsd`` (1-NN word sense disambiguation) and ``contextvec probe neighbours``
(nearest contexts of a word). :func:`add_wsd_parsers` adds both to ``probe``'s task subparsers."""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
import time
from pathlib import Path

from contextvec.api import DEFAULT_MODEL
from contextvec.cli.common import add_model_arguments, load_model
from contextvec.io.atomic import atomic_path
from contextvec.tasks.features import CACHE_ENV, DTYPES

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
                     help="SemCor 3.0: semcor3.0.tar.gz, its extracted directory, or one tag file")
    wsd.add_argument("--eval", required=True, help="Raganato-format *.data.xml (plain or .gz)")
    wsd.add_argument("--gold", required=True, help="its *.gold.key.txt (plain or .gz)")
    wsd.add_argument("--max-train-sentences", type=int,
                     help="read only the first N SemCor sentences (quick runs)")
    wsd.add_argument("--wordnet", help="WordNet 3.0 dict directory (default: $CONTEXTVEC_WORDNET or "
                     "/usr/share/wordnet)")
    add_model_arguments(wsd)
    wsd.add_argument("--batch-size", type=int, default=64, help="sentences per encoder batch (64)")
    group = wsd.add_argument_group("features")
    group.add_argument("--cache-dir", help=f"feature cache (default: ${CACHE_ENV} or "
                       "~/.cache/contextvec/features)")
    group.add_argument("--no-cache", action="store_true",
                       help="embed without the feature cache (nothing written to disk; reruns re-embed)")
    group.add_argument("--feature-dtype", choices=DTYPES, default="float32",
                       help="stored precision of the cached features (float32; float16 halves the disk)")
    wsd.add_argument("--output", help="write the results as JSON here (atomically)")
    wsd.add_argument("--predictions", metavar="PREFIX",
                     help="write each layer's answers as PREFIX.layerN.key.txt (Raganato key format)")
    wsd.add_argument("--quiet", action="store_true", help="no progress bars")
    wsd.set_defaults(run=run_wsd)

    nb = tasks.add_parser("neighbours", help=NEIGHBOURS_HELP, description=(
        NEIGHBOURS_HELP + " (ELMo Table 4). Only corpus sentences containing the word are embedded; a "
        "corpus sentence identical to the query is skipped."))
    nb.add_argument("--sentence", required=True, help="the query sentence (tokens separated by spaces)")
    nb.add_argument("--word", required=True, help="the query word, a token of --sentence")
    nb.add_argument("--occurrence", type=int, default=1,
                    help="which occurrence of --word in --sentence (1 = the first)")
    nb.add_argument("--corpus", required=True,
                    help="one tokenized sentence per line (tokens separated by spaces; plain or .gz)")
    nb.add_argument("--max-sentences", type=int, help="read only the first N corpus lines")
    nb.add_argument("--ignore-case", action="store_true", help="match the word in any case")
    nb.add_argument("--layer", type=int, help="layer to compare (default: the top; negative from the top)")
    nb.add_argument("--top-k", type=int, default=5, help="how many neighbours to show (5)")
    nb.add_argument("--vocab-size", type=int, default=20000,
                    help="nearest words by layer 0 among the N most frequent corpus words (20000)")
    nb.add_argument("--word-vectors", help="static vectors (word2vec or GloVe text/binary, plain or .gz) "
                    "for a second nearest-words list")
    nb.add_argument("--max-word-vectors", type=int, help="read only the first N --word-vectors")
    add_model_arguments(nb)
    nb.add_argument("--batch-size", type=int, default=64, help="sentences per encoder batch (64)")
    nb.add_argument("--output", help="write the results as JSON here (atomically)")
    nb.add_argument("--quiet", action="store_true", help="no progress bars")
    nb.set_defaults(run=run_neighbours)


def _model_name(args: argparse.Namespace) -> str:
    return args.model or args.options_file or f"bundled {DEFAULT_MODEL}"


def _write_json(path: str, result: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def run_wsd(args: argparse.Namespace) -> None:
    from contextvec.tasks.semcor import read_raganato, read_semcor
    from contextvec.tasks.wordnet import load_wordnet
    from contextvec.tasks.wsd import FeatureOptions, evaluate_wsd, format_table

    started = time.perf_counter()
    inventory = load_wordnet(args.wordnet)  # first: a missing WordNet fails before any work
    train = read_semcor(args.train, args.max_train_sentences)
    data = read_raganato(args.eval, args.gold)
    loaded = time.perf_counter()
    encoder = load_model(args)
    options = FeatureOptions(cache=not args.no_cache, cache_dir=args.cache_dir, dtype=args.feature_dtype,
                             batch_size=args.batch_size, progress=not args.quiet)
    try:
        report = evaluate_wsd(encoder, train, data, inventory, options)
    except KeyboardInterrupt:
        print("\ncontextvec: interrupted; finished feature chunks are kept, rerun the same command",
              file=sys.stderr)
        raise SystemExit(130) from None
    report.runtime_s["read_data_and_wordnet"] = round(loaded - started, 3)
    report.runtime_s["including_loading"] = round(time.perf_counter() - started, 3)
    report.extra.update({"task": "wsd", "model": _model_name(args), "num_layers": encoder.num_layers,
                         "dim": encoder.output_dim, "wordnet": str(inventory.directory)})
    t, e = report.train, report.eval
    print(f"WSD 1-NN of {_model_name(args)}: {encoder.num_layers} layers x {encoder.output_dim} dims; "
          f"train {t['sentences']} sent / {t['spans']} tagged words / {t['sense_keys']} senses; "
          f"eval {e['instances']} instances ({e['instances_with_a_trained_sense']} with a trained sense)")
    print(format_table(report))
    rt = report.runtime_s
    print(f"runtime: train features {rt['train_features']:.1f} s, eval features {rt['eval_features']:.1f} s, "
          f"predict {rt['predict']:.2f} s, total {rt['including_loading']:.1f} s")
    if args.predictions:
        for layer, answers in report.predictions.items():
            path = Path(f"{args.predictions}.layer{layer}.key.txt")
            with atomic_path(path) as tmp:
                tmp.write_text("".join(f"{i} {k}\n" for i, k in answers.items() if k), encoding="utf-8")
        print(f"wrote {args.predictions}.layer*.key.txt")
    if args.output:
        _write_json(args.output, report.to_dict())


def read_corpus(path: str | Path, max_sentences: int | None = None) -> list[list[str]]:
    """Token lists of a one-sentence-per-line file (plain or ``.gz``); empty lines stay (as empty
    lists) so that list index = line number - 1."""
    path = Path(path)
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"--max-sentences must be >= 1, not {max_sentences}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.split() for line in itertools.islice(f, max_sentences)]


def run_neighbours(args: argparse.Namespace) -> None:
    from contextvec.tasks.neighbours import (
        layer0_vectors,
        mark,
        nearest_contexts,
        nearest_words,
        resolve_layer,
        vocabulary,
    )

    started = time.perf_counter()
    query = args.sentence.split()
    positions = [i for i, t in enumerate(query) if (t.lower() == args.word.lower() if args.ignore_case
                                                     else t == args.word)]
    if len(positions) < args.occurrence or args.occurrence < 1:
        raise ValueError(f"--sentence has {len(positions)} occurrence(s) of {args.word!r}, "
                         f"not an occurrence {args.occurrence}")
    position = positions[args.occurrence - 1]
    corpus = read_corpus(args.corpus, args.max_sentences)
    encoder = load_model(args)
    layer = resolve_layer(encoder, args.layer)
    contexts = nearest_contexts(encoder, query, position, corpus, layer, args.top_k, args.ignore_case,
                                batch_size=args.batch_size, progress=not args.quiet)
    word = query[position]
    words = vocabulary(corpus, args.vocab_size)
    if word not in words:
        words.append(word)
    static = {"layer 0": nearest_words(word, words, layer0_vectors(encoder, words, progress=not args.quiet),
                                       args.top_k)}
    if args.word_vectors:
        from contextvec.io.word_vectors import load_word_vectors

        vectors = load_word_vectors(args.word_vectors, max_words=args.max_word_vectors)
        key = word if word in vectors.index() or not args.ignore_case else word.lower()
        static[Path(args.word_vectors).name] = nearest_words(key, vectors.words, vectors.vectors, args.top_k)

    print(f"query: {mark(query, position)}")
    print(f"nearest contexts by layer {layer} of {_model_name(args)} ({args.corpus}, "
          f"{len(corpus)} lines):")
    for c in contexts:
        print(f"  {c.similarity:6.3f}  line {c.sentence + 1}: {c.marked()}")
    for name, neighbours in static.items():
        where = (f"among the {len(words)} most frequent corpus words" if name == "layer 0"
                 else "among its words")
        print(f"nearest words by {name} (context-free, {where}):")
        print("  " + (", ".join(f"{w} {s:.3f}" for w, s in neighbours) if neighbours is not None
                      else f"({word!r} is not in the vocabulary)"))
    if args.output:
        _write_json(args.output, {
            "task": "neighbours", "model": _model_name(args), "query": query, "position": position,
            "word": word, "layer": layer, "corpus": str(args.corpus), "corpus_lines": len(corpus),
            "contexts": [{"line": c.sentence + 1, "position": c.position, "similarity": c.similarity,
                          "sentence": c.marked()} for c in contexts],
            "nearest_words": {name: None if n is None else [{"word": w, "similarity": s} for w, s in n]
                              for name, n in static.items()},
            "runtime_s": round(time.perf_counter() - started, 3),
        })
