"""``contextvec demo``: the embedding pipeline end to end, in a few seconds.

Until contextvec bundles a trained English model, the demo builds a small ELMo with *random*
weights (fixed seed): the output shows what the files and layers look like, not what a trained
model knows.
"""

from __future__ import annotations

import argparse
import tempfile
from importlib import resources
from pathlib import Path

import h5py
import numpy as np
import torch

from contextvec.bulk import embed_file
from contextvec.encoders.bilm import PRESETS, ElmoBiLM, ElmoEncoder
from contextvec.io.bilm_tf import load_bilm_tf, save_bilm_tf

HELP = "show the embedding pipeline on sample sentences"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help=HELP, description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", help="keep the model and outputs here (default: a temp dir)")
    p.set_defaults(run=run)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        print("NOTE: no trained model is bundled yet; this demo uses a RANDOM elmo-small-sized")
        print("      biLM (seed 0). Similarities below show the pipeline, not linguistic quality.\n")
        torch.manual_seed(0)
        save_bilm_tf(ElmoBiLM(PRESETS["elmo-small"]), work / "options.json", work / "weights.hdf5")
        print(f"1. wrote a bilm-tf model: {work / 'options.json'}, {work / 'weights.hdf5'}")
        encoder = ElmoEncoder(load_bilm_tf(work / "options.json", work / "weights.hdf5"))
        text = resources.files("contextvec.data").joinpath("demo_sentences.txt").read_text("utf-8")
        sentences = [line.split() for line in text.splitlines()]
        (work / "sentences.txt").write_text(text, encoding="utf-8")
        out = embed_file(encoder, work / "sentences.txt", work / "vectors.hdf5", progress=False)
        print(f"2. contextvec embed --all -> {out}")
        with h5py.File(out, "r") as f:
            for key in sorted((k for k in f if k.isdigit()), key=int):
                print(f"   dataset {key!r}: shape {f[key].shape}  <- {' '.join(sentences[int(key)])}")
            vectors = {int(k): f[k][()] for k in f if k.isdigit()}
        bank = [(i, s.index("bank")) for i, s in enumerate(sentences)]
        print("3. cosine similarity of 'bank' in sentence 0 vs the others, per layer:")
        print("   layer             " + "  ".join(f"sent {i}" for i, _ in bank[1:]))
        for layer, name in enumerate(["0 (char-CNN)", "1 (biLSTM 1)", "2 (biLSTM 2)"]):
            ref = vectors[0][layer, bank[0][1]]
            sims = [_cosine(ref, vectors[i][layer, j]) for i, j in bank[1:]]
            print(f"   {name:<17} " + "  ".join(f"{s:6.3f}" for s in sims))
        print("   (layer 0 is context-free: identical words give 1.000; the biLSTM layers differ")
        print("    by context.)")
