"""CoVe's embed_document: the MT-LSTM reads the document's tokens as one sequence, in fixed
blocks, and a long document spills to temporary files that are closed however the caller stops.
What every family's documents keep (the same bits whatever ``pass_tokens``, empty sentences, a
lone sentence, bad arguments) is checked in test_encoder_contract.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import write_tiny_cove
from tolerance import assert_reordered_close

import contextvec
from contextvec.encoders.cove import CoveEncoder, MTLSTMConfig

WORDS = [f"w{i}" for i in range(40)]
CONFIG = MTLSTMConfig(input_dim=6, hidden_size=4, num_layers=2)  # write_tiny_cove's
# Products summed on the way to one output: per layer one step's gates (input and state).
TERMS = CONFIG.input_dim + CONFIG.hidden_size + CONFIG.output_dim + CONFIG.hidden_size


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> CoveEncoder:
    encoder = contextvec.load(write_tiny_cove(tmp_path_factory.mktemp("cove-document") / "model", WORDS))
    assert encoder.config == CONFIG
    return encoder


def document(lengths: list[int], seed: int = 0) -> list[list[str]]:
    """Sentences of the given lengths; a few words are out of the vocabulary."""
    rng = np.random.default_rng(seed)
    return [[f"w{k}" for k in rng.integers(0, len(WORDS) + 5, n)] for n in lengths]


LONG = [17, 0, 64, 90, 1, 41, 3, 0, 75, 12]  # 303 tokens: five passes of 64


def test_a_long_document_spills_every_layer_to_files_closed_at_the_end(encoder, temp_files):
    doc = document(LONG)
    list(encoder.embed_document(doc, pass_tokens=10**6))
    assert not temp_files  # a document that fits one pass stays in memory
    for pass_tokens in (64, 128):
        list(encoder.embed_document(doc, pass_tokens=pass_tokens))
    assert len(temp_files) == 2 * CONFIG.num_layers  # the long document spilled every layer
    assert all(f.closed for f in temp_files)


def test_equals_the_mt_lstm_on_the_document_as_one_sentence(encoder):
    doc = document(LONG, seed=1)
    with torch.inference_mode():
        whole = encoder([[t for s in doc for t in s]]).layers[:, 0].numpy()
    cuts = np.cumsum([len(s) for s in doc])[:-1]
    want = np.split(whole, cuts, axis=1)
    got = list(encoder.embed_document(doc, pass_tokens=64))  # any pass_tokens: the same bits
    for g, w in zip(got, want, strict=True):
        assert_reordered_close(g, w, terms=TERMS)


def test_the_last_sentence_is_context_of_the_first(encoder):
    doc = document([6, 9, 5], seed=2)
    changed = [*doc[:-1], ["w1", "w2", "w3", "w4", "w5"]]
    first, first_changed = (next(encoder.embed_document(d)) for d in (doc, changed))
    hidden = CONFIG.hidden_size
    context = slice(CONFIG.input_dim, None)
    np.testing.assert_array_equal(first[0], first_changed[0])  # layer 0: the word alone
    np.testing.assert_array_equal(first[:, :, : CONFIG.input_dim], first_changed[:, :, : CONFIG.input_dim])
    # Layer 1's forward half reads the left context only; its backward half, and all of layer 2,
    # read the end of the document.
    assert_reordered_close(first[1, :, context][:, :hidden], first_changed[1, :, context][:, :hidden],
                           terms=TERMS)
    difference = np.abs(first[1:, :, context] - first_changed[1:, :, context])
    assert difference[0, :, hidden:].max() > 1e-4
    assert difference[1].max() > 1e-4


def test_stopping_early_closes_the_files(encoder, temp_files):
    sentences = encoder.embed_document(document(LONG), pass_tokens=64)
    assert next(sentences).shape == (3, 17, 14)
    assert temp_files and not any(f.closed for f in temp_files)
    sentences.close()
    assert all(f.closed for f in temp_files)


def test_a_sentence_given_as_a_string_is_split_on_whitespace(encoder):
    split = list(encoder.embed_document([["w1"], "w2 w3"]))  # as embed splits it
    for got, want in zip(split, encoder.embed_document([["w1"], ["w2", "w3"]]), strict=True):
        np.testing.assert_array_equal(got, want)
