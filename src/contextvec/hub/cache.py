"""Where published models are kept, and whether contextvec may download them.

Both are read from the environment on every call, so that a test or a long-lived process sees a
change at once.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CONTEXTVEC_CACHE"
OFFLINE_ENV = "CONTEXTVEC_OFFLINE"
_YES = frozenset({"1", "true", "yes"})
_NO = frozenset({"", "0", "false", "no"})


def cache_dir() -> Path:
    """The folder of downloaded models: ``$CONTEXTVEC_CACHE``, else
    ``$XDG_CACHE_HOME/contextvec``, else ``~/.cache/contextvec``. Not created here.

    An empty variable counts as unset; a relative ``XDG_CACHE_HOME`` is ignored, as the XDG base
    directory specification says.
    """
    if given := os.environ.get(CACHE_ENV):
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "contextvec"
    return Path.home() / ".cache" / "contextvec"


def offline() -> bool:
    """Whether downloads are off: ``CONTEXTVEC_OFFLINE`` is ``1``, ``true`` or ``yes`` (any case).

    Raises ``ValueError`` (one line) for a value that is neither one of those nor ``0``,
    ``false``, ``no`` or empty: a misspelt switch must not download quietly.
    """
    value = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise ValueError(f"{OFFLINE_ENV}={os.environ[OFFLINE_ENV]!r} is not a switch; give 1, true or yes "
                     "to stay offline, or 0, false, no or nothing to allow downloads")
