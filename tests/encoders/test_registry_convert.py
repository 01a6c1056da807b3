"""``contextvec convert``: what converts, and one-line refusals for what does not."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_registry import SENTENCES, tiny_bert_dir

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder


def _convert(*args: str) -> int:
    return main(["convert", *map(str, args)])


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_bilm_tf_to_native_and_back(tiny_dir, tmp_path):
    assert _convert(tmp_path / "native", "--to", "native", "--model", tiny_dir) == 0
    assert _convert(tmp_path / "tf", "--to", "bilm-tf", "--model", tmp_path / "native") == 0
    want = contextvec.load(tiny_dir).embed(SENTENCES)
    for path in ("native", "tf"):
        for x, y in zip(contextvec.load(tmp_path / path).embed(SENTENCES), want, strict=True):
            np.testing.assert_array_equal(x, y)


def test_hf_bert_and_cove_to_bilm_tf_are_refused_in_words(tmp_path, capsys):
    """The refusal named the Python class ("BertEncoder has no native form")."""
    bert = tiny_bert_dir(tmp_path / "bert")
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=4, hidden_size=2), ["a"], torch.zeros(1, 4))
    cove = save_cove_encoder(mt_lstm, tmp_path / "cove")
    for model, kind, to in ((bert, "a BERT model", "native"), (bert, "a BERT model", "bilm-tf"),
                            (cove, "a CoVe model", "bilm-tf")):
        assert _convert(tmp_path / f"out-{to}", "--to", to, "--model", model) == 2
        assert _one_error_line(capsys) == (
            f"contextvec: error: {model} is {kind}, which has no {to} form: ELMo (bilm-tf files or "
            "checkpoint, TF-Hub module, or native) converts to native or bilm-tf, CoVe and ELMoForManyLangs "
            "to native; HF BERT directories load as they are, with nothing to convert\n")
        assert not (tmp_path / f"out-{to}").exists()


def test_existing_output_needs_overwrite(own_tiny_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    assert _convert(out, "--to", "bilm-tf", "--model", own_tiny_dir) == 2
    assert "exists; pass --overwrite" in _one_error_line(capsys)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert _convert(out, "--to", "bilm-tf", "--model", own_tiny_dir, "--overwrite") == 0
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "options.json", "weights.hdf5"]
    # a native model written beside bilm-tf files would never be the one loaded
    assert _convert(out, "--to", "native", "--model", own_tiny_dir, "--overwrite") == 2
    assert "holds bilm-tf files" in _one_error_line(capsys)


def test_output_that_is_a_file_or_the_input(own_tiny_dir, tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("x", encoding="utf-8")
    assert _convert(target, "--to", "native", "--model", own_tiny_dir) == 2
    assert "is a file" in _one_error_line(capsys)
    assert _convert(own_tiny_dir, "--to", "native", "--model", own_tiny_dir, "--overwrite") == 2
    assert "is the input" in _one_error_line(capsys)


def test_float16_native_loads_into_float32_parameters(tiny_dir, tmp_path, capsys):
    from safetensors import safe_open

    assert _convert(tmp_path / "half", "--to", "native", "--dtype", "float16", "--model", tiny_dir) == 0
    with safe_open(str(tmp_path / "half" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}  # noqa: SIM118
    half = contextvec.load(tmp_path / "half")
    assert {p.dtype for p in half.parameters()} == {torch.float32}
    full = contextvec.load(tiny_dir).embed(SENTENCES)
    # The fixture's weights are float16-representable, so nothing is lost on the way.
    for x, y in zip(half.embed(SENTENCES), full, strict=True):
        np.testing.assert_array_equal(x, y)
    assert _convert(tmp_path / "tf", "--to", "bilm-tf", "--dtype", "float16", "--model", tiny_dir) == 2
    assert "--dtype applies to --to native" in _one_error_line(capsys)


def test_each_family_says_which_forms_it_converts_to():
    from contextvec.encoders.registry import FAMILIES

    elmo = ("native", "bilm-tf")
    assert {f.name: tuple(map(str, f.converts_to)) for f in FAMILIES} == {
        "bilm-tf": elmo, "tf-elmo": elmo, "elmo-bilm": elmo, "hf-bert": (), "cove": ("native",),
        "elmoformanylangs": ("native",), "elmoformanylangs-bilm": ("native",)}


def test_the_python_call_converts_and_refuses_as_the_command(own_tiny_dir, tmp_path):
    """``contextvec.api.convert`` is the command's job: the same files, the same refusals, made
    when the ``Conversion`` is (nothing loaded or written)."""
    from contextvec.api import Conversion, ModelSpec, convert

    out = convert(Conversion(ModelSpec(str(own_tiny_dir)), "bilm-tf"), tmp_path / "tf")
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "weights.hdf5"]
    for x, y in zip(contextvec.load(out).embed(SENTENCES), contextvec.load(own_tiny_dir).embed(SENTENCES),
                    strict=True):
        np.testing.assert_array_equal(x, y)
    bert = tiny_bert_dir(tmp_path / "bert")
    with pytest.raises(ValueError, match=f"^{bert} is a BERT model, which has no native form: ELMo "):
        Conversion(ModelSpec(str(bert)))
    with pytest.raises(ValueError, match="^--dtype applies to --to native"):
        Conversion(ModelSpec(str(own_tiny_dir)), "bilm-tf", "float16")
    with pytest.raises(ValueError, match="dtype must be one of float32, float16, not 'int8'"):
        Conversion(ModelSpec(str(own_tiny_dir)), dtype="int8")
    with pytest.raises(FileExistsError, match="holds bilm-tf files"):
        convert(Conversion(ModelSpec(str(own_tiny_dir))), out)


def test_each_family_says_whether_it_runs_in_low_precision(tmp_path):
    """ELMo (from any of its bilm files) and BERT run in bf16 and int8 too; the others refuse in one
    line naming their kind."""
    from contextvec.encoders.registry import FAMILIES

    assert [f.name for f in FAMILIES if f.low_precision] == ["bilm-tf", "tf-elmo", "hf-bert", "elmo-bilm"]
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=4, hidden_size=2), ["a"], torch.zeros(1, 4))
    cove = save_cove_encoder(mt_lstm, tmp_path / "cove")
    with pytest.raises(ValueError, match="^precision int8: a CoVe model runs in fp32 only$"):
        contextvec.load(cove, precision="int8")
