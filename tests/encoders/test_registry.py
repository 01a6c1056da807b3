"""The model registry: each family recognises and loads its directories, ``io/`` stands alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import contextvec
from contextvec.api import model_info
from contextvec.encoders.bert import BertConfig, BertEncoder, BertModel
from contextvec.encoders.bilm import ElmoEncoder
from contextvec.encoders.cove import MTLSTM, CoveEncoder, MTLSTMConfig, save_cove_encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.registry import FAMILIES, family_of, family_saving
from contextvec.io import bilm_tf, hf_bert
from contextvec.io import cove as cove_io
from contextvec.io.native import NativeFormatError

SENTENCES = [["the", "bank", "was", "robbed", "."], ["ab", "ba"]]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##a", "##b"]


def _tiny_bert() -> BertModel:
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=12, max_position_embeddings=16)
    return BertModel(config).eval()


def tiny_bert_dir(directory, model: BertModel | None = None, legacy: bool = False):
    """An HF BERT directory of ``model`` (a tiny random one by default) with BertForPreTraining
    keys (``bert.`` prefix, a ``cls.`` head), and ``gamma``/``beta`` LayerNorm names when ``legacy``."""
    model = model or _tiny_bert()
    state = {f"bert.{k}": v.contiguous() for k, v in model.state_dict().items()}
    if legacy:
        legacy_name = {"LayerNorm.weight": "LayerNorm.gamma", "LayerNorm.bias": "LayerNorm.beta"}
        for new, old in legacy_name.items():
            state = {k.replace(new, old): v for k, v in state.items()}
    state["cls.predictions.bias"] = torch.zeros(len(VOCAB))
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(model.config.to_dict()), encoding="utf-8")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    save_file(state, str(directory / "model.safetensors"))
    return directory


def _cove_dir(directory):
    torch.manual_seed(0)
    words = ["the", "bank", "was", "robbed", "."]
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=6, hidden_size=4), words, torch.randn(len(words), 6))
    return save_cove_encoder(mt_lstm, directory)


def test_io_imports_no_encoder():
    code = ("import sys, contextvec.io.bilm_tf, contextvec.io.native, contextvec.io.hf_bert, "
            "contextvec.io.cove, contextvec.io.word_vectors; "
            "print(sorted(m for m in sys.modules if m.startswith('contextvec.encoders')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_bilm_tf_format_needs_only_the_options_it_reads(tiny_dir):
    options = bilm_tf.read_options_json(tiny_dir / "options.json")
    arrays = bilm_tf.read_weights(tiny_dir / "weights.hdf5", options)
    assert set(bilm_tf.to_state_dict(arrays, options)) == set(contextvec.load(tiny_dir).bilm.state_dict())
    del options["lstm"]["n_layers"]
    with pytest.raises(bilm_tf.OptionsError, match="lacks or mistypes a required field: 'n_layers'"):
        bilm_tf.expected_datasets(options)


def test_families_in_order():
    assert [f.name for f in FAMILIES] == [
        "bilm-tf", "tf-elmo", "hf-bert", "cove", "elmo-bilm", "elmoformanylangs", "elmoformanylangs-bilm"]


def test_each_family_recognises_its_own(tiny_dir, own_tiny_dir, tmp_path):
    bert = tiny_bert_dir(tmp_path / "bert")
    cove = _cove_dir(tmp_path / "cove")
    for path, name, kind in ((tiny_dir, "bilm-tf", ElmoEncoder), (bert, "hf-bert", BertEncoder),
                             (cove, "cove", CoveEncoder), (own_tiny_dir, "elmo-bilm", ElmoEncoder)):
        assert [f.name for f in FAMILIES if f.recognise(path)] == [name]
        encoder = contextvec.load(path)
        assert isinstance(encoder, kind) and not encoder.training
    assert family_of(tmp_path / "nothing-here") is None


def test_hf_bert_legacy_names_and_prefix(tmp_path):
    model = _tiny_bert()
    modern = tiny_bert_dir(tmp_path / "modern", model)
    legacy = tiny_bert_dir(tmp_path / "legacy", model, legacy=True)
    want = model.state_dict()
    for directory in (modern, legacy):
        tensors = hf_bert.read_weights(directory)
        assert sorted(tensors) == sorted(want)  # prefix gone, cls.* head dropped, gamma -> weight
        assert all(torch.equal(tensors[k], want[k]) for k in want)
    a, b = (contextvec.load(d) for d in (modern, legacy))
    expected = BertEncoder(model, a.tokenizer).eval().embed(["ab ba"])[0]
    np.testing.assert_array_equal(a.embed(["ab ba"])[0], expected)
    np.testing.assert_array_equal(b.embed(["ab ba"])[0], expected)


def test_hf_bert_pytorch_bin_is_read_weights_only(tmp_path):
    directory = tiny_bert_dir(tmp_path / "bert")
    (directory / "model.safetensors").unlink()
    torch.save({"bert.x": torch.zeros(1), "code": print}, directory / "pytorch_model.bin")
    with pytest.raises(hf_bert.BertCheckpointError, match="unreadable checkpoint"):
        contextvec.load(directory)


def test_cove_round_trip_through_registry(tmp_path):
    directory = _cove_dir(tmp_path / "cove")
    encoder = contextvec.load(directory)
    assert family_saving(encoder).name == "cove"
    again = contextvec.load(contextvec.save(encoder, tmp_path / "again"))
    for x, y in zip(encoder.embed(SENTENCES), again.embed(SENTENCES), strict=True):
        np.testing.assert_array_equal(x, y)


def test_salesforce_state_dict_sizes_and_errors(tmp_path):
    lstm = torch.nn.LSTM(5, 3, num_layers=2, bidirectional=True)
    torch.save({"state_dict": {f"rnn.{k}": v for k, v in lstm.state_dict().items()}}, tmp_path / "m.pth")
    sizes, tensors = cove_io.salesforce_state_dict(cove_io.read_salesforce_checkpoint(tmp_path / "m.pth"))
    assert sizes == (5, 3, 2)
    assert torch.equal(tensors["layers.1.weight_hh_l0_reverse"], lstm.weight_hh_l1_reverse)
    wide = dict(lstm.state_dict())
    wide["weight_ih_l1"] = torch.zeros(12, 7)
    with pytest.raises(ValueError, match=r"layers\.1\.weight_ih_l0: shape \(12, 7\), expected \(12, 6\)"):
        cove_io.salesforce_state_dict(wide)
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pth: not a weights-only PyTorch checkpoint"):
        cove_io.read_salesforce_checkpoint(tmp_path / "junk.pth")


def test_unknown_native_model_type_and_empty_directory(own_tiny_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.safetensors").write_bytes((own_tiny_dir / "model.safetensors").read_bytes())
    meta = json.loads((own_tiny_dir / "config.json").read_text(encoding="utf-8"))
    (other / "config.json").write_text(json.dumps({**meta, "model_type": "gpt-17"}), encoding="utf-8")
    with pytest.raises(NativeFormatError, match="unknown model_type 'gpt-17'"):
        contextvec.load(other)
    with pytest.raises(contextvec.ModelNotFoundError, match="not a model directory .*HF BERT"):
        contextvec.load(tmp_path)


def test_bert_has_no_saving_family(tmp_path):
    directory = tiny_bert_dir(tmp_path / "bert")
    with pytest.raises(TypeError, match="cannot save BertEncoder"):
        contextvec.save(contextvec.load(directory), tmp_path / "out")


# ------------------------------------------------------------------ load() and save() arguments


def test_load_needs_both_bilm_tf_files(tiny_dir):
    src = tiny_dir
    with pytest.raises(ValueError, match="options_file and weight_file"):
        contextvec.load(options_file=src / "options.json")
    with pytest.raises(ValueError, match="options_file and weight_file"):
        contextvec.load(weight_file=src / "weights.hdf5")


def test_load_nonexistent_path(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(contextvec.ModelNotFoundError, match="no model at") as info:
        contextvec.load(missing)
    assert str(missing) in str(info.value)
    assert isinstance(info.value, FileNotFoundError)


def test_load_directory_without_model(tmp_path):
    (tmp_path / "options.json").write_text("{}", encoding="utf-8")  # weights.hdf5 missing
    with pytest.raises(contextvec.ModelNotFoundError, match="not a model directory"):
        contextvec.load(tmp_path)


def test_load_without_model_gives_the_bundled_one(monkeypatch):
    encoder = contextvec.load()
    assert (encoder.num_layers, encoder.output_dim) == (3, 256)
    monkeypatch.setattr(contextvec.resolve, "bundled_models", lambda: {})
    with pytest.raises(contextvec.ModelNotFoundError, match="missing from this installation"):
        contextvec.load()


def test_a_model_name_resolves_to_a_path_then_a_bundled_model(tmp_path, monkeypatch):
    from contextvec.api import bundled_models, resolve_model

    assert resolve_model("elmo-en-small") == bundled_models()["elmo-en-small"]
    assert resolve_model(tmp_path / "missing") == tmp_path / "missing"  # load says it is missing
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elmo-en-small").mkdir()  # a folder of that name here wins over the bundled model
    assert resolve_model("elmo-en-small") == Path("elmo-en-small")


def test_load_from_string_path_and_os_fspath(tiny_dir):
    encoder = contextvec.load(os.fspath(tiny_dir))
    assert encoder.num_layers == 3
    assert encoder.output_dim == 32
    assert not encoder.training


def test_save_refuses_foreign_encoder(tmp_path):
    with pytest.raises(TypeError, match="cannot save"):
        contextvec.save(torch.nn.Linear(2, 2), tmp_path)  # type: ignore[arg-type]


def test_info_describes_every_family(tiny_dir, own_tiny_dir, tmp_path):
    """Each family says what its files are and what else there is to know of its models."""
    assert all(f.format and f.facts is not None for f in FAMILIES)
    efml = Path(__file__).resolve().parents[1] / "data" / "efml" / "words"
    cases = ((tiny_dir, "bilm-tf", "characters"), (tiny_bert_dir(tmp_path / "bert"), "hf-bert", "vocabulary"),
             (_cove_dir(tmp_path / "cove"), "cove", "vocabulary"), (own_tiny_dir, "elmo-bilm", "LSTM"),
             (efml, "elmoformanylangs", "word vocabulary"))
    for path, family, fact in cases:
        info = model_info(path)
        encoder = contextvec.load(path)
        shape = (encoder.num_layers, encoder.output_dim)
        assert (info.family, info.num_layers, info.output_dim) == (family, *shape)
        assert info.format == next(f.format for f in FAMILIES if f.name == family)
        assert fact in dict(info.facts) and info.fingerprint == model_identity(encoder)
