"""``ElmoEmbedder``: allennlp 0.9's raw-layer embedder and its ``elmo`` command's HDF5 files."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import IO

import numpy as np
import torch

from contextvec.allennlp.models import PathLike, load_elmo_encoder
from contextvec.bulk import BulkSettings, embed_to_hdf5
from contextvec.encoders.outputs import LAYER_MODES

DEFAULT_BATCH_SIZE = 64
OUTPUT_FORMATS = LAYER_MODES
"""allennlp's ``output_format`` values: the spellings of ``contextvec.encoders.outputs.Layers``."""


class ElmoEmbedder:
    """The biLM's raw layers as numpy arrays ``(num_layers, tokens, dim)`` (allennlp 0.9's API).

    Layer 0 is the char-CNN token vector duplicated ``[x; x]``, layers 1.. the biLSTM outputs
    ``[forward; backward]``; ``<S>``/``</S>`` are added inside and removed from the output, as
    in allennlp. These are not ``Elmo``'s outputs, which are scalar mixes of these layers.
    No state is carried from one call to the next, so a sentence gets the same vectors
    whatever was embedded before.

    Args:
        options_file: bilm-tf ``options.json`` (with ``weight_file``), or alone a contextvec
            model name or directory; by default the bundled model (allennlp downloaded its
            "original" model).
        weight_file: bilm-tf ``weights.hdf5``.
        cuda_device: -1 for the CPU, else the CUDA device index.

    Attributes:
        encoder: the contextvec ELMo encoder (an [`Encoder`][contextvec.encoders.base.Encoder]).
    """

    def __init__(
        self,
        options_file: PathLike | None = None,
        weight_file: PathLike | None = None,
        cuda_device: int = -1,
    ) -> None:
        device = "cpu" if cuda_device < 0 else f"cuda:{cuda_device}"
        self.cuda_device = cuda_device
        self.encoder = load_elmo_encoder(options_file, weight_file, device=device)

    def batch_to_embeddings(self, batch: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The raw layers of one batch as tensors, as allennlp 0.9 returned them.

        Args:
            batch: ``batch`` token lists.

        Returns:
            Activations ``(batch, num_layers, timesteps, dim)`` float32 (zero past each
            sentence's end) and mask ``(batch, timesteps)`` int64.
        """
        with torch.no_grad():
            layers, mask = self.encoder([list(sentence) for sentence in batch])
        return layers.transpose(0, 1), mask.long()

    def embed_sentence(self, sentence: list[str]) -> np.ndarray:
        """One sentence's layers.

        Args:
            sentence: a list of tokens.

        Returns:
            ``(num_layers, tokens, dim)`` float32.
        """
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: list[list[str]]) -> list[np.ndarray]:
        """Each sentence's layers, in order.

        Args:
            batch: token lists.

        Returns:
            One ``(num_layers, tokens, dim)`` float32 array per sentence; an empty sentence
            gives ``(num_layers, 0, dim)``.

        Raises:
            TypeError: a sentence given as a string.
        """
        for index, sentence in enumerate(batch):
            if isinstance(sentence, str):
                raise TypeError(f"embed_batch: sentence {index} is a str; pass a list of tokens")
        return self.encoder.embed(batch, batch_size=max(len(batch), 1))

    def embed_sentences(
        self, sentences: Iterable[list[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """Lazily embed sentences, ``batch_size`` at a time.

        Args:
            sentences: token lists (any iterable; read ``batch_size`` at a time).
            batch_size: sentences per forward pass.

        Yields:
            One ``(num_layers, tokens, dim)`` float32 array per sentence, in order.
        """
        iterator = iter(sentences)
        while batch := list(islice(iterator, batch_size)):
            yield from self.embed_batch(batch)

    def embed_file(
        self,
        input_file: IO[str] | PathLike,
        output_file_path: PathLike,
        output_format: str = "all",
        batch_size: int = DEFAULT_BATCH_SIZE,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
    ) -> None:
        """Embed every line (a whitespace-tokenized sentence) into HDF5, as ``allennlp elmo`` did.

        One float32 dataset per line, keyed by the 0-based line index (or by the sentence with
        ``use_sentence_keys``): ``(num_layers, tokens, dim)`` for ``"all"``, ``(tokens, dim)``
        for ``"top"`` and ``"average"``; plus ``sentence_to_index`` (a JSON string) unless
        ``forget_sentences`` or ``use_sentence_keys``. An existing output is replaced,
        atomically.

        Args:
            input_file: an open text file (closed afterwards, as allennlp did) or a path.
            output_file_path: the HDF5 file to write.
            output_format: ``"all"``, ``"top"`` or ``"average"``.
            batch_size: sentences per forward pass.
            forget_sentences: leave out ``sentence_to_index``.
            use_sentence_keys: key the datasets by sentence, not line index.

        Raises:
            ValueError: an unknown ``output_format``, or an empty line in the input.
        """
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(
                f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, not {output_format!r}"
            )
        if isinstance(input_file, str | os.PathLike):
            self._embed_path(Path(input_file), output_file_path, output_format, batch_size,
                             forget_sentences, use_sentence_keys)
            return
        try:
            name = getattr(input_file, "name", None)
            if isinstance(name, str) and Path(name).is_file() and input_file.tell() == 0:
                self._embed_path(Path(name), output_file_path, output_format, batch_size,
                                 forget_sentences, use_sentence_keys)
                return
            # A stream without a file behind it: copy it where the output goes, then embed.
            out_dir = Path(output_file_path).resolve().parent
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=out_dir, suffix=".txt",
                                             delete=False) as copy:
                shutil.copyfileobj(input_file, copy)
            try:
                self._embed_path(Path(copy.name), output_file_path, output_format, batch_size,
                                 forget_sentences, use_sentence_keys)
            finally:
                os.unlink(copy.name)
        finally:
            input_file.close()

    def _embed_path(
        self, path: Path, output: PathLike, output_format: str, batch_size: int,
        forget_sentences: bool, use_sentence_keys: bool,
    ) -> None:
        settings = BulkSettings(layers=output_format, batch_size=batch_size, sentence_keys=use_sentence_keys,
                                forget_sentences=forget_sentences,
                                overwrite=True)  # allennlp's command replaced an existing output
        embed_to_hdf5(self.encoder, path, output, settings)
