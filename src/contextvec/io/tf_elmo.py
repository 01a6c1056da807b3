"""ELMo in TensorFlow's own files: bilm-tf training checkpoints and TF-Hub ELMo modules, as
pure functions.

Both keep the biLM's variables in a TensorBundle (:mod:`contextvec.io.tf_checkpoint`); this
module names them as bilm-tf's ``weights.hdf5`` does, so that the rest is
:mod:`contextvec.io.bilm_tf`'s conversion:

- a **bilm-tf checkpoint** (``options.json`` + ``checkpoint`` + ``model.ckpt-N.index/.data-*``)
  holds ``lm/...`` variables, renamed by :func:`dump_weights_name`, bilm-tf's own
  ``dump_weights`` rule; the softmax, optimizer slots and ``global_step`` have no HDF5 name
  and are not read;
- a **TF-Hub module** (``variables/variables.index`` beside ``tfhub_module.pb`` or
  ``saved_model.pb``) holds bilm-tf's inference graph's ``bilm/...`` variables (renamed by
  :func:`hub_name`), ``char_embed`` with the padding row prepended, and the ``elmo`` output's
  mix (the published modules' ``aggregation/``, or bilm-tf's ``weight_layers`` variables). It
  carries no options: the dimensions come from the variables' shapes, the rest from the ops of
  its ``saved_model.pb`` (:mod:`contextvec.io.tf_graph`) or, where those do not show it, the
  published module's model (:data:`HUB_GRAPH_OPTIONS`); an ``options.json`` beside it overrides
  both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from contextvec.io import bilm_tf
from contextvec.io.tf_checkpoint import Bundle, CheckpointError, latest_checkpoint, read_index, read_tensors
from contextvec.io.tf_graph import elmo_graph_options
from contextvec.io.untrusted import model_file

HUB_VARIABLES = Path("variables") / "variables"
HUB_GRAPH_FILES = ("tfhub_module.pb", "saved_model.pb")
HUB_GRAPH_OPTIONS: dict[str, Any] = {  # where the module's saved_model.pb does not say
    "char_cnn": {"activation": "relu", "max_characters_per_token": 50},
    "lstm": {"cell_clip": 3, "proj_clip": 3, "use_skip_connections": True},
}
"""What a hub module's graph fixes and its variables do not show, where the graph does not show
it either: the values of the published module's model, 2x4096_512_2048cnn_2xhighway
(allennlp's options.json of that model)."""
_MIX = ("aggregation/weights", "aggregation/scaling")
_TOKEN_LAYER = r"char_embed|CNN/[Wb]_cnn_\d+|CNN_high_\d+/[Wb]_(carry|transform)|CNN_proj/[Wb]_proj"
_LAYER_KERNEL = r"RNN_0/RNN/MultiRNNCell/Cell\d+/LSTMCell/W_0"


class HubMix(NamedTuple):
    """The scalar mix of a hub module's ``elmo`` output: ``scaling * sum_k softmax(weights)_k * layer_k``."""

    weights: tuple[float, ...]
    gamma: float


def dump_weights_name(name: str) -> str:
    """bilm-tf's ``dump_weights`` name of a checkpoint variable (its ``_get_outname``).

    ``lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/kernel`` becomes
    ``RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0``. As in bilm-tf, the leading ``lm/`` goes by
    ``str.lstrip``: every leading ``l``, ``m`` and ``/`` (no ELMo variable starts with them).
    """
    out = re.sub(":0$", "", name).lstrip("lm/")
    for old, new in (("/rnn/", "/RNN/"), ("/multi_rnn_cell/", "/MultiRNNCell/"), ("/cell_", "/Cell"),
                     ("/lstm_cell/", "/LSTMCell/")):
        out = re.sub(old, new, out)
    if "/RNN/" in out:
        if "projection" in out:
            out = re.sub("projection/kernel", "W_P_0", out)
        else:
            out = re.sub("/bias", "/B", re.sub("/kernel", "/W_0", out))
    return out


def hub_name(name: str) -> str | None:
    """The HDF5 name of a hub module's ``bilm/`` variable (prefix already removed), or None.

    ``RNN_0/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/kernel`` becomes
    ``RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0`` (bilm-tf's ``model.py`` maps the same names
    the other way when it loads an HDF5 file); the LSTM state variables have no HDF5 name.
    """
    lstm = re.fullmatch(r"(RNN_\d+/RNN/MultiRNNCell/Cell\d+)/rnn/lstm_cell/(kernel|bias|projection/kernel)",
                        name)
    if lstm:
        return f"{lstm[1]}/LSTMCell/" + {"kernel": "W_0", "bias": "B", "projection/kernel": "W_P_0"}[lstm[2]]
    if re.fullmatch(_TOKEN_LAYER, name):
        return name
    return None


def is_checkpoint_dir(path: Path) -> bool:
    """``options.json`` with a ``checkpoint`` file or a checkpoint index (``*.index``)."""
    return (path / bilm_tf.OPTIONS_NAME).is_file() and (
        (path / "checkpoint").is_file() or any(path.glob("*.index"))
    )


def is_hub_dir(path: Path) -> bool:
    """A TF-Hub module or TF1 SavedModel: ``variables/variables.index`` and its graph file."""
    return (path / "variables" / "variables.index").is_file() and any(
        (path / name).is_file() for name in HUB_GRAPH_FILES
    )


def read_checkpoint(directory: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The options and bilm-tf HDF5 datasets of a bilm-tf training checkpoint directory.

    Returns:
        ``(options, arrays)``: the directory's ``options.json`` content and the arrays
        ``dump_weights`` would write, by dataset name (``char_embed`` ``(261, dim)``, ...).

    Raises:
        ValueError: a checkpoint of a kind contextvec does not run (word inputs, one LSTM
            layer, no LSTM projection, forward-only).
        CheckpointError: an unreadable checkpoint, or one that lacks a variable or holds one of
            another shape than ``options.json`` implies.
    """
    directory = Path(directory)
    options_file = model_file(directory, bilm_tf.OPTIONS_NAME)
    options = bilm_tf.read_options_json(options_file)
    _refuse_unsupported(options_file, options)
    bundle = read_index(latest_checkpoint(directory), directory)
    names = {dump_weights_name(name): name for name in bundle.entries}
    return options, _checked(bundle, names, bilm_tf.expected_datasets(options))


def _refuse_unsupported(path: Path, options: Mapping[str, Any]) -> None:
    if not isinstance(options, Mapping) or not isinstance(options.get("lstm"), Mapping):
        raise bilm_tf.OptionsError(f"{path}: options.json has no 'lstm' section")
    if "char_cnn" not in options:
        shared = " with share_embedding_softmax" if options.get("share_embedding_softmax") else ""
        raise ValueError(f"{path}: a word-input bilm-tf model (no char_cnn){shared}; contextvec runs "
                         "character-input ELMo only")
    lstm = options["lstm"]
    if not options.get("bidirectional", False):
        raise ValueError(f"{path}: a forward-only bilm-tf model gives no ELMo representations")
    try:
        n_layers, projection_dim, dim = (int(lstm.get(key, default)) for key, default in
                                         (("n_layers", 1), ("projection_dim", 0), ("dim", 0)))
    except (TypeError, ValueError) as e:
        raise bilm_tf.OptionsError(f"{path}: an lstm size that is not a number ({e})") from None
    if n_layers < 2:
        raise ValueError(f"{path}: a one-layer bilm-tf model (no MultiRNNCell; bilm-tf's own "
                         "inference graph cannot load it either)")
    if projection_dim >= dim:
        raise ValueError(f"{path}: bilm-tf LSTMs without a projection (projection_dim >= dim) are "
                         "not supported")


def read_hub_module(
    directory: str | os.PathLike,
) -> tuple[dict[str, Any], dict[str, np.ndarray], HubMix | None]:
    """The options, bilm-tf HDF5 datasets and ``elmo`` mix of a TF-Hub ELMo module directory.

    Returns:
        ``(options, arrays, mix)``: options inferred from the variables' shapes (or the
        directory's ``options.json``), the arrays by HDF5 dataset name (``char_embed`` without
        the padding row, ``(261, dim)``), and the mix, or None where the module has none.

    Raises:
        CheckpointError: unreadable variables, a module without ELMo's ``bilm/`` variables, or
            variables of shapes the options do not imply.
    """
    directory = Path(directory)
    bundle = read_index(directory / HUB_VARIABLES, directory)
    if any("/.ATTRIBUTES/" in name for name in bundle.entries):
        raise CheckpointError(directory, "a TF2 SavedModel (object-based variable names); only "
                              "TF1-format hub modules, which name their variables, are read")
    anchor = next((n for n in bundle.entries if n.endswith("bilm/char_embed")), None)
    if anchor is None:
        raise CheckpointError(directory, "no bilm/char_embed variable: not an ELMo module")
    prefix = anchor[: -len("char_embed")]
    names = {}
    for name in bundle.entries:
        mapped = hub_name(name[len(prefix):]) if name.startswith(prefix) else None
        if mapped is not None:
            names[mapped] = name
    shapes = {hdf5: bundle.entries[name].shape for hdf5, name in names.items()}
    if os.path.lexists(directory / bilm_tf.OPTIONS_NAME):
        options_file = model_file(directory, bilm_tf.OPTIONS_NAME)
        # bilm-tf's inference graph is always bidirectional; allennlp's options.json omits the key.
        read = bilm_tf.read_options_json(options_file)
        if not isinstance(read, Mapping):
            raise bilm_tf.OptionsError(f"{options_file}: options.json is not a JSON object")
        options = {"bidirectional": True, **read}
        _refuse_unsupported(options_file, options)
    else:
        graph = "saved_model.pb"
        found = (elmo_graph_options(model_file(directory, graph), prefix)
                 if os.path.lexists(directory / graph) else None)
        options = infer_options(shapes, directory, found)
    expected = dict(bilm_tf.expected_datasets(options))
    expected["char_embed"] = (expected["char_embed"][0] + 1, *expected["char_embed"][1:])
    arrays = _checked(bundle, names, expected)
    arrays["char_embed"] = np.ascontiguousarray(arrays["char_embed"][1:])
    return options, arrays, _mix(bundle, prefix[: -len("bilm/")])


def infer_options(shapes: Mapping[str, tuple[int, ...]], where: Path,
                  graph: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """bilm-tf options of the variables' shapes (by HDF5 name), with what the module's ``graph``
    shows (:func:`contextvec.io.tf_graph.elmo_graph_options`) or else :data:`HUB_GRAPH_OPTIONS`."""
    try:
        filters = []
        while f"CNN/W_cnn_{len(filters)}" in shapes:
            _, width, _, n_maps = shapes[f"CNN/W_cnn_{len(filters)}"]
            filters.append([width, n_maps])
        n_highway = sum(1 for name in shapes if re.fullmatch(r"CNN_high_\d+/W_carry", name))
        n_layers = sum(1 for name in shapes if re.fullmatch(_LAYER_KERNEL, name))
        lstm_dim, projection_dim = shapes["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"]
        n_rows, char_dim = shapes["char_embed"]
    except (KeyError, ValueError) as e:
        raise CheckpointError(where, f"the module lacks a variable of ELMo's biLM ({e})") from e
    graph = graph or {}
    cnn = {**HUB_GRAPH_OPTIONS["char_cnn"], **graph.get("char_cnn", {}), "filters": filters,
           "n_highway": n_highway, "embedding": {"dim": char_dim}, "n_characters": n_rows}
    lstm = {**HUB_GRAPH_OPTIONS["lstm"], **graph.get("lstm", {}), "dim": lstm_dim,
            "projection_dim": projection_dim, "n_layers": n_layers}
    return {"bidirectional": True, "char_cnn": cnn, "lstm": lstm}


def _checked(bundle: Bundle, names: Mapping[str, str],
             expected: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """The expected datasets (HDF5 name -> shape) from the variables ``names`` maps them to."""
    where = bundle.prefix
    missing = sorted(set(expected) - set(names))
    if missing:
        raise CheckpointError(where, f"no variable for {missing} (does options.json describe this "
                              "checkpoint?)")
    for hdf5, shape in expected.items():
        got = bundle.entries[names[hdf5]].shape
        if got != shape:
            raise CheckpointError(where, f"variable {names[hdf5]} has shape {got} but the options "
                                  f"imply {shape}")
    tensors = read_tensors(bundle, [names[hdf5] for hdf5 in expected])
    arrays = {hdf5: tensors[names[hdf5]] for hdf5 in expected}
    for hdf5, array in arrays.items():
        if array.dtype != np.float32:
            raise CheckpointError(where, f"variable {names[hdf5]} is {array.dtype}, not float32")
        bad = int(array.size - np.isfinite(array).sum())
        if bad:
            raise CheckpointError(where, f"variable {names[hdf5]} has {bad} NaN or infinite values")
    return arrays


def _mix(bundle: Bundle, prefix: str) -> HubMix | None:
    """The one mix of the module's variables: the published modules' ``aggregation/weights`` and
    ``aggregation/scaling``, or bilm-tf's ``weight_layers`` pair ``NAME_ELMo_W`` and
    ``NAME_ELMo_gamma``; None where there is none or more than one."""
    pairs = [(prefix + _MIX[0], prefix + _MIX[1])] + [
        (name, name[: -len("W")] + "gamma") for name in bundle.entries
        if name.startswith(prefix) and name.endswith("_ELMo_W")
    ]
    found = [pair for pair in pairs if all(name in bundle.entries for name in pair)]
    if len(found) != 1:
        return None
    tensors = read_tensors(bundle, found[0])
    weights, gamma = (tensors[name].astype(np.float64).reshape(-1) for name in found[0])
    if gamma.size != 1 or not np.isfinite(weights).all() or not np.isfinite(gamma).all():
        raise CheckpointError(bundle.prefix, f"the mix {found[0]} is not finite weights and one "
                              "finite scale")
    return HubMix(tuple(float(w) for w in weights), float(gamma[0]))
