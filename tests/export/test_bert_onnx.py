"""contextvec export of a BERT: ONNX Runtime gives BertEncoder's fp32 word vectors (first piece
of each word) on every layer, from inputs made with the tokenizer files written beside it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.bert import BertEncoder
from contextvec.export import manifest_path

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")

# The BERT parity goal: LayerNorm and softmax over a few hundred fp32 terms per layer,
# summed in other orders than torch's, differ by some 1e-6 at these magnitudes.
TOLERANCE = 1e-4
WORDS = ["the", "bank", "was", "robbed", "by", "a", "man", "who", "ran", "into", "river", ",", "and",
         "unbelievably", "Überraschung", "日本語", "🙂", "12,345", "(", ")"]


@pytest.fixture(scope="module")
def bert_export(minilm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "minilm.onnx"
    assert main(["export", str(minilm_dir), str(out), "--scalar-mix", "average"]) == 0
    return out


def inputs(onnx_path, batch: list[list[str]]) -> dict[str, np.ndarray]:
    """The graph's inputs as a runtime makes them from the manifest and tokenizer.json: each word
    on its own, [UNK] for a word without pieces, [CLS] ... [SEP] per sentence."""
    contract = json.loads(manifest_path(onnx_path).read_text())["pieces"]
    tokenizer = tokenizers.Tokenizer.from_file(str(onnx_path.parent / contract["tokenizer_file"]))
    rows, firsts = [], []
    for sentence in batch:
        row, first = [contract["cls_id"]], []
        for word in sentence:
            first.append(len(row))
            row += tokenizer.encode(word, add_special_tokens=False).ids or [contract["unk_id"]]
        rows.append(row + [contract["sep_id"]])
        firsts.append(first)
    pieces, words = max(map(len, rows)), max(map(len, firsts), default=0)
    feed = {name: np.zeros((len(batch), n), np.int64) for name, n in
            (("input_ids", pieces), ("attention_mask", pieces), ("first_piece", words), ("mask", words))}
    feed["input_ids"][:] = contract["padding_id"]
    for b, (row, first) in enumerate(zip(rows, firsts, strict=True)):
        feed["input_ids"][b, : len(row)] = row
        feed["attention_mask"][b, : len(row)] = 1
        feed["first_piece"][b, : len(first)] = first
        feed["mask"][b, : len(first)] = 1
    return feed


def check(minilm_dir, bert_export, lengths: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    batch = [[WORDS[k] for k in rng.integers(0, len(WORDS), n)] for n in lengths]
    sess = ort.InferenceSession(str(bert_export), providers=["CPUExecutionProvider"])
    layers, mixed, _ = sess.run(None, inputs(bert_export, batch))
    encoder = contextvec.load(minilm_dir)
    with torch.no_grad():
        output = encoder(batch)
        want = output.layers.permute(1, 0, 2, 3).numpy()
        mix = contextvec.ScalarMix(encoder.num_layers)(output.layers).numpy()
    assert layers.shape == want.shape
    assert max(float(np.abs(layers[:, k] - want[:, k]).max()) for k in range(want.shape[1])) <= TOLERANCE
    assert float(np.abs(mixed - mix).max()) <= TOLERANCE


def test_bert_in_onnx_runtime_equals_contextvec_on_every_layer(minilm_dir, bert_export):
    check(minilm_dir, bert_export, [1], seed=0)
    check(minilm_dir, bert_export, [37, 1, 120, 5, 2, 64], seed=1)


@pytest.mark.slow
def test_bert_batch_64_of_mixed_lengths(minilm_dir, bert_export):
    check(minilm_dir, bert_export, [int(n) for n in np.random.default_rng(2).integers(1, 201, 64)], seed=3)


def test_the_bert_manifest_and_tokenizer_files(bert_export, minilm_dir):
    manifest = json.loads(manifest_path(bert_export).read_text())
    assert manifest["family"] == "bert"
    assert [i["name"] for i in manifest["inputs"]] == ["input_ids", "attention_mask", "first_piece", "mask"]
    assert [o["name"] for o in manifest["outputs"]] == ["layers", "mixed", "hidden_states"]
    vocab = (bert_export.parent / manifest["pieces"]["vocab_file"]).read_text(encoding="utf-8").splitlines()
    assert vocab[manifest["pieces"]["cls_id"]] == "[CLS]" and vocab[manifest["pieces"]["sep_id"]] == "[SEP]"


def test_mean_pooling_is_refused(minilm_dir, tmp_path):
    encoder = contextvec.load(minilm_dir)
    mean = BertEncoder(encoder.model, encoder.tokenizer, subword_pooling="mean")
    with pytest.raises(ValueError, match="first piece's vectors; this encoder pools 'mean'"):
        contextvec.export_onnx(mean, tmp_path / "m.onnx")
