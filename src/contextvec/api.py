"""``contextvec.load``: any supported model path -> an :class:`~contextvec.encoders.Encoder`."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder
from contextvec.encoders.bilm.loader import load_bilm_tf_encoder
from contextvec.encoders.registry import EXPECTED, family_of, family_saving
from contextvec.io.hf_bert import is_hf_bert_dir
from contextvec.io.native import is_native_dir

__all__ = [
    "DEFAULT_MODEL",
    "ModelNotFoundError",
    "bundled_models",
    "check_device",
    "is_hf_bert_dir",
    "load",
    "save",
]

DEFAULT_MODEL = "elmo-en-small"
"""The model shipped inside the package: ``load()`` and ``contextvec embed`` use it by default."""


def bundled_models() -> dict[str, Path]:
    """Names and directories of the models shipped inside the package."""
    root = Path(str(resources.files("contextvec") / "models"))
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if is_native_dir(p)}


def check_device(device: str | torch.device) -> torch.device:
    """The device, or a one-line ``ValueError`` for a name torch does not know or a device this
    build of torch cannot use (``cuda`` on a CPU-only torch)."""
    try:
        device = torch.device(device)
    except RuntimeError as e:
        raise ValueError(f"unknown device {str(device)!r}: use cpu, cuda or cuda:N ({e})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device}: this torch has no usable CUDA device; use --device cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device}: MPS is not available here; use --device cpu")
    return device


class ModelNotFoundError(FileNotFoundError):
    """No model at the path given, or no bundled default model."""


def load(
    model: str | os.PathLike | None = None,
    *,
    options_file: str | os.PathLike | None = None,
    weight_file: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
) -> Encoder:
    """Load an encoder, ready for ``embed()`` (eval mode).

    ``model`` is None for the bundled default model (:data:`DEFAULT_MODEL`), the name of a
    bundled model, or a directory holding bilm-tf files (``options.json`` + ``weights.hdf5``), a
    contextvec model (``config.json`` + ``model.safetensors``) or a Hugging Face BERT model
    (``config.json`` of model_type "bert" + ``model.safetensors`` or ``pytorch_model.bin``, with
    ``tokenizer.json`` or ``vocab.txt``), or a CoVe model (contextvec directory of model_type
    "cove" or "cove-seq2seq", with its word vectors).
    Alternatively give bilm-tf's ``options_file`` and ``weight_file`` directly.
    """
    device = check_device(device)
    if options_file is not None or weight_file is not None:
        if options_file is None or weight_file is None:
            raise ValueError("options_file and weight_file go together")
        return load_bilm_tf_encoder(options_file, weight_file, device)
    bundled = bundled_models()
    if model is None:
        model = DEFAULT_MODEL
        if model not in bundled:
            raise ModelNotFoundError(
                f"the bundled model {DEFAULT_MODEL} is missing from this installation of "
                f"contextvec ({Path(__file__).parent / 'models'}); reinstall, or pass a model "
                "directory"
            )
    path = Path(model)
    if not path.exists() and str(model) in bundled:
        path = bundled[str(model)]
    if not path.exists():
        names = ", ".join(bundled) or "none"
        raise ModelNotFoundError(f"no model at {path} (bundled models: {names})")
    family = family_of(path)
    if family is None:
        raise ModelNotFoundError(f"{path}: not a model directory (expected {EXPECTED})")
    return family.load(path, device)


def save(encoder: Encoder, directory: str | os.PathLike) -> Path:
    """Save an encoder in contextvec's native format (``config.json`` + ``model.safetensors``)."""
    family = family_saving(encoder)
    if family is None or family.save is None:
        raise TypeError(f"cannot save {type(encoder).__name__} yet")
    return family.save(encoder, Path(directory))
