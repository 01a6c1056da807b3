"""CoVe's files, as pure functions: the word list of a model directory (``words.json``) and the
released Salesforce MT-LSTM (``wmtlstm-*.pth``, one 2-layer bidirectional ``nn.LSTM``).

Building an MT-LSTM from them is :mod:`contextvec.encoders.cove.loader`'s job.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import NamedTuple

import torch

from contextvec.io.atomic import atomic_path
from contextvec.io.native import NativeFormatError
from contextvec.io.untrusted import UntrustedFileError, model_file, read_json, read_torch_weights

WORDS_FILE = "words.json"
_SALESFORCE_KEY = re.compile(r"^(weight_ih|weight_hh|bias_ih|bias_hh)_l(\d+)(_reverse)?$")


def save_words(words: list[str], directory: str | os.PathLike) -> None:
    """``words.json``: a JSON list (any character in a word survives, unlike a line file)."""
    with atomic_path(Path(directory) / WORDS_FILE) as tmp:
        tmp.write_text(json.dumps(words, ensure_ascii=False) + "\n", encoding="utf-8")


def load_words(directory: str | os.PathLike) -> list[str]:
    """The word list of a CoVe directory (row i of its word vectors is word i)."""
    if not os.path.lexists(Path(directory) / WORDS_FILE):
        raise NativeFormatError(f"{directory}: no {WORDS_FILE} (the word list of the vectors)")
    path = model_file(directory, WORDS_FILE)
    words = read_json(path)
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise NativeFormatError(f"{path}: not a JSON list of words")
    return words


class LSTMSizes(NamedTuple):
    """The sizes of a stack of bidirectional LSTM layers."""

    input_dim: int
    hidden_size: int
    num_layers: int


def read_salesforce_checkpoint(pt_file: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The state dict of Salesforce's MT-LSTM file, read with ``weights_only=True`` so that no
    pickled code runs (:func:`contextvec.io.untrusted.read_torch_weights`; a
    ``{"state_dict": ...}`` wrapper is taken off)."""
    state = read_torch_weights(pt_file)
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise UntrustedFileError(pt_file, "not a state dict of tensors")
    return state


def salesforce_state_dict(state: dict[str, torch.Tensor]) -> tuple[LSTMSizes, dict[str, torch.Tensor]]:
    """A multi-layer bidirectional ``nn.LSTM`` state dict (Salesforce's MT-LSTM: ``weight_ih_l0``,
    ``weight_hh_l1_reverse``, ...; an ``rnn.`` or ``module.`` prefix is allowed) -> its sizes and
    the tensors under one-layer-per-module names (``layers.k.weight_ih_l0``, ...), float32."""
    renamed: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        name = key.removeprefix("module.").removeprefix("rnn.")
        match = _SALESFORCE_KEY.match(name)
        if match is None:
            raise ValueError(f"unexpected tensor {key!r} in an nn.LSTM state dict")
        kind, layer, reverse = match.groups()
        renamed[f"layers.{layer}.{kind}_l0{reverse or ''}"] = tensor.detach().float().contiguous()
    if "layers.0.weight_ih_l0" not in renamed:
        raise ValueError("no weight_ih_l0: not an nn.LSTM state dict")
    num_layers = 1 + max(int(k.split(".")[1]) for k in renamed)
    if num_layers > len(renamed):  # each layer is tensors of the file: a gap in the numbers
        raise ValueError(f"the state dict numbers layers up to {num_layers - 1} but holds "
                         f"{len(renamed)} tensors")
    hidden4, input_dim = renamed["layers.0.weight_ih_l0"].shape
    sizes = LSTMSizes(input_dim, hidden4 // 4, num_layers)
    expected = expected_shapes(sizes)
    missing = sorted(set(expected) - set(renamed))
    if missing:
        raise ValueError(f"the state dict lacks {missing} (needs a bidirectional nn.LSTM with biases)")
    for key, tensor in renamed.items():
        if tuple(tensor.shape) != expected[key]:
            raise ValueError(f"{key}: shape {tuple(tensor.shape)}, expected {expected[key]}")
    return sizes, renamed


def expected_shapes(sizes: LSTMSizes) -> dict[str, tuple[int, ...]]:
    """Tensor shapes of one-layer bidirectional ``nn.LSTM`` modules ``layers.k`` (layer k > 0
    reads both directions of layer k - 1)."""
    hidden = sizes.hidden_size
    shapes: dict[str, tuple[int, ...]] = {}
    for k in range(sizes.num_layers):
        width = sizes.input_dim if k == 0 else 2 * hidden
        for suffix in ("", "_reverse"):
            shapes[f"layers.{k}.weight_ih_l0{suffix}"] = (4 * hidden, width)
            shapes[f"layers.{k}.weight_hh_l0{suffix}"] = (4 * hidden, hidden)
            shapes[f"layers.{k}.bias_ih_l0{suffix}"] = (4 * hidden,)
            shapes[f"layers.{k}.bias_hh_l0{suffix}"] = (4 * hidden,)
    return shapes
