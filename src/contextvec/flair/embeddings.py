"""flair's ``ELMoEmbeddings`` (same arguments and vectors) on contextvec's ELMo encoder."""

from __future__ import annotations

import logging
from typing import Any

import flair
import torch
from flair.data import Sentence
from flair.embeddings.base import TokenEmbeddings, register_embeddings

from contextvec.allennlp.models import load_elmo_encoder
from contextvec.api import DEFAULT_MODEL
from contextvec.encoders.bilm import BiLMConfig, ElmoBiLM, ElmoEncoder
from contextvec.encoders.outputs import LAYER_MODES

log = logging.getLogger(__name__)

EMBEDDING_MODES = LAYER_MODES
"""flair's ``embedding_mode``: the spellings of :class:`~contextvec.encoders.outputs.Layers`."""
# flair's names for models that allennlp downloaded from S3; contextvec never downloads.
_DOWNLOADED_MODELS = ("small", "medium", "large", "5.5B", "pt", "portuguese", "pubmed")


def _load_encoder(model: str, options_file: str | None, weight_file: str | None) -> ElmoEncoder:
    if options_file or weight_file:
        if not (options_file and weight_file):
            raise ValueError("options_file and weight_file go together (bilm-tf options.json, weights.hdf5)")
        return load_elmo_encoder(options_file, weight_file)
    if model == "original":
        log.warning("ELMoEmbeddings(model='original'): allennlp downloaded that model and contextvec "
                    "never downloads; using the bundled %s (pass options_file and weight_file of the "
                    "original's bilm-tf files to use it)", DEFAULT_MODEL)
        return load_elmo_encoder()
    if model in _DOWNLOADED_MODELS:
        raise ValueError(
            f"model={model!r} was downloaded by allennlp and contextvec never downloads: pass "
            "options_file and weight_file of its bilm-tf files, or a contextvec model name or directory"
        )
    return load_elmo_encoder(model)


@register_embeddings("contextvec.ELMoEmbeddings")
class ELMoEmbeddings(TokenEmbeddings):
    """ELMo token embeddings for flair, as flair's ``ELMoEmbeddings`` (which needed allennlp 0.9).

    Embedding a flair ``Sentence`` sets on each token a float32 vector of
    ``embedding_length``: ``num_layers * dim`` with ``"all"`` (the layers concatenated),
    ``dim`` with ``"top"`` or ``"average"``. The biLM is frozen (``static_embeddings``). A
    tagger saved by flair keeps this embedding's configuration and weights in its own file;
    import ``contextvec.flair`` before ``SequenceTagger.load`` so that flair finds the class.

    Args:
        model: a contextvec model name or directory, or ``"original"`` for the bundled model
            (with a warning: allennlp downloaded that model, contextvec never downloads).
        options_file: bilm-tf ``options.json``; with ``weight_file`` it takes precedence over
            ``model``, as in flair.
        weight_file: bilm-tf ``weights.hdf5``.
        embedding_mode: ``"all"``, ``"top"`` or ``"average"``.
        encoder: an already loaded contextvec ELMo encoder instead of files.

    Raises:
        ValueError: an unknown ``embedding_mode``, one of the two files without the other, or
            a model name that allennlp downloaded (``"small"``, ``"medium"``, ...).
        ModelNotFoundError: files or a name that is no model (a ``FileNotFoundError``).

    Attributes:
        name: the embedding's name in flair (``elmo-<model>-<embedding_mode>``): the key of
            each token's vector.
        encoder: the contextvec ELMo encoder.
    """

    def __init__(
        self,
        model: str = "original",
        options_file: str | None = None,
        weight_file: str | None = None,
        embedding_mode: str = "all",
        *,
        encoder: ElmoEncoder | None = None,
    ) -> None:
        super().__init__()
        if embedding_mode not in EMBEDDING_MODES:
            raise ValueError(f"embedding_mode must be one of {', '.join(EMBEDDING_MODES)}, "
                             f"not {embedding_mode!r}")
        self.model = model
        self.embedding_mode = embedding_mode
        self.name = f"elmo-{model}-{embedding_mode}"
        self.static_embeddings = True
        if encoder is None:
            encoder = _load_encoder(model, options_file, weight_file)
        self.encoder = encoder.requires_grad_(False).eval().to(flair.device)
        layers = encoder.num_layers if embedding_mode == "all" else 1
        self._embedding_length = layers * encoder.output_dim

    @property
    def embedding_length(self) -> int:
        """Width of each token's vector: ``num_layers * dim`` for ``"all"``, else ``dim``."""
        return self._embedding_length

    def _add_embeddings_internal(self, sentences: list[Sentence]) -> list[Sentence]:
        words = [[token.text for token in sentence] for sentence in sentences]
        arrays = self.encoder.embed(words, layers=self.embedding_mode)
        for sentence, array in zip(sentences, arrays, strict=True):
            vectors = torch.from_numpy(array)
            if self.embedding_mode == "all":  # (layers, tokens, dim) -> (tokens, layers * dim)
                vectors = vectors.transpose(0, 1).reshape(vectors.shape[1], -1)
            vectors = vectors.to(flair.device)
            for token, vector in zip(sentence.tokens, vectors, strict=True):
                token.set_embedding(self.name, vector)
        return sentences

    def to_params(self) -> dict[str, Any]:
        """The configuration flair saves; the weights travel in the model's own state dict."""
        return {"model": self.model, "embedding_mode": self.embedding_mode,
                "config": self.encoder.config.to_dict()}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ELMoEmbeddings:
        """An embedding of the saved shape; flair then loads the weights into it.

        Args:
            params: what [`to_params`][contextvec.flair.embeddings.ELMoEmbeddings.to_params]
                returned.

        Returns:
            The embedding, with untrained weights until flair loads the saved ones.
        """
        encoder = ElmoEncoder(ElmoBiLM(BiLMConfig.from_dict(params["config"])))
        return cls(model=params["model"], embedding_mode=params["embedding_mode"], encoder=encoder)

    def extra_repr(self) -> str:
        return f"model={self.name}"

    def __str__(self) -> str:
        return self.name
