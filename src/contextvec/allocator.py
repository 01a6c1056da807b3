"""Keeping freed memory for reuse: the C allocator setting contextvec's commands run with.

A forward pass allocates and frees the same large buffers batch after batch (activations, gate
products, output layers). glibc's malloc hands buffers above a size threshold back to the
system when they are freed, and trims the top of its heap as soon as enough of it is free, so
the next batch asks the kernel for those pages again and each one is zero-filled on first
touch: a page fault per 4 KiB, paid in system time on every batch. Raising the threshold and
the trim limit keeps the memory in the process and reuses it; the process then holds its
largest batch's memory until it exits, as a caching allocator does.

The ``contextvec`` command (every subcommand, the server included) and each Ray worker call
:func:`keep_freed_memory` once at start. A Python program calls it itself if it wants the same,
or sets glibc's own variables before Python starts (docs/speed.md); whatever the user set in
those variables is left as it is.
"""

from __future__ import annotations

import ctypes
import os

# mallopt(3) parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_KEEP = ((_M_MMAP_THRESHOLD, 2**31 - 1), (_M_TRIM_THRESHOLD, 2**31 - 1), (_M_TOP_PAD, 256 * 2**20))
# A user's own malloc settings, in either of glibc's spellings, win over ours.
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed memory for reuse rather than return it to the system.

    Returns:
        True if the setting was applied; False where the C library is not glibc (musl, macOS,
        Windows: nothing to do) or the user set glibc's malloc variables (``MALLOC_*_`` or a
        ``glibc.malloc`` tunable), which are then left in charge.
    """
    if not _glibc():
        return False
    if any(name in os.environ for name in _USER_SETTINGS) or "glibc.malloc" in os.environ.get(
            "GLIBC_TUNABLES", ""):
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(parameter, value) == 1 for parameter, value in _KEEP)


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # not a POSIX system, or not GNU's C library
        return False
