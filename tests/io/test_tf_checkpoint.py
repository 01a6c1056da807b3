"""TensorFlow checkpoints read without TensorFlow: the index, the data, and one-line errors.

The checkpoint in tests/data/tfckpt was written by tf.train.Saver (make_fixtures.py there);
bilm-tf's dump_weights read the same checkpoint with TensorFlow into dump_weights.hdf5, which is
the reference for every value.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers_io import read_h5
from helpers_tf import I32, LEN, VARINT, block, bundle_index, field, rewrite_entry, table, varint, within

from contextvec.io.tf_checkpoint import (
    INDEX_CAP,
    CheckpointError,
    latest_checkpoint,
    masked_crc32c,
    read_index,
    read_tensors,
)
from contextvec.io.tf_elmo import dump_weights_name, hub_name
from contextvec.io.untrusted import UntrustedFileError

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
    ("missing data", "no such file (the checkpoint data file)"),
    ("V1 checkpoint", "a TensorFlow V1 checkpoint"),
])
def test_broken_checkpoints_are_one_line_naming_the_file(tmp_path, how, message):
    target, named = _break(tmp_path, how)
    with pytest.raises(CheckpointError) as caught:
        bundle = read_index(target / "model.ckpt-3")
        read_tensors(bundle, bundle.entries)
    text = str(caught.value)
    assert message in text and named in text and "\n" not in text


# --------------------------------------------------------------------------- crafted indexes

HEADER = (b"", field(1, VARINT, 1))  # BundleHeaderProto: num_shards 1


def _crafted(tmp_path: Path, items: list[tuple[bytes, bytes]]) -> Path:
    """The checkpoint's copy with its index replaced by one of ``items`` (crcs all right)."""
    target = _copy(tmp_path)
    (target / "model.ckpt-3.index").write_bytes(bundle_index(items))
    return target


SHAPE_AS_VARINT = "variable 'x': BundleEntryProto.shape (field 2) comes as varint, not length-delimited"


@pytest.mark.parametrize(("entry", "problem"), [
    (field(2, VARINT, 2**64 - 1), SHAPE_AS_VARINT),
    (field(2, VARINT, 1 << 26), SHAPE_AS_VARINT),
    (field(2, LEN, field(2, VARINT, 1 << 26)),
     "variable 'x': TensorShapeProto.dim (field 2) comes as varint, not length-delimited"),
    (field(2, LEN, field(2, LEN, field(1, LEN, b"zz"))),
     "variable 'x': TensorShapeProto.Dim.size (field 1) comes as length-delimited, not varint"),
    (field(5, LEN, b"zz"), "variable 'x': BundleEntryProto.size (field 5) comes as length-delimited, "
                           "not varint"),
    (field(6, VARINT, 3), "variable 'x': BundleEntryProto.crc32c (field 6) comes as varint, not 32-bit"),
    (field(2, LEN, b"\x12\x05\x08"), "variable 'x': a malformed TensorShapeProto (field 2 runs past "
                                       "the message's end)"),
], ids=["shape-2^64-1", "shape-2^26", "dim", "dim-size", "size", "crc32c", "truncated-dim"])
def test_a_field_in_another_wire_type_is_refused_at_once(tmp_path, entry, problem):
    """A crafted index of about a hundred bytes: a message stored as a varint is not a length."""
    target = _crafted(tmp_path, [HEADER, (b"x", field(1, VARINT, 1) + entry)])
    index = target / "model.ckpt-3.index"
    assert index.stat().st_size < 200
    with within(2), pytest.raises(CheckpointError) as caught:
        read_index(target / "model.ckpt-3")
    assert str(caught.value) == f"{index}: {problem}"


@pytest.mark.parametrize(("header", "problem"), [
    (field(1, LEN, b"zz"), "BundleHeaderProto.num_shards (field 1) comes as length-delimited, not varint"),
    (field(2, LEN, b"zz"), "BundleHeaderProto.endianness (field 2) comes as length-delimited, not varint"),
    (field(1, VARINT, 0), "declares 0 data shards"),
    (field(1, VARINT, 2**64 - 1), "declares -1 data shards"),
    (field(2, VARINT, 7), "an unknown endianness 7; only little-endian checkpoints are read"),
], ids=["num_shards-bytes", "endianness-bytes", "no-shards", "negative-shards", "endianness"])
def test_a_bundle_header_is_read_by_its_schema(tmp_path, header, problem):
    target = _crafted(tmp_path, [(b"", header)])
    with pytest.raises(CheckpointError) as caught:
        read_index(target / "model.ckpt-3")
    assert str(caught.value) == f"{target / 'model.ckpt-3.index'}: {problem}"


def _shape(*dims: int) -> tuple[int, int, bytes]:
    return (2, LEN, b"".join(field(2, LEN, field(1, VARINT, d)) for d in dims))


def _set(number: int, wire: int, value):
    def change(parts):
        parts[:] = [p for p in parts if p[0] != number] + [(number, wire, value)]
    return change


def _set_shape(*dims: int):
    return _set(*_shape(*dims))


@pytest.mark.parametrize(("changes", "problem"), [
    ([_set_shape(1 << 40, 4), _set(5, VARINT, 1 << 44)],
     "model.ckpt-3.data-00000-of-00001: truncated: variable 'lm/char_embed' ends at byte "),
    ([_set_shape(1 << 62, 1 << 62)],
     "model.ckpt-3.data-00000-of-00001: variable 'lm/char_embed' of shape (4611686018427387904, "
     "4611686018427387904) and dtype float32 takes "),
    ([_set_shape(*[1] * 40)], "model.ckpt-3.index: variable 'lm/char_embed': a tensor of over 32 "
                              "dimensions"),
    ([_set(3, VARINT, 7)], "model.ckpt-3.index: variable 'lm/char_embed' lies in data shard 7 of 1"),
    ([_set(4, VARINT, 2**64 - 8)], "model.ckpt-3.index: variable 'lm/char_embed': a negative offset (-8)"),
], ids=["past-the-shard", "too-big", "rank", "shard", "negative-offset"])
def test_declared_sizes_are_checked_against_the_files_before_allocating(tmp_path, changes, problem):
    target = _copy(tmp_path)
    for change in changes:
        rewrite_entry(target / "model.ckpt-3.index", "lm/char_embed", change)
    with within(2), pytest.raises(CheckpointError) as caught:
        bundle = read_index(target / "model.ckpt-3")
        read_tensors(bundle, ["lm/char_embed"])
    assert str(caught.value).startswith(f"{target}/{problem}")


def test_variables_that_share_bytes_are_refused(tmp_path):
    """Each variable's bytes once: what is read is never more than the shards hold."""
    target = _copy(tmp_path)
    index = target / "model.ckpt-3.index"
    entry = dict(read_index(target / "model.ckpt-3").entries)["lm/char_embed"]
    rewrite_entry(index, "lm/char_embed/Adagrad", _set(4, VARINT, entry.offset))
    rewrite_entry(index, "lm/char_embed/Adagrad", _set(6, I32, entry.crc32c))
    bundle = read_index(target / "model.ckpt-3")
    with pytest.raises(CheckpointError, match=r"data-00000-of-00001: variable 'lm/char_embed(/Adagrad)?' "
                                              r"overlaps the bytes of another$"):
        read_tensors(bundle, ["lm/char_embed", "lm/char_embed/Adagrad"])


def test_a_table_that_lists_a_block_twice_or_spells_long_keys_is_refused(tmp_path):
    items = [HEADER, (b"x", field(1, VARINT, 1))]
    target = _copy(tmp_path)
    index = target / "model.ckpt-3.index"
    index.write_bytes(table([block(items)], index_handles=[0, 0]))
    with pytest.raises(CheckpointError, match="index: not a TensorFlow checkpoint index, or truncated "
                                              r"\(the data block at byte 0 overlaps an earlier one\)$"):
        read_index(target / "model.ckpt-3")
    # each key the whole previous one and one byte more: bytes that spell quadratically many
    body = b"\x00\x00\x02" + field(1, VARINT, 1) + b"".join(varint(n) + b"\x01\x00a" for n in range(2000))
    index.write_bytes(table([body + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")]))
    with pytest.raises(CheckpointError, match=r"keys share more than TensorFlow's tables do\)$"):
        read_index(target / "model.ckpt-3")


def test_files_are_regular_files_inside_the_directory(tmp_path):
    target = _copy(tmp_path)
    data = target / "model.ckpt-3.data-00000-of-00001"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data.rename(elsewhere / data.name)
    cases = [
        (lambda: data.symlink_to(elsewhere / data.name), data, "lies outside the model directory"),
        (lambda: data.symlink_to("/dev/zero"), data, "lies outside the model directory"),
        (lambda: os.mkfifo(data), data, "is a FIFO (named pipe), not a regular file"),
    ]
    for make, named, problem in cases:
        make()
        with within(2), pytest.raises(UntrustedFileError) as caught:
            bundle = read_index(target / "model.ckpt-3")
            read_tensors(bundle, ["lm/char_embed"])
        assert str(caught.value).startswith(f"{named}: ") and problem in str(caught.value)
        assert "\n" not in str(caught.value)
        named.unlink()
    index = target / "model.ckpt-3.index"
    index.rename(elsewhere / index.name)
    index.symlink_to(elsewhere / index.name)
    with pytest.raises(UntrustedFileError, match="lies outside the model directory"):
        read_index(target / "model.ckpt-3")


def test_the_checkpoint_file_cannot_lead_out_of_the_directory(tmp_path):
    target = _copy(tmp_path)
    elsewhere = shutil.copytree(target, tmp_path / "elsewhere")
    for suffix in ("index", "data-00000-of-00001"):
        (target / f"model.ckpt-3.{suffix}").unlink()
    (target / "checkpoint").write_text(f'model_checkpoint_path: "{elsewhere}/model.ckpt-3"\n')
    with pytest.raises(CheckpointError, match=f"checkpoint: names {elsewhere}/model.ckpt-3, but "
                                              f"{target}/model.ckpt-3.index does not exist$"):
        latest_checkpoint(target)
    (target / "checkpoint").unlink()
    os.mkfifo(target / "checkpoint")
    with within(2), pytest.raises(UntrustedFileError, match="checkpoint: is a FIFO"):
        latest_checkpoint(target)


def test_an_index_over_the_cap_is_refused_unread(tmp_path):
    target = _copy(tmp_path)
    index = target / "model.ckpt-3.index"
    with open(index, "r+b") as f:  # sparse: nothing of it is written or read
        f.truncate(INDEX_CAP + 1)
    with within(2), pytest.raises(UntrustedFileError) as caught:
        read_index(target / "model.ckpt-3")
    assert str(caught.value) == (f"{index}: holds {INDEX_CAP + 1:,} bytes, more than the "
                                 f"{INDEX_CAP:,} a file of its kind may hold")
