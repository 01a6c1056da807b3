"""TensorFlow checkpoints read without TensorFlow: the index, the data, and one-line errors.

The checkpoint in tests/data/tfckpt was written by tf.train.Saver (make_fixtures.py there);
bilm-tf's dump_weights read the same checkpoint with TensorFlow into dump_weights.hdf5, which is
the reference for every value.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers_io import read_h5

from contextvec.io.tf_checkpoint import (
    CheckpointError,
    latest_checkpoint,
    masked_crc32c,
    read_index,
    read_tensors,
)
from contextvec.io.tf_elmo import dump_weights_name, hub_name

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tfckpt"
CHECKPOINT = FIXTURES / "checkpoint"
PREFIX = CHECKPOINT / "model.ckpt-3"


def test_every_variable_equals_what_tensorflow_read(tmp_path):
    bundle = read_index(latest_checkpoint(CHECKPOINT))
    assert bundle.prefix == PREFIX and bundle.num_shards == 1
    assert "global_step" in bundle.entries and "lm/char_embed/Adagrad" in bundle.entries
    dumped = read_h5(FIXTURES / "dump_weights.hdf5")
    names = {dump_weights_name(name): name for name in bundle.entries}
    tensors = read_tensors(bundle, [names[hdf5] for hdf5 in dumped])
    for hdf5, array in dumped.items():
        got = tensors[names[hdf5]]
        assert got.shape == array.shape and got.dtype == array.dtype and got.flags.writeable
        assert got.tobytes() == array.tobytes(), hdf5


def test_dump_weights_names_are_bilm_tfs():
    cases = {
        "lm/char_embed": "char_embed",
        "lm/CNN_high_1/W_carry:0": "CNN_high_1/W_carry",
        "lm/RNN_1/rnn/multi_rnn_cell/cell_0/lstm_cell/kernel": "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0",
        "lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/bias": "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B",
        "lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/projection/kernel":
            "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0",
        "lm/softmax/W": "softmax/W",
    }
    for tf_name, name in cases.items():
        assert dump_weights_name(tf_name) == name
    assert hub_name("RNN_1/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/projection/kernel") == (
        "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0")
    assert hub_name("CNN_proj/W_proj") == "CNN_proj/W_proj"
    assert hub_name("Variable_3") is None


def test_a_two_shard_bundle_is_read():
    bundle = read_index(FIXTURES / "hub" / "variables" / "variables")
    assert bundle.num_shards == 2
    shards = {entry.shard for entry in bundle.entries.values()}
    assert shards == {0, 1}
    tensors = read_tensors(bundle, ["bilm/char_embed", "aggregation/weights"])
    np.testing.assert_array_equal(tensors["bilm/char_embed"][0], 0)  # bilm-tf's padding row
    assert tensors["bilm/char_embed"].shape == (262, 4)


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINT, target)
    return target


def test_the_checkpoint_file_may_name_a_moved_absolute_path(tmp_path):
    target = _copy(tmp_path)
    (target / "checkpoint").write_text('model_checkpoint_path: "/gone/elsewhere/model.ckpt-3"\n')
    assert latest_checkpoint(target) == target / "model.ckpt-3"
    (target / "checkpoint").unlink()
    assert latest_checkpoint(target) == target / "model.ckpt-3"  # the one index there
    for suffix in ("index", "data-00000-of-00001"):  # TensorFlow escapes non-ASCII bytes in octal
        (target / f"model.ckpt-3.{suffix}").rename(target / f"modèle.ckpt-3.{suffix}")
    (target / "checkpoint").write_text('model_checkpoint_path: "mod\\303\\250le.ckpt-3"\n')
    assert latest_checkpoint(target) == target / "modèle.ckpt-3"
    (target / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-9"\n')
    with pytest.raises(CheckpointError, match=r"checkpoint: names model.ckpt-9, but .*model.ckpt-9.index"):
        latest_checkpoint(target)
    (target / "checkpoint").unlink()
    shutil.copyfile(target / "modèle.ckpt-3.index", target / "model.ckpt-4.index")
    with pytest.raises(CheckpointError, match="no checkpoint file to say which of 2 checkpoint indexes"):
        latest_checkpoint(target)


def _break(tmp_path: Path, how: str) -> tuple[Path, str]:
    """A copy of the checkpoint broken in one way, and the file the error must name."""
    target = _copy(tmp_path)
    index, data = target / "model.ckpt-3.index", target / "model.ckpt-3.data-00000-of-00001"
    raw = bytearray(index.read_bytes())
    if how == "truncated index":
        index.write_bytes(raw[: len(raw) // 2])
    elif how == "flipped index byte":
        raw[10] ^= 0xFF
        index.write_bytes(raw)
    elif how == "not an index":
        index.write_bytes(b"\x00" * 100)
    elif how == "compressed block":
        # the first data block starts at 0; its trailer follows the block the index block names
        size = _first_block_size(raw)
        raw[size] = 1  # snappy
        raw[size + 1: size + 5] = masked_crc32c(bytes(raw[: size + 1])).to_bytes(4, "little")
        index.write_bytes(raw)
    elif how == "flipped data byte":
        flipped = bytearray(data.read_bytes())
        flipped[5] ^= 0x01
        data.write_bytes(flipped)
        return target, str(data)
    elif how == "truncated data":
        data.write_bytes(data.read_bytes()[:1000])
        return target, str(data)
    elif how == "missing data":
        data.unlink()
        return target, str(data)
    elif how == "V1 checkpoint":
        index.unlink()
        data.rename(target / "model.ckpt-3")
        return target, str(target / "model.ckpt-3")
    return target, str(index)


EMPTY_BLOCK = (0).to_bytes(4, "little") + (1).to_bytes(4, "little")  # no entries, one restart point


def _first_block_size(raw: bytearray) -> int:
    """The size of the table's first data block (at offset 0), found by its trailer: the type
    byte and the crc of the block and that byte, followed by the empty metaindex block."""
    for size in range(len(raw) - 13):
        stored = int.from_bytes(raw[size + 1: size + 5], "little")
        if raw[size + 5: size + 13] == EMPTY_BLOCK and masked_crc32c(bytes(raw[: size + 1])) == stored:
            return size
    raise AssertionError("no data block trailer found")


@pytest.mark.parametrize(("how", "message"), [
    ("truncated index", "not a TensorFlow checkpoint index, or truncated"),
    ("flipped index byte", "crc32c mismatch"),
    ("not an index", "no table magic number"),
    ("compressed block", "is compressed (type 1); only uncompressed tables are read"),
    ("flipped data byte", "fails its crc32c (a corrupt data file)"),
    ("truncated data", "truncated: variable"),
    ("missing data", "checkpoint data file not found"),
    ("V1 checkpoint", "a TensorFlow V1 checkpoint"),
])
def test_broken_checkpoints_are_one_line_naming_the_file(tmp_path, how, message):
    target, named = _break(tmp_path, how)
    with pytest.raises(CheckpointError) as caught:
        bundle = read_index(target / "model.ckpt-3")
        read_tensors(bundle, bundle.entries)
    text = str(caught.value)
    assert message in text and named in text and "\n" not in text
