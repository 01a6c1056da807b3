"""CoVe's embed_document: the MT-LSTM reads the document's tokens as one sequence, in fixed
blocks, so the result is the same bit for bit whatever pass_tokens is, and a long document
spills to temporary files that are closed however the caller stops."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close

from contextvec.encoders.cove import MTLSTM, CoveEncoder, MTLSTMConfig

WORDS = [f"w{i}" for i in range(40)]
CONFIG = MTLSTMConfig(input_dim=6, hidden_size=4, num_layers=2)
# Products summed on the way to one output: per layer one step's gates (input and state).
TERMS = CONFIG.input_dim + CONFIG.hidden_size + CONFIG.output_dim + CONFIG.hidden_size


@pytest.fixture(scope="module")
def encoder() -> CoveEncoder:
    generator = torch.Generator().manual_seed(0)
    mt_lstm = MTLSTM(CONFIG, WORDS, torch.randn(len(WORDS), CONFIG.input_dim, generator=generator))
    for p in mt_lstm.parameters():
        torch.nn.init.uniform_(p, -0.5, 0.5, generator=generator)
    return CoveEncoder(mt_lstm).eval()


def document(lengths: list[int], seed: int = 0) -> list[list[str]]:
    """Sentences of the given lengths; a few words are out of the vocabulary."""
    rng = np.random.default_rng(seed)
    return [[f"w{k}" for k in rng.integers(0, len(WORDS) + 5, n)] for n in lengths]


LONG = [17, 0, 64, 90, 1, 41, 3, 0, 75, 12]  # 303 tokens: five passes of 64


@pytest.fixture
def opened_files(monkeypatch) -> list:
    """Every temporary file opened while the test runs."""
    files, open_file = [], tempfile.TemporaryFile

    def recording(*args, **kwargs):
        files.append(open_file(*args, **kwargs))
        return files[-1]

    monkeypatch.setattr(tempfile, "TemporaryFile", recording)
    return files


def test_the_same_bits_for_any_pass_length(encoder, opened_files):
    doc = document(LONG)
    one_pass = list(encoder.embed_document(doc, pass_tokens=10**6))
    assert not opened_files  # a document that fits one pass stays in memory
    for pass_tokens in (64, 128):
        spilled = list(encoder.embed_document(doc, pass_tokens=pass_tokens))
        assert [a.shape for a in spilled] == [(3, len(s), 14) for s in doc]
        for got, want in zip(spilled, one_pass, strict=True):
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, want)
    assert len(opened_files) == 2 * CONFIG.num_layers  # the long document spilled every layer
    assert all(f.closed for f in opened_files)


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


def test_a_one_sentence_document_is_the_sentence(encoder):
    sentence = document([23], seed=3)[0]
    (got,) = encoder.embed_document([sentence])
    assert_reordered_close(got, encoder.embed([sentence])[0], terms=TERMS)


def test_empty_sentences_and_an_empty_document(encoder):
    assert list(encoder.embed_document([])) == []
    empties = list(encoder.embed_document([[], []]))
    assert [a.shape for a in empties] == [(3, 0, 14)] * 2
    doc = document([5, 7], seed=4)
    with_empties = list(encoder.embed_document([[], doc[0], [], doc[1], []]))
    assert [a.shape for a in with_empties] == [(3, 0, 14), (3, 5, 14), (3, 0, 14), (3, 7, 14), (3, 0, 14)]
    for got, want in zip(with_empties[1::2], encoder.embed_document(doc), strict=True):
        np.testing.assert_array_equal(got, want)  # an empty sentence changes nothing


def test_stopping_early_closes_the_files(encoder, opened_files):
    sentences = encoder.embed_document(document(LONG), pass_tokens=64)
    assert next(sentences).shape == (3, 17, 14)
    assert opened_files and not any(f.closed for f in opened_files)
    sentences.close()
    assert all(f.closed for f in opened_files)


def test_bad_input_is_refused_at_the_call(encoder):
    with pytest.raises(TypeError, match="a document must be a list of sentences"):
        encoder.embed_document("w1 w2")
    # a sentence that is a string is split on whitespace, as embed splits it
    split = list(encoder.embed_document([["w1"], "w2 w3"]))
    for got, want in zip(split, encoder.embed_document([["w1"], ["w2", "w3"]]), strict=True):
        np.testing.assert_array_equal(got, want)
    for pass_tokens in (0, -64, 1.5, True):
        with pytest.raises(ValueError, match="pass_tokens must be a positive integer"):
            encoder.embed_document([["w1"]], pass_tokens=pass_tokens)
