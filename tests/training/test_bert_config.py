"""BERT pretraining settings: the instance fields live in ``InstanceSettings`` alone, while saved
configs keep the flat keys, in the order they have always been written."""

from __future__ import annotations

import dataclasses
import json

import pytest

from contextvec.cli.main import build_parser
from contextvec.cli.train_bert import config_from_args
from contextvec.training.bert.config import PRESETS, BertTrainSettings
from contextvec.training.bert.instances import InstanceSettings

# A config as BertTrainSettings.to_dict wrote it (checkpoints, training.json) before the instance
# fields moved to InstanceSettings: bert-tiny with pool_size 20, seed 3 and whole-word masking.
SAVED = (
    '{"model": {"vocab_size": 1000, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, '
    '"intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, '
    '"attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2, '
    '"layer_norm_eps": 1e-12, "pad_token_id": 0}, "max_seq_length": 64, "batch_size": 8, "lr": 0.001, '
    '"warmup_steps": 10, "max_steps": 200, "weight_decay": 0.01, "clip": 1.0, "masked_lm_prob": 0.15, '
    '"whole_word_mask": true, "short_seq_prob": 0.1, "sentences": true, "pool_size": 20, "lowercase": true, '
    '"bf16": false, "checkpoint_every": 50, "seed": 3}'
)


def test_a_saved_config_loads_and_is_written_back_byte_for_byte(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(SAVED, encoding="utf-8")
    config = BertTrainSettings.from_file(path)
    assert config == dataclasses.replace(PRESETS["bert-tiny"], pool_size=20, seed=3, whole_word_mask=True)
    assert json.dumps(config.to_dict()) == SAVED
    assert config.instances() == InstanceSettings(64, whole_word_mask=True, pool_size=20, seed=3)
    assert type(config.instances()) is InstanceSettings


def test_instance_fields_have_one_home():
    """Defaults and checks of the instance fields are InstanceSettings'; the config adds its own."""
    names = [f.name for f in dataclasses.fields(InstanceSettings)]
    assert [f.name for f in dataclasses.fields(BertTrainSettings)][:len(names)] == names
    assert BertTrainSettings().instances() == InstanceSettings()
    with pytest.raises(ValueError, match=r"^max_seq_length must be >= 5 \(\[CLS\] A .*, not 4$"):
        BertTrainSettings(max_seq_length=4)
    with pytest.raises(ValueError, match="masked_lm_prob must be in \\(0, 1\\), not 1.0"):
        InstanceSettings(masked_lm_prob=1.0)
    with pytest.raises(ValueError, match="exceeds the model's max_position_embeddings 64"):
        dataclasses.replace(PRESETS["bert-tiny"], max_seq_length=65)


def test_the_command_line_sets_the_same_fields():
    args = build_parser("train-bert").parse_args([
        "train-bert", "--train", "x.txt", "--output-dir", "out", "--preset", "bert-tiny",
        "--max-seq-length", "32", "--pool-size", "7", "--whole-word-mask", "--no-sentences", "--seed", "5"])
    config = config_from_args(args)
    assert config.instances() == InstanceSettings(32, whole_word_mask=True, sentences=False, pool_size=7,
                                                  seed=5)
    assert (config.batch_size, config.max_steps) == (8, 200)
