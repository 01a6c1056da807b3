"""Optional extras: which extra installs which package, and the one-line error when one is missing.

The base package loads, embeds, converts and demonstrates models; everything else comes with an
extra (``pip install 'contextvec[tasks]'``). Each import of an extra's package sits in a
:func:`needs` block, so a missing package says which extra to install instead of only naming a
module the user never asked for. This module imports nothing of contextvec's (the lowest room).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

EXTRAS: dict[str, str] = {
    "tasks": "task models, probes and the paper's experiments (train-task, predict, probe, experiment)",
    "mt": "CoVe's translation model (train-mt, translate, bleu)",
    "word-vectors": "static word vectors (train-word-vectors)",
    "server": "the HTTP server (serve)",
    "ray": "embedding on a Ray cluster (embed --engine ray)",
    "flair": "flair's ELMoEmbeddings (contextvec.flair)",
    "onnx": "exporting a model to ONNX (export)",
    "hub": "published models (pull, models, contextvec.load of a published name)",
    "spacy": "the spaCy component (nlp.add_pipe(\"contextvec\")) and its training listener",
    "sentence-transformers": "the sentence-transformers module (contextvec.sentence_transformers)",
}
"""Extra -> what a user does with it (pyproject.toml lists each extra's packages)."""


class MissingExtra(ImportError):
    """A package of an optional extra is not installed. ``str()`` is one line naming the extra
    and the command that installs it; ``name`` is the missing module, ``extra`` the extra."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(f"{module} is not installed: it comes with the {extra} extra, for "
                         f"{EXTRAS[extra]}; pip install 'contextvec[{extra}]'", name=module)
        self.extra = extra


@contextmanager
def needs(extra: str) -> Iterator[None]:
    """Imports in this block come from the ``extra`` extra: a module missing among them (or
    among their own dependencies) raises :class:`MissingExtra` instead."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    try:
        yield
    except ModuleNotFoundError as e:
        if not e.name or e.name.split(".")[0] == "contextvec":
            raise  # a broken contextvec install is not a missing extra
        raise MissingExtra(extra, e.name.split(".")[0]) from None
