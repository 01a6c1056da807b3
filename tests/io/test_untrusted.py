"""contextvec.io.untrusted: the one policy for files a model directory names."""

from __future__ import annotations

import io
import os
import threading

import h5py
import numpy as np
import pytest
import torch

from contextvec.io.untrusted import (
    HDF5_EXPANSION_CAP,
    UntrustedFileError,
    check_declared,
    check_hdf5_dataset,
    model_file,
    read_bounded,
    read_json,
    read_torch_weights,
    regular_file,
)


def _one_line(error: BaseException, *names: object) -> str:
    message = str(error)
    assert "\n" not in message
    for name in names:
        assert str(name) in message, (name, message)
    return message


@pytest.fixture
def model_dir(tmp_path):
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "config.json").write_text('{"a": 1}', encoding="utf-8")
    return directory


def test_regular_file_refuses_a_fifo_without_blocking(model_dir):
    os.mkfifo(model_dir / "char.dic")
    done: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(done, model_file, model_dir, "char.dic"), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "opening the FIFO blocked"
    _one_line(done[0], model_dir / "char.dic", "FIFO")


def _catch(into: list, function, *args) -> None:
    try:
        function(*args)
    except BaseException as e:  # noqa: BLE001 - handed to the test
        into.append(e)


def test_link_to_a_device_is_refused(model_dir):
    (model_dir / "word.dic").symlink_to("/dev/zero")
    with pytest.raises(UntrustedFileError) as info:
        read_bounded(model_dir / "word.dic", 1 << 20)  # /dev/zero is outside the model, and a device
    _one_line(info.value, model_dir / "word.dic", "character device")
    with pytest.raises(UntrustedFileError) as info:
        model_file(model_dir, "word.dic")
    _one_line(info.value, "outside the model directory")


def test_directory_and_missing_file(model_dir):
    (model_dir / "sub").mkdir()
    with pytest.raises(UntrustedFileError, match="is a directory"):
        regular_file(model_dir / "sub")
    with pytest.raises(FileNotFoundError) as info:
        model_file(model_dir, "nope.json")
    _one_line(info.value, model_dir / "nope.json")


@pytest.mark.parametrize("name", ["../secret.json", "/etc/hostname", "link.json"])
def test_names_leading_out_of_the_directory_are_refused(model_dir, name):
    (model_dir.parent / "secret.json").write_text("{}", encoding="utf-8")
    (model_dir / "link.json").symlink_to(model_dir.parent / "secret.json")
    with pytest.raises(UntrustedFileError) as info:
        model_file(model_dir, name)
    _one_line(info.value, "outside the model directory")


def test_links_inside_the_directory_are_followed(model_dir):
    (model_dir / "sub").mkdir()
    (model_dir / "sub" / "real.json").write_text("[]", encoding="utf-8")
    (model_dir / "alias.json").symlink_to("sub/real.json")
    assert read_json(model_file(model_dir, "alias.json")) == []


def test_hugging_face_cache_snapshot_links_into_its_blobs(tmp_path):
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "5f3a").write_text('{"model_type": "bert"}', encoding="utf-8")
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to("../../blobs/5f3a")
    assert read_json(model_file(snapshot, "config.json")) == {"model_type": "bert"}
    # ... but not past its own repository folder
    (tmp_path / "hub" / "elsewhere").write_text("{}", encoding="utf-8")
    (snapshot / "vocab.txt").symlink_to("../../../elsewhere")
    with pytest.raises(UntrustedFileError, match="outside the model directory"):
        model_file(snapshot, "vocab.txt")


def test_read_bounded_refuses_a_file_over_the_cap(model_dir):
    (model_dir / "vocab.txt").write_bytes(b"x" * 1001)
    assert read_bounded(model_dir / "vocab.txt", 1001) == b"x" * 1001
    with pytest.raises(UntrustedFileError) as info:
        read_bounded(model_dir / "vocab.txt", 1000)
    _one_line(info.value, model_dir / "vocab.txt", "1,001 bytes")


@pytest.mark.parametrize("content", [b'{"dim": NaN}', b'{"dim": -Infinity}', b"\xff{}", b"[" * 100_000,
                                     b'{"dim": 1'])
def test_read_json_refuses_what_json_is_not(model_dir, content):
    (model_dir / "config.json").write_bytes(content)
    with pytest.raises(UntrustedFileError) as info:
        read_json(model_dir / "config.json")
    _one_line(info.value, model_dir / "config.json")


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_a_pickle_with_code_is_refused_in_our_words(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    torch.save({"weight": torch.ones(2), "extra": _RunsCode()}, path)
    with pytest.raises(UntrustedFileError) as info:
        read_torch_weights(path)
    message = _one_line(info.value, path, "Python objects other than tensors", "refuses to run them")
    assert "weights_only=False" not in message and "system" in message


def test_tensors_load_and_garbage_is_one_line(tmp_path):
    path = tmp_path / "encoder.pkl"
    buffer = io.BytesIO()
    torch.save({"weight": torch.arange(3.0)}, buffer)
    path.write_bytes(buffer.getvalue())
    assert torch.equal(read_torch_weights(path)["weight"], torch.arange(3.0))
    path.write_bytes(buffer.getvalue()[:200])
    with pytest.raises(UntrustedFileError) as info:
        read_torch_weights(path)
    _one_line(info.value, path, "not a weights-only PyTorch checkpoint")


def test_check_declared(tmp_path):
    assert check_declared(tmp_path / "f", "rows", 3, 3) == 3
    with pytest.raises(UntrustedFileError, match="declares rows of 4, but holds only 3"):
        check_declared(tmp_path / "f", "rows", 4, 3)
    with pytest.raises(UntrustedFileError, match="negative rows"):
        check_declared(tmp_path / "f", "rows", -1, 3)


def test_compressed_dataset_expanding_past_the_cap_is_refused(tmp_path):
    path = tmp_path / "weights.hdf5"
    with h5py.File(path, "w") as f:
        f.create_dataset("zeros", data=np.zeros((512, 512), np.float32), compression="gzip")
        f.create_dataset("noise", data=np.random.default_rng(0).standard_normal((512, 512), np.float32),
                         compression="gzip")
    with h5py.File(path, "r") as f:
        assert check_hdf5_dataset(path, "noise", f["noise"]).name == "/noise"
        assert f["zeros"].nbytes > HDF5_EXPANSION_CAP * f["zeros"].id.get_storage_size()
        with pytest.raises(UntrustedFileError) as info:
            check_hdf5_dataset(path, "zeros", f["zeros"])
    _one_line(info.value, path, "dataset zeros", "compressed")


def test_read_bounded_asks_for_no_more_memory_than_the_file_holds(tmp_path):
    """A read of the cap would reserve the cap (256 MiB) for every configuration file read."""
    import tracemalloc

    (tmp_path / "options.json").write_text('{"lstm": {"dim": 4}}', encoding="utf-8")
    tracemalloc.start()
    try:
        assert read_bounded(tmp_path / "options.json") == b'{"lstm": {"dim": 4}}'
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"{peak:,} bytes traced"
