"""TensorFlow checkpoints (the TensorBundle format, "V2"), read without TensorFlow.

A checkpoint ``PREFIX`` is two kinds of file: ``PREFIX.index``, a LevelDB-style sorted table
(SSTable) mapping each variable's name to a ``BundleEntryProto`` (dtype, shape, data shard,
offset, size, crc32c), with a ``BundleHeaderProto`` under the empty key; and the data shards
``PREFIX.data-SSSSS-of-NNNNN``, which hold the raw little-endian tensor bytes. A directory's
``checkpoint`` text file names the latest prefix. SavedModels and TF-Hub modules keep their
variables the same way, under ``variables/variables``.

What is read: uncompressed table blocks (TensorFlow writes bundle indexes uncompressed; a
snappy-compressed block is refused in one line), the protobuf messages by their field numbers
(a few small messages do not warrant generated protobuf code), whole (unpartitioned) numeric
tensors of a little-endian bundle. Every index block's crc32c is checked, and so is the data
crc32c of every tensor up to :data:`CRC_CHECKED_BYTES` (a pure-Python crc32c over hundreds of
megabytes would cost more than the load itself).

The files may come from anyone (:mod:`contextvec.io.untrusted`): each is opened as a regular
file inside the model directory; every protobuf field read must come in its schema's wire type;
every size the index declares (blocks, keys, shapes, offsets, tensor sizes, shard numbers) is
checked against what the files hold before anything of that size is allocated. Any malformed,
truncated or inconsistent file is a one-line :class:`CheckpointError` naming the file.
"""

from __future__ import annotations

import codecs
import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from contextvec.io.tf_wire import (
    I32,
    LEN,
    VARINT,
    CheckpointError,
    Message,
    masked_crc32c,
    read_message,
    signed,
    varint,
)
from contextvec.io.untrusted import model_file, read_bounded

CHECKPOINT_STATE = "checkpoint"
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_LENGTH = 48
_BLOCK_TRAILER = 5  # compression type byte + masked crc32c
# TensorFlow's tables restart key-prefix sharing every 16 entries (LevelDB's
# block_restart_interval), so the keys a block spells out take at most 16 times its bytes.
_RESTART_INTERVAL = 16
INDEX_CAP = 16 * 1024 * 1024
"""The most a checkpoint index may hold: an entry takes about a hundred bytes, so this is over a
hundred thousand variables, and every block's crc32c is checked in pure Python."""
_STATE_CAP = 1024 * 1024  # the ``checkpoint`` text file: a few lines per saved checkpoint
_MAX_RANK = 32  # the most dimensions NumPy 1 holds (TensorFlow allows 254; no ELMo variable nears either)
_INT32_MAX = (1 << 31) - 1
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
    """A checkpoint's index: its prefix, shard count and entries by variable name, and the model
    directory its data shards must lie in."""

    prefix: Path
    num_shards: int
    entries: dict[str, TensorEntry]
    directory: Path


def latest_checkpoint(directory: str | os.PathLike) -> Path:
    """The prefix of a directory's latest checkpoint.

    The ``checkpoint`` file's ``model_checkpoint_path`` names it (relative to the directory, or
    absolute; a path that leads out of the directory or no longer exists, as after the directory
    moved, is looked up by its name in the directory). Without that file, the directory's one
    ``*.index``.
    """
    directory = Path(directory)
    state = directory / CHECKPOINT_STATE
    if os.path.lexists(state):
        text = read_bounded(model_file(directory, CHECKPOINT_STATE), _STATE_CAP).decode(
            "utf-8", errors="replace")
        found = re.search(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"', text, re.MULTILINE)
        if found is None:
            raise CheckpointError(state, "no model_checkpoint_path line")
        try:  # a text-format string: C escapes (octal for non-ASCII bytes) of UTF-8 bytes
            named = Path(codecs.escape_decode(found.group(1).encode("utf-8"))[0].decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise CheckpointError(state, f"an unreadable model_checkpoint_path ({e})") from None
        for prefix in (directory / named, directory / named.name):
            index = _index_path(prefix)
            if os.path.lexists(index) and _inside(directory, index):
                return prefix
        raise CheckpointError(state, f"names {named}, but {_index_path(directory / named.name)} "
                                     "does not exist")
    indexes = sorted(directory.glob("*.index"))
    if len(indexes) != 1:
        raise CheckpointError(directory, f"no {CHECKPOINT_STATE} file to say which of "
                                         f"{len(indexes)} checkpoint indexes is the latest")
    return indexes[0].with_suffix("")


def _inside(directory: Path, path: Path) -> bool:
    root = os.path.realpath(directory)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _index_path(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".index")


def data_path(prefix: Path, shard: int, num_shards: int) -> Path:
    """The data shard file of a checkpoint prefix."""
    return prefix.with_name(f"{prefix.name}.data-{shard:05d}-of-{num_shards:05d}")


def _open_in(directory: Path, path: Path, what: str) -> Path:
    """``path``, a regular file inside the model ``directory``, or a one-line refusal."""
    if not os.path.lexists(path):
        raise CheckpointError(path, f"no such file (the {what})")
    return model_file(directory, os.path.relpath(path, directory))


def read_index(prefix: str | os.PathLike, directory: str | os.PathLike | None = None) -> Bundle:
    """Read and check a checkpoint's ``PREFIX.index``.

    Args:
        prefix: the checkpoint prefix (``DIR/model.ckpt-3``, ``MODULE/variables/variables``).
        directory: the model directory the index and its data shards must lie in; by default
            the prefix's own directory.
    """
    prefix = Path(prefix)
    root = prefix.parent if directory is None else Path(directory)
    path = _index_path(prefix)
    if not os.path.lexists(path) and prefix.is_file():
        raise CheckpointError(prefix, "a TensorFlow V1 checkpoint (one file, no .index); only "
                                      "the V2 format (.index + .data) is read")
    table = read_bounded(_open_in(root, path, "checkpoint index"), INDEX_CAP)
    entries: dict[str, TensorEntry] = {}
    header: bytes | None = None
    try:
        for key, value in _table_items(table):
            if key == b"":
                header = value
            else:
                name = key.decode("utf-8")
                entries[name] = _entry(value, path, name)
    except CheckpointError:
        raise
    except (IndexError, ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(path, f"not a TensorFlow checkpoint index, or truncated ({e})") from None
    if header is None:
        raise CheckpointError(path, "no bundle header (not a TensorFlow V2 checkpoint index)")
    num_shards, endianness = 1, 0
    for field, value in read_message(header, _BUNDLE_HEADER, path):
        if field == 1:
            num_shards = signed(value)
        else:
            endianness = value
    if not 1 <= num_shards <= _INT32_MAX:
        raise CheckpointError(path, f"declares {num_shards} data shards")
    if endianness != 0:
        kind = "a big-endian checkpoint" if endianness == 1 else f"an unknown endianness {endianness}"
        raise CheckpointError(path, f"{kind}; only little-endian checkpoints are read")
    for name, entry in entries.items():
        if entry.shard >= num_shards:
            raise CheckpointError(path, f"variable {name!r} lies in data shard {entry.shard} of "
                                        f"{num_shards}")
    return Bundle(prefix, num_shards, entries, root)


def read_tensors(bundle: Bundle, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The named variables of a checkpoint, as writable arrays of their stored dtype.

    Raises:
        CheckpointError: a name not in the checkpoint, a partitioned or non-numeric variable,
            a size that disagrees with dtype and shape, variables whose bytes overlap, a data
            shard that is not a regular file in the model directory or too short for them.
    """
    out: dict[str, np.ndarray] = {}
    by_shard: dict[int, list[str]] = {}
    for name in dict.fromkeys(names):
        entry = bundle.entries.get(name)
        if entry is None:
            raise CheckpointError(_index_path(bundle.prefix), f"no variable {name!r}")
        by_shard.setdefault(entry.shard, []).append(name)
    for shard, shard_names in sorted(by_shard.items()):
        path = _open_in(bundle.directory, data_path(bundle.prefix, shard, bundle.num_shards),
                        "checkpoint data file")
        with open(path, "rb") as f:
            length = os.fstat(f.fileno()).st_size
            end = 0
            for name in sorted(shard_names, key=lambda n: bundle.entries[n].offset):
                entry = bundle.entries[name]
                if entry.size and entry.offset < end:
                    raise CheckpointError(path, f"variable {name!r} overlaps the bytes of another")
                out[name] = _read_tensor(f, path, length, name, entry)
                end = max(end, entry.offset + entry.size)
    return out


def _read_tensor(f, path: Path, length: int, name: str, entry: TensorEntry) -> np.ndarray:
    if entry.sliced:
        raise CheckpointError(path, f"variable {name!r} is partitioned; only whole variables are read")
    dtype = entry.dtype
    if dtype is None:
        raise CheckpointError(path, f"variable {name!r} has TensorFlow dtype {entry.dtype_code}, "
                                    "which is not a numeric tensor")
    nbytes = math.prod(entry.shape) * dtype.itemsize
    if nbytes != entry.size:
        raise CheckpointError(path, f"variable {name!r} of shape {entry.shape} and dtype {dtype} "
                                    f"takes {nbytes:,} bytes, but the index says {entry.size:,}")
    if entry.offset + entry.size > length:
        raise CheckpointError(path, f"truncated: variable {name!r} ends at byte "
                                    f"{entry.offset + entry.size:,} of a {length:,}-byte file")
    array = np.empty(entry.shape, dtype=dtype)
    f.seek(entry.offset)
    if f.readinto(memoryview(array.reshape(-1)).cast("B")) != entry.size:
        raise CheckpointError(path, f"truncated while reading variable {name!r}")
    if entry.size <= CRC_CHECKED_BYTES and masked_crc32c(array.tobytes()) != entry.crc32c:
        raise CheckpointError(path, f"variable {name!r} fails its crc32c (a corrupt data file)")
    return array


# --------------------------------------------------------------------------- SSTable


def _table_items(table: bytes) -> Iterator[tuple[bytes, memoryview]]:
    """Every (key, value) of an SSTable, in key order."""
    if len(table) < _FOOTER_LENGTH:
        raise ValueError(f"{len(table)} bytes, shorter than a table footer")
    view = memoryview(table)
    footer = view[-_FOOTER_LENGTH:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise ValueError("no table magic number at the end")
    _, pos = _block_handle(footer, 0)  # the metaindex block: empty in a bundle
    index_handle, _ = _block_handle(footer, pos)
    next_block = 0
    for _, handle in _block_entries(_block(view, index_handle)):
        data_handle, _ = _block_handle(handle, 0)
        if data_handle[0] < next_block:  # each block once: no block read again and again
            raise ValueError(f"the data block at byte {data_handle[0]} overlaps an earlier one")
        next_block = sum(data_handle) + _BLOCK_TRAILER
        yield from _block_entries(_block(view, data_handle))


def _block_handle(buf: memoryview, pos: int) -> tuple[tuple[int, int], int]:
    offset, pos = varint(buf, pos)
    size, pos = varint(buf, pos)
    return (offset, size), pos


def _block(table: memoryview, handle: tuple[int, int]) -> memoryview:
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


def _block_entries(block: memoryview) -> Iterator[tuple[bytes, memoryview]]:
    if len(block) < 4:
        raise ValueError("a block too short for its restart count")
    restarts = int.from_bytes(block[-4:], "little")
    end = len(block) - 4 * (restarts + 1)
    if end < 0:
        raise ValueError("a block's restart array is longer than the block")
    pos, key, spelled = 0, b"", 0
    while pos < end:
        shared, pos = varint(block, pos)
        unshared, pos = varint(block, pos)
        value_length, pos = varint(block, pos)
        if shared > len(key) or pos + unshared + value_length > end:
            raise ValueError("a block entry runs past its block")
        key = key[:shared] + block[pos:pos + unshared]
        spelled += len(key)
        if spelled > _RESTART_INTERVAL * len(block):
            raise ValueError("a block whose keys share more than TensorFlow's tables do")
        pos += unshared
        yield key, block[pos:pos + value_length]
        pos += value_length


# --------------------------------------------------------------------------- protobuf

_BUNDLE_HEADER = Message("BundleHeaderProto", {1: ("num_shards", (VARINT,)),
                                               2: ("endianness", (VARINT,))})
_BUNDLE_ENTRY = Message("BundleEntryProto", {
    1: ("dtype", (VARINT,)), 2: ("shape", (LEN,)), 3: ("shard_id", (VARINT,)),
    4: ("offset", (VARINT,)), 5: ("size", (VARINT,)), 6: ("crc32c", (I32,)), 7: ("slices", (LEN,)),
})
_TENSOR_SHAPE = Message("TensorShapeProto", {2: ("dim", (LEN,)), 3: ("unknown_rank", (VARINT,))})
_DIM = Message("TensorShapeProto.Dim", {1: ("size", (VARINT,))})


def _entry(buf: memoryview, path: Path, name: str) -> TensorEntry:
    """A ``BundleEntryProto``: dtype 1, shape 2, shard_id 3, offset 4, size 5, crc32c 6, slices 7."""
    context = f"variable {name!r}: "
    values: dict[int, int | memoryview] = {}
    sliced = False
    for field, value in read_message(buf, _BUNDLE_ENTRY, path, context):
        sliced = sliced or field == 7
        values[field] = value
    shape: list[int] = []
    for field, value in read_message(values.get(2, b""), _TENSOR_SHAPE, path, context):
        if field == 3 and value:
            raise CheckpointError(path, f"{context}a tensor of unknown rank")
        if field == 2:
            if len(shape) == _MAX_RANK:
                raise CheckpointError(path, f"{context}a tensor of over {_MAX_RANK} dimensions")
            sizes = [v for _, v in read_message(value, _DIM, path, context)]
            shape.append(signed(sizes[-1]) if sizes else 0)
    if any(d < 0 for d in shape):
        raise CheckpointError(path, f"{context}a tensor of unknown shape {tuple(shape)}")
    dtype, shard, offset, size = (signed(values.get(n, 0)) for n in (1, 3, 4, 5))
    for what, number in (("dtype", dtype), ("shard_id", shard), ("offset", offset), ("size", size)):
        if number < 0:
            raise CheckpointError(path, f"{context}a negative {what} ({number})")
    return TensorEntry(dtype, tuple(shape), shard, offset, size, values.get(6, 0), sliced)
