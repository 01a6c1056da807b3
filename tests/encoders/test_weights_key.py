"""``weights_key``: the one key of the caches computed from weights (the ELMo token cache, BERT's
fused attention weights, allennlp's token cache)."""

from __future__ import annotations

import torch
from torch import nn

from contextvec.encoders.torch_private import weights_key


def test_the_key_changes_when_a_weight_is_updated_in_place_or_replaced():
    torch.manual_seed(0)
    linear = nn.Linear(3, 2)
    before = weights_key(linear.parameters())
    assert weights_key(linear.parameters()) == before
    with torch.no_grad():
        linear.weight.add_(1.0)  # an optimizer step
    updated = weights_key(linear.parameters())
    assert updated != before
    linear.load_state_dict(nn.Linear(3, 2).state_dict())  # copied in place: a new version
    assert weights_key(linear.parameters()) not in (before, updated)
    linear.weight = nn.Parameter(torch.zeros(2, 3))  # a new tensor: a new address
    assert weights_key(linear.parameters())[0][0] == linear.weight.data_ptr()


def test_inference_tensors_have_a_key():
    with torch.inference_mode():
        linear = nn.Linear(3, 2)  # its weights have no version counter
    key = weights_key(linear.parameters())
    assert key == ((linear.weight.data_ptr(), 0), (linear.bias.data_ptr(), 0))
