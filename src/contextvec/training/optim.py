"""Optimiser pieces shared by BERT pretraining and fine-tuning."""

from __future__ import annotations

from torch import nn


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
