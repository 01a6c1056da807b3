"""``contextvec.export_onnx``: a model as one ONNX file with dynamic batch and length, and the
JSON a runtime needs beside it (docs/onnx.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextvec.embedder import ScalarMix
    from contextvec.encoders.base import Encoder

__all__ = ["export_onnx", "manifest_path"]

_MISSING = "ONNX export needs the onnx extra: pip install 'contextvec[onnx]' ({})"


def manifest_path(onnx_path: str | os.PathLike) -> Path:
    """Where the JSON beside ``onnx_path`` goes: the same name with ``.json``."""
    return Path(onnx_path).with_suffix(".json")


def export_onnx(
    model: Encoder | str | os.PathLike | None,
    path: str | os.PathLike,
    scalar_mix: ScalarMix | None = None,
) -> Path:
    """Write ``model`` (an encoder, or what :func:`contextvec.load` accepts; ``None`` for the
    bundled model) to ``path`` as ONNX, and its manifest to :func:`manifest_path`. With
    ``scalar_mix`` the graph also outputs ``mixed``, the mix of every layer (layer norm is not
    exported: it normalises over the whole batch). Returns ``path``. Existing files are replaced;
    the command refuses them unless ``--overwrite``."""
    try:
        import onnx

        from contextvec.export.elmo import OPSET, build_elmo_graph, mix_constants
    except ModuleNotFoundError as e:
        raise RuntimeError(_MISSING.format(e)) from None
    import torch

    import contextvec
    from contextvec.encoders.bilm import ElmoEncoder
    from contextvec.encoders.fingerprint import model_identity
    from contextvec.export.contract import elmo_manifest
    from contextvec.io.atomic import atomic_path

    encoder = model if isinstance(model, torch.nn.Module) else contextvec.load(model)
    if not isinstance(encoder, ElmoEncoder):
        raise ValueError(f"ONNX export supports ELMo models; this model is a {type(encoder).__name__}")
    mix = mix_manifest = None
    if scalar_mix is not None:
        if scalar_mix.layer_norm:
            raise ValueError("a scalar mix with layer_norm normalises over the whole batch; "
                             "export one without")
        if scalar_mix.weights.shape[0] != encoder.num_layers:
            raise ValueError(f"the scalar mix has {scalar_mix.weights.shape[0]} weights for "
                             f"{encoder.num_layers} layers")
        mix = mix_constants(scalar_mix.weights.detach().cpu(), float(scalar_mix.gamma.detach()))
        mix_manifest = {"weights": mix[0].tolist(), "gamma": mix[1]}
    with torch.no_grad():
        graph = build_elmo_graph(encoder.bilm, mix)
    onnx.checker.check_model(graph, full_check=True)
    out = Path(path)
    manifest = elmo_manifest(encoder.config, out.name, OPSET, model_identity(encoder), mix_manifest)
    with atomic_path(out) as tmp:
        tmp.write_bytes(graph.SerializeToString())
    with atomic_path(manifest_path(out)) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return out
