"""Names renamed in 0.2.0 still import for one version: each old name warns once per use with a
DeprecationWarning naming its new name, and is the new class."""

from __future__ import annotations

import importlib
import warnings

import pytest

RENAMED = [
    ("contextvec.training", "TrainConfig", "BiLMTrainSettings"),
    ("contextvec.training.bilm.config", "TrainConfig", "BiLMTrainSettings"),
    ("contextvec.training.mt.config", "MTTrainConfig", "MTTrainSettings"),
    ("contextvec.training.bert.config", "BertTrainConfig", "BertTrainSettings"),
    ("contextvec.training.word2vec", "WordVectorConfig", "WordVectorSettings"),
]
EXTRAS = {"contextvec.training.word2vec": "gensim"}


@pytest.mark.parametrize(("module_name", "old", "new"), RENAMED)
def test_an_old_name_warns_and_is_the_new_class(module_name, old, new):
    if module_name in EXTRAS:
        pytest.importorskip(EXTRAS[module_name], reason=f"the extra of {module_name} is not installed")
    module = importlib.import_module(module_name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        current = getattr(module, new)
        assert caught == []
        assert getattr(module, old) is current
    assert [(w.category, str(w.message)) for w in caught] == [
        (DeprecationWarning, f"{module_name}.{old} is renamed {new}; the old name goes in 0.3.0")]
    assert caught[0].filename == __file__  # the warning points at the caller's line
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        module.NoSuchName  # noqa: B018


def test_from_import_of_an_old_name_warns():
    with pytest.warns(DeprecationWarning, match="TrainConfig is renamed BiLMTrainSettings"):
        from contextvec.training import TrainConfig
    from contextvec.training import BiLMTrainSettings

    assert TrainConfig is BiLMTrainSettings
