"""BERT sentence vectors as sentence-transformers' Pooling makes them, mode by mode."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import contextvec
from contextvec.encoders.bert.sentence import BertSentenceEncoder
from contextvec.io.sentence_transformers import POOLING_MODES, SentencePooling

SENTENCES = [["The", "bank", "was", "robbed", "."], ["Unbelievably", ",", "tokenization", "works"], ["x"]]


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    torch.set_num_threads(1)
    return contextvec.load(minilm_dir)


def top_layer(encoder, ids: list[int]) -> np.ndarray:
    """HF's padded interface on one row alone: the top layer of every piece, [CLS] and [SEP] too."""
    with torch.inference_mode():
        return encoder.model(torch.tensor([ids])).hidden_states[-1][0].double().numpy()


def pooled(states: np.ndarray, mode: str) -> np.ndarray:
    """sentence-transformers' Pooling.forward for one unpadded row."""
    n = len(states)
    if mode == "cls_token":
        return states[0]
    if mode == "max_tokens":
        return states.max(axis=0)
    if mode == "mean_tokens":
        return states.sum(axis=0) / n
    if mode == "mean_sqrt_len_tokens":
        return states.sum(axis=0) / np.sqrt(n)
    if mode == "weightedmean_tokens":
        weights = np.arange(1, n + 1)[:, None]
        return (states * weights).sum(axis=0) / weights.sum()
    return states[-1]


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_each_mode_pools_every_piece_as_sentence_transformers_does(minilm, mode):
    encoder = BertSentenceEncoder(minilm, SentencePooling(modes=(mode,)))
    rows = encoder.pieces(SENTENCES)
    assert all(row[0] == minilm.tokenizer.cls_id and row[-1] == minilm.tokenizer.sep_id for row in rows)
    for row, got in zip(rows, encoder.embed_pieces(rows), strict=True):
        want = pooled(top_layer(minilm, row), mode)
        # Packed rows against one padded row: float32 rounding (eps 1.2e-7) of activations of
        # magnitude up to about 6 through 6 layers; the reference's own alone-vs-batched
        # difference (meta.json) is of the same order.
        np.testing.assert_allclose(got, want, atol=3e-5, rtol=0)


def test_modes_concatenate_in_order_and_normalise(minilm):
    encoder = BertSentenceEncoder(minilm, SentencePooling(modes=("cls_token", "mean_tokens"), normalize=True))
    assert encoder.output_dim == 2 * 384
    [row] = encoder.pieces(SENTENCES[:1])
    [got] = encoder.embed_pieces([row])
    states = top_layer(minilm, row)
    want = np.concatenate([states[0], states.mean(axis=0)])
    np.testing.assert_allclose(got, want / np.linalg.norm(want), atol=1e-6, rtol=0)


def test_the_piece_limit(minilm):
    short = BertSentenceEncoder(minilm, SentencePooling(max_seq_length=6))
    assert short.max_pieces == 6
    assert BertSentenceEncoder(minilm, SentencePooling(max_seq_length=4096)).max_pieces == 512
    with pytest.raises(ValueError, match="7 word pieces, over this model's limit of 6"):
        short.embed_pieces(short.pieces([["a"] * 5]))


def test_do_lower_case_lowers_the_words_before_the_tokenizer(minilm):
    seen = []

    class Recorder:
        def encode_batch(self, sentences):
            seen.extend(sentences)
            return []

    stub = SimpleNamespace(config=minilm.config, output_dim=384, tokenizer=Recorder())
    BertSentenceEncoder(stub, SentencePooling(lowercase=True)).pieces([["The", "BANK"]])
    BertSentenceEncoder(stub, SentencePooling()).pieces([["The", "BANK"]])
    assert seen == [["the", "bank"], ["The", "BANK"]]


def test_a_vector_without_length_is_never_returned_unnormalised():
    # A model whose top layer is all zeros: Normalize has nothing to scale, and says so.
    embeddings = SimpleNamespace(word_embeddings=SimpleNamespace(weight=torch.zeros(1)))
    model = SimpleNamespace(embeddings=embeddings,
                            forward_unpadded=lambda ids, lengths: [torch.zeros(len(ids), 4)])
    stub = SimpleNamespace(model=model, config=SimpleNamespace(max_position_embeddings=8), output_dim=4)
    with pytest.raises(ValueError, match="zero length: it cannot be normalised"):
        BertSentenceEncoder(stub, SentencePooling(normalize=True)).embed_pieces([[1, 5, 2]])
    [vector] = BertSentenceEncoder(stub, SentencePooling()).embed_pieces([[1, 5, 2]])
    assert not vector.any()   # without Normalize, the mean of zeros is zeros
