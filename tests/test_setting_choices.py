"""Every mode of a settings object is a string enum, checked once where the value enters: each
spelling is accepted (and stays equal to it, in JSON too), any other is one ``ValueError`` line
naming the choices, and the command line refuses it with exit code 2. Configs written as plain
strings (saved task models, training configs, checkpoints) still load, and what is written now
holds plain strings again."""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from contextvec.cli.main import main
from contextvec.experiments.runner import RunnerSettings
from contextvec.features import FeatureSettings, cache_key
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.jobs.predict import PredictSettings
from contextvec.jobs.train_task import TrainMode, TrainTaskSettings
from contextvec.server.settings import ServerSettings
from contextvec.tasks.models import ModelSettings
from contextvec.training.bilm.config import PRESETS, BiLMTrainSettings
from contextvec.training.mt.config import MTTrainSettings
from contextvec.training.word2vec import WordVectorSettings

ALL_TOKENIZERS = ("whitespace", "moses", "moses-sentences")
LINE_TOKENIZERS = ("whitespace", "moses")


def _task_settings(**given):
    return TrainTaskSettings("trec", TaskFiles("train.label"), TrainMode.NO_CONTEXTUAL,
                             model=ModelSettings(), **given)


def _predict_settings(**given):
    return PredictSettings("model", "in.txt", **given)


# (what is made, its field, the name the error gives, the spellings it takes)
CASES = [
    (ModelSettings, "placement", "placement", ("none", "input", "input+output")),
    (ModelSettings, "layers", "layers", ("mix", "last", "sum_last_4", "concat_last_4")),
    (ModelSettings, "tag_scheme", "tag_scheme", ("bio", "iob1", "bioul")),
    (ModelSettings, "classifier", "classifier", ("pool", "bcn")),
    (EncoderChoice, "precision", "precision", ("fp32", "bf16", "int8")),
    (_predict_settings, "tokenizer", "tokenizer", LINE_TOKENIZERS),
    (_predict_settings, "format", "format", ("text", "task")),
    (_predict_settings, "output_format", "output_format", ("jsonl", "conll", "glue")),
    (ServerSettings, "tokenizer", "tokenizer", LINE_TOKENIZERS),
    (BiLMTrainSettings, "optimizer", "optimizer", ("adagrad", "adam", "sgd")),
    (BiLMTrainSettings, "tokenizer", "tokenizer", ALL_TOKENIZERS),
    (BiLMTrainSettings, "bf16", "bf16", ("off", "softmax", "all")),
    (MTTrainSettings, "optimizer", "optimizer", ("adam", "sgd")),
    (MTTrainSettings, "select", "select", ("bleu", "perplexity")),
    (MTTrainSettings, "bleu_tokenize", "bleu_tokenize", ("none", "13a")),
    (MTTrainSettings, "tokenizer", "tokenizer", LINE_TOKENIZERS),
    (WordVectorSettings, "algorithm", "algorithm", ("word2vec", "fasttext")),
    (WordVectorSettings, "tokenizer", "tokenizer", ALL_TOKENIZERS),
    (FeatureSettings, "dtype", "feature dtype", ("float32", "float16")),
    (lambda **kw: RunnerSettings(Path("out"), **kw), "feature_dtype", "feature dtype",
     ("float32", "float16")),
    (_task_settings, "word_vectors_format", "word-vector format",
     ("auto", "glove", "word2vec", "word2vec-binary")),
]


@pytest.mark.parametrize(("make", "field", "name", "spellings"), CASES,
                         ids=[f"{i}-{case[1]}" for i, case in enumerate(CASES)])
def test_each_spelling_is_taken_and_another_refused_naming_the_choices(make, field, name, spellings):
    for spelling in spellings:
        value = getattr(make(**{field: spelling}), field)
        assert value == spelling and str(value) == spelling and f"{value}" == spelling
        assert json.dumps(value) == json.dumps(spelling)
        assert getattr(make(**{field: value}), field) is value  # the member itself is taken too
    with pytest.raises(ValueError) as error:
        make(**{field: "bogus"})
    assert str(error.value) == f"{name} must be one of {', '.join(spellings)}, not 'bogus'"


def test_a_task_jobs_mode_is_refused_naming_the_modes():
    with pytest.raises(ValueError) as error:
        TrainTaskSettings("trec", TaskFiles("train.label"), "bogus", model=ModelSettings())
    assert str(error.value) == "mode must be one of contextual, no-contextual, fine-tune, not 'bogus'"


@pytest.mark.parametrize(("command", "option", "spellings"), [
    ("train-task", "--placement", ("input", "input+output")),
    ("train-task", "--layers", ("mix", "last", "sum_last_4", "concat_last_4")),
    ("train-task", "--tag-scheme", ("bio", "iob1", "bioul")),
    ("train-task", "--classifier", ("pool", "bcn")),
    ("train-task", "--precision", ("fp32", "bf16", "int8")),
    ("train-task", "--feature-dtype", ("float32", "float16")),
    ("train-task", "--word-vectors-format", ("auto", "glove", "word2vec", "word2vec-binary")),
    ("predict", "--tokenizer", LINE_TOKENIZERS),
    ("train-bilm", "--optimizer", ("adagrad", "adam", "sgd")),
    ("train-bilm", "--tokenizer", ALL_TOKENIZERS),
    ("train-bilm", "--bf16", ("off", "softmax", "all")),
    ("train-mt", "--optimizer", ("adam", "sgd")),
    ("train-mt", "--select", ("bleu", "perplexity")),
    ("train-mt", "--bleu-tokenize", ("none", "13a")),
    ("train-mt", "--tokenizer", LINE_TOKENIZERS),
    ("bleu", "--tokenize", ("none", "13a")),
    ("train-word-vectors", "--algorithm", ("word2vec", "fasttext")),
    ("train-word-vectors", "--tokenizer", ALL_TOKENIZERS),
    ("train-word-vectors", "--format", ("word2vec", "glove", "word2vec-binary")),
])
def test_the_command_line_refuses_an_unknown_choice_with_exit_code_2(command, option, spellings, capsys):
    assert main([command, option, "bogus"]) == 2
    choices = ", ".join(repr(s) for s in spellings)
    assert capsys.readouterr().err.strip() == (f"contextvec {command}: error: argument {option}: invalid "
                                               f"choice: 'bogus' (choose from {choices}) (see contextvec "
                                               f"{command} --help)")


def test_a_saved_task_models_string_settings_load_and_are_written_back_the_same():
    # task.json as every contextvec has written it: the modes as plain strings.
    written = {"placement": "input+output", "layers": "concat_last_4", "tag_scheme": "bioul",
               "classifier": "pool", "hidden": 20}
    settings = ModelSettings(**written)
    assert settings.num_mixes == 2
    again = json.dumps(asdict(settings))
    assert json.loads(again) == {**asdict(ModelSettings()), **written}
    assert json.dumps(asdict(ModelSettings(**json.loads(again)))) == again


def test_training_configs_of_plain_strings_load_and_are_written_as_plain_strings(tmp_path):
    old = {**PRESETS["elmo-en-small"].to_dict(), "optimizer": "sgd", "bf16": "softmax"}
    config = BiLMTrainSettings.from_dict(json.loads(json.dumps(old)))  # as a config file or checkpoint has it
    assert (config.optimizer, config.bf16, config.tokenizer) == ("sgd", "softmax", "moses-sentences")
    written = config.to_dict()
    assert written == old
    assert all(type(v) is str for v in written.values() if isinstance(v, str))  # no enum members
    # A checkpoint's config is read back with weights_only=True: enum members would not load.
    buffer = io.BytesIO()
    torch.save({"config": written, "mt": MTTrainSettings(optimizer="sgd").to_dict()}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert BiLMTrainSettings.from_dict(loaded["config"]) == config
    assert MTTrainSettings.from_dict(loaded["mt"]) == MTTrainSettings(optimizer="sgd")
    assert {type(v) for v in loaded["mt"].values()} <= {str, int, float, bool, type(None)}


def test_the_feature_cache_key_is_the_one_of_the_spelling():
    assert cache_key("m", "d", FeatureSettings(dtype="float16").dtype) == cache_key("m", "d", "float16")
    with pytest.raises(ValueError, match="dtype must be one of float32, float16, not 'float64'"):
        cache_key("m", "d", "float64")


def test_parallel_lines_refuse_a_tokenizer_that_splits_a_line_into_sentences():
    from contextvec.training.mt.data import tokenize_lines

    assert tokenize_lines(["A b. C d."], "moses") == [["A", "b", ".", "C", "d", "."]]  # one list a line
    with pytest.raises(ValueError, match="tokenizer must be one of whitespace, moses, not 'moses-sentences'"):
        tokenize_lines(["A b. C d."], "moses-sentences")
