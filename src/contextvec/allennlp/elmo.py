"""``Elmo``: allennlp's ELMo module (same arguments, outputs and shapes) on contextvec's biLM."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import nn

from contextvec.allennlp.bilm import BiLmActivations
from contextvec.allennlp.models import PathLike, load_elmo_encoder
from contextvec.embedder import ScalarMix
from contextvec.encoders.bilm import ElmoBiLM, ElmoEncoder
from contextvec.text.chars import batch_to_char_ids

logger = logging.getLogger(__name__)


def batch_to_ids(batch: list[list[str]]) -> torch.Tensor:
    """Character ids of tokenized sentences, as allennlp's ``batch_to_ids``.

    UTF-8 bytes + 1 between begin/end-of-word marks, tokens cut to 48 bytes; a token that is
    exactly ``<S>`` or ``</S>`` gets the sentence-boundary ids, as allennlp's
    ``ELMoCharacterMapper`` gives it; padded tokens are all zeros.

    Args:
        batch: ``batch`` sentences, each a list of string tokens.

    Returns:
        ``(batch, time, 50)`` int64, ``time`` the longest sentence's tokens.

    Raises:
        TypeError: a sentence given as a string (allennlp would have read it as a list of
            one-character tokens), or a token that is not a string.
    """
    for index, sentence in enumerate(batch):
        if isinstance(sentence, str):
            raise TypeError(f"batch_to_ids: sentence {index} is a str; pass a list of tokens")
        for position, token in enumerate(sentence):
            if not isinstance(token, str):
                raise TypeError(
                    f"batch_to_ids: sentence {index}, token {position} is a "
                    f"{type(token).__name__}, not a str"
                )
    return batch_to_char_ids(batch)


def remove_sentence_boundaries(
    tensor: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the ``<S>``/``</S>`` rows, as allennlp's function of that name.

    Args:
        tensor: ``(batch, time + 2, dim)`` with ``<S>`` at position 0 and ``</S>`` after each
            sentence's last token.
        mask: ``(batch, time + 2)``, marking a prefix of each row (tokens and both boundaries).

    Returns:
        ``(batch, time, dim)`` in the dtype of ``tensor``, zero past each sentence's end, and
        its mask ``(batch, time)`` (the tokens only, dtype of ``mask``).
    """
    inner = mask[:, 2:]
    return tensor[:, 1:-1] * inner.unsqueeze(-1).to(tensor.dtype), inner


class Elmo(nn.Module):
    """ELMo representations: ``num_output_representations`` learned scalar mixes of the biLM layers.

    Arguments as allennlp's ``Elmo``. Unlike allennlp, the biLM keeps no state between calls: a
    sentence gets the same vectors in any batch.

    Args:
        options_file: bilm-tf ``options.json`` (with ``weight_file``), or alone a contextvec
            model name or directory; both None: the bundled model.
        weight_file: bilm-tf ``weights.hdf5``.
        num_output_representations: how many scalar mixes (one per place the task model uses
            ELMo).
        requires_grad: fine-tune the biLM; otherwise only the mixes learn.
        do_layer_norm: normalise the layers before mixing (statistics over real tokens and
            sentence boundaries).
        dropout: dropout probability on each representation.
        vocab_to_cache: words whose char-CNN vectors are computed once, for ``word_inputs``.
        keep_sentence_boundaries: keep the ``<S>`` and ``</S>`` positions in the outputs.
        scalar_mix_parameters: fixed pre-softmax weights for every mix (one per layer), not
            trained.
        module: a contextvec ELMo encoder or biLM instead of files (its parameters keep their
            ``requires_grad``).

    Raises:
        ValueError: both files and ``module``, or a download URL instead of a file.
        ModelNotFoundError: files or a name that is no model (a ``FileNotFoundError``).
        TypeError: a ``module`` or model that is not an ELMo biLM.
    """

    def __init__(
        self,
        options_file: PathLike | None,
        weight_file: PathLike | None,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: list[str] | None = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: Sequence[float] | None = None,
        module: ElmoEncoder | ElmoBiLM | None = None,
    ) -> None:
        super().__init__()
        bilm = _bilm(options_file, weight_file, module)
        if module is None:  # as in allennlp, a given module keeps its own requires_grad
            bilm.requires_grad_(requires_grad)
        if requires_grad and vocab_to_cache:
            logger.warning("fine-tuning ELMo: the cached vocabulary is not used while gradients flow")
        self._elmo_lstm = BiLmActivations(bilm, vocab_to_cache)
        self._has_cached_vocab = vocab_to_cache is not None
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._dropout = nn.Dropout(p=dropout)
        self._scalar_mixes: list[ScalarMix] = []
        for k in range(num_output_representations):
            mix = ScalarMix(
                self._elmo_lstm.num_layers,
                layer_norm=do_layer_norm,
                initial_weights=scalar_mix_parameters,
                trainable=scalar_mix_parameters is None,
            )
            self.add_module(f"scalar_mix_{k}", mix)
            self._scalar_mixes.append(mix)

    def get_output_dim(self) -> int:
        """Width ``dim`` of each representation: ``2 * projection_dim``."""
        return self._elmo_lstm.get_output_dim()

    def forward(
        self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None
    ) -> dict[str, list[torch.Tensor] | torch.Tensor]:
        """ELMo representations and their mask.

        Args:
            inputs: character ids from [`batch_to_ids`][contextvec.allennlp.elmo.batch_to_ids],
                ``(batch, timesteps, 50)`` integer, or with more leading dimensions
                ``(..., timesteps, 50)``.
            word_inputs: ``(batch, timesteps)`` (or ``(..., timesteps)``) integer indices into
                ``vocab_to_cache`` (0 = padding), used instead of the char-CNN when every id is
                in range; ignored, with a warning, without a cached vocabulary.

        Returns:
            A dict of ``"elmo_representations"``, a list of ``num_output_representations``
            float32 tensors ``(batch, timesteps, dim)``, and ``"mask"``, ``(batch, timesteps)``
            bool; with more leading input dimensions, the outputs have them too. With
            ``keep_sentence_boundaries`` ``timesteps`` grows by 2 (``<S>`` and ``</S>``).

        Raises:
            ValueError: ids not of shape ``(..., timesteps, 50)``, or a padding token before a
                real one.
            TypeError: floating-point ids.
        """
        original_shape = inputs.shape
        reshaped = inputs.reshape(-1, *original_shape[-2:]) if inputs.dim() > 3 else inputs
        word_shape = None
        if word_inputs is not None:
            word_shape = word_inputs.shape
            if not self._has_cached_vocab:
                logger.warning("Word inputs were passed to ELMo but it does not have a cached vocab.")
                word_inputs = None
            elif word_inputs.dim() > 2:
                word_inputs = word_inputs.reshape(-1, word_shape[-1])

        layers, mask_with_boundaries = self._elmo_lstm.layers_and_mask(reshaped, word_inputs)
        keep = self._keep_sentence_boundaries
        mask = mask_with_boundaries if keep else mask_with_boundaries[:, 2:]
        representations = []
        for mix in self._scalar_mixes:
            # Mixed with the boundaries in place: with do_layer_norm they count in the statistics.
            representation = mix(layers, mask_with_boundaries)
            if not keep:
                representation, _ = remove_sentence_boundaries(representation, mask_with_boundaries)
            representations.append(self._dropout(representation))

        if word_shape is not None and len(word_shape) > 2 and self._has_cached_vocab:
            leading = tuple(word_shape[:-1])
        elif len(original_shape) > 3:
            leading = tuple(original_shape[:-2])
        else:
            return {"elmo_representations": representations, "mask": mask}
        steps = mask.shape[-1]
        return {
            "elmo_representations": [r.reshape(*leading, steps, -1) for r in representations],
            "mask": mask.reshape(*leading, steps),
        }


def _bilm(
    options_file: PathLike | None, weight_file: PathLike | None, module: ElmoEncoder | ElmoBiLM | None
) -> ElmoBiLM:
    if module is None:
        return load_elmo_encoder(options_file, weight_file).bilm
    if options_file is not None or weight_file is not None:
        raise ValueError("give either options_file/weight_file or module, not both")
    if isinstance(module, ElmoEncoder):
        return module.bilm
    if isinstance(module, ElmoBiLM):
        return module
    raise TypeError(f"module must be a contextvec ElmoEncoder or ElmoBiLM, not {type(module).__name__}")
