"""TensorFlow's file encodings, read from files that may come from anyone: the protobuf wire
format (by field numbers: a few small messages do not warrant generated protobuf code) and the
masked crc32c of LevelDB-style tables. :mod:`contextvec.io.tf_checkpoint` reads checkpoints with
them, :mod:`contextvec.io.tf_graph` a TF-Hub module's graph."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from contextvec.io.untrusted import UntrustedFileError


class CheckpointError(UntrustedFileError):
    """A TensorFlow checkpoint or graph that cannot be read: missing, truncated, malformed or of
    a kind this reader does not support; the one-line message names the file."""


VARINT, I64, LEN, I32 = 0, 1, 2, 5
"""Protobuf wire types: how a field's value is stored."""
_WIRE_NAMES = {VARINT: "varint", I64: "64-bit", LEN: "length-delimited", 3: "group start",
               4: "group end", I32: "32-bit"}


class Message(NamedTuple):
    """The part of a protobuf message's schema a reader reads: field number -> (name, the wire
    types it may come in: one, or a repeated number's packed and unpacked forms)."""

    name: str
    fields: Mapping[int, tuple[str, tuple[int, ...]]]


def varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` of ``buf`` and the position after it; a ``ValueError`` for
    a truncated one or one over 64 bits."""
    if pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("a truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >> 64:
                raise ValueError("a varint over 64 bits")
            return result, pos
        shift += 7


def signed(value: int) -> int:
    """A varint as the int32/int64 it encodes (negative numbers take all 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def read_message(buf: bytes | memoryview, message: Message, path: Path,
                 context: str = "") -> Iterator[tuple[int, int | memoryview]]:
    """(field number, value) of each field of ``message`` that its schema names, in order: an
    int for varint and fixed-width fields, a memoryview of ``buf`` for length-delimited ones.
    Other fields are skipped, but must be well-formed.

    Raises:
        CheckpointError: a truncated or malformed message, or a field in a wire type its schema
            does not allow; the message names ``path``, ``context`` (what holds the message) and
            the field.
    """
    view = memoryview(buf)
    pos, size = 0, len(view)
    fields = message.fields
    try:
        while pos < size:
            key = view[pos]
            if key < 0x80:  # the one-byte keys of field numbers up to 15, inline
                pos += 1
            else:
                key, pos = varint(view, pos)
            number, wire = key >> 3, key & 7
            if wire == VARINT:
                value, pos = varint(view, pos)
            elif wire == LEN:
                length, pos = varint(view, pos)
                value, pos = view[pos:pos + length], pos + length
            elif wire in (I64, I32):
                width = 8 if wire == I64 else 4
                value, pos = int.from_bytes(view[pos:pos + width], "little"), pos + width
            else:
                raise ValueError(f"wire type {wire} ({_WIRE_NAMES.get(wire, 'unknown')})")
            if pos > size:
                raise ValueError(f"field {number} runs past the message's end")
            field = fields.get(number)
            if field is None:
                continue
            if wire not in field[1]:
                raise CheckpointError(path, f"{context}{message.name}.{field[0]} (field {number}) "
                                            f"comes as {_WIRE_NAMES[wire]}, not {_WIRE_NAMES[field[1][0]]}")
            yield number, value
    except CheckpointError:
        raise
    except ValueError as e:
        raise CheckpointError(path, f"{context}a malformed {message.name} ({e})") from None


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
