"""The frozen encoder's layers as the task models see them: learned mixes or a fixed combination."""

from __future__ import annotations

from collections.abc import Sequence

from contextvec.choices import checked_choice
from contextvec.embedder.module import ContextualEmbedder
from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.encoders.bert.combine import LayerCombination, combine_layers
from contextvec.tasks.models.settings import ModelLayers, ModelSettings


def check_layers(layers: ModelLayers | str, num_layers: int) -> None:
    """Raise if an encoder of ``num_layers`` layers cannot give the ``layers`` combination."""
    if layers in (LayerCombination.SUM_LAST_4, LayerCombination.CONCAT_LAST_4) and num_layers < 4:
        raise ValueError(f"layers {layers} needs an encoder of at least 4 layers, this one has {num_layers}")


class FixedLayers(Encoder):
    """One fixed combination of another encoder's layers (``num_layers`` = 1): ``last``,
    ``sum_last_4`` or ``concat_last_4`` (:func:`~contextvec.encoders.bert.combine_layers`)."""

    def __init__(self, encoder: Encoder, how: LayerCombination | str) -> None:
        super().__init__()
        how = checked_choice(LayerCombination, how, "how")
        check_layers(how, encoder.num_layers)
        self.inner = encoder
        self.how = how
        self.num_layers = 1
        self.output_dim = encoder.output_dim * (4 if how is LayerCombination.CONCAT_LAST_4 else 1)

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        """Encode sentences and combine the inner encoder's layers into one.

        Args:
            sentences: ``batch`` sentences, each a sequence of tokens.

        Returns:
            An :class:`EncoderOutput` with ``layers`` ``(1, batch, timesteps, output_dim)`` and
            ``mask`` ``(batch, timesteps)`` bool, True at real tokens.
        """
        layers, mask = self.inner(sentences)
        return EncoderOutput(combine_layers(layers, self.how)[None], mask)


def contextual_embedder(encoder: Encoder, settings: ModelSettings) -> ContextualEmbedder:
    """The embedder a task model with ``settings`` uses (see the module docstring)."""
    if settings.layers is not ModelLayers.MIX:
        embedder = ContextualEmbedder(FixedLayers(encoder, settings.layers), settings.num_mixes,
                                      settings.layer_norm, settings.mix_dropout)
        for mix in embedder.mixes:
            mix.requires_grad_(False)  # one layer, weight 1 and gamma 1: a fixed mix
        return embedder
    return ContextualEmbedder(encoder, settings.num_mixes, settings.layer_norm, settings.mix_dropout)
