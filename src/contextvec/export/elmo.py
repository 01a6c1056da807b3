"""ELMo as one ONNX graph, built node by node from the biLM's weights.

The graph mirrors :class:`~contextvec.encoders.bilm.model.ElmoBiLM` operation for operation:
the char-CNN once per distinct token of the batch, ``<S>``/``</S>`` added around each sentence, the
backward LM reading each sentence reversed within its own length (``ReverseSequence``), and each
LSTM layer one ``Scan`` over time whose body is one step of both directions from the zero state.
The graph is written with ``onnx.helper`` rather than traced: torch's exporters have no path for a
projected, clipped LSTM, and building from the state dict keeps one definition of each step.
"""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.bilm.lstm import GATE_F, ProjectedLSTMLayer
from contextvec.encoders.bilm.model import ElmoBiLM
from contextvec.export.graph import LAYERS, MASK, Graph, f32, make_model, mix_output

CHAR_IDS = "char_ids"


def _check_exportable(bilm: ElmoBiLM) -> BiLMConfig:
    config = bilm.config
    if not config.bidirectional:
        raise ValueError("a forward-only LM has no ELMo representations to export")
    return config


def _char_cnn(g: Graph, bilm: ElmoBiLM, char_ids: str) -> str:
    """Token vectors ``(batch * time, token_dim)`` of every position of ``char_ids``; as in
    ``ElmoBiLM.encode_tokens``, identical rows (repeated words, padding) go through the CNN once."""
    cnn = bilm.token_encoder
    every = g.op("Reshape", char_ids, g.const("chars_shape", np.array([-1, 50], np.int64)))
    ids, _, inverse, _ = g.op("Unique", every, axis=0, outputs=4)
    chars = g.op("Gather", g.const("char_embedding", f32(cnn.char_embedding.weight)), ids)
    chars = g.op("Transpose", chars, perm=[0, 2, 1])  # (n, dim, 50): Conv's channels first
    axis = g.const("axis2", np.array([2], np.int64))
    pooled = []
    for conv in cnn.convolutions:
        # As in CharCNN.forward, the bias is added after the max over positions.
        scores = g.op("Conv", chars, g.const("conv_weight", f32(conv.weight)))
        best = g.op("ReduceMax", scores, axis, keepdims=0)
        pooled.append(g.op("Add", best, g.const("conv_bias", f32(conv.bias))))
    x = g.op("Relu" if bilm.config.activation == "relu" else "Tanh", g.op("Concat", *pooled, axis=1))
    for transform, gate in zip(cnn.highway.transform, cnn.highway.gate, strict=True):
        gate_out = g.op("Sigmoid", _linear(g, x, gate, "highway_gate"))
        moved = g.op("Sub", g.op("Relu", _linear(g, x, transform, "highway_transform")), x)
        x = g.op("Add", x, g.op("Mul", gate_out, moved))
    if isinstance(cnn.projection, torch.nn.Linear):
        x = _linear(g, x, cnn.projection, "token_projection")
    return g.op("Gather", x, inverse)


def _linear(g: Graph, x: str, linear: torch.nn.Linear, hint: str) -> str:
    product = g.op("MatMul", x, g.const(f"{hint}_weight", f32(linear.weight).T))
    return g.op("Add", product, g.const(f"{hint}_bias", f32(linear.bias)))


def _step_graph(layer: ProjectedLSTMLayer, index: int, outer: Graph) -> onnx.GraphProto:
    """The Scan body: one time step of both directions. State ``h`` (2, batch, proj) and ``c``
    (2, batch, cell), scan input the step's input projections (2, batch, 4 * cell)."""
    g = Graph(prefix=f"lstm{index}_step_")
    c_dim, p_dim = layer.cell_dim, layer.projection_dim
    h, c, x = f"lstm{index}_h", f"lstm{index}_c", f"lstm{index}_x"
    # The weights are initializers of the outer graph, which a subgraph may read by name.
    state_weight = outer.const(f"lstm{index}_state_weight", f32(layer.state_weight).transpose(0, 2, 1))
    gates = g.op("Add", x, g.op("MatMul", h, state_weight))
    i, j, f, o = g.op("Split", gates, axis=-1, num_outputs=4, outputs=4)
    cell = g.op("Add", g.op("Mul", g.op("Sigmoid", f), c), g.op("Mul", g.op("Sigmoid", i), g.op("Tanh", j)))
    cell = _clip(g, cell, layer.cell_clip)
    out = g.op("Mul", g.op("Sigmoid", o), g.op("Tanh", cell))
    if layer.projection is not None:
        projection = outer.const(f"lstm{index}_projection", f32(layer.projection).transpose(0, 2, 1))
        out = g.op("MatMul", out, projection)
    out = _clip(g, out, layer.proj_clip)
    # The next state is (out, cell); the scan output needs a name of its own.
    new_h, new_c, y = out, cell, g.op("Identity", out)

    def value(name: str, dim: int) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, "batch", dim])

    return helper.make_graph(
        g.nodes, f"lstm{index}_step",
        [value(h, p_dim), value(c, c_dim), value(x, 4 * c_dim)],
        [value(new_h, p_dim), value(new_c, c_dim), value(y, p_dim)],
        initializer=g.initializers,
    )


def _clip(g: Graph, x: str, value: float | None) -> str:
    if not value:
        return x
    return g.op("Clip", x, g.const("clip_min", np.array(-value, np.float32)),
                g.const("clip_max", np.array(value, np.float32)))


def _lstm_layer(g: Graph, layer: ProjectedLSTMLayer, index: int, x: str, batch_dims: str) -> str:
    """Outputs (2, batch, time + 2, proj) of one layer for inputs (2, batch, time + 2, in); steps
    past a sentence's end hold values that no real step reads (each direction runs forward in
    time over its own sequence) and are zeroed by the caller's mask."""
    bias = layer.bias.detach().clone()
    bias[:, GATE_F * layer.cell_dim : (GATE_F + 1) * layer.cell_dim] += layer.forget_bias
    input_weight = g.const(f"lstm{index}_input_weight", f32(layer.input_weight).transpose(0, 2, 1)[:, None])
    projected = g.op("Add", g.op("MatMul", x, input_weight),
                     g.const(f"lstm{index}_bias", f32(bias)[:, None, None]))
    time_major = g.op("Transpose", projected, perm=[2, 0, 1, 3])  # (time + 2, 2, batch, 4 * cell)
    zeros = []
    for dim in (layer.projection_dim, layer.cell_dim):
        shape = g.op("Concat", g.const("two", np.array([2], np.int64)), batch_dims,
                     g.const("dim", np.array([dim], np.int64)), axis=0)
        zeros.append(g.op("Expand", g.const("zero", np.zeros((1, 1, 1), np.float32)), shape))
    body = _step_graph(layer, index, g)
    _, _, steps = g.op("Scan", *zeros, time_major, outputs=3, num_scan_inputs=1, body=body)
    return g.op("Transpose", steps, perm=[1, 2, 0, 3])


def build_elmo_graph(bilm: ElmoBiLM, mix: tuple[np.ndarray, float] | None = None) -> onnx.ModelProto:
    """The ONNX model of ``bilm``: inputs ``char_ids`` (batch, time, 50) int64 and ``mask``
    (batch, time) int64 (1 for each token, a prefix of each row), output ``layers`` (batch,
    n_layers + 1, time, 2 * projection_dim) float32, and with ``mix`` = (softmax-normalised
    weights, gamma) also ``mixed`` (batch, time, 2 * projection_dim)."""
    config = _check_exportable(bilm)
    g = Graph()
    p = config.projection_dim
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    shape = g.op("Shape", CHAR_IDS)
    batch_dims = g.op("Slice", shape, g.const("start", i64(0)), g.const("end", i64(1)))
    batch_time = g.op("Slice", shape, g.const("start", i64(0)), g.const("end", i64(2)))
    time = g.op("Squeeze", g.op("Slice", shape, g.const("start", i64(1)), g.const("end", i64(2))))

    # allowzero: a batch of empty sentences has time 0, which must not mean "copy that dim".
    tokens = g.op("Reshape", _char_cnn(g, bilm, CHAR_IDS),
                  g.op("Concat", batch_time, g.const("dim", i64(p)), axis=0), allowzero=1)
    present = g.op("Cast", MASK, to=TensorProto.BOOL)
    zero = g.const("zero", np.zeros((1, 1, 1), np.float32))
    tokens = g.op("Where", g.op("Unsqueeze", present, g.const("axis", i64(2))), tokens, zero)

    with torch.no_grad():
        bos, eos = (f32(v) for v in bilm.boundary_vectors())
    lengths = g.op("ReduceSum", MASK, g.const("axis", i64(1)), keepdims=0)  # (batch,)
    edge_shape = g.op("Concat", batch_dims, g.const("dims", i64(1, p)), axis=0)
    seq = g.op("Concat", g.op("Expand", g.const("bos", bos.reshape(1, 1, p)), edge_shape), tokens,
               g.op("Expand", zero, edge_shape), axis=1)  # (batch, time + 2, p)
    positions = g.op("Range", g.const("zero_i", np.array(0, np.int64)),
                     g.op("Add", time, g.const("two_i", np.array(2, np.int64))),
                     g.const("one_i", np.array(1, np.int64)))
    row_positions = g.op("Unsqueeze", positions, g.const("axis", i64(0)))  # (1, time + 2)
    full_lengths = g.op("Add", lengths, g.const("two_i", np.array(2, np.int64)))
    column = lambda v: g.op("Unsqueeze", v, g.const("axis", i64(1)))  # noqa: E731
    at_end = g.op("Equal", row_positions, column(g.op("Add", lengths, g.const("one_i", i64(1)))))
    seq = g.op("Where", g.op("Unsqueeze", at_end, g.const("axis", i64(2))),
               g.const("eos", eos.reshape(1, 1, p)), seq)
    running = g.op("Less", row_positions, column(full_lengths))  # (batch, time + 2)
    running4 = g.op("Unsqueeze", running, g.const("axes", i64(0, 3)))

    def reverse(x: str) -> str:
        return g.op("ReverseSequence", x, full_lengths, batch_axis=0, time_axis=1)

    axis0 = g.const("axis", i64(0))
    x = g.op("Concat", g.op("Unsqueeze", seq, axis0), g.op("Unsqueeze", reverse(seq), axis0), axis=0)
    layers = [g.op("Concat", seq, seq, axis=-1)]
    for index, layer in enumerate(bilm.layers):
        out = g.op("Where", running4, _lstm_layer(g, layer, index, x, batch_dims), zero)
        if index > 0 and config.use_skip_connections:
            out = g.op("Add", out, x)
        x = out
        forward, backward = g.op("Split", out, axis=0, num_outputs=2, outputs=2)
        layers.append(g.op("Concat", g.op("Squeeze", forward, axis0),
                           reverse(g.op("Squeeze", backward, axis0)), axis=-1))
    axis1 = g.const("axis", i64(1))
    stacked = g.op("Concat", *(g.op("Unsqueeze", v, axis1) for v in layers), axis=1)
    inner = g.op("Slice", stacked, g.const("start", i64(1)), g.const("end", i64(-1)), g.const("axis", i64(2)))
    token_mask = g.op("Unsqueeze", present, g.const("axes", i64(1, 3)))  # (batch, 1, time, 1)
    g.op("Where", token_mask, inner, zero, out=LAYERS)

    n_out = config.num_output_layers
    dim = config.output_dim
    outputs = [helper.make_tensor_value_info(LAYERS, TensorProto.FLOAT, ["batch", n_out, "time", dim])]
    if mix is not None:
        outputs.append(mix_output(g, mix, n_out, dim))

    inputs = [helper.make_tensor_value_info(CHAR_IDS, TensorProto.INT64, ["batch", "time", 50]),
              helper.make_tensor_value_info(MASK, TensorProto.INT64, ["batch", "time"])]
    return make_model(g, "elmo", inputs, outputs)
