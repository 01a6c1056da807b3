"""ContextualEmbedder: k trainable scalar mixes over a frozen ELMo encoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_io import reference_dir, reference_expected, reference_sentences
from tolerance import FP32_EPS, assert_reordered_close, elmo_terms

import contextvec
from contextvec.embedder import ContextualEmbedder, EmbedderOutput, ScalarMix

INDICES = [0, 2, 3, 5, 9, 12]  # lengths 1..16, unsorted on purpose


@pytest.fixture
def encoder():
    torch.manual_seed(0)
    return contextvec.load(reference_dir("elmo-tiny"))


def _batch(indices=INDICES) -> list[list[str]]:
    sentences = reference_sentences("elmo-tiny")
    return [list(sentences[i]) for i in indices]


def test_output_shapes_and_mask(encoder):
    torch.manual_seed(0)
    embedder = ContextualEmbedder(encoder, num_mixes=3)
    batch = _batch()
    out = embedder(batch)
    assert isinstance(out, EmbedderOutput)
    lengths = [len(s) for s in batch]
    assert len(out.mixes) == 3
    for mix in out.mixes:
        assert mix.shape == (len(batch), max(lengths), 32)
        assert mix.dtype == torch.float32
    assert out.mask.dtype == torch.bool
    want_mask = torch.arange(max(lengths)).view(1, -1) < torch.tensor(lengths).view(-1, 1)
    assert torch.equal(out.mask, want_mask)
    assert embedder.output_dim == 32
    assert len(embedder.mixes) == 3 and all(isinstance(m, ScalarMix) for m in embedder.mixes)


def test_default_mix_matches_reference(encoder):
    embedder = ContextualEmbedder(encoder, num_mixes=2).eval()
    expected = reference_expected("elmo-tiny")
    batch = _batch()
    out = embedder(batch)
    for row, i in enumerate(INDICES):
        n = len(batch[row])
        for mix in out.mixes:
            got = mix[row, :n].detach().numpy()
            np.testing.assert_allclose(got, expected[f"elmo_{i:03d}"], atol=1e-4, rtol=1e-4)
            assert not mix[row, n:].any()


def test_strings_are_split_on_whitespace(encoder):
    embedder = ContextualEmbedder(encoder).eval()
    a = embedder(["The rain stopped .", "Hello"]).mixes[0]
    b = embedder([["The", "rain", "stopped", "."], ["Hello"]]).mixes[0]
    assert torch.equal(a, b)


@pytest.mark.parametrize("bare", ["a b", b"a b"], ids=["str", "bytes"])
def test_a_bare_string_is_refused_as_by_embed(own_tiny_dir, bare):
    """Iterating "a b" would give three one-character "sentences" (one of them empty)."""
    encoder = contextvec.load(own_tiny_dir)
    for call in (ContextualEmbedder(encoder), encoder.embed):
        with pytest.raises(TypeError, match=r"must be a list of sentences, not a single .*pass \["):
            call(bare)


def test_encoder_is_frozen_and_mixes_learn(encoder):
    torch.manual_seed(0)
    embedder = ContextualEmbedder(encoder, num_mixes=2).train()
    assert all(not p.requires_grad for p in embedder.encoder.parameters())
    trainable = {n for n, p in embedder.named_parameters() if p.requires_grad}
    assert trainable == {"mixes.0.weights", "mixes.0.gamma", "mixes.1.weights", "mixes.1.gamma"}

    before_encoder = {k: v.clone() for k, v in embedder.encoder.state_dict().items()}
    before_mixes = {k: v.clone() for k, v in embedder.mixes.state_dict().items()}
    # all parameters, frozen ones included, are handed to the optimizer
    optimizer = torch.optim.SGD(embedder.parameters(), lr=1e-3)
    batch = _batch()
    out = embedder(batch)
    targets = [torch.randn_like(m) for m in out.mixes]
    loss = sum(((m - t) ** 2 * out.mask.unsqueeze(-1)).sum() for m, t in zip(out.mixes, targets,
                                                                           strict=True))
    loss = loss + embedder.l2_penalty(0.01)
    optimizer.zero_grad()
    loss.backward()
    assert all(p.grad is None for p in embedder.encoder.parameters())
    optimizer.step()

    for key, value in embedder.encoder.state_dict().items():
        assert torch.equal(value, before_encoder[key]), key
    for key, value in embedder.mixes.state_dict().items():
        assert not torch.equal(value, before_mixes[key]), f"{key} did not change"
    # the step lowered the loss
    out2 = embedder(batch)
    loss2 = sum(((m - t) ** 2 * out2.mask.unsqueeze(-1)).sum() for m, t in zip(out2.mixes,
                                                                             targets, strict=True))
    assert loss2.item() < (loss - embedder.l2_penalty(0.01)).item() + 1e-3


def test_encoder_stays_in_eval_mode(encoder):
    embedder = ContextualEmbedder(encoder, dropout=0.3)
    for mode in (True, False, True):
        returned = embedder.train(mode)
        assert returned is embedder
        assert embedder.training is mode
        assert embedder.dropout.training is mode
        assert all(m.training is mode for m in embedder.mixes)
        assert not any(m.training for m in embedder.encoder.modules())
    embedder.train()
    assert not embedder.encoder.training


def test_dropout_in_train_not_in_eval(encoder):
    torch.manual_seed(0)
    embedder = ContextualEmbedder(encoder, dropout=0.5)
    batch = _batch()
    clean = ContextualEmbedder(encoder)(batch).mixes[0].detach()

    embedder.eval()
    e1 = embedder(batch).mixes[0].detach()
    e2 = embedder(batch).mixes[0].detach()
    assert torch.equal(e1, clean)
    assert torch.equal(e2, clean)

    embedder.train()
    t1 = embedder(batch)
    t2 = embedder(batch)
    a, b = t1.mixes[0].detach(), t2.mixes[0].detach()
    real = t1.mask.unsqueeze(-1).expand_as(a) & (clean != 0)
    dropped = (a == 0) & real
    frac = dropped.sum().item() / real.sum().item()
    assert 0.4 < frac < 0.6
    kept = (a != 0) & real
    torch.testing.assert_close(a[kept], 2 * clean[kept])  # inverted dropout scaling 1/(1-p)
    assert not torch.equal(a, b), "dropout masks should differ between calls"


def test_each_mix_has_its_own_dropout_mask(encoder):
    torch.manual_seed(1)
    embedder = ContextualEmbedder(encoder, num_mixes=2, dropout=0.5).train()
    out = embedder(_batch())
    assert not torch.equal(out.mixes[0] == 0, out.mixes[1] == 0)


def test_sentence_independent_of_batch(encoder):
    embedder = ContextualEmbedder(encoder, num_mixes=2).eval()
    with torch.no_grad():
        for mix, w in zip(embedder.mixes, ([1.0, -0.5, 0.3], [-1.0, 2.0, 0.0]), strict=True):
            mix.weights.copy_(torch.tensor(w))
            mix.gamma.fill_(1.5)
    sentences = reference_sentences("elmo-tiny")
    target = list(sentences[9])  # 16 tokens
    others = [[list(sentences[0])], [list(sentences[62]), list(sentences[1])],
              [list(sentences[i]) for i in (40, 3, 50, 7)]]
    alone = embedder([target])
    # Other batches give the kernels other row counts: the same sums in other orders, then the
    # mix's three layers.
    terms = elmo_terms(encoder.config) + 3
    for companions in others:
        for position in (0, len(companions)):
            batch = companions[:position] + [target] + companions[position:]
            together = embedder(batch)
            for m_alone, m_together in zip(alone.mixes, together.mixes, strict=True):
                got = m_together[position, : len(target)]
                assert_reordered_close(got, m_alone[0], terms=terms)
                assert not m_together[position, len(target) :].any()


def test_l2_penalty_sums_over_mixes(encoder):
    embedder = ContextualEmbedder(encoder, num_mixes=3)
    with torch.no_grad():
        embedder.mixes[0].weights.copy_(torch.tensor([1.0, 0.0, 0.0]))
        embedder.mixes[1].weights.copy_(torch.tensor([0.0, 2.0, 0.0]))
        embedder.mixes[2].weights.copy_(torch.tensor([0.0, 1.0, -3.0]))
    penalty = embedder.l2_penalty(0.5)
    assert penalty.item() == pytest.approx(0.5 * (1 + 4 + 10))
    penalty.backward()
    torch.testing.assert_close(embedder.mixes[2].weights.grad, torch.tensor([0.0, 1.0, -3.0]))
    assert ContextualEmbedder(encoder, num_mixes=2).l2_penalty(1.0).item() == 0.0


def test_layer_norm_option(encoder):
    embedder = ContextualEmbedder(encoder, layer_norm=True).eval()
    assert embedder.mixes[0].layer_norm
    out = embedder(_batch())
    mix = out.mixes[0].detach()
    assert not mix[~out.mask].any()
    # equal layer weights over per-layer standardized values: the mean of three unit-variance
    # layers; each layer has mean 0 over the real positions, so the mix does as well, up to the
    # rounding of float32 sums over all of them (the statistics' and this mean's)
    real = mix[out.mask]
    assert abs(real.mean().item()) < 2 * real.numel() * FP32_EPS * real.abs().max().item()


def test_empty_sentence_in_batch(encoder):
    embedder = ContextualEmbedder(encoder).eval()
    out = embedder([["The", "cat"], [], ["Hi"]])
    assert out.mixes[0].shape == (3, 2, 32)
    assert out.mask.tolist() == [[True, True], [False, False], [True, False]]
    assert not out.mixes[0][1].any()
    alone = embedder([["The", "cat"]]).mixes[0]
    assert_reordered_close(out.mixes[0][0], alone[0], terms=elmo_terms(encoder.config) + 3)


def test_empty_batch(encoder):
    out = ContextualEmbedder(encoder)([])
    assert out.mixes[0].shape == (0, 0, 32)
    assert out.mask.shape == (0, 0)
