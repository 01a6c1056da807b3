"""CoVe's context vectors alone: a CoVe encoder's layers without the word vectors in front.

CoVe's encoder layers are ``[GloVe(w); biLSTM_k(w)]`` (docs/cove.md). A model that already reads
the fixed word vectors (CoVe's BCN reads ``[GloVe(w); CoVe(w)]``, the paper's ``w~``) wants the
context half only, so that the word vectors enter it once.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.encoders.cove.encoder import CoveEncoder


class CoveContext(Encoder):
    """A CoVe encoder's context vectors without the word vector in front: layer k is the k-th
    MT-LSTM layer's output ``biLSTM_k(w)`` (k = 1..L; the top one is CoVe(w))."""

    # Where the class was defined first: the representations table's stored runs and feature
    # caches are keyed by it.
    fingerprint_class = "contextvec.tasks.experiments.representations.CoveContext"

    def __init__(self, cove: CoveEncoder) -> None:
        super().__init__()
        self.inner = cove
        self.word_dim = cove.config.input_dim
        self.num_layers = cove.num_layers - 1  # layer 0 has no context vector
        self.output_dim = cove.output_dim - self.word_dim

    @property
    def config(self):  # noqa: ANN201 - the inner MT-LSTM config (part of the fingerprint)
        return self.inner.config

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        """Encode sentences and keep only the context vectors of the inner encoder.

        Args:
            sentences: ``batch`` sentences, each a sequence of tokens.

        Returns:
            An :class:`EncoderOutput` with ``layers`` ``(num_layers, batch, timesteps, output_dim)``
            (the inner encoder's layers 1.. with the first ``word_dim`` features dropped) and its
            ``mask`` ``(batch, timesteps)`` bool, True at real tokens.
        """
        layers, mask = self.inner(sentences)
        return EncoderOutput(layers[1:, :, :, self.word_dim:], mask)
