"""ELMoForManyLangs model directories, and their contextvec native form, as families of
:mod:`contextvec.encoders.registry`.

The original directory's files are read by :mod:`contextvec.io.elmoformanylangs`; the native
form is ``config.json`` (a :class:`ManyLangsConfig`) + ``model.safetensors`` (the
:class:`ManyLangsBiLM`'s state dict) + ``vocabulary.json`` (both dictionaries, as JSON objects).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from contextvec.encoders.base import Encoder
from contextvec.encoders.bilm.config import ConfigError
from contextvec.encoders.family import Family, Form
from contextvec.encoders.manylangs.config import MODEL_TYPE, ManyLangsConfig, ManyLangsVocabulary
from contextvec.encoders.manylangs.encoder import ManyLangsEncoder
from contextvec.encoders.manylangs.model import ManyLangsBiLM
from contextvec.io import elmoformanylangs as files
from contextvec.io.atomic import atomic_path
from contextvec.io.native import NativeFormatError, load_native, native_model_type, read_meta, save_native
from contextvec.io.untrusted import check_declared, model_file, read_json

VOCABULARY_NAME = "vocabulary.json"


def _load_checked(module: nn.Module, state: dict[str, torch.Tensor], source: Path,
                  assign: bool = False) -> None:
    """``module.load_state_dict(state, assign=assign)``, with a one-line error naming the first
    tensor that is missing or of another shape than the configuration makes."""
    for name, tensor in module.state_dict().items():
        if name not in state:
            raise NativeFormatError(f"{source}: no tensor {name!r}")
        if tuple(state[name].shape) != tuple(tensor.shape):
            raise NativeFormatError(f"{source}: {name} has shape {tuple(state[name].shape)}; its "
                                    f"configuration makes {tuple(tensor.shape)}")
    extra = sorted(set(state) - set(module.state_dict()))
    if extra:
        raise NativeFormatError(f"{source}: unexpected tensor {extra[0]!r} ({len(extra)} such)")
    module.load_state_dict(state, assign=assign)


def _check_counts(path: Path, read: files.ManyLangsFiles) -> None:
    """Refuse layer counts the pickles cannot hold before the model's modules are made (each
    layer is tensors of the pickles: a larger count would only build modules without end)."""
    for part, key, tensors in (("encoder", "n_layers", read.encoder),
                               ("token_embedder", "n_highway", read.token_embedder),
                               ("token_embedder", "filters", read.token_embedder)):
        declared = read.architecture.get(part)
        value = declared.get(key) if isinstance(declared, dict) else None
        count = len(value) if isinstance(value, list) else value
        if isinstance(count, int):
            check_declared(path, f"(in its architecture JSON) {part}.{key} counting", count, len(tensors))


def read_manylangs_bilm(path: str | Path) -> ManyLangsBiLM:
    """The :class:`ManyLangsBiLM` (eval mode, float32) of an ELMoForManyLangs directory."""
    path = Path(path)
    read = files.read_model_dir(path)
    _check_counts(path, read)
    rows = {key: int(t.shape[0]) for key, t in read.token_embedder.items() if t.dim() == 2}
    try:
        config = ManyLangsConfig.from_architecture(
            read.architecture, n_words=rows.get("word_emb_layer.embedding.weight", 0),
            n_characters=rows.get("char_emb_layer.embedding.weight", 0))
        # Built without storage: every tensor comes from the files, so random initial values
        # would only be written to be overwritten.
        with torch.device("meta"):
            bilm = ManyLangsBiLM(config, ManyLangsVocabulary(read.words, read.chars))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e
    _load_checked(bilm, files.to_state_dict(read, config.n_layers, path), path, assign=True)
    return bilm.eval()


def load_manylangs_encoder(path: Path, device: torch.device) -> ManyLangsEncoder:
    """A :class:`ManyLangsEncoder` (eval mode, on ``device``) of an ELMoForManyLangs directory."""
    return ManyLangsEncoder(read_manylangs_bilm(path)).to(device).eval()


def load_native_manylangs(path: Path, device: torch.device) -> ManyLangsEncoder:
    """The :class:`ManyLangsEncoder` of a native ``"elmoformanylangs-bilm"`` directory."""
    model_type, config, state = load_native(path)
    if model_type != MODEL_TYPE:
        raise NativeFormatError(f"{path}: model_type {model_type!r} is not {MODEL_TYPE!r}")
    vocabulary_file = model_file(path, VOCABULARY_NAME)
    try:
        vocabulary = ManyLangsVocabulary.from_dict(read_json(vocabulary_file))
        # Built without storage, as the original form: every tensor comes from the file.
        with torch.device("meta"):
            bilm = ManyLangsBiLM(ManyLangsConfig.from_dict(config), vocabulary)
    except (ValueError, TypeError) as e:  # ConfigError, and values its checks did not expect
        raise NativeFormatError(f"{path}: {e}") from None
    like = bilm.state_dict()  # float32 parameters, whatever the file stores (cast_weights)
    state = {k: v.to(like[k].dtype) if k in like else v for k, v in state.items()}
    _load_checked(bilm, state, path, assign=True)
    return ManyLangsEncoder(bilm.eval()).to(device).eval()


def save_native_manylangs(encoder: Encoder, directory: Path) -> Path:
    """Write a :class:`ManyLangsEncoder` as a native ``"elmoformanylangs-bilm"`` directory."""
    if not isinstance(encoder, ManyLangsEncoder):
        raise TypeError(f"cannot save {type(encoder).__name__} as {MODEL_TYPE}")
    bilm = encoder.bilm
    directory = save_native(directory, MODEL_TYPE, bilm.config.to_dict(), bilm.state_dict())
    with atomic_path(directory / VOCABULARY_NAME) as tmp:
        tmp.write_text(json.dumps(bilm.vocabulary.to_dict(), ensure_ascii=False) + "\n", encoding="utf-8")
    return directory


def no_bilm_tf_form(path: Path, form: Form) -> str:
    """Why the ELMoForManyLangs model at ``path`` (an original directory or its native form) has
    no bilm-tf HDF5 ``form``, in one line."""
    if native_model_type(path) == MODEL_TYPE:
        dims = read_meta(path)[1]
    else:
        dims = files.read_architecture(path).get("token_embedder", {})
    reasons = []
    if int(dims.get("char_dim", 0)):
        reasons.append("its char-CNN reads the characters of its own dictionary (char.dic, one embedding "
                       "per Unicode character), where a bilm-tf weight file embeds UTF-8 bytes (a "
                       "character outside ASCII is several bytes, so no table maps one onto the other)")
    if int(dims.get("word_dim", 0)):
        reasons.append("its token layer reads word embeddings, which a bilm-tf file has no place for")
    return f"an ELMoForManyLangs model has no {form} form: {', and '.join(reasons)}; convert it --to native"


def manylangs_facts(encoder: Encoder) -> dict[str, str]:
    """What ``contextvec info`` says of an ELMoForManyLangs model beyond layers and width."""
    config, vocabulary = encoder.config, encoder.bilm.vocabulary
    words = f"{len(vocabulary.words)} words ({config.word_dim}-d)" if vocabulary.words else "none"
    chars = (f"{len(vocabulary.chars)} characters ({config.char_dim}-d), "
             f"{config.max_characters_per_token - 2} per token" if vocabulary.chars else "none")
    return {"word vocabulary": words, "character vocabulary": chars,
            "LSTM": f"{config.n_layers} layers, cell {config.lstm_dim}, projection {config.projection_dim}"}


MANYLANGS = Family(
    "elmoformanylangs", files.is_manylangs_dir, load_manylangs_encoder, "an ELMoForManyLangs model",
    format="ELMoForManyLangs (config.json + architecture JSON, char.dic/word.dic, *.pkl)",
    facts=manylangs_facts, converts_to=(Form.NATIVE,), no_form=no_bilm_tf_form,
)
MANYLANGS_NATIVE = Family(
    MODEL_TYPE, lambda path: native_model_type(path) == MODEL_TYPE, load_native_manylangs,
    "an ELMoForManyLangs model", saves=ManyLangsEncoder, writes={Form.NATIVE: save_native_manylangs},
    format=f"contextvec native, model_type {MODEL_TYPE} (config.json + model.safetensors + vocabulary.json)",
    facts=manylangs_facts, converts_to=(Form.NATIVE,), no_form=no_bilm_tf_form,
)
