"""``train-bilm --init MODEL`` without a preset continues the model with its own recorded settings
(at a fine-tuning learning rate), prints perplexity before and after, and does not make the
bundled model worse on text of its own domain."""

from __future__ import annotations

import gzip
import itertools
import json

import pytest
import torch
from conftest import shared_file

from contextvec.cli.main import main
from contextvec.training.bilm.model_files import FINE_TUNING_LR_FACTOR, fine_tuning_config, load_model
from contextvec.training.bilm.trainer import Trainer

# A shard of the bundled model's corpus that its training never read (see its training.json);
# the excerpt of its first lines in tests/data serves where ../shared is absent.
WIKI = "corpora/wikipedia-en-2015/part-008.txt.gz"


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_fine_tuning_settings_come_from_the_models_record():
    model, _ = load_model("elmo-en-small")
    config = fine_tuning_config("elmo-en-small", model.config)
    # The bundled model's run: Adam at 1e-3, 64 x 20 windows, Moses sentences; fine-tuning
    # takes the full softmax.
    assert (config.optimizer, config.rows, config.unroll, config.negatives, config.tokenizer) == (
        "adam", 64, 20, 0, "moses-sentences")
    assert config.lr == pytest.approx(1e-3 * FINE_TUNING_LR_FACTOR)
    assert config.model == model.config and config.epochs == 1 and config.max_steps is None


def test_a_model_without_a_record_gets_the_documented_default(tmp_path):
    model, vocab = load_model("elmo-en-small")
    from contextvec.training.bilm.model_files import save_model

    save_model(model, vocab, tmp_path / "bare")
    config = fine_tuning_config(tmp_path / "bare", model.config)
    assert config.optimizer == "adagrad" and config.lr == pytest.approx(0.2 * FINE_TUNING_LR_FACTOR)


def test_init_replaces_the_configs_model_with_the_initial_models(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat sat .\n" * 5, encoding="utf-8")
    from contextvec.training.bilm.config import PRESETS

    trainer = Trainer(PRESETS["tiny"], [str(text)], tmp_path / "out", init="elmo-en-small",
                      progress=False, log=lambda m: None)
    assert trainer.config.model == trainer.model.config != PRESETS["tiny"].model


@pytest.mark.slow
def test_fine_tuning_the_bundled_model_on_its_domain_does_not_raise_its_perplexity(tmp_path, capsys):
    with gzip.open(shared_file(WIKI), "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, 245))
    assert len(lines) == 245
    valid, train = tmp_path / "valid.txt", tmp_path / "train.txt"
    valid.write_text("".join(lines[:61]), encoding="utf-8")  # the first 2 articles
    # The next 10 articles: a few more 64 x 20 windows than the steps read.
    train.write_text("".join(lines[62:]), encoding="utf-8")
    code = main(["train-bilm", "--init", "elmo-en-small", "--train", str(train), "--valid", str(valid),
                 "--output-dir", str(tmp_path / "out"), "--max-steps", "8", "--threads", "1",
                 "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "with its recorded settings: adam" in printed
    before = float(printed.split("perplexity before fine-tuning: ")[1].split()[0])
    after = float(printed.split("perplexity after fine-tuning: ")[1].split("average ")[1].split()[0])
    assert 100 < before < 300  # the bundled model on its own domain
    assert after <= before
    record = json.loads((tmp_path / "out" / "model" / "training.json").read_text(encoding="utf-8"))
    assert record["steps"] == 8 and record["init"]["model"] == "elmo-en-small"
