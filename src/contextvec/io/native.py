"""contextvec's own model format: a directory with ``config.json`` and ``model.safetensors``.

``config.json`` holds ``{"model_type": ..., "config": {...}, "format_version": 1}``; the
tensors are the module's state dict under its own parameter names. safetensors never runs
code on load, unlike pickled checkpoints, and refuses a header whose tensors lie past the file's
end; both files are regular files inside the directory
(:func:`contextvec.io.untrusted.model_file`), and no layer count in ``config.json`` exceeds the
tensors the weights hold, so a loader never builds more modules than the file can fill.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from contextvec.io.atomic import atomic_path, output_target
from contextvec.io.untrusted import UntrustedFileError, check_declared, error_line, model_file, read_json

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
FORMAT_VERSION = 1
LAYER_COUNTS = frozenset({"n_layers", "n_highway", "num_layers", "num_hidden_layers"})
"""``config.json`` fields that count modules (each holds tensors of its own)."""


class NativeFormatError(ValueError):
    """A directory that is not a readable contextvec model."""


def is_native_dir(path: str | os.PathLike) -> bool:
    """A directory with the two files of the format (their content is not looked at)."""
    path = Path(path)
    return (path / CONFIG_NAME).is_file() and (path / WEIGHTS_NAME).is_file()


def save_native(
    directory: str | os.PathLike,
    model_type: str,
    config: dict[str, Any],
    state_dict: dict[str, torch.Tensor],
) -> Path:
    """Write a model directory (each file atomically) and return its path. A symbolic link is
    written through; a file, FIFO or device in its place is refused in one line."""
    output_target(directory, directory=True).mkdir(parents=True, exist_ok=True)
    directory = Path(directory)
    tensors = {k: v.detach().cpu().contiguous() for k, v in state_dict.items()}
    with atomic_path(directory / WEIGHTS_NAME) as tmp:
        save_file(tensors, str(tmp), metadata={"model_type": model_type})
    meta = {"model_type": model_type, "format_version": FORMAT_VERSION, "config": config}
    with atomic_path(directory / CONFIG_NAME) as tmp:
        tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return directory


def cast_weights(directory: str | os.PathLike, dtype: torch.dtype) -> None:
    """Rewrite a model directory's floating-point tensors in ``dtype`` (atomically), e.g. float16
    to halve a model kept in a repository; loaders copy them into their float32 parameters."""
    path = Path(directory) / WEIGHTS_NAME
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no iterator)
    tensors = {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)


def read_meta(directory: str | os.PathLike) -> tuple[str, dict[str, Any]]:
    """``(model_type, config)`` of a model directory's ``config.json``, without the weights."""
    directory = Path(directory)
    if not is_native_dir(directory):
        raise NativeFormatError(f"{directory}: needs {CONFIG_NAME} and {WEIGHTS_NAME}")
    try:
        meta = read_json(model_file(directory, CONFIG_NAME))
        model_type, config = meta["model_type"], meta["config"]
        version = int(meta.get("format_version", FORMAT_VERSION))
        if not isinstance(config, dict):
            raise TypeError(f"config is {type(config).__name__}, not an object")
    except UntrustedFileError as e:
        raise NativeFormatError(f"{e.path}: not a contextvec config ({e.problem})") from None
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise NativeFormatError(f"{directory / CONFIG_NAME}: not a contextvec config ({e})") from e
    if version > FORMAT_VERSION:
        raise NativeFormatError(
            f"{directory}: format version {meta['format_version']} is newer than this contextvec"
        )
    return model_type, config


def native_model_type(directory: str | os.PathLike) -> str | None:
    """The model_type of a model directory, or None where there is none to read (no model
    directory, or an unreadable ``config.json``: :func:`read_meta` says what is wrong)."""
    try:
        return read_meta(directory)[0]
    except (NativeFormatError, OSError):
        return None


def load_native(directory: str | os.PathLike) -> tuple[str, dict[str, Any], dict[str, torch.Tensor]]:
    """Read a model directory: ``(model_type, config, state_dict)``."""
    directory = Path(directory)
    model_type, config = read_meta(directory)
    state_dict = read_safetensors(model_file(directory, WEIGHTS_NAME))
    _check_counts(directory / CONFIG_NAME, config, len(state_dict))
    return model_type, config, state_dict


def read_safetensors(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file, each finite; one line naming the file otherwise
    (safetensors checks the header's offsets against the file before it allocates)."""
    try:
        state_dict = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise NativeFormatError(f"{path}: unreadable or truncated ({error_line(e)})") from None
    for name, tensor in state_dict.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise NativeFormatError(f"{path}: {name} has NaN or infinite values")
    return state_dict


def _check_counts(path: Path, config: object, tensors: int) -> None:
    """Refuse a :data:`LAYER_COUNTS` field of ``config`` (nested ones too) above ``tensors``."""
    if isinstance(config, dict):
        for key, value in config.items():
            if key in LAYER_COUNTS and isinstance(value, int):
                check_declared(path, f"{key} (modules, each with tensors of the weights)", value, tensors)
            _check_counts(path, value, tensors)
