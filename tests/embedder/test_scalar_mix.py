"""ScalarMix: numpy recomputations, masked layer norm, gradients, and allennlp's ``elmo`` output."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_io import expected_rows, reference_dir, reference_expected, reference_sentences
from tolerance import assert_reordered_close

import contextvec
from contextvec.embedder import ScalarMix


def _softmax(w: np.ndarray) -> np.ndarray:
    e = np.exp(w - w.max())
    return e / e.sum()


def _np_mix(layers: np.ndarray, weights: np.ndarray, gamma: float) -> np.ndarray:
    s = _softmax(weights.astype(np.float64))
    return gamma * sum(s[k] * layers[k].astype(np.float64) for k in range(len(s)))


def _np_masked_layer_norm(layers: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per layer: mean/var over the real positions (batch, time and dim jointly); pads -> 0."""
    out = np.zeros(layers.shape, np.float64)
    for k, layer in enumerate(layers.astype(np.float64)):
        real = layer[mask]  # (n_real, dim)
        mean, var = real.mean(), real.var()
        out[k][mask] = (real - mean) / np.sqrt(var + 1e-12)
    return out


def _random_case(seed: int, num_layers=3, batch=4, time=7, dim=5):
    g = torch.Generator().manual_seed(seed)
    layers = torch.randn(num_layers, batch, time, dim, generator=g) * 3 + 1.5
    lengths = torch.randint(1, time + 1, (batch,), generator=g)
    lengths[0] = time
    mask = torch.arange(time).view(1, -1) < lengths.view(-1, 1)
    return layers, mask


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mix_equals_numpy(seed):
    torch.manual_seed(seed)
    layers, _ = _random_case(seed)
    weights = np.random.default_rng(seed).normal(size=3)
    mix = ScalarMix(3, initial_weights=weights.tolist(), initial_gamma=0.7)
    got = mix(layers).detach().numpy()
    want = _np_mix(layers.numpy(), weights, 0.7)
    assert got.shape == (4, 7, 5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        mix.normalized_weights().detach().numpy(), _softmax(weights), rtol=1e-6
    )


def test_default_is_layer_average():
    layers, mask = _random_case(5, num_layers=4)
    mix = ScalarMix(4)
    assert torch.equal(mix.weights.detach(), torch.zeros(4))
    assert mix.gamma.item() == 1.0
    np.testing.assert_allclose(
        mix(layers, mask).detach().numpy(), layers.mean(0).numpy(), rtol=1e-5, atol=1e-6
    )


def test_mask_ignored_without_layer_norm():
    layers, mask = _random_case(3)
    mix = ScalarMix(3, initial_weights=[0.3, -1.0, 2.0])
    assert torch.equal(mix(layers, mask), mix(layers))


@pytest.mark.parametrize("seed", [0, 1])
def test_layer_norm_equals_numpy(seed):
    layers, mask = _random_case(seed, batch=5, time=9, dim=6)
    # garbage at padded positions must not move the statistics
    layers = layers + (~mask).view(1, 5, 9, 1) * 100.0
    weights = np.array([0.5, -0.2, 1.1])
    mix = ScalarMix(3, layer_norm=True, initial_weights=weights.tolist(), initial_gamma=1.3)
    got = mix(layers, mask).detach().numpy()
    normed = _np_masked_layer_norm(layers.numpy(), mask.numpy())
    want = _np_mix(normed, weights, 1.3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert not got[~mask.numpy()].any(), "padded positions must be 0"
    # per layer, the normalised real values have mean 0 and variance 1
    assert abs(normed[1][mask.numpy()].mean()) < 1e-9
    assert abs(normed[1][mask.numpy()].var() - 1) < 1e-6


def test_layer_norm_unaffected_by_extra_padding():
    layers, mask = _random_case(7)
    mix = ScalarMix(3, layer_norm=True, initial_weights=[1.0, 0.0, -1.0])
    base = mix(layers, mask)
    # three more padded time steps holding large values, and a fully padded extra sentence
    pad = torch.full((3, 4, 3, 5), 50.0)
    wider = torch.cat([layers, pad], dim=2)
    wider = torch.cat([wider, torch.full((3, 1, 10, 5), -20.0)], dim=1)
    wider_mask = torch.zeros(5, 10, dtype=torch.bool)
    wider_mask[:4, :7] = mask
    out = mix(wider, wider_mask)
    # The statistics sum the same 4 x 7 x 5 values per layer, perhaps in another order in the
    # wider tensor; then the mix's three layers.
    assert_reordered_close(out[:4, :7], base, terms=4 * 7 * 5 + 3)
    assert not out[~wider_mask].any()


def test_layer_norm_statistics_are_joint_over_batch():
    # a second sentence with a different scale changes the first sentence's normalisation
    layers, mask = _random_case(11, batch=2, time=4, dim=3)
    mask[:] = True
    mix = ScalarMix(3, layer_norm=True)
    alone = mix(layers[:, :1], mask[:1])
    scaled = layers.clone()
    scaled[:, 1] *= 10
    together = mix(scaled, mask)
    assert not torch.allclose(alone, together[:1], atol=1e-3)
    normed = _np_masked_layer_norm(scaled.numpy(), mask.numpy())
    np.testing.assert_allclose(together.detach().numpy(), normed.mean(0), rtol=1e-4, atol=1e-5)


def test_layer_norm_needs_mask():
    layers, _ = _random_case(0)
    with pytest.raises(ValueError, match="mask"):
        ScalarMix(3, layer_norm=True)(layers)


def test_wrong_number_of_layers():
    layers, mask = _random_case(0, num_layers=2)
    with pytest.raises(ValueError, match="expected 3 layers, got 2"):
        ScalarMix(3)(layers, mask)
    with pytest.raises(ValueError, match="2 initial weights given for 3 layers"):
        ScalarMix(3, initial_weights=[0.0, 1.0])


def test_gradients_flow_to_weights_and_gamma():
    torch.manual_seed(0)
    layers, mask = _random_case(4)
    w0 = np.array([0.2, -0.4, 0.9])
    gamma = 1.7
    mix = ScalarMix(3, initial_weights=w0.tolist(), initial_gamma=gamma)
    target = torch.randn(4, 7, 5)
    loss = (mix(layers, mask) * target).sum()
    loss.backward()
    # analytic: a_k = <target, h_k>, dL/dgamma = sum_k s_k a_k, dL/dw_j = gamma s_j (a_j - sum s a)
    a = np.array([(target * layers[k]).sum().item() for k in range(3)], np.float64)
    s = _softmax(w0)
    np.testing.assert_allclose(mix.gamma.grad.numpy(), [s @ a], rtol=1e-4)
    np.testing.assert_allclose(mix.weights.grad.numpy(), gamma * s * (a - s @ a), rtol=1e-4,
                               atol=1e-4)
    assert mix.weights.grad.abs().min() > 0


def test_gradients_with_layer_norm():
    layers, mask = _random_case(6)
    mix = ScalarMix(3, layer_norm=True)
    (mix(layers, mask) ** 2).sum().backward()
    assert mix.weights.grad is not None and mix.weights.grad.abs().sum() > 0
    assert mix.gamma.grad is not None and mix.gamma.grad.abs().item() > 0


def test_not_trainable():
    mix = ScalarMix(3, trainable=False, initial_weights=[1.0, 2.0, 3.0])
    assert not mix.weights.requires_grad
    assert not mix.gamma.requires_grad
    layers, mask = _random_case(1)
    assert not mix(layers, mask).requires_grad


def test_l2_penalty():
    mix = ScalarMix(3, initial_weights=[1.0, 2.0, -3.0], initial_gamma=5.0)
    penalty = mix.l2_penalty(0.1)
    assert penalty.shape == ()
    assert penalty.item() == pytest.approx(1.4)  # 0.1 * (1 + 4 + 9); gamma not penalised
    penalty.backward()
    np.testing.assert_allclose(mix.weights.grad.numpy(), [0.2, 0.4, -0.6], rtol=1e-6)
    assert mix.gamma.grad is None
    assert ScalarMix(3).l2_penalty(1.0).item() == 0.0


def test_dtype_follows_layers():
    layers, mask = _random_case(2)
    out = ScalarMix(3, initial_weights=[0.1, 0.2, 0.3])(layers.double(), mask)
    assert out.dtype == torch.float64


def _reference_mix(name: str, indices: list[int]) -> None:
    src = reference_dir(name)
    expected = reference_expected(name)
    sentences = reference_sentences(name)
    encoder = contextvec.load(src)
    mix = ScalarMix(3)  # allennlp's defaults: w = [0, 0, 0], gamma = 1
    np.testing.assert_allclose(
        mix.normalized_weights().detach().numpy(), expected["scalar_mix_weights"], rtol=1e-6
    )
    assert mix.gamma.item() == pytest.approx(float(expected["scalar_mix_gamma"]))
    batch = [list(sentences[i]) for i in indices]
    with torch.no_grad():
        layers, mask = encoder(batch)
        out = mix(layers, mask).numpy()
    rows = expected_rows(expected)
    for row, i in enumerate(indices):
        n = len(sentences[i])
        if i in rows:
            np.testing.assert_allclose(out[row, :n], expected[f"elmo_{i:03d}"], atol=1e-4, rtol=1e-4)
        assert not out[row, n:].any()


def test_reference_mix_elmo_tiny():
    _reference_mix("elmo-tiny", list(range(64)))


def test_reference_mix_elmo_small():
    _reference_mix("elmo-small", [0, 3, 8, 12, 20, 35, 47, 63])
