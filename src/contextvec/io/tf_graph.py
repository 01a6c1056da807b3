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

from contextvec.io.tf_checkpoint import CheckpointError, message_fields


class Node(NamedTuple):
    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: bytes  # the NodeDef itself, for the attributes of the few nodes that need them


def graph_nodes(path: str | os.PathLike) -> Iterator[Node]:
    """Every node of the first graph in a ``saved_model.pb``."""
    buf = Path(path).read_bytes()
    try:
        meta = next(value for field, _, value in message_fields(buf) if field == 2)
        graph = next(value for field, _, value in message_fields(meta) if field == 2)
        for field, _, node in message_fields(graph):
            if field == 1:
                name, op, inputs = "", "", []
                for f, _, value in message_fields(node):
                    if f == 1:
                        name = value.decode("utf-8")
                    elif f == 2:
                        op = value.decode("utf-8")
                    elif f == 3:
                        inputs.append(value.decode("utf-8").lstrip("^").split(":")[0])
                yield Node(name, op, tuple(inputs), node)
    except (StopIteration, ValueError, UnicodeDecodeError, AttributeError) as e:
        raise CheckpointError(f"{path}: not a readable SavedModel graph ({e})") from e


def _float_constant(node: Node) -> float | None:
    """The value of a scalar float ``Const`` node (attr ``value``: a TensorProto)."""
    for field, _, entry in message_fields(node.attrs):
        if field != 5:
            continue
        parts = {f: v for f, _, v in message_fields(entry)}
        if parts.get(1) != b"value":
            continue
        tensor = next((v for f, _, v in message_fields(parts.get(2, b"")) if f == 8), b"")
        for f, wire, value in message_fields(tensor):
            if f == 5 and wire == 2 and len(value) >= 4:  # packed float_val
                return struct.unpack("<f", value[:4])[0]
            if f == 5 and wire == 5:
                return struct.unpack("<f", int(value).to_bytes(4, "little"))[0]
            if f == 4 and len(value) >= 4:  # tensor_content
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
