"""The log levels a long-running command shows (``contextvec serve --log-level``).

Here, below every room, so that the command line offers the one vocabulary without importing
the server, whose package needs the ``server`` extra.
"""

from __future__ import annotations

from enum import StrEnum


class LogLevel(StrEnum):
    """The least severe server log messages shown (``logging``'s levels of these names)."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


LOG_LEVELS = tuple(level.value for level in LogLevel)
"""The spellings of :class:`LogLevel`, as the command line offers them."""
