"""ELMo from TensorFlow's own files, as a family of :mod:`contextvec.encoders.registry`: bilm-tf
training checkpoints and TF-Hub ELMo modules, read without TensorFlow.

The files are read by :mod:`contextvec.io.tf_elmo`, which names the variables as bilm-tf's
``weights.hdf5`` does; from there the model is built exactly as from that file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contextvec.encoders.bilm.config import BiLMConfig, ConfigError
from contextvec.encoders.bilm.encoder import ElmoEncoder
from contextvec.encoders.bilm.loader import elmo_facts
from contextvec.encoders.bilm.model import ElmoBiLM
from contextvec.encoders.family import Family, Form
from contextvec.io import bilm_tf, tf_elmo
from contextvec.io.tf_elmo import HubMix


def _bilm(options: dict[str, Any], arrays: dict[str, np.ndarray], where: Path) -> ElmoBiLM:
    try:
        config = BiLMConfig.from_options(options)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from e
    return ElmoBiLM.from_state_dict(config, bilm_tf.to_state_dict(arrays, config.to_options()))


def load_tf_bilm(directory: str | os.PathLike) -> ElmoBiLM:
    """An :class:`ElmoBiLM` (eval mode) from a bilm-tf checkpoint directory or a TF-Hub ELMo module.

    A checkpoint directory holds ``options.json``, the ``checkpoint`` file and
    ``model.ckpt-N.index`` + ``.data-*`` (the vocabulary a training run keeps beside them is
    not needed: ELMo reads characters); a module holds ``variables/`` beside
    ``tfhub_module.pb`` or ``saved_model.pb``.

    The files are data from anyone: nothing in them runs, and each is read as a regular file
    inside ``directory`` whose every declared size is checked against what it holds.

    Raises:
        ValueError: one line naming the file and what is wrong with it (a
            :class:`~contextvec.io.tf_checkpoint.CheckpointError` or another
            :class:`~contextvec.io.untrusted.UntrustedFileError` for the files, a
            ``ConfigError`` for options the model cannot take).
    """
    directory = Path(directory)
    if tf_elmo.is_hub_dir(directory):
        options, arrays, _ = tf_elmo.read_hub_module(directory)
    else:
        options, arrays = tf_elmo.read_checkpoint(directory)
    return _bilm(options, arrays, directory)


def read_hub_mix(directory: str | os.PathLike) -> HubMix | None:
    """The scalar mix of a TF-Hub ELMo module's ``elmo`` output, or None where it has none.

    The published modules keep it as ``aggregation/weights`` and ``aggregation/scaling``; a
    module built with bilm-tf's ``weight_layers`` as ``NAME_ELMo_W`` and ``NAME_ELMo_gamma``. A
    module with more than one mix gives None.

    ``ScalarMix(3, initial_weights=mix.weights, initial_gamma=mix.gamma)`` over the encoder's
    layers gives the module's ``elmo`` output.

    Raises:
        ValueError: a mix with another number of weights than the model has layers.
    """
    options, _, mix = tf_elmo.read_hub_module(directory)
    layers = int(options["lstm"]["n_layers"]) + 1
    if mix is not None and len(mix.weights) != layers:
        raise ValueError(f"{directory}: aggregation/weights has {len(mix.weights)} values for "
                         f"{layers} layers")
    return mix


def is_tf_elmo_dir(path: Path) -> bool:
    """A bilm-tf checkpoint directory (not one with bilm-tf's ``weights.hdf5`` too, which is read
    as that) or a TF-Hub module / TF1 SavedModel directory."""
    return tf_elmo.is_hub_dir(path) or tf_elmo.is_checkpoint_dir(path)


def _load_encoder(path: Path, device: torch.device) -> ElmoEncoder:
    return ElmoEncoder(load_tf_bilm(path)).to(device).eval()


TF_ELMO = Family("tf-elmo", is_tf_elmo_dir, _load_encoder,
                 "a TensorFlow ELMo (bilm-tf checkpoint or TF-Hub module)",
                 format="bilm-tf TensorFlow checkpoint (options.json + checkpoint + model.ckpt-N.*) "
                        "or TF-Hub ELMo module (variables/ + tfhub_module.pb or saved_model.pb)",
                 facts=elmo_facts, converts_to=tuple(Form), low_precision=True)
