"""TensorFlow checkpoints (the TensorBundle format, "V2"), read without TensorFlow.

A checkpoint ``PREFIX`` is two kinds of file: ``PREFIX.index``, a LevelDB-style sorted table
(SSTable) mapping each variable's name to a ``BundleEntryProto`` (dtype, shape, data shard,
offset, size, crc32c), with a ``BundleHeaderProto`` under the empty key; and the data shards
``PREFIX.data-SSSSS-of-NNNNN``, which hold the raw little-endian tensor bytes. A directory's
``checkpoint`` text file names the latest prefix. SavedModels and TF-Hub modules keep their
variables the same way, under ``variables/variables``.

What is read: uncompressed table blocks (TensorFlow writes bundle indexes uncompressed; a
snappy-compressed block is refused in one line), the two protobuf messages by their field
numbers (two small messages do not warrant generated protobuf code), whole (unpartitioned)
numeric tensors of a little-endian bundle. Every index block's crc32c is checked, and so is the
data crc32c of every tensor up to :data:`CRC_CHECKED_BYTES`; every tensor's size is checked
against its dtype and shape and against the shard's length (a pure-Python crc32c over hundreds of
megabytes would cost more than the load itself). Any malformed or truncated file is a
:class:`CheckpointError` naming the file.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

CHECKPOINT_STATE = "checkpoint"
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_LENGTH = 48
_BLOCK_TRAILER = 5  # compression type byte + masked crc32c
CRC_CHECKED_BYTES = 1 << 16
"""Tensors up to this size have their data crc32c checked: the biases, the character embedding
and the small filters. The large matrices are not, since crc32c in pure Python would take longer
than the whole load; their size is checked."""
# tensorflow/core/framework/types.proto: the numeric dtypes a bundle stores as raw bytes.
_DTYPES = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<i4"), 4: np.dtype("u1"),
    5: np.dtype("<i2"), 6: np.dtype("i1"), 9: np.dtype("<i8"), 10: np.dtype("?"),
    17: np.dtype("<u2"), 19: np.dtype("<f2"), 22: np.dtype("<u4"), 23: np.dtype("<u8"),
}


class CheckpointError(ValueError):
    """A TensorFlow checkpoint that cannot be read: missing, truncated, malformed or of a kind
    this reader does not support; the message names the file."""


class TensorEntry(NamedTuple):
    """Where one variable's bytes lie (a ``BundleEntryProto``)."""

    dtype_code: int
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc32c: int
    sliced: bool

    @property
    def dtype(self) -> np.dtype | None:
        """The numpy dtype, or None for a dtype stored otherwise (strings, resources)."""
        return _DTYPES.get(self.dtype_code)


class Bundle(NamedTuple):
    """A checkpoint's index: its prefix, shard count and entries by variable name."""

    prefix: Path
    num_shards: int
    entries: dict[str, TensorEntry]


def latest_checkpoint(directory: str | os.PathLike) -> Path:
    """The prefix of a directory's latest checkpoint.

    The ``checkpoint`` file's ``model_checkpoint_path`` names it (relative to the directory, or
    absolute; an absolute path that no longer exists, as after the directory moved, is looked
    up by its name in the directory). Without that file, the directory's one ``*.index``.
    """
    directory = Path(directory)
    state = directory / CHECKPOINT_STATE
    if state.is_file():
        text = state.read_text(encoding="utf-8", errors="replace")
        found = re.search(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"', text, re.MULTILINE)
        if found is None:
            raise CheckpointError(f"{state}: no model_checkpoint_path line")
        try:  # a text-format string: C escapes (octal for non-ASCII bytes) of UTF-8 bytes
            named = Path(codecs.escape_decode(found.group(1).encode("utf-8"))[0].decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{state}: an unreadable model_checkpoint_path ({e})") from e
        for prefix in (directory / named, directory / named.name):
            if _index_path(prefix).is_file():
                return prefix
        raise CheckpointError(f"{state}: names {named}, but {_index_path(directory / named.name)} "
                              "does not exist")
    indexes = sorted(directory.glob("*.index"))
    if len(indexes) != 1:
        raise CheckpointError(f"{directory}: no {CHECKPOINT_STATE} file to say which of "
                              f"{len(indexes)} checkpoint indexes is the latest")
    return indexes[0].with_suffix("")


def _index_path(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".index")


def data_path(prefix: Path, shard: int, num_shards: int) -> Path:
    """The data shard file of a checkpoint prefix."""
    return prefix.with_name(f"{prefix.name}.data-{shard:05d}-of-{num_shards:05d}")


def read_index(prefix: str | os.PathLike) -> Bundle:
    """Read and check a checkpoint's ``PREFIX.index``."""
    prefix = Path(prefix)
    path = _index_path(prefix)
    if not path.is_file():
        if prefix.is_file():
            raise CheckpointError(f"{prefix}: a TensorFlow V1 checkpoint (one file, no .index); "
                                  "only the V2 format (.index + .data) is read")
        raise CheckpointError(f"checkpoint index not found: {path}")
    table = path.read_bytes()
    entries: dict[str, TensorEntry] = {}
    header: bytes | None = None
    try:
        for key, value in _table_items(table):
            if key == b"":
                header = value
            else:
                entries[key.decode("utf-8")] = _entry(value)
    except (IndexError, ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not a TensorFlow checkpoint index, or truncated ({e})") from e
    if header is None:
        raise CheckpointError(f"{path}: no bundle header (not a TensorFlow V2 checkpoint index)")
    num_shards, endianness = 1, 0
    for field, _, value in message_fields(header):
        if field == 1:
            num_shards = int(value)
        elif field == 2:
            endianness = int(value)
    if endianness != 0:
        raise CheckpointError(f"{path}: a big-endian checkpoint; only little-endian ones are read")
    return Bundle(prefix, num_shards, entries)


def read_tensors(bundle: Bundle, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The named variables of a checkpoint, as writable arrays of their stored dtype.

    Raises:
        CheckpointError: a name not in the checkpoint, a partitioned or non-numeric variable,
            a size that disagrees with dtype and shape, or a data shard too short for it.
    """
    out: dict[str, np.ndarray] = {}
    by_shard: dict[int, list[str]] = {}
    for name in names:
        entry = bundle.entries.get(name)
        if entry is None:
            raise CheckpointError(f"{_index_path(bundle.prefix)}: no variable {name!r}")
        by_shard.setdefault(entry.shard, []).append(name)
    for shard, shard_names in sorted(by_shard.items()):
        path = data_path(bundle.prefix, shard, bundle.num_shards)
        if not path.is_file():
            raise CheckpointError(f"checkpoint data file not found: {path}")
        length = path.stat().st_size
        with open(path, "rb") as f:
            for name in sorted(shard_names, key=lambda n: bundle.entries[n].offset):
                out[name] = _read_tensor(f, path, length, name, bundle.entries[name])
    return out


def _read_tensor(f, path: Path, length: int, name: str, entry: TensorEntry) -> np.ndarray:
    if entry.sliced:
        raise CheckpointError(f"{path}: variable {name!r} is partitioned; only whole variables are read")
    if entry.dtype is None:
        raise CheckpointError(f"{path}: variable {name!r} has TensorFlow dtype {entry.dtype_code}, "
                              "which is not a numeric tensor")
    array = np.empty(entry.shape, dtype=entry.dtype)
    if array.nbytes != entry.size:
        raise CheckpointError(f"{path}: variable {name!r} of shape {entry.shape} and dtype "
                              f"{entry.dtype} takes {array.nbytes} bytes, but the index says {entry.size}")
    if entry.offset + entry.size > length:
        raise CheckpointError(f"{path}: truncated: variable {name!r} ends at byte "
                              f"{entry.offset + entry.size} of a {length}-byte file")
    f.seek(entry.offset)
    if f.readinto(memoryview(array.reshape(-1)).cast("B")) != entry.size:
        raise CheckpointError(f"{path}: truncated while reading variable {name!r}")
    if entry.size <= CRC_CHECKED_BYTES and masked_crc32c(array.tobytes()) != entry.crc32c:
        raise CheckpointError(f"{path}: variable {name!r} fails its crc32c (a corrupt data file)")
    return array


# --------------------------------------------------------------------------- SSTable


def _table_items(table: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of an SSTable, in key order."""
    if len(table) < _FOOTER_LENGTH:
        raise ValueError(f"{len(table)} bytes, shorter than a table footer")
    footer = table[-_FOOTER_LENGTH:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise ValueError("no table magic number at the end")
    _, pos = _block_handle(footer, 0)  # the metaindex block: empty in a bundle
    index_handle, _ = _block_handle(footer, pos)
    for _, handle in _block_entries(_block(table, index_handle)):
        yield from _block_entries(_block(table, _block_handle(handle, 0)[0]))


def _block_handle(buf: bytes, pos: int) -> tuple[tuple[int, int], int]:
    offset, pos = _varint(buf, pos)
    size, pos = _varint(buf, pos)
    return (offset, size), pos


def _block(table: bytes, handle: tuple[int, int]) -> bytes:
    offset, size = handle
    end = offset + size + _BLOCK_TRAILER
    if end > len(table) - _FOOTER_LENGTH:
        raise ValueError(f"a block at byte {offset} runs past the end of the table")
    contents, kind = table[offset:offset + size], table[offset + size]
    stored = int.from_bytes(table[offset + size + 1:end], "little")
    if masked_crc32c(table[offset:offset + size + 1]) != stored:
        raise ValueError(f"crc32c mismatch in the block at byte {offset}")
    if kind != 0:
        raise ValueError(f"the block at byte {offset} is compressed (type {kind}); only "
                         "uncompressed tables are read")
    return contents


def _block_entries(block: bytes) -> Iterator[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise ValueError("a block too short for its restart count")
    restarts = int.from_bytes(block[-4:], "little")
    end = len(block) - 4 * (restarts + 1)
    if end < 0:
        raise ValueError("a block's restart array is longer than the block")
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        value_length, pos = _varint(block, pos)
        if shared > len(key) or pos + unshared + value_length > end:
            raise ValueError("a block entry runs past its block")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + value_length]
        pos += value_length


# --------------------------------------------------------------------------- protobuf


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("a truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def message_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a protobuf message, in order: an int for varint and
    fixed fields, bytes for length-delimited ones (strings, messages, packed values).

    Raises:
        ValueError: a truncated or malformed message.
    """
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = int.from_bytes(buf[pos:pos + width], "little"), pos + width
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        else:
            raise ValueError(f"protobuf wire type {wire}")
        if pos > len(buf):
            raise ValueError("a truncated protobuf field")
        yield key >> 3, wire, value


def _entry(buf: bytes) -> TensorEntry:
    """A ``BundleEntryProto``: dtype 1, shape 2, shard_id 3, offset 4, size 5, crc32c 6, slices 7."""
    values: dict[int, int | bytes] = {}
    sliced = False
    for field, _, value in message_fields(buf):
        sliced = sliced or field == 7
        values[field] = value
    shape: list[int] = []
    for field, _, dim in message_fields(bytes(values.get(2, b""))):  # TensorShapeProto
        if field == 3 and dim:
            raise ValueError("a tensor of unknown rank")
        if field == 2:
            size = next((int(v) for f, _, v in message_fields(bytes(dim)) if f == 1), 0)
            shape.append(size - (1 << 64) if size >= 1 << 63 else size)
    if any(d < 0 for d in shape):
        raise ValueError(f"a tensor of unknown shape {shape}")
    return TensorEntry(int(values.get(1, 0)), tuple(shape), int(values.get(3, 0)),
                       int(values.get(4, 0)), int(values.get(5, 0)), int(values.get(6, 0)), sliced)


# --------------------------------------------------------------------------- crc32c


@functools.cache
def _crc_table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


def _crc32c(data: bytes) -> int:
    table, crc = _crc_table(), 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The crc32c of ``data`` as a table block's trailer stores it: masked as LevelDB does (a crc
    of data that holds crcs is not itself a plain crc)."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
