"""BERT as one ONNX graph: word pieces in, every hidden state out, at the pieces and at each
word's first piece (``BertEncoder``'s default ``subword_pooling="first"``)."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from contextvec.encoders.bert.model import BertModel
from contextvec.export.graph import LAYERS, MASK, Graph, f32, make_model, mix_output

INPUT_IDS, ATTENTION_MASK = "input_ids", "attention_mask"
FIRST_PIECE, HIDDEN_STATES = "first_piece", "hidden_states"


def _linear(g: Graph, x: str, linear, hint: str) -> str:
    product = g.op("MatMul", x, g.const(f"{hint}_weight", f32(linear.weight).T))
    return g.op("Add", product, g.const(f"{hint}_bias", f32(linear.bias)))


def _layer_norm(g: Graph, x: str, norm, hint: str) -> str:
    return g.op("LayerNormalization", x, g.const(f"{hint}_scale", f32(norm.weight)),
                g.const(f"{hint}_bias", f32(norm.bias)), axis=-1, epsilon=float(norm.eps))


def _gelu(g: Graph, x: str, approximate: str) -> str:
    half = g.const("half", np.array(0.5, np.float32))
    one = g.const("one", np.array(1.0, np.float32))
    if approximate == "tanh":
        cube = g.op("Mul", g.const("c", np.array(0.044715, np.float32)), g.op("Mul", x, g.op("Mul", x, x)))
        inner = g.op("Mul", g.const("c", np.array(math.sqrt(2 / math.pi), np.float32)), g.op("Add", x, cube))
        curve = g.op("Tanh", inner)
    else:
        curve = g.op("Erf", g.op("Mul", x, g.const("c", np.array(1 / math.sqrt(2), np.float32))))
    return g.op("Mul", g.op("Mul", half, x), g.op("Add", one, curve))


def _heads(g: Graph, x: str, heads: int, head_dim: int, perm: list[int]) -> str:
    shape = g.const("heads_shape", np.array([0, 0, heads, head_dim], np.int64))
    return g.op("Transpose", g.op("Reshape", x, shape), perm=perm)


def build_bert_graph(model: BertModel, mix: tuple[np.ndarray, float] | None = None) -> onnx.ModelProto:
    """Inputs ``input_ids`` and ``attention_mask`` (batch, pieces) int64 (one row per sentence:
    [CLS] pieces [SEP], then padding), ``first_piece`` (batch, words) int64 (each word's first
    piece's position in its row) and ``mask`` (batch, words) int64. Outputs ``layers`` (batch,
    num_hidden_layers + 1, words, hidden) and ``hidden_states`` (batch, num_hidden_layers + 1,
    pieces, hidden)."""
    config = model.config
    g = Graph()
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_dim = config.head_dim
    emb = model.embeddings
    pieces = g.op("Slice", g.op("Shape", INPUT_IDS), g.const("start", i64(1)), g.const("end", i64(2)))
    positions = g.op("Range", g.const("zero", np.array(0, np.int64)), g.op("Squeeze", pieces),
                     g.const("one", np.array(1, np.int64)))
    x = g.op("Add", g.op("Gather", g.const("word_embeddings", f32(emb.word_embeddings.weight)), INPUT_IDS),
             g.op("Gather", g.const("position_embeddings", f32(emb.position_embeddings.weight)), positions))
    # Token type 0 throughout, as BertEncoder runs one sentence per row.
    x = g.op("Add", x, g.const("token_type_0", f32(emb.token_type_embeddings.weight[0])))
    x = _layer_norm(g, x, emb.LayerNorm, "embeddings_norm")
    attend = g.op("Unsqueeze", g.op("Cast", ATTENTION_MASK, to=TensorProto.BOOL), g.const("axes", i64(1, 2)))
    score_bias = g.op("Where", attend, g.const("zero_f", np.array(0.0, np.float32)),
                      g.const("minus_inf", np.array(-np.inf, np.float32)))  # (batch, 1, 1, pieces)
    scale = g.const("scale", np.array(1 / math.sqrt(head_dim), np.float32))
    states = [x]
    for index, layer in enumerate(model.encoder.layer):
        attention = layer.attention
        q = _heads(g, _linear(g, x, attention.self.query, f"l{index}_query"), heads, head_dim, [0, 2, 1, 3])
        k = _heads(g, _linear(g, x, attention.self.key, f"l{index}_key"), heads, head_dim, [0, 2, 3, 1])
        v = _heads(g, _linear(g, x, attention.self.value, f"l{index}_value"), heads, head_dim, [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), score_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)  # (batch, heads, pieces, d)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
                       g.const("shape", i64(0, 0, hidden)))
        out = attention.output
        x = _layer_norm(g, g.op("Add", _linear(g, context, out.dense, f"l{index}_attention_out"), x),
                        out.LayerNorm, f"l{index}_attention_norm")
        inner = _gelu(g, _linear(g, x, layer.intermediate.dense, f"l{index}_intermediate"),
                      config.gelu_approximate)
        x = _layer_norm(g, g.op("Add", _linear(g, inner, layer.output.dense, f"l{index}_output"), x),
                        layer.output.LayerNorm, f"l{index}_output_norm")
        states.append(x)
    axis1 = g.const("axis", i64(1))
    g.op("Concat", *(g.op("Unsqueeze", s, axis1) for s in states), axis=1, out=HIDDEN_STATES)
    where = g.op("Unsqueeze", FIRST_PIECE, g.const("axis", i64(2)))  # (batch, words, 1)
    words = [g.op("GatherND", s, where, batch_dims=1) for s in states]  # (batch, words, hidden)
    present = g.op("Unsqueeze", g.op("Cast", MASK, to=TensorProto.BOOL), g.const("axes", i64(1, 3)))
    stacked = g.op("Concat", *(g.op("Unsqueeze", w, axis1) for w in words), axis=1)
    g.op("Where", present, stacked, g.const("zero_f", np.zeros((1, 1, 1, 1), np.float32)), out=LAYERS)

    n_out = config.num_hidden_layers + 1
    outputs = [helper.make_tensor_value_info(LAYERS, TensorProto.FLOAT, ["batch", n_out, "words", hidden])]
    if mix is not None:
        outputs.append(mix_output(g, mix, n_out, hidden, "words"))
    outputs.append(helper.make_tensor_value_info(HIDDEN_STATES, TensorProto.FLOAT,
                                                 ["batch", n_out, "pieces", hidden]))
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", axis])
              for name, axis in ((INPUT_IDS, "pieces"), (ATTENTION_MASK, "pieces"), (FIRST_PIECE, "words"),
                                 (MASK, "words"))]
    return make_model(g, "bert", inputs, outputs)
