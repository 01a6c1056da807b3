"""Reading a sentence-transformers model's declared sentence embedding (modules.json & co.)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextvec.io.sentence_transformers import (
    SentencePipelineError,
    SentencePooling,
    read_sentence_pooling,
)

TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}


def write(directory: Path, modules: list, pooling: dict | None = None, settings: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "modules.json").write_text(json.dumps(modules))
    if pooling is not None:
        (directory / "1_Pooling").mkdir(exist_ok=True)
        (directory / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    if settings is not None:
        (directory / "sentence_bert_config.json").write_text(json.dumps(settings))
    return directory


def test_minilm_declares_mean_pooling_normalised(minilm_dir):
    assert read_sentence_pooling(minilm_dir) == SentencePooling(
        modes=("mean_tokens",), normalize=True, max_seq_length=256, lowercase=False)


def test_no_modules_json_is_no_declaration(tmp_path):
    assert read_sentence_pooling(tmp_path) is None


def test_several_modes_come_in_sentence_transformers_order(tmp_path):
    pooling = {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True,
               "pooling_mode_max_tokens": False, "word_embedding_dimension": 8}
    found = read_sentence_pooling(write(tmp_path, [TRANSFORMER, POOLING], pooling,
                                        {"max_seq_length": 128, "do_lower_case": True}))
    assert found == SentencePooling(modes=("cls_token", "mean_tokens"), normalize=False,
                                    max_seq_length=128, lowercase=True)


@pytest.mark.parametrize(("modules", "pooling", "words"), [
    ([TRANSFORMER, POOLING, {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}],
     {"pooling_mode_mean_tokens": True}, "'sentence_transformers.models.Dense' (2_Dense), which contextvec"),
    ([TRANSFORMER, NORMALIZE], None, "no Pooling module"),
    ([TRANSFORMER, POOLING], {"pooling_mode_mean_tokens": False}, "modes none are not ones"),
    ([TRANSFORMER, POOLING], {"pooling_mode_attention": True}, "['pooling_mode_attention']"),
    ({"not": "a list"}, None, "expected a list of modules"),
])
def test_what_contextvec_cannot_run_is_refused_in_one_line(tmp_path, modules, pooling, words):
    with pytest.raises(SentencePipelineError) as error:
        read_sentence_pooling(write(tmp_path, modules, pooling))
    assert words in str(error.value) and "\n" not in str(error.value)


def test_unreadable_files_name_the_file(tmp_path):
    write(tmp_path, [TRANSFORMER, POOLING])   # the Pooling module's config.json is missing
    with pytest.raises(SentencePipelineError, match=r"1_Pooling/config.json: cannot read it"):
        read_sentence_pooling(tmp_path)
    (tmp_path / "modules.json").write_text("{not json")
    with pytest.raises(SentencePipelineError, match=r"modules.json: cannot read it"):
        read_sentence_pooling(tmp_path)
