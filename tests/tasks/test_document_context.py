"""Task models over document-context features (``train-task --context document``): CoNLL-2003's
documents as read, features equal to ``Encoder.embed_document``'s, cache keys by context, and the
one-line refusals. A tiny CoNLL text of two documents and the seeded tiny ELMo."""

from __future__ import annotations

import numpy as np
import pytest
from helpers_task_data import CONLL_FIRST_DOCUMENT

from contextvec.cli.main import main
from contextvec.encoders.fingerprint import model_identity
from contextvec.features import FeatureSettings, cache_key, cached_features, data_identity, document_identity
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.jobs.train_task import TrainMode, TrainTaskSettings, run_train_task
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.readers.conll2003 import iter_conll2003, parse_conll2003
from contextvec.tasks.saved import load_task_model
from contextvec.tasks.spec import get_task
from contextvec.tasks.train import TrainSettings, attach_features

CONLL = CONLL_FIRST_DOCUMENT + """-DOCSTART- -X- O O

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O

The DT I-NP O
European NNP I-NP I-ORG
Commission NNP I-NP I-ORG
said VBD I-VP O

Germany NNP I-NP I-LOC
disagreed VBD I-VP O
"""


def _conll(tmp_path, name: str = "train.txt"):
    path = tmp_path / name
    path.write_text(CONLL, encoding="utf-8")
    return path


def test_conll_reader_keeps_the_documents_and_what_it_gave_before(tmp_path):
    corpus = parse_conll2003(CONLL)
    assert corpus.documents == [0, 0, 1, 1, 1]
    # the sentences and tags are those iter_conll2003 always gave (-DOCSTART- is no sentence)
    pairs = list(iter_conll2003(CONLL.splitlines(True)))
    assert list(zip(corpus.sentences, corpus.tags, strict=True)) == pairs
    assert corpus.sentences[2] == ["BRUSSELS", "1996-08-22"]
    # sentences before any -DOCSTART- are document 0; the task's split and a subset keep them
    assert parse_conll2003(CONLL.split("\n", 2)[2]).documents == [0, 0, 1, 1, 1]
    split = get_task("ner").load(_conll(tmp_path))
    assert split.documents == [0, 0, 1, 1, 1]
    assert split.subset([1, 3], "part").documents == [0, 1]


def test_document_features_are_embed_documents_per_document(tmp_path, own_tiny_dir):
    import contextvec

    encoder = contextvec.load(own_tiny_dir)
    split = get_task("ner").load(_conll(tmp_path))
    attach_features(encoder, [split], cache_dir=tmp_path / "cache", progress=False, context="document")
    expected = [*encoder.embed_document(split.sentences[:2]), *encoder.embed_document(split.sentences[2:])]
    for got, want in zip(split.features, expected, strict=True):
        np.testing.assert_array_equal(got, want)  # float32 stored as computed: the same numbers
    # a sentence of a longer document sees its neighbours: not its sentence-context vectors
    alone = get_task("ner").load(_conll(tmp_path))
    attach_features(encoder, [alone], cache_dir=tmp_path / "cache", progress=False)
    assert not np.array_equal(alone.features[3][1:], split.features[3][1:])
    np.testing.assert_array_equal(alone.features[3][0], split.features[3][0])  # layer 0: the token alone


def test_cache_key_differs_by_context_and_the_sentence_key_is_unchanged(tmp_path, own_tiny_dir):
    # the keys contextvec wrote before document context existed: existing caches stay valid
    assert cache_key("model-id", "data-id") == "b3e14837f0314bfcbb942462408f05fa"
    assert cache_key("model-id", "data-id", "float16", "sentence") == "27b4e3f50e63311b7240bda686b04edd"
    two, one = document_identity([0, 0, 1, 1, 1]), document_identity([0, 0, 0, 0, 0])
    document = cache_key("model-id", "data-id", "float32", "document", two)
    assert document not in (cache_key("model-id", "data-id"), cache_key("model-id", "data-id", "float32",
                                                                        "document", one))
    assert document_identity([3, 3, 7, 7, 7]) == two  # the boundaries count, not the numbers
    with pytest.raises(ValueError, match="documents_id"):
        cache_key("model-id", "data-id", "float32", "document")
    with pytest.raises(ValueError, match="consecutive"):
        document_identity([0, 1, 0])

    import contextvec

    encoder = contextvec.load(own_tiny_dir)
    corpus = parse_conll2003(CONLL)
    settings = FeatureSettings(tmp_path / "cache")
    sentence = cached_features(encoder, corpus.sentences, settings, progress=False)
    in_documents = cached_features(encoder, corpus.sentences, settings, progress=False, context="document",
                                   documents=corpus.documents)
    assert sentence != in_documents and in_documents.exists()
    assert sentence.stem == cache_key(model_identity(encoder), data_identity(corpus.sentences))


def _settings(tmp_path, model_dir, **changes) -> TrainTaskSettings:
    train = _conll(tmp_path)
    fields = {"task": "ner", "files": TaskFiles(train, train), "mode": TrainMode.CONTEXTUAL,
              "encoder": EncoderChoice(str(model_dir)),
              "model": ModelSettings(word_dim=8, char_cnn=False, hidden=8, lstm_layers=1, placement="input"),
              "training": TrainSettings(epochs=1, lr=0.01, progress=False),
              "features": FeatureSettings(cache_dir=tmp_path / "cache"), "threads": 1, "context": "document"}
    return TrainTaskSettings(**{**fields, **changes})


def test_train_task_records_document_context_and_predict_refuses_it(tmp_path, own_tiny_dir):
    result = run_train_task(_settings(tmp_path, own_tiny_dir, save_model=str(tmp_path / "model")))
    assert result.report.extra["context"] == "document"
    task = (tmp_path / "model" / "task.json").read_text(encoding="utf-8")
    assert '"context": "document"' in task
    with pytest.raises(ValueError, match="trained with --context document"):
        load_task_model(tmp_path / "model")
    # a sentence-context model's task.json is as it was (no context field) and loads
    run_train_task(_settings(tmp_path, own_tiny_dir, context="sentence", save_model=str(tmp_path / "plain")))
    assert '"context"' not in (tmp_path / "plain" / "task.json").read_text(encoding="utf-8")
    assert load_task_model(tmp_path / "plain").record.features.context == "sentence"


def test_document_context_refusals_are_one_line(tmp_path, own_tiny_dir, capsys):
    with pytest.raises(ValueError, match="context"):
        _settings(tmp_path, own_tiny_dir, context="paragraph")
    train = _conll(tmp_path)
    cases = [
        (["sst2", "--train", str(train), "--dev", str(train), "--context", "document"],
         "--context document needs a task whose files mark documents (ner), not sst2"),
        (["ner", "--train", str(train), "--dev", str(train), "--context", "document", "--fine-tune",
          "--model", str(own_tiny_dir)], "--context document is for frozen features, not --fine-tune"),
        (["ner", "--train", str(train), "--dev", str(train), "--context", "document", "--no-contextual"],
         "--context document is for frozen features, not --no-contextual"),
        (["squad", "--train", str(train), "--context", "document"],
         "--context document: squad's contexts are read whole already"),
    ]
    for argv, wanted in cases:
        assert main(["train-task", *argv, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and wanted in err, err
