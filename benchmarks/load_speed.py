"""Loading time of an ELMoForManyLangs directory against a bilm-tf HDF5 model of the same size.

Run on an idle machine:

    python benchmarks/load_speed.py                 # the released architectures, 3 loads each
    python benchmarks/load_speed.py --words 200000 --repeats 5 --out load.json

Both models are random weights in the released architectures: bilm-tf's ``2x4096_512_2048cnn_
2xhighway`` (``options.json`` + ``weights.hdf5``) and ELMoForManyLangs' ``cnn_50_100_512_4096``
(its pickles, a ``word.dic`` of ``--words`` words and a ``char.dic`` of ``--chars``
characters). Each is loaded once to warm the file cache, then ``--repeats`` times with
``contextvec.load``; the table gives each model's size on disk and its median load time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

import contextvec
from contextvec.encoders.bilm import PRESETS, ElmoBiLM
from contextvec.encoders.bilm.loader import save_bilm_tf
from contextvec.io.elmoformanylangs import SHIPPED_ARCHITECTURES

SPECIALS = ["<oov>", "<bos>", "<eos>", "<pad>", "<bow>", "<eow>"]


def write_bilm_tf(directory: Path) -> Path:
    directory.mkdir()
    save_bilm_tf(ElmoBiLM(PRESETS["elmo-original"]), directory / "options.json", directory / "weights.hdf5")
    return directory


def write_manylangs(directory: Path, n_words: int, n_chars: int) -> Path:
    """A directory in ELMoForManyLangs' layout, its tensors under that project's names."""
    directory.mkdir()
    name = "cnn_50_100_512_4096_sample.json"
    architecture = SHIPPED_ARCHITECTURES[name]
    (directory / "config.json").write_text(json.dumps({"config_path": name}))
    (directory / name).write_text(json.dumps(architecture))
    words = SPECIALS[:4] + [f"w{i}" for i in range(n_words - 4)]
    chars = [chr(0x4E00 + i) for i in range(n_chars - 6)] + SPECIALS
    for file, entries in (("word.dic", words), ("char.dic", chars)):
        (directory / file).write_text("".join(f"{t}\t{i}\n" for i, t in enumerate(entries)), encoding="utf-8")
    token, lstm = architecture["token_embedder"], architecture["encoder"]
    n_filters = sum(n for _, n in token["filters"])
    state = {"word_emb_layer.embedding.weight": torch.randn(n_words, token["word_dim"]),
             "char_emb_layer.embedding.weight": torch.randn(n_chars, token["char_dim"]),
             "projection.weight": torch.randn(lstm["projection_dim"], token["word_dim"] + n_filters),
             "projection.bias": torch.randn(lstm["projection_dim"])}
    for i, (width, n) in enumerate(token["filters"]):
        state[f"convolutions.{i}.weight"] = torch.randn(n, token["char_dim"], width)
        state[f"convolutions.{i}.bias"] = torch.randn(n)
    for k in range(token["n_highway"]):
        state[f"highways._layers.{k}.weight"] = torch.randn(2 * n_filters, n_filters)
        state[f"highways._layers.{k}.bias"] = torch.randn(2 * n_filters)
    torch.save(state, directory / "token_embedder.pkl", _use_new_zipfile_serialization=False)
    p, cell = lstm["projection_dim"], lstm["dim"]
    encoder = {}
    for layer in range(lstm["n_layers"]):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}."
            encoder[prefix + "input_linearity.weight"] = torch.randn(4 * cell, p)
            encoder[prefix + "state_linearity.weight"] = torch.randn(4 * cell, p)
            encoder[prefix + "state_linearity.bias"] = torch.randn(4 * cell)
            encoder[prefix + "state_projection.weight"] = torch.randn(p, cell)
    torch.save(encoder, directory / "encoder.pkl", _use_new_zipfile_serialization=False)
    return directory


def median_load_seconds(directory: Path, repeats: int) -> float:
    contextvec.load(directory)  # the file cache warm for every timed load
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        contextvec.load(directory)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=100_000, help="word.dic entries (default: 100000)")
    parser.add_argument("--chars", type=int, default=5_000, help="char.dic entries (default: 5000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed loads per model (default: 3)")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = {"bilm-tf HDF5": write_bilm_tf(Path(tmp) / "bilm-tf"),
                  "ELMoForManyLangs": write_manylangs(Path(tmp) / "efml", args.words, args.chars)}
        results = {}
        for name, directory in models.items():
            size = sum(f.stat().st_size for f in directory.iterdir())
            results[name] = {"megabytes": round(size / 2**20, 1),
                             "median_load_seconds": round(median_load_seconds(directory, args.repeats), 3)}
    print(f"{'model':<18} {'MiB':>8} {'load s':>8}")
    for name, row in results.items():
        print(f"{name:<18} {row['megabytes']:>8} {row['median_load_seconds']:>8}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
