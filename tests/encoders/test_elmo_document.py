"""``embed_document`` of ELMo and ELMoForManyLangs: one sequence ``<S> s1 </S> <S> s2 </S> ...``,
the LSTM states carried across sentences, spilled passes. What every family's documents keep (the
same bits whatever ``pass_tokens``, empty sentences, a lone sentence, bad arguments) is checked in
test_encoder_contract.py."""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close, elmo_terms

import contextvec
from contextvec.encoders.bilm import PRESETS, ElmoBiLM, ElmoEncoder
from contextvec.encoders.precision import apply_precision

EFML = Path(__file__).resolve().parents[1] / "data" / "efml"
# The explorer's corpus: real sentences, several of them sharing words.
CORPUS = (resources.files("contextvec.data") / "explore_corpus.txt").read_text(encoding="utf-8")
DOCUMENT = [line.split() for line in CORPUS.splitlines()[:30]]
SHORT = DOCUMENT[:12]  # a few blocks of steps, for the tests that need no more


@pytest.fixture(scope="module")
def elmo(own_tiny_dir):
    return contextvec.load(own_tiny_dir)


@pytest.fixture(scope="module")
def elmo_without_skips():
    torch.manual_seed(1)
    bilm = ElmoBiLM(dataclasses.replace(PRESETS["tiny"], use_skip_connections=False))
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0, 0.3)
    return ElmoEncoder(bilm).eval()


def test_short_passes_spill_to_one_file_closed_at_the_end(elmo, temp_files):
    steps = sum(len(s) + 2 for s in DOCUMENT)
    assert 300 <= steps <= 400  # several passes of 64 or 128 steps
    for pass_tokens in (64, 100, 10_000):
        list(elmo.embed_document(DOCUMENT, pass_tokens=pass_tokens))
    # The short passes spilled to a file, now closed; the long one ran in memory.
    assert len(temp_files) == 2 and all(f.closed for f in temp_files)


@pytest.mark.parametrize("skips", [True, False], ids=["skip connections", "none"])
def test_the_document_is_its_layers_run_over_the_whole_sequence_at_once(skips, request):
    """The reference: each LSTM layer in one call over ``<S> s1 </S> <S> s2 </S> ...`` (and the
    same reversed), the token vectors being layer 0's."""
    elmo = request.getfixturevalue("elmo" if skips else "elmo_without_skips")
    assert elmo.skip_connections is skips
    arrays = list(elmo.embed_document(SHORT, pass_tokens=64))
    dim = elmo.output_dim // 2
    with torch.inference_mode():
        start, end = elmo.bilm.boundary_vectors()
        rows = []
        for array in arrays:
            rows += [start[None], torch.from_numpy(array[0, :, :dim]), end[None]]
        sequence = torch.cat(rows)
        x = torch.stack([sequence, sequence.flip(0)]).unsqueeze(1)
        lengths = torch.tensor([len(sequence)])
        expected = []
        for index, layer in enumerate(elmo.bilm.layers):
            out, _ = layer(x, lengths)
            if index > 0 and skips:
                out = out + x
            x = out
            expected.append(torch.cat([out[0, 0], out[1, 0].flip(0)], dim=-1))
    expected = torch.stack(expected)  # (layers, steps, 2 * dim)
    real = torch.cat([torch.arange(1, len(s) + 1) for s in SHORT])
    offsets = torch.tensor([0] + [len(s) + 2 for s in SHORT[:-1]]).cumsum(0)
    real += torch.repeat_interleave(offsets, torch.tensor([len(s) for s in SHORT]))
    got = torch.from_numpy(np.concatenate(arrays, axis=1))
    assert_reordered_close(got[1:], expected[:, real], terms=elmo_terms(elmo.config))


def test_a_sentence_depends_on_those_before_it_forward_and_after_it_backward(elmo):
    first = [s[:12] for s in DOCUMENT[:4]]
    second = [*first[:2], [f"{word}s" for word in first[2]], first[3]]  # sentence 3 changed
    dim = elmo.output_dim // 2
    a = list(elmo.embed_document(first))
    b = list(elmo.embed_document(second))
    for k in (0, 1):
        np.testing.assert_array_equal(a[k][0], b[k][0])
        np.testing.assert_array_equal(a[k][1:, :, :dim], b[k][1:, :, :dim])
        assert not np.array_equal(a[k][1:, :, dim:], b[k][1:, :, dim:])
    np.testing.assert_array_equal(a[3][0], b[3][0])
    np.testing.assert_array_equal(a[3][1:, :, dim:], b[3][1:, :, dim:])
    assert not np.array_equal(a[3][1:, :, :dim], b[3][1:, :, :dim])


def test_the_spill_file_is_gone_when_the_caller_stops_early(elmo, temp_files):
    sentences = elmo.embed_document(SHORT, pass_tokens=64)
    first = next(sentences)
    assert first.shape == (3, len(SHORT[0]), elmo.output_dim)
    assert len(temp_files) == 1 and not temp_files[0].closed
    sentences.close()
    assert temp_files[0].closed


def test_a_document_runs_in_eval_mode_and_train_mode_is_kept(own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    for layer in encoder.bilm.layers:  # dropout that only eval mode turns off
        layer.state_weight_dropout = 0.5
    expected = list(encoder.embed_document(DOCUMENT[:3]))
    encoder.train()
    got = list(encoder.embed_document(DOCUMENT[:3]))
    assert encoder.training and all(m.training for m in encoder.modules())
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_low_precision_documents_are_the_same_whatever_their_passes(own_tiny_dir, precision):
    # Without the CPU check, bf16 runs emulated where the CPU lacks it: the same kernels' shapes.
    encoder = apply_precision(contextvec.load(own_tiny_dir), precision, check_cpu=False)
    spilled = list(encoder.embed_document(SHORT, pass_tokens=64))
    in_memory = list(encoder.embed_document(SHORT, pass_tokens=10_000))
    for a, b in zip(spilled, in_memory, strict=True):
        np.testing.assert_array_equal(a, b)
        assert np.isfinite(a).all()


def test_an_elmoformanylangs_sentence_reads_the_one_before_it():
    encoder = contextvec.load(EFML / "words")
    second = list(encoder.embed_document(SHORT[:2]))[1]
    dim = encoder.output_dim // 2
    # The second sentence's forward half reads the first one.
    assert np.abs(second[1:, :, :dim] - encoder.embed([SHORT[1]])[0][1:, :, :dim]).max() > 1e-3


def test_a_forward_only_lm_is_refused_at_the_call():
    from contextvec.encoders.bilm import ElmoBiLM, ElmoEncoder
    from contextvec.encoders.bilm.config import PRESETS

    forward_only = ElmoEncoder(ElmoBiLM(dataclasses.replace(PRESETS["tiny"], bidirectional=False)))
    with pytest.raises(ValueError, match="forward-only LM has no ELMo representations"):
        forward_only.embed_document([["a", "b"]])
