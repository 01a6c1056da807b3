"""Reading Hugging Face BERT model directories, as pure functions.

A directory holds ``config.json`` and ``model.safetensors`` (preferred) or
``pytorch_model.bin``; the latter is read with ``torch.load(weights_only=True)``, which
refuses pickled code. Checkpoint keys are mapped onto :class:`BertModel`'s names:

- a ``bert.`` prefix (``BertForPreTraining`` and task models) is removed; keys outside it
  are task heads (``cls.*``, ``classifier.*``, ...) and are ignored. Without the prefix,
  ``cls.*`` keys are ignored;
- legacy ``LayerNorm.gamma`` / ``LayerNorm.beta`` become ``LayerNorm.weight`` / ``.bias``;
- the ``embeddings.position_ids`` (and ``embeddings.token_type_ids``) buffers are ignored;
- a checkpoint without any ``pooler.*`` weights gives a model without a pooler.

Anything else that does not match is an error naming the keys: missing, unexpected, or of
the wrong shape for ``config.json``.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from contextvec.encoders.bert.config import BertConfig
from contextvec.encoders.bert.encoder import BertEncoder
from contextvec.encoders.bert.model import BertModel
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
PYTORCH_NAME = "pytorch_model.bin"
PREFIX = "bert."
IGNORED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


class BertCheckpointError(ValueError):
    """A BERT checkpoint that does not fit the model its config describes."""


def weights_file(directory: str | os.PathLike) -> Path | None:
    """The weight file of an HF model directory (safetensors first), or None."""
    directory = Path(directory)
    for name in (SAFETENSORS_NAME, PYTORCH_NAME):
        if (directory / name).is_file():
            return directory / name
    return None


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The raw tensors of a ``.safetensors`` file or a ``pytorch_model.bin`` (weights only)."""
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (SafetensorError, OSError, RuntimeError, pickle.UnpicklingError, EOFError) as e:
        raise BertCheckpointError(f"{path}: unreadable checkpoint ({e})") from e
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise BertCheckpointError(f"{path}: not a state dict of tensors")
    return dict(state)


def to_model_keys(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Checkpoint keys -> :class:`BertModel` keys (see the module docstring for the rules)."""
    prefixed = any(k.startswith(PREFIX) for k in state_dict)
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state_dict.items():
        if prefixed:
            if not key.startswith(PREFIX):
                continue
            key = key[len(PREFIX):]
        elif key.startswith("cls."):
            continue
        if key in IGNORED_BUFFERS:
            continue
        if key.endswith("LayerNorm.gamma"):
            key = key[: -len("gamma")] + "weight"
        elif key.endswith("LayerNorm.beta"):
            key = key[: -len("beta")] + "bias"
        if key in out:
            raise BertCheckpointError(f"{key} appears twice (legacy gamma/beta and weight/bias names)")
        out[key] = tensor
    return out


def build_model(
    config: BertConfig, state_dict: dict[str, torch.Tensor], source: str = "checkpoint"
) -> BertModel:
    """A :class:`BertModel` for ``config`` holding the (already renamed) ``state_dict``.

    Raises :class:`BertCheckpointError` naming every missing, unexpected or misshapen key.
    """
    has_pooler = any(k.startswith("pooler.") for k in state_dict)
    model = BertModel(config, add_pooling_layer=has_pooler)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    mismatched = [
        f"{k}: checkpoint {tuple(state_dict[k].shape)}, config.json {tuple(expected[k].shape)}"
        for k in expected if k in state_dict and state_dict[k].shape != expected[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing keys: {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected keys: {', '.join(unexpected)}")
    if mismatched:
        problems.append(f"shape mismatches: {'; '.join(mismatched)}")
    if problems:
        raise BertCheckpointError(f"{source} does not fit its BERT config: " + " | ".join(problems))
    for key, tensor in state_dict.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise BertCheckpointError(f"{source}: {key} has NaN or infinite values")
    model.load_state_dict(state_dict)
    return model


def read_bert_dir(directory: str | os.PathLike) -> tuple[BertConfig, dict[str, torch.Tensor]]:
    """``(config, state_dict)`` of an HF BERT directory, keys renamed to :class:`BertModel`'s."""
    directory = Path(directory)
    config = BertConfig.from_json_file(directory / CONFIG_NAME)
    path = weights_file(directory)
    if path is None:
        if (directory / f"{SAFETENSORS_NAME}.index.json").is_file():
            raise BertCheckpointError(f"{directory}: sharded checkpoints are not supported yet")
        raise BertCheckpointError(f"{directory}: needs {SAFETENSORS_NAME} or {PYTORCH_NAME}")
    return config, to_model_keys(read_state_dict(path))


def load_bert_model(directory: str | os.PathLike) -> BertModel:
    """The :class:`BertModel` of an HF BERT directory, in eval mode."""
    config, state_dict = read_bert_dir(directory)
    return build_model(config, state_dict, source=str(weights_file(directory))).eval()


def load_bert_encoder(
    directory: str | os.PathLike, subword_pooling: str = "first", window: int | None = None
) -> BertEncoder:
    """A word-level :class:`BertEncoder` for an HF BERT directory (weights and tokenizer), eval mode."""
    return BertEncoder(load_bert_model(directory), WordPieceTokenizer.from_directory(directory),
                       subword_pooling=subword_pooling, window=window).eval()
