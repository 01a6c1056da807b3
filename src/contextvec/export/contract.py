"""What a runtime needs beside the ``.onnx`` file: the character-id contract, names, shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.text.chars import (
    BOS_CHAR,
    BOW_CHAR,
    EOS_CHAR,
    EOW_CHAR,
    MAX_BYTES_PER_TOKEN,
    MAX_CHARS_PER_TOKEN,
    PAD_CHAR,
    token_to_char_ids,
)

FORMAT = "contextvec-onnx"
VERSION = 1


def char_id_contract() -> dict[str, Any]:
    """ELMo's character-id mapping as data (docs/onnx.md states it in words). Ids are the raw
    byte or special-character values plus ``offset``; 0 marks a padded (absent) token."""
    return {
        "encoding": "utf-8",
        "max_characters_per_token": MAX_CHARS_PER_TOKEN,
        "max_bytes_per_token": MAX_BYTES_PER_TOKEN,
        "offset": 1,
        "begin_word": BOW_CHAR + 1,
        "end_word": EOW_CHAR + 1,
        "padding": PAD_CHAR + 1,
        "begin_sentence_char": BOS_CHAR + 1,
        "end_sentence_char": EOS_CHAR + 1,
        "absent_token": 0,
    }


def char_id_vectors(tokens: Sequence[str]) -> list[dict[str, Any]]:
    """Test vectors: each token with its 50 ids."""
    return [{"token": t, "ids": token_to_char_ids(t).tolist()} for t in tokens]


def elmo_manifest(config: BiLMConfig, onnx_file: str, opset: int, identity: str,
                  mix: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON written beside an exported ELMo."""
    layers, dim = config.num_output_layers, config.output_dim
    outputs = [{"name": "layers", "dtype": "float32", "shape": ["batch", layers, "time", dim]}]
    if mix is not None:
        outputs.append({"name": "mixed", "dtype": "float32", "shape": ["batch", "time", dim]})
    return {
        "format": FORMAT,
        "version": VERSION,
        "family": "elmo",
        "onnx_file": onnx_file,
        "opset": opset,
        "model_identity": identity,
        "inputs": [
            {"name": "char_ids", "dtype": "int64", "shape": ["batch", "time", MAX_CHARS_PER_TOKEN]},
            {"name": "mask", "dtype": "int64", "shape": ["batch", "time"]},
        ],
        "outputs": outputs,
        "num_layers": layers,
        "dim": dim,
        "scalar_mix": mix,
        "char_ids": char_id_contract(),
    }
