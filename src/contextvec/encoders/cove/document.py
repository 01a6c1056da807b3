"""CoVe's layers for a whole document, read as one sequence by the MT-LSTM.

What sentence k's vectors depend on:

- The document is one sequence: its sentences' tokens concatenated in order (CoVe has no
  sentence boundary tokens). Each bidirectional layer reads it whole, its forward direction left
  to right and its backward direction right to left, each carrying its state ``(h, c)`` across
  sentence boundaries from the zero state at the document's first (forward) or last (backward)
  token. Layer l + 1 reads ``[forward_l; backward_l]`` at every token, so the pass goes layer by
  layer: layer l over the whole document in both directions, then layer l + 1 over its outputs.
- So sentence k's context vectors (layers 1..L) depend on every token of the document; its layer
  0 (``[word vector; 0]``) on the word alone. An empty sentence yields ``(num_layers, 0, dim)``,
  and changes nothing else.
- The result is deterministic and the same bit for bit in float32 for any ``pass_tokens``, on
  its own (other documents and earlier calls do not enter): every LSTM call has one shape, a
  block of :data:`BLOCK` steps at batch 1 (the last block of each direction padded with zeros
  after its real steps, whose outputs are dropped), each block starting from the state the
  previous one ended in. A direction's blocks are laid from the token it starts at (the first
  token forward, the last one backward), whatever the passes.
- It equals the MT-LSTM run on the concatenated document as one sentence
  (``CoveEncoder.forward``) up to float rounding: the same sums in another order.

Memory: ``pass_tokens`` (rounded up to a multiple of :data:`BLOCK`) tokens are held per pass. A
document that fits one pass stays in memory; a longer one writes each layer's outputs to a
temporary file (plain writes: its pages are the page cache's, not the process's), the next layer
reads its inputs back pass by pass, and each sentence is put together at the end from its rows.
Beyond the document itself and one offset per sentence, memory does not grow with its length
(a sentence longer than a pass is held whole when it is yielded). The files are closed when the
generator finishes, fails or is closed early.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import IO

import numpy as np
import torch
from torch import nn

from contextvec.encoders.base import check_pass_tokens
from contextvec.encoders.cove.mt_lstm import MTLSTM
from contextvec.text.tokenize import as_sentences

BLOCK = 64
"""Steps per LSTM call: the one shape every call has, so no result depends on ``pass_tokens``."""

_LSTM_WEIGHTS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


def document_layers(mt_lstm: MTLSTM, sentences: Sequence[Sequence[str]],
                    pass_tokens: int = 4096) -> Iterator[np.ndarray]:
    """Each sentence's CoVe layers with the whole document as context (see the module docstring).

    Args:
        mt_lstm: the encoder's MT-LSTM.
        sentences: the document's sentences, in order: token lists or strings (empty ones allowed).
        pass_tokens: tokens per pass, rounded up to a multiple of :data:`BLOCK`.

    Returns:
        An iterator of each sentence's float32 ``(num_layers + 1, tokens, input_dim + 2 * hidden)``
        array, ``[word vector; context vector]`` per layer as ``CoveEncoder.forward`` gives them.

    Raises:
        TypeError: a bare string for the document (a sentence that is a string is split on
            whitespace, as ``embed`` splits it).
        ValueError: ``pass_tokens`` below 1.
    """
    sentences = as_sentences(sentences, "a document")
    check_pass_tokens(pass_tokens)
    return _document_layers(mt_lstm, sentences, -(-pass_tokens // BLOCK) * BLOCK)


def _document_layers(mt_lstm: MTLSTM, sentences: Sequence[Sequence[str]],
                     pass_tokens: int) -> Iterator[np.ndarray]:
    offsets = np.cumsum([0, *(len(s) for s in sentences)])
    tokens = int(offsets[-1])
    hidden = mt_lstm.config.hidden_size
    width = mt_lstm.config.input_dim + mt_lstm.config.output_dim
    with ExitStack() as files:  # a generator's finally: closed early, it still closes them
        with torch.inference_mode():  # not held across a yield: the caller's mode is its own
            words = _Words(mt_lstm, sentences, offsets)
            stores: list[_Rows] = []
            read: Callable[[int, int], torch.Tensor] = words.vectors
            for layer in mt_lstm.layers:
                file = files.enter_context(tempfile.TemporaryFile()) if tokens > pass_tokens else None
                store = _Rows(tokens, hidden, file)
                _run_layer(layer, read, store, tokens, pass_tokens)
                stores.append(store)
                read = store.read_tensor(words.device)
        for start, stop in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
            out = np.zeros((len(stores) + 1, stop - start, width), dtype=np.float32)
            with torch.inference_mode():
                out[:, :, : -2 * hidden] = words.vectors(start, stop).float().cpu().numpy()
            for layer, store in enumerate(stores, start=1):
                out[layer, :, -2 * hidden :] = store.read(start, stop)
            yield out


class _Words:
    """The word vectors of any range of the document's tokens, looked up when asked for."""

    def __init__(self, mt_lstm: MTLSTM, sentences: Sequence[Sequence[str]], offsets: np.ndarray) -> None:
        self.mt_lstm, self.sentences, self.offsets = mt_lstm, sentences, offsets
        self.device = mt_lstm.word_vectors.device

    def vectors(self, start: int, stop: int) -> torch.Tensor:
        """``(stop - start, input_dim)`` word vectors of tokens ``start..stop`` of the document."""
        ids: list[int] = []
        k = int(np.searchsorted(self.offsets, start, side="right")) - 1
        while len(ids) < stop - start:
            first = int(self.offsets[k])
            ids.extend(self.mt_lstm.token_ids(self.sentences[k][max(start - first, 0) : stop - first]))
            k += 1
        ids_tensor = torch.tensor(ids, dtype=torch.long, device=self.device)
        return self.mt_lstm.embed_ids(ids_tensor)


class _Rows:
    """One layer's outputs, stored direction by direction, ``(2, tokens, hidden)`` float32, so a
    direction's rows of one pass are one contiguous write: in memory, or in ``file``."""

    def __init__(self, tokens: int, hidden: int, file: IO[bytes] | None) -> None:
        self.tokens, self.hidden, self.file = tokens, hidden, file
        self.memory = np.empty((2, tokens, hidden), np.float32) if file is None else None

    def _offset(self, direction: int, row: int) -> int:
        return (direction * self.tokens + row) * self.hidden * 4

    def write(self, direction: int, start: int, rows: np.ndarray) -> None:
        """Store ``rows (n, hidden)`` of ``direction`` (0 forward, 1 backward) from token ``start``."""
        if self.memory is not None:
            self.memory[direction, start : start + len(rows)] = rows
            return
        self.file.seek(self._offset(direction, start))
        self.file.write(np.ascontiguousarray(rows, np.float32).view(np.uint8).reshape(-1))

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``start..stop``: ``(stop - start, 2 * hidden)``, forward half first."""
        if self.memory is not None:
            return np.concatenate([self.memory[0, start:stop], self.memory[1, start:stop]], axis=1)
        halves = []
        for direction in (0, 1):
            half = np.empty((stop - start, self.hidden), np.float32)
            self.file.seek(self._offset(direction, start))
            if self.file.readinto(half.view(np.uint8).reshape(-1)) != half.nbytes:
                raise OSError("a layer's temporary file ended early (was it truncated?)")
            halves.append(half)
        return np.concatenate(halves, axis=1)

    def read_tensor(self, device: torch.device) -> Callable[[int, int], torch.Tensor]:
        """:meth:`read` as the next layer's input."""
        return lambda start, stop: torch.from_numpy(self.read(start, stop)).to(device)


def _run_layer(layer: nn.LSTM, read: Callable[[int, int], torch.Tensor], store: _Rows,
               tokens: int, pass_tokens: int) -> None:
    """Both directions of one bidirectional layer over the whole document, pass by pass: forward
    passes from the first token, backward passes from the last, so that each direction's blocks
    start where it starts (passes are whole blocks, the last one of each direction excepted)."""
    for direction, reverse in enumerate((False, True)):
        lstm = _direction(layer, reverse)
        state = None
        for pass_ in range(-(-tokens // pass_tokens)):
            if reverse:
                start, stop = max(tokens - (pass_ + 1) * pass_tokens, 0), tokens - pass_ * pass_tokens
            else:
                start, stop = pass_ * pass_tokens, min((pass_ + 1) * pass_tokens, tokens)
            inputs = read(start, stop).to(layer.weight_ih_l0.dtype)
            outputs, state = _run_blocks(lstm, inputs.flip(0) if reverse else inputs, state)
            store.write(direction, start, (outputs.flip(0) if reverse else outputs).float().cpu().numpy())


def _direction(layer: nn.LSTM, reverse: bool) -> nn.LSTM:
    """One direction of a one-layer bidirectional ``layer`` as a unidirectional ``nn.LSTM``
    holding the same parameters (no copy), in eval mode: the kernel's inference path, whatever
    mode the encoder is in (the pass has no dropout)."""
    view = nn.LSTM(layer.input_size, layer.hidden_size, batch_first=True, device="meta").eval()
    for name in _LSTM_WEIGHTS:
        setattr(view, name, getattr(layer, name + ("_reverse" if reverse else "")))
    return view


def _run_blocks(lstm: nn.LSTM, inputs: torch.Tensor,
                state: tuple[torch.Tensor, torch.Tensor] | None,
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """``inputs (steps, in)`` in reading order through ``lstm`` from ``state`` (zeros if None), in
    blocks of :data:`BLOCK` steps (the last one padded with zeros): ``(steps, hidden)`` outputs
    and the state after the last block."""
    steps = len(inputs)
    blocks = inputs.new_zeros(-(-steps // BLOCK), BLOCK, inputs.shape[1])
    blocks.view(-1, inputs.shape[1])[:steps] = inputs
    outputs = []
    for block in blocks:
        out, state = lstm(block.unsqueeze(0), state)
        outputs.append(out[0])
    return torch.cat(outputs)[:steps], state
