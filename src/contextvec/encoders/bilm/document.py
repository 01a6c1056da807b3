"""A whole document through a biLM (ELMo, ELMoForManyLangs), its LSTM states carried from
sentence to sentence.

The document is its sentences in order. Each non-empty sentence is wrapped in its own sentence
boundaries (``<S>`` ... ``</S>``; ELMoForManyLangs' ``<bos>`` ... ``<eos>``), as the model was
trained, and the document is one sequence ``<S> s1 </S> <S> s2 </S> ...``. The forward LM reads
it left to right and the backward LM right to left, each carrying the state (``h`` and ``c`` of
every layer) across sentence boundaries. So the forward half of sentence k's biLSTM layers
depends on sentences 1..k, their backward half on sentences k..n, and layer 0 (the token vector
``[x; x]``) on the token alone. The boundaries' rows are not in the output. An empty sentence
gives ``(num_layers, 0, dim)`` and adds nothing to the sequence.

The vectors are the same bit for bit in float32 whatever ``pass_tokens``, the other documents
or the calls before: every product has the same shape wherever it falls. The LSTM layers run in
blocks of ``BLOCK`` steps, both directions in one call of shape ``(2, 1, BLOCK, dim)``:
direction 0 holds block k of the sequence, direction 1 block k of the reversed sequence (the
backward LM); each layer's state goes from one block to the next, and the last block is padded
with zero vectors whose outputs are dropped. The token vectors of the document's distinct tokens
run through the token encoder in blocks of exactly ``TOKEN_BLOCK`` tokens (the last one padded
with repeats), not through the encoder's token cache, whose batches have any shape. In bf16 and
int8 the same holds within one precision.

Memory: ``pass_tokens`` is rounded up to a multiple of ``BLOCK``. A sequence that fits one pass
is computed in memory. A longer one spills each pass's outputs (each layer's forward rows in
sequence order, its backward rows in reversed order) to a temporary file with plain writes (not
a memory map, whose pages would count in the process's memory), and every sentence is read back
from it once all passes ran. The file is deleted once the last sentence has been taken, or when
the caller stops early (closes or drops the iterator). Memory is then bounded by ``pass_tokens``
and the document's distinct tokens (and a few integers per token, less than the token lists
themselves), not by the document's length.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO, NamedTuple

import numpy as np
import torch
from torch import nn

from contextvec.encoders.base import check_pass_tokens, evaluating
from contextvec.text.tokenize import Sentence, as_sentences

BLOCK = 64
"""LSTM steps per layer call."""
TOKEN_BLOCK = 256
"""Distinct tokens per token encoder call."""

TokenVectors = Callable[[list[str]], torch.Tensor]
"""Context-free vectors ``(len(words), dim)`` of distinct tokens (the encoder's token layer)."""
Rows = Callable[[int, int, int, int], np.ndarray]
"""``rows(layer, direction, start, stop)``: the outputs ``(stop - start, projection_dim)`` of the
biLSTM ``layer`` (from 0) in ``direction`` (0: forward, rows in sequence order; 1: backward, rows
in reversed order)."""


class _Layout(NamedTuple):
    """Where each sentence lies in the document's one sequence."""

    words: list[str]
    """The distinct tokens, in order of first use."""
    ids: np.ndarray
    """``(steps,)`` int32 row of each step in the table ``[words; <S>; </S>; zeros]``."""
    starts: np.ndarray
    """``(sentences,)`` the step of each sentence's first token (meaningless for an empty one)."""
    lengths: np.ndarray
    """``(sentences,)`` tokens per sentence."""


def embed_document(
    encoder: nn.Module, token_vectors: TokenVectors, skip_connections: bool,
    sentences: Sequence[Sentence], pass_tokens: int,
) -> Iterator[np.ndarray]:
    """One document's sentences with document context (see the module's docstring).

    Args:
        encoder: a :class:`~contextvec.encoders.bilm.encoder.TokenVectorEncoder` (its ``bilm``
            gives ``layers``, ``boundary_vectors()`` and ``config``).
        token_vectors: its token layer.
        skip_connections: whether each biLSTM layer after the first adds its input to its output.
        sentences: the document's strings or token lists, in order (empty ones allowed).
        pass_tokens: steps per pass (rounded up to a multiple of ``BLOCK``).

    Returns:
        An iterator of each sentence's float32 ``(num_layers, tokens, 2 * projection_dim)``
        array, in document order.

    Raises:
        TypeError: a bare string instead of a list of sentences.
        ValueError: ``pass_tokens`` not a positive integer.
    """
    tokenized = as_sentences(sentences, "a document")
    check_pass_tokens(pass_tokens)
    pass_steps = -(-pass_tokens // BLOCK) * BLOCK
    return _sentences(encoder, token_vectors, skip_connections, tokenized, pass_steps)


def _sentences(
    encoder: nn.Module, token_vectors: TokenVectors, skip_connections: bool,
    sentences: list[list[str]], pass_steps: int,
) -> Iterator[np.ndarray]:
    layout = _layout(sentences)
    steps = len(layout.ids)
    if not steps:  # no tokens: no model to run
        for _ in sentences:
            yield np.zeros((encoder.num_layers, 0, encoder.output_dim), dtype=np.float32)
        return
    padded = -(-steps // BLOCK) * BLOCK
    if padded <= pass_steps:
        with evaluating(encoder):
            table = _table(encoder, token_vectors, layout.words)
            [(_, outputs)] = _passes(encoder, table, layout.ids, skip_connections, pass_steps)
            tokens = table.float().cpu().numpy()
        yield from _assemble(layout, tokens, len(outputs),
                             lambda layer, direction, start, stop: outputs[layer, direction, start:stop])
        return
    width = encoder.bilm.layers[0].projection_dim
    with tempfile.TemporaryFile() as file:
        with evaluating(encoder):
            table = _table(encoder, token_vectors, layout.words)
            for first, block in _passes(encoder, table, layout.ids, skip_connections, pass_steps):
                _write(file, block, first, padded)
            tokens = table.float().cpu().numpy()
        yield from _assemble(layout, tokens, len(encoder.bilm.layers),
                             lambda *where: _read(file, padded, width, *where))


def _layout(sentences: list[list[str]]) -> _Layout:
    vocab: dict[str, int] = {}
    lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
    token_ids = np.fromiter((vocab.setdefault(t, len(vocab)) for s in sentences for t in s),
                            dtype=np.int32, count=int(lengths.sum()))
    words = list(vocab)
    bos, eos = len(words), len(words) + 1
    # Each non-empty sentence takes its tokens and two boundaries.
    spans = lengths + 2 * (lengths > 0)
    starts = np.cumsum(spans) - spans + 1
    ids = np.empty(int(spans.sum()), dtype=np.int32)
    real = lengths > 0
    ids[starts[real] - 1] = bos
    ids[starts[real] + lengths[real]] = eos
    token_offsets = np.cumsum(lengths) - lengths
    ids[np.repeat(starts - token_offsets, lengths) + np.arange(len(token_ids))] = token_ids
    return _Layout(words, ids, starts, lengths)


def _table(encoder: nn.Module, token_vectors: TokenVectors, words: list[str]) -> torch.Tensor:
    """``(len(words) + 3, dim)``: the token vectors of ``words``, ``<S>``, ``</S>`` and a zero
    row (padding), in the token encoder's dtype, filled block by block (no second copy)."""
    boundaries = encoder.bilm.boundary_vectors()
    table = boundaries.new_zeros(len(words) + 3, boundaries.shape[1])
    for start in range(0, len(words), TOKEN_BLOCK):
        block = words[start : start + TOKEN_BLOCK]
        vectors = token_vectors(block + [block[-1]] * (TOKEN_BLOCK - len(block)))
        table[start : start + len(block)] = vectors[: len(block)]
    table[len(words) : len(words) + 2] = boundaries
    return table


def _passes(
    encoder: nn.Module, table: torch.Tensor, ids: np.ndarray, skip_connections: bool, pass_steps: int,
) -> Iterator[tuple[int, np.ndarray]]:
    """Each pass's first step and its outputs ``(layers, 2, steps, projection_dim)`` float32:
    direction 0 the forward LM's rows of those steps of the sequence, direction 1 the backward
    LM's of those steps of the reversed sequence. Every pass writes into one buffer, so a pass's
    array is valid until the next one is asked for."""
    layers = encoder.bilm.layers
    steps = len(ids)
    padded = -(-steps // BLOCK) * BLOCK
    both = np.full((2, padded), len(table) - 1, dtype=np.int32)
    both[0, :steps] = ids
    both[1, :steps] = ids[::-1]
    both = torch.from_numpy(both).to(table.device)
    lengths = torch.tensor([BLOCK], device=table.device)
    states: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(layers)
    buffer = torch.empty(len(layers), 2, min(pass_steps, padded), layers[0].projection_dim,
                         dtype=torch.float32)
    for first in range(0, padded, pass_steps):
        stop = min(first + pass_steps, padded)
        out = buffer[:, :, : stop - first]
        for block in range(first, stop, BLOCK):
            x = table[both[:, block : block + BLOCK]].unsqueeze(1)  # (2, 1, BLOCK, dim)
            for index, layer in enumerate(layers):
                y, states[index] = layer(x, lengths, state=states[index])
                if index > 0 and skip_connections:
                    y = y + x
                x = y
                out[index, :, block - first : block - first + BLOCK] = y[:, 0]
        yield first, out.numpy()


def _offset(padded: int, layer: int, direction: int, row: int, width: int) -> int:
    """Where a row lies in the spill file: one region of ``padded`` rows per layer and direction."""
    return ((2 * layer + direction) * padded + row) * width * 4


def _write(file: BinaryIO, block: np.ndarray, first: int, padded: int) -> None:
    for layer in range(block.shape[0]):
        for direction in range(2):
            file.seek(_offset(padded, layer, direction, first, block.shape[3]))
            file.write(np.ascontiguousarray(block[layer, direction]).data)


def _read(file: BinaryIO, padded: int, width: int, layer: int, direction: int, start: int,
          stop: int) -> np.ndarray:
    rows = np.empty((stop - start, width), dtype=np.float32)
    file.seek(_offset(padded, layer, direction, start, width))
    read = file.readinto(memoryview(rows).cast("B"))
    if read != rows.nbytes:  # never expected: rows never written would be garbage
        raise OSError(f"the document's temporary file gave {read} of {rows.nbytes} bytes")
    return rows


def _assemble(layout: _Layout, tokens: np.ndarray, n_layers: int, rows: Rows) -> Iterator[np.ndarray]:
    """Each sentence's layers from the float32 token table ``tokens`` (``_table``'s) and the
    outputs ``rows`` of ``n_layers`` biLSTM layers."""
    width = tokens.shape[1]
    steps = len(layout.ids)
    for start, length in zip(layout.starts.tolist(), layout.lengths.tolist(), strict=True):
        out = np.empty((n_layers + 1, length, 2 * width), dtype=np.float32)
        x = tokens[layout.ids[start : start + length]]
        out[0, :, :width] = x
        out[0, :, width:] = x
        back = steps - start - length  # the sentence's first row in the reversed sequence
        for layer in range(n_layers if length else 0):
            out[layer + 1, :, :width] = rows(layer, 0, start, start + length)
            out[layer + 1, :, width:] = rows(layer, 1, back, back + length)[::-1]
        yield out
