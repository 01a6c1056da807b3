"""BERT fine-tuning: the task heads (HF names, save/load, first-piece words, QA spans), and
``contextvec train-task --fine-tune`` / ``--layers`` on a tiny random BERT and real task data."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import need_shared, write_tiny_bert
from helpers_task_data import CONLL_DEV, CONLL_TRAIN, SST_DEV, SST_TRAIN
from tolerance import assert_reordered_close, bert_terms

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.bert import BertCheckpointError, BertEncoder, combine_layers
from contextvec.encoders.bert.finetune import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    SpanLogits,
    best_spans,
    context_mask,
    truncated_rows,
    word_rows,
)
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.tasks import load_task_model
from contextvec.tasks.finetune import warmup_linear_decay
from contextvec.tasks.models import FixedLayers, ModelSettings
from contextvec.tasks.train import Split, attach_features, build_task_model, load_split
from contextvec.training.optim import bert_parameter_groups

LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"
PUNCTUATION = ".,;:!?'\"()-&$%/`"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *LETTERS, *PUNCTUATION, *(f"##{c}" for c in LETTERS)]
HEADS = (
    BertForSequenceClassification,
    BertForTokenClassification,
    BertForQuestionAnswering,
    BertForMultipleChoice,
)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models; the machine is shared


def _write_bert(directory: Path, layers: int = 3, pooler: bool = True) -> Path:
    """A tiny random BERT (letters as pieces: real words split into many pieces) as an HF directory."""
    return write_tiny_bert(directory, VOCAB, layers=layers, pooler=pooler)


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> Path:
    return _write_bert(tmp_path_factory.mktemp("tiny-bert") / "model")


@pytest.fixture(scope="module")
def tokenizer(bert_dir) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_directory(bert_dir)


def _load(cls, directory: Path, **kwargs):
    if cls in (BertForQuestionAnswering, BertForMultipleChoice):
        return cls.from_pretrained(directory, **kwargs)
    return cls.from_pretrained(directory, labels=["O", "B-PER", "I-PER"], **kwargs)


# ---------------------------------------------------------------- the heads


def _hf_keys(layers: int, pooler: bool) -> set[str]:
    """HF transformers' state-dict keys of BertModel (written out, not derived from ours)."""
    keys = [
        "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight",
        "embeddings.LayerNorm.weight",
        "embeddings.LayerNorm.bias",
    ]
    per_layer = [
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
        "intermediate.dense",
        "output.dense",
        "output.LayerNorm",
    ]
    keys += [
        f"encoder.layer.{i}.{m}.{p}" for i in range(layers) for m in per_layer for p in ("weight", "bias")
    ]
    if pooler:
        keys += ["pooler.dense.weight", "pooler.dense.bias"]
    return {f"bert.{k}" for k in keys}


def test_state_dict_keys_are_hf_names(bert_dir):
    expected = {
        BertForSequenceClassification: _hf_keys(3, True) | {"classifier.weight", "classifier.bias"},
        BertForTokenClassification: _hf_keys(3, False) | {"classifier.weight", "classifier.bias"},
        BertForQuestionAnswering: _hf_keys(3, False) | {"qa_outputs.weight", "qa_outputs.bias"},
        BertForMultipleChoice: _hf_keys(3, True) | {"classifier.weight", "classifier.bias"},
    }
    shapes = {
        BertForSequenceClassification: (3, 16),
        BertForTokenClassification: (3, 16),
        BertForQuestionAnswering: (2, 16),
        BertForMultipleChoice: (1, 16),
    }
    for cls, keys in expected.items():
        state = _load(cls, bert_dir).state_dict()
        assert set(state) == keys, cls.__name__
        assert tuple(state[f"{cls.head_name}.weight"].shape) == shapes[cls]


def test_new_heads_are_seeded_bert_init(bert_dir, tmp_path):
    a, b = (BertForSequenceClassification.from_pretrained(bert_dir, num_labels=5, seed=3) for _ in range(2))
    assert a.labels == [f"LABEL_{i}" for i in range(5)]
    assert torch.equal(a.classifier.weight, b.classifier.weight) and not a.classifier.bias.any()
    c = BertForSequenceClassification.from_pretrained(bert_dir, num_labels=5, seed=4)
    assert not torch.equal(a.classifier.weight, c.classifier.weight)
    assert 0.01 < float(a.classifier.weight.detach().std()) < 0.03
    # A checkpoint without a pooler (e.g. HF's BertForMaskedLM) gets a new one, BERT-initialised.
    no_pooler = BertForSequenceClassification.from_pretrained(
        _write_bert(tmp_path / "np", pooler=False), num_labels=2
    )
    assert 0.01 < float(no_pooler.bert.pooler.dense.weight.detach().std()) < 0.03
    with pytest.raises(ValueError, match="needs labels or num_labels"):
        BertForSequenceClassification.from_pretrained(bert_dir)
    # A saved head with HF's generic names takes any names for its labels, but not another count.
    saved = a.save_pretrained(tmp_path / "generic")
    named = BertForSequenceClassification.from_pretrained(saved, labels="abcde")
    assert named.labels == list("abcde") and torch.equal(named.classifier.weight, a.classifier.weight)
    with pytest.raises(BertCheckpointError, match="classifier.* weights do not fit"):
        BertForSequenceClassification.from_pretrained(saved, labels="ab")


def _inputs(cls) -> tuple[torch.Tensor, ...]:
    ids = torch.tensor([[2, 10, 11, 3, 12, 13, 3], [2, 14, 3, 15, 3, 0, 0]])
    mask = ids != 0
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0]])
    if cls is BertForMultipleChoice:
        return ids.view(1, 2, -1), mask.view(1, 2, -1), types.view(1, 2, -1)
    return ids, mask, types


def test_save_and_load_give_identical_logits(bert_dir, tmp_path):
    for cls in HEADS:
        model = _load(cls, bert_dir, seed=1)
        with torch.no_grad():  # make the head matter: not a fresh init the reload could repeat
            model.head.weight.normal_()
        out = model.save_pretrained(tmp_path / cls.__name__, tokenizer_dir=bert_dir)
        config = json.loads((out / "config.json").read_text())
        assert config["architectures"] == [cls.__name__] and config["model_type"] == "bert"
        assert (out / "vocab.txt").read_text() == (bert_dir / "vocab.txt").read_text()
        again = cls.from_pretrained(out, seed=2)
        assert again.labels == model.labels and not again.training
        if cls in (BertForSequenceClassification, BertForTokenClassification):
            assert (
                config["id2label"] == {"0": "O", "1": "B-PER", "2": "I-PER"}
                and config["label2id"]["I-PER"] == 2
            )
        with torch.no_grad():
            want, got = model(*_inputs(cls)), again(*_inputs(cls))
        for w, g in zip(
            want if cls is BertForQuestionAnswering else [want],
            got if cls is BertForQuestionAnswering else [got],
            strict=True,
        ):
            assert torch.equal(w, g), cls.__name__
    # The saved directory is also a plain BERT for contextvec.load, and its labels are checked.
    assert isinstance(contextvec.load(tmp_path / "BertForTokenClassification"), BertEncoder)
    with pytest.raises(BertCheckpointError, match="predicts"):
        BertForTokenClassification.from_pretrained(
            tmp_path / "BertForTokenClassification", labels=["O", "B-X"]
        )


def test_first_piece_alignment(bert_dir, tokenizer):
    model = BertForTokenClassification.from_pretrained(bert_dir, labels=["a", "b", "c"])
    sentences = [["ab", "c", "def"], ["gh"]]
    pieces = tokenizer.encode_batch(sentences)
    assert pieces[0].tokens == ["[CLS]", "a", "##b", "c", "d", "##e", "##f", "[SEP]"]
    rows = word_rows(pieces, window=62)
    assert rows.first_row.tolist() == [0, 0, 0, 1] and rows.first_pos.tolist() == [1, 3, 4, 1]
    assert rows.word_mask.tolist() == [[True, True, True], [True, False, False]]
    with torch.no_grad():
        words = model.word_logits(rows)
        pieces_out = model(rows.input_ids, rows.attention_mask)
    assert words.shape == (2, 3, 3) and not words[1, 1:].any()
    torch.testing.assert_close(words[0], pieces_out[0, [1, 3, 4]])
    torch.testing.assert_close(words[1, 0], pieces_out[1, 1])


def test_windowed_words_match_the_encoder(bert_dir, tokenizer):
    """Long sentences: the first piece of each word from its most central window, as BertEncoder."""
    model = BertForTokenClassification.from_pretrained(bert_dir, labels=["a", "b"])
    sentences = [["abc", "de", "f", "ghij", "k", "lmn", "op", "qrstu", "v", "wx"], ["yz", "a"]]
    window = 5
    rows = word_rows(tokenizer.encode_batch(sentences), window)
    assert rows.input_ids.shape[0] > 2 and rows.input_ids.shape[1] == window + 2
    encoder = BertEncoder(model.bert, tokenizer, window=window)
    with torch.no_grad():
        layers, mask = encoder(sentences)
        assert torch.equal(mask, rows.word_mask)
        want = model.classifier(layers[-1])
        # Windows batched in other ways: the same sums in other orders, then the classifier's.
        terms = bert_terms(model.bert.config, window + 2) + model.bert.config.hidden_size
        assert_reordered_close(model.word_logits(rows)[mask], want[mask], terms=terms)


def test_truncated_rows_keep_cls_and_sep(tokenizer):
    pieces = tokenizer.encode_batch([["abcdef"], ["ab"]])
    ids, mask = truncated_rows(pieces, max_pieces=5)
    assert ids.tolist()[0] == [*pieces[0].ids[:4], pieces[0].ids[-1]]
    assert ids.tolist()[1] == [*pieces[1].ids, 0] and mask.sum(1).tolist() == [5, 4]


def test_best_spans_respect_the_constraints():
    torch.manual_seed(0)
    rows, length, max_len = 50, 9, 3
    start, end = torch.randn(rows, length), torch.randn(rows, length)
    allowed = torch.rand(rows, length) < 0.6
    allowed[:, 4] = True
    got_start, got_end, got_score = best_spans(start, end, allowed, max_answer_length=max_len)
    for r in range(rows):
        candidates = [
            (float(start[r, i] + end[r, j]), i, j)
            for i, j in itertools.product(range(length), repeat=2)
            if allowed[r, i] and allowed[r, j] and 0 <= j - i < max_len
        ]
        score, i, j = max(candidates)
        assert (int(got_start[r]), int(got_end[r])) == (i, j) and float(got_score[r]) == pytest.approx(score)
    # The best unconstrained pair (end before start, outside the context) is not chosen.
    start, end = torch.tensor([[0.0, 0, 0, 9, 1, 2]]), torch.tensor([[0.0, 9, 0, 0, 2, 1]])
    types = torch.tensor([[0, 0, 0, 1, 1, 1]])
    context = context_mask(types, torch.ones_like(types))
    assert context.tolist() == [[False, False, False, True, True, False]]  # the closing [SEP] is out
    s, e, _ = best_spans(start, end, context)
    assert (int(s), int(e)) == (3, 4)
    with pytest.raises(ValueError, match="allowed piece"):
        best_spans(start, end, torch.zeros_like(context))


def test_qa_loss_and_multiple_choice(bert_dir):
    logits = SpanLogits(torch.randn(2, 5), torch.randn(2, 5))
    starts, ends = torch.tensor([1, 2]), torch.tensor([3, 9])  # 9: outside the row, ignored
    want = (
        F.cross_entropy(logits.start_logits, starts) + F.cross_entropy(logits.end_logits[:1], ends[:1])
    ) / 2
    torch.testing.assert_close(BertForQuestionAnswering.loss(logits, starts, ends), want)
    choice = BertForMultipleChoice.from_pretrained(bert_dir)
    ids, mask, types = _inputs(BertForMultipleChoice)
    with torch.no_grad():
        scores = choice(ids, mask, types)
        pooled = choice.bert(ids[0], mask[0], types[0]).pooler_output
    assert scores.shape == (1, 2)
    torch.testing.assert_close(scores[0], choice.classifier(pooled)[:, 0])


def test_optimizer_groups_and_schedule(bert_dir):
    model = BertForSequenceClassification.from_pretrained(bert_dir, num_labels=2)
    decay, no_decay = bert_parameter_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)] for p in no_decay["params"]} == {
        n for n in names.values() if n.endswith(".bias") or "LayerNorm" in n
    }
    assert "classifier.weight" in {names[id(p)] for p in decay["params"]} and decay["weight_decay"] == 0.01
    factor = warmup_linear_decay(2, 10)
    assert [factor(s) for s in (0, 1, 2, 6, 10, 11)] == [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]


# ---------------------------------------------------------------- the command


def _run(tmp_path, *argv: str) -> dict:
    need_shared(*argv)
    out = tmp_path / "results.json"
    assert main(["train-task", *argv, "--output", str(out), "--quiet", "--threads", "1"]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _ner_on_20_sentences(bert_dir: Path) -> list[str]:
    """train-task's arguments for NER on the first 20 sentences of CoNLL-2003 with the tiny BERT."""
    return ["ner", "--train", str(CONLL_TRAIN), "--dev", str(CONLL_DEV), "--max-sentences", "20",
            "--model", str(bert_dir)]


def _balanced_sst(source: Path, target: Path, per_class: int) -> Path:
    """The first ``per_class`` negative and positive trees of an SST file, alternating (the files
    start with long runs of one class; their committed excerpts hold three negative trees)."""
    with gzip.open(source, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    negative = [line for line in lines if line[1] in "01"][:per_class]
    positive = [line for line in lines if line[1] in "34"][:per_class]
    target.write_text(
        "\n".join(itertools.chain(*zip(negative, positive, strict=True))) + "\n", encoding="utf-8"
    )
    return target


def test_cli_fine_tune_sst2(tmp_path, bert_dir):
    train = _balanced_sst(SST_TRAIN, tmp_path / "train.txt", 3)
    dev = _balanced_sst(SST_DEV, tmp_path / "dev.txt", 3)
    result = _run(
        tmp_path,
        "sst2",
        "--train",
        str(train),
        "--dev",
        str(dev),
        "--model",
        str(bert_dir),
        "--fine-tune",
        "--epochs",
        "3",
        "--batch-size",
        "1",
        "--lr",
        "3e-3",
        "--save-model",
        str(tmp_path / "sst2-model"),
        "--test",
        str(dev),
    )
    losses = [c["train_loss"] for c in result["curve"]]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert result["labels"] == ["negative", "positive"] and result["metric"] == "accuracy"
    assert result["test"]["accuracy"] == result["dev"]["accuracy"] and result["dev"]["sentences"] == 6
    assert result["model_settings"]["head"] == "BertForSequenceClassification"
    assert result["train_settings"]["lr"] == 3e-3 and result["train_settings"]["warmup"] == 0.1
    assert result["extra"]["fine_tune"] is True and result["extra"]["total_steps"] == 18
    assert result["extra"]["truncated_sentences"]["train"] > 0  # letter pieces: 64 positions overflow
    assert result["runtime_s"]["train_sentences_per_s"] > 0
    saved = BertForSequenceClassification.from_pretrained(tmp_path / "sst2-model")
    assert saved.labels == ["negative", "positive"]
    # The saved model is the best-on-dev one: it reproduces the reported dev accuracy.
    dev_split = load_split("sst2", dev)
    tokenizer = WordPieceTokenizer.from_directory(tmp_path / "sst2-model")
    with torch.no_grad():
        predicted = saved(*truncated_rows(tokenizer.encode_batch(dev_split.sentences), 64)).argmax(-1)
    correct = sum(saved.labels[p] == g for p, g in zip(predicted.tolist(), dev_split.labels, strict=True))
    assert correct == result["dev"]["correct"]
    # Through the task-model API and the predict command: the same scores exactly.
    again = load_task_model(tmp_path / "sst2-model")
    assert again.score(dev_split, again.predict(dev_split.sentences)) == result["dev"]


def test_cli_fine_tune_ner(tmp_path, bert_dir):
    result = _run(
        tmp_path,
        *_ner_on_20_sentences(bert_dir),
        "--fine-tune",
        "--epochs",
        "2",
        "--batch-size",
        "5",
        "--lr",
        "2e-3",
        "--save-model",
        str(tmp_path / "ner-model"),
    )
    saved = load_task_model(tmp_path / "ner-model")
    dev = saved.spec.load(CONLL_DEV, 20)
    assert saved.score(dev, saved.predict(dev.sentences)) == result["dev"]
    losses = [c["train_loss"] for c in result["curve"]]
    assert len(losses) == 2 and losses[1] < losses[0]
    assert result["labels"][0] == "O" and all(t[:2] in ("B-", "I-") for t in result["labels"][1:])
    assert {"f1", "precision", "recall", "f1_strict", "per_type"} <= set(result["dev"])
    assert result["model_settings"]["head"] == "BertForTokenClassification"
    assert result["model_settings"]["long_sentences"] == "sliding window"
    assert result["extra"]["windowed_sentences"]["train"] > 0
    assert result["splits"]["train"]["sentences"] == 20 and result["mixes"] == []


def test_fixed_layer_combinations(tmp_path, bert_dir):
    encoder = contextvec.load(bert_dir)
    sentences = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    split = Split(sentences, [["I-ORG", "O", "I-MISC", "O"], ["I-PER", "I-PER"]], "s")
    attach_features(encoder, [split], layers="sum_last_4", cache_dir=tmp_path / "cache", progress=False)
    layers = encoder.embed(sentences)
    # Other batches, other summation orders; then a sum of 4 layers.
    pieces = max(len(encoder.tokenizer.encode_words(s).ids) for s in sentences)
    terms = bert_terms(encoder.model.config, pieces) + 4
    for got, full in zip(split.features, layers, strict=True):
        assert_reordered_close(got, combine_layers(full, "sum_last_4")[None], terms=terms)
    concat = FixedLayers(encoder, "concat_last_4")
    assert concat.output_dim == 64 and concat(sentences).layers.shape == (1, 2, 4, 64)
    for how, penalised in (("sum_last_4", False), ("mix", True)):
        model, _ = build_task_model("ner", split, [], ModelSettings(placement="input", layers=how), encoder)
        with torch.no_grad():
            model.contextual.mixes[0].weights.fill_(1.0)
        assert (float(model.mix_penalty(1.0).detach()) > 0) is penalised
    with pytest.raises(ValueError, match="at least 4 layers"):
        FixedLayers(contextvec.load(_write_bert(tmp_path / "two", layers=2)), "sum_last_4")


def test_cli_layers_sum_last_4(tmp_path, bert_dir):
    result = _run(
        tmp_path,
        *_ner_on_20_sentences(bert_dir),
        "--layers",
        "sum-last-4",
        "--epochs",
        "1",
        "--hidden",
        "8",
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert result["model_settings"]["layers"] == "sum_last_4"
    assert result["mixes"] == [{"weights": [1.0], "gamma": 1.0}]
    assert result["extra"]["fine_tune"] is False and "f1" in result["dev"]


def test_cli_fine_tune_errors(tmp_path, tiny_dir, bert_dir, capsys):
    data = ["train-task", "sst2", "--train", str(SST_TRAIN), "--dev", str(SST_DEV), "--max-sentences", "5"]
    assert main([*data, "--fine-tune", "--model", str(tiny_dir), "--quiet"]) == 2
    assert "not a Hugging Face BERT directory" in capsys.readouterr().err
    assert main([*data, "--fine-tune", "--quiet"]) == 2
    assert "--fine-tune needs --model" in capsys.readouterr().err
    assert main([*data, "--fine-tune", "--model", str(bert_dir), "--layers", "last"]) == 2
    assert "--layers/--last-layer-only" in capsys.readouterr().err
    assert main([*data, "--layers", "mix", "--last-layer-only", "--model", str(bert_dir)]) == 2
    assert "contradicts" in capsys.readouterr().err
