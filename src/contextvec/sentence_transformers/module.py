"""A contextvec encoder as sentence-transformers' input module: text in, one vector per word out.

sentence-transformers runs a model as a chain of modules: the first one's ``preprocess`` turns a
batch of texts into features, each module's ``forward`` adds to them (``token_embeddings`` and
``attention_mask`` here; ``Pooling`` turns those into ``sentence_embedding``), and
``SentenceTransformer.save`` writes each module's folder beside ``modules.json``. This module
saves which contextvec model it runs (a name or a directory), never the weights: the encoder is
frozen, so the weights a save would write are those the model's own files hold.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

import torch
from sentence_transformers.base.modules import InputModule

from contextvec.api import DEFAULT_MODEL, ModelNotFoundError, load
from contextvec.encoders.outputs import Layers, as_layers
from contextvec.encoders.precision import Precision, as_precision
from contextvec.io.untrusted import read_json
from contextvec.text.tokenize import Tokenizer, TokenizerName, as_tokenizer_name

CONFIG_FILE = "contextvec_config.json"
"""The file an :class:`Encoder` saves its settings in. Not ``config.json``: the first module of a
saved model writes into the model's own folder, where that name means a Hugging Face model."""


class Encoder(InputModule):
    """A contextvec model (ELMo, CoVe, BERT, ...) as the first module of a ``SentenceTransformer``.

    Each text is split into words by ``tokenizer``; the encoder gives each word one vector of
    the ``layers`` chosen (a BERT model pools its word pieces into words itself). ``forward``
    sets ``token_embeddings`` ``(batch, words, dim)`` float32 (zero past each text's end) and
    ``attention_mask`` ``(batch, words)``; ``encode(..., output_value="token_embeddings")``
    returns them, one ``(words, dim)`` tensor per text, equal to ``encoder.embed(words,
    layers=...)`` on the same words. A text without words (``""``, only whitespace) counts as
    one word whose vector is zero: its sentence vector is zero under every pooling mode.

    The encoder is frozen (``requires_grad`` off): a trainer fits the modules after it, and
    ``save`` loses nothing by writing the model's name instead of its weights.

    Args:
        model: the name of a bundled or pulled contextvec model, or a model directory (saved as
            its absolute path: the saved model refers to the directory, it holds no copy).
        layers: ``"average"`` (the mean of the layers; the default), ``"top"`` (the last layer)
            or ``"all"`` (every layer, concatenated per word: ``num_layers * dim`` wide), as
            ``contextvec embed --average/--top/--all`` chooses them.
        tokenizer: how a text becomes words: ``"moses"`` (the default; the tokenization ELMo
            was trained on) or ``"whitespace"`` (``str.split()``, for text already tokenized).
        precision: ``"fp32"`` (the default), ``"bf16"`` or ``"int8"`` weights, as
            ``contextvec.load``'s.

    Raises:
        ModelNotFoundError: no model of that name or at that path (a ``FileNotFoundError``).
        ValueError: an unknown ``layers``, ``tokenizer`` or ``precision``.
    """

    # modules.json names a module by its class's module: the public path, so a saved model
    # outlives a move of this file.
    __module__ = "contextvec.sentence_transformers"
    config_keys = ["model", "layers", "tokenizer", "precision"]
    config_file_name = CONFIG_FILE

    def __init__(
        self,
        model: str | os.PathLike = DEFAULT_MODEL,
        layers: Layers | str = Layers.AVERAGE,
        tokenizer: TokenizerName | str = TokenizerName.MOSES,
        precision: Precision | str = Precision.FP32,
    ) -> None:
        super().__init__()
        self.layers = as_layers(layers)
        self.tokenizer = as_tokenizer_name(tokenizer, one_per_line=True)
        self.precision = as_precision(precision)
        # A directory is kept as an absolute path, so the saved model loads from any folder;
        # a name stays a name (contextvec.load prefers a path that exists, as this does).
        self.model = str(Path(model).resolve()) if Path(model).exists() else os.fspath(model)
        self.encoder = load(self.model, precision=self.precision).requires_grad_(False)
        self._split = Tokenizer(self.tokenizer)
        width = self.encoder.num_layers if self.layers is Layers.ALL else 1
        self.dim = width * self.encoder.output_dim

    def get_config_dict(self) -> dict[str, str]:
        """What ``save`` writes: the model's name or absolute path and the settings, as strings."""
        return {key: str(getattr(self, key)) for key in self.config_keys}

    def get_embedding_dimension(self) -> int:
        """Width of each word's vector: ``num_layers * dim`` with ``"all"``, else ``dim``."""
        return self.dim

    def words(self, text: str) -> list[str]:
        """The words of one text, as ``preprocess`` splits it (the ``tokenizer`` setting)."""
        return self._split(text)[0]

    def preprocess(self, inputs: list[str], prompt: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """Words and mask of a batch of texts.

        Args:
            inputs: ``batch`` texts.
            prompt: a text put before each input (sentence-transformers' prompts).

        Returns:
            ``words``: one list of words per text; ``attention_mask``: ``(batch, words)`` int64,
            1 at each word (and at the one zero-vector word of a text without words); with a
            ``prompt``, ``prompt_length``: the prompt's words.

        Raises:
            TypeError: an input that is not a string.
        """
        for text in inputs:  # (named by value: sentence-transformers reorders the inputs)
            if not isinstance(text, str):
                raise TypeError(f"each input must be a str, not {type(text).__name__}: {text!r:.60}")
        features: dict[str, Any] = {}
        if prompt:
            inputs = self._prepend_prompt(inputs, prompt)
            # Its words, which Pooling(include_prompt=False) leaves out of the sentence vector.
            features["prompt_length"] = len(self.words(prompt))
        words = [self.words(text) for text in inputs]
        counts = [max(len(w), 1) for w in words]
        mask = torch.arange(max(counts, default=1)).view(1, -1) < torch.tensor(counts).view(-1, 1)
        return {**features, "words": words, "attention_mask": mask.long()}

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The word vectors of a batch.

        Args:
            features: what :meth:`preprocess` returned (``attention_mask`` ``(batch, words)``).

        Returns:
            ``features`` with ``token_embeddings`` ``(batch, words, dim)`` float32 added: the
            ``layers`` chosen, zero past each text's end.
        """
        words, mask = features["words"], features["attention_mask"]
        vectors = torch.zeros(*mask.shape, self.dim, device=mask.device)
        rows = [i for i, w in enumerate(words) if w]  # the encoder takes no empty sentence
        if rows:
            layers, _ = self.encoder([words[i] for i in rows])  # (num_layers, rows, time, dim)
            vectors[rows, : layers.shape[2]] = self._selected(layers.float()).to(mask.device)
        features["token_embeddings"] = vectors
        return features

    def _selected(self, layers: torch.Tensor) -> torch.Tensor:
        """(num_layers, batch, time, dim) -> (batch, time, self.dim), as ``Encoder.embed``'s
        ``layers`` gives them (the mean divides the sum, as numpy's does)."""
        if self.layers is Layers.TOP:
            return layers[-1]
        if self.layers is Layers.AVERAGE:
            return layers.sum(0) / layers.shape[0]
        return layers.permute(1, 2, 0, 3).reshape(*layers.shape[1:3], self.dim)

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Writes :data:`CONFIG_FILE` into ``output_path`` (no weights)."""
        self.save_config(output_path)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None,
             local_files_only: bool = False, **kwargs: Any) -> Self:
        """The encoder a saved ``SentenceTransformer`` names (``SentenceTransformer(path)``
        calls this through ``modules.json``).

        Raises:
            FileNotFoundError: the saved folder lacks :data:`CONFIG_FILE`.
            ModelNotFoundError: the contextvec model it names is not here (the message names the
                file and the model).
            ValueError: the file is not a JSON object of the known fields with valid values.
        """
        path = cls.load_file_path(model_name_or_path, CONFIG_FILE, subfolder=subfolder, token=token,
                                  cache_folder=cache_folder, revision=revision,
                                  local_files_only=local_files_only)
        if path is None:
            raise FileNotFoundError(f"{os.path.join(model_name_or_path, subfolder, CONFIG_FILE)} is "
                                    "missing: it names the contextvec model this module runs")
        config = read_json(path)
        if not isinstance(config, dict) or "model" not in config:
            raise ValueError(f"{path}: expected a JSON object with a 'model' field")
        for key, value in config.items():
            if key not in cls.config_keys:
                raise ValueError(f"{path}: unknown field {key!r} (fields: {', '.join(cls.config_keys)})")
            if not isinstance(value, str):
                raise ValueError(f"{path}: field {key!r} must be a string, not {value!r:.60}")
        try:
            return cls(**config)
        except ModelNotFoundError as e:
            raise ModelNotFoundError(f"{path}: model {config['model']!r}: {e}") from None
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
