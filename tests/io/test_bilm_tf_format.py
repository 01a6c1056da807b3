"""bilm-tf (options.json + weights.hdf5) and native (safetensors) formats: round trips, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers_io import (
    read_h5,
    reference_dir,
    reference_expected,
    reference_sentences,
    tiny_copy,
)
from tolerance import assert_reordered_close, elmo_terms

import contextvec
from contextvec.encoders.bilm import BiLMConfig, ConfigError, ElmoBiLM
from contextvec.encoders.bilm.encoder import ElmoEncoder
from contextvec.encoders.bilm.loader import load_bilm_tf, read_options, save_bilm_tf
from contextvec.io.bilm_tf import (
    WeightFileError,
    expected_datasets,
    from_state_dict,
    read_options_json,
    read_weights,
    to_state_dict,
    write_weights,
)
from contextvec.io.native import NativeFormatError

SOME_SENTENCES = [0, 4, 8, 12, 35, 56, 25]  # short, accents, long tokens, the longest


def _embed_some(encoder, name: str) -> list[np.ndarray]:
    sentences = reference_sentences(name)
    return encoder.embed([list(sentences[i]) for i in SOME_SENTENCES])


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("name", ["elmo-tiny", "elmo-small"])
def test_hdf5_round_trip_is_bit_exact(name, tmp_path):
    src = reference_dir(name)
    # the format functions need nothing but the file's own options.json
    options = read_options_json(src / "options.json")
    original = read_h5(src / "weights.hdf5")
    assert set(original) == set(expected_datasets(options))

    arrays = read_weights(src / "weights.hdf5", options)
    model = ElmoBiLM(read_options(src / "options.json"))
    # strict: every parameter of the model comes from the file and nothing is left over
    model.load_state_dict(to_state_dict(arrays, options), strict=True)
    out = tmp_path / "weights.hdf5"
    write_weights(from_state_dict(model.state_dict(), options), out)

    again = read_h5(out)
    assert sorted(again) == sorted(original)
    for key, ref in original.items():
        got = again[key]
        assert got.shape == ref.shape, key
        assert got.dtype == np.float32, key
        assert np.array_equal(got.view(np.uint32), ref.astype(np.float32).view(np.uint32)), key
    # no temporary file left beside the result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights.hdf5"]


def test_to_state_dict_layout_matches_model():
    src = reference_dir("elmo-tiny")
    config = read_options(src / "options.json")
    options = config.to_options()
    sd = to_state_dict(read_weights(src / "weights.hdf5", options), options)
    model_sd = ElmoBiLM(config).state_dict()
    assert sorted(sd) == sorted(model_sd)
    for key, tensor in sd.items():
        assert tensor.shape == model_sd[key].shape, key
        assert tensor.dtype == torch.float32
    # the padding row of the char embedding is added as zeros in front of the file's 261 rows
    raw = read_h5(src / "weights.hdf5")
    emb = sd["token_encoder.char_embedding.weight"]
    assert torch.equal(emb[0], torch.zeros(config.char_embed_dim))
    assert np.array_equal(emb[1:].numpy(), raw["char_embed"])
    # TF LSTM kernel [W_x; W_h] (2P, 4D) is split and transposed; direction 1 = RNN_1
    w0 = raw["RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"]
    p = config.projection_dim
    assert np.array_equal(sd["layers.0.input_weight"][1].numpy(), w0[:p].T)
    assert np.array_equal(sd["layers.0.state_weight"][1].numpy(), w0[p:].T)


def test_save_load_bilm_tf_round_trip(tmp_path):
    src = reference_dir("elmo-tiny")
    model = load_bilm_tf(src / "options.json", src / "weights.hdf5")
    assert not model.training
    save_bilm_tf(model, tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert read_options(tmp_path / "options.json") == model.config
    options = json.loads((tmp_path / "options.json").read_text(encoding="utf-8"))
    assert options["char_cnn"]["n_characters"] == 262
    assert options["lstm"]["projection_dim"] == 16

    reloaded = load_bilm_tf(tmp_path / "options.json", tmp_path / "weights.hdf5")
    sd1, sd2 = model.state_dict(), reloaded.state_dict()
    assert sorted(sd1) == sorted(sd2)
    for key in sd1:
        assert torch.equal(sd1[key], sd2[key]), key

    a = _embed_some(contextvec.load(src), "elmo-tiny")
    b = _embed_some(contextvec.load(tmp_path), "elmo-tiny")
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


def test_native_save_load_round_trip(tmp_path):
    src = reference_dir("elmo-tiny")
    encoder = contextvec.load(src)
    directory = contextvec.save(encoder, tmp_path / "native")
    assert sorted(p.name for p in directory.iterdir()) == ["config.json", "model.safetensors"]
    meta = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    assert meta["model_type"] == "elmo-bilm"
    assert meta["format_version"] == 1

    reloaded = contextvec.load(directory)
    assert reloaded.config == encoder.config
    sd1, sd2 = encoder.bilm.state_dict(), reloaded.bilm.state_dict()
    assert sorted(sd1) == sorted(sd2)
    for key in sd1:
        assert torch.equal(sd1[key], sd2[key]), key

    a = _embed_some(encoder, "elmo-tiny")
    b = _embed_some(reloaded, "elmo-tiny")
    expected = reference_expected("elmo-tiny")
    for i, x, y in zip(SOME_SENTENCES, a, b, strict=True):
        assert np.array_equal(x, y)
        np.testing.assert_allclose(y, expected[f"activations_{i:03d}"], atol=1e-4, rtol=1e-4)


def test_load_with_explicit_files_matches_directory():
    src = reference_dir("elmo-tiny")
    a = _embed_some(contextvec.load(src), "elmo-tiny")
    b = _embed_some(
        contextvec.load(options_file=src / "options.json", weight_file=src / "weights.hdf5"),
        "elmo-tiny",
    )
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


# --------------------------------------------------------------------------- bilm-tf errors


@pytest.fixture
def tiny_arrays() -> dict[str, np.ndarray]:
    return read_h5(reference_dir("elmo-tiny") / "weights.hdf5")


@pytest.fixture
def tiny_config() -> BiLMConfig:
    return read_options(reference_dir("elmo-tiny") / "options.json")


def _load_dir(directory):
    return load_bilm_tf(directory / "options.json", directory / "weights.hdf5")


def test_untouched_copy_loads(tmp_path, tiny_arrays):
    # the control for the error tests below: rewriting the datasets unchanged is fine
    model = _load_dir(tiny_copy(tmp_path, dict(tiny_arrays)))
    assert isinstance(model, ElmoBiLM)


def test_missing_dataset(tmp_path, tiny_arrays):
    name = "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"
    del tiny_arrays[name]
    directory = tiny_copy(tmp_path, tiny_arrays)
    with pytest.raises(WeightFileError, match="missing datasets") as info:
        _load_dir(directory)
    assert name in str(info.value)
    assert "unexpected" not in str(info.value)


def test_unexpected_dataset(tmp_path, tiny_arrays):
    tiny_arrays["CNN_high_1/W_carry"] = np.zeros((28, 28), np.float32)
    directory = tiny_copy(tmp_path, tiny_arrays)
    with pytest.raises(WeightFileError, match="unexpected datasets") as info:
        _load_dir(directory)
    assert "CNN_high_1/W_carry" in str(info.value)
    assert "missing" not in str(info.value)


def test_weights_for_other_options(tmp_path, tiny_arrays):
    # options.json says 2 highway layers, the file has 1: the missing ones are named
    directory = tiny_copy(tmp_path, tiny_arrays)
    options = json.loads((directory / "options.json").read_text(encoding="utf-8"))
    options["char_cnn"]["n_highway"] = 2
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    with pytest.raises(WeightFileError) as info:
        _load_dir(directory)
    assert "CNN_high_1/W_transform" in str(info.value)


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("CNN_high_0/b_carry", (27,)),
        ("RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0", (128, 32)),  # transposed
        ("char_embed", (262, 4)),  # a padding row the file must not have
    ],
)
def test_dataset_shape_disagrees_with_options(tmp_path, tiny_arrays, name, shape):
    tiny_arrays[name] = np.zeros(shape, np.float32)
    directory = tiny_copy(tmp_path, tiny_arrays)
    with pytest.raises(WeightFileError) as info:
        _load_dir(directory)
    message = str(info.value)
    assert name in message
    assert str(shape) in message


def test_random_bytes_are_not_hdf5(tmp_path, tiny_config):
    path = tmp_path / "weights.hdf5"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(WeightFileError, match="not a readable HDF5") as info:
        read_weights(path, tiny_config.to_options())
    assert str(path) in str(info.value)


def test_truncated_hdf5(tmp_path):
    directory = tiny_copy(tmp_path)
    path = directory / "weights.hdf5"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightFileError, match="truncated"):
        _load_dir(directory)
    with pytest.raises(WeightFileError, match="truncated"):
        contextvec.load(directory)


def test_missing_weight_file(tmp_path, tiny_config):
    with pytest.raises(FileNotFoundError, match="weight file not found"):
        read_weights(tmp_path / "nope.hdf5", tiny_config.to_options())
    directory = tiny_copy(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_bilm_tf(directory / "options.json", directory / "nope.hdf5")


def test_missing_options_file(tmp_path):
    directory = tiny_copy(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_bilm_tf(directory / "nope.json", directory / "weights.hdf5")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weight(tmp_path, tiny_arrays, value):
    name = "CNN_proj/W_proj"
    tiny_arrays[name] = tiny_arrays[name].copy()
    tiny_arrays[name][3, 5] = value
    tiny_arrays[name][7, 1] = value
    directory = tiny_copy(tmp_path, tiny_arrays)
    with pytest.raises(WeightFileError, match="NaN or infinite") as info:
        _load_dir(directory)
    assert name in str(info.value)
    assert "2 NaN" in str(info.value)


def test_integer_dataset(tmp_path, tiny_arrays):
    name = "CNN/b_cnn_0"
    tiny_arrays[name] = np.zeros(tiny_arrays[name].shape, np.int32)
    directory = tiny_copy(tmp_path, tiny_arrays)
    with pytest.raises(WeightFileError, match="non-float") as info:
        _load_dir(directory)
    assert name in str(info.value)


def test_options_not_json(tmp_path):
    directory = tiny_copy(tmp_path)
    (directory / "options.json").write_text('{"lstm": {"dim": 32,', encoding="utf-8")
    with pytest.raises(ConfigError, match="not a valid options.json") as info:
        _load_dir(directory)
    assert str(directory / "options.json") in str(info.value)


def test_options_not_utf8(tmp_path):
    directory = tiny_copy(tmp_path)
    (directory / "options.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not a valid options.json"):
        read_options(directory / "options.json")


def test_options_missing_lstm(tmp_path):
    directory = tiny_copy(tmp_path)
    options = json.loads((directory / "options.json").read_text(encoding="utf-8"))
    del options["lstm"]
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    with pytest.raises(ConfigError, match="lstm") as info:
        _load_dir(directory)
    assert str(directory / "options.json") in str(info.value)
    with pytest.raises(ConfigError, match="lstm"):
        contextvec.load(directory)


@pytest.mark.parametrize("content", ["[1, 2, 3]", "null", '{"lstm": 3, "char_cnn": {}}'])
def test_options_wrong_structure(tmp_path, content):
    path = tmp_path / "options.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match="options.json"):
        read_options(path)


def test_options_bad_values(tmp_path):
    directory = tiny_copy(tmp_path)
    options = json.loads((directory / "options.json").read_text(encoding="utf-8"))
    options["char_cnn"]["activation"] = "gelu"
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    with pytest.raises(ConfigError, match="gelu"):
        read_options(directory / "options.json")


def test_failed_write_leaves_no_file(tmp_path):
    out = tmp_path / "weights.hdf5"
    with pytest.raises(TypeError):  # h5py: "a" is a dataset, so "a/b" cannot be created
        write_weights({"a": np.zeros(3, np.float32), "a/b": np.zeros(2, np.float32)}, out)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- native errors


@pytest.fixture
def native_dir(tmp_path):
    return contextvec.save(contextvec.load(reference_dir("elmo-tiny")), tmp_path / "native")


def test_native_truncated_safetensors(native_dir):
    path = native_dir / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(NativeFormatError, match="truncated") as info:
        contextvec.load(native_dir)
    assert "model.safetensors" in str(info.value)


def test_native_unknown_model_type(native_dir):
    path = native_dir / "config.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["model_type"] = "gpt-17"
    path.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(NativeFormatError, match="unknown model_type 'gpt-17'"):
        contextvec.load(native_dir)


def test_native_config_not_json(native_dir):
    (native_dir / "config.json").write_text("not json", encoding="utf-8")
    with pytest.raises(NativeFormatError, match="config.json"):
        contextvec.load(native_dir)


def test_native_newer_format_version(native_dir):
    path = native_dir / "config.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["format_version"] = 2
    path.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(NativeFormatError, match="format version 2"):
        contextvec.load(native_dir)


def test_native_unknown_config_field(native_dir):
    path = native_dir / "config.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["config"]["n_heads"] = 4
    path.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ConfigError, match="n_heads"):
        contextvec.load(native_dir)


def test_native_non_finite_tensor(native_dir):
    from safetensors.torch import load_file, save_file

    path = native_dir / "model.safetensors"
    tensors = load_file(str(path))
    tensors["layers.1.bias"][0, 3] = float("nan")
    save_file(tensors, str(path))
    with pytest.raises(NativeFormatError, match=r"layers\.1\.bias has NaN"):
        contextvec.load(native_dir)


def test_plain_lstm_exports_with_identity_projection(tmp_path):
    config = BiLMConfig(char_embed_dim=4, filters=((1, 4), (2, 8)), projection_dim=6, lstm_dim=6,
                        cell_clip=None, proj_clip=None, lstm_projection=False)
    torch.manual_seed(0)
    model = ElmoBiLM(config).eval()
    save_bilm_tf(model, tmp_path / "options.json", tmp_path / "weights.hdf5")
    exported = load_bilm_tf(tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert exported.config.lstm_projection  # bilm-tf's layout always has W_P
    a = _embed_some(ElmoEncoder(model), "elmo-tiny")
    b = _embed_some(ElmoEncoder(exported), "elmo-tiny")
    # A plain LSTM may run torch's fused kernel, the projected one steps: other sum orders.
    for x, y in zip(a, b, strict=True):
        assert_reordered_close(x, y, terms=elmo_terms(config))
