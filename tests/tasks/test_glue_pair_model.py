"""The sentence-pair model (GLUE's MRPC, RTE, STS-B, WNLI on frozen features) and ``train-task``
on pair tasks end to end."""

from __future__ import annotations

import json
import random

import pytest
import torch
from conftest import SHARED, need_shared
from helpers_task_data import tiny_elmo
from tolerance import assert_reordered_close, elmo_terms

from contextvec.cli.main import main
from contextvec.tasks.models import ModelSettings, PairModel, pair_batch
from contextvec.tasks.split import Split
from contextvec.tasks.train import TrainSettings, build_task_model, train_task

COLOURS = ["red", "blue", "green", "black"]
FILLER = ["the", "a", "car", "is", "was", "house", "seen"]
SMALL = {"word_dim": 16, "char_cnn": False, "hidden": 12, "mlp_hidden": 16, "lstm_layers": 1, "dropout": 0.0,
         "word_unk_rate": 0.0}
GLUE = SHARED / "tasks" / "glue"


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # the CI box is shared; these models are tiny


def _pairs(n: int, rng: random.Random, score: bool = False) -> Split:
    """Pairs whose label needs both sentences: the same colour in each ("1", or the score 5) or not
    ("0", 0); the colours alone say nothing (each is as often in a match as not)."""
    first, second, labels = [], [], []
    for _ in range(n):
        a = rng.choice(COLOURS)
        same = rng.random() < 0.5
        b = a if same else rng.choice([c for c in COLOURS if c != a])
        first.append(rng.sample(FILLER, rng.randint(1, 4)) + [a])
        second.append([b] + rng.sample(FILLER, rng.randint(1, 4)))
        labels.append((5.0 if same else 0.0) if score else ("1" if same else "0"))
    return Split(first, labels, "synthetic pairs", second=second)


def test_pair_model_learns_a_label_that_needs_both_sentences():
    rng = random.Random(0)
    settings = TrainSettings(epochs=6, patience=6, lr=0.03, batch_size=16, progress=False)
    train, dev = _pairs(96, rng), _pairs(40, rng)
    report, model = train_task("mrpc", train, dev, None, ModelSettings(**SMALL), settings)
    assert isinstance(model, PairModel) and report.metric == "f1" and model.labels == ["0", "1"]
    losses = [epoch["train_loss"] for epoch in report.curve]
    assert losses[-1] < 0.5 * losses[0]
    assert report.dev["accuracy"] > 0.9 and report.dev["f1"] > 0.9


def _model(task: str, train: Split, **settings: object) -> tuple[PairModel, object]:
    torch.manual_seed(0)
    model, indexer = build_task_model(task, train, [], ModelSettings(**{**SMALL, **settings}))
    return model.eval(), indexer


def test_regression_gives_one_float_per_pair_and_trains_with_mse():
    data = _pairs(6, random.Random(1), score=True)
    model, indexer = _model("stsb", data)
    assert model.regression and indexer.labels == [] and model.mlp[-1].out_features == 1
    batch = pair_batch(indexer, data.sentences, data.second, data.labels)
    with torch.no_grad():
        out = model.outputs(batch)
        predicted = model.predict(batch)
        loss = model.loss(batch)
    assert out.shape == (6,) and batch.targets.dtype == torch.float32
    assert all(isinstance(p, float) for p in predicted) and predicted == pytest.approx(out.tolist())
    expected = ((out - torch.tensor(data.labels)) ** 2).mean()
    torch.testing.assert_close(loss, expected)


def test_swapping_the_sentences_swaps_u_and_v():
    data = _pairs(5, random.Random(2))
    model, indexer = _model("rte", data)
    with torch.no_grad():
        u, v = model.pooled(pair_batch(indexer, data.sentences, data.second))
        swapped_u, swapped_v = model.pooled(pair_batch(indexer, data.second, data.sentences))
    assert u.shape == (5, 4 * SMALL["hidden"])
    torch.testing.assert_close(swapped_u, v, rtol=0, atol=0)
    torch.testing.assert_close(swapped_v, u, rtol=0, atol=0)
    assert not torch.equal(u, v)


def test_a_pairs_prediction_does_not_depend_on_its_batch():
    data = _pairs(8, random.Random(3))
    data.second[0] = data.second[0] + FILLER  # padding on both sides in the batch
    model, indexer = _model("wnli", data)
    with torch.no_grad():
        together = model.outputs(pair_batch(indexer, data.sentences, data.second))
        alone = torch.cat([model.outputs(pair_batch(indexer, [a], [b]))
                           for a, b in zip(data.sentences, data.second, strict=True)])
    # The biLSTM's steps (16 word inputs, 12 states), the attention over 24 dims, the MLP's 192 and 16.
    assert_reordered_close(together, alone, terms=(16 + 12) + 24 + 192 + 16)


def test_precomputed_layers_of_both_sentences_equal_running_the_encoder():
    encoder = tiny_elmo()
    data = _pairs(4, random.Random(4))
    torch.manual_seed(0)
    model, indexer = build_task_model("rte", data, [], ModelSettings(**SMALL, placement="input+output"),
                                      encoder)
    model.eval()
    layers = (list(encoder.embed(data.sentences)), list(encoder.embed(data.second)))
    with torch.no_grad():
        on_the_fly = model.outputs(pair_batch(indexer, data.sentences, data.second))
        precomputed = model.outputs(pair_batch(indexer, data.sentences, data.second, layers=layers))
    # ELMo in another batch, then the biLSTM (16 word + 32 ELMo inputs, 12 states), the output
    # mix beside it (24 + 32), the attention, the MLP over 4 * 2 * 56 and 16.
    terms = elmo_terms(encoder.config) + (16 + 32 + 12) + (24 + 32) + 112 + 448 + 16
    assert_reordered_close(on_the_fly, precomputed, terms=terms)


def test_a_pair_task_refuses_single_sentences_and_the_bcn():
    pairs = _pairs(4, random.Random(5))
    with pytest.raises(ValueError, match="mrpc is a pair task, synthetic has single sentences"):
        build_task_model("mrpc", Split(pairs.sentences, pairs.labels, "synthetic"), [],
                         ModelSettings(**SMALL))
    with pytest.raises(ValueError, match="classifier 'bcn' is for sentence classification, not mrpc"):
        build_task_model("mrpc", pairs, [], ModelSettings(**SMALL, classifier="bcn"))


# ---------------------------------------------------------------- the command


def _run(tmp_path, task: str, folder: str, *argv: str) -> dict:
    train = GLUE / folder / "train.tsv.gz"
    need_shared(train)
    out = tmp_path / f"{task}.json"
    assert main(["train-task", task, "--train", str(train), "--max-sentences", "40", "--epochs", "1",
                 "--hidden", "8", "--word-dim", "8", "--output", str(out), "--overwrite", "--quiet",
                 "--threads", "1", "--cache-dir", str(tmp_path / "cache"), *argv]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("contextual", [("--no-contextual",), ("--model", "elmo-en-small")])
def test_train_task_mrpc_and_stsb_report_their_glue_metrics(tmp_path, contextual):
    mrpc = _run(tmp_path, "mrpc", "MRPC", *contextual)
    assert mrpc["metric"] == "f1" and {"f1", "accuracy"} <= set(mrpc["dev"]) and mrpc["labels"] == ["0", "1"]
    assert mrpc["splits"]["train"]["sentences"] == 36 and mrpc["splits"]["dev"]["sentences"] == 4
    assert mrpc["extra"]["dev_carved_from_train"] is True
    stsb = _run(tmp_path, "stsb", "STS-B", *contextual)
    assert stsb["metric"] == "spearman" and {"pearson", "spearman"} <= set(stsb["dev"])
    assert -1 <= stsb["dev"]["spearman"] <= 1 and stsb["labels"] == []
    assert stsb["curve"][0]["dev_spearman"] == pytest.approx(stsb["dev"]["spearman"], abs=1e-5)
    contextual_run = contextual[0] == "--model"
    for report in (mrpc, stsb):
        assert report["extra"]["contextual"] is contextual_run
        assert [len(mix["weights"]) for mix in report["mixes"]] == ([3] if contextual_run else [])
