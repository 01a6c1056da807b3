"""BERT behind contextvec's common :class:`~contextvec.encoders.base.Encoder` interface.

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
  each side except at the sentence's ends. See :func:`window_spans`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from contextvec.encoders.base import Encoder, EncoderOutput
from contextvec.encoders.bert.model import BertModel
from contextvec.encoders.bert.tokenizer import WordPieceTokenizer

SUBWORD_POOLING = ("first", "mean")


def window_spans(n_pieces: int, window: int) -> list[tuple[int, int, int, int]]:
    """How ``n_pieces`` pieces run in windows of at most ``window`` pieces.

    Returns ``(start, end, keep_start, keep_end)`` per window: the window runs pieces
    ``start:end`` and supplies the vectors of pieces ``keep_start:keep_end``, those for which
    its centre ``start + (window - 1) / 2`` is the nearest (ties: the earlier window). The
    kept ranges tile ``0:n_pieces`` in order. Windows start every ``max(window // 2, 1)``
    pieces; the last one is moved back to end at ``n_pieces``.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, not {window}")
    if n_pieces <= window:
        return [(0, n_pieces, 0, n_pieces)]
    stride = max(window // 2, 1)
    starts = [*range(0, n_pieces - window, stride), n_pieces - window]
    spans = []
    keep_start = 0
    for start, following in zip(starts, [*starts[1:], None], strict=True):
        # Up to the midpoint of this centre and the next one; a piece exactly there stays here.
        keep_end = n_pieces if following is None else (start + following + window - 1) // 2 + 1
        spans.append((start, start + window, keep_start, keep_end))
        keep_start = keep_end
    return spans


class BertEncoder(Encoder):
    """Token lists -> BERT's ``num_hidden_layers + 1`` hidden states per word (see the module
    docstring for pooling and windows).

    The model runs on at most ``max_pieces_per_call`` padded pieces at a time (at least one
    window), so a very long sentence does not hold all its windows' activations at once.
    """

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
        device = self.model.embeddings.word_embeddings.weight.device
        lengths = [len(s) for s in sentences]
        width = max(lengths, default=0)
        mask = torch.arange(width).view(1, -1) < torch.tensor(lengths, dtype=torch.long).view(-1, 1)
        out = self.model.embeddings.word_embeddings.weight.new_zeros(
            self.num_layers, len(sentences), width, self.output_dim
        )
        if width == 0:
            return EncoderOutput(out, mask.to(device))

        rows: list[list[int]] = []           # model inputs: [CLS] window [SEP]
        gather_row: list[int] = []           # for every piece of every sentence: its row ...
        gather_pos: list[int] = []           # ... and its position in that row
        word_of_piece: list[int] = []        # index among all words of the batch
        words_before = 0
        for pieces, n_words in zip(self.tokenizer.encode_batch(sentences), lengths, strict=True):
            content, words = pieces.ids[1:-1], pieces.word_index[1:-1]
            for start, end, keep_start, keep_end in window_spans(len(content), self.window):
                if keep_end > keep_start:
                    row = len(rows)
                    rows.append([self.tokenizer.cls_id, *content[start:end], self.tokenizer.sep_id])
                    gather_row.extend([row] * (keep_end - keep_start))
                    gather_pos.extend(range(keep_start - start + 1, keep_end - start + 1))
            word_of_piece.extend(words_before + w for w in words)
            words_before += n_words

        longest = max(len(r) for r in rows)
        ids = torch.full((len(rows), longest), self.config.pad_token_id, dtype=torch.long)
        attention = torch.zeros(len(rows), longest, dtype=torch.bool)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            attention[i, : len(row)] = True
        # Rows run in groups of at most max_pieces_per_call padded pieces (a long sentence has
        # many windows); rows ascend along the pieces, so each group supplies a contiguous run.
        rows_of = torch.tensor(gather_row, dtype=torch.long)
        positions = torch.tensor(gather_pos, dtype=torch.long)
        step = max(1, self.max_pieces_per_call // longest)
        parts = []
        for first in range(0, len(rows), step):
            hidden_states, _ = self.model(ids[first:first + step].to(device),
                                          attention[first:first + step].to(device))
            hidden = torch.stack(hidden_states)                               # (layers, rows, T, H)
            lo, hi = torch.searchsorted(rows_of, torch.tensor([first, first + step])).tolist()
            parts.append(hidden[:, (rows_of[lo:hi] - first).to(device), positions[lo:hi].to(device)])
        piece_vectors = torch.cat(parts, dim=1)                               # (layers, pieces, H)

        word_index = torch.tensor(word_of_piece, device=device)
        if self.subword_pooling == "first":
            is_first = torch.ones_like(word_index, dtype=torch.bool)
            is_first[1:] = word_index[1:] != word_index[:-1]
            word_vectors = piece_vectors[:, is_first]
        else:
            sums = piece_vectors.new_zeros(self.num_layers, words_before, self.output_dim)
            sums = sums.index_add(1, word_index, piece_vectors)
            counts = torch.bincount(word_index, minlength=words_before).to(sums.dtype)
            word_vectors = sums / counts[None, :, None]
        mask = mask.to(device)
        out[:, mask] = word_vectors
        return EncoderOutput(out, mask)
