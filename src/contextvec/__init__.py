"""contextvec: deep contextualized word representations (ELMo, CoVe, BERT).

>>> import contextvec
>>> encoder = contextvec.load("path/to/model")           # doctest: +SKIP
>>> vectors = encoder.embed(["The bank was robbed ."])    # doctest: +SKIP
>>> vectors[0].shape                                      # (layers, tokens, dim)  # doctest: +SKIP

The names below are imported on first use, so ``import contextvec`` (and ``contextvec --help``)
does not pay for torch until a model is needed. ``__version__`` is the installed package's
version (pyproject.toml's, the one place it is written), also read on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "load": "contextvec.api",
    "save": "contextvec.api",
    "ModelNotFoundError": "contextvec.api",
    "embed_file": "contextvec.files",
    "embed_document": "contextvec.documents",
    "embed_documents": "contextvec.documents",
    "DocumentSettings": "contextvec.documents",
    "export_onnx": "contextvec.export",
    "ContextualEmbedder": "contextvec.embedder",
    "ScalarMix": "contextvec.embedder",
    "Encoder": "contextvec.encoders",
    "Client": "contextvec.client",
    "Engine": "contextvec.engine",
}

__all__ = [
    "Client", "ContextualEmbedder", "DocumentSettings", "Encoder", "Engine", "ModelNotFoundError",
    "ScalarMix", "embed_document", "embed_documents", "embed_file", "export_onnx", "load", "save",
]

if TYPE_CHECKING:
    from contextvec.api import ModelNotFoundError, load, save
    from contextvec.client import Client
    from contextvec.documents import DocumentSettings, embed_document, embed_documents
    from contextvec.embedder import ContextualEmbedder, ScalarMix
    from contextvec.encoders import Encoder
    from contextvec.engine import Engine
    from contextvec.export import export_onnx
    from contextvec.files import embed_file


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        value = globals()[name] = version("contextvec")
        return value
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'contextvec' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})
