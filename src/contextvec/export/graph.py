"""Building ONNX graphs node by node, and what every exported graph shares."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
"""The ONNX opset of every exported graph (ai.onnx domain)."""

MASK, LAYERS, MIXED = "mask", "layers", "mixed"


class Graph:
    """Nodes and initializers under construction, with fresh names for intermediate values."""

    def __init__(self, prefix: str = "") -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._prefix = prefix
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{self._prefix}{hint}_{self._count}"

    def const(self, hint: str, value: np.ndarray | torch.Tensor) -> str:
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value).copy(order="C"), name))
        return name

    def op(self, op_type: str, *inputs: str, outputs: int = 1, out: str | None = None,
           **attrs) -> str | list[str]:
        names = [out] if out is not None else [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names


def f32(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().to(torch.float32).numpy()


def mix_output(g: Graph, mix: tuple[np.ndarray, float], n_out: int, dim: int,
               time: str = "time") -> onnx.ValueInfoProto:
    """``mixed`` = gamma * sum_k weights_k * layers[:, k], as ScalarMix computes it."""
    weights, gamma = mix
    column_weights = weights.astype(np.float32).reshape(1, n_out, 1, 1)
    weighted = g.op("Mul", LAYERS, g.const("mix_weights", column_weights))
    g.op("Mul", g.op("ReduceSum", weighted, g.const("axis", np.array([1], np.int64)), keepdims=0),
         g.const("mix_gamma", np.array(gamma, np.float32)), out=MIXED)
    return helper.make_tensor_value_info(MIXED, TensorProto.FLOAT, ["batch", time, dim])


def mix_constants(weights: Sequence[float] | torch.Tensor, gamma: float) -> tuple[np.ndarray, float]:
    """Softmax-normalised scalar-mix weights, as :class:`~contextvec.embedder.ScalarMix` uses them."""
    raw = torch.as_tensor(weights, dtype=torch.float32)
    return torch.softmax(raw, dim=0).numpy(), float(gamma)


def make_model(g: Graph, name: str, inputs: list[onnx.ValueInfoProto],
               outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    graph = helper.make_graph(g.nodes, name, inputs, outputs, initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="contextvec")
    model.ir_version = 8  # opset 18's IR version: readable by every runtime that has the opset
    return model
