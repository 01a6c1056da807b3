"""BERT fine-tuning on GLUE's sentence pairs and regression: pair rows as HF builds them, the
regression head (HF's names and problem_type), and ``train-task --fine-tune`` on MRPC and STS-B
end to end with the saved model scoring dev exactly as training reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import SHARED, need_shared, write_tiny_bert
from tolerance import assert_reordered_close, bert_terms

from contextvec.cli.main import main
from contextvec.encoders.bert import BertCheckpointError
from contextvec.encoders.bert.finetune import BertForSequenceClassification, longest_first, pair_rows
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.tasks import load_task_model
from contextvec.tasks.finetune import PieceSplit
from contextvec.tasks.spec import get_task
from contextvec.tasks.split import Split

GLUE = SHARED / "tasks" / "glue"
LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"
PUNCTUATION = ".,;:!?'\"()-&$%/`"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *LETTERS, *PUNCTUATION, *(f"##{c}" for c in LETTERS)]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models; the machine is shared


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> Path:
    """A tiny random BERT with letters as pieces: GLUE pairs overflow its 64 positions."""
    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert") / "model", VOCAB)


# ---------------------------------------------------------------- pair rows


def test_pair_rows_are_what_hf_tokenizers_build(minilm_dir):
    """[CLS] A [SEP] B [SEP], segment ids, and longest-first truncation, against HF's tokenizer."""
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(minilm_dir)
    ours = WordPieceTokenizer.from_directory(minilm_dir)
    a = ["the", "unbelievably", "quick", "fox", "jumped", "over", "seven", "lazy", "dogs"]
    b = ["a", "fox", "jumps"]
    cases = [(a, b, 512), (a, b, 10), (b, a, 10), (a, a, 12), (a, a, 13), (a[:2], a, 8), (a, b[:1], 6)]
    for first, second, max_pieces in cases:
        want = hf(first, second, is_split_into_words=True, truncation="longest_first", max_length=max_pieces)
        rows = pair_rows(ours.encode_batch([first]), ours.encode_batch([second]), max_pieces)
        assert rows.input_ids[0].tolist() == want["input_ids"], (first, second, max_pieces)
        assert rows.token_type_ids[0].tolist() == want["token_type_ids"]
        full = len(hf(first, second, is_split_into_words=True)["input_ids"])
        assert bool(rows.truncated[0]) == (full > max_pieces)
    # A batch: padded rows, segment 0 at padding, the [SEP]s at the ends of both segments.
    pieces_a, pieces_b = ours.encode_batch([a, b]), ours.encode_batch([b, b])
    rows = pair_rows(pieces_a, pieces_b, 512)
    sep = ours.encode_batch([["x"]])[0].ids[-1]
    for i in range(2):
        n = int(rows.attention_mask[i].sum())
        seps = (rows.input_ids[i, :n] == sep).nonzero().flatten().tolist()
        assert seps == [len(pieces_a[i].ids) - 1, n - 1]
        assert rows.token_type_ids[i, :n].tolist() == [0] * (seps[0] + 1) + [1] * (n - seps[0] - 1)
        assert not rows.token_type_ids[i, n:].any() and not rows.input_ids[i, n:].any()
    with pytest.raises(ValueError, match="second ones"):
        pair_rows(pieces_a, pieces_b[:1], 512)


def test_longest_first_keeps_the_budget():
    for first in range(0, 12):
        for second in range(0, 12):
            for budget in range(2, 14):
                keep_a, keep_b = longest_first(first, second, budget)
                assert keep_a <= first and keep_b <= second
                assert keep_a + keep_b == min(first + second, budget)
                if first + second > budget:  # the shorter one loses pieces only if it is over half
                    assert min(keep_a, keep_b) == min(first, second, budget // 2)


# ---------------------------------------------------------------- the regression head


def _pair_batch(tokenizer: WordPieceTokenizer):
    first = [["a", "cat", "sat"], ["dogs", "bark", "loudly", "at", "night"]]
    second = [["the", "cat", "sits"], ["a", "dog"]]
    return pair_rows(tokenizer.encode_batch(first), tokenizer.encode_batch(second), 64)


def test_regression_head_is_hf_regression(bert_dir, tmp_path):
    from transformers import BertForSequenceClassification as HFBertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(bert_dir, regression=True, seed=3)
    assert model.regression and model.classifier.weight.shape == (1, 16)
    saved = model.save_pretrained(tmp_path / "stsb", tokenizer_dir=bert_dir)
    config = json.loads((saved / "config.json").read_text())
    assert config["problem_type"] == "regression" and len(config["id2label"]) == 1
    rows = _pair_batch(WordPieceTokenizer.from_directory(saved))
    hf = HFBertForSequenceClassification.from_pretrained(saved).eval()
    assert hf.config.problem_type == "regression" and hf.num_labels == 1
    targets = torch.tensor([4.2, 0.6])
    with torch.no_grad():
        ours = model(rows.input_ids, rows.attention_mask, rows.token_type_ids)
        theirs = hf(input_ids=rows.input_ids, attention_mask=rows.attention_mask.long(),
                    token_type_ids=rows.token_type_ids, labels=targets)
    terms = bert_terms(model.config, rows.input_ids.shape[1]) + 2 * model.config.hidden_size
    assert_reordered_close(ours, theirs.logits, terms=terms)
    assert_reordered_close(F.mse_loss(ours[:, 0], targets), theirs.loss, terms=terms)
    # Token types matter: segment 1 embeddings are read.
    with torch.no_grad():
        assert not torch.equal(ours, model(rows.input_ids, rows.attention_mask))
    again = BertForSequenceClassification.from_pretrained(saved)  # the config says regression
    assert again.regression and torch.equal(again.classifier.weight, model.classifier.weight)
    with pytest.raises(BertCheckpointError, match="regression head"):
        BertForSequenceClassification.from_pretrained(saved, labels=["0", "1"])
    classifier = BertForSequenceClassification.from_pretrained(bert_dir, labels=["0", "1"])
    out = classifier.save_pretrained(tmp_path / "mrpc")
    assert json.loads((out / "config.json").read_text())["problem_type"] == "single_label_classification"
    assert not BertForSequenceClassification.from_pretrained(out).regression
    with pytest.raises(BertCheckpointError, match="not one regression output"):
        BertForSequenceClassification.from_pretrained(out, regression=True)


def test_piece_split_pairs_regression_loss_and_predictions(bert_dir):
    tokenizer = WordPieceTokenizer.from_directory(bert_dir)
    spec = get_task("stsb")
    first = [["a", "cat", "sat"], ["dogs", "bark", "loudly", "at", "night", "every", "night", "again"]]
    second = [["the", "cat", "sits"], ["a", "dog", "barks", "all", "night", "long", "and", "loud"]]
    split = Split(first, [4.0, 1.5], "pairs", second=second)
    data = PieceSplit(split, tokenizer, spec, 32, label_ids={})
    singles = [len(p.ids) for p in tokenizer.encode_batch(first)]
    seconds = [len(p.ids) for p in tokenizer.encode_batch(second)]
    full = [x + y - 1 for x, y in zip(singles, seconds, strict=True)]
    assert full[1] > 32 >= full[0]
    assert data.lengths == [full[0], 32] and data.long_sentences == 1
    model = BertForSequenceClassification.from_pretrained(bert_dir, regression=True, seed=1)
    rows = pair_rows(tokenizer.encode_batch(first), tokenizer.encode_batch(second), 32)
    with torch.no_grad():
        want = model(rows.input_ids, rows.attention_mask, rows.token_type_ids)[:, 0]
        loss = data.loss(model, [0, 1], "cpu")
    assert rows.input_ids.shape[1] == 32 and bool(rows.truncated[1])
    torch.testing.assert_close(loss, F.mse_loss(want, torch.tensor([4.0, 1.5])), rtol=0, atol=0)
    predicted = data.predict(model, 64, "cpu")
    assert all(isinstance(p, float) for p in predicted)
    assert_reordered_close(torch.tensor(predicted), want, terms=bert_terms(model.config, 32))


# ---------------------------------------------------------------- train-task --fine-tune end to end


@pytest.mark.parametrize("task, folder, epochs", [("mrpc", "MRPC", 1), ("stsb", "STS-B", 2),
                                                  ("cola", "CoLA", 1)])
def test_cli_fine_tune_glue_and_the_saved_model_scores_dev_exactly(tmp_path, bert_dir, capsys, task,
                                                                   folder, epochs):
    """36 items of train: 32 to train on, 4 carved out as dev; letter pieces overflow 64 positions."""
    train = GLUE / folder / "train.tsv.gz"
    need_shared(train)
    spec = get_task(task)
    out = tmp_path / "report.json"
    assert main(["train-task", task, "--train", str(train), "--max-sentences", "36", "--fine-tune",
                 "--model", str(bert_dir), "--epochs", str(epochs), "--batch-size", "16", "--lr", "1e-3",
                 "--save-model", str(tmp_path / "m"), "--output", str(out), "--quiet", "--threads", "1"]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    metric = {"mrpc": "f1", "stsb": "spearman", "cola": "mcc"}[task]
    also = {"mrpc": {"accuracy"}, "stsb": {"pearson"}, "cola": {"accuracy"}}[task]
    assert report["metric"] == metric and {metric, *also} <= set(report["dev"])
    # The kept epoch is the best on the task's metric (the earlier one on a tie).
    curve = [epoch[f"dev_{metric}"] for epoch in report["curve"]]
    assert len(curve) == epochs and report["best_epoch"] == 1 + curve.index(max(curve))
    settings = report["model_settings"]
    assert settings["pair"] is spec.pair and settings["regression"] is spec.regression
    assert report["extra"]["total_steps"] == 2 * epochs and report["splits"]["dev"]["sentences"] == 4
    if spec.pair:  # counted, and cut longest-first
        assert report["extra"]["truncated_pairs"]["train"] > 0
        assert settings["long_sentences"] == "truncated longest-first"
    else:
        assert "truncated_sentences" in report["extra"] and settings["long_sentences"] == "truncated"
    assert report["labels"] == ([] if spec.regression else ["0", "1"])
    saved = load_task_model(tmp_path / "m")
    _, dev, _ = spec.load_splits(train, None, max_sentences=36)
    predicted = saved.predict(dev.sentences, second=dev.second)
    assert all(isinstance(p, float if spec.regression else str) for p in predicted)
    assert saved.score(dev, predicted) == report["dev"]  # every figure, exactly
    task_json = json.loads((tmp_path / "m" / "task.json").read_text(encoding="utf-8"))
    assert (task_json["pair"], task_json["regression"]) == (spec.pair, spec.regression)
    hf_config = json.loads((tmp_path / "m" / "config.json").read_text(encoding="utf-8"))
    assert hf_config["problem_type"] == ("regression" if spec.regression else "single_label_classification")
    # The command prints every GLUE metric of the task against a labeled file.
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "m"), str(train), "--format", "task", "--max-sentences", "36",
                 "--score", "--quiet"]) == 0
    line = capsys.readouterr().out
    unit = "pairs" if spec.pair else "sentences"
    assert line.startswith(f"{task} {metric} ") and f" on 36 {unit} of " in line
    assert all(f"; {name} " in line for name in also)
