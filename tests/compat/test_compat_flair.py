"""contextvec.flair: flair users' ELMo code, with only the import changed (needs the flair extra)."""

from __future__ import annotations

import gzip
from itertools import islice

import numpy as np
import pytest
import torch
from conftest import SHARED

flair = pytest.importorskip("flair", reason="the optional flair extra is not installed")

from flair.data import Sentence  # noqa: E402
from flair.datasets import ColumnCorpus  # noqa: E402
from flair.embeddings import StackedEmbeddings  # noqa: E402
from flair.models import SequenceTagger  # noqa: E402
from flair.trainers import ModelTrainer  # noqa: E402

from contextvec.flair import ELMoEmbeddings  # noqa: E402

CONLL = SHARED / "tasks" / "conll2003"


def _files(path):
    return str(path / "options.json"), str(path / "weights.hdf5")


def test_token_vectors_are_allennlps_layers(tiny_dir):
    expected = np.load(tiny_dir / "expected.npz")
    tokens = (tiny_dir / "sentences.txt").read_text("utf-8").splitlines()[2].split()
    options_file, weight_file = _files(tiny_dir)
    all_layers = ELMoEmbeddings(options_file=options_file, weight_file=weight_file)
    top = ELMoEmbeddings(options_file=options_file, weight_file=weight_file, embedding_mode="top")
    stacked = StackedEmbeddings([all_layers, top])

    sentence = Sentence(tokens)
    stacked.embed(sentence)
    layers = expected["activations_002"]  # (3, tokens, dim)
    assert stacked.embedding_length == 4 * layers.shape[-1]
    for index, token in enumerate(sentence):
        want = np.concatenate([layers[0, index], layers[1, index], layers[2, index], layers[2, index]])
        np.testing.assert_allclose(token.get_embedding().cpu().numpy(), want, atol=1e-5, rtol=0)


def _conll_sample(source, target, n_sentences):
    """The first ``n_sentences`` of a CoNLL-2003 file, without -DOCSTART- lines."""
    with gzip.open(source, "rt", encoding="utf-8") as f:
        blocks = (b for b in f.read().split("\n\n") if b.strip() and not b.startswith("-DOCSTART-"))
        target.write_text("\n\n".join(islice(blocks, n_sentences)) + "\n", encoding="utf-8")


def test_tagger_trains_saves_loads_and_predicts_the_same(tiny_dir, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _conll_sample(CONLL / "eng.train.gz", data / "train.txt", 24)
    _conll_sample(CONLL / "eng.testa.gz", data / "dev.txt", 4)
    _conll_sample(CONLL / "eng.testa.gz", data / "test.txt", 8)
    corpus = ColumnCorpus(data, {0: "text", 3: "ner"}, train_file="train.txt", dev_file="dev.txt",
                          test_file="test.txt")
    tag_dictionary = corpus.make_label_dictionary(label_type="ner", add_unk=False)

    # flair's documented tagger recipe, with contextvec's ELMoEmbeddings.
    options_file, weight_file = _files(tiny_dir)
    embeddings = StackedEmbeddings([ELMoEmbeddings(options_file=options_file, weight_file=weight_file)])
    tagger = SequenceTagger(hidden_size=16, embeddings=embeddings, tag_dictionary=tag_dictionary,
                            tag_type="ner", use_crf=True)
    before = {k: v.clone() for k, v in tagger.state_dict().items()}
    trainer = ModelTrainer(tagger, corpus)
    trainer.train(tmp_path / "run", learning_rate=0.1, mini_batch_size=8, max_epochs=2,  # 6 steps
                  create_file_logs=False, create_loss_file=False, use_final_model_for_eval=True)
    after = tagger.state_dict()
    assert not torch.equal(before["linear.weight"], after["linear.weight"])  # it trained
    elmo_keys = [k for k in after if ".encoder.bilm." in k]
    assert elmo_keys and all(torch.equal(before[k], after[k]) for k in elmo_keys)  # ELMo frozen

    assert (tmp_path / "run" / "final-model.pt").is_file()
    tagger.save(tmp_path / "tagger.pt")
    # What tagger.save stores for the embeddings (flair's own serialisation; never unpickled here).
    saved = tagger.embeddings.save_embeddings()["embeddings"][0]
    assert saved["__cls__"] == "contextvec.ELMoEmbeddings" and "config" in saved  # no file paths
    loaded = SequenceTagger.load(tmp_path / "tagger.pt")
    for key, value in after.items():
        assert torch.equal(loaded.state_dict()[key], value), key
    texts = [[t.text for t in s] for s in corpus.test]
    original, reloaded = [Sentence(t) for t in texts], [Sentence(t) for t in texts]
    tagger.predict(original)
    loaded.predict(reloaded)
    for a, b in zip(original, reloaded, strict=True):
        assert [(t.text, t.get_label("ner").value) for t in a] == [
            (t.text, t.get_label("ner").value) for t in b
        ]
        for ta, tb in zip(a, b, strict=True):
            assert ta.get_label("ner").score == pytest.approx(tb.get_label("ner").score, abs=1e-6)


def test_flair_model_names_that_allennlp_downloaded_get_a_clear_error():
    with pytest.raises(ValueError, match="never downloads"):
        ELMoEmbeddings("medium")
    with pytest.raises(ValueError, match="embedding_mode"):
        ELMoEmbeddings(embedding_mode="concat")


@pytest.mark.parametrize("kind", ["BERT", "CoVe"])
def test_a_model_that_is_not_elmo_is_named_for_what_it_is(kind, own_tiny_bert_dir):
    """Not "options_file=...": flair's users gave ``model``."""
    model = str(own_tiny_bert_dir) if kind == "BERT" else "cove-en-multi30k"
    with pytest.raises(TypeError) as error:
        ELMoEmbeddings(model=model)
    assert str(error.value) == (f"{model!r} is a {kind} model, not an ELMo biLM; give elmo-en-small, "
                                "a contextvec ELMo directory, or bilm-tf files (options.json with "
                                "weights.hdf5)")
