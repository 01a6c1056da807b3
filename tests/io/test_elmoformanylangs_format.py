"""ELMoForManyLangs files: how each is read, and one-line errors for malformed ones
(docs/bad-input.md, "ELMoForManyLangs directories")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.bilm import ConfigError
from contextvec.io import elmoformanylangs as efml

DATA = Path(__file__).resolve().parents[1] / "data" / "efml"


@pytest.fixture
def words_dir(tmp_path) -> Path:
    return Path(shutil.copytree(DATA / "words", tmp_path / "words"))


def _one_line_error(directory: Path, capsys, out: Path) -> str:
    """``contextvec embed --model directory`` fails in one line and writes nothing."""
    text = out.with_suffix(".txt")
    text.write_text("Der Bär läuft .\n", encoding="utf-8")
    assert main(["embed", "--model", str(directory), "--top", str(text), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()
    return err


def test_dictionary_lines_are_read_as_the_original_reads_them(tmp_path):
    path = tmp_path / "char.dic"
    # a line whose token strip() removed reads as the ideographic space; strip() takes the
    # spaces around the line only; the last id wins
    path.write_text("a\t0\n\u3000\t1\n b \t2\na\t3\n", encoding="utf-8")
    assert efml.read_dictionary(path) == {"a": 3, "\u3000": 1, "b ": 2}
    path.write_text("a\t0\nb\tc\t2\n", encoding="utf-8")
    with pytest.raises(efml.ManyLangsFormatError, match=r"char.dic:2: not a 'token<TAB>id' line"):
        efml.read_dictionary(path)
    path.write_text("", encoding="utf-8")
    with pytest.raises(efml.ManyLangsFormatError, match="empty"):
        efml.read_dictionary(path)


def test_config_path_is_found_where_the_original_looks(words_dir):
    named = json.loads((words_dir / "config.json").read_text())["config_path"]
    assert Path(named).is_absolute() and not Path(named).exists()  # the trainer's machine
    assert efml.read_architecture(words_dir)["encoder"]["dim"] == 16  # by file name, in the directory
    (words_dir / Path(named).name).unlink()
    with pytest.raises(efml.ManyLangsFormatError, match="copy the architecture JSON into"):
        efml.read_architecture(words_dir)
    # a released model naming one of the package's own architecture files gets that file
    (words_dir / "config.json").write_text(json.dumps({"config_path": "/x/cnn_50_100_512_4096_sample.json"}))
    architecture = efml.read_architecture(words_dir)
    assert architecture["token_embedder"]["word_dim"] == 100 and architecture["encoder"]["dim"] == 4096


def test_pickles_are_read_weights_only(tmp_path):
    path = tmp_path / "encoder.pkl"
    torch.save({"w": torch.zeros(1), "code": print}, path)
    with pytest.raises(ValueError, match="holds Python objects other than tensors") as info:
        efml.read_state(path)
    assert "weights_only" not in str(info.value)
    torch.save({"w": torch.zeros(1)}, path, _use_new_zipfile_serialization=False)  # 2018's format
    assert efml.read_state(path)["w"].shape == (1,)


@pytest.mark.parametrize("name", ["token_embedder.pkl", "encoder.pkl"])
def test_truncated_pickle_is_one_line(words_dir, name, tmp_path, capsys):
    data = (words_dir / name).read_bytes()
    (words_dir / name).write_bytes(data[: len(data) // 2])
    err = _one_line_error(words_dir, capsys, tmp_path / "out.hdf5")
    assert f"{name}: not a weights-only PyTorch checkpoint" in err


def test_malformed_files_are_one_line(words_dir, tmp_path, capsys):
    out = tmp_path / "out.hdf5"
    (words_dir / "word.dic").write_text("Der\t0\n", encoding="utf-8")
    assert "word.dic lacks <oov>, <pad>" in _one_line_error(words_dir, capsys, out)
    shutil.copy(DATA / "words" / "word.dic", words_dir / "word.dic")
    (words_dir / "char.dic").write_text("a\t0\n<oov>\t1\n<pad>\t2\n<bos>\t3\n<eos>\t4\n<bow>\t5\n<eow>\t99\n")
    assert "char.dic has id 99, past the 38 rows of its embedding" in _one_line_error(words_dir, capsys, out)
    shutil.copy(DATA / "words" / "char.dic", words_dir / "char.dic")
    (words_dir / "config.json").write_text("{not json", encoding="utf-8")
    assert "config.json: unreadable JSON" in _one_line_error(words_dir, capsys, out)


def test_tensors_must_match_the_architecture(words_dir):
    state = torch.load(words_dir / "encoder.pkl", weights_only=True)
    state["forward_layer_2.state_projection.weight"] = torch.zeros(8, 16)
    torch.save(state, words_dir / "encoder.pkl")
    Error = efml.ManyLangsFormatError
    with pytest.raises(Error, match="'forward_layer_2.state_projection.weight' is not part"):
        contextvec.load(words_dir)
    del state["forward_layer_2.state_projection.weight"], state["forward_layer_1.state_linearity.bias"]
    torch.save(state, words_dir / "encoder.pkl")
    with pytest.raises(Error, match="encoder.pkl: no tensor 'forward_layer_1.state_linearity"):
        contextvec.load(words_dir)
    state = torch.load(DATA / "words" / "encoder.pkl", weights_only=True)
    state["backward_layer_0.state_linearity.bias"][3] = float("nan")
    torch.save(state, words_dir / "encoder.pkl")
    with pytest.raises(Error, match="backward_layer_0.state_linearity.bias has NaN or infinite values"):
        contextvec.load(words_dir)
    state = torch.load(DATA / "words" / "encoder.pkl", weights_only=True)
    state["backward_layer_0.state_projection.weight"] = torch.zeros(8, 15)
    torch.save(state, words_dir / "encoder.pkl")
    with pytest.raises(Error, match=r"has shapes \(8, 16\) forward and \(8, 15\) backward"):
        contextvec.load(words_dir)
    for direction in ("forward", "backward"):
        state[f"{direction}_layer_0.state_projection.weight"] = torch.zeros(8, 15)
    torch.save(state, words_dir / "encoder.pkl")
    with pytest.raises(ValueError, match=r"layers.0.projection has shape \(2, 8, 15\); its configuration"):
        contextvec.load(words_dir)


def test_unsupported_architectures_are_named(words_dir):
    arch_file = next(words_dir.glob("cnn_*.json"))
    architecture = json.loads(arch_file.read_text())
    architecture["token_embedder"]["name"] = "lstm"
    arch_file.write_text(json.dumps(architecture))
    with pytest.raises(ConfigError, match="token_embedder 'lstm' is not supported"):
        contextvec.load(words_dir)


def test_layers_equal_the_pickled_modules_under_new_names():
    """The highway gate changes sign and the LSTM gate blocks swap f and g: both exact."""
    files = efml.read_model_dir(DATA / "words")
    state = efml.to_state_dict(files, n_layers=2)
    highway = files.token_embedder["highways._layers.0.weight"]
    n = highway.shape[1]
    assert torch.equal(state["token_encoder.char_cnn.highway.gate.0.weight"], -highway[n:])
    theirs = files.encoder["backward_layer_1.input_linearity.weight"]
    ours = state["layers.1.input_weight"][1]
    c = theirs.shape[0] // 4
    for mine, their in ((0, 0), (1, 2), (2, 1), (3, 3)):  # i, j(g), f, o  <-  i, f, g, o
        assert torch.equal(ours[mine * c : (mine + 1) * c], theirs[their * c : (their + 1) * c])
    forward_projection = files.encoder["forward_layer_1.state_projection.weight"]
    assert torch.equal(state["layers.1.projection"][0], forward_projection)
