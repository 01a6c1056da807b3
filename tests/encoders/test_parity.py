"""contextvec vs allennlp's own ELMo outputs (reference/README.md) for the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_io import expected_rows
from tolerance import assert_reordered_close, elmo_terms

import contextvec
from contextvec.embedder import ScalarMix
from contextvec.encoders.bilm import ElmoEncoder
from contextvec.text.chars import batch_to_char_ids

ATOL = 1e-4  # the parity goal against allennlp (float32; its own alone-vs-batched spread is below)


def _sentences(path) -> list[list[str]]:
    return [line.split() for line in (path / "sentences.txt").read_text("utf-8").splitlines()]


@pytest.mark.parametrize("name", ["tiny_dir", "small_dir"])
def test_layers_and_mix_match_allennlp(name, request):
    path = request.getfixturevalue(name)
    expected = np.load(path / "expected.npz")
    sentences = _sentences(path)
    encoder = contextvec.load(path)
    vectors = encoder.embed(sentences, batch_size=32)
    assert len(vectors) == len(sentences) == 64
    mix = ScalarMix(3, initial_weights=expected["scalar_mix_weights"] * 0,
                    initial_gamma=float(expected["scalar_mix_gamma"]))
    rows = expected_rows(expected)
    for i, tokens in enumerate(sentences):
        np.testing.assert_array_equal(
            batch_to_char_ids([tokens])[0].numpy(), expected[f"char_ids_{i:03d}"]
        )
        if i not in rows:
            continue
        np.testing.assert_allclose(vectors[i], expected[f"activations_{i:03d}"], atol=ATOL, rtol=ATOL)
        mixed = mix(torch.from_numpy(vectors[i])[:, None], torch.ones(1, len(tokens), dtype=torch.bool))
        np.testing.assert_allclose(mixed[0].detach().numpy(), expected[f"elmo_{i:03d}"], atol=ATOL)


def test_boundary_rows_match_allennlp(tiny_dir):
    expected = np.load(tiny_dir / "expected.npz")
    encoder = contextvec.load(tiny_dir)
    assert isinstance(encoder, ElmoEncoder)
    sentences = _sentences(tiny_dir)
    with torch.no_grad():
        out = encoder.bilm(batch_to_char_ids(sentences))
        kept = encoder.bilm.contextualize(
            *_tokens_and_mask(encoder, sentences), keep_boundaries=True
        )
    rows = expected_rows(expected)
    for i, tokens in enumerate(sentences):
        n = len(tokens)
        assert not out.layers[:, i, n:].any()
        if i not in rows:
            continue
        boundaries = kept.layers[:, i, [0, n + 1]].numpy()
        np.testing.assert_allclose(boundaries, expected[f"boundaries_{i:03d}"], atol=ATOL)
        np.testing.assert_allclose(out.layers[:, i, :n].numpy(), expected[f"activations_{i:03d}"],
                                   atol=ATOL)


def _tokens_and_mask(encoder: ElmoEncoder, sentences):
    ids = batch_to_char_ids(sentences)
    mask = (ids > 0).any(-1)
    tokens = torch.zeros(*mask.shape, encoder.config.projection_dim)
    tokens[mask] = encoder.bilm.token_encoder(ids[mask])
    return tokens, mask


def test_token_cache_is_invalidated_by_weight_changes(tiny_dir):
    encoder = contextvec.load(tiny_dir)
    before = encoder.embed(["the cat sat"])[0]
    with torch.no_grad():
        encoder.bilm.token_encoder.projection.bias.add_(1.0)
    after = encoder.embed(["the cat sat"])[0]
    assert np.abs(after[0] - before[0]).min() > 0.5
    fresh = ElmoEncoder(encoder.bilm, token_cache_size=0).embed(["the cat sat"])[0]
    # (The char-CNN may run on other row counts with and without the cache: other sum orders.)
    terms = elmo_terms(encoder.config)
    assert_reordered_close(after, fresh, terms=terms)
    # The cached <S> / </S> vectors follow too (a change to the char embeddings moves them).
    with torch.no_grad():
        encoder.bilm.token_encoder.char_embedding.weight.mul_(0.5)
    fresh = ElmoEncoder(encoder.bilm, token_cache_size=0).embed(["the cat sat"])[0]
    assert_reordered_close(encoder.embed(["the cat sat"])[0], fresh, terms=terms)


def test_forward_with_gradients_matches_inference(tiny_dir):
    encoder = contextvec.load(tiny_dir)
    sentences = _sentences(tiny_dir)[:8]
    layers, mask = encoder(sentences)
    layers.sum().backward()
    grad = encoder.bilm.layers[0].state_weight.grad
    assert grad is not None and grad.abs().sum() > 0
    expected = np.load(tiny_dir / "expected.npz")
    for i in set(expected_rows(expected)) & set(range(len(sentences))):
        np.testing.assert_allclose(layers[:, i, : len(sentences[i])].detach().numpy(),
                                   expected[f"activations_{i:03d}"], atol=ATOL)
    assert mask.sum().item() == sum(map(len, sentences))
