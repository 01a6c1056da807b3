"""``contextvec demo``: what contextual vectors do, on the bundled English model, in seconds.

1. Embeds a few sentences through the ``embed`` pipeline (HDF5, allennlp's layout).
2. Compares "bank" across contexts layer by layer: ELMo's char-CNN layer (CoVe's word vectors)
   is context-free, the layers above tell the river bank from the money bank.
3. Finds the nearest contexts of a word in a small bundled sentence set (ELMo paper, Table 4),
   next to the nearest words by the context-free token vectors.
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
from contextvec.io.atomic import atomic_path
from contextvec.training.loop import TRAINING_RECORD

HELP = "show contextual vectors at work on the bundled model (or --model)"
# What layer 0 and the layers above it are, by encoder family; the demo's words follow them.
QUERIES = (
    ("The bank on the other end of the street was robbed .", "bank"),
    ("We had a picnic on the bank of the river .", "bank"),
    ("The match was stopped twice for foul play .", "play"),
    ("They went to see a play at the theatre .", "play"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help=HELP, description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help=f"model name or directory (default: bundled {DEFAULT_MODEL})")
    p.add_argument("--workdir", help="keep the sentences and HDF5 output here (default: temp)")
    p.add_argument("--top", type=positive_int, default=3,
                   help="nearest contexts shown per query (default: 3)")
    p.set_defaults(run=run)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _data(name: str) -> list[list[str]]:
    text = resources.files("contextvec.data").joinpath(name).read_text("utf-8")
    return [line.split() for line in text.splitlines() if line.strip()]


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
    with tempfile.TemporaryDirectory() as tmp:
        # --workdir is the demo's own: its two files are replaced on every run
        work = tmp if args.workdir is None else check_output(args.workdir, overwrite=True, directory=True)
        Path(work).mkdir(parents=True, exist_ok=True)
        sentences = _data("demo_sentences.txt")
        source = Path(work) / "sentences.txt"
        with atomic_path(source) as part:
            part.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
        out = embed_to_hdf5(encoder, source, Path(work) / "vectors.hdf5",
                            BulkSettings(progress=False, overwrite=True))
        print(f"\n1. contextvec embed {source.name} {out.name} --all")
        with h5py.File(out, "r") as f:
            vectors = [f[str(i)][()] for i in range(len(sentences))]
            for i, s in enumerate(sentences):
                print(f"   dataset '{i}': shape {vectors[i].shape}  <- {' '.join(s)}")

    bank = [(i, s.index("bank")) for i, s in enumerate(sentences) if "bank" in s]
    print("\n2. cosine similarity of 'bank' in sentence 0 (money) with 'bank' in the others:")
    separated = []
    layer_names = encoder.layer_names()
    width = max(12, *map(len, layer_names))
    print(f"   {'layer':<{width}} " + "  ".join(f"sent {i}" for i, _ in bank[1:]))
    for layer, label in enumerate(layer_names):
        ref = _unit(vectors[0][layer, bank[0][1]])
        sims = [float(ref @ _unit(vectors[i][layer, j])) for i, j in bank[1:]]
        print(f"   {label:<{width}} " + "  ".join(f"{s:6.3f}" for s in sims))
        if layer > 0 and sims[1] > max(sims[0], sims[2]):
            separated.append(label.split(maxsplit=1)[-1])
    if encoder.token_layer_context_free:
        print(f"   (the {encoder.token_layer} layer sees only the word: 1.000 everywhere.)")
    else:
        print(f"   (the {encoder.token_layer} layer adds the word's position: not exactly 1.000.)")
    print("   (A layer above 0 tells the senses apart here if the money bank of sentence 2 is closer")
    print("    than the river banks of 1 and 3: "
          f"{', '.join(separated) if separated else 'none of them with this model'}.)")

    contexts = _data("demo_contexts.txt")
    ctx_vectors = encoder.embed(contexts)
    top_layer = encoder.num_layers - 1
    print(f"\n3. nearest contexts (layer {top_layer}, cosine) in {len(contexts)} bundled sentences:")
    for text, word in QUERIES:
        query = text.split()
        q = _unit(encoder.embed([query])[0][top_layer, query.index(word)])
        scored = sorted(
            ((float(q @ _unit(v[top_layer, j])), k, j)
             for k, (s, v) in enumerate(zip(contexts, ctx_vectors, strict=True))
             for j, w in enumerate(s) if w == word),
            reverse=True,
        )
        print(f"   query: {text}")
        for score, k, j in scored[: args.top]:
            marked = " ".join(f"[{w}]" if i == j else w for i, w in enumerate(contexts[k]))
            print(f"     {score:.3f}  {marked}")
    # The word-level baseline: nearest other words by layer 0, each word embedded alone.
    words = sorted({w for s in contexts for w in s if w.isalpha()})
    token_vectors = _unit(np.stack([v[0, 0] for v in encoder.embed([[w] for w in words])]))
    for word in dict.fromkeys(w for _, w in QUERIES):
        sims = token_vectors @ token_vectors[words.index(word)]
        near = [words[i] for i in np.argsort(-sims) if words[i] != word][:5]
        print(f"   nearest words to '{word}' by layer 0 ({encoder.token_layer}, word alone): "
              f"{', '.join(near)}")
    print(f"\ndone in {time.perf_counter() - start:.1f} s")
