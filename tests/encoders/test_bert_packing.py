"""BERT's fast path: unpadded rows (no work on padding), query/key/value as one cached matrix
product, and the same layers run padded (HF's interface) and unpadded agree."""

from __future__ import annotations

import pytest
import torch
from tolerance import assert_reordered_close, bert_terms
from torch import nn

from contextvec.encoders.bert import BertConfig, BertModel
from contextvec.encoders.bert.unpadded import RowLayout, unpadded_positions
from contextvec.encoders.precision import apply_precision

LENGTHS = [7, 3, 5, 7, 1]
# Unpadded rows, padded rows, fused and separate products: the same sums over other row counts and
# in other kernels, so in other orders.
TERMS = bert_terms(BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=24), max(LENGTHS))


def _model(seed: int = 0, **changes) -> BertModel:
    torch.manual_seed(seed)
    fields = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=24, max_position_embeddings=16)
    return BertModel(BertConfig(**{**fields, **changes})).eval()


def _padded(lengths: list[int], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (len(lengths), max(lengths)), generator=generator)
    mask = torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]
    return ids.masked_fill(~mask, 0), mask


def test_row_layout_and_positions():
    layout = RowLayout.unpadded([3, 1, 2])
    assert (layout.rows, layout.longest) == (3, 3)
    assert layout.index.tolist() == [0, 1, 2, 3, 6, 7]
    assert layout.mask[:, 0, 0].tolist() == [[True] * 3, [True, False, False], [True, True, False]]
    pieces = torch.arange(6.0).view(6, 1)
    grid = layout.to_grid(pieces)
    assert grid[:, :, 0].tolist() == [[0, 1, 2], [3, 0, 0], [4, 5, 0]]
    assert torch.equal(layout.from_grid(grid), pieces)
    assert unpadded_positions([3, 1, 2]).tolist() == [0, 1, 2, 0, 0, 1]
    same = RowLayout.unpadded([2, 2])
    assert same.index is None and same.mask is None   # no padding: no copies, no mask


@pytest.mark.parametrize("lengths", [LENGTHS, [4, 4, 4]])
def test_unpadded_rows_equal_padded_batch(lengths):
    model = _model()
    ids, mask = _padded(lengths)
    with torch.inference_mode():
        padded = model(ids, mask).hidden_states
        unpadded = model.forward_unpadded(ids[mask], lengths)
    assert len(unpadded) == len(padded) == 3
    for p, q in zip(unpadded, padded, strict=True):
        assert p.shape == (sum(lengths), 16)
        assert_reordered_close(p, q[mask], terms=TERMS)


def test_unpadded_rows_over_the_position_limit_are_refused():
    model = _model()
    with pytest.raises(ValueError, match="17 pieces exceed max_position_embeddings 16"):
        model.forward_unpadded(torch.zeros(17, dtype=torch.long), [17])


def _separate_qkv(model: BertModel, ids: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """The hidden states with query, key and value as three matrix products (HF's way)."""
    states = [model.embeddings(ids)]
    rows, longest = ids.shape
    bool_mask = mask[:, None, None, :]
    for layer in model.encoder.layer:
        attention = layer.attention.self
        x = states[-1]
        q, k, v = (
            linear(x).view(rows, longest, attention.num_heads, attention.head_dim).transpose(1, 2)
            for linear in (attention.query, attention.key, attention.value)
        )
        out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask)
        attended = layer.attention.output(out.transpose(1, 2).reshape(x.shape), x)
        states.append(layer.output(layer.intermediate(attended), attended))
    return states


def test_fused_qkv_matches_separate_products_and_follows_weight_changes():
    model = _model()
    ids, mask = _padded(LENGTHS)
    with torch.inference_mode():
        for want, got in zip(_separate_qkv(model, ids, mask), model(ids, mask).hidden_states, strict=True):
            assert_reordered_close(got[mask], want[mask], terms=TERMS)
        model(ids, mask)   # the fused weights are cached now
    # Loading other weights (in place) and editing one in place both invalidate the cache.
    model.load_state_dict(_model(seed=5).state_dict())
    with torch.no_grad():
        model.encoder.layer[1].attention.self.value.bias.add_(0.5)
        fresh = _model(seed=5)
        fresh.encoder.layer[1].attention.self.value.bias.add_(0.5)
    with torch.inference_mode():
        torch.testing.assert_close(model(ids, mask).hidden_states[-1], fresh(ids, mask).hidden_states[-1])


def test_gradients_reach_query_key_and_value():
    model = _model().train()
    ids, mask = _padded(LENGTHS)
    model(ids, mask).hidden_states[-1][mask].sum().backward()
    attention = model.encoder.layer[0].attention.self
    for linear in (attention.query, attention.key, attention.value):
        assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0
    assert set(model.state_dict()) == set(_model().state_dict())   # names stay HF's


def test_int8_packs_query_key_and_value_as_one_matrix():
    model = _model()
    ids, mask = _padded(LENGTHS)
    with torch.inference_mode():
        want = model.forward_unpadded(ids[mask], LENGTHS)
    apply_precision(model, "int8")
    attention = model.encoder.layer[0].attention.self
    assert attention.query is None and attention.qkv_packed.out_features == 48
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    with torch.inference_mode():
        got = model.forward_unpadded(ids[mask], LENGTHS)
    for w, g in zip(want, got, strict=True):
        assert torch.nn.functional.cosine_similarity(w, g, dim=-1).min() > 0.98


@pytest.mark.parametrize("lengths", [LENGTHS, [4, 4]])
def test_short_attention_equals_the_fused_kernel(lengths, monkeypatch):
    """Inference on short rows attends through two batched products: the same vectors as
    ``scaled_dot_product_attention`` (batches over ``SMALL_SCORES`` keep the fused kernel)."""
    import contextvec.encoders.bert.model as model_module

    model, (ids, mask) = _model(), _padded(lengths)
    layout = RowLayout.unpadded(lengths)
    torch.manual_seed(3)
    q, k, v = torch.randn(3, len(lengths), 4, max(lengths), 4).unbind(0)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=layout.mask)
    # Scores over a head's 4 dimensions, the softmax's sum and the weighted values over <= 7 rows.
    assert_reordered_close(model_module.short_attention(q, k, v, layout.score_bias()), expected,
                           terms=4 + 2 * max(lengths))
    with torch.no_grad():
        short = model(ids, mask).hidden_states
        monkeypatch.setattr(model_module, "SMALL_SCORES", 0)
        fused = model(ids, mask).hidden_states
    for a, b in zip(short, fused, strict=True):
        assert_reordered_close(a[mask], b[mask], terms=TERMS)


def test_to_grid_reuses_its_grid_without_gradients():
    """Layer after layer the same zero-padded grid is refilled; with gradients each is fresh."""
    layout = RowLayout.unpadded([3, 1, 2])
    with torch.no_grad():
        first = layout.to_grid(torch.arange(6.0).view(6, 1))
        second = layout.to_grid(torch.arange(10.0, 16.0).view(6, 1))
    assert second.data_ptr() == first.data_ptr()
    assert second[:, :, 0].tolist() == [[10, 11, 12], [13, 0, 0], [14, 15, 0]]
    pieces = torch.arange(6.0, requires_grad=True).view(6, 1)
    grid = layout.to_grid(pieces)
    assert grid.data_ptr() != second.data_ptr() and grid.requires_grad


@pytest.mark.parametrize(("lengths", "keep"), [(LENGTHS, [0, 5, 3, 12, 22, 21]), ([4, 4, 4], [0, 11, 5])])
def test_last_rows_compute_only_the_pieces_read(lengths, keep):
    """``last_rows``: the last state holds those rows in that order, the same vectors as the
    full last state's; the earlier states are whole (padded rows or not)."""
    model, (ids, mask) = _model(), _padded(lengths)
    keep = torch.tensor(keep)
    with torch.no_grad():
        full = model.forward_unpadded(ids[mask], lengths)
        some = model.forward_unpadded(ids[mask], lengths, last_rows=keep)
    assert [s.shape[0] for s in some] == [s.shape[0] for s in full[:-1]] + [len(keep)]
    for a, b in zip(some[:-1], full[:-1], strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)  # the same calls on the same rows
    assert_reordered_close(some[-1], full[-1][keep], terms=TERMS)  # the last layer on fewer rows
