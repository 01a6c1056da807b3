"""What a TF-Hub ELMo module's graph fixes and its variables do not show, read from its
``saved_model.pb`` without TensorFlow.

bilm-tf's inference graph leaves three choices in its ops rather than its variables: the char-CNN
activation (``Relu`` or ``Tanh`` ops under ``bilm/CNN``), the LSTM clipping (a
``clip_by_value`` inside ``lstm_cell`` whose input is the cell state, or the projection's
``MatMul``, with the bound as a constant), and the skip connections (an ``Add`` in a higher
layer's loop adding the layer's input, read from its ``TensorArray``). The graph is read as
protobuf fields (SavedModel 2 -> MetaGraphDef 2 -> GraphDef 1 -> NodeDef: name 1, op 2,
input 3, attr 5); nothing is executed.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from contextvec.io.tf_wire import I32, LEN, VARINT, CheckpointError, Message, read_message
from contextvec.io.untrusted import read_bounded

# tensorflow/core/protobuf/saved_model.proto, meta_graph.proto and framework/*.proto: the fields
# read, with the wire types their schema gives them.
_SAVED_MODEL = Message("SavedModel", {2: ("meta_graphs", (LEN,))})
_META_GRAPH = Message("MetaGraphDef", {2: ("graph_def", (LEN,))})
_GRAPH = Message("GraphDef", {1: ("node", (LEN,))})
_NODE = Message("NodeDef", {1: ("name", (LEN,)), 2: ("op", (LEN,)), 3: ("input", (LEN,)),
                            5: ("attr", (LEN,))})
_ATTR_ENTRY = Message("NodeDef.AttrEntry", {1: ("key", (LEN,)), 2: ("value", (LEN,))})
_ATTR_VALUE = Message("AttrValue", {8: ("tensor", (LEN,))})
_TENSOR = Message("TensorProto", {1: ("dtype", (VARINT,)), 4: ("tensor_content", (LEN,)),
                                  5: ("float_val", (LEN, I32))})
_DT_FLOAT = 1


class Node(NamedTuple):
    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: memoryview  # the NodeDef itself, for the attributes of the few nodes that need them
    path: Path  # the graph file, for the errors of reading them


def _first(buf: bytes | memoryview, message: Message, path: Path, context: str = "") -> memoryview:
    """The first field ``message`` reads (its one length-delimited field)."""
    for _, value in read_message(buf, message, path, context):
        return value
    name = next(iter(message.fields.values()))[0]
    raise CheckpointError(path, f"{context}no {message.name}.{name}")


def graph_nodes(path: str | os.PathLike) -> Iterator[Node]:
    """Every node of the first graph in a ``saved_model.pb`` (a regular file of at most
    :data:`~contextvec.io.untrusted.SMALL_FILE_CAP` bytes)."""
    path = Path(path)
    buf = read_bounded(path)
    graph = _first(_first(buf, _SAVED_MODEL, path), _META_GRAPH, path, "meta_graphs[0]: ")
    for i, (_, node) in enumerate(read_message(graph, _GRAPH, path, "meta_graphs[0].graph_def: ")):
        name, op, inputs = "", "", []
        context = f"node {i}: "
        try:
            for f, value in read_message(node, _NODE, path, context):
                if f == 1:
                    name = str(value, "utf-8")
                elif f == 2:
                    op = str(value, "utf-8")
                elif f == 3:
                    inputs.append(str(value, "utf-8").lstrip("^").split(":")[0])
        except UnicodeDecodeError as e:
            raise CheckpointError(path, f"{context}a NodeDef string that is not UTF-8 ({e})") from None
        yield Node(name, op, tuple(inputs), node, path)


def _float_constant(node: Node) -> float | None:
    """The value of a scalar float ``Const`` node (attr ``value``: a TensorProto)."""
    context = f"node {node.name!r}: "
    for field, entry in read_message(node.attrs, _NODE, node.path, context):
        if field != 5:
            continue
        parts = dict(read_message(entry, _ATTR_ENTRY, node.path, context))
        if bytes(parts.get(1, b"")) != b"value":
            continue
        tensor = dict(read_message(parts.get(2, b""), _ATTR_VALUE, node.path, context)).get(8, b"")
        values = list(read_message(tensor, _TENSOR, node.path, context))
        if dict(values).get(1, _DT_FLOAT) != _DT_FLOAT:
            return None
        for f, value in values:
            if f == 5 and isinstance(value, int):
                return struct.unpack("<f", value.to_bytes(4, "little"))[0]
            if f in (4, 5) and len(value) >= 4:  # tensor_content, or packed float_val
                return struct.unpack("<f", value[:4])[0]
    return None


def elmo_graph_options(path: str | os.PathLike, prefix: str) -> dict[str, Any] | None:
    """The activation, clipping and skip connections of the bilm-tf graph under ``prefix``
    (``"bilm/"``, or with the prefix its variables carry), as bilm-tf options sections; None
    where the graph holds no bilm-tf LSTM cell (a graph built otherwise)."""
    nodes = {node.name: node for node in graph_nodes(path) if node.name.startswith(prefix)}
    forward = re.escape(prefix) + r"RNN_0/RNN/MultiRNNCell/Cell(\d+)/rnn/while/"
    cells = {node.name for node in nodes.values() if re.match(forward + "lstm_cell/", node.name)}
    if not cells:
        return None
    activations = {node.op for node in nodes.values()
                   if node.name.startswith(prefix + "CNN/") and node.op in ("Relu", "Tanh")}
    clips: dict[str, float] = {}
    skip = False
    for node in nodes.values():
        at = re.match(forward, node.name)
        if at is None:
            continue
        if node.op == "Minimum" and "/lstm_cell/clip_by_value" in node.name and len(node.inputs) == 2:
            clipped, bound = (nodes.get(name) for name in node.inputs)
            value = None if bound is None else _float_constant(bound)
            if clipped is not None and value is not None:
                clips["proj_clip" if clipped.op == "MatMul" else "cell_clip"] = value
        elif (node.op in ("Add", "AddV2") and int(at[1]) > 0 and "/lstm_cell/" not in node.name
              and any(name in nodes and nodes[name].op == "TensorArrayReadV3" for name in node.inputs)):
            skip = True
    options: dict[str, Any] = {
        "lstm": {"cell_clip": clips.get("cell_clip"), "proj_clip": clips.get("proj_clip"),
                 "use_skip_connections": skip},
        "char_cnn": {},
    }
    if len(activations) == 1:
        options["char_cnn"]["activation"] = activations.pop().lower()
    return options
