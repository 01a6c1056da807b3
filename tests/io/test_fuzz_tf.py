"""Seeded mutations of the committed TensorFlow fixtures, loaded the way ``contextvec.load`` and
``contextvec info/convert`` load them: each case loads, or is refused by one line naming the
file, within a time bound and a memory bound. No other outcome.

Each reader gets its own cases: the checkpoint's index (entries and header changed inside a
table whose crcs are right, so that the protobuf fields are reached, and the raw file) and data
shard; a TF-Hub module's variables (index and both shards); and a module's ``saved_model.pb``
(the graph's nodes the reader looks at, cut from the committed graph, changed field by field).
The mutations are bit flips, truncations and inserted bytes in a file, and, field by field inside
the index entries and the graph (re-encoded with every enclosing length right, so that the change
reaches the reader's schema checks), another wire type (a message stored as a varint), huge
varints, fields dropped or repeated.
"""

from __future__ import annotations

import functools
import lzma
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers_tf import I32, I64, LEN, VARINT, bundle_index, field, fields, table_items, within

from contextvec.encoders.bilm.tf_loader import load_tf_bilm
from contextvec.io.tf_graph import elmo_graph_options

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tfckpt"
SEED = 20240607
PER_CASE_S = 3.0  # a case takes a small fraction of this; a hang takes all of it
SLACK = 8 * 1024 * 1024  # what a load takes besides file and model bytes (names, module objects)

# Which length-delimited fields hold messages, to change the fields inside them (field number ->
# its own).
ENTRY = {2: {2: {}}}  # BundleEntryProto.shape -> TensorShapeProto.dim -> Dim
HEADER = {3: {}}  # BundleHeaderProto.version
SAVED_MODEL = {2: {2: {1: {5: {2: {8: {2: {2: {}}}}}}}}}  # ... NodeDef.attr -> TensorProto.shape
HUGE = (1 << 31, 1 << 40, 1 << 63, (1 << 64) - 1)


def _flip(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    out, at = bytearray(buf), [rng.randrange(len(buf)) for _ in range(rng.randint(1, 4))]
    for i in at:
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out), f"bits flipped at {at}"


def _truncate(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    at = rng.randrange(len(buf))
    return buf[:at], f"cut at {at}"


def _insert(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    at = rng.randrange(len(buf) + 1)
    return buf[:at] + rng.randbytes(rng.randint(1, 8)) + buf[at:], f"bytes inserted at {at}"


def _raw(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    return rng.choice((_flip, _truncate, _insert))(buf, rng) if buf else (rng.randbytes(3), "bytes")


# A message as a tree: a list of (number, wire, value, its bytes), value a subtree for the fields
# ``nested`` names (field number -> its own ``nested``), so that a field changed deep inside is
# encoded with every length around it right, and the change reaches the reader's schema checks.
# The fields around the change keep their bytes.


def _tree(buf: bytes, nested: dict) -> list:
    return [(n, w, _tree(v, nested[n]) if w == LEN and n in nested else v, field(n, w, v))
            for n, w, v in fields(buf)]


def _encode(tree: list) -> bytes:
    return b"".join(raw if raw is not None else field(n, w, _encode(v) if isinstance(v, list) else v)
                    for n, w, v, raw in tree)


def _paths(tree: list, above: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    out = []
    for i, (_, _, value, _) in enumerate(tree):
        out.append((*above, i))
        if isinstance(value, list):
            out += _paths(value, (*above, i))
    return out


def _replaced(tree: list, path: tuple[int, ...], new: list) -> list:
    """``tree`` with the field at ``path`` replaced by the fields ``new``."""
    i = path[0]
    if len(path) == 1:
        return tree[:i] + [(n, w, v, None) for n, w, v in new] + tree[i + 1:]
    n, w, value, _ = tree[i]
    return [*tree[:i], (n, w, _replaced(value, path[1:], new), None), *tree[i + 1:]]


def _at(tree: list, path: tuple[int, ...]) -> tuple:
    for i in path[:-1]:
        tree = tree[i][2]
    return tree[path[-1]]


def _changed_field(number: int, wire: int, value, rng: random.Random) -> tuple[list, str]:
    """One field changed: another wire type (a message as a varint), a huge or odd value,
    dropped or repeated."""
    how = rng.choice(("wire", "wire", "value", "drop", "repeat"))
    if how == "wire":
        to = rng.choice([w for w in (VARINT, I64, LEN, I32) if w != wire])
        if to == LEN:
            new = rng.randbytes(rng.randint(0, 12))
        else:
            new = rng.choice((*HUGE, 0, 1, 7)) & ((1 << (64 if to in (VARINT, I64) else 32)) - 1)
        return [(number, to, new)], f"field {number} as wire type {to} ({new!r})"
    if how == "value":
        if wire == LEN:
            new = rng.randbytes(rng.randint(0, 12))
        else:
            new = rng.choice((*HUGE, 0, (1 << 32) - 1)) & ((1 << (32 if wire == I32 else 64)) - 1)
        return [(number, wire, new)], f"field {number} set to {new!r}"
    if how == "drop":
        return [], f"field {number} dropped"
    return [(number, wire, value)] * 2, f"field {number} repeated"


def _mutated(tree: list, rng: random.Random) -> tuple[bytes, str]:
    """A message (as its tree) with one field changed anywhere in it, or its bytes changed."""
    paths = _paths(tree)
    if not paths or rng.random() < 0.25:
        return _raw(_encode(tree), rng)
    path = rng.choice(paths)
    number, wire, value, _ = _at(tree, path)
    if isinstance(value, list):
        value = _encode(value)
    new, what = _changed_field(number, wire, value, rng)
    return _encode(_replaced(tree, path, new)), f"{what} at {path}"


def _index_case(index: bytes) -> Callable[[random.Random], tuple[bytes, str]]:
    """One entry (or the header) changed inside a well-formed table, or the table's bytes."""
    items = table_items(index)

    def case(rng: random.Random) -> tuple[bytes, str]:
        if rng.random() < 0.15:
            return _raw(index, rng)
        changed = list(items)
        i = rng.randrange(len(changed))
        key, value = changed[i]
        if key and rng.random() < 0.1:
            name, what = _raw(key, rng)
            changed[i] = (name, value)
        else:
            value, what = _mutated(_tree(value, ENTRY if key else HEADER), rng)
            changed[i] = (key, value)
        return bundle_index(changed), f"{key.decode()!r}: {what}"

    return case


def _raw_case(original: bytes) -> Callable[[random.Random], tuple[bytes, str]]:
    return lambda rng: _raw(original, rng)


@functools.cache
def _trimmed_graph() -> bytes:
    """The committed module's graph with the nodes the reader looks at (the char-CNN and the
    forward LSTM loop's), in its meta graph: what the reader finds in it, a tenth of the bytes."""
    full = lzma.decompress((FIXTURES / "hub" / "saved_model.pb.xz").read_bytes())
    (_, _, meta), = fields(full)
    graph = next(value for number, _, value in fields(meta) if number == 2)
    nodes = [
        node for number, _, node in fields(graph) if number == 1 and re.match(
            r"bilm/(CNN/|RNN_0/RNN/MultiRNNCell/Cell\d+/rnn/while/)",
            next(v for n, _, v in fields(node) if n == 1).decode())
    ]
    return field(2, LEN, field(2, LEN, b"".join(field(1, LEN, node) for node in nodes)))


class Reader(NamedTuple):
    """A model directory, the one file of it each case replaces, how, and how many times."""

    directory: Path
    target: Path
    case: Callable[[random.Random], tuple[bytes, str]]
    cases: int


def _readers(tmp_path: Path) -> dict[str, Reader]:
    checkpoint = shutil.copytree(FIXTURES / "checkpoint", tmp_path / "checkpoint")
    hub = shutil.copytree(FIXTURES / "hub", tmp_path / "hub", ignore=shutil.ignore_patterns("*.xz"))
    module = shutil.copytree(hub, tmp_path / "module")
    graph = _trimmed_graph()
    (module / "saved_model.pb").write_bytes(graph)
    graph_tree = _tree(graph, SAVED_MODEL)
    index, data = checkpoint / "model.ckpt-3.index", checkpoint / "model.ckpt-3.data-00000-of-00001"
    variables = hub / "variables" / "variables.index"
    shards = [hub / "variables" / f"variables.data-0000{i}-of-00002" for i in range(2)]
    return {
        "checkpoint index": Reader(checkpoint, index, _index_case(index.read_bytes()), 80),
        "checkpoint data": Reader(checkpoint, data, _raw_case(data.read_bytes()), 20),
        "hub variables index": Reader(hub, variables, _index_case(variables.read_bytes()), 50),
        "hub variables data 0": Reader(hub, shards[0], _raw_case(shards[0].read_bytes()), 10),
        "hub variables data 1": Reader(hub, shards[1], _raw_case(shards[1].read_bytes()), 10),
        "saved_model.pb": Reader(module, module / "saved_model.pb",
                                 lambda rng: _mutated(graph_tree, rng), 80),
    }


def test_the_cut_graph_gives_what_the_whole_one_does(tmp_path):
    cut, full = tmp_path / "cut.pb", tmp_path / "full.pb"
    cut.write_bytes(_trimmed_graph())
    full.write_bytes(lzma.decompress((FIXTURES / "hub" / "saved_model.pb.xz").read_bytes()))
    assert elmo_graph_options(cut, "bilm/") == elmo_graph_options(full, "bilm/") is not None


def _resident() -> tuple[int, int]:
    """The process's peak and current resident memory, in bytes (Linux)."""
    status = Path("/proc/self/status").read_text()
    return tuple(int(re.search(rf"{key}:\s+(\d+) kB", status)[1]) * 1024 for key in ("VmHWM", "VmRSS"))


def _reset_peak() -> int:
    """Make the peak the current resident memory (what the kernel offers for this), and return it."""
    Path("/proc/self/clear_refs").write_text("5")
    return _resident()[1]


def _size(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


@pytest.mark.parametrize("reader", ["checkpoint index", "checkpoint data", "hub variables index",
                                    "hub variables data 0", "hub variables data 1", "saved_model.pb"])
def test_mutated_files_load_or_are_refused_in_one_line(tmp_path, reader):
    r = _readers(tmp_path)[reader]
    original = r.target.read_bytes()
    model = load_tf_bilm(r.directory)  # also the imports, before memory is counted
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    del model
    rng = random.Random(f"{SEED} {reader}")
    outcomes: dict[str, int] = {"loaded": 0, "refused": 0, "wire type": 0}
    try:
        for i in range(r.cases):
            data, what = r.case(rng)
            r.target.write_bytes(data)
            bound = 2 * _size(r.directory) + model_bytes + SLACK
            case = f"case {i} of {reader}, {what}"
            before = _reset_peak()
            try:
                with within(PER_CASE_S):
                    load_tf_bilm(r.directory)
                outcomes["loaded"] += 1
            except (ValueError, OSError) as e:
                text = str(e)
                assert "\n" not in text and str(r.directory) in text, f"{case}: {text!r}"
                outcomes["refused"] += 1
                outcomes["wire type"] += " comes as " in text
            except Exception as e:  # noqa: BLE001 - any other kind of failure is what this finds
                pytest.fail(f"{case}: {type(e).__name__}: {e}")
            grown = _resident()[0] - before
            assert grown <= bound, f"{case}: {grown:,} bytes more memory, over {bound:,}"
    finally:
        r.target.write_bytes(original)
    assert outcomes["refused"] >= r.cases // 4, outcomes  # the mutations reach the checks
    if reader in ("checkpoint index", "hub variables index", "saved_model.pb"):
        assert outcomes["wire type"] > 0, outcomes
