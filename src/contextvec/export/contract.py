"""What a runtime needs beside the ``.onnx`` file: the character-id contract, names, shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextvec.encoders.bert import BertEncoder
from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.cove import MTLSTMConfig
from contextvec.text.chars import (
    BOS_CHAR,
    BOS_TOKEN,
    BOW_CHAR,
    EOS_CHAR,
    EOS_TOKEN,
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
    byte or special-character values plus ``offset``; 0 marks a padded (absent) token; a token
    spelled exactly ``begin_sentence_token`` / ``end_sentence_token`` is the boundary itself."""
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
        "begin_sentence_token": BOS_TOKEN,
        "end_sentence_token": EOS_TOKEN,
        "absent_token": 0,
    }


def char_id_vectors(tokens: Sequence[str]) -> list[dict[str, Any]]:
    """Test vectors: each token with its 50 ids."""
    return [{"token": t, "ids": token_to_char_ids(t).tolist()} for t in tokens]


def _outputs(layers: int, dim: int, mix: dict[str, Any] | None, time: str = "time") -> list[dict[str, Any]]:
    """The graph's outputs: every layer, and with a scalar mix the mixed vectors."""
    outputs = [{"name": "layers", "dtype": "float32", "shape": ["batch", layers, time, dim]}]
    if mix is not None:
        outputs.append({"name": "mixed", "dtype": "float32", "shape": ["batch", time, dim]})
    return outputs


def _manifest(family: str, onnx_file: str, opset: int, identity: str, inputs: list[dict[str, Any]],
              outputs: list[dict[str, Any]], mix: dict[str, Any] | None) -> dict[str, Any]:
    """The fields every family's manifest has; ``outputs[0]`` is the layers output."""
    _, layers, _, dim = outputs[0]["shape"]
    return {
        "format": FORMAT,
        "version": VERSION,
        "family": family,
        "onnx_file": onnx_file,
        "opset": opset,
        "model_identity": identity,
        "inputs": inputs,
        "outputs": outputs,
        "num_layers": layers,
        "dim": dim,
        "scalar_mix": mix,
    }


def _int64(name: str, *shape: str | int) -> dict[str, Any]:
    return {"name": name, "dtype": "int64", "shape": ["batch", *shape]}


def elmo_manifest(config: BiLMConfig, onnx_file: str, opset: int, identity: str,
                  mix: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON written beside an exported ELMo."""
    inputs = [_int64("char_ids", "time", MAX_CHARS_PER_TOKEN), _int64("mask", "time")]
    outputs = _outputs(config.num_output_layers, config.output_dim, mix)
    return {**_manifest("elmo", onnx_file, opset, identity, inputs, outputs, mix),
            "char_ids": char_id_contract()}


def cove_manifest(config: MTLSTMConfig, onnx_file: str, words_file: str, opset: int, identity: str,
                  mix: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON written beside an exported CoVe: a token's id is 1 + its index in the word list
    (``words_file``, a JSON array), after lower-casing if ``lowercase``; 0 for any other token."""
    inputs = [_int64("word_ids", "time"), _int64("mask", "time")]
    outputs = _outputs(config.num_layers + 1, config.input_dim + config.output_dim, mix)
    return {**_manifest("cove", onnx_file, opset, identity, inputs, outputs, mix),
            "words": {"file": words_file, "offset": 1, "unknown": 0, "lowercase": config.lowercase}}


def bert_manifest(encoder: BertEncoder, onnx_file: str, tokenizer_file: str, vocab_file: str | None,
                  opset: int, identity: str, mix: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON written beside an exported BERT (docs/onnx.md, "BERT")."""
    config = encoder.config
    layers = config.num_hidden_layers + 1
    inputs = [_int64("input_ids", "pieces"), _int64("attention_mask", "pieces"),
              _int64("first_piece", "words"), _int64("mask", "words")]
    outputs = _outputs(layers, config.hidden_size, mix, time="words")
    manifest = _manifest("bert", onnx_file, opset, identity, inputs, outputs, mix)
    manifest["outputs"].append({"name": "hidden_states", "dtype": "float32",
                                "shape": ["batch", layers, "pieces", config.hidden_size]})
    tokenizer = encoder.tokenizer
    return {**manifest, "pieces": {
        "tokenizer_file": tokenizer_file, "vocab_file": vocab_file,
        "cls_id": tokenizer.cls_id, "sep_id": tokenizer.sep_id, "unk_id": tokenizer.unk_id,
        "padding_id": config.pad_token_id, "max_pieces_per_row": config.max_position_embeddings,
        "window": encoder.window, "subword_pooling": encoder.subword_pooling,
    }}
