"""``embed`` runs in eval mode and leaves every module's mode as it found it."""

from __future__ import annotations

import numpy as np

import contextvec
from contextvec.encoders.bilm import ProjectedLSTMLayer

SENTENCES = [["the", "bank", "was", "robbed", "."], ["we", "sat"]]


def test_embed_runs_in_eval_mode_and_restores_each_module(own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    for layer in encoder.modules():
        if isinstance(layer, ProjectedLSTMLayer):
            layer.state_weight_dropout = 0.5  # would change every output in train mode
    expected = encoder.embed(SENTENCES)
    assert not any(m.training for m in encoder.modules())  # an eval encoder stays so

    encoder.train()
    kept_in_eval = next(m for m in encoder.modules() if m is not encoder)
    kept_in_eval.eval()
    modes = {m: m.training for m in encoder.modules()}
    got = encoder.embed(SENTENCES)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b)  # no dropout: eval mode while embedding
    assert {m: m.training for m in encoder.modules()} == modes
    assert encoder.training and not kept_in_eval.training
