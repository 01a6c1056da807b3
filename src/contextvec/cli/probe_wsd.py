"""``contextvec probe wsd`` (1-NN word sense disambiguation) and ``contextvec probe neighbours``
(nearest contexts of a word). :func:`add_wsd_parsers` adds both to ``probe``'s task subparsers."""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

from contextvec.cli import task_options as opts
from contextvec.cli.common import add_model_arguments, check_output, load_model, positive_int
from contextvec.io.atomic import atomic_path, output_target
from contextvec.io.text_lines import open_text

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
    wsd.set_defaults(run=run_wsd)

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
    nb.set_defaults(run=run_neighbours)


def run_wsd(args: argparse.Namespace) -> None:
    from contextvec.probes.semcor import read_raganato, read_semcor
    from contextvec.probes.wordnet import load_wordnet
    from contextvec.probes.wsd import FeatureOptions, evaluate_wsd, format_table

    started = time.perf_counter()
    inputs = [args.train, *opts.check_inputs(args, "eval", "gold")]
    opts.check_outputs(args, inputs, args.output)
    if args.predictions is not None:  # a prefix: checked as a file path, then each file it names
        prefix = output_target(args.predictions)
        for path in sorted(prefix.parent.glob(f"{prefix.name}.layer*.key.txt")):
            check_output(path, inputs=inputs, overwrite=args.overwrite)
    inventory = load_wordnet(args.wordnet)  # first: a missing WordNet fails before any work
    train = read_semcor(args.train, args.max_train_sentences)
    data = read_raganato(args.eval, args.gold)
    loaded = time.perf_counter()
    encoder = load_model(args)
    options = FeatureOptions(cache=not args.no_cache, cache_dir=args.cache_dir, dtype=args.feature_dtype,
                             batch_size=args.embed_batch_size, progress=not args.quiet)
    with opts.resumable_features():
        report = evaluate_wsd(encoder, train, data, inventory, options)
    report.runtime_s["read_data_and_wordnet"] = round(loaded - started, 3)
    report.runtime_s["including_loading"] = round(time.perf_counter() - started, 3)
    report.extra.update({"task": "wsd", "model": opts.model_name(args), "num_layers": encoder.num_layers,
                         "dim": encoder.output_dim, "wordnet": str(inventory.directory)})
    t, e = report.train, report.eval
    print(f"WSD 1-NN of {opts.model_name(args)}: {encoder.num_layers} layers x {encoder.output_dim} dims; "
          f"train {t['sentences']} sent / {t['spans']} tagged words / {t['sense_keys']} senses; "
          f"eval {e['instances']} instances ({e['instances_with_a_trained_sense']} with a trained sense)")
    if args.predictions:
        for layer, answers in report.predictions.items():
            path = Path(f"{args.predictions}.layer{layer}.key.txt")
            with atomic_path(path) as tmp:
                tmp.write_text("".join(f"{i} {k}\n" for i, k in answers.items() if k), encoding="utf-8")
        print(f"wrote {args.predictions}.layer*.key.txt")
    rt = report.runtime_s
    opts.finish(args, format_table(report), f"train features {rt['train_features']:.1f} s, eval features "
                f"{rt['eval_features']:.1f} s, predict {rt['predict']:.2f} s, "
                f"total {rt['including_loading']:.1f} s", report.to_dict())


def read_corpus(path: str | Path, max_sentences: int | None = None) -> list[list[str]]:
    """Token lists of a one-sentence-per-line file (plain or ``.gz``); empty lines stay (as empty
    lists) so that list index = line number - 1."""
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"--max-sentences must be >= 1, not {max_sentences}")
    with open_text(path) as f:
        corpus = [line.split() for line in itertools.islice(f, max_sentences)]
    if not any(corpus):
        raise ValueError(f"{path}: no sentences (an empty file?)")
    return corpus


def run_neighbours(args: argparse.Namespace) -> None:
    from contextvec.probes.neighbours import (
        layer0_vectors,
        mark,
        nearest_contexts,
        nearest_words,
        resolve_layer,
        vocabulary,
    )

    started = time.perf_counter()
    opts.check_outputs(args, opts.check_inputs(args, "corpus", "word_vectors"), args.output)
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
                                batch_size=args.embed_batch_size, progress=not args.quiet)
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
    print(f"nearest contexts by layer {layer} of {opts.model_name(args)} ({args.corpus}, "
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
        opts.write_json(args.output, {
            "task": "neighbours", "model": opts.model_name(args), "query": query, "position": position,
            "word": word, "layer": layer, "corpus": str(args.corpus), "corpus_lines": len(corpus),
            "contexts": [{"line": c.sentence + 1, "position": c.position, "similarity": c.similarity,
                          "sentence": c.marked()} for c in contexts],
            "nearest_words": {name: None if n is None else [{"word": w, "similarity": s} for w, s in n]
                              for name, n in static.items()},
            "runtime_s": round(time.perf_counter() - started, 3),
        })
