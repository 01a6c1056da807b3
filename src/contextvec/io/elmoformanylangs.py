"""ELMoForManyLangs (HIT-SCIR) model directories, as pure functions.

A directory holds ``config.json`` (the training arguments; its ``config_path`` names the
architecture JSON), the architecture JSON itself, ``char.dic`` and ``word.dic`` (``token\\tid``
lines), and ``token_embedder.pkl`` / ``encoder.pkl`` (pickled torch state dicts).

``config_path`` is often an absolute path on the machine that trained the model; it is looked
up as that project's own loader does: as written (relative to the directory), then its file
name inside the directory, then the file name among the two architectures that project ships
(:data:`SHIPPED_ARCHITECTURES`); a path outside the directory is never read. Every file is a
regular file inside the directory (:func:`contextvec.io.untrusted.model_file`), the small ones
read with a size cap. The pickles are read with ``torch.load(weights_only=True)``, which
unpickles tensors and containers only, so no code in a file runs.

:func:`to_state_dict` renames and rearranges the tensors into
:mod:`contextvec.encoders.manylangs`'s parameters: the highway gate changes sign (that project
writes ``y = g x + (1 - g) f(A x)``, contextvec ``y = g f(A x) + (1 - g) x``) and the LSTM gate
blocks go from ``i, f, g, o`` to contextvec's ``i, j, f, o``; both are exact in float.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from contextvec.io.untrusted import (
    UntrustedFileError,
    model_file,
    read_bounded,
    read_json,
    read_torch_weights,
)

CONFIG_NAME = "config.json"
CHAR_DICT = "char.dic"
WORD_DICT = "word.dic"
TOKEN_EMBEDDER = "token_embedder.pkl"
ENCODER = "encoder.pkl"

_PUBLISHED = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096,
                "n_layers": 2},
    "token_embedder": {"name": "cnn", "activation": "relu",
                       "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                       "n_highway": 2, "word_dim": 100, "char_dim": 50, "max_characters_per_token": 50},
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
SHIPPED_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "cnn_50_100_512_4096_sample.json": _PUBLISHED,
    # Despite its name, the package ships this one with the same content.
    "cnn_0_100_512_4096_sample.json": _PUBLISHED,
}
"""The architecture files the elmoformanylangs package ships, by name: models that name one
of them but do not hold it (the released ones often) get it from here."""

# Gate blocks: that project's (allennlp's) i, f, g, o to contextvec's i, j, f, o, and back.
_GATE_ORDER = (0, 2, 1, 3)


class ManyLangsFormatError(ValueError):
    """A file of an ELMoForManyLangs directory that is missing, truncated or malformed."""


class ManyLangsFiles(NamedTuple):
    """What an ELMoForManyLangs directory holds, read but not yet checked against each other."""

    architecture: dict[str, Any]
    """The architecture JSON (``encoder``, ``token_embedder``, ...)."""
    chars: dict[str, int] | None
    """``char.dic``, or None for a model without a character encoder (``char_dim`` 0)."""
    words: dict[str, int] | None
    """``word.dic``, or None for a model without word embeddings (``word_dim`` 0)."""
    token_embedder: dict[str, torch.Tensor]
    encoder: dict[str, torch.Tensor]


def is_manylangs_dir(path: str | os.PathLike) -> bool:
    """A directory with ``config.json`` and both pickles (their content is not looked at)."""
    path = Path(path)
    return all((path / name).is_file() for name in (CONFIG_NAME, TOKEN_EMBEDDER, ENCODER))


def _json(directory: Path, name: str) -> Any:
    try:
        return read_json(model_file(directory, name))
    except UntrustedFileError as e:
        raise ManyLangsFormatError(f"{e.path}: unreadable JSON ({e.problem})") from None


def read_architecture(directory: str | os.PathLike) -> dict[str, Any]:
    """The architecture JSON that ``config.json``'s ``config_path`` names (looked up as the
    module docstring says)."""
    directory = Path(directory)
    args = _json(directory, CONFIG_NAME)
    named = args.get("config_path") if isinstance(args, dict) else None
    if not isinstance(named, str) or not named or "\0" in named:
        raise ManyLangsFormatError(f"{directory / CONFIG_NAME}: no config_path naming the architecture JSON")
    name = os.path.basename(named.replace("\\", "/"))
    # An absolute config_path is the training machine's: only its name is looked for here.
    for candidate in ([name] if os.path.isabs(named) else [named, name]):
        if candidate and os.path.lexists(directory / candidate):
            architecture = _json(directory, candidate)
            break
    else:
        if name not in SHIPPED_ARCHITECTURES:
            raise ManyLangsFormatError(
                f"{directory}: config_path {named!r} is not there, nor {name} in the directory; "
                f"copy the architecture JSON into {directory}")
        architecture = copy.deepcopy(SHIPPED_ARCHITECTURES[name])
    if not isinstance(architecture, dict):
        raise ManyLangsFormatError(f"{directory}: the architecture JSON {name} is not an object")
    return architecture


def read_dictionary(path: str | os.PathLike) -> dict[str, int]:
    """A ``token\\tid`` dictionary, read as that project does: each line stripped of surrounding
    whitespace and split on tabs; a line left with the id alone is the ideographic space
    (U+3000), whose line ``strip()`` emptied; a token listed twice keeps its last id."""
    path = Path(path)
    try:
        lines = read_bounded(path).decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ManyLangsFormatError(f"{path}: unreadable ({e})") from e
    entries: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, "\u3000")
        try:
            token, index = fields
            entries[token] = int(index)
        except ValueError:
            raise ManyLangsFormatError(f"{path}:{number}: not a 'token<TAB>id' line: {line[:60]!r}") from None
        if entries[token] < 0:
            raise ManyLangsFormatError(f"{path}:{number}: negative id {index}")
    if not entries:
        raise ManyLangsFormatError(f"{path}: empty")
    return entries


def read_state(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A pickled state dict, unpickled with ``weights_only=True`` (tensors and containers only;
    :func:`contextvec.io.untrusted.read_torch_weights`)."""
    state = read_torch_weights(path)
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise ManyLangsFormatError(f"{path}: not a state dict of tensors")
    return state


def read_model_dir(directory: str | os.PathLike) -> ManyLangsFiles:
    """Every file of a model directory; a dictionary is read only where the architecture uses
    it (``char_dim``/``word_dim`` above 0)."""
    directory = Path(directory)
    architecture = read_architecture(directory)
    dims = architecture.get("token_embedder")
    if not isinstance(dims, dict):
        raise ManyLangsFormatError(f"{directory}: the architecture JSON has no token_embedder")

    def uses(key: str) -> bool:
        value = dims.get(key, 0)
        if not isinstance(value, int):
            raise ManyLangsFormatError(f"{directory}: token_embedder.{key} {value!r} is not a number")
        return value > 0

    return ManyLangsFiles(
        architecture,
        read_dictionary(model_file(directory, CHAR_DICT)) if uses("char_dim") else None,
        read_dictionary(model_file(directory, WORD_DICT)) if uses("word_dim") else None,
        read_state(model_file(directory, TOKEN_EMBEDDER)),
        read_state(model_file(directory, ENCODER)),
    )


def _gates(tensor: torch.Tensor) -> torch.Tensor:
    """Swap the middle two of the four gate blocks along dim 0 (its own inverse)."""
    blocks = tensor.chunk(4, dim=0)
    return torch.cat([blocks[i] for i in _GATE_ORDER], dim=0)


def to_state_dict(files: ManyLangsFiles, n_layers: int,
                  directory: str | os.PathLike = "") -> dict[str, torch.Tensor]:
    """The two pickles as the state dict of :class:`~contextvec.encoders.manylangs.ManyLangsBiLM`
    (float32). Missing tensors raise :class:`ManyLangsFormatError` naming the pickle (inside
    ``directory``); shapes are the model's to check."""
    token, encoder = files.token_embedder, files.encoder
    token_file, encoder_file = (os.path.join(directory, name) for name in (TOKEN_EMBEDDER, ENCODER))
    used: set[tuple[str, str]] = set()

    def get(state: dict[str, torch.Tensor], key: str, source: str) -> torch.Tensor:
        if key not in state:
            raise ManyLangsFormatError(f"{source}: no tensor {key!r}")
        used.add((source, key))
        tensor = state[key].detach().float()
        # numpy's check: torch's isfinite allocates and scans on one thread, a large share of a load
        if not np.isfinite(tensor.numpy()).all():
            raise ManyLangsFormatError(f"{source}: {key} has NaN or infinite values")
        return tensor

    out: dict[str, torch.Tensor] = {}
    prefix = "token_encoder."
    if files.words is not None:
        out[prefix + "word_embedding.weight"] = get(token, "word_emb_layer.embedding.weight", token_file)
    if files.chars is not None:
        cnn = prefix + "char_cnn."
        out[cnn + "char_embedding.weight"] = get(token, "char_emb_layer.embedding.weight", token_file)
        convs = sorted({k.split(".")[1] for k in token if k.startswith("convolutions.")}, key=int)
        for i in convs:
            for kind in ("weight", "bias"):
                out[f"{cnn}convolutions.{i}.{kind}"] = get(token, f"convolutions.{i}.{kind}", token_file)
        highways = sorted({k.split(".")[2] for k in token if k.startswith("highways._layers.")}, key=int)
        for k in highways:
            for kind in ("weight", "bias"):
                both = get(token, f"highways._layers.{k}.{kind}", token_file)
                transform, carry = both.chunk(2, dim=0)
                out[f"{cnn}highway.transform.{k}.{kind}"] = transform.contiguous()
                out[f"{cnn}highway.gate.{k}.{kind}"] = (-carry).contiguous()
    for kind in ("weight", "bias"):
        out[f"{prefix}projection.{kind}"] = get(token, f"projection.{kind}", token_file)
    for layer in range(n_layers):
        for ours, theirs, gated in (
            ("input_weight", "input_linearity.weight", True),
            ("state_weight", "state_linearity.weight", True),
            ("bias", "state_linearity.bias", True),
            ("projection", "state_projection.weight", False),
        ):
            pair = [get(encoder, f"{d}_layer_{layer}.{theirs}", encoder_file)
                    for d in ("forward", "backward")]
            if pair[0].shape != pair[1].shape or (gated and pair[0].shape[0] % 4):
                raise ManyLangsFormatError(
                    f"{encoder_file}: {theirs} of layer {layer} has shapes {tuple(pair[0].shape)} "
                    f"forward and {tuple(pair[1].shape)} backward (each 4 gates by the cell size)")
            out[f"layers.{layer}.{ours}"] = torch.stack([_gates(t) if gated else t for t in pair])
    unused = sorted(({(token_file, k) for k in token} | {(encoder_file, k) for k in encoder}) - used)
    if unused:
        source, key = unused[0]
        raise ManyLangsFormatError(f"{source}: tensor {key!r} is not part of the model its architecture "
                                   f"describes ({len(unused)} such)")
    return out
