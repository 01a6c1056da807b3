"""Make the ELMoForManyLangs parity fixtures: tiny random-weight models in that project's own
directory format, and its own ``Embedder.sents2elmo`` outputs for them.

Run with a Python that has the ``elmoformanylangs`` package (see tests/data/README.md), from
the repository root:

    /path/to/venv/bin/python tests/data/efml/make_fixtures.py

Three models: ``words`` (word embeddings + char-CNN as the released models, ReLU,
50 characters per token, 2 highway layers, 2 LSTM layers, weights in the legacy pre-zip torch
pickle format of the released models, ``config_path`` an absolute path elsewhere whose file
name is in the directory) and ``chars`` (char-CNN only, tanh, 20 characters per token,
1 highway layer, 3 LSTM layers, zip pickles, relative ``config_path``); and ``wordsonly``
(word embeddings alone, one LSTM layer, no clipping), which the original code also runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from elmoformanylangs import Embedder
from elmoformanylangs.frontend import Model
from elmoformanylangs.modules.embedding_layer import EmbeddingLayer

HERE = Path(__file__).resolve().parent
SPECIAL_CHARS = ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]
# Characters seen "in training": ASCII letters, some German and Chinese, and the ideographic
# space, which char.dic's reader restores from a line that strip() left with one field.
CHARS = list("abcdefhilnorstuyzDBS.,") + list("äöüßÄ") + list("今天好真") + ["\u3000"]
WORDS = ["<oov>", "<bos>", "<eos>", "<pad>", "Der", "die", ".", "天", "好", "an", "short", "y" * 48]
SENTENCES = [
    ["Der", "Bär", "läuft", "über", "die", "Straße", "."],
    ["今", "天", "天氣", "真", "好"],
    ["an", "unknownword", "x" * 60, "Zürich", "y" * 55],
    ["short"],
    ["a" * 48, "b" * 49, "天\u3000好", "Ωμέγα"],
    ["die", "<bos>", "an", "<eos>", "Der"],  # read as the boundaries, words and characters alike
]
MODELS = {
    "words": {
        "arch": "cnn_5_6_8_16_words.json",
        "config_path": "/home/someone/elmo/configs/cnn_5_6_8_16_words.json",
        "legacy_pickles": True,
        "token_embedder": {"name": "cnn", "activation": "relu", "filters": [[1, 4], [2, 4], [3, 8]],
                           "n_highway": 2, "word_dim": 5, "char_dim": 6, "max_characters_per_token": 50},
        "encoder": {"name": "elmo", "projection_dim": 8, "cell_clip": 3, "proj_clip": 3, "dim": 16,
                    "n_layers": 2},
    },
    "chars": {
        "arch": "cnn_0_6_8_12_chars.json",
        "config_path": "cnn_0_6_8_12_chars.json",
        "legacy_pickles": False,
        "token_embedder": {"name": "cnn", "activation": "tanh", "filters": [[1, 4], [3, 6]],
                           "n_highway": 1, "word_dim": 0, "char_dim": 6, "max_characters_per_token": 20},
        "encoder": {"name": "elmo", "projection_dim": 8, "cell_clip": 3, "proj_clip": 3, "dim": 12,
                    "n_layers": 3},
    },
    "wordsonly": {
        "arch": "cnn_5_0_8_12_wordsonly.json",
        "config_path": "cnn_5_0_8_12_wordsonly.json",
        "legacy_pickles": False,
        "token_embedder": {"name": "cnn", "activation": "relu", "filters": [], "n_highway": 0,
                           "word_dim": 5, "char_dim": 0, "max_characters_per_token": 50},
        "encoder": {"name": "elmo", "projection_dim": 8, "cell_clip": 0, "proj_clip": 0, "dim": 12,
                    "n_layers": 1},
    },
}


def write_model(name: str, spec: dict, seed: int) -> Path:
    out = HERE / name
    out.mkdir(exist_ok=True)
    config = {"encoder": spec["encoder"], "token_embedder": spec["token_embedder"],
              "classifier": {"name": "sampled_softmax", "n_samples": 8}, "dropout": 0.1}
    (out / spec["arch"]).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    # The training arguments biLM.py dumps; the Embedder reads config_path alone.
    train_args = {"config_path": spec["config_path"], "model": f"{name}.model", "seed": seed,
                  "max_sent_len": 20, "min_count": 1}
    (out / "config.json").write_text(json.dumps(train_args), encoding="utf-8")
    chars = {c: i for i, c in enumerate(CHARS + SPECIAL_CHARS)}
    words = {w: i for i, w in enumerate(WORDS)}
    # As biLM.py writes them: "token\tid" lines (word.dic even for a char-only model).
    (out / "char.dic").write_text("".join(f"{c}\t{i}\n" for c, i in chars.items()), encoding="utf-8")
    (out / "word.dic").write_text("".join(f"{w}\t{i}\n" for w, i in words.items()), encoding="utf-8")

    torch.manual_seed(seed)
    word_layer = (EmbeddingLayer(spec["token_embedder"]["word_dim"], words, fix_emb=False)
                  if spec["token_embedder"]["word_dim"] > 0 else None)
    char_layer = (EmbeddingLayer(spec["token_embedder"]["char_dim"], chars, fix_emb=False)
                  if spec["token_embedder"]["char_dim"] > 0 else None)
    model = Model(config, word_layer, char_layer, use_cuda=False)
    with torch.no_grad():
        # The LSTMs' weights wide enough that gates saturate and the clips act now and then; the
        # token layer's narrower, so that its vectors have the magnitude of a trained model's.
        for param in model.encoder.parameters():
            param.normal_(0.0, 0.6)
        for param in model.token_embedder.parameters():
            param.normal_(0.0, 0.3)
    # Weights kept float16-representable, so that the fixture's values are exact in either dtype.
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.half().float())
    kw = {"_use_new_zipfile_serialization": False} if spec["legacy_pickles"] else {}
    torch.save(model.token_embedder.state_dict(), out / "token_embedder.pkl", **kw)
    torch.save(model.encoder.state_dict(), out / "encoder.pkl", **kw)
    return out


def reference_outputs(model_dir: Path, n_layers: int) -> dict[str, np.ndarray]:
    embedder = Embedder(str(model_dir), batch_size=64)
    outputs: dict[str, np.ndarray] = {}

    def run(layer: int) -> list[np.ndarray]:
        # ELMoForManyLangs carries the LSTM states over from call to call and batch to batch;
        # every reference here starts from zero states, all sentences in one batch.
        embedder.model.encoder.reset_states()
        return embedder.sents2elmo(SENTENCES, output_layer=layer)

    every = run(-2)
    average = run(-1)
    for i, (all_layers, mean) in enumerate(zip(every, average, strict=True)):
        assert all_layers.shape[0] == n_layers + 1
        np.testing.assert_allclose(mean, all_layers.mean(axis=0), rtol=0, atol=1e-6)
        outputs[f"all/{i}"] = all_layers.astype(np.float32)
        outputs[f"average/{i}"] = mean.astype(np.float32)
    for layer in range(n_layers + 1):
        for i, single in enumerate(run(layer)):
            np.testing.assert_array_equal(single, every[i][layer])
    # Over-long tokens: read_list cuts them to max_characters_per_token - 2 characters before
    # both the word and the character lookup (create_one_batch's assertion never fires).
    limit = json.loads((model_dir / "config.json").read_text())["config_path"]
    limit = json.loads((model_dir / os.path.basename(limit)).read_text())
    keep = limit["token_embedder"]["max_characters_per_token"] - 2
    embedder.model.encoder.reset_states()
    cut = embedder.sents2elmo([[t[:keep] for t in s] for s in SENTENCES], output_layer=-2)
    for full, short in zip(every, cut, strict=True):
        np.testing.assert_array_equal(full, short)
    return outputs


def main() -> None:
    (HERE / "sentences.json").write_text(
        json.dumps(SENTENCES, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    for seed, (name, spec) in enumerate(MODELS.items()):
        model_dir = write_model(name, spec, seed)
        outputs = reference_outputs(model_dir, spec["encoder"]["n_layers"])
        np.savez_compressed(HERE / f"expected_{name}.npz", **outputs)
        print(f"wrote {model_dir} and expected_{name}.npz")


if __name__ == "__main__":
    main()
