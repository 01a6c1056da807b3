"""Hugging Face BERT model directories, as pure functions.

A directory holds ``config.json`` and ``model.safetensors`` (preferred) or
``pytorch_model.bin``; the latter is read with ``torch.load(weights_only=True)``, which
refuses pickled code. Every file is a regular file inside the directory (a Hugging Face cache
snapshot's links into its ``blobs`` included: :func:`contextvec.io.untrusted.model_file`).
Checkpoint keys are mapped onto contextvec's BERT names (HF's
``BertModel`` names):

- a ``bert.`` prefix (``BertForPreTraining`` and task models) is removed; keys outside it
  are task heads (``cls.*``, ``classifier.*``, ...) and are ignored. Without the prefix,
  ``cls.*`` keys are ignored;
- legacy ``LayerNorm.gamma`` / ``LayerNorm.beta`` become ``LayerNorm.weight`` / ``.bias``;
- the ``embeddings.position_ids`` (and ``embeddings.token_type_ids``) buffers are ignored.

Checking the renamed tensors against a model is :mod:`contextvec.encoders.bert.loader`'s job.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from contextvec.io.native import NativeFormatError, read_safetensors
from contextvec.io.untrusted import UntrustedFileError, model_file, read_json, read_torch_weights

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


def is_hf_bert_dir(path: Path) -> bool:
    """An HF BERT directory: ``config.json`` of model_type "bert" (or a Bert architecture), not a
    contextvec config, and ``model.safetensors`` or ``pytorch_model.bin``."""
    if not (path.is_dir() and (path / CONFIG_NAME).is_file() and weights_file(path) is not None):
        return False
    try:
        config = read_json(model_file(path, CONFIG_NAME))
    except (UntrustedFileError, OSError):  # not an HF directory: the registry says what it holds
        return False
    if not isinstance(config, dict) or "format_version" in config:
        return False
    architectures = config.get("architectures") or []
    return config.get("model_type") == "bert" or (
        isinstance(architectures, list) and any("Bert" in str(a) for a in architectures)
    )


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The raw tensors of a ``.safetensors`` file or a ``pytorch_model.bin`` (weights only)."""
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            return read_safetensors(path)
        state = read_torch_weights(path)
    except NativeFormatError as e:
        raise BertCheckpointError(str(e)) from None
    except UntrustedFileError as e:
        raise BertCheckpointError(f"{e.path}: unreadable checkpoint: {e.problem}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise BertCheckpointError(f"{path}: not a state dict of tensors")
    return dict(state)


def to_model_keys(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Checkpoint keys -> ``BertModel`` keys (see the module docstring for the rules)."""
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


def read_weights(directory: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The tensors of an HF BERT directory, keys renamed to ``BertModel``'s."""
    directory = Path(directory)
    path = weights_file(directory)
    if path is None:
        if (directory / f"{SAFETENSORS_NAME}.index.json").is_file():
            raise BertCheckpointError(f"{directory}: sharded checkpoints are not supported yet")
        raise BertCheckpointError(f"{directory}: needs {SAFETENSORS_NAME} or {PYTORCH_NAME}")
    return to_model_keys(read_state_dict(model_file(directory, path.name)))
