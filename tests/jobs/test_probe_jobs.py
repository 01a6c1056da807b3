"""The probe jobs through their Python API (no command line): a tiny CoNLL-U file and a tiny
corpus written here, the seeded tiny ELMo."""

from __future__ import annotations

import json

import pytest

from contextvec.features import FeatureSettings
from contextvec.jobs.choice import EncoderChoice
from contextvec.jobs.probes import (
    NeighboursSettings,
    PosProbeSettings,
    run_neighbours,
    run_pos_probe,
)
from contextvec.probes.linear import ProbeSettings
from contextvec.probes.neighbours import ContextSearch

SENTENCES = [[("the", "DET"), ("dog", "NOUN"), ("runs", "VERB")],
             [("a", "DET"), ("cat", "NOUN"), ("sleeps", "VERB"), ("quietly", "ADV")],
             [("the", "DET"), ("bird", "NOUN"), ("sings", "VERB")]]


def _conllu(path, repeat: int):
    blocks = []
    for _ in range(repeat):
        for sentence in SENTENCES:
            rows = [f"{i}\t{w}\t{w}\t{tag}\t_\t_\t0\tdep\t_\t_" for i, (w, tag) in enumerate(sentence, 1)]
            blocks.append("\n".join(rows) + "\n")
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def test_pos_probe_job_reports_every_layer_and_the_mix(tmp_path, own_tiny_dir):
    settings = PosProbeSettings(
        _conllu(tmp_path / "train.conllu", 4), _conllu(tmp_path / "dev.conllu", 1),
        encoder=EncoderChoice(str(own_tiny_dir)), training=ProbeSettings(epochs=2),
        features=FeatureSettings(cache_dir=tmp_path / "cache"), progress=False, threads=1)
    result = run_pos_probe(settings)
    assert [r.name for r in result.report.results] == ["layer 0", "layer 1", "layer 2", "mix"]
    assert result.report.splits["train"]["sentences"] == 12
    assert result.report.labels == ["ADV", "DET", "NOUN", "VERB"]
    lines = result.lines()
    assert lines[0].startswith(f"POS (upos) probe of {own_tiny_dir}: 3 layers x {result.dim} dims, 4 tags")
    assert lines[-1].startswith("runtime: features ")
    assert result.report.to_dict()["tag"] == "upos"
    with pytest.raises(ValueError, match="tag must be one of"):
        PosProbeSettings("train.conllu", "dev.conllu", tag="lemma")


def test_neighbours_job_ranks_the_contexts_of_the_word(tmp_path, own_tiny_dir):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the bank of the river\nthe bank lends money\n\nfish swim near the bank\n",
                      encoding="utf-8")
    settings = NeighboursSettings(("money", "in", "the", "bank"), "bank", corpus,
                                  search=ContextSearch(top_k=2, progress=False),
                                  encoder=EncoderChoice(str(own_tiny_dir)), threads=1)
    result = run_neighbours(settings)
    assert settings.position == 3 and result.layer == 2 and result.corpus_lines == 4
    assert len(result.contexts) == 2 and {c.sentence for c in result.contexts} <= {0, 1, 3}
    assert result.lines()[0] == "query: money in the [bank]"
    document = json.loads(json.dumps(result.to_dict()))
    assert document["word"] == "bank" and len(document["nearest_words"]["layer 0"]) == 2
    with pytest.raises(ValueError, match="has 1 occurrence"):
        NeighboursSettings(("the", "bank"), "bank", corpus, occurrence=2)
