"""Shared by the benchmark scripts: the machine's matmul peak and FLOP counts of a biLM."""

from __future__ import annotations

import time
from collections.abc import Iterable

import torch

from contextvec.encoders.bilm.char_cnn import CharCNN
from contextvec.encoders.bilm.config import BiLMConfig


def matmul_peak(dtype: torch.dtype = torch.float32, size: int = 2048, repeats: int = 10) -> float:
    """Best GFLOP/s of a square matmul in ``dtype`` with torch's current threads: the practical
    peak."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * size**3 / (time.perf_counter() - start) / 1e9)
    return best


def cnn_flops(c: BiLMConfig, positions: int | None = None) -> float:
    """FLOPs (2 x multiply-adds) of one token through the char-CNN, highway and projection.

    ``positions``: character columns convolved; the model's definition is all 50, but the
    CharCNN skips trailing all-padding columns (same output), so it usually convolves fewer.
    """
    positions = positions or c.max_characters_per_token
    convolutions = sum(n * w * c.char_embed_dim * max(positions - w + 1, 0) for w, n in c.filters)
    return 2.0 * (convolutions + c.n_highway * 2 * c.n_filters**2 + c.n_filters * c.projection_dim)


def lstm_flops(c: BiLMConfig) -> float:
    """FLOPs of one token through every LSTM layer of every direction: the four gates' input and
    state matmuls, plus the output projection when the LSTM has one. (What runs is a little less:
    :class:`LstmWork`.)"""
    directions = 2 if c.bidirectional else 1
    per_layer = (9 if c.lstm_projection else 8) * c.lstm_dim * c.projection_dim
    return 2.0 * directions * c.n_layers * per_layer


class CnnWork:
    """Records a char-CNN's FLOPs as it runs: tokens x the character columns it keeps (the
    columns its character embedding is given, trailing padding dropped)."""

    def __init__(self, cnn: CharCNN, config: BiLMConfig) -> None:
        self.flops = 0.0

        def record(module: torch.nn.Module, inputs: tuple[torch.Tensor]) -> None:
            char_ids = inputs[0]
            self.flops += char_ids.shape[0] * cnn_flops(config, char_ids.shape[1])

        cnn.char_embedding.register_forward_pre_hook(record)


class LstmWork:
    """Records the FLOPs a biLM's LSTM layers run, call by call: the input projections of the
    rows each layer projects (each distinct row once where it is given them: a batch's repeated
    tokens, in the first layer), and per real step the state product (none on a sentence's first
    step from the zero state) and the projection."""

    def __init__(self, layers: Iterable[torch.nn.Module], config: BiLMConfig) -> None:
        self.flops = 0.0
        c, p = config.lstm_dim, config.projection_dim
        projection = c * p if config.lstm_projection else 0

        def record(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
            inputs, lengths = args[0], args[1]
            state = args[2] if len(args) > 2 else kwargs.get("state")
            distinct = kwargs.get("distinct")
            steps = int(lengths.sum())
            rows = steps if distinct is None else len(distinct[0])
            state_steps = steps - (len(lengths) if state is None else 0)
            per_direction = rows * inputs.shape[-1] * 4 * c + state_steps * p * 4 * c + steps * projection
            self.flops += 2.0 * inputs.shape[0] * per_direction

        for layer in layers:
            layer.register_forward_pre_hook(record, with_kwargs=True)
