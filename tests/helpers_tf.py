"""TensorFlow files built and taken apart in tests: protobuf fields, SSTable (checkpoint index)
tables, and a time bound for loading crafted ones.

The writer is independent of contextvec's reader: the bytes follow LevelDB's table format and
TensorFlow's protos as they are written, so that a test can change one field of a committed
fixture and keep every block crc right.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

from contextvec.io.tf_checkpoint import masked_crc32c

TABLE_MAGIC = 0xDB4775248B80FB57
VARINT, I64, LEN, I32 = 0, 1, 2, 5


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def field(number: int, wire: int, value: int | bytes) -> bytes:
    """One protobuf field: its key, then the value as ``wire`` stores it."""
    key = varint(number << 3 | wire)
    if wire == VARINT:
        return key + varint(value)
    if wire == LEN:
        return key + varint(len(value)) + value
    return key + int(value).to_bytes(8 if wire == I64 else 4, "little")


def fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(number, wire, value) of each field of a well-formed message."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        wire = key & 7
        if wire == VARINT:
            value, pos = _read_varint(buf, pos)
        elif wire == LEN:
            length, pos = _read_varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        else:
            width = 8 if wire == I64 else 4
            value, pos = int.from_bytes(buf[pos:pos + width], "little"), pos + width
        out.append((key >> 3, wire, value))
    return out


def message(parts: list[tuple[int, int, int | bytes]]) -> bytes:
    return b"".join(field(*part) for part in parts)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


# --------------------------------------------------------------------------- SSTable


def block(items: list[tuple[bytes, bytes]]) -> bytes:
    """A table block without prefix sharing: one restart point."""
    body = b"".join(varint(0) + varint(len(k)) + varint(len(v)) + k + v for k, v in items)
    return body + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")


def table(data_blocks: list[bytes], index_keys: list[bytes] | None = None,
          index_handles: list[int] | None = None) -> bytes:
    """An uncompressed SSTable of whole ``data_blocks`` (each from :func:`block`), its index
    block keyed by ``index_keys`` (by default ``b"~"`` each), listing the blocks in the order
    ``index_handles`` gives (by default each once)."""
    out = bytearray()

    def put(contents: bytes) -> bytes:
        handle = varint(len(out)) + varint(len(contents))
        out.extend(contents + b"\x00" + masked_crc32c(contents + b"\x00").to_bytes(4, "little"))
        return handle

    handles = [put(b) for b in data_blocks]
    meta = put(block([]))
    order = range(len(handles)) if index_handles is None else index_handles
    keys = index_keys or [b"~"] * len(order)
    index = put(block([(keys[i], handles[k]) for i, k in enumerate(order)]))
    footer = meta + index
    out.extend(footer + b"\x00" * (40 - len(footer)) + TABLE_MAGIC.to_bytes(8, "little"))
    return bytes(out)


def table_items(raw: bytes) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a well-formed uncompressed table."""
    footer = raw[-48:]
    _, pos = _read_varint(footer, 0)
    _, pos = _read_varint(footer, pos)
    index_offset, pos = _read_varint(footer, pos)
    index_size, _ = _read_varint(footer, pos)
    items = []
    for _, handle in _block_items(raw[index_offset:index_offset + index_size]):
        offset, pos = _read_varint(handle, 0)
        size, _ = _read_varint(handle, pos)
        items.extend(_block_items(raw[offset:offset + size]))
    return items


def _block_items(contents: bytes) -> list[tuple[bytes, bytes]]:
    restarts = int.from_bytes(contents[-4:], "little")
    end, pos, key, items = len(contents) - 4 * (restarts + 1), 0, b"", []
    while pos < end:
        shared, pos = _read_varint(contents, pos)
        unshared, pos = _read_varint(contents, pos)
        length, pos = _read_varint(contents, pos)
        key = key[:shared] + contents[pos:pos + unshared]
        pos += unshared
        items.append((key, contents[pos:pos + length]))
        pos += length
    return items


def bundle_index(items: list[tuple[bytes, bytes]]) -> bytes:
    """A checkpoint index of (name, BundleEntryProto) items, the header first, in one block."""
    return table([block(sorted(items))])


def rewrite_entry(index: Path, name: str, change) -> None:
    """Rewrite one entry of a checkpoint index: ``change(parts)`` edits the list of its
    BundleEntryProto's (number, wire, value) fields in place; every crc is made right."""
    items = table_items(index.read_bytes())
    for i, (key, value) in enumerate(items):
        if key == name.encode():
            parts = fields(value)
            change(parts)
            items[i] = (key, message(parts))
    index.write_bytes(bundle_index(items))


# --------------------------------------------------------------------------- time bound


class Overran(Exception):  # noqa: N818 - what happened, as the failure reads
    """A call that ran past its time bound (not an OSError, so no test takes it for a refusal)."""


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Raise :class:`Overran` in the block once it has run ``seconds`` (main thread only)."""

    def overran(signum, frame):
        raise Overran(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, overran)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
