"""BERT pretraining instances: their settings, Google BERT's masking, the
``[CLS] A [SEP] B [SEP]`` instance, padded batches."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from contextvec.encoders.bert.tokenizer import WordPieceTokenizer
from contextvec.training.bert.wordpiece import SPECIAL_TOKENS

IGNORE_INDEX = -100
"""The label of pieces that are not predicted (``torch.nn.functional.cross_entropy``'s default)."""
IS_NEXT, NOT_NEXT = 0, 1
"""NSP labels as HF's ``BertForPreTraining`` reads them."""


@dataclass(frozen=True)
class InstanceSettings:
    """How :class:`~contextvec.training.bert.stream.PretrainingStream` makes and masks its
    instances (that module's docstring).

    Attributes:
        max_seq_length: pieces per instance, ``[CLS]`` and ``[SEP]`` included.
        masked_lm_prob: share of the non-special pieces predicted.
        whole_word_mask: choose a word's pieces together.
        short_seq_prob: probability of a random shorter target length.
        sentences: split lines into sentences (False: each line is one segment).
        pool_size: runs in the reservoir that random B segments come from.
        seed: the seed of everything random.

    Raises:
        ValueError: ``max_seq_length`` under 5, ``masked_lm_prob`` outside (0, 1) or
            ``pool_size`` under 1.
    """

    max_seq_length: int = 128
    masked_lm_prob: float = 0.15
    whole_word_mask: bool = False
    short_seq_prob: float = 0.1
    sentences: bool = True
    pool_size: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), "
                             f"not {self.max_seq_length}")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1), not {self.masked_lm_prob}")
        if self.pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, not {self.pool_size}")


class Masker:
    """Google BERT's masked-LM choice for one ``[CLS] A [SEP] B [SEP]`` sequence (module docstring).

    ``continuation[id]`` says whether a piece continues the previous one's word (``##``);
    ``special_ids`` are never predicted nor used as random replacements.
    """

    def __init__(self, vocab: dict[str, int], mask_id: int, special_ids: Iterable[int],
                 prob: float = 0.15, whole_word: bool = False, prefix: str = "##") -> None:
        if not 0.0 < prob < 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1), not {prob}")
        size = max(vocab.values()) + 1
        self.continuation = [False] * size
        for token, i in vocab.items():
            self.continuation[i] = token.startswith(prefix)
        self.special = frozenset(special_ids)
        self.replacements = [i for i in range(size) if i not in self.special]
        self.mask_id = mask_id
        self.prob = prob
        self.whole_word = whole_word

    @classmethod
    def for_tokenizer(cls, tokenizer: WordPieceTokenizer, prob: float = 0.15,
                      whole_word: bool = False) -> Masker:
        """A masker for a tokenizer's vocabulary: its special tokens are never predicted."""
        raw = tokenizer.tokenizer
        mask_id = raw.token_to_id("[MASK]")
        if mask_id is None:
            raise ValueError("the vocabulary has no [MASK] token")
        vocab = raw.get_vocab(with_added_tokens=True)
        special = {raw.token_to_id(t) for t in SPECIAL_TOKENS if raw.token_to_id(t) is not None}
        special |= {tokenizer.cls_id, tokenizer.sep_id, mask_id}
        return cls(vocab, mask_id, special, prob, whole_word)

    def __call__(self, ids: Sequence[int], rng: random.Random) -> tuple[list[int], list[int]]:
        """``(input_ids, labels)``: labels hold the original piece where one is predicted, else
        :data:`IGNORE_INDEX`."""
        groups: list[list[int]] = []
        for position, piece in enumerate(ids):
            if piece in self.special:
                continue
            if (self.whole_word and groups and self.continuation[piece]
                    and groups[-1][-1] == position - 1):
                groups[-1].append(position)
            else:
                groups.append([position])
        candidates = sum(len(g) for g in groups)
        # Stochastic rounding keeps the expected fraction exactly ``prob`` on short sequences.
        wanted = max(1, int(candidates * self.prob + rng.random()))
        rng.shuffle(groups)
        chosen: list[int] = []
        for group in groups:
            if len(chosen) >= wanted:
                break
            if len(chosen) + len(group) <= wanted:
                chosen.extend(group)
        inputs, labels = list(ids), [IGNORE_INDEX] * len(ids)
        for position in sorted(chosen):
            labels[position] = ids[position]
            draw = rng.random()
            if draw < 0.8:
                inputs[position] = self.mask_id
            elif draw < 0.9:
                inputs[position] = self.replacements[rng.randrange(len(self.replacements))]
        return inputs, labels


@dataclass
class Instance:
    """One training sequence ``[CLS] A [SEP] B [SEP]`` after masking."""

    input_ids: list[int]
    token_type_ids: list[int]
    mlm_labels: list[int]
    nsp_label: int  # IS_NEXT or NOT_NEXT

    @property
    def original_ids(self) -> list[int]:
        """The pieces before masking."""
        return [i if label == IGNORE_INDEX else label
                for i, label in zip(self.input_ids, self.mlm_labels, strict=True)]


@dataclass
class PretrainingBatch:
    """Padded tensors of a batch of instances, (rows, pieces) unless noted."""

    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    attention_mask: torch.Tensor
    mlm_labels: torch.Tensor
    nsp_labels: torch.Tensor  # (rows,)

    def rows(self, start: int, stop: int) -> PretrainingBatch:
        """The slice of rows a data-parallel worker computes."""
        return PretrainingBatch(self.input_ids[start:stop], self.token_type_ids[start:stop],
                                self.attention_mask[start:stop], self.mlm_labels[start:stop],
                                self.nsp_labels[start:stop])

    def to(self, device: torch.device) -> PretrainingBatch:
        return PretrainingBatch(*(t.to(device) for t in (self.input_ids, self.token_type_ids,
                                                         self.attention_mask, self.mlm_labels,
                                                         self.nsp_labels)))

    @property
    def n_pieces(self) -> int:
        """Real (not padding) pieces."""
        return int(self.attention_mask.sum())

    @property
    def n_masked(self) -> int:
        return int((self.mlm_labels != IGNORE_INDEX).sum())


def collate(instances: Sequence[Instance], pad_id: int = 0) -> PretrainingBatch:
    """Pad instances to the longest one."""
    length = max(len(i.input_ids) for i in instances)
    shape = (len(instances), length)
    ids = torch.full(shape, pad_id, dtype=torch.long)
    types = torch.zeros(shape, dtype=torch.long)
    mask = torch.zeros(shape, dtype=torch.long)
    labels = torch.full(shape, IGNORE_INDEX, dtype=torch.long)
    for row, instance in enumerate(instances):
        n = len(instance.input_ids)
        ids[row, :n] = torch.tensor(instance.input_ids)
        types[row, :n] = torch.tensor(instance.token_type_ids)
        mask[row, :n] = 1
        labels[row, :n] = torch.tensor(instance.mlm_labels)
    nsp = torch.tensor([i.nsp_label for i in instances], dtype=torch.long)
    return PretrainingBatch(ids, types, mask, labels, nsp)
