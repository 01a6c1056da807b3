"""`contextvec demo` says what its numbers say: which layer separates the senses and by how much,
or that none does, whether each query's nearest context shares its sense, for any model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources

import numpy as np
import pytest
import torch

import contextvec
from contextvec.cli.main import main
from contextvec.encoders.base import EncoderOutput


class Flattened(contextvec.Encoder):
    """The bundled ELMo with the layers in ``context_free`` replaced by its char-CNN layer: a
    model whose words cannot depend on the sentence there."""

    token_layer, upper_layers, token_layer_context_free = "char-CNN", "biLSTM", True

    def __init__(self, inner: contextvec.Encoder, context_free: set[int]) -> None:
        super().__init__()
        self.inner, self.context_free = inner, context_free
        self.num_layers, self.output_dim = inner.num_layers, inner.output_dim

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        layers, mask = self.inner(sentences)
        return EncoderOutput(torch.stack([layers[0] if k in self.context_free else layers[k]
                                          for k in range(self.num_layers)]), mask)


@pytest.fixture(scope="module")
def bundled():
    return contextvec.load()


def demo(monkeypatch, capsys, encoder: contextvec.Encoder, *args: str) -> str:
    monkeypatch.setattr(contextvec, "load", lambda name=None, **kw: encoder)
    assert main(["demo", *args]) == 0
    return capsys.readouterr().out


def margins(encoder: contextvec.Encoder) -> list[float]:
    """Each layer's same-sense minus different-sense mean cosine of the demo's word, computed here."""
    text = resources.files("contextvec.data").joinpath("demo_senses.txt").read_text("utf-8")
    marked = [line.split(maxsplit=1) for line in text.splitlines() if line.strip()]
    senses, sentences = [m[0] for m in marked], [m[1].split() for m in marked]
    arrays = encoder.embed(sentences)
    vectors = np.stack([a[:, s.index("play")] for a, s in zip(arrays, sentences, strict=True)], axis=1)
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    out = []
    for cos in unit @ unit.transpose(0, 2, 1):
        same = [cos[i, j] for i in range(6) for j in range(i + 1, 6) if senses[i] == senses[j]]
        different = [cos[i, j] for i in range(6) for j in range(i + 1, 6) if senses[i] != senses[j]]
        out.append(float(np.mean(same) - np.mean(different)))
    return out


def test_a_model_where_no_layer_separates_the_senses_is_told_so(bundled, monkeypatch, capsys):
    out = demo(monkeypatch, capsys, Flattened(bundled, {1, 2}))
    verdicts = out.split("same-sense pairs against different-sense pairs:")[1].split("\n")[1:4]
    assert [v.split()[:2] for v in verdicts] == [["0", "char-CNN"], ["1", "biLSTM-1"], ["2", "biLSTM-2"]]
    assert all(v.endswith("margin 0.000: does not separate the senses") for v in verdicts)
    assert "=> No layer separates the senses: " in out
    assert "separates the senses best" not in out and "separates the senses," not in out
    # every context ties with every other at 1.000: no query's nearest context is said to share its sense
    assert out.count("the nearest of its sense and of another") == 4


def test_the_one_layer_that_separates_the_senses_is_named_with_its_margin(bundled, monkeypatch, capsys):
    encoder = Flattened(bundled, {1})
    margin = margins(encoder)[2]
    assert margin > 0.0005  # the bundled biLSTM-2 separates the demo's senses
    out = demo(monkeypatch, capsys, encoder, "--model", "elmo-original")
    assert f"=> biLSTM-2 separates the senses best, by a margin of {margin:.3f} (" in out
    assert "No other layer separates them." in out
    assert "1 biLSTM-1   margin 0.000: does not separate the senses" in out
    assert "contextvec pull" not in out  # already the original: nothing to pull


def test_the_bundled_models_words_match_its_numbers(bundled, monkeypatch, capsys):
    out = demo(monkeypatch, capsys, bundled)
    expected = margins(bundled)
    shown = [float(m) for m in re.findall(r"^   \d \S+ +margin (-?\d\.\d{3}):", out, re.M)]
    np.testing.assert_allclose(shown, expected, atol=5e-4 + 1e-5)  # printed at 3 decimals
    best = int(np.argmax(expected))
    names = ["char-CNN", "biLSTM-1", "biLSTM-2"]
    assert f"=> {names[best]} separates the senses best, by a margin of {shown[best]:.3f}" in out
    # each query: the count of shown contexts of its sense is the one the verdict states
    for block in out.split("   query [")[1:]:
        sense = block.split("]", 1)[0]
        rows = re.findall(r"^     \d\.\d{3}  \[(\w+)\]", block, re.M)
        verdict = re.search(r"-> (\d) of the (\d) nearest share its sense \((\w+)\); the nearest is of "
                            r"(its|another) sense", block)
        assert verdict.groups()[:3] == (str(rows.count(sense)), str(len(rows)), sense)
        assert (verdict.group(4) == "its") == (rows[0] == sense)
    assert out.rstrip().endswith("   contextvec pull elmo-original\n   contextvec demo --model elmo-original")
