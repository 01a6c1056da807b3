"""contextvec.allennlp: allennlp users' ELMo code, with only the import changed, on allennlp's outputs.

The code in these tests is written as allennlp's documentation writes it (``Elmo`` +
``batch_to_ids``; allennlp 0.9's ``ElmoEmbedder``); the expected values are allennlp 2.10.1's own
outputs for the same weights (../shared/data/reference, see its README).
"""

from __future__ import annotations

import io
import json

import h5py
import numpy as np
import pytest
import torch
from helpers_io import expected_rows
from tolerance import assert_reordered_close, elmo_terms

from contextvec.allennlp import Elmo, ElmoEmbedder, batch_to_ids
from contextvec.encoders.bilm.config import PRESETS

# The drop-in's parity goals against allennlp's recorded outputs (float32; values up to about 5):
TIGHT = 1e-5  # elmo-tiny: allennlp's own alone-vs-batched spread is 2.5e-6
SMALL = 5e-5  # elmo-small: allennlp's own alone-vs-batched spread is 1.3e-5 (README)
# Two of our own evaluations in other batches: the same sums in other orders, then the mix.
TINY_TERMS = elmo_terms(PRESETS["tiny"]) + 3  # elmo-tiny has the tiny preset's dimensions


def _files(path):
    return str(path / "options.json"), str(path / "weights.hdf5")


def _sentences(path) -> list[list[str]]:
    return [line.split() for line in (path / "sentences.txt").read_text("utf-8").splitlines()]


@pytest.mark.parametrize(("name", "atol"), [("tiny_dir", TIGHT), ("small_dir", SMALL)])
def test_elmo_matches_allennlp(name, atol, request):
    path = request.getfixturevalue(name)
    expected = np.load(path / "expected.npz")
    rows = expected_rows(expected)
    sentences = _sentences(path)
    options_file, weight_file = _files(path)

    # allennlp's documented usage, import changed.
    elmo = Elmo(options_file, weight_file, 2, dropout=0)
    for start in range(0, len(sentences), 32):
        batch = sentences[start : start + 32]
        character_ids = batch_to_ids(batch)
        embeddings = elmo(character_ids)

        longest = max(map(len, batch))
        assert character_ids.shape == (len(batch), longest, 50)
        assert len(embeddings["elmo_representations"]) == 2
        mask = embeddings["mask"]
        assert mask.shape == (len(batch), longest) and mask.dtype == torch.bool
        for row, tokens in enumerate(batch):
            i, n = start + row, len(tokens)
            np.testing.assert_array_equal(character_ids[row, :n].numpy(), expected[f"char_ids_{i:03d}"])
            assert not character_ids[row, n:].any()
            assert mask[row, :n].all() and not mask[row, n:].any()
            for representation in embeddings["elmo_representations"]:
                assert representation.shape == (len(batch), longest, elmo.get_output_dim())
                if i in rows:
                    np.testing.assert_allclose(representation[row, :n].detach().numpy(),
                                               expected[f"elmo_{i:03d}"], atol=atol, rtol=0)
                assert not representation[row, n:].any()


def test_elmo_embedder_gives_allennlps_raw_layers(tiny_dir):
    expected = np.load(tiny_dir / "expected.npz")
    sentences = _sentences(tiny_dir)
    elmo = ElmoEmbedder(*_files(tiny_dir))

    rows = expected_rows(expected)
    for i, vectors in enumerate(elmo.embed_sentences(sentences, batch_size=16)):
        assert vectors.dtype == np.float32 and vectors.shape == (3, len(sentences[i]), 32)
        if i in rows:
            np.testing.assert_allclose(vectors, expected[f"activations_{i:03d}"], atol=TIGHT, rtol=0)
    one = elmo.embed_sentence(sentences[5])
    np.testing.assert_allclose(one, expected["activations_005"], atol=TIGHT, rtol=0)
    # allennlp#2260: Elmo() is the scalar mix of these layers (equal weights, gamma 1 here).
    np.testing.assert_allclose(one.mean(axis=0), expected["elmo_005"], atol=TIGHT, rtol=0)

    activations, mask = elmo.batch_to_embeddings(sentences[:4])
    assert activations.shape == (4, 3, max(map(len, sentences[:4])), elmo.encoder.output_dim)
    assert mask.dtype == torch.long and mask.sum(1).tolist() == [len(s) for s in sentences[:4]]
    np.testing.assert_allclose(activations[2, :, : len(sentences[2])].numpy(),
                               expected["activations_002"], atol=TIGHT, rtol=0)
    assert elmo.embed_batch([[]])[0].shape == (3, 0, elmo.encoder.output_dim)


def test_stateless_same_sentence_same_vectors(tiny_dir):
    # allennlp carried LSTM states across calls (allennlp#2516): here a sentence's vectors are a
    # function of the sentence, equal to allennlp's after reset_states().
    sentences = _sentences(tiny_dir)
    elmo = Elmo(*_files(tiny_dir), 1, dropout=0)
    first = elmo(batch_to_ids(sentences[:3]))["elmo_representations"][0]
    elmo(batch_to_ids(sentences[10:40]))
    again = elmo(batch_to_ids(sentences[:3]))["elmo_representations"][0]
    # (The token cache now holds some of these tokens: the char-CNN runs on fewer rows.)
    assert_reordered_close(first, again, terms=TINY_TERMS)


def test_keep_sentence_boundaries(tiny_dir):
    expected = np.load(tiny_dir / "expected.npz")
    sentences = _sentences(tiny_dir)[:5]
    elmo = Elmo(*_files(tiny_dir), 1, dropout=0, keep_sentence_boundaries=True)
    out = elmo(batch_to_ids(sentences))
    rep, mask = out["elmo_representations"][0], out["mask"]
    assert rep.shape[1] == mask.shape[1] == max(map(len, sentences)) + 2
    for i, tokens in enumerate(sentences):
        n = len(tokens)
        assert mask[i].sum() == n + 2
        got = rep[i].detach().numpy()
        np.testing.assert_allclose(got[1 : n + 1], expected[f"elmo_{i:03d}"], atol=TIGHT, rtol=0)
        bounds = expected[f"boundaries_{i:03d}"].mean(axis=0)  # <S>, </S> under equal weights
        np.testing.assert_allclose(got[[0, n + 1]], bounds, atol=TIGHT, rtol=0)


def test_literal_boundary_tokens_are_the_sentence_boundaries(tiny_dir):
    # allennlp's batch_to_ids gives a token that is exactly <S> / </S> the boundary rows, so its
    # context-free layer is allennlp's own <S> / </S> row of any sentence.
    ids = batch_to_ids([["<S>", "and", "</S>"]])[0].tolist()
    assert ids[0] == [259, 257, 260] + [261] * 47 and ids[2] == [259, 258, 260] + [261] * 47
    assert ids[1][:5] == [259, ord("a") + 1, ord("n") + 1, ord("d") + 1, 260]
    boundaries = np.load(tiny_dir / "expected.npz")["boundaries_000"]  # (layers, <S> </S>, dim)
    layers = ElmoEmbedder(*_files(tiny_dir)).embed_sentence(["<S>", "and", "</S>", "are", "markers"])
    np.testing.assert_allclose(layers[0, [0, 2]], boundaries[0], atol=TIGHT, rtol=0)


def test_layer_norm_statistics_include_the_boundaries(tiny_dir):
    # allennlp normalises each layer over every unmasked position of the batch, <S> and </S>
    # included (the mix runs before they are removed); recomputed here from its raw layers.
    expected = np.load(tiny_dir / "expected.npz")
    sentences = _sentences(tiny_dir)[:6]
    elmo = Elmo(*_files(tiny_dir), 1, dropout=0, do_layer_norm=True)
    rep = elmo(batch_to_ids(sentences))["elmo_representations"][0].detach().numpy()
    full = [np.concatenate([expected[f"boundaries_{i:03d}"][:, :1], expected[f"activations_{i:03d}"],
                            expected[f"boundaries_{i:03d}"][:, 1:]], axis=1) for i in range(6)]
    values = np.concatenate(full, axis=1).astype(np.float64)  # (3, all positions, dim)
    mean = values.mean(axis=(1, 2), keepdims=True)
    std = np.sqrt(((values - mean) ** 2).mean(axis=(1, 2), keepdims=True))
    for i, tokens in enumerate(sentences):
        want = ((full[i] - mean) / std).mean(axis=0)[1:-1]
        np.testing.assert_allclose(rep[i, : len(tokens)], want, atol=2e-5, rtol=0)


def test_fixed_scalar_mix_selects_one_layer(tiny_dir):
    # allennlp's documented way to take one layer: very negative weights for the others.
    expected = np.load(tiny_dir / "expected.npz")
    sentences = _sentences(tiny_dir)[:4]
    elmo = Elmo(*_files(tiny_dir), 1, dropout=0, scalar_mix_parameters=[-9e10, 1, -9e10])
    assert not any(p.requires_grad for p in elmo.parameters())
    rep = elmo(batch_to_ids(sentences))["elmo_representations"][0]
    for i, tokens in enumerate(sentences):
        np.testing.assert_allclose(rep[i, : len(tokens)].numpy(), expected[f"activations_{i:03d}"][1],
                                   atol=TIGHT, rtol=0)


class Tagger(torch.nn.Module):
    """A task model with ELMo inside, as allennlp users build one."""

    def __init__(self, options_file, weight_file, requires_grad=False):
        super().__init__()
        self.elmo = Elmo(options_file, weight_file, 1, requires_grad=requires_grad, dropout=0.5)
        self.out = torch.nn.Linear(self.elmo.get_output_dim(), 3)

    def forward(self, character_ids):
        elmo_out = self.elmo(character_ids)
        return self.out(elmo_out["elmo_representations"][0]), elmo_out["mask"]


def _train_step(model, sentences):
    model.train()
    logits, mask = model(batch_to_ids(sentences))
    labels = torch.zeros(mask.shape, dtype=torch.long)
    loss = torch.nn.functional.cross_entropy(logits[mask], labels[mask])
    loss.backward()


def test_gradients_reach_the_scalar_mix_not_a_frozen_bilm(tiny_dir):
    model = Tagger(*_files(tiny_dir))
    _train_step(model, _sentences(tiny_dir)[:6])
    mix = model.elmo.scalar_mix_0
    assert mix.weights.grad is not None and mix.weights.grad.abs().sum() > 0
    assert mix.gamma.grad is not None and mix.gamma.grad.abs().sum() > 0
    bilm = model.elmo._elmo_lstm.bilm
    assert all(not p.requires_grad and p.grad is None for p in bilm.parameters())


def test_requires_grad_fine_tunes_the_bilm(tiny_dir):
    model = Tagger(*_files(tiny_dir), requires_grad=True)
    _train_step(model, _sentences(tiny_dir)[:6])
    bilm = model.elmo._elmo_lstm.bilm
    for parameter in (bilm.token_encoder.char_embedding.weight, bilm.token_encoder.convolutions[0].weight,
                      bilm.layers[0].input_weight, bilm.layers[1].state_weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0
    assert model.elmo.scalar_mix_0.weights.grad.abs().sum() > 0


def test_dropout_in_train_mode_only(tiny_dir):
    elmo = Elmo(*_files(tiny_dir), 1)  # allennlp's default dropout 0.5
    ids = batch_to_ids(_sentences(tiny_dir)[:3])
    elmo.train()
    a, b = (elmo(ids)["elmo_representations"][0] for _ in range(2))
    assert not torch.equal(a, b)
    elmo.eval()
    c, d = (elmo(ids)["elmo_representations"][0] for _ in range(2))
    assert torch.equal(c, d)


def test_cached_vocabulary_and_word_ids(tiny_dir):
    sentences = [["The", "cat", "sat"], ["A", "dog"]]
    vocab = ["@@PADDING@@", "@@UNKNOWN@@", "The", "cat", "sat", "A", "dog"]
    word_ids = torch.tensor([[2, 3, 4], [5, 6, 0]])
    plain = Elmo(*_files(tiny_dir), 1, dropout=0)
    cached = Elmo(*_files(tiny_dir), 1, dropout=0, vocab_to_cache=vocab)
    ids = batch_to_ids(sentences)
    want = plain(ids)["elmo_representations"][0]
    got = cached(ids, word_ids)
    # The cached vocabulary's vectors were computed in another batch.
    assert_reordered_close(got["elmo_representations"][0], want, terms=TINY_TERMS)
    assert got["mask"].tolist() == [[True] * 3, [True, True, False]]
    # An id outside the cached vocabulary falls back to the characters, as in allennlp.
    out_of_vocab = cached(ids, torch.tensor([[2, 3, 99], [5, 6, 0]]))["elmo_representations"][0]
    assert_reordered_close(out_of_vocab, want, terms=TINY_TERMS)


def test_extra_leading_dimensions(tiny_dir):
    elmo = Elmo(*_files(tiny_dir), 1, dropout=0)
    sentences = _sentences(tiny_dir)[:4]
    ids = batch_to_ids(sentences)
    flat = elmo(ids)
    nested = elmo(ids.view(2, 2, *ids.shape[1:]))
    assert nested["mask"].shape == (2, 2, ids.shape[1])
    assert_reordered_close(nested["elmo_representations"][0].reshape(4, ids.shape[1], -1),
                           flat["elmo_representations"][0], terms=TINY_TERMS)


def test_embed_file_writes_the_elmo_commands_layout(tiny_dir, tmp_path):
    expected = np.load(tiny_dir / "expected.npz")
    sentences = (tiny_dir / "sentences.txt").read_text("utf-8").splitlines()[:5]
    text = tmp_path / "in.txt"
    text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    elmo = ElmoEmbedder(*_files(tiny_dir))

    handle = open(text, encoding="utf-8")  # noqa: SIM115 - allennlp's command passed an open file
    elmo.embed_file(handle, str(tmp_path / "all.hdf5"))
    assert handle.closed
    with h5py.File(tmp_path / "all.hdf5", "r") as f:
        assert sorted(f) == ["0", "1", "2", "3", "4", "sentence_to_index"]
        np.testing.assert_allclose(f["3"][...], expected["activations_003"], atol=TIGHT, rtol=0)
        index = json.loads(f["sentence_to_index"][0])
        assert index[sentences[3].strip()] == "3"

    elmo.embed_file(io.StringIO("\n".join(sentences)), str(tmp_path / "stream.hdf5"))  # no file behind it
    with h5py.File(tmp_path / "stream.hdf5", "r") as f:
        np.testing.assert_allclose(f["4"][...], expected["activations_004"], atol=TIGHT, rtol=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.hdf5", "in.txt", "stream.hdf5"]

    elmo.embed_file(str(text), tmp_path / "top.hdf5", output_format="top", forget_sentences=True)
    elmo.embed_file(str(text), tmp_path / "avg.hdf5", output_format="average", use_sentence_keys=True)
    with h5py.File(tmp_path / "top.hdf5", "r") as top, h5py.File(tmp_path / "avg.hdf5", "r") as avg:
        assert "sentence_to_index" not in top and "sentence_to_index" not in avg
        np.testing.assert_allclose(top["1"][...], expected["activations_001"][-1], atol=TIGHT, rtol=0)
        np.testing.assert_allclose(avg[sentences[1].strip()][...], expected["activations_001"].mean(0),
                                   atol=TIGHT, rtol=0)


def test_contextvec_model_names_and_directories(tiny_dir):
    by_dir = Elmo(str(tiny_dir), None, 1, dropout=0)
    by_files = Elmo(*_files(tiny_dir), 1, dropout=0)
    ids = batch_to_ids([["a", "test"]])
    torch.testing.assert_close(by_dir(ids)["elmo_representations"][0],
                               by_files(ids)["elmo_representations"][0])
    bundled = ElmoEmbedder()  # allennlp downloaded its "original" model here
    vectors = bundled.embed_sentence(["I", "ate", "an", "apple", "."])
    assert vectors.shape == (3, 5, bundled.encoder.output_dim)


def test_bad_input_gets_a_clear_error(tiny_dir):
    with pytest.raises(TypeError, match="sentence 0 is a str"):
        batch_to_ids(["not tokenized"])
    with pytest.raises(ValueError, match="never downloads"):
        Elmo("https://allennlp.s3.amazonaws.com/models/elmo/options.json", "weights.hdf5", 1)
    elmo = Elmo(*_files(tiny_dir), 1)
    with pytest.raises(ValueError, match=r"\(batch, timesteps, 50\)"):
        elmo(torch.ones(2, 3, dtype=torch.long))
    gap = batch_to_ids([["a", "b", "c"]])
    gap[0, 1] = 0
    with pytest.raises(ValueError, match="row 0"):
        elmo(gap)


def test_a_model_that_is_not_elmo_is_named_for_what_it_is(own_tiny_bert_dir):
    for model, kind in ((str(own_tiny_bert_dir), "BERT"), ("cove-en-multi30k", "CoVe")):
        for make in (lambda m: Elmo(m, None, 1), ElmoEmbedder):
            with pytest.raises(TypeError, match=f"^{model!r} is a {kind} model, not an ELMo biLM; give "):
                make(model)
