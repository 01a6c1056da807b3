"""One fingerprint of an encoder: what its vectors depend on, as a sha256 hex digest.

Used wherever finished work is reused — resumed bulk embedding, the feature cache, saved task
models — so that other weights, settings or vocabulary are never mistaken for the same model.
"""

from __future__ import annotations

import hashlib
import json

import torch

from contextvec.encoders.base import Encoder

# Encoder attributes that change speed or memory but never the vectors: not part of the key.
_NOT_IDENTITY = frozenset({"training", "token_cache_size", "max_pieces_per_call"})


def _settings(encoder: Encoder) -> dict:
    """The encoder's output-relevant settings as JSON-able values."""
    # A class that moved keeps the name it had (``fingerprint_class``), so that caches and stored
    # runs made before the move still match.
    name = getattr(type(encoder), "fingerprint_class", None)
    settings: dict = {"class": name or f"{type(encoder).__module__}.{type(encoder).__qualname__}"}
    config = getattr(encoder, "config", None)
    if config is not None:
        settings["config"] = config.to_dict() if hasattr(config, "to_dict") else repr(config)
    for name, value in sorted(vars(encoder).items()):
        if not name.startswith("_") and name not in _NOT_IDENTITY and (
            value is None or isinstance(value, bool | int | float | str)
        ):
            settings[name] = value
    # A BERT encoder's vocabulary is not in its state dict but changes its pieces.
    tokenizer = getattr(getattr(encoder, "tokenizer", None), "tokenizer", None)
    if hasattr(tokenizer, "to_str"):
        settings["tokenizer_sha256"] = hashlib.sha256(tokenizer.to_str().encode()).hexdigest()
    return settings


def model_identity(encoder: Encoder) -> str:
    """A sha256 hex digest of the encoder's class, settings, config, tokenizer and weights."""
    digest = hashlib.sha256(json.dumps(_settings(encoder), sort_keys=True, default=str).encode())
    for name, tensor in sorted(encoder.state_dict().items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()
