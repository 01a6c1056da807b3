"""``contextvec.load``: any supported model path -> an :class:`~contextvec.encoders.Encoder`."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.loader import load_bert_encoder, weights_file
from contextvec.encoders.bilm import MODEL_TYPE as BILM_TYPE
from contextvec.encoders.bilm import BiLMConfig, ElmoBiLM, ElmoEncoder
from contextvec.encoders.cove import MODEL_TYPES as COVE_TYPES
from contextvec.encoders.cove import CoveEncoder, load_cove_encoder, save_cove_encoder
from contextvec.io.bilm_tf import load_bilm_tf
from contextvec.io.native import NativeFormatError, is_native_dir, load_native, save_native

BILM_TF_FILES = ("options.json", "weights.hdf5")
DEFAULT_MODEL = "elmo-en-small"
"""The model shipped inside the package: ``load()`` and ``contextvec embed`` use it by default."""


def bundled_models() -> dict[str, Path]:
    """Names and directories of the models shipped inside the package."""
    root = Path(str(resources.files("contextvec") / "models"))
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if is_native_dir(p)}


def is_hf_bert_dir(path: Path) -> bool:
    """An HF BERT directory: ``config.json`` of model_type "bert" (or a Bert architecture), not a
    contextvec config, and ``model.safetensors`` or ``pytorch_model.bin``."""
    if not (path.is_dir() and (path / "config.json").is_file() and weights_file(path) is not None):
        return False
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    if not isinstance(config, dict) or "format_version" in config:
        return False
    architectures = config.get("architectures") or []
    return config.get("model_type") == "bert" or (
        isinstance(architectures, list) and any("Bert" in str(a) for a in architectures)
    )


def _native_model_type(path: Path) -> str | None:
    try:
        return json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None  # load_native reports what is wrong with the file


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
    if options_file is not None or weight_file is not None:
        if options_file is None or weight_file is None:
            raise ValueError("options_file and weight_file go together")
        return ElmoEncoder(load_bilm_tf(options_file, weight_file)).to(device).eval()
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
    if path.is_dir() and all((path / name).is_file() for name in BILM_TF_FILES):
        return load(options_file=path / BILM_TF_FILES[0], weight_file=path / BILM_TF_FILES[1],
                    device=device)
    if is_hf_bert_dir(path):
        return load_bert_encoder(path).to(device).eval()
    if is_native_dir(path) and _native_model_type(path) in COVE_TYPES:
        return load_cove_encoder(path, device=device)
    if is_native_dir(path):
        model_type, config, state_dict = load_native(path)
        if model_type != BILM_TYPE:
            raise NativeFormatError(f"{path}: unknown model_type {model_type!r}")
        bilm = ElmoBiLM(BiLMConfig.from_dict(config))
        if not bilm.config.bidirectional:
            raise ValueError(f"{path}: a forward-only LM gives no ELMo representations")
        # Trained models also keep their softmax (for perplexity and fine-tuning).
        bilm.load_state_dict({k: v for k, v in state_dict.items() if not k.startswith("softmax.")})
        return ElmoEncoder(bilm).to(device).eval()
    raise ModelNotFoundError(
        f"{path}: not a model directory (expected {' + '.join(BILM_TF_FILES)}, "
        "config.json + model.safetensors, or an HF BERT directory)"
    )


def save(encoder: Encoder, directory: str | os.PathLike) -> Path:
    """Save an encoder in contextvec's native format (``config.json`` + ``model.safetensors``)."""
    if isinstance(encoder, CoveEncoder):
        return save_cove_encoder(encoder, directory)
    if not isinstance(encoder, ElmoEncoder):
        raise TypeError(f"cannot save {type(encoder).__name__} yet")
    return save_native(directory, BILM_TYPE, encoder.config.to_dict(), encoder.bilm.state_dict())
