"""CoVe's biattentive classification network (``train-task --classifier bcn``), character n-gram
embeddings (``--char-ngrams``) and TREC-50.
Needs no ../shared: synthetic data and the tiny random ELMo of ``own_tiny_dir``."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from helpers_task_data import sentiment_split, tiny_elmo, top_layer_split
from tolerance import assert_reordered_close

from contextvec.tasks.models import BCNClassifier, ModelSettings, char_ngrams, ngram_vocabulary
from contextvec.tasks.models.bcn import Maxout
from contextvec.tasks.readers import read_trec
from contextvec.tasks.spec import get_task
from contextvec.tasks.train import Split, TrainSettings, build_task_model, train_task

# Batch norm's running statistics trail the weights over the few batches of these tiny sets:
# dev is near chance for a few epochs, hence the patience.
FAST = TrainSettings(epochs=20, patience=8, lr=0.01, batch_size=16, progress=False)
BCN = ModelSettings(word_dim=16, char_cnn=False, hidden=12, dropout=0.0, word_unk_rate=0.0, classifier="bcn")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_bcn_fits_learnable_data_even_with_a_batch_of_one():
    rng = random.Random(0)
    train, dev = sentiment_split(113, rng), sentiment_split(60, rng)  # 113 = 7 x 16 + 1: a one-sentence batch
    report, model = train_task("sst2", train, dev, None, BCN, FAST)
    assert isinstance(model, BCNClassifier) and report.dev["accuracy"] > 0.95
    assert report.model_settings["classifier"] == "bcn"


def test_bcn_shape_follows_the_seed():
    rng = random.Random(0)
    train = sentiment_split(20, rng)
    model, _ = build_task_model("sst5", Split(train.sentences, ["1"] * 10 + ["3"] * 10), [], BCN)
    h = BCN.hidden
    assert isinstance(model.feedforward[1], torch.nn.ReLU) and model.feedforward[0].out_features == h
    assert model.encoder.bidirectional and model.integrator.input_size == 6 * h  # [X; X - C; X * C]
    layers = list(model.maxout)
    assert len(layers) == 3 and all(isinstance(m, Maxout) and m.pieces == 4 for m in layers)
    assert [m.linear.in_features for m in layers] == [8 * h, 4 * h, 2 * h]  # 4 poolings of 2h
    assert layers[-1].out_dim == 2


def test_bcn_drops_its_input_once():
    """Dropout before ``f`` is the task model's input dropout: in training, a share ``dropout`` of
    the word-vector entries reaching ``f`` is zero (a second dropout would make it 0.75)."""
    rng = random.Random(0)
    train = sentiment_split(40, rng)
    torch.manual_seed(0)
    model, indexer = build_task_model("sst2", train, [], ModelSettings(**{**BCN.__dict__, "dropout": 0.5}))
    batch = indexer.batch(train.sentences, train.labels)
    seen: list[torch.Tensor] = []
    linear = next(m for m in model.feedforward if isinstance(m, torch.nn.Linear))
    linear.register_forward_pre_hook(lambda _, args: seen.append(args[0].detach()))
    model.train()
    model.loss(batch)
    real = model.tokens(batch.words, batch.chars, batch.ngrams).detach() != 0
    assert abs(float((seen[0][real] == 0).float().mean()) - 0.5) < 0.05


def test_bcn_loads_the_weights_of_models_saved_with_the_old_feedforward_names():
    rng = random.Random(0)
    train = sentiment_split(20, rng)
    torch.manual_seed(0)
    model, _ = build_task_model("sst2", train, [], BCN)
    state = {k.replace("feedforward.0.", "feedforward.1."): v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1)
    fresh, _ = build_task_model("sst2", train, [], BCN)
    assert not torch.equal(fresh.feedforward[0].weight, model.feedforward[0].weight)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.feedforward[0].weight, model.feedforward[0].weight)
    assert torch.equal(fresh.feedforward[0].bias, model.feedforward[0].bias)


def test_bcn_predictions_do_not_depend_on_padding():
    """The biattention and the poolings mask the padding: a sentence scores the same alone or
    in a batch with longer sentences."""
    rng = random.Random(1)
    train = sentiment_split(30, rng)
    torch.manual_seed(0)
    model, indexer = build_task_model("sst2", train, [], BCN)
    model.eval()
    sentences = [["good", "film"], ["it", "was", "a", "bad", "plot", "it", "was"]]
    with torch.no_grad():
        together = model.logits(indexer.batch(sentences))
        alone = torch.cat([model.logits(indexer.batch([s])) for s in sentences])
    # Other batches, other summation orders. Products summed on the way to a logit (h = 12, 7
    # tokens): feedforward, encoder step, biattention scores, its softmax and weighted sum,
    # integrator step, self-attentive pooling's scores, softmax and sum, the three maxouts.
    h, longest = 12, 7
    terms = 16 + 2 * h + 2 * h + 2 * longest + 7 * h + 2 * h + 2 * longest + 8 * h + 4 * h + 2 * h
    assert_reordered_close(together, alone, terms=terms)


def test_bcn_is_for_sentence_tasks_and_input_placement():
    with pytest.raises(ValueError, match="input only"):
        ModelSettings(classifier="bcn", placement="input+output")
    with pytest.raises(ValueError, match="sentence classification"):
        get_task("ner").model_class(BCN)
    with pytest.raises(ValueError, match="classifier must be"):
        ModelSettings(classifier="cnn")


def test_bcn_reads_the_contextual_mix():
    """Words carry nothing (always "x"); the label is only in the precomputed top layer."""
    rng = np.random.default_rng(0)
    train, dev = top_layer_split(120, rng), top_layer_split(60, rng)
    settings = ModelSettings(**{**BCN.__dict__, "placement": "input", "mix_dropout": 0.0})
    report, _ = train_task("sst2", train, dev, None, settings, FAST, tiny_elmo())
    assert report.dev["accuracy"] > 0.95 and len(report.mixes) == 1


def test_trec50_keeps_the_fine_labels_and_trec6_the_coarse(tmp_path):
    path = tmp_path / "t.label"
    path.write_bytes(b"HUM:ind Who was it ?\nLOC:city Where is it ?\nHUM:gr Who are they ?\n")
    assert read_trec(path).labels == ["HUM", "LOC", "HUM"]
    assert read_trec(path, fine=True).labels == ["HUM:ind", "LOC:city", "HUM:gr"]
    assert get_task("trec50").load(path).labels == ["HUM:ind", "LOC:city", "HUM:gr"]
    assert get_task("trec50").carves_dev and get_task("trec50").metric == "accuracy"
    bad = tmp_path / "bad.label"
    bad.write_bytes(b"FOO:bar What ?\n")
    with pytest.raises(ValueError, match="line 1"):
        get_task("trec50").load(bad)


def test_char_ngrams_are_the_unique_1_to_4_grams_with_boundaries():
    assert char_ngrams("ab") == ["a", "b", "<a", "ab", "b>", "<ab", "ab>", "<ab>"]
    assert len(char_ngrams("aaaa")) == len(set(char_ngrams("aaaa")))  # unique: "a" once
    assert char_ngrams("Ab")[0] == "A"  # case kept
    vocab = ngram_vocabulary([["ab"], ["ba"]])
    assert "<b" in vocab.stoi and "<c" not in vocab.stoi


def test_a_word_vector_is_the_mean_of_its_known_ngram_vectors():
    rng = random.Random(0)
    train = sentiment_split(20, rng)
    settings = ModelSettings(word_dim=4, char_cnn=False, char_ngram_dim=6)
    model, indexer = build_task_model("sst2", train, [], settings)
    model.eval()
    batch = indexer.batch([["good", "zzqq"], ["film"]])
    with torch.no_grad():
        x = model.tokens(batch.words, batch.chars, batch.ngrams)
    assert x.shape == (2, 2, 4 + 6)
    table = model.tokens.ngrams.embedding.weight
    want = table[[indexer.ngrams.stoi[g] for g in char_ngrams("good")]].mean(0)
    torch.testing.assert_close(x[0, 0, 4:], want)
    assert torch.equal(x[0, 1, 4:], torch.zeros(6))  # no n-gram of "zzqq" was seen in training
    assert torch.equal(x[1, 1], torch.zeros(10))  # padding


def test_char_ngrams_let_the_model_read_unseen_words():
    """Dev words are unseen (UNK), but share n-grams with the training words: "goodish"/"good"."""
    rng = random.Random(0)

    def split(n: int, suffix: str) -> Split:
        data = sentiment_split(n, rng)
        return Split([[w + suffix if w in ("good", "bad") else w for w in s] for s in data.sentences],
                     data.labels, "synthetic")

    settings = ModelSettings(word_dim=8, char_cnn=False, char_ngram_dim=16, hidden=12, dropout=0.0,
                             word_unk_rate=0.0)
    report, _ = train_task("sst2", split(120, ""), split(60, "ish"), None, settings, FAST)
    assert report.dev["accuracy"] > 0.9
    without, _ = train_task("sst2", split(120, ""), split(60, "ish"), None,
                            ModelSettings(**{**settings.__dict__, "char_ngram_dim": 0}), FAST)
    assert without.dev["accuracy"] < 0.75  # words alone: "goodish" is UNK
