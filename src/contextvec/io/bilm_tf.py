"""bilm-tf weight files (``options.json`` + ``weights.hdf5``), as pure functions.

The HDF5 file is bilm-tf's dump of its TensorFlow variables: ``char_embed`` without the padding
row, TF ``conv2d`` kernels, ``x @ W`` dense kernels, and ``LSTMCell`` kernels stacking
``[W_x; W_h]`` with gates in the order i, j, f, o. contextvec's modules keep TF's gate order and
add TF's forget bias of 1 at run time, so every conversion here is a transpose or a copy and
reading then writing a file gives back the same bits.

The functions here see only ``options`` (the content of ``options.json``: bilm-tf's own
description of the file), arrays and state dicts; building a model from them is
:mod:`contextvec.encoders.bilm.loader`'s job.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import h5py
import numpy as np
import torch

from contextvec.io.atomic import atomic_path
from contextvec.io.untrusted import (
    UntrustedFileError,
    check_declared,
    check_hdf5_dataset,
    read_json,
)

OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"


class OptionsError(ValueError):
    """An ``options.json`` that is not JSON, or lacks a field the weight layout needs."""


class WeightFileError(ValueError):
    """A weight file that does not hold the model its options describe."""


class Dims(NamedTuple):
    """The sizes in ``options.json`` that fix the datasets of a weight file."""

    char_embed_dim: int
    filters: tuple[tuple[int, int], ...]
    n_highway: int
    projection_dim: int
    lstm_dim: int
    n_layers: int

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Dims:
        """The sizes of bilm-tf ``options`` (the content of ``options.json``)."""
        try:
            lstm, cnn = options["lstm"], options["char_cnn"]
            return cls(
                char_embed_dim=int(cnn["embedding"]["dim"]),
                filters=tuple((int(w), int(n)) for w, n in cnn["filters"]),
                n_highway=int(cnn["n_highway"]),
                projection_dim=int(lstm["projection_dim"]),
                lstm_dim=int(lstm["dim"]),
                n_layers=int(lstm["n_layers"]),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise OptionsError(f"options.json lacks or mistypes a required field: {e}") from e


def read_options_json(path: str | os.PathLike) -> Any:
    """The parsed content of a bilm-tf/allennlp ``options.json`` (not yet checked), read with
    :func:`contextvec.io.untrusted.read_json`'s bounds."""
    try:
        return read_json(path)
    except UntrustedFileError as e:
        raise OptionsError(f"{e.path}: not a valid options.json ({e.problem})") from None


def write_options_json(options: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Write ``options.json`` content, atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(options, indent=2) + "\n", encoding="utf-8")


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_datasets(options: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every dataset name of a bilm-tf weight file for ``options``, with its shape."""
    dims = Dims.of(options)
    f, p, c = dims.n_filters, dims.projection_dim, dims.lstm_dim
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (261, dims.char_embed_dim)}
    for i, (width, n_maps) in enumerate(dims.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, dims.char_embed_dim, n_maps)
        shapes[f"CNN/b_cnn_{i}"] = (n_maps,)
    for k in range(dims.n_highway):
        for name in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{name}"] = (f, f)
            shapes[f"CNN_high_{k}/b_{name}"] = (f,)
    if f != p:
        shapes["CNN_proj/W_proj"] = (f, p)
        shapes["CNN_proj/b_proj"] = (p,)
    for d in range(2):
        for layer in range(dims.n_layers):
            prefix = _lstm_prefix(d, layer)
            shapes[f"{prefix}/W_0"] = (2 * p, 4 * c)
            shapes[f"{prefix}/B"] = (4 * c,)
            shapes[f"{prefix}/W_P_0"] = (c, p)
    return shapes


def read_weights(path: str | os.PathLike, options: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Read and validate every dataset of a bilm-tf ``weights.hdf5``.

    Raises :class:`WeightFileError` naming missing or unexpected datasets, shapes that disagree
    with the options, non-finite values, or a file that is not (or no longer entirely) HDF5;
    :class:`~contextvec.io.untrusted.UntrustedFileError` for a dataset whose data lies outside
    the file or that declares more than it holds
    (:func:`~contextvec.io.untrusted.check_hdf5_dataset`). Nothing is read before every dataset
    has passed these checks, so the memory a file takes is what it holds.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weight file not found: {path}")  # is_file: regular files only
    arrays: dict[str, np.ndarray] = {}
    try:
        with h5py.File(path, "r") as f:
            found: list[str] = []
            f.visititems(lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset) else None)
            # Each layer the options declare is datasets of the file: a count beyond them would
            # only make expected_datasets list names without end.
            dims = Dims.of(options)
            for what, count in (("highway layers", dims.n_highway), ("LSTM layers", dims.n_layers),
                                ("filters", len(dims.filters))):
                check_declared(path, f"(in options.json) {what}", count, len(found))
            expected = expected_datasets(options)
            missing = sorted(set(expected) - set(found))
            unexpected = sorted(set(found) - set(expected))
            if missing or unexpected:
                parts = []
                if missing:
                    parts.append(f"missing datasets {missing}")
                if unexpected:
                    parts.append(f"unexpected datasets {unexpected}")
                raise WeightFileError(
                    f"{path}: {'; '.join(parts)} (does options.json describe this file?)"
                )
            datasets: dict[str, h5py.Dataset] = {}
            for name, shape in expected.items():
                if not isinstance(f.get(name, getlink=True), h5py.HardLink):
                    raise WeightFileError(f"{path}: {name} is a link, not a dataset of the file")
                data = f[name]
                if tuple(data.shape) != shape:
                    raise WeightFileError(
                        f"{path}: dataset {name} has shape {tuple(data.shape)} but options.json "
                        f"implies {shape}"
                    )
                if data.dtype.kind != "f":
                    raise WeightFileError(f"{path}: dataset {name} has non-float dtype {data.dtype}")
                datasets[name] = check_hdf5_dataset(path, name, data)
            for name, data in datasets.items():
                arrays[name] = data[()]
    except (OSError, RuntimeError, KeyError) as e:  # what HDF5 raises on a damaged structure
        raise WeightFileError(f"{path}: not a readable HDF5 file, or truncated ({e})") from e
    for name, array in arrays.items():
        bad = int(np.size(array) - np.isfinite(array).sum())
        if bad:
            raise WeightFileError(f"{path}: dataset {name} has {bad} NaN or infinite values")
    return arrays


def write_weights(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
    """Write datasets as a bilm-tf ``weights.hdf5`` (float32), atomically."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=np.ascontiguousarray(array, dtype=np.float32))


def to_state_dict(arrays: dict[str, np.ndarray], options: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """bilm-tf datasets -> state dict of contextvec's ELMo biLM (``contextvec.encoders.bilm``)."""
    dims = Dims.of(options)

    def t(name: str) -> torch.Tensor:
        return torch.from_numpy(np.asarray(arrays[name], dtype=np.float32))

    sd: dict[str, torch.Tensor] = {}
    embed = t("char_embed")
    sd["token_encoder.char_embedding.weight"] = torch.cat([embed.new_zeros(1, embed.shape[1]), embed])
    for i in range(len(dims.filters)):
        sd[f"token_encoder.convolutions.{i}.weight"] = t(f"CNN/W_cnn_{i}")[0].permute(2, 1, 0)
        sd[f"token_encoder.convolutions.{i}.bias"] = t(f"CNN/b_cnn_{i}")
    for k in range(dims.n_highway):
        for ours, theirs in (("transform", "transform"), ("gate", "carry")):
            sd[f"token_encoder.highway.{ours}.{k}.weight"] = t(f"CNN_high_{k}/W_{theirs}").T
            sd[f"token_encoder.highway.{ours}.{k}.bias"] = t(f"CNN_high_{k}/b_{theirs}")
    if dims.n_filters != dims.projection_dim:
        sd["token_encoder.projection.weight"] = t("CNN_proj/W_proj").T
        sd["token_encoder.projection.bias"] = t("CNN_proj/b_proj")
    p = dims.projection_dim
    for layer in range(dims.n_layers):
        kernels = [t(f"{_lstm_prefix(d, layer)}/W_0") for d in range(2)]
        sd[f"layers.{layer}.input_weight"] = torch.stack([w[:p].T for w in kernels])
        sd[f"layers.{layer}.state_weight"] = torch.stack([w[p:].T for w in kernels])
        sd[f"layers.{layer}.bias"] = torch.stack([t(f"{_lstm_prefix(d, layer)}/B") for d in range(2)])
        sd[f"layers.{layer}.projection"] = torch.stack(
            [t(f"{_lstm_prefix(d, layer)}/W_P_0").T for d in range(2)]
        )
    return {k: v.contiguous() for k, v in sd.items()}


def from_state_dict(sd: dict[str, torch.Tensor], options: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """State dict of an ELMo biLM -> bilm-tf datasets (the inverse of :func:`to_state_dict`)."""
    dims = Dims.of(options)

    def a(x: torch.Tensor) -> np.ndarray:
        return np.ascontiguousarray(x.detach().cpu().to(torch.float32).numpy())

    out: dict[str, np.ndarray] = {"char_embed": a(sd["token_encoder.char_embedding.weight"][1:])}
    for i in range(len(dims.filters)):
        out[f"CNN/W_cnn_{i}"] = a(sd[f"token_encoder.convolutions.{i}.weight"].permute(2, 1, 0)[None])
        out[f"CNN/b_cnn_{i}"] = a(sd[f"token_encoder.convolutions.{i}.bias"])
    for k in range(dims.n_highway):
        for ours, theirs in (("transform", "transform"), ("gate", "carry")):
            out[f"CNN_high_{k}/W_{theirs}"] = a(sd[f"token_encoder.highway.{ours}.{k}.weight"].T)
            out[f"CNN_high_{k}/b_{theirs}"] = a(sd[f"token_encoder.highway.{ours}.{k}.bias"])
    if dims.n_filters != dims.projection_dim:
        out["CNN_proj/W_proj"] = a(sd["token_encoder.projection.weight"].T)
        out["CNN_proj/b_proj"] = a(sd["token_encoder.projection.bias"])
    for layer in range(dims.n_layers):
        for d in range(2):
            prefix = _lstm_prefix(d, layer)
            w_x = sd[f"layers.{layer}.input_weight"][d].T
            w_h = sd[f"layers.{layer}.state_weight"][d].T
            out[f"{prefix}/W_0"] = a(torch.cat([w_x, w_h]))
            out[f"{prefix}/B"] = a(sd[f"layers.{layer}.bias"][d])
            # A plain LSTM (no projection) is bilm-tf's projected one with W_P = identity.
            w_p = sd.get(f"layers.{layer}.projection")
            out[f"{prefix}/W_P_0"] = a(torch.eye(dims.lstm_dim) if w_p is None else w_p[d].T)
    return out
