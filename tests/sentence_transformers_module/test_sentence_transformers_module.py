"""contextvec.sentence_transformers.Encoder inside a SentenceTransformer: word vectors, sentence
vectors, save and load through modules.json, a pool of processes (needs the extra)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("sentence_transformers", reason="the sentence-transformers extra is not installed")

from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer.modules import Pooling  # noqa: E402
from tolerance import FP32_EPS, elmo_terms, reorder_bound  # noqa: E402

import contextvec  # noqa: E402
from contextvec.api import ModelNotFoundError  # noqa: E402
from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder  # noqa: E402
from contextvec.sentence_transformers import CONFIG_FILE, Encoder  # noqa: E402
from contextvec.text.tokenize import Tokenizer  # noqa: E402

# Character lengths and word counts in the same order, so that sentence-transformers' batch (by
# characters) and Encoder.embed's (by words) hold the sentences in the same rows.
TEXTS = ["the bank was robbed, they said.", "a bank by the river.", "the bank."]


@pytest.fixture(scope="module")
def cove_dir(tmp_path_factory):
    torch.manual_seed(0)
    words = ["the", "bank", "was", "robbed", ",", "they", "said", "a", "by", "river", "."]
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=6, hidden_size=4), words, torch.randn(len(words), 6))
    return save_cove_encoder(mt_lstm, tmp_path_factory.mktemp("cove") / "model")


def pipeline(model, layers: str = "average", pooling: str = "mean", **settings) -> SentenceTransformer:
    encoder = Encoder(model, layers=layers, **settings)
    return SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), pooling)],
                               device="cpu")


def encoder_of(model: SentenceTransformer) -> contextvec.Encoder:
    return model[0].encoder


def elmo_bound(model: SentenceTransformer, expected) -> float:
    return reorder_bound(expected, terms=elmo_terms(encoder_of(model).config))


@pytest.mark.parametrize("layers", ["average", "top", "all"])
@pytest.mark.parametrize("family", ["elmo", "cove", "bert"])
def test_token_embeddings_are_the_encoders_word_vectors(family, layers, request, cove_dir):
    directory = {"elmo": "own_tiny_dir", "bert": "own_tiny_bert_dir"}.get(family)
    model = pipeline(request.getfixturevalue(directory) if directory else cove_dir, layers)
    words = [Tokenizer("moses")(text)[0] for text in TEXTS]
    assert words[0][-3:] == ["they", "said", "."]  # moses split the punctuation off
    encoder = encoder_of(model)
    encoder.clear_caches()
    expected = encoder.embed(words, layers=layers)
    if layers == "all":  # (num_layers, words, dim) -> each word's layers side by side
        expected = [x.transpose(1, 0, 2).reshape(x.shape[1], -1) for x in expected]
    encoder.clear_caches()
    got = model.encode(TEXTS, output_value="token_embeddings")
    assert model.get_embedding_dimension() == expected[0].shape[1]
    for vectors, want in zip(got, expected, strict=True):
        assert vectors.dtype == torch.float32
        np.testing.assert_array_equal(vectors.numpy(), want)  # the same batch: bit for bit


def test_sentence_vectors_are_the_mean_of_the_word_vectors(own_tiny_dir):
    model = pipeline(own_tiny_dir, "all")
    sentences = model.encode(TEXTS)
    words = model.encode(TEXTS, output_value="token_embeddings")
    assert sentences.shape == (3, model.get_embedding_dimension())
    for sentence, vectors in zip(sentences, words, strict=True):
        mean = vectors.mean(0).numpy()  # a sum of len(vectors) terms
        np.testing.assert_allclose(sentence, mean, rtol=0,
                                   atol=reorder_bound(mean, terms=len(vectors)) + FP32_EPS * abs(mean).max())


def test_save_and_load_by_name_through_modules_json(tmp_path):
    model = pipeline("elmo-en-small", "top", tokenizer="whitespace")
    before = model.encode(TEXTS)
    model.save(str(tmp_path / "saved"))
    modules = json.loads((tmp_path / "saved" / "modules.json").read_text())
    assert modules[0]["type"] == "contextvec.sentence_transformers.Encoder"
    assert json.loads((tmp_path / "saved" / CONFIG_FILE).read_text()) == {
        "model": "elmo-en-small", "layers": "top", "tokenizer": "whitespace", "precision": "fp32"}
    assert not list((tmp_path / "saved").glob("*.safetensors"))  # the name, not the weights
    again = SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    assert isinstance(again[0], Encoder) and again[0].layers == "top"
    np.testing.assert_array_equal(again.encode(TEXTS), before)


def test_a_model_directory_is_saved_as_its_absolute_path(own_tiny_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(own_tiny_dir.parent)
    model = pipeline(own_tiny_dir.name)
    before = model.encode(TEXTS)
    model.save(str(tmp_path / "saved"))
    assert json.loads((tmp_path / "saved" / CONFIG_FILE).read_text())["model"] == str(own_tiny_dir.resolve())
    monkeypatch.chdir(tmp_path)  # the relative name no longer points at the model
    np.testing.assert_array_equal(SentenceTransformer(str(tmp_path / "saved"), device="cpu").encode(TEXTS),
                                  before)


def test_vectors_do_not_depend_on_the_batch(own_tiny_dir):
    model = pipeline(own_tiny_dir, "all")
    texts = TEXTS + ["river banks flood.", "they robbed a bank by a river, the papers said."]
    together = model.encode(texts)
    alone = np.stack([model.encode([text])[0] for text in texts])
    reversed_ = model.encode(texts[::-1], batch_size=2)[::-1]
    for other in (alone, reversed_):
        np.testing.assert_allclose(other, together, rtol=0, atol=elmo_bound(model, together))


@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_a_text_without_words_is_one_zero_vector(own_tiny_dir, pooling):
    model = pipeline(own_tiny_dir, pooling=pooling)
    texts = ["", TEXTS[0], " \t "]
    sentences = model.encode(texts)
    np.testing.assert_array_equal(sentences[[0, 2]], np.zeros((2, model.get_embedding_dimension())))
    np.testing.assert_allclose(sentences[1], model.encode(TEXTS[:1])[0], rtol=0,
                               atol=elmo_bound(model, sentences[1]))
    words = model.encode(texts, output_value="token_embeddings")
    dim = model.get_embedding_dimension()
    assert [tuple(w.shape) for w in words] == [(1, dim), (8, dim), (1, dim)]
    assert not words[0].any() and not words[2].any()


@pytest.mark.slow
def test_a_pool_of_two_processes_gives_the_single_process_vectors(own_tiny_dir):
    model = pipeline(own_tiny_dir)
    texts = TEXTS * 3 + ["", "river banks flood."]
    single = model.encode(texts)
    single_words = model.encode(texts, output_value="token_embeddings")
    pool = model.start_multi_process_pool(["cpu", "cpu"])
    results = {}

    def encode() -> None:  # sentence-transformers waits without limit for a worker that died
        results["sentences"] = model.encode(texts, pool=pool, chunk_size=3)
        results["words"] = model.encode(texts, pool=pool, chunk_size=3, output_value="token_embeddings")

    try:
        worker = threading.Thread(target=encode, daemon=True)
        worker.start()
        worker.join(timeout=300)
        assert not worker.is_alive(), "the pool gave no answer within 300 s"
    finally:
        model.stop_multi_process_pool(pool)
    np.testing.assert_allclose(results["sentences"], single, rtol=0, atol=elmo_bound(model, single))
    for got, want in zip(results["words"], single_words, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=elmo_bound(model, want))


def test_a_missing_model_is_one_clear_error(own_tiny_dir, tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"^no model at .*no-such-model \(bundled models: .*\)$"):
        Encoder("no-such-model")
    model = pipeline(own_tiny_dir)
    model.save(str(tmp_path / "saved"))
    config = tmp_path / "saved" / CONFIG_FILE
    config.write_text(json.dumps({"model": str(tmp_path / "gone")}))
    with pytest.raises(ModelNotFoundError, match=rf"^{config}: model '.*gone': no model at .*gone "):
        SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    config.unlink()
    with pytest.raises(FileNotFoundError, match=rf"{CONFIG_FILE} is missing: it names the contextvec model"):
        SentenceTransformer(str(tmp_path / "saved"), device="cpu")


@pytest.mark.parametrize(("config", "message"), [
    ({"model": "elmo-en-small", "layers": "middle"}, "layers must be one of all, top, average, not 'middle'"),
    ({"model": "elmo-en-small", "tokenizer": "moses-sentences"},
     "tokenizer must be one of whitespace, moses, not 'moses-sentences'"),
    ({"model": "elmo-en-small", "pooling": "mean"}, "unknown field 'pooling'"),
    ({"model": 3}, "field 'model' must be a string, not 3"),
    (["elmo-en-small"], "expected a JSON object with a 'model' field"),
])
def test_a_bad_saved_config_names_the_file_and_field(tmp_path, config, message):
    (tmp_path / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(ValueError, match=f"^{tmp_path / CONFIG_FILE}: {message}"):
        Encoder.load(str(tmp_path))


def test_an_input_that_is_no_string_is_named(own_tiny_dir):
    model = pipeline(own_tiny_dir)
    with pytest.raises(TypeError, match=r"^each input must be a str, not NoneType: None$"):
        model.encode(["the bank.", None])


@pytest.mark.slow
def test_the_guides_example_runs_as_written(tmp_path, monkeypatch):
    guide = Path(__file__).resolve().parents[2] / "docs" / "sentence-transformers.md"
    block = guide.read_text(encoding="utf-8").split("<!-- docs-test: run -->\n```python\n", 1)[1]
    monkeypatch.chdir(tmp_path)  # it saves a model into the working directory
    exec(compile(block.split("```", 1)[0], str(guide), "exec"), {})
    assert (tmp_path / "elmo-sentences" / CONFIG_FILE).is_file()


def test_a_prompt_is_left_out_of_the_sentence_vector_where_pooling_says(own_tiny_dir):
    encoder = Encoder(own_tiny_dir)
    model = SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(),
                                                          include_prompt=False)], device="cpu")
    words = model.encode(TEXTS[:1], prompt="query : ", output_value="token_embeddings")[0]
    assert len(words) == 2 + len(encoder.words(TEXTS[0]))
    sentence = model.encode(TEXTS[:1], prompt="query : ")[0]
    mean = words[2:].mean(0).numpy()
    np.testing.assert_allclose(sentence, mean, rtol=0,
                               atol=reorder_bound(mean, terms=len(words)) + FP32_EPS * abs(mean).max())
