"""BERT behind contextvec's common [`Encoder`][contextvec.encoders.base.Encoder] interface.

Words in, one vector per word per layer out: the ``num_hidden_layers + 1`` hidden states
(embedding output first) of the word's pieces, pooled to the word.

- ``subword_pooling="first"`` (default) takes the word's first piece, as BERT's NER setup
  does; ``"mean"`` averages all of its pieces. [CLS] and [SEP] get no output rows.
- **Sliding window.** A sentence with more than ``window`` pieces (default
  ``max_position_embeddings - 2``, room for [CLS] and [SEP]) is never truncated: it runs as
  overlapping windows of ``window`` pieces, each wrapped in [CLS] ... [SEP] with positions
  from 0, starting every ``window // 2`` pieces (the last window ends at the last piece).
  Each piece takes its vectors from the window in which it is most central (ties: the
  earlier window), so every piece sees at least about ``window / 4`` pieces of context on
  each side except at the sentence's ends. See ``window_spans``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.encoders.bert.document import document_vectors
from contextvec.encoders.bert.model import BertModel
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.encoders.bert.windows import first_pieces, window_spans
from contextvec.encoders.outputs import Layers

SUBWORD_POOLING = ("first", "mean")


class BertEncoder(Encoder):
    """Token lists -> BERT's ``num_hidden_layers + 1`` hidden states per word (see the module
    docstring for pooling and windows).

    The model runs on at most ``max_pieces_per_call`` padded pieces at a time (at least one
    window), so a very long sentence does not hold all its windows' activations at once. Rows
    run unpadded, end to end (``BertModel.forward_unpadded``: no matrix product on padding), and
    each layer's word vectors are copied straight into the output.
    """

    # The embeddings layer adds each piece's position: not the same vector in every sentence.
    token_layer, upper_layers, token_layer_context_free = "embeddings", "transformer", False
    sentence_layers = Layers.TOP

    def __init__(
        self,
        model: BertModel,
        tokenizer: WordPieceTokenizer,
        subword_pooling: str = "first",
        window: int | None = None,
        max_pieces_per_call: int = 16384,
    ) -> None:
        super().__init__()
        if subword_pooling not in SUBWORD_POOLING:
            raise ValueError(f"subword_pooling must be one of {SUBWORD_POOLING}, not {subword_pooling!r}")
        longest = model.config.max_position_embeddings - 2
        window = longest if window is None else window
        if not 1 <= window <= longest:
            raise ValueError(f"window must be in 1..{longest} (max_position_embeddings - 2), not {window}")
        self.model = model
        self.tokenizer = tokenizer
        self.subword_pooling = subword_pooling
        self.window = window
        self.max_pieces_per_call = max_pieces_per_call
        self.num_layers = model.config.num_hidden_layers + 1
        self.output_dim = model.config.hidden_size

    @property
    def config(self):
        return self.model.config

    def forward(self, sentences: Sequence[Sequence[str]]) -> EncoderOutput:
        """BERT's hidden states of one batch, one vector per word (not per word piece).

        Args:
            sentences: ``batch`` token lists (words; each is split into word pieces here).

        Returns:
            ``layers`` ``(num_hidden_layers + 1, batch, time, hidden_size)`` float32 (the
            embeddings, then every transformer layer; a word's vector pooled from its pieces by
            ``subword_pooling``; zero past each sentence's end) and ``mask`` ``(batch, time)``
            bool.
        """
        device = self.model.embeddings.word_embeddings.weight.device
        lengths = [len(s) for s in sentences]
        width = max(lengths, default=0)
        mask = torch.arange(width).view(1, -1) < torch.tensor(lengths, dtype=torch.long).view(-1, 1)
        out = self.model.embeddings.word_embeddings.weight.new_zeros(
            self.num_layers, len(sentences) * width, self.output_dim
        )
        shape = (self.num_layers, len(sentences), width, self.output_dim)
        if width == 0:
            return EncoderOutput(out.view(shape), mask.to(device))
        ids, row_lengths, source, word_of_piece = self._rows(sentences)
        # Each word's row in ``out``'s flattened (sentences * width) positions.
        slot_of_word = mask.view(-1).nonzero().view(-1).to(device)
        if self.subword_pooling == "first":
            is_first = first_pieces(word_of_piece)
            source, word_of_piece = source[is_first], word_of_piece[is_first]
        source, slots = source.to(device), slot_of_word[word_of_piece.to(device)]

        # Rows run in groups of at most max_pieces_per_call padded pieces (a long sentence has
        # many windows); rows ascend along the pieces, so each group supplies a contiguous run.
        step = max(1, self.max_pieces_per_call // max(row_lengths))
        offsets = [0, *itertools.accumulate(row_lengths)]
        for first in range(0, len(row_lengths), step):
            lo_piece, hi_piece = offsets[first], offsets[min(first + step, len(row_lengths))]
            lo, hi = torch.searchsorted(source, torch.tensor([lo_piece, hi_piece], device=device)).tolist()
            self.pool_rows(ids[lo_piece:hi_piece].to(device), row_lengths[first:first + step],
                           source[lo:hi] - lo_piece, slots[lo:hi], out)
        if self.subword_pooling == "mean":
            counts = torch.bincount(word_of_piece, minlength=len(slot_of_word)).to(device, out.dtype)
            out[:, slot_of_word] /= counts[None, :, None]
        return EncoderOutput(out.view(shape), mask.to(device))

    def embed_document(
        self, sentences: Sequence[Sequence[str]], pass_tokens: int = 4096
    ) -> Iterator[np.ndarray]:
        """One document's sentences read as one text in windows (``document.py`` says exactly
        what each sentence's vectors depend on); ``pass_tokens`` is rounded up to one window.

        Args:
            sentences: the document's token lists (or strings, split on whitespace), in order;
                empty ones allowed.
            pass_tokens: tokens per pass, at least 1; a pass here is always one window, so it
                changes nothing.

        Yields:
            Each sentence's float32 ``(num_layers, words, hidden_size)`` array, in document
            order, as soon as every window its pieces take vectors from has run.

        Raises:
            TypeError: a bare string instead of a list of sentences.
            ValueError: ``pass_tokens`` is not a positive integer.
        """
        return document_vectors(self, sentences, pass_tokens)

    def pool_rows(self, ids: torch.Tensor, row_lengths: Sequence[int], take: torch.Tensor,
                  put: torch.Tensor, out: torch.Tensor) -> None:
        """Run unpadded rows and pool the pieces ``take`` into the words ``put`` of ``out``.

        Args:
            ids: ``(n,)`` long, rows of ``row_lengths`` pieces laid end to end.
            row_lengths: each row's pieces, [CLS] and [SEP] included.
            take: ``(k,)`` long, indices into the n pieces, in piece order: the pieces read.
            put: ``(k,)`` long, each read piece's word: a row of ``out``'s second axis.
            out: ``(num_layers, words, hidden_size)``: ``subword_pooling="first"`` copies each
                piece's vectors into its word's row, ``"mean"`` adds them (the caller divides).
        """
        # The last layer is computed at the pieces read only (its state: those rows, in order).
        states = self.model.forward_unpadded(ids, row_lengths, last_rows=take)
        for layer, state in enumerate(states):
            pruned = layer == len(states) - 1 and layer > 0   # states[0]: the embeddings
            rows = state if pruned else state.index_select(0, take)
            if self.subword_pooling == "first":
                out[layer].index_copy_(0, put, rows)
            else:
                out[layer].index_add_(0, put, rows)

    def _rows(
        self, sentences: Sequence[Sequence[str]]
    ) -> tuple[torch.Tensor, list[int], torch.Tensor, torch.Tensor]:
        """The model's input rows ([CLS] window [SEP]) laid end to end.

        Returns ``ids`` (all rows' pieces), the rows' lengths, and for every piece of every
        sentence in order: ``source``, the position in the unpadded rows its vectors come from, and
        ``word_of_piece``, its word's index among all words of the batch.
        """
        ids: list[int] = []
        row_lengths: list[int] = []
        source: list[int] = []
        word_index: list[int] = []           # within its sentence
        n_pieces: list[int] = []             # per sentence
        for pieces in self.tokenizer.encode_batch(sentences):
            content = pieces.ids[1:-1]
            for start, end, keep_start, keep_end in window_spans(len(content), self.window):
                if keep_end > keep_start:
                    # Piece p of the content sits at len(ids) + 1 + p - start in the unpadded rows.
                    at = len(ids) + 1 - start
                    source.extend(range(at + keep_start, at + keep_end))
                    ids.append(self.tokenizer.cls_id)
                    ids.extend(content[start:end])
                    ids.append(self.tokenizer.sep_id)
                    row_lengths.append(end - start + 2)
            word_index.extend(pieces.word_index[1:-1])
            n_pieces.append(len(content))
        words = torch.tensor([len(s) for s in sentences], dtype=torch.long)
        words_before = torch.repeat_interleave(torch.cumsum(words, 0) - words, torch.tensor(n_pieces))
        return (torch.tensor(ids, dtype=torch.long), row_lengths, torch.tensor(source, dtype=torch.long),
                torch.tensor(word_index, dtype=torch.long) + words_before)
