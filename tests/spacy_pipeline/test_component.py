"""The spaCy component: doc.tensor and the extensions are the encoder's vectors for spaCy's tokens,
nlp.pipe batches docs, and a saved pipeline loads its model again (needs the spacy extra)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from tolerance import assert_reordered_close, elmo_terms

spacy = pytest.importorskip("spacy", reason="the optional spacy extra is not installed")

import contextvec  # noqa: E402
from contextvec.api import ModelNotFoundError  # noqa: E402
from contextvec.encoders.bilm import ElmoBiLM, ElmoEncoder  # noqa: E402
from contextvec.encoders.bilm.config import PRESETS  # noqa: E402
from contextvec.spacy import VectorSettings  # noqa: E402

TEXTS = ["The bank was robbed on Monday .", "We sat on the river bank  and watched the boats .",
         "Colorless green ideas sleep furiously ."]


def _pipeline(model, **config):
    nlp = spacy.blank("en")
    nlp.add_pipe("contextvec", config={"model": str(model), **config})
    return nlp


def _fresh_embed(encoder, words, **kwargs):
    """What the encoder gives for one call from an empty token cache (as the component calls it)."""
    encoder.clear_caches()
    return encoder.embed(words, **kwargs)


@pytest.fixture(scope="module")
def bundled():
    return _pipeline("elmo-en-small", layers="top")


def test_doc_tensor_is_the_bundled_elmos_top_layer_bit_for_bit(bundled):
    encoder = bundled.get_pipe("contextvec").encoder
    for text in TEXTS:
        doc = bundled(text)
        words = [token.text for token in doc]
        top, = _fresh_embed(encoder, [words], layers="top")
        every, = _fresh_embed(encoder, [words], layers="all")
        assert doc.tensor.dtype == np.float32 and doc.tensor.shape == (len(doc), encoder.output_dim)
        assert np.array_equal(doc.tensor, top)
        assert np.array_equal(doc._.contextvec_layers, every)


def test_doc_tensor_is_the_tiny_berts_words_bit_for_bit(own_tiny_bert_dir):
    nlp = _pipeline(own_tiny_bert_dir, layers="average")
    encoder = nlp.get_pipe("contextvec").encoder
    doc = nlp("the bank  was robbed, twice.")  # a whitespace token: no pieces, BERT's [UNK]
    words = [token.text for token in doc]
    assert words == ["the", "bank", " ", "was", "robbed", ",", "twice", "."]
    expected, = _fresh_embed(encoder, [words], layers="average")
    assert np.array_equal(doc.tensor, expected)
    assert doc._.contextvec_layers.shape == (encoder.num_layers, len(words), encoder.output_dim)


def test_all_and_a_fixed_mix_combine_the_layers(own_tiny_dir):
    every = _pipeline(own_tiny_dir, layers="all")
    mix = _pipeline(own_tiny_dir, layers=[0.5, 0.25, 2.0])
    text = TEXTS[0]
    doc = every(text)
    layers = doc._.contextvec_layers
    n_layers, n_tokens, dim = layers.shape
    assert doc.tensor.shape == (n_tokens, n_layers * dim)
    for k in range(n_layers):  # token by token, layer 0 first
        assert np.array_equal(doc.tensor[:, k * dim:(k + 1) * dim], layers[k])
    mixed = mix(text).tensor
    assert mixed.dtype == np.float32
    exact = 0.5 * layers[0].astype(np.float64) + 0.25 * layers[1] + 2.0 * layers[2]
    assert_reordered_close(mixed, exact, terms=3)  # three products, each rounded to float32


def test_token_and_span_extensions(own_tiny_dir):
    nlp = _pipeline(own_tiny_dir, layers="top")
    assert nlp.make_doc(TEXTS[0])[0]._.contextvec_vector is None  # the component has not run
    doc = nlp(TEXTS[0])
    layers = doc._.contextvec_layers
    for token in doc:
        assert np.array_equal(token._.contextvec_vector, doc.tensor[token.i])
        assert np.array_equal(token._.contextvec_layers, layers[:, token.i])
    span = doc[1:4]
    np.testing.assert_allclose(span._.contextvec_vector, doc.tensor[1:4].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(span._.contextvec_layers, layers[:, 1:4].mean(axis=1), rtol=1e-6)
    assert span._.contextvec_layers.shape == layers.shape[::2]
    assert not doc[2:2]._.contextvec_vector.any()  # an empty span: zeros, not NaN


@pytest.mark.parametrize("layers", ["average", "all"])
def test_empty_docs_get_no_rows(own_tiny_dir, layers):
    nlp = _pipeline(own_tiny_dir, layers=layers)
    component = nlp.get_pipe("contextvec")
    dim = component.width
    doc = nlp("")
    assert doc.tensor.shape == (0, dim)
    assert doc._.contextvec_layers.shape == (3, 0, component.encoder.output_dim)
    docs = list(nlp.pipe(["", TEXTS[0], "   "]))
    assert docs[0].tensor.shape == (0, dim) and docs[1].tensor.shape == (len(docs[1]), dim)
    assert docs[2].tensor.shape == (1, dim)  # spaCy's one whitespace token


def test_pipe_batches_docs_as_one_encoder_call_and_agrees_with_each_doc(own_tiny_dir):
    nlp = _pipeline(own_tiny_dir, layers="all", batch_size=4)
    encoder = nlp.get_pipe("contextvec").encoder
    texts = [f"{TEXTS[i % 3]} {' x' * (i % 7)}" for i in range(16)]
    piped = list(nlp.pipe(texts, batch_size=16))
    expected = _fresh_embed(encoder, [[t.text for t in doc] for doc in piped], batch_size=4)
    config = encoder.bilm.config
    for doc, text, array in zip(piped, texts, expected, strict=True):
        assert np.array_equal(doc._.contextvec_layers, array)  # one call, batched by length
        alone = nlp(text)._.contextvec_layers  # other batch partners: float rounding only
        assert_reordered_close(doc._.contextvec_layers, alone, terms=elmo_terms(config))


def test_saved_pipeline_loads_the_model_again_and_gives_the_same_tensors(own_tiny_dir, tmp_path):
    model = shutil.copytree(own_tiny_dir, tmp_path / "model")
    nlp = _pipeline(model, layers="average")
    before = [doc.tensor for doc in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / "pipeline")
    assert not list((tmp_path / "pipeline").rglob("*.safetensors"))  # the config, not the weights
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe_config("contextvec")["model"] == str(model)
    for doc, tensor in zip(loaded.pipe(TEXTS), before, strict=True):
        assert np.array_equal(doc.tensor, tensor)

    torch.manual_seed(1)  # other weights under the same path: refused, not silently other vectors
    contextvec.save(ElmoEncoder(ElmoBiLM(PRESETS["tiny"])), model)
    with pytest.raises(ValueError, match="not the one this pipeline was saved with"):
        spacy.load(tmp_path / "pipeline")


def test_a_missing_model_is_one_clear_error(tmp_path):
    with pytest.raises(ModelNotFoundError) as caught:
        _pipeline(tmp_path / "no-such-model")
    assert str(tmp_path / "no-such-model") in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("config", "message"), [
    ({"layers": "bottom"}, "layers must be one of all, top, average, not 'bottom'"),
    ({"layers": [1.0, 2.0]}, "a mix needs one weight per layer, 3 for"),
    ({"layers": []}, "or a list of finite weights, one per layer, not"),
    ({"max_tokens": -5}, "max_tokens must be a whole number of at least 1, not -5"),
    ({"batch_size": 0}, "batch_size must be a whole number of at least 1, not 0"),
    ({"precision": "fp8"}, "precision must be one of"),
])
def test_bad_settings_are_one_line_errors(own_tiny_dir, config, message):
    with pytest.raises(ValueError, match=message) as caught:
        _pipeline(own_tiny_dir, **config)
    assert "\n" not in str(caught.value)


def test_a_mix_of_other_than_finite_numbers_is_refused_when_the_settings_are_made():
    for weights in ([1.0, float("nan"), 1.0], [1.0, True]):
        with pytest.raises(ValueError, match="or a list of finite weights, one per layer, not"):
            VectorSettings(model="elmo-en-small", layers=weights)
