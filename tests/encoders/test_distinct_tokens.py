"""A batch's repeated tokens: the first LSTM layer projects each distinct token vector once."""

from __future__ import annotations

import pytest
import torch
from tolerance import assert_reordered_close, elmo_terms

import contextvec
from contextvec.encoders.bilm import ProjectedLSTMLayer
from contextvec.encoders.precision import PackedFloatWeights


@pytest.fixture
def input_rows(monkeypatch):
    """The rows of every input projection ``ProjectedLSTMLayer`` runs, call by call."""
    rows, matmul = [], ProjectedLSTMLayer._matmul

    def counted(self, name, x, *args, **kwargs):
        if name == "input_weight":
            rows.append(x.shape[1])
        return matmul(self, name, x, *args, **kwargs)

    monkeypatch.setattr(ProjectedLSTMLayer, "_matmul", counted)
    return rows


@pytest.mark.parametrize("gather", ["at once", "by step"])
@pytest.mark.parametrize("packed", [False, True], ids=["bmm", "packed"])
def test_lstm_projects_each_distinct_input_row_once(packed, gather, input_rows, monkeypatch):
    """Given the distinct rows and where each input is one of them, the input projections run on
    those rows alone (per direction where each direction has its own products), and outputs,
    final states and gradients are those of the full inputs, whether the projections are
    copied to their steps at once or step by step."""
    if packed:
        monkeypatch.setattr(PackedFloatWeights, "min_size", 0)
    if gather == "by step":
        monkeypatch.setattr(ProjectedLSTMLayer, "gather_at_once", 0)
    torch.manual_seed(0)
    layer = ProjectedLSTMLayer(16, 32, 24, cell_clip=3.0, proj_clip=3.0)
    rows = torch.randn(4, 16)
    index = torch.randint(0, 4, (2, 3, 6))
    index[:, 2, 2:] = 99  # past the last sequence's length: never read
    lengths = torch.tensor([6, 5, 2])
    with torch.no_grad():
        inputs = rows[index.clamp(max=3)]
        full, full_final = layer(inputs, lengths)
        assert input_rows == ([13, 13] if packed else [13])
        input_rows.clear()
        distinct, distinct_final = layer(inputs, lengths, distinct=(rows, index))
        assert input_rows == ([4, 4] if packed else [4])
    for got, want in ((distinct, full), *zip(distinct_final, full_final, strict=True)):
        assert_reordered_close(got, want, terms=16 + 24 + 32)
    assert torch.all(distinct[:, 2, 2:] == 0)

    grads = []
    for given in (False, True):
        source = rows.clone().requires_grad_()
        out, _ = layer(source[index.clamp(max=3)], lengths, distinct=(source, index) if given else None)
        out.square().sum().backward()
        grads.append(source.grad)
    assert_reordered_close(grads[1], grads[0], terms=4 * (16 + 24 + 32))


def test_elmo_batch_projects_its_distinct_tokens_once(own_tiny_dir, input_rows, monkeypatch):
    """In a batch of several sentences a first layer with costly rows projects each distinct
    token and each boundary once, and every sentence gets the vectors it gets alone; a lone
    sentence's few repeats are projected where they stand, and so are a small model's."""
    encoder = contextvec.load(own_tiny_dir)
    batch = [["the", "cat", "sat", "on", "the", "mat"], ["the", "dog", "sat", "."], ["the", "cat", "."]]
    encoder.embed(batch)
    assert input_rows == [19, 19]  # both directions in one bmm per layer, every position
    input_rows.clear()
    monkeypatch.setattr(PackedFloatWeights, "min_size", 0)  # every matrix as large as ELMo's own
    together = encoder.embed(batch)
    # 7 distinct tokens and <S>, </S>, against 13 tokens and 6 boundaries; layer 2 runs them all.
    assert input_rows == [9, 9, 19, 19]
    input_rows.clear()
    alone = [encoder.embed([sentence])[0] for sentence in batch]
    assert input_rows == [8] * 4 + [6] * 4 + [5] * 4
    for got, want in zip(together, alone, strict=True):
        assert_reordered_close(got, want, terms=elmo_terms(encoder.config))
