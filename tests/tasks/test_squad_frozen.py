"""The span model over frozen features (contextvec.tasks.qa.tokens, span_model, frozen): tokens
that map back to the exact characters, training that learns a toy set, saved models that answer
as the trained one, answers that do not depend on the batch."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import SHARED
from helpers_squad import TINY_SPAN, toy_squad

import contextvec
from contextvec.features import FeatureSettings
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.qa.frozen import SpanReader, SpanTrainSettings, train_span_model
from contextvec.tasks.qa.metric import squad_scores
from contextvec.tasks.qa.saved import load_qa_model
from contextvec.tasks.qa.span_model import SpanSettings
from contextvec.tasks.qa.span_saved import SPAN_FILE, load_span_model, save_span_model
from contextvec.tasks.qa.squad import Answer, Question, SquadData, read_squad
from contextvec.tasks.qa.tokens import answer_tokens, tokenize_squad, tokenize_text
from contextvec.tasks.saved import encoder_reference
from contextvec.tasks.train import TrainSettings
from contextvec.text.tokenize import Tokenizer

SQUAD = SHARED / "tasks" / "squad-v1.1" / "dev-v1.1-even-articles.json.gz"
@pytest.fixture(autouse=True)
def _one_thread():
    # tiny matrices: a second OpenMP thread only waits, and on a busy machine it spins
    torch.set_num_threads(1)


SPAN = SpanSettings(modelling_layers=1, max_answer_length=3)
FIT = TrainSettings(epochs=8, lr=0.05, batch_size=4, patience=8, progress=False)


@pytest.mark.slow
def test_every_context_of_the_file_maps_back_to_its_characters():
    data = read_squad(SQUAD)
    tokens = tokenize_squad(data)
    assert len(tokens.contexts) == len({q.context for q in data.questions})
    for context in tokens.contexts:
        assert [context.text[s:e] for s, e in context.spans] == list(context.tokens)
        assert all(a[1] <= b[0] for a, b in zip(context.spans, context.spans[1:], strict=False))
    inexact = 0
    for i, q in enumerate(data.questions):
        context = tokens.contexts[tokens.context_of[i]]
        first, last = tokens.answers[i]
        start, end = context.characters(first, last)
        answer = q.answers[0]
        assert start <= answer.start and answer.end <= end  # the tokens cover the answer
        assert context.spans[first][1] > answer.start and context.spans[last][0] < answer.end
        inexact += (start, end) != (answer.start, answer.end)
    assert tokens.inexact == inexact > 0


def test_tokens_altered_by_moses_still_map_to_their_characters():
    text = "a\x01b caf\u00e9 nai\u0308ve won't"
    tokenized = tokenize_text(text, Tokenizer("moses"))
    found = [text[s:e] for s, e in tokenized.spans]
    assert tokenized.tokens[0] == "ab" and found[0] == "a\x01b"  # moses drops the control character
    assert found[1:] == list(tokenized.tokens[1:])
    assert answer_tokens(tokenized, 0, 3) == (0, 0, True)


def test_an_answer_inside_a_token_takes_the_whole_token_and_is_counted():
    context = "In the 1990s, cats ruled the city."
    question = Question("q", "When?", context, (Answer("1990", context.index("1990")),))
    tokens = tokenize_squad(SquadData((question,), (0,), "t"))
    assert tokens.answers == ((2, 2),) and tokens.inexact == 1
    assert tokens.contexts[0].tokens[2] == "1990s"


def test_training_reduces_the_loss_and_answers_a_toy_set():
    data = toy_squad()
    report, reader = train_span_model(data, data, None, SpanTrainSettings(TINY_SPAN, SPAN, FIT))
    losses = [epoch["train_loss"] for epoch in report.curve]
    assert losses[-1] < losses[0] / 4
    predictions = reader.predict(data)
    assert predictions == {q.id: q.answers[0].text for q in data.questions}
    assert report.dev["f1"] == squad_scores(data, predictions)["f1"] == 100.0


@pytest.fixture(scope="module")
def elmo_reader(own_tiny_dir, tmp_path_factory):
    torch.manual_seed(0)
    data = toy_squad()
    encoder = contextvec.load(own_tiny_dir)
    settings = SpanTrainSettings(
        ModelSettings(word_dim=8, char_cnn=False, hidden=8, lstm_layers=1, placement="input"), SPAN,
        TrainSettings(epochs=2, batch_size=4, progress=False),
        FeatureSettings(cache_dir=tmp_path_factory.mktemp("features"), batch_size=3))
    report, reader = train_span_model(data, data, encoder, settings)
    return data, report, reader, encoder, own_tiny_dir


def test_a_saved_model_answers_exactly_as_the_trained_one(elmo_reader, tmp_path):
    data, report, reader, encoder, model_dir = elmo_reader
    saved = save_span_model(tmp_path / "model", reader, encoder=encoder,
                            encoder_ref=encoder_reference(str(model_dir)))
    loaded = load_qa_model(saved)  # task.json's kind leads to the span model; it reloads the encoder
    assert isinstance(loaded, SpanReader) and loaded.encoder is not None and loaded.encoder is not encoder
    before = reader.answer_questions(data.questions, n_best=3)
    after = loaded.answer_questions(data.questions, n_best=3)
    assert [[(x.text, x.start, x.end) for x in a] for a in after] == \
        [[(x.text, x.start, x.end) for x in a] for a in before]
    # the same weights on the same batches: equal up to the kernels' float32 rounding
    scores = [x.score for a in before for x in a]
    assert [x.score for a in after for x in a] == pytest.approx(scores, abs=1e-5)
    # the layers computed outside the feature cache are the cache's: the reported score again
    assert squad_scores(data, loaded.predict(data))["f1"] == report.dev["f1"] == loaded.reported["f1"]
    answer = loaded.answer(data.questions[0].question, data.questions[0].context)[0]
    assert data.questions[0].context[answer.start:answer.end] == answer.text


def test_answers_do_not_depend_on_the_batch(elmo_reader):
    data, _, reader, _, _ = elmo_reader
    together = reader.answer_questions(data.questions, n_best=2, batch_size=len(data))
    alone = [reader.answer_questions([q], n_best=2, batch_size=1)[0] for q in data.questions]
    for a, b in zip(together, alone, strict=True):
        assert [(x.text, x.start, x.end) for x in a] == [(x.text, x.start, x.end) for x in b]
        # log-probabilities of magnitude ~ log(tokens), float32 sums over different batch shapes
        assert [x.score for x in a] == pytest.approx([x.score for x in b], abs=1e-4)


def test_a_saved_model_refuses_a_record_of_another_version_or_weights_that_do_not_fit(tmp_path):
    data = toy_squad()
    one_epoch = TrainSettings(epochs=1, progress=False)
    _, reader = train_span_model(data, data, None, SpanTrainSettings(TINY_SPAN, SPAN, one_epoch))
    saved = save_span_model(tmp_path / "model", reader)
    record = json.loads((saved / SPAN_FILE).read_text())
    (saved / SPAN_FILE).write_text(json.dumps({**record, "version": 99}))
    with pytest.raises(ValueError, match="format version 99"):
        load_span_model(saved)
    (saved / SPAN_FILE).write_text(json.dumps({**record, "model_settings": {**record["model_settings"],
                                                                            "hidden": 9}}))
    with pytest.raises(ValueError, match="does not fit span_model.json"):
        load_span_model(saved)


def test_placement_and_encoder_must_agree(elmo_reader):
    data, _, _, encoder, _ = elmo_reader
    with pytest.raises(ValueError, match="placement 'none' needs no encoder"):
        train_span_model(data, data, encoder, SpanTrainSettings(TINY_SPAN, SPAN, FIT))
