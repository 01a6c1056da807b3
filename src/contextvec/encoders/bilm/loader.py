"""ELMo's model directories: bilm-tf files and contextvec's native format, as a family of
:mod:`contextvec.encoders.registry`.

The file formats are pure functions in :mod:`contextvec.io.bilm_tf` and
:mod:`contextvec.io.native`; this module turns what they read into an :class:`ElmoBiLM` (and
back), checking the options with :class:`BiLMConfig`.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder
from contextvec.encoders.bilm.config import MODEL_TYPE, BiLMConfig, ConfigError
from contextvec.encoders.bilm.encoder import ElmoEncoder
from contextvec.encoders.bilm.model import ElmoBiLM
from contextvec.encoders.family import Family, Form
from contextvec.io import bilm_tf
from contextvec.io.native import CONFIG_NAME, NativeFormatError, load_native, native_model_type, save_native
from contextvec.io.untrusted import error_line, model_file


def read_options(path: str | os.PathLike) -> BiLMConfig:
    """The :class:`BiLMConfig` of a bilm-tf/allennlp ``options.json``."""
    try:
        return BiLMConfig.from_options(bilm_tf.read_options_json(path))
    except bilm_tf.OptionsError as e:
        raise ConfigError(str(e)) from e
    except (ValueError, TypeError) as e:  # the checks of BiLMConfig, and values they did not expect
        raise ConfigError(f"{path}: {e}") from e


def load_bilm_tf(options_file: str | os.PathLike, weight_file: str | os.PathLike) -> ElmoBiLM:
    """Build an :class:`ElmoBiLM` from bilm-tf ``options.json`` + ``weights.hdf5`` (eval mode)."""
    config = read_options(options_file)
    options = config.to_options()
    arrays = bilm_tf.read_weights(weight_file, options)
    return ElmoBiLM.from_state_dict(config, bilm_tf.to_state_dict(arrays, options))


def save_bilm_tf(
    model: ElmoBiLM, options_file: str | os.PathLike, weight_file: str | os.PathLike
) -> None:
    """Write a model as bilm-tf ``options.json`` (``n_characters`` 262) + ``weights.hdf5``."""
    if not model.config.bidirectional:
        raise ValueError("bilm-tf weight files hold bidirectional models only")
    options = model.config.to_options()
    bilm_tf.write_weights(bilm_tf.from_state_dict(model.state_dict(), options), weight_file)
    bilm_tf.write_options_json(options, options_file)


def load_bilm_tf_encoder(
    options_file: str | os.PathLike, weight_file: str | os.PathLike, device: torch.device
) -> ElmoEncoder:
    """An :class:`ElmoEncoder` (eval mode, on ``device``) from bilm-tf's two files."""
    return ElmoEncoder(load_bilm_tf(options_file, weight_file)).to(device).eval()


def is_bilm_tf_dir(path: Path) -> bool:
    """A directory holding bilm-tf's ``options.json`` and ``weights.hdf5``."""
    return all((path / name).is_file() for name in (bilm_tf.OPTIONS_NAME, bilm_tf.WEIGHTS_NAME))


def _load_bilm_tf_dir(path: Path, device: torch.device) -> Encoder:
    options, weights = (model_file(path, name) for name in (bilm_tf.OPTIONS_NAME, bilm_tf.WEIGHTS_NAME))
    return load_bilm_tf_encoder(options, weights, device)


def load_native_encoder(path: Path, device: torch.device) -> ElmoEncoder:
    """The :class:`ElmoEncoder` (eval mode, on ``device``) of a native ``"elmo-bilm"`` directory."""
    model_type, config, state_dict = load_native(path)
    if model_type != MODEL_TYPE:
        raise NativeFormatError(f"{path}: model_type {model_type!r} is not {MODEL_TYPE!r}")
    try:
        bilm_config = BiLMConfig.from_dict(config)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path / CONFIG_NAME}: {e}") from None
    if not bilm_config.bidirectional:
        raise ValueError(f"{path}: a forward-only LM gives no ELMo representations")
    # Trained models also keep their softmax (for perplexity and fine-tuning).
    state = {k: v for k, v in state_dict.items() if not k.startswith("softmax.")}
    try:
        bilm = ElmoBiLM.from_state_dict(bilm_config, state)
    except (RuntimeError, TypeError, ValueError) as e:  # sizes of another type or shape than the tensors
        raise NativeFormatError(f"{path}: model.safetensors does not fit config.json "
                                f"({error_line(e, last=True)})") from None
    return ElmoEncoder(bilm).to(device).eval()


def save_native_encoder(encoder: Encoder, directory: Path) -> Path:
    """Write an :class:`ElmoEncoder`'s biLM as a native ``"elmo-bilm"`` directory."""
    if not isinstance(encoder, ElmoEncoder):
        raise TypeError(f"cannot save {type(encoder).__name__} as {MODEL_TYPE}")
    return save_native(directory, MODEL_TYPE, encoder.config.to_dict(), encoder.bilm.state_dict())


def save_bilm_tf_encoder(encoder: Encoder, directory: Path) -> Path:
    """Write an :class:`ElmoEncoder`'s biLM as bilm-tf files (``options.json`` + ``weights.hdf5``)
    into ``directory`` (created if missing, its parent not)."""
    if not isinstance(encoder, ElmoEncoder):
        raise TypeError(f"cannot save {type(encoder).__name__} as bilm-tf files")
    directory.mkdir(exist_ok=True)
    save_bilm_tf(encoder.bilm, directory / bilm_tf.OPTIONS_NAME, directory / bilm_tf.WEIGHTS_NAME)
    return directory


def elmo_facts(encoder: Encoder) -> dict[str, str]:
    """What ``contextvec info`` says of an ELMo beyond layers and width."""
    config = encoder.config
    return {"characters": "UTF-8 bytes (bilm-tf/allennlp character ids), 48 bytes per token",
            "char-CNN": f"{config.n_filters} filters of {len(config.filters)} widths, "
                        f"{config.n_highway} highway",
            "LSTM": f"{config.n_layers} layers, cell {config.lstm_dim}, projection {config.projection_dim}"}


# Its encoders are ElmoEncoders, which NATIVE_ELMO writes (in either form).
BILM_TF = Family("bilm-tf", is_bilm_tf_dir, _load_bilm_tf_dir, "a bilm-tf ELMo model",
                 load_files=load_bilm_tf_encoder,
                 format="bilm-tf/allennlp HDF5 (options.json + weights.hdf5)", facts=elmo_facts,
                 converts_to=tuple(Form), low_precision=True)
NATIVE_ELMO = Family(
    MODEL_TYPE, lambda path: native_model_type(path) == MODEL_TYPE, load_native_encoder, "an ELMo biLM",
    saves=ElmoEncoder, writes={Form.NATIVE: save_native_encoder, Form.BILM_TF: save_bilm_tf_encoder},
    format=f"contextvec native, model_type {MODEL_TYPE} (config.json + model.safetensors)", facts=elmo_facts,
    converts_to=tuple(Form), low_precision=True,
)
