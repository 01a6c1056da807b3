"""CoVe behind contextvec's common [`Encoder`][contextvec.encoders.base.Encoder] interface.

McCann et al. (2017) feed tasks ``w~ = [GloVe(w); CoVe(w)]``, where CoVe(w) is the top layer of
the MT-LSTM. Here every layer keeps the word vector in front, so all layers have the same width
(``input_dim + 2 * hidden_size``: 300 + 600 = 900 for CoVe):

- layer 0: ``[GloVe(w); 0]`` (the word vector, zeros where the context vector goes),
- layer k (1..num_layers): ``[GloVe(w); biLSTM_k(w)]``, the k-th MT-LSTM layer's output
  (forward and backward halves concatenated); the last layer is the paper's ``[GloVe; CoVe]``.

A scalar mix ``gamma * sum_k s_k layer_k`` is then ``[gamma * GloVe(w); gamma * sum_k s_k
biLSTM_k(w)]``: the word vector always enters whole, and the weights choose among the context
layers (layer 0's weight lets the mix turn the context part down).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.encoders.cove.document import document_layers
from contextvec.encoders.cove.mt_lstm import MTLSTM, MTLSTMConfig, sequence_mask


class CoveEncoder(Encoder):
    """Token lists -> ``num_layers + 1`` layers of ``[word vector; context vector]`` (see the
    module docstring). Out-of-vocabulary words get the MT-LSTM's ``unk`` vector (zeros unless
    it was trained)."""

    token_layer, upper_layers, token_layer_context_free = "word vectors", "MT-LSTM", True

    def __init__(self, mt_lstm: MTLSTM) -> None:
        super().__init__()
        self.mt_lstm = mt_lstm
        self.num_layers = mt_lstm.config.num_layers + 1
        self.output_dim = mt_lstm.config.input_dim + mt_lstm.config.output_dim

    @property
    def config(self) -> MTLSTMConfig:
        return self.mt_lstm.config

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        """CoVe's layers of one batch.

        Args:
            sentences: ``batch`` token lists.

        Returns:
            ``layers`` ``(num_layers, batch, time, input_dim + 2 * hidden_size)`` float32, each
            ``[word vector; context vector]`` (layer 0's context half zero, then one layer per
            MT-LSTM layer; zero past each sentence's end) and ``mask`` ``(batch, time)`` bool.
        """
        ids, lengths = self.mt_lstm.batch_ids(sentences)
        out = self.mt_lstm(ids, lengths)
        words = out.embeddings
        context = [words.new_zeros(*words.shape[:2], self.mt_lstm.output_dim), *out.layers]
        layers = torch.stack([torch.cat([words, c], dim=-1) for c in context])
        mask = sequence_mask(lengths, ids.shape[1])
        return EncoderOutput(layers * mask[None, :, :, None], mask)

    def embed_document(
        self, sentences: Sequence[Sequence[str]], pass_tokens: int = 4096
    ) -> Iterator[np.ndarray]:
        """One document's sentences with document context: the MT-LSTM reads the sentences'
        tokens concatenated as one sequence, each direction carrying its state across sentence
        boundaries (:mod:`contextvec.encoders.cove.document` says exactly what a sentence's
        vectors depend on). Layer 0 is the word alone; the context halves of layers 1.. depend
        on the whole document, never on ``pass_tokens`` (bit for bit in float32).

        Args:
            sentences: the document's token lists, in order (empty ones allowed).
            pass_tokens: tokens per pass, rounded up to a multiple of
                :data:`~contextvec.encoders.cove.document.BLOCK`; a longer document spills each
                layer's outputs to a temporary file.

        Yields:
            Each sentence's float32 ``(num_layers, tokens, input_dim + 2 * hidden_size)`` array,
            in document order.

        Raises:
            TypeError: a bare string for the document or one of its sentences.
            ValueError: ``pass_tokens`` below 1.
        """
        return document_layers(self.mt_lstm, sentences, pass_tokens)
