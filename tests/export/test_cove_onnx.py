"""contextvec export of a CoVe: ONNX Runtime gives CoveEncoder's fp32 layers for any batch size
and length, with the word list written beside the graph."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder
from contextvec.export import manifest_path, vocabulary_path

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

TOLERANCE = 1e-5  # the CoVe parity goal; see tests/export/test_onnx.py
WORDS = ["the", "bank", "was", "robbed", ".", "river", "a", "Man", "Überraschung"]


@pytest.fixture(scope="module")
def cove_dir(tmp_path_factory):
    generator = torch.Generator().manual_seed(0)
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=6, hidden_size=4, lowercase=True), WORDS,
                     torch.randn(len(WORDS), 6, generator=generator))
    for p in mt_lstm.parameters():
        torch.nn.init.uniform_(p, -0.5, 0.5, generator=generator)
    return save_cove_encoder(mt_lstm, tmp_path_factory.mktemp("cove") / "cove")


@pytest.fixture(scope="module")
def cove_export(cove_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "cove.onnx"
    assert main(["export", str(cove_dir), str(out), "--scalar-mix", "1,0,-1", "--gamma", "2"]) == 0
    return out


def word_ids(onnx_path, batch: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """The inputs as a runtime makes them from the manifest and the word list."""
    contract = json.loads(manifest_path(onnx_path).read_text())["words"]
    words = json.loads((onnx_path.parent / contract["file"]).read_text(encoding="utf-8"))
    index = {w: i + contract["offset"] for i, w in enumerate(words)}
    time = max((len(s) for s in batch), default=0)
    ids = np.zeros((len(batch), time), np.int64)
    mask = np.zeros_like(ids)
    for b, sentence in enumerate(batch):
        for t, word in enumerate(sentence):
            ids[b, t] = index.get(word.lower() if contract["lowercase"] else word, contract["unknown"])
            mask[b, t] = 1
    return ids, mask


MIXED_64 = [int(n) for n in np.random.default_rng(1).integers(1, 201, 64)]


@pytest.mark.parametrize("lengths", [[1], [200], MIXED_64], ids=["one-token", "batch1-200", "mixed64"])
def test_cove_in_onnx_runtime_equals_contextvec_on_every_layer(cove_dir, cove_export, lengths):
    rng = np.random.default_rng(len(lengths))
    vocabulary = [*WORDS, "THE", "unseen", "RIVER"]
    batch = [[vocabulary[k] for k in rng.integers(0, len(vocabulary), n)] for n in lengths] + [[]]
    ids, mask = word_ids(cove_export, batch)
    sess = ort.InferenceSession(str(cove_export), providers=["CPUExecutionProvider"])
    layers, mixed = sess.run(None, {"word_ids": ids, "mask": mask})
    encoder = contextvec.load(cove_dir)
    with torch.no_grad():
        output = encoder(batch)
        want = output.layers.permute(1, 0, 2, 3).numpy()
        mix = contextvec.ScalarMix(3, initial_weights=[1, 0, -1], initial_gamma=2)(output.layers)
    assert layers.shape == want.shape
    assert max(float(np.abs(layers[:, k] - want[:, k]).max()) for k in range(3)) <= TOLERANCE
    assert float(np.abs(mixed - mix.numpy()).max()) <= TOLERANCE


def test_the_cove_manifest_and_word_list(cove_dir, cove_export):
    manifest = json.loads(manifest_path(cove_export).read_text())
    assert manifest["family"] == "cove"
    assert [i["name"] for i in manifest["inputs"]] == ["word_ids", "mask"]
    assert manifest["words"] == {"file": vocabulary_path(cove_export).name, "offset": 1, "unknown": 0,
                                 "lowercase": True}
    assert json.loads(vocabulary_path(cove_export).read_text(encoding="utf-8")) == WORDS
    model = onnx.load(cove_export)
    assert [n.op_type for n in model.graph.node].count("LSTM") == 2  # one loop over time per layer
