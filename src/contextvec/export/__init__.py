"""``contextvec.export_onnx``: a model as one ONNX file with dynamic batch and length, and the
files a runtime needs beside it (docs/onnx.md)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from contextvec.extras import needs

if TYPE_CHECKING:
    from contextvec.embedder import ScalarMix
    from contextvec.encoders.base import Encoder

__all__ = ["export_onnx", "manifest_path", "tokenizer_paths", "vocabulary_path", "weights_path"]

EXTERNAL_DATA_BYTES = 1 << 30
"""Weights beyond this size go to a file of their own (``.onnx.data``, see :func:`weights_path`):
protobuf cannot write one message of 2 GiB or more (a GloVe-sized CoVe vocabulary)."""


def manifest_path(onnx_path: str | os.PathLike) -> Path:
    """Where the manifest beside ``onnx_path`` goes: the same name with ``.json``."""
    return Path(onnx_path).with_suffix(".json")


def vocabulary_path(onnx_path: str | os.PathLike) -> Path:
    """Where a CoVe export's word list goes: the same name with ``.words.json``."""
    return Path(onnx_path).with_suffix(".words.json")


def weights_path(onnx_path: str | os.PathLike) -> Path:
    """Where the weights of a graph over :data:`EXTERNAL_DATA_BYTES` go: ONNX external data
    beside the ``.onnx`` (runtimes read it from the same folder)."""
    return Path(onnx_path).with_suffix(".onnx.data")


def tokenizer_paths(onnx_path: str | os.PathLike) -> tuple[Path, Path]:
    """Where a BERT export's ``tokenizer.json`` and ``vocab.txt`` go: ``.tokenizer.json`` and
    ``.vocab.txt`` beside it."""
    return Path(onnx_path).with_suffix(".tokenizer.json"), Path(onnx_path).with_suffix(".vocab.txt")


def export_onnx(
    model: Encoder | str | os.PathLike | None,
    path: str | os.PathLike,
    scalar_mix: ScalarMix | None = None,
) -> Path:
    """Write ``model`` (an ELMo, CoVe or BERT encoder, or what :func:`contextvec.load` accepts;
    ``None`` for the bundled model) to ``path`` as ONNX, its manifest to :func:`manifest_path`,
    CoVe's word list to :func:`vocabulary_path`, BERT's tokenizer to :func:`tokenizer_paths`.
    With ``scalar_mix`` the graph also outputs ``mixed``, the mix of every layer (layer norm is
    not exported: it normalises over the whole batch). Returns ``path``. Existing files are
    replaced; the command refuses them unless ``--overwrite``."""
    with needs("onnx"):
        import onnx

        from contextvec.export import bert, cove, elmo
        from contextvec.export.graph import OPSET, mix_constants
    import torch

    from contextvec.api import load
    from contextvec.encoders.bert import BertEncoder
    from contextvec.encoders.bilm import ElmoEncoder
    from contextvec.encoders.cove import CoveEncoder
    from contextvec.encoders.fingerprint import model_identity
    from contextvec.encoders.precision import Precision, precision_of
    from contextvec.export.contract import bert_manifest, cove_manifest, elmo_manifest
    from contextvec.io.atomic import atomic_path

    encoder = model if isinstance(model, torch.nn.Module) else load(model)
    if not isinstance(encoder, ElmoEncoder | CoveEncoder | BertEncoder):
        raise ValueError(f"ONNX export supports ELMo, CoVe and BERT models; "
                         f"this model is a {type(encoder).__name__}")
    if (precision := precision_of(encoder)) is not Precision.FP32:
        raise ValueError(f"the model is loaded in {precision.value}; export loads it in fp32 "
                         "(precision='fp32')")
    if isinstance(encoder, BertEncoder) and encoder.subword_pooling != "first":
        raise ValueError("ONNX export gives BERT's words their first piece's vectors; "
                         f"this encoder pools {encoder.subword_pooling!r}")
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
    out = Path(path)
    identity = model_identity(encoder)
    files: dict[Path, bytes] = {}
    with torch.no_grad():
        if isinstance(encoder, ElmoEncoder):
            graph = elmo.build_elmo_graph(encoder.bilm, mix)
            manifest = elmo_manifest(encoder.config, out.name, OPSET, identity, mix_manifest)
        elif isinstance(encoder, BertEncoder):
            graph = bert.build_bert_graph(encoder.model, mix)
            tokenizer_json, vocab_txt = tokenizer_paths(out)
            files[tokenizer_json] = encoder.tokenizer.tokenizer.to_str().encode()
            vocab = encoder.tokenizer.tokenizer.get_vocab()
            pieces_by_id = sorted(vocab, key=vocab.__getitem__)
            if [vocab[p] for p in pieces_by_id] == list(range(len(vocab))):
                files[vocab_txt] = "".join(f"{piece}\n" for piece in pieces_by_id).encode()
            manifest = bert_manifest(encoder, out.name, tokenizer_json.name,
                                     vocab_txt.name if vocab_txt in files else None, OPSET, identity,
                                     mix_manifest)
        else:
            graph = cove.build_cove_graph(encoder.mt_lstm, mix)
            words = vocabulary_path(out)
            manifest = cove_manifest(encoder.config, out.name, words.name, OPSET, identity, mix_manifest)
            files[words] = json.dumps(encoder.mt_lstm.words, ensure_ascii=False).encode()
    external = sum(len(t.raw_data) for t in graph.graph.initializer) > EXTERNAL_DATA_BYTES
    manifest["onnx_data_file"] = weights_path(out).name if external else None
    files[manifest_path(out)] = (json.dumps(manifest, indent=2) + "\n").encode()
    for target, data in files.items():
        with atomic_path(target) as tmp:
            tmp.write_bytes(data)
    # The .onnx last, so that it appears only with what it needs; with its weights apart, both
    # are written in a folder beside it and moved into place.
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as folder:
        staged = Path(folder) / out.name
        onnx.save_model(graph, staged, save_as_external_data=external, all_tensors_to_one_file=True,
                        location=weights_path(out).name, size_threshold=1024)
        onnx.checker.check_model(str(staged), full_check=True)
        if external:
            os.replace(Path(folder) / weights_path(out).name, weights_path(out))
        else:  # an earlier export's weights, which this graph does not read
            weights_path(out).unlink(missing_ok=True)
        os.replace(staged, out)
    return out
