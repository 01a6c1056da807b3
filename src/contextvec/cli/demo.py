"""``contextvec demo``: what contextual vectors do, on the bundled English model, in seconds.

1. Embeds a few sentences through the ``embed`` pipeline (HDF5, allennlp's layout).
2. Compares "play" across those sentences layer by layer, each sentence marked with its sense
   (a game's play, a theatre's play): per layer, whether occurrences of one sense are closer than
   occurrences of two, by how much, and which layer separates the senses best (or that none does).
3. Finds the nearest contexts of a word in a small bundled sentence set (ELMo paper, Table 4),
   says whether they share the query's sense, next to the nearest words by the context-free
   token vectors.

Every verdict is computed from the numbers printed above it, for whichever model runs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from importlib import resources
from pathlib import Path

import h5py
import numpy as np

import contextvec
from contextvec.api import DEFAULT_MODEL, bundled_models
from contextvec.bulk import BulkSettings, embed_to_hdf5
from contextvec.cli.common import check_output, positive_int
from contextvec.explore.contexts import (
    nearest_sense,
    read_marked,
    sense_separation,
    unit_rows,
    word_across_contexts,
)
from contextvec.io.atomic import atomic_path
from contextvec.training.loop import TRAINING_RECORD

HELP = "show contextual vectors at work on the bundled model (or --model)"
WORD = "play"
"""The word the sentences of ``demo_senses.txt`` share, each line marked with its sense."""
# (sense, sentence, word): each query's word and its sense in the sentence
QUERIES = (
    ("money", "The bank on the other end of the street was robbed .", "bank"),
    ("river", "We had a picnic on the bank of the river .", "bank"),
    ("game", "The goalkeeper was sent off for dangerous play .", "play"),
    ("drama", "The audience applauded at the end of the play .", "play"),
)
ORIGINAL = "elmo-original"
"""The published ELMo the demo's last lines tell how to fetch and compare."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help=HELP, description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help=f"model name or directory (default: bundled {DEFAULT_MODEL})")
    p.add_argument("--workdir", help="keep the sentences and HDF5 output here (default: temp)")
    p.add_argument("--top", type=positive_int, default=3,
                   help="nearest contexts shown per query (default: 3)")
    p.set_defaults(run=run)


def _data(name: str) -> tuple[list[list[str]], list[str | None]]:
    """A bundled sentence set: each line's tokens, and its sense mark."""
    text = resources.files("contextvec.data").joinpath(name).read_text("utf-8")
    texts, senses = read_marked(text.splitlines())
    return [text.split() for text in texts], senses


def _training_totals(record: dict) -> tuple[int, int, float]:
    """Steps, tokens and seconds of a model's training, its fine-tuning bases (``init``) included."""
    steps, tokens, seconds = 0, 0, 0.0
    while record:
        steps += record.get("steps", 0)
        tokens += record.get("tokens_seen", 0)
        seconds += record.get("train_seconds", 0.0)
        record = record.get("init") or {}
    return steps, tokens, seconds


def run(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    encoder = contextvec.load(args.model)
    name = args.model or f"{DEFAULT_MODEL} (bundled)"
    print(f"model: {name}; {encoder.num_layers} layers of {encoder.output_dim} dims")
    info = bundled_models().get(DEFAULT_MODEL, Path()) / TRAINING_RECORD
    if args.model is None and info.is_file():
        steps, tokens, seconds = _training_totals(json.loads(info.read_text(encoding="utf-8")))
        print(f"       biLM trained {steps:,} steps on {tokens:,} tokens of "
              f"English books and Wikipedia ({seconds / 3600:.1f} h on CPU)")
    sentences, senses = _data("demo_senses.txt")
    with tempfile.TemporaryDirectory() as tmp:
        # --workdir is the demo's own: its two files are replaced on every run
        work = tmp if args.workdir is None else check_output(args.workdir, overwrite=True, directory=True)
        Path(work).mkdir(parents=True, exist_ok=True)
        source = Path(work) / "sentences.txt"
        with atomic_path(source) as part:
            part.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
        out = embed_to_hdf5(encoder, source, Path(work) / "vectors.hdf5",
                            BulkSettings(progress=False, overwrite=True))
        print(f"\n1. contextvec embed {source.name} {out.name} --all")
        with h5py.File(out, "r") as f:
            vectors = [f[str(i)][()] for i in range(len(sentences))]
            for i, s in enumerate(sentences):
                print(f"   dataset '{i}': shape {vectors[i].shape}  <- {' '.join(s)}  [{senses[i]}]")

    layer_names = encoder.layer_names()
    separation = sense_separation(word_across_contexts(vectors, sentences, WORD), senses, layer_names)
    kinds = list(separation.layers[0].means)
    counts = ", ".join(f"{separation.senses.count(s)} {s}" for s in dict.fromkeys(separation.senses))
    print(f"\n2. cosine similarity of '{WORD}' between its occurrences ({counts}), per layer: the mean")
    print("   over pairs of one sense, and over pairs of two senses (a/b):")
    width = max(12, *map(len, layer_names))
    print(f"   {'layer':<{width}} " + "  ".join(f"{k:>{max(6, len(k))}}" for k in kinds))
    for layer in separation.layers:
        print(f"   {layer.name:<{width}} "
              + "  ".join(f"{layer.means[k]:{max(6, len(k))}.3f}" for k in kinds))
    if encoder.token_layer_context_free:
        print(f"   (the {encoder.token_layer} layer sees only the word: 1.000 everywhere.)")
    else:
        print(f"   (the {encoder.token_layer} layer adds the word's position: not exactly 1.000.)")
    print("   same-sense pairs against different-sense pairs:")
    for layer in separation.layers:
        print(f"   {layer.name:<{width}} {layer.verdict()}")
    print(f"   => {separation.summary()}")

    contexts, context_senses = _data("demo_sense_contexts.txt")
    ctx_vectors = encoder.embed(contexts)
    top_layer = encoder.num_layers - 1
    print(f"\n3. nearest contexts (layer {layer_names[top_layer]}, cosine) in {len(contexts)} bundled "
          "sentences, marked by sense:")
    for sense, text, word in QUERIES:
        query = text.split()
        q = unit_rows(encoder.embed([query])[0][top_layer, query.index(word)])
        scored = sorted(
            ((float(q @ unit_rows(v[top_layer, j])), k, j)
             for k, (s, v) in enumerate(zip(contexts, ctx_vectors, strict=True))
             for j, w in enumerate(s) if w == word),
            key=lambda t: -t[0],
        )
        print(f"   query [{sense}]: {text}")
        for score, k, j in scored[: args.top]:
            marked = " ".join(f"[{w}]" if i == j else w for i, w in enumerate(contexts[k]))
            print(f"     {score:.3f}  [{context_senses[k]}] {marked}")
        ranked = [(score, context_senses[k]) for score, k, _ in scored]
        print(f"     -> {nearest_sense(sense, ranked, args.top)}")
    # The word-level baseline: nearest other words by layer 0, each word embedded alone.
    words = sorted({w for s in contexts for w in s if w.isalpha()})
    token_vectors = unit_rows(np.stack([v[0, 0] for v in encoder.embed([[w] for w in words])]))
    for word in dict.fromkeys(w for _, _, w in QUERIES):
        sims = token_vectors @ token_vectors[words.index(word)]
        near = [words[i] for i in np.argsort(-sims) if words[i] != word][:5]
        print(f"   nearest words to '{word}' by layer 0 ({encoder.token_layer}, word alone): "
              f"{', '.join(near)}")
    print(f"\ndone in {time.perf_counter() - start:.1f} s")
    if args.model != ORIGINAL:
        print("\nThe same demo on the original ELMo (allennlp's published weights):")
        print(f"   contextvec pull {ORIGINAL}")
        print(f"   contextvec demo --model {ORIGINAL}")
