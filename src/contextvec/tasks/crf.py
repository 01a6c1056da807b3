"""A linear-chain conditional random field over tag sequences, batched with masks.

For emissions ``e`` (batch, time, tags) the score of a tag path ``y`` of length ``n`` is

    start[y_1] + sum_t e[t, y_t] + sum_{t>1} trans[y_{t-1}, y_t] + end[y_n]

and ``p(y | x) = exp(score(y)) / Z`` with the log partition ``log Z`` computed by the forward
algorithm. The forward algorithm and Viterbi are vectorised over the batch and the tags; only
time is a Python loop. ``mask`` (batch, time) marks real tokens and must be a prefix per row
(padding only at the end) with at least one real token: past a row's end its forward variables and
Viterbi back-pointers are carried through unchanged.

**Constraints.** :func:`allowed_transitions` lists the transitions a tagging scheme permits (BIO:
``I-X`` only after ``B-X``/``I-X`` and not first; IOB1: ``B-X`` only after ``I-X``/``B-X`` and not
first; BIOUL: after ``B-X``/``I-X`` only ``I-X``/``L-X``, ``I-X``/``L-X`` only there, and no
sequence ends inside an entity). Forbidden start/transition/end scores get :data:`FORBIDDEN` added
(a large finite negative, so that a forbidden gold path gives a huge loss instead of NaN), so
decoding only yields valid sequences.
"""

from __future__ import annotations

import torch
from torch import nn

from contextvec.choices import checked_choice
from contextvec.tasks.schemes import TagScheme

FORBIDDEN = -10000.0


def allowed_transitions(
    labels: list[str], scheme: TagScheme | str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(``allowed`` (tags, tags) bool: ``allowed[i, j]`` = tag j may follow tag i,
    ``start`` (tags,) bool: the tag may begin a sequence, ``end`` (tags,) bool: it may end one)
    for ``bio`` (IOB2), ``iob1`` or ``bioul`` (BIOES) labels.

    Labels are ``O`` or ``B-X``/``I-X`` (and ``L-X``/``U-X`` for bioul); any other label is
    unconstrained.
    """
    scheme = checked_choice(TagScheme, scheme, "scheme")
    n = len(labels)
    allowed = torch.ones(n, n, dtype=torch.bool)
    start = torch.ones(n, dtype=torch.bool)
    end = torch.ones(n, dtype=torch.bool)
    if scheme is TagScheme.BIOUL:
        for i, frm in enumerate(labels):
            open_entity = frm[:2] in ("B-", "I-")
            start[i] = frm[:2] not in ("I-", "L-")
            end[i] = not open_entity
            for j, to in enumerate(labels):
                continues = to[:2] in ("I-", "L-")
                allowed[i, j] = (continues and to[2:] == frm[2:]) if open_entity else not continues
        return allowed, start, end
    # The prefix that may not start an entity: BIO's I- must continue one, IOB1's B- must split two.
    continuing = "I-" if scheme is TagScheme.BIO else "B-"
    for j, to in enumerate(labels):
        if not to.startswith(continuing):
            continue
        start[j] = False
        for i, frm in enumerate(labels):
            allowed[i, j] = frm[:2] in ("B-", "I-") and frm[2:] == to[2:]
    return allowed, start, end


class CRF(nn.Module):
    """Linear-chain CRF layer with learned start, transition and end scores (see module doc)."""

    def __init__(
        self,
        num_tags: int,
        allowed: torch.Tensor | None = None,
        allowed_start: torch.Tensor | None = None,
        allowed_end: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.num_tags = num_tags
        self.start = nn.Parameter(torch.zeros(num_tags))
        self.end = nn.Parameter(torch.zeros(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))
        allowed = torch.ones(num_tags, num_tags, dtype=torch.bool) if allowed is None else allowed
        allowed_start = torch.ones(num_tags, dtype=torch.bool) if allowed_start is None else allowed_start
        allowed_end = torch.ones(num_tags, dtype=torch.bool) if allowed_end is None else allowed_end
        if allowed.shape != (num_tags, num_tags) or {allowed_start.shape, allowed_end.shape} != {(num_tags,)}:
            raise ValueError("constraint shapes do not match num_tags")
        # Penalties, not parameters: added to the learned scores, never trained.
        self.register_buffer("transition_penalty", (~allowed).float() * FORBIDDEN)
        self.register_buffer("start_penalty", (~allowed_start).float() * FORBIDDEN)
        self.register_buffer("end_penalty", (~allowed_end).float() * FORBIDDEN)

    def scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The effective (start, transitions, end) scores, penalties included."""
        return (self.start + self.start_penalty, self.transitions + self.transition_penalty,
                self.end + self.end_penalty)

    @staticmethod
    def _check(emissions: torch.Tensor, mask: torch.Tensor) -> None:
        if emissions.dim() != 3 or mask.shape != emissions.shape[:2]:
            raise ValueError(f"emissions {tuple(emissions.shape)} and mask {tuple(mask.shape)} do not match")
        if emissions.shape[1] == 0 or not bool(mask[:, 0].all()):
            raise ValueError("every sequence needs at least one real token (mask[:, 0] all True)")

    def path_score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Score of the given tag paths: (batch,)."""
        self._check(emissions, mask)
        start, trans, end = self.scores()
        m = mask.to(emissions.dtype)
        emitted = emissions.gather(2, tags.unsqueeze(-1)).squeeze(-1)  # (batch, time)
        score = start[tags[:, 0]] + (emitted * m).sum(1)
        score = score + (trans[tags[:, :-1], tags[:, 1:]] * m[:, 1:]).sum(1)
        last = tags.gather(1, (mask.sum(1, keepdim=True) - 1).long()).squeeze(1)
        return score + end[last]

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``log Z`` per sequence by the forward algorithm: (batch,)."""
        self._check(emissions, mask)
        start, trans, end = self.scores()
        alpha = start + emissions[:, 0]  # (batch, tags)
        for t in range(1, emissions.shape[1]):
            # alpha'[b, j] = logsumexp_i(alpha[b, i] + trans[i, j]) + e[b, t, j]
            step = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1) + emissions[:, t]
            alpha = torch.where(mask[:, t].unsqueeze(1), step, alpha)
        return torch.logsumexp(alpha + end, dim=1)

    def neg_log_likelihood(
        self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """``log Z - score(gold)`` per sequence: (batch,)."""
        return self.log_partition(emissions, mask) - self.path_score(emissions, tags, mask)

    def viterbi(self, emissions: torch.Tensor, mask: torch.Tensor) -> tuple[list[list[int]], torch.Tensor]:
        """Best tag path of each sequence (cut to its length) and its score (batch,)."""
        self._check(emissions, mask)
        start, trans, end = self.scores()
        batch, time, num_tags = emissions.shape
        delta = start + emissions[:, 0]
        identity = torch.arange(num_tags, device=emissions.device).expand(batch, num_tags)
        pointers = []
        for t in range(1, time):
            best, argbest = (delta.unsqueeze(2) + trans).max(dim=1)  # over the previous tag
            real = mask[:, t].unsqueeze(1)
            delta = torch.where(real, best + emissions[:, t], delta)
            # Past the end a tag points to itself, so backtracking walks through the padding.
            pointers.append(torch.where(real, argbest, identity))
        score, tag = (delta + end).max(dim=1)
        path = [tag]
        for back in reversed(pointers):
            tag = back.gather(1, tag.unsqueeze(1)).squeeze(1)
            path.append(tag)
        tags = torch.stack(path[::-1], dim=1).tolist()
        lengths = mask.sum(1).tolist()
        return [row[:n] for row, n in zip(tags, lengths, strict=True)], score
