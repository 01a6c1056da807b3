"""Optimiser pieces shared by the training runs: the optimizers a config names, BERT's
parameter groups."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import torch
from torch import nn

from contextvec.choices import checked_choice


class Optimizer(StrEnum):
    """The optimizer of a biLM (``BiLMTrainSettings.optimizer``) or translation run (adam or sgd)."""

    ADAGRAD = "adagrad"
    """Adagrad with initial accumulator 1.0, as bilm-tf."""
    ADAM = "adam"
    SGD = "sgd"


def make_optimizer(kind: Optimizer | str, parameters: Iterable[nn.Parameter],
                   lr: float) -> torch.optim.Optimizer:
    """The torch optimizer ``kind`` (or its spelling) names, over ``parameters`` at learning rate ``lr``."""
    kind = checked_choice(Optimizer, kind, "optimizer")
    if kind is Optimizer.ADAGRAD:
        return torch.optim.Adagrad(parameters, lr=lr, initial_accumulator_value=1.0)
    if kind is Optimizer.ADAM:
        return torch.optim.Adam(parameters, lr=lr)
    return torch.optim.SGD(parameters, lr=lr)


def bert_parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups as in BERT: ``weight_decay`` on weight matrices and embeddings, none on
    biases and LayerNorm weights. Frozen parameters are left out; a tied parameter appears once
    (``named_parameters`` yields it once)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            plain = name.endswith("bias") or "LayerNorm" in name
            (no_decay if plain else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
