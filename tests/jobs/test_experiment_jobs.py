"""The experiment jobs through their Python API (no command line): a tiny TREC file written
here, the seeded tiny ELMo and a seeded tiny CoVe."""

from __future__ import annotations

import pytest
import torch
from helpers_tasks import THINGS, write_trec

from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder
from contextvec.experiments import RunnerSettings
from contextvec.jobs.choice import EncoderChoice, TaskFiles
from contextvec.jobs.experiments import (
    Analysis,
    AnalysisSettings,
    RepresentationsSettings,
    run_analysis,
    run_representations,
)
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.train import TrainSettings


def _trec(path):
    return TaskFiles(write_trec(path))


def test_layers_analysis_job_runs_resumes_and_reports(tmp_path, own_tiny_dir):
    runner = RunnerSettings(tmp_path / "out", cache_dir=tmp_path / "cache", progress=False,
                            log=lambda _: None)
    settings = AnalysisSettings(
        Analysis.LAYERS, "trec", _trec(tmp_path / "train.label"), runner,
        ModelSettings(word_dim=8, char_cnn=False, hidden=8, lstm_layers=1, placement="input"),
        TrainSettings(epochs=1, lr=0.01, progress=False), (0,), EncoderChoice(str(own_tiny_dir)), threads=1)
    result = run_analysis(settings)
    assert (result.trained, result.reused) == (3, 0) and result.metric == "accuracy"
    assert [line.split(",")[0] for line in result.lines] == ["last layer", "all layers", "all layers"]
    assert {p.name for p in result.files} == {"results.json", "results.csv", "results.md", "layers.png",
                                              "layer_weights.png"}
    assert result.markdown.startswith("# layers: trec")
    again = run_analysis(settings)  # every run is stored: none trains again
    assert (again.trained, again.reused) == (0, 3) and again.markdown == result.markdown
    with pytest.raises(ValueError, match="needs contextual vectors"):
        AnalysisSettings("layers", "trec", settings.files, runner, ModelSettings(), TrainSettings(), (0,))


def test_representations_job_adds_a_task_to_the_table(tmp_path):
    generator = torch.Generator().manual_seed(0)
    words = sorted({"how", "many", "are", "there", "?", "where", "is", "the", "city", *THINGS})
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=8, hidden_size=4, lowercase=True), words,
                     torch.randn(len(words), 8, generator=generator))
    cove = save_cove_encoder(mt_lstm, tmp_path / "cove")
    runner = RunnerSettings(tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    lines: list[str] = []
    settings = RepresentationsSettings(
        "trec", _trec(tmp_path / "train.label"), runner, TrainSettings(epochs=1, lr=0.01, progress=False),
        names=("words+cove", "words"), seeds=(0,), hidden=8, char_ngrams=4, cove=str(cove), threads=1,
        log=lines.append)
    assert settings.names == ("words", "words+cove")  # table order
    result = run_representations(settings)
    assert lines[0].startswith("experiment representations trec: BCN hidden 8, dropout 0.3; "
                               "--max-train 1000: 36 of the 36 training sentences")
    assert (result.trained, result.reused) == (2, 0) and "| words+cove − words |" in result.markdown
    with pytest.raises(ValueError, match="names one twice"):
        RepresentationsSettings("trec", settings.files, runner, TrainSettings(), seeds=(1, 1))
