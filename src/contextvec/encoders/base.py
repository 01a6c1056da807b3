"""The interface every contextual encoder (ELMo, CoVe, BERT) offers."""

from __future__ import annotations

import contextlib
import functools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar, NamedTuple, Protocol

import numpy as np
import torch
from torch import nn

from contextvec.encoders.outputs import Layers, Pooling, as_layers, as_pooling, view_layers
from contextvec.text.batching import length_batches
from contextvec.text.tokenize import Sentence, as_sentences, refuse_bare_string


def check_pass_tokens(pass_tokens: object) -> int:
    """``pass_tokens`` of :meth:`Encoder.embed_document`, checked: a ``ValueError`` for anything
    but an integer of at least 1."""
    if isinstance(pass_tokens, bool) or not isinstance(pass_tokens, int) or pass_tokens < 1:
        raise ValueError(f"pass_tokens must be a positive integer, not {pass_tokens!r}")
    return pass_tokens


@contextlib.contextmanager
def evaluating(module: nn.Module) -> Iterator[None]:
    """Eval mode and ``torch.inference_mode`` for the block, the modes restored module by module
    afterwards. Only a module with some part in train mode is switched: one already in eval mode
    (the server's) is never written to, so threads can share it."""
    modes = {sub: sub.training for sub in module.modules()}
    switched = any(modes.values())
    if switched:
        module.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        if switched:  # (restoring modes that never changed costs a lone sentence time)
            for sub, mode in modes.items():
                sub.training = mode


class EncoderOutput(NamedTuple):
    """What [`Encoder.forward`][contextvec.encoders.base.Encoder.forward] returns for a batch."""

    layers: torch.Tensor
    """``(num_layers, batch, time, dim)`` float (float32 unless the encoder's parameters are of
    another dtype), zero past each sentence's end; ``time`` is the longest sentence's tokens."""
    mask: torch.Tensor
    """``(batch, time)`` bool, True at real tokens."""


class SentenceVectors(Protocol):
    """A model's own sentence vectors, made from its word pieces (BERT's sentence-transformers
    pooling): what :func:`contextvec.encoders.registry.sentence_vectors` gives for a model that
    has them."""

    max_pieces: int
    """The most pieces a row may have, its boundary pieces included (a longer text is refused,
    never cut)."""
    output_dim: int
    """The width of a sentence vector."""

    def pieces(self, sentences: Sequence[Sequence[str]]) -> list[list[int]]:
        """Each sentence's row of piece ids, boundary pieces included."""

    def embed_pieces(self, rows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """One float32 ``(output_dim,)`` vector per row; rows of any callers batch together."""


class Encoder(nn.Module, ABC):
    """Tokenized sentences in, one vector per token per layer out.

    Subclasses implement [`forward`][contextvec.encoders.base.Encoder.forward] on a batch of
    token lists (a ``torch.nn.Module``, usable inside a model of your own); this class adds the
    user-facing [`embed`][contextvec.encoders.base.Encoder.embed], which batches by length, runs
    without gradients and returns numpy arrays in input order.
    """

    num_layers: int
    """Layers per token: ELMo's token layer and its biLSTM layers, BERT's embeddings and
    transformer layers, CoVe's GloVe and MT-LSTM layers."""
    output_dim: int
    """The width ``dim`` of every layer's vectors."""
    precision: str
    """``"bf16"`` or ``"int8"`` once :func:`~contextvec.encoders.precision.apply_precision` has
    prepared the encoder in that precision (``contextvec.load(precision=...)``); unset in fp32."""
    token_layer: ClassVar[str] = "layer 0"
    """What layer 0 is, in words ("char-CNN"), for :meth:`layer_names`."""
    upper_layers: ClassVar[str] = "layer"
    """What the layers above layer 0 are, in words ("biLSTM"), for :meth:`layer_names`."""
    token_layer_context_free: ClassVar[bool] = False
    """Whether layer 0 gives a word the same vector in any sentence (ELMo's char-CNN does; BERT's
    embeddings add the word's position)."""
    sentence_layers: ClassVar[Layers] = Layers.AVERAGE
    """The layers a sentence vector pools unless asked otherwise (``contextvec serve``'s
    ``/v1/embeddings``): ELMo's and CoVe's average, BERT's top (sentence-transformers' layer)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Every subclass's ``forward`` refuses a bare string (``TypeError``, as ``embed``):
        it would read as one sentence per character. One check, here, for every encoder."""
        super().__init_subclass__(**kwargs)
        forward = cls.__dict__.get("forward")
        if forward is None or getattr(forward, "__isabstractmethod__", False):
            return

        @functools.wraps(forward)
        def checked(self: Encoder, sentences: Sequence[Sequence[str]], *args, **kw) -> EncoderOutput:
            refuse_bare_string(sentences)
            return forward(self, sentences, *args, **kw)

        cls.forward = checked

    @abstractmethod
    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        """Layers and mask for one batch of tokenized sentences (gradients flow if enabled); a
        bare string is a ``TypeError``.

        Args:
            sentences: ``batch`` token lists, each with at least one token.

        Returns:
            ``layers`` ``(num_layers, batch, time, dim)`` float32 (zero past each sentence's
            end; ``time`` is the longest sentence's length) and ``mask`` ``(batch, time)`` bool.
        """

    def layer_names(self) -> list[str]:
        """Labels of the layers, ``num_layers`` of them: ``0 char-CNN``, ``1 biLSTM-1``, ... for
        ELMo (``0 layer 0``, ``1 layer-1``, ... for an encoder that does not name its layers)."""
        return [f"0 {self.token_layer}"] + [f"{k} {self.upper_layers}-{k}" for k in range(1, self.num_layers)]

    def embed(
        self,
        sentences: Iterable[Sentence],
        batch_size: int = 32,
        max_tokens: int | None = 4096,
        *,
        layers: Layers | str = Layers.ALL,
        pool: Pooling | str | None = None,
    ) -> list[np.ndarray]:
        """Vectors for each sentence, as numpy arrays in input order (no gradients).

        A sentence's vectors do not depend on the other sentences, the batch size or earlier
        calls, up to float rounding (matrix products sum in an order that depends on their
        shapes).

        Args:
            sentences: strings (split on whitespace) or token lists. A bare string is refused
                (pass ``[text]`` for one sentence).
            batch_size: sentences per forward pass.
            max_tokens: padded tokens (``batch * time``) per forward pass; None for no limit.
            layers: a [`Layers`][contextvec.encoders.outputs.Layers] or its spelling: ``"all"``
                (every layer), ``"top"`` (the last layer) or ``"average"`` (the mean of the
                layers), as ``contextvec embed --all/--top/--average`` writes them.
            pool: None for one vector per token, or a
                [`Pooling`][contextvec.encoders.outputs.Pooling] (``"mean"``, ``"max"`` or
                ``"first"``) for one vector per sentence (per layer with ``"all"``); a sentence
                without tokens pools to zeros.

        Returns:
            One float32 array per sentence, ``(num_layers, tokens, dim)`` with ``layers="all"``,
            ``(tokens, dim)`` with ``"top"`` or ``"average"``; with ``pool`` the tokens axis is
            pooled away, giving ``(num_layers, dim)`` or ``(dim,)``. An empty sentence has
            ``tokens == 0``.

        Raises:
            TypeError: a bare string or bytes instead of a list of sentences.
            ValueError: an unknown ``layers`` or ``pool``.
        """
        tokenized = as_sentences(sentences)
        layers, pool = as_layers(layers), as_pooling(pool)
        out: list[np.ndarray] = [np.empty(0)] * len(tokenized)
        for index, array in self.embed_batches(tokenized, batch_size, max_tokens):
            out[index] = view_layers(array, layers, pool)
        return out

    def embed_document(
        self, sentences: Sequence[Sequence[str]], pass_tokens: int = 4096
    ) -> Iterator[np.ndarray]:
        """One document's sentences with document context: each sentence's vectors depend on the
        whole document (each family's docstring says how exactly), not on other documents, on
        ``pass_tokens`` or on earlier calls.

        Memory is bounded by ``pass_tokens`` (tokens held in one pass over time), not by the
        document's length: sentences are yielded as soon as they are complete.

        Args:
            sentences: the document's token lists, in order (empty ones allowed).
            pass_tokens: tokens per pass over time (a family may round it to its block size).

        Yields:
            Each sentence's float32 ``(num_layers, tokens, dim)`` array, in document order.

        Raises:
            NotImplementedError: a family without document context.
        """
        raise NotImplementedError(f"{type(self).__name__} has no document context")

    def clear_caches(self) -> None:
        """Forget cached intermediate results (ELMo's char-CNN token vectors).

        A cached vector was computed in an earlier batch, whose shape can change its last bits;
        clearing first makes a chunk's output depend on the chunk alone, whichever chunks ran
        before it (the local and Ray engines call it before every chunk).
        """

    def embed_batches(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int = 32,
        max_tokens: int | None = 4096,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Each sentence's layers as soon as its batch is done, in length order, not input order.

        Safe to call from several threads at once on an encoder in eval mode (the default after
        ``contextvec.load``): the mode is switched, and restored, only when it is in train mode.

        Args:
            sentences: token lists (empty ones allowed).
            batch_size: sentences per forward pass.
            max_tokens: padded tokens per forward pass; None for no limit.

        Yields:
            Pairs ``(index, array)`` of the sentence's position in ``sentences`` and its
            float32 ``(num_layers, tokens, dim)`` array.
        """
        # Eval mode for this call only (evaluating): a wrapped model shared with another encoder
        # keeps its own mode, and an encoder already in eval mode (the server's) is never
        # switched, so threads can share it.
        with evaluating(self):
            empty = np.zeros((self.num_layers, 0, self.output_dim), dtype=np.float32)
            nonempty = [i for i, s in enumerate(sentences) if s]
            for i in range(len(sentences)):
                if not sentences[i]:
                    yield i, empty.copy()
            lengths = [len(sentences[i]) for i in nonempty]
            for batch in length_batches(lengths, batch_size, max_tokens):
                indices = [nonempty[b] for b in batch]
                layers, _ = self([sentences[i] for i in indices])
                layers = layers.float().cpu().numpy()
                for row, i in enumerate(indices):
                    yield i, np.ascontiguousarray(layers[:, row, : len(sentences[i])])
