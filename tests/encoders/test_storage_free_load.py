"""ELMo readers build the model without storage and take the files' tensors: the loaded model has
every tensor a built one has, its weights pinned bit for bit, and no random values drawn first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import contextvec
from contextvec.encoders.bilm import ElmoBiLM, ElmoEncoder
from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.fingerprint import model_identity

TFCKPT = Path(__file__).resolve().parents[1] / "data" / "tfckpt"
# model_identity of each fixture as loaded when the model was first built and then overwritten:
# the class, config and every tensor of the state, bit for bit.
PINNED = {
    "bilm-tf": "ed9ecfe8bb9b68a8df97468447d8f60880c4bd6da097517b76237d7ec4a13c38",
    "checkpoint": "db4063eea3fe0b1fefb30d57d5144ba514e2c4dffe99080dc3d6ab5555164565",
    "hub": "e8bcb796a1bbaf50c0f6ac665c9538b34dd85c54c211825deb43d0b37eee0797",
    "variant-checkpoint": "79e9817a2d76b48e7b5b0b00c7d0f38d3d8fbeab39c39077416b711e09622911",
}
SENTENCES = [["The", "cat", "sat", "."], ["Ünïcode", "wörds", "and", "a"], ["short", "one", "too", "!"]]


@pytest.fixture(scope="module", params=[*PINNED, "native"])
def loaded(request, tiny_dir, tmp_path_factory) -> tuple[str, ElmoEncoder]:
    directories = {"bilm-tf": tiny_dir, "checkpoint": TFCKPT / "checkpoint", "hub": TFCKPT / "hub",
                   "variant-checkpoint": TFCKPT / "variant" / "checkpoint"}
    if request.param == "native":
        saved = contextvec.save(contextvec.load(tiny_dir), tmp_path_factory.mktemp("native") / "model")
        return "bilm-tf", contextvec.load(saved)
    return request.param, contextvec.load(directories[request.param])


def test_the_weights_are_those_of_the_files(loaded):
    name, encoder = loaded
    assert model_identity(encoder) == PINNED[name]


def test_a_loaded_model_has_every_tensor_a_built_one_has(loaded):
    _, encoder = loaded
    bilm = encoder.bilm
    built = ElmoBiLM(bilm.config)
    assert not bilm.training
    buffers = dict(bilm.named_buffers())
    assert buffers.keys() == dict(built.named_buffers()).keys() and buffers
    for name, buffer in built.named_buffers():
        assert buffers[name].device.type == "cpu" and buffers[name].dtype == buffer.dtype, name
        assert torch.equal(buffers[name], buffer), name
    pointers = set()
    for name, parameter in bilm.named_parameters():
        assert parameter.device.type == "cpu" and parameter.dtype == torch.float32, name
        assert parameter.is_contiguous() and parameter.requires_grad, name
        pointers.add(parameter.data_ptr())
    assert len(pointers) == len(list(bilm.parameters()))  # no two share their values


def _random_state(config: BiLMConfig) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {name: torch.randn(tensor.shape) * 0.3 for name, tensor in ElmoBiLM(config).state_dict().items()}


def test_from_state_dict_takes_fit_tensors_and_copies_the_others():
    config = BiLMConfig(filters=((1, 4), (2, 8)), projection_dim=8, lstm_dim=16, n_layers=1)
    state = _random_state(config)
    gate = "token_encoder.highway.gate.0.weight"
    state[gate] = state[gate].T.contiguous().T  # the same values, not contiguous
    state["layers.0.bias"] = state["layers.0.bias"].double()
    model = ElmoBiLM.from_state_dict(config, state)
    parameters = dict(model.named_parameters())
    assert parameters["layers.0.input_weight"].data_ptr() == state["layers.0.input_weight"].data_ptr()
    for name in (gate, "layers.0.bias"):
        assert parameters[name].is_contiguous() and parameters[name].dtype == torch.float32
        assert parameters[name].data_ptr() != state[name].data_ptr()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name].float()), name
    del state["layers.0.projection"]
    with pytest.raises(RuntimeError, match="layers.0.projection"):
        ElmoBiLM.from_state_dict(config, state)


def test_an_lstm_without_projection_loads_and_runs_its_fused_kernel(tmp_path):
    """Such a layer runs on PyTorch's LSTM kernel (whole-batch sentences, no clipping)."""
    config = BiLMConfig(filters=((1, 4), (2, 8)), projection_dim=16, lstm_dim=16, n_layers=2,
                        cell_clip=None, proj_clip=None, lstm_projection=False)
    built = ElmoBiLM(config)
    built.load_state_dict(_random_state(config))
    encoder = ElmoEncoder(built).eval()
    loaded = contextvec.load(contextvec.save(encoder, tmp_path / "model"))
    for ours, theirs in zip(loaded.embed(SENTENCES), encoder.embed(SENTENCES), strict=True):
        np.testing.assert_array_equal(ours, theirs)
