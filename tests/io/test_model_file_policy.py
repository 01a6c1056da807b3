"""Model files from anyone: each reader refuses, in one line naming the file, a file that would
read outside its model directory, run code, block, or ask for more memory than it holds."""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from helpers_io import read_h5, reference_dir, tiny_copy

import contextvec
from contextvec.cli.main import main
from contextvec.io import bilm_tf
from contextvec.io.untrusted import UntrustedFileError

EFML = Path(__file__).resolve().parents[1] / "data" / "efml"
SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\n" + b"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" * 8


def _one_line(error: BaseException, *names: str) -> str:
    message = str(error)
    assert "\n" not in message
    for name in names:
        assert name in message, (name, message)
    return message


def _rewrite(directory: Path, dataset: str, **create) -> None:
    """Rewrite bilm-tf's ``weights.hdf5`` with ``dataset`` created by ``create`` (h5py's
    create_dataset arguments) in place of its data, the others as they were."""
    arrays = read_h5(reference_dir("elmo-tiny") / "weights.hdf5")
    with h5py.File(directory / "weights.hdf5", "w") as f:
        for name, array in arrays.items():
            if name == dataset:
                f.create_dataset(name, shape=array.shape, dtype=np.float32, **create)
            else:
                f.create_dataset(name, data=array)


# --------------------------------------------------------------------------- bilm-tf HDF5


def test_external_storage_dataset_is_refused(tmp_path):
    # ASCII bytes read as float32 are finite: without the check the key became model weights
    secret = tmp_path / "id_ed25519"
    secret.write_bytes(SECRET.ljust(4096, b"A"))
    directory = tiny_copy(tmp_path)
    _rewrite(directory, "CNN_proj/W_proj", external=[(str(secret), 0, 28 * 16 * 4)])
    with pytest.raises(UntrustedFileError) as info:
        contextvec.load(directory)
    _one_line(info.value, str(directory / "weights.hdf5"), "CNN_proj/W_proj", "other files")
    out = tmp_path / "native"
    assert main(["convert", "--model", str(directory), "--to", "native", str(out)]) == 2
    assert not out.exists()


def test_virtual_dataset_is_refused(tmp_path):
    source = tmp_path / "elsewhere.h5"
    with h5py.File(source, "w") as f:
        f.create_dataset("x", data=np.ones((28, 16), np.float32))
    directory = tiny_copy(tmp_path)
    arrays = read_h5(directory / "weights.hdf5")
    with h5py.File(directory / "weights.hdf5", "w") as f:
        for name, array in arrays.items():
            if name == "CNN_proj/W_proj":
                layout = h5py.VirtualLayout(shape=(28, 16), dtype=np.float32)
                layout[:] = h5py.VirtualSource(str(source), "x", shape=(28, 16))
                f.create_virtual_dataset(name, layout)
            else:
                f.create_dataset(name, data=array)
    with pytest.raises(UntrustedFileError) as info:
        contextvec.load(directory)
    _one_line(info.value, str(directory / "weights.hdf5"), "CNN_proj/W_proj", "virtual")


@pytest.mark.parametrize("create", [{"chunks": (4, 4)}, {}, {"chunks": (4, 4), "compression": "gzip"}],
                         ids=["chunked", "contiguous", "compressed"])
def test_unwritten_dataset_is_refused(tmp_path, create):
    directory = tiny_copy(tmp_path)
    _rewrite(directory, "CNN_high_0/W_carry", **create)
    with pytest.raises(UntrustedFileError) as info:
        contextvec.load(directory)
    _one_line(info.value, str(directory / "weights.hdf5"), "CNN_high_0/W_carry")


def _declaring(tmp_path: Path, lstm_dim: int) -> Path:
    """A bilm-tf folder whose options.json declares LSTM cells of ``lstm_dim`` and whose
    weight file declares datasets of those shapes, chunked, with no chunk written."""
    directory = tiny_copy(tmp_path)
    options = json.loads((directory / "options.json").read_text(encoding="utf-8"))
    options["lstm"]["dim"] = lstm_dim
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    arrays = read_h5(reference_dir("elmo-tiny") / "weights.hdf5")
    with h5py.File(directory / "weights.hdf5", "w") as f:
        for name, shape in bilm_tf.expected_datasets(options).items():
            if "LSTMCell" in name:
                f.create_dataset(name, shape=shape, dtype=np.float32, chunks=True)
            else:
                f.create_dataset(name, data=arrays[name])
    return directory


def test_file_declaring_gigabytes_is_refused_before_allocating(tmp_path, capsys):
    # a file of a few kilobytes whose declared datasets hold 36 GiB (2 directions x 2 layers)
    directory = _declaring(tmp_path, 1 << 22)
    assert (directory / "weights.hdf5").stat().st_size < 100_000
    assert main(["info", str(directory)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(directory / "weights.hdf5") in error
    assert "chunks" in error and "out of memory" not in error


def test_options_declaring_more_layers_than_the_file_holds(tmp_path):
    directory = tiny_copy(tmp_path)
    options = json.loads((directory / "options.json").read_text(encoding="utf-8"))
    options["lstm"]["n_layers"] = 10**12  # listing its datasets' names alone would never end
    (directory / "options.json").write_text(json.dumps(options), encoding="utf-8")
    with pytest.raises(UntrustedFileError) as info:
        bilm_tf.read_weights(directory / "weights.hdf5", options)
    _one_line(info.value, str(directory / "weights.hdf5"), "LSTM layers")


def test_options_with_infinity_is_one_line(tmp_path):
    directory = tiny_copy(tmp_path)
    text = (directory / "options.json").read_text(encoding="utf-8")
    (directory / "options.json").write_text(text.replace('"n_highway": 1', '"n_highway": Infinity'),
                                            encoding="utf-8")
    assert "Infinity" in (directory / "options.json").read_text(encoding="utf-8")
    with pytest.raises(ValueError) as info:
        contextvec.load(directory)
    _one_line(info.value, str(directory / "options.json"))


def test_compressed_weights_still_load(tmp_path):
    # the reference files of allennlp's tests store their datasets gzip-compressed
    arrays = read_h5(reference_dir("elmo-tiny") / "weights.hdf5")
    directory = tiny_copy(tmp_path)
    with h5py.File(directory / "weights.hdf5", "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array, compression="gzip", chunks=True)
    model = contextvec.load(directory)
    assert torch.equal(model.bilm.state_dict()["token_encoder.projection.bias"],
                       torch.from_numpy(arrays["CNN_proj/b_proj"]))


# --------------------------------------------------------------------------- files a directory names


def _efml(tmp_path: Path) -> Path:
    directory = tmp_path / "efml"
    shutil.copytree(EFML / "words", directory)
    return directory


@pytest.mark.parametrize("name", ["char.dic", "word.dic"])
def test_efml_dictionary_linked_to_dev_zero_is_refused(tmp_path, name):
    directory = _efml(tmp_path)
    (directory / name).unlink()
    (directory / name).symlink_to("/dev/zero")
    with pytest.raises(UntrustedFileError) as info:
        contextvec.load(directory)  # read whole, it grew without bound
    _one_line(info.value, str(directory / name))


def test_efml_dictionary_fifo_is_refused_without_blocking(tmp_path):
    directory = _efml(tmp_path)
    (directory / "word.dic").unlink()
    os.mkfifo(directory / "word.dic")
    errors: list[BaseException] = []

    def load() -> None:
        try:
            contextvec.load(directory)
        except ValueError as e:
            errors.append(e)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(30)
    assert not reader.is_alive(), "reading the FIFO blocked"
    _one_line(errors[0], str(directory / "word.dic"), "FIFO")


def test_efml_config_path_outside_the_directory_is_not_read(tmp_path):
    directory = _efml(tmp_path)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    architecture = Path(config["config_path"]).name
    (tmp_path / "outside.json").write_text((directory / architecture).read_text(encoding="utf-8"))
    (directory / architecture).unlink()
    for named in (str(tmp_path / "outside.json"), "../outside.json"):
        (directory / "config.json").write_text(json.dumps({**config, "config_path": named}))
        with pytest.raises(ValueError) as info:
            contextvec.load(directory)
        _one_line(info.value, str(directory))


def _bert(tmp_path: Path, source: Path) -> Path:
    directory = tmp_path / "bert"
    shutil.copytree(source, directory)
    return directory


def test_bert_vocabulary_linked_out_of_the_directory_is_refused(tmp_path, own_tiny_bert_dir):
    directory = _bert(tmp_path, own_tiny_bert_dir)
    (tmp_path / "elsewhere.txt").write_text((directory / "vocab.txt").read_text())
    (directory / "vocab.txt").unlink()
    (directory / "vocab.txt").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(UntrustedFileError) as info:
        contextvec.load(directory)
    _one_line(info.value, str(directory / "vocab.txt"), "outside the model directory")


def test_bert_in_a_hugging_face_cache_snapshot_loads(tmp_path, own_tiny_bert_dir):
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for file in own_tiny_bert_dir.iterdir():
        shutil.copyfile(file, repo / "blobs" / f"blob-{file.name}")
        (snapshot / file.name).symlink_to(f"../../blobs/blob-{file.name}")
    vectors = contextvec.load(snapshot).embed([["ab", "ba"]])[0]
    expected = contextvec.load(own_tiny_bert_dir).embed([["ab", "ba"]])[0]
    np.testing.assert_array_equal(vectors, expected)


def test_bert_config_declaring_more_than_the_weights_allocates_nothing(tmp_path, own_tiny_bert_dir):
    directory = _bert(tmp_path, own_tiny_bert_dir)
    config = json.loads((directory / "config.json").read_text())
    config["vocab_size"] = 1 << 40  # 16 TiB of embeddings, were they allocated before the check
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as info:
        contextvec.load(directory)
    _one_line(info.value, "word_embeddings")


def test_bert_pickle_with_code_is_refused_in_our_words(tmp_path, own_tiny_bert_dir):
    directory = _bert(tmp_path, own_tiny_bert_dir)
    (directory / "model.safetensors").unlink()
    torch.save({"bert.x": torch.zeros(1), "code": print}, directory / "pytorch_model.bin")
    assert main(["info", str(directory)]) == 2
    with pytest.raises(ValueError) as info:
        contextvec.load(directory)
    message = _one_line(info.value, str(directory / "pytorch_model.bin"), "Python objects other than tensors",
                        "refuses to run them")
    assert "weights_only" not in message


@pytest.mark.parametrize("header", [
    {"w": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 16]}},
    {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1 << 40]}},
])
def test_native_safetensors_header_declaring_past_the_end(tmp_path, own_tiny_dir, header):
    directory = tmp_path / "native"
    shutil.copytree(own_tiny_dir, directory)
    text = json.dumps(header).encode()
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(16))
    with pytest.raises(ValueError) as info:
        contextvec.load(directory)
    _one_line(info.value, str(directory / "model.safetensors"))


def test_native_config_declaring_layers_without_end(tmp_path, own_tiny_dir):
    directory = tmp_path / "native"
    shutil.copytree(own_tiny_dir, directory)
    meta = json.loads((directory / "config.json").read_text())
    meta["config"]["n_layers"] = 10**9
    (directory / "config.json").write_text(json.dumps(meta))
    with pytest.raises(UntrustedFileError) as info:
        contextvec.load(directory)
    _one_line(info.value, str(directory / "config.json"), "n_layers")
