"""Hugging Face BERT directories -> :class:`BertModel` / :class:`BertEncoder`, and the HF BERT
family of :mod:`contextvec.encoders.registry`.

The format (file names, ``bert.`` prefix, legacy ``gamma``/``beta`` names, weights-only
reading of ``pytorch_model.bin``) is :mod:`contextvec.io.hf_bert`; here the renamed tensors
meet the model: a checkpoint without any ``pooler.*`` weights gives a model without a pooler,
and anything else that does not match is an error naming the keys (missing, unexpected, or of
the wrong shape for ``config.json``).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder
from contextvec.encoders.bert.config import BertConfig, ConfigError
from contextvec.encoders.bert.encoder import BertEncoder
from contextvec.encoders.bert.model import BertModel
from contextvec.encoders.bert.tokenizer import (
    SPECIAL_TOKENS_MAP,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    VOCAB_TXT,
    WordPieceTokenizer,
)
from contextvec.encoders.family import Family
from contextvec.io.hf_bert import (
    CONFIG_NAME,
    BertCheckpointError,
    is_hf_bert_dir,
    read_weights,
    weights_file,
)
from contextvec.io.untrusted import (
    UntrustedFileError,
    check_declared,
    error_line,
    model_file,
    read_bounded,
    read_json,
)

TOKENIZER_FILES = (VOCAB_TXT, TOKENIZER_JSON, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)


def build_model(
    config: BertConfig, state_dict: dict[str, torch.Tensor], source: str = "checkpoint"
) -> BertModel:
    """A :class:`BertModel` for ``config`` holding the (already renamed) ``state_dict``.

    Raises :class:`BertCheckpointError` naming every missing, unexpected or misshapen key. The
    keys and shapes are checked on a model without storage first, so a config that declares
    more than the checkpoint holds allocates nothing.
    """
    has_pooler = any(k.startswith("pooler.") for k in state_dict)
    try:
        with torch.device("meta"):
            expected = BertModel(config, add_pooling_layer=has_pooler).state_dict()
    except (TypeError, ValueError, RuntimeError, OverflowError) as e:  # sizes no module can have
        raise BertCheckpointError(f"{source}: its config.json declares sizes no BERT has "
                                  f"({error_line(e)})") from None
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    mismatched = [
        f"{k}: checkpoint {tuple(state_dict[k].shape)}, config.json {tuple(expected[k].shape)}"
        for k in expected if k in state_dict and state_dict[k].shape != expected[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing keys: {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected keys: {', '.join(unexpected)}")
    if mismatched:
        problems.append(f"shape mismatches: {'; '.join(mismatched)}")
    if problems:
        raise BertCheckpointError(f"{source} does not fit its BERT config: " + " | ".join(problems))
    for key, tensor in state_dict.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise BertCheckpointError(f"{source}: {key} has NaN or infinite values")
    model = BertModel(config, add_pooling_layer=has_pooler)
    model.load_state_dict(state_dict)
    return model


def read_bert_dir(directory: str | os.PathLike) -> tuple[BertConfig, dict[str, torch.Tensor]]:
    """``(config, state_dict)`` of an HF BERT directory, keys renamed to :class:`BertModel`'s."""
    path = model_file(directory, CONFIG_NAME)
    content = read_json(path)
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: not a JSON object")
    try:
        config = BertConfig.from_dict(content)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e
    state_dict = read_weights(directory)
    # Each hidden layer is tensors of the checkpoint: more than it holds would only build
    # modules without end.
    check_declared(path, "num_hidden_layers", config.num_hidden_layers, len(state_dict))
    return config, state_dict


def check_tokenizer_files(directory: str | os.PathLike) -> None:
    """Refuse, in one line, a tokenizer file of ``directory`` that is not a regular file inside
    it or that holds more than a vocabulary may (before the tokenizer reads it)."""
    for name in TOKENIZER_FILES:
        if os.path.lexists(Path(directory) / name):
            path = model_file(directory, name)
            try:  # the tokenizer library's own error on bad UTF-8 names no file
                read_bounded(path).decode("utf-8")
            except UnicodeDecodeError as e:
                raise UntrustedFileError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None


def load_bert_model(directory: str | os.PathLike) -> BertModel:
    """The :class:`BertModel` of an HF BERT directory, in eval mode."""
    config, state_dict = read_bert_dir(directory)
    return build_model(config, state_dict, source=str(weights_file(directory))).eval()


def load_bert_encoder(
    directory: str | os.PathLike, subword_pooling: str = "first", window: int | None = None
) -> BertEncoder:
    """A word-level :class:`BertEncoder` for an HF BERT directory (weights and tokenizer), eval mode."""
    model = load_bert_model(directory)
    check_tokenizer_files(directory)
    try:
        tokenizer = WordPieceTokenizer.from_directory(directory)
    except ValueError as e:  # its checks of the vocabulary name no file
        raise BertCheckpointError(e if str(directory) in str(e) else f"{directory}: {e}") from None
    return BertEncoder(model, tokenizer,
                       subword_pooling=subword_pooling, window=window).eval()


def _bert_facts(encoder: Encoder) -> dict[str, str]:
    config = encoder.config
    return {"vocabulary": f"{config.vocab_size} word pieces",
            "transformer": f"{config.num_hidden_layers} layers, {config.num_attention_heads} heads, "
                           f"hidden {config.hidden_size}"}


HF_BERT = Family("hf-bert", is_hf_bert_dir, lambda path, device: load_bert_encoder(path).to(device).eval(),
                 "a BERT model", format="Hugging Face BERT (config.json, weights, vocab.txt/tokenizer.json)",
                 facts=_bert_facts, low_precision=True)
