"""BERT pretraining data: WordPiece vocabularies, sentence-pair instances, masking, batches.

Corpora are document-structured text: one paragraph (or sentence) per line, a blank line (or
the end of a file) between documents, plain or gzipped, as the shared Gutenberg and Wikipedia
corpora are. Each line is split into sentences (``split_sentences``, unless told that lines
already are segments) and each sentence into WordPiece ids; a sentence longer than a whole
instance is cut into instance-sized pieces.

Instances follow Google BERT's ``create_pretraining_data.py``, streamed:

- segments of one document are gathered until a target length (``max_seq_length - 3``, or
  with probability ``short_seq_prob`` a random length from 2, drawn per instance rather than per
  document: the Gutenberg documents are whole books);
- A is the first 1..n-1 of those segments. With probability 0.5, B is the rest ("IsNext",
  label 0), else B is a random stretch of another document ("NotNext", label 1) and the
  unused segments go back to be read again. A one-segment chunk that drew IsNext takes the
  document's next segment as its B, and is NotNext only at the document's end (BERT makes every
  one-segment chunk NotNext, which tilts the label balance where sentences are long);
- the longer of A and B loses a piece at its front or back (at random) until
  ``[CLS] A [SEP] B [SEP]`` fits ``max_seq_length``; token types are 0 up to the first
  [SEP], then 1.

Random B segments come from a bounded reservoir (Algorithm R) of runs of consecutive segments,
``max_seq_length - 3`` pieces each, sampled uniformly from the corpus read so far by a second
reader that runs a document ahead (see :class:`PretrainingStream`), so memory does not grow
with the corpus and the first document gets NotNext pairs too.

Masking is Google's: ``masked_lm_prob`` of the non-special pieces (stochastically rounded per
instance, at least one) are predicted; of those, 80% become [MASK], 10% a random non-special
piece, 10% stay. With whole-word masking, a word's pieces (a piece and the ``##`` pieces that
follow it) are chosen together.

Everything random comes from one seeded ``random.Random``; its state, the corpus position and the
pending segments and reservoir are :meth:`PretrainingStream.state`, stored in checkpoints, so a
resumed run reads exactly what an uninterrupted one would have.
"""

from __future__ import annotations

import os
import random
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.io.text_lines import open_text
from contextvec.text.tokenize import split_sentences
from contextvec.training.bert.instances import IS_NEXT, NOT_NEXT, Instance, InstanceSettings, Masker


class _Lines:
    """Lines of the corpus files with their position; ``""`` at the end of each file (a document
    boundary), None at the end of the data (never, when ``loop``)."""

    def __init__(self, paths: Sequence[Path], loop: bool, epoch: int = 0, file: int = 0,
                 line: int = 0) -> None:
        self.paths, self.loop = list(paths), loop
        self.epoch, self.file, self.line = epoch, file, line
        self._handle: IO[str] | None = None

    def position(self) -> dict[str, int]:
        return {"epoch": self.epoch, "file": self.file, "line": self.line}

    def __call__(self) -> str | None:
        while True:
            if self.file >= len(self.paths):
                if not self.loop:
                    return None
                self.epoch, self.file, self.line = self.epoch + 1, 0, 0
            if self._handle is None:
                self._handle = open_text(self.paths[self.file], errors="replace")
                for _ in range(self.line):  # resuming: skip what was read
                    self._handle.readline()
            text = self._handle.readline()
            if text:
                self.line += 1
                return text
            self._handle.close()
            self._handle = None
            self.file, self.line = self.file + 1, 0
            return ""

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class _Documents:
    """The corpus as ``(epoch, document, segment)``: documents are numbered from 0 in each pass
    (the same text has the same number in every epoch); blank lines before any text are skipped."""

    def __init__(self, paths: Sequence[Path], loop: bool, segment: Callable[[str], list[list[int]]],
                 state: dict[str, Any] | None = None) -> None:
        state = state or {"position": {}, "doc": 0, "has_text": False, "buffer": []}
        self.lines = _Lines(paths, loop, **state["position"])
        self.segment = segment
        self.doc, self.has_text = state["doc"], state["has_text"]
        self.buffer: deque[list[int]] = deque(list(s) for s in state["buffer"])  # the line's rest

    def state(self) -> dict[str, Any]:
        return {"position": self.lines.position(), "doc": self.doc, "has_text": self.has_text,
                "buffer": [list(s) for s in self.buffer]}

    @property
    def epoch(self) -> int:
        return self.lines.epoch

    def __call__(self) -> tuple[int, int, list[int]] | None:
        while not self.buffer:
            epoch = self.lines.epoch
            line = self.lines()
            if line is None:
                return None
            if self.lines.epoch != epoch:
                self.doc, self.has_text = 0, False
            if not line.strip():
                if self.has_text:
                    self.doc, self.has_text = self.doc + 1, False
                continue
            segments = self.segment(line)
            self.has_text = self.has_text or bool(segments)
            self.buffer.extend(segments)
        return self.lines.epoch, self.doc, self.buffer.popleft()

    def close(self) -> None:
        self.lines.close()


class PretrainingStream:
    """Masked sentence-pair :class:`Instance` s from a document-structured corpus (module docstring),
    made as ``settings`` say (None: the defaults of :class:`InstanceSettings`).

    ``loop=True`` starts over at the end of the files (epochs) and never ends; else one pass.
    ``state`` continues from :meth:`state`.

    The reservoir is fed by a second reader of the same corpus that runs ahead of the one that
    makes the pairs: it starts by reading the first document and the start of the second, then
    reads one segment for every new segment the pair reader takes. So there is another document
    to draw from from the first pair on, which a reservoir of what the pair reader has passed
    would lack (the first document, a whole book in the Gutenberg corpus, would give IsNext
    pairs only). Every line is tokenized twice for this; pairs cost far more to train on.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike],
        tokenizer: WordPieceTokenizer,
        settings: InstanceSettings | None = None,
        loop: bool = True,
        state: dict[str, Any] | None = None,
    ) -> None:
        settings = settings or InstanceSettings()
        self.paths = [Path(p) for p in paths]
        self.tokenizer = tokenizer
        self.max_tokens = settings.max_seq_length - 3
        self.short_seq_prob = settings.short_seq_prob
        self.sentences = settings.sentences
        self.pool_size = settings.pool_size
        self.masker = Masker.for_tokenizer(tokenizer, settings.masked_lm_prob, settings.whole_word_mask)
        self.rng = random.Random(settings.seed)
        self.produced = 0
        self.doc_key: tuple[int, int] | None = None  # (epoch, document) that pairs come from
        self.pending: deque[list[int]] = deque()  # its segments read but not used (put back)
        self.pool: list[tuple[int, list[list[int]]]] = []  # (document, run of segments)
        self.pool_docs: Counter[int] = Counter()  # runs in the pool per document
        self.runs_seen = 0
        self.run_doc: int | None = None  # the feeder's run being gathered, and its document
        self.run: list[list[int]] = []
        s = state or {}
        self.reader = _Documents(self.paths, loop, self._segments, s.get("reader"))
        self.feeder = _Documents(self.paths, loop, self._segments, s.get("feeder"))
        self.feeder_done = False
        self.peeked: tuple[int, int, list[int]] | None = None
        if state is None:
            self.peeked = self.reader()
            self._prime()
        else:
            self.rng.setstate(_as_rng_state(state["rng"]))
            self.produced = state["produced"]
            self.doc_key = None if state["doc_key"] is None else tuple(state["doc_key"])
            self.pending = deque(list(x) for x in state["pending"])
            self.pool = [(int(d), [list(x) for x in run]) for d, run in state["pool"]]
            self.runs_seen, self.run_doc = state["runs_seen"], state["run_doc"]
            self.run = [list(x) for x in state["run"]]
            self.feeder_done = state["feeder_done"]
            peeked = state["peeked"]
            self.peeked = None if peeked is None else (peeked[0], peeked[1], list(peeked[2]))
            self.pool_docs = Counter(d for d, _ in self.pool)

    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly here (plain Python values, for checkpoints)."""
        peeked = None if self.peeked is None else [self.peeked[0], self.peeked[1], list(self.peeked[2])]
        return {
            "reader": self.reader.state(), "feeder": self.feeder.state(), "rng": self.rng.getstate(),
            "produced": self.produced, "doc_key": None if self.doc_key is None else list(self.doc_key),
            "pending": [list(x) for x in self.pending], "peeked": peeked,
            "pool": [[d, [list(x) for x in run]] for d, run in self.pool],
            "runs_seen": self.runs_seen, "run_doc": self.run_doc, "run": [list(x) for x in self.run],
            "feeder_done": self.feeder_done,
        }

    @property
    def epoch(self) -> int:
        """Passes over the corpus completed by the pair reader."""
        return self.reader.epoch

    def close(self) -> None:
        self.reader.close()
        self.feeder.close()

    # ------------------------------------------------------------------ reading
    def _segments(self, line: str) -> list[list[int]]:
        texts = split_sentences(line) if self.sentences else [line.strip()]
        out = []
        for text in texts:
            ids = self.tokenizer.tokenizer.encode(text, add_special_tokens=False).ids
            out.extend(ids[i: i + self.max_tokens] for i in range(0, len(ids), self.max_tokens))
        return out

    def _next_segment(self) -> list[int] | None:
        """The current document's next segment, or None at its end."""
        if self.pending:
            return self.pending.popleft()
        if self.peeked is None or self.peeked[:2] != self.doc_key:
            return None
        segment = self.peeked[2]
        self.peeked = self.reader()
        self._feed()
        return segment

    # ------------------------------------------------------------------ the reservoir
    def _prime(self) -> None:
        """Feed the reservoir the first document and the first run of the next one."""
        start = self.feeder.epoch
        while not self.feeder_done and len(self.pool_docs) < 2 and self.feeder.epoch == start:
            self._feed()

    def _feed(self) -> None:
        """Read one segment into the run being gathered; a full run or a document's end goes into
        the reservoir (Algorithm R: a uniform sample of all runs read)."""
        if self.feeder_done:
            return
        item = self.feeder()
        if item is None:
            self.feeder_done = True
            self._flush_run()
            return
        _, document, segment = item
        if document != self.run_doc:
            self._flush_run()
            self.run_doc = document
        self.run.append(segment)
        if sum(map(len, self.run)) >= self.max_tokens:
            self._flush_run()

    def _flush_run(self) -> None:
        if not self.run:
            return
        self.runs_seen += 1
        assert self.run_doc is not None
        entry = (self.run_doc, self.run)
        self.run = []
        if len(self.pool) < self.pool_size:
            self.pool.append(entry)
        else:
            slot = self.rng.randrange(self.runs_seen)
            if slot >= self.pool_size:
                return
            self.pool_docs[self.pool[slot][0]] -= 1
            if not self.pool_docs[self.pool[slot][0]]:
                del self.pool_docs[self.pool[slot][0]]
            self.pool[slot] = entry
        self.pool_docs[entry[0]] += 1

    def _random_b(self, target: int) -> list[int]:
        """A stretch of about ``target`` pieces from a random run of another document."""
        assert self.doc_key is not None
        for _ in range(20):
            document, run = self.pool[self.rng.randrange(len(self.pool))]
            if document != self.doc_key[1]:
                break
        else:  # the current document fills most of the pool: choose among the others directly
            others = [run for document, run in self.pool if document != self.doc_key[1]]
            run = others[self.rng.randrange(len(others))]
        b: list[int] = []
        for segment in run[self.rng.randrange(len(run)):]:
            b.extend(segment)
            if len(b) >= target:
                break
        return b

    def _truncate(self, a: list[int], b: list[int]) -> None:
        while len(a) + len(b) > self.max_tokens:
            longer = a if len(a) > len(b) else b
            if self.rng.random() < 0.5:
                del longer[0]
            else:
                longer.pop()

    # ------------------------------------------------------------------ instances
    def _pair(self, chunk: list[list[int]], target: int) -> Instance | None:
        assert self.doc_key is not None
        random_next = self.rng.random() < 0.5
        others = len(self.pool) > self.pool_docs[self.doc_key[1]]
        random_next = random_next and others
        if not random_next and len(chunk) == 1:
            segment = self._next_segment()
            if segment is not None:
                chunk.append(segment)
            elif others:
                random_next = True
            else:
                return None  # a one-segment document, and no other document to pair it with
        a_end = 1 if len(chunk) < 2 else self.rng.randint(1, len(chunk) - 1)
        a = [piece for segment in chunk[:a_end] for piece in segment]
        if random_next:
            b = self._random_b(max(1, target - len(a)))
            self.pending.extendleft(reversed(chunk[a_end:]))  # read again for the next instance
        else:
            b = [piece for segment in chunk[a_end:] for piece in segment]
        self._truncate(a, b)
        cls_id, sep_id = self.tokenizer.cls_id, self.tokenizer.sep_id
        ids = [cls_id, *a, sep_id, *b, sep_id]
        inputs, labels = self.masker(ids, self.rng)
        self.produced += 1
        return Instance(inputs, [0] * (len(a) + 2) + [1] * (len(b) + 1), labels,
                        NOT_NEXT if random_next else IS_NEXT)

    def __iter__(self) -> Iterator[Instance]:
        return self

    def __next__(self) -> Instance:
        start_epoch = self.reader.epoch
        while True:
            if self.reader.epoch > start_epoch + 1:  # a whole pass gave nothing
                raise ValueError(f"no sentence pairs in {', '.join(map(str, self.paths))}")
            target = self.max_tokens
            if self.rng.random() < self.short_seq_prob:
                target = self.rng.randint(2, self.max_tokens)
            chunk: list[list[int]] = []
            length = 0
            while length < target:
                segment = self._next_segment()
                if segment is None:
                    break
                chunk.append(segment)
                length += len(segment)
            if not chunk:  # the document is used up: on to the next one
                if self.peeked is None:
                    raise StopIteration
                self.doc_key = (self.peeked[0], self.peeked[1])
                continue
            instance = self._pair(chunk, target)
            if instance is not None:
                return instance


def _as_rng_state(state: Any) -> tuple[Any, ...]:
    """``random.Random`` state back from a checkpoint (lists may come back for tuples)."""
    version, internal, gauss = state
    return (version, tuple(internal), gauss)
