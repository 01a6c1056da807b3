"""Tag schemes of entity tagging: IOB1 (the CoNLL-2003 files), IOB2 (BIO) and BIOUL (BIOES)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from contextvec.choices import spellings


class TagScheme(StrEnum):
    """The tags a tagging model predicts (``ModelSettings.tag_scheme``, ``--tag-scheme``)."""

    BIO = "bio"
    """IOB2: every entity starts with ``B-``."""
    IOB1 = "iob1"
    """The CoNLL-2003 files' tags: ``B-`` only between two entities of one type."""
    BIOUL = "bioul"
    """BIOES: ``U-`` for a one-token entity, ``L-`` for the last token of a longer one."""


SCHEMES = spellings(TagScheme)


def _retag_starts(tags: Sequence[str], old: str, new: str) -> list[str]:
    """Tags with prefix ``old`` that start an entity (after ``O`` or another type) get ``new``."""
    out: list[str] = []
    previous = "O"
    for tag in tags:
        starts = previous == "O" or previous[2:] != tag[2:]
        out.append(new + tag[2:] if tag.startswith(old) and starts else tag)
        previous = tag
    return out


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 -> IOB2 (BIO): an ``I-X`` that starts an entity (after ``O`` or another type) becomes
    ``B-X``. ``B-X`` (IOB1: a new entity right after one of the same type) stays ``B-X``."""
    return _retag_starts(tags, "I-", "B-")


def iob2_to_iob1(tags: Sequence[str]) -> list[str]:
    """IOB2 (BIO) -> IOB1: ``B-X`` stays only where it follows an ``X`` entity, else ``I-X``."""
    return _retag_starts(tags, "B-", "I-")


def iob2_to_bioul(tags: Sequence[str]) -> list[str]:
    """IOB2 (BIO) -> BIOUL (BIOES): a one-token entity is ``U-X``, the last token of a longer one
    ``L-X``."""
    out: list[str] = []
    for i, tag in enumerate(tags):
        following = tags[i + 1] if i + 1 < len(tags) else "O"
        continued = following == "I-" + tag[2:]
        if tag.startswith("B-") and not continued:
            out.append("U-" + tag[2:])
        elif tag.startswith("I-") and not continued:
            out.append("L-" + tag[2:])
        else:
            out.append(tag)
    return out


def bioul_to_iob2(tags: Sequence[str]) -> list[str]:
    """BIOUL (BIOES) -> IOB2 (BIO): ``U-X`` -> ``B-X``, ``L-X`` -> ``I-X``."""
    return ["B-" + t[2:] if t.startswith("U-") else "I-" + t[2:] if t.startswith("L-") else t for t in tags]


def to_scheme(tags: Sequence[str], scheme: str, source: str = "iob1") -> list[str]:
    """Tags in ``source`` (``iob1``, whose reading also passes IOB2 through unchanged, or
    ``bioul``) -> tags in ``scheme`` (``bio``, ``iob1`` or ``bioul``)."""
    bio = bioul_to_iob2(tags) if source == "bioul" else iob1_to_iob2(tags)
    if scheme == "bioul":
        return iob2_to_bioul(bio)
    return bio if scheme == "bio" else iob2_to_iob1(bio)


def tag_set(labels: Sequence[Sequence[str]], scheme: str = "bio") -> list[str]:
    """The tags of a training split in ``scheme``: ``O`` first, then by entity type."""
    tags = {t for sentence in labels for t in to_scheme(sentence, scheme)}
    return sorted(tags, key=lambda t: (t != "O", t[2:], t))
