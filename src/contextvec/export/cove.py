"""CoVe as one ONNX graph: the word-vector lookup and the MT-LSTM's bidirectional layers, each
one ONNX ``LSTM`` (a loop over time that stops at each sentence's own length, as PyTorch's packed
sequences do)."""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from contextvec.encoders.cove.mt_lstm import MTLSTM
from contextvec.export.graph import LAYERS, MASK, Graph, f32, make_model, mix_output

WORD_IDS = "word_ids"

# PyTorch stacks an LSTM's gates (i, f, g, o); ONNX (i, o, f, c), with c == g.
_ONNX_GATES = [0, 3, 1, 2]


def _onnx_gates(w: torch.Tensor, hidden: int) -> np.ndarray:
    return f32(w.unflatten(0, (4, hidden))[_ONNX_GATES].flatten(0, 1))


def _bidirectional(g: Graph, lstm: torch.nn.LSTM, x: str, lengths: str, batch_time: str) -> str:
    """(batch, time, in) -> (batch, time, 2 * hidden), forward then backward halves."""
    h = lstm.hidden_size
    directions = ("", "_reverse")
    w = np.stack([_onnx_gates(getattr(lstm, f"weight_ih_l0{d}"), h) for d in directions])
    r = np.stack([_onnx_gates(getattr(lstm, f"weight_hh_l0{d}"), h) for d in directions])
    b = np.stack([np.concatenate([_onnx_gates(getattr(lstm, f"bias_ih_l0{d}"), h),
                                  _onnx_gates(getattr(lstm, f"bias_hh_l0{d}"), h)]) for d in directions])
    seq_major = g.op("Transpose", x, perm=[1, 0, 2])
    y = g.op("LSTM", seq_major, g.const("lstm_w", w), g.const("lstm_r", r), g.const("lstm_b", b), lengths,
             direction="bidirectional", hidden_size=h)  # (time, 2, batch, hidden)
    y = g.op("Transpose", y, perm=[2, 0, 1, 3])
    return g.op("Reshape", y, g.op("Concat", batch_time, g.const("dim", np.array([2 * h], np.int64)), axis=0),
                allowzero=1)


def build_cove_graph(mt_lstm: MTLSTM, mix: tuple[np.ndarray, float] | None = None) -> onnx.ModelProto:
    """Inputs ``word_ids`` (batch, time) int64 (0: out of vocabulary, else 1 + the word's line in
    the vocabulary) and ``mask`` (batch, time) int64; output ``layers`` (batch, num_layers + 1,
    time, input_dim + 2 * hidden) as :class:`~contextvec.encoders.cove.CoveEncoder`'s."""
    config = mt_lstm.config
    g = Graph()
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    shape = g.op("Shape", WORD_IDS)
    batch_time = g.op("Slice", shape, g.const("start", i64(0)), g.const("end", i64(2)))
    table = torch.cat([mt_lstm.unk.detach()[None].float(), mt_lstm.word_vectors.float()])
    present = g.op("Unsqueeze", g.op("Cast", MASK, to=TensorProto.BOOL), g.const("axis", i64(2)))
    zero = g.const("zero", np.zeros((1, 1, 1), np.float32))
    words = g.op("Where", present, g.op("Gather", g.const("word_vectors", f32(table)), WORD_IDS), zero)
    # PyTorch runs an empty sentence on one padded step (masked out below); ONNX the same.
    lengths = g.op("Cast", g.op("Max", g.op("ReduceSum", MASK, g.const("axis", i64(1)), keepdims=0),
                                g.const("one", i64(1))), to=TensorProto.INT32)
    context_zeros = g.op("Expand", zero, g.op("Concat", batch_time, g.const("dim", i64(config.output_dim)),
                                                axis=0))
    layers = [g.op("Concat", words, context_zeros, axis=-1)]
    x = words
    for lstm in mt_lstm.layers:
        x = g.op("Where", present, _bidirectional(g, lstm, x, lengths, batch_time), zero)
        layers.append(g.op("Concat", words, x, axis=-1))
    axis1 = g.const("axis", i64(1))
    g.op("Concat", *(g.op("Unsqueeze", v, axis1) for v in layers), axis=1, out=LAYERS)

    n_out, dim = config.num_layers + 1, config.input_dim + config.output_dim
    outputs = [helper.make_tensor_value_info(LAYERS, TensorProto.FLOAT, ["batch", n_out, "time", dim])]
    if mix is not None:
        outputs.append(mix_output(g, mix, n_out, dim))
    inputs = [helper.make_tensor_value_info(WORD_IDS, TensorProto.INT64, ["batch", "time"]),
              helper.make_tensor_value_info(MASK, TensorProto.INT64, ["batch", "time"])]
    return make_model(g, "cove", inputs, outputs)
