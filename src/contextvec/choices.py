"""Closed sets of spellings as string enums, checked once where a value enters.

Every mode a settings object takes (``Layers``, ``Precision``, a tokenizer's name, a task
model's placement, ...) is a :class:`~enum.StrEnum`: its members are ``str``, so ``==`` with a
spelling, f-strings and ``json.dumps`` give what a plain string gives, and a plain string of a
member's spelling is accepted wherever the member is (Python callers, saved configs, JSON).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, TypeVar

Choice = TypeVar("Choice", bound=StrEnum)


def spellings(kind: type[StrEnum]) -> tuple[str, ...]:
    """The spellings of ``kind``'s members, in their order (for ``choices=`` and messages)."""
    return tuple(member.value for member in kind)


def checked_choice(kind: type[Choice], value: object, name: str, none_too: bool = False,
                   among: Sequence[str] | None = None) -> Choice:
    """``value`` (a member of the string enum ``kind`` or its spelling) as that member; any
    other is a ``ValueError`` naming ``name`` and the choices (and None, if ``none_too``).
    ``among``: the members (or spellings) a setting allows when it takes only some of ``kind``'s."""
    allowed = spellings(kind) if among is None else tuple(str(choice) for choice in among)
    if value in allowed:  # a member or its spelling (a member is equal to its spelling)
        return kind(value)
    choices = ", ".join(allowed) + (" or None" if none_too else "")
    raise ValueError(f"{name} must be one of {choices}, not {_shown(value)}")


def _shown(value: object) -> str:
    """``value`` as an error message quotes it: a member by its spelling, as a plain string."""
    return repr(value.value if isinstance(value, StrEnum) else value)


def plain(value: Any) -> Any:
    """``value`` with every enum member in it (inside dicts, lists and tuples too) as its plain
    spelling: what a file or a checkpoint stores, so that ``torch.load(weights_only=True)`` and
    readers without contextvec read it as they read a config of strings."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(item) for item in value)
    return value
