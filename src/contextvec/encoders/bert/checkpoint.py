"""The files of an HF BERT directory whose model carries a head (pretraining heads,
:mod:`~contextvec.encoders.bert.heads`; task heads, :mod:`~contextvec.encoders.bert.with_head`):
its config and raw tensors read, its weights and config written, each file atomically."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from contextvec.encoders.bert.config import BertConfig
from contextvec.io.atomic import atomic_path
from contextvec.io.hf_bert import (
    CONFIG_NAME,
    SAFETENSORS_NAME,
    BertCheckpointError,
    read_state_dict,
    weights_file,
)

INITIALIZER_RANGE = 0.02
"""The standard deviation of BERT's initial weights, also written into ``config.json``."""


def read_files(directory: Path) -> tuple[BertConfig, Path, dict[str, torch.Tensor]]:
    """``directory``'s config, its weight file (safetensors first) and that file's tensors under
    the checkpoint's own names (heads included, nothing renamed)."""
    config = BertConfig.from_json_file(directory / CONFIG_NAME)
    path = weights_file(directory)
    if path is None:
        raise BertCheckpointError(f"{directory}: needs {SAFETENSORS_NAME} or pytorch_model.bin")
    return config, path, read_state_dict(path)


def write_weights(directory: Path, state: dict[str, torch.Tensor]) -> None:
    """``state`` as ``directory``'s ``model.safetensors`` (the directory made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    with atomic_path(directory / SAFETENSORS_NAME) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})  # HF refuses files without it


def write_config(directory: Path, config: BertConfig, architecture: str, extras: dict) -> None:
    """``directory``'s ``config.json``: ``config``'s fields, HF's ``architectures`` and
    ``initializer_range``, then ``extras`` (a head's labels, its problem type)."""
    fields = {**config.to_dict(), "architectures": [architecture], "initializer_range": INITIALIZER_RANGE}
    with atomic_path(directory / CONFIG_NAME) as tmp:
        tmp.write_text(json.dumps(fields | extras, indent=2) + "\n", encoding="utf-8")
