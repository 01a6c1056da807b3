"""A folder of numbered, atomically written shards and the manifest of the run that writes them.

Long jobs (bulk embedding, the feature cache, distributed embedding) write each finished piece of
work as ``shard-NNNNNN.h5`` in a ``.parts`` folder, beside a ``manifest.json`` saying what the
run is (input hash, model fingerprint, settings). A shard exists complete or not at all (written
by :func:`~contextvec.io.atomic.atomic_path`: flushed to the disk before its rename), so a rerun
computes only the missing shards — after checking that the manifest matches. The run that takes
over a folder removes the temporary files of a writer that died mid-shard.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from contextvec.io.atomic import atomic_path, fsync, remove_temporaries

MANIFEST = "manifest.json"


class ResumeError(RuntimeError):
    """A leftover partial run that cannot be continued as asked."""


class ShardDir:
    """The ``.parts`` folder of one run.

    ``manifest`` describes the run; keys in ``free`` (e.g. the chunk size) may differ on a
    resume, and the leftover run's values win (:attr:`manifest`), since its shards were cut
    with them.
    """

    def __init__(self, path: str | os.PathLike, manifest: dict, free: Iterable[str] = ()) -> None:
        self.path = Path(path)
        self.manifest = dict(manifest)
        self.free = frozenset(free)

    def _leftover(self) -> dict | None:
        try:
            return json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None

    def differences(self, other: dict) -> list[str]:
        """The manifest keys (outside ``free``) whose values differ from ``other``'s."""
        keys = (set(self.manifest) | set(other)) - self.free
        return sorted(k for k in keys if other.get(k) != self.manifest.get(k))

    def explain(self, other: dict) -> str:
        """What differs between the run ``other`` and this one, in words: ``layers 'all' (now
        'top')``; hashes are named, not shown (``another input (input_sha256)``)."""
        hashed = {"input_sha256": "input", "inputs": "list of inputs", "model": "model"}
        return "; ".join(
            f"another {hashed[k]}" + (f" ({k})" if hashed[k] != k else "") if k in hashed
            else f"{k} {other.get(k)!r} (now {self.manifest.get(k)!r})"
            for k in self.differences(other)
        )

    def start(self, resume: bool, restart: bool = False) -> bool:
        """Create the folder, or adopt a leftover one of the same run when ``resume``, or (with
        ``restart`` and not ``resume``) remove a leftover one and start afresh. Returns whether a
        leftover folder was adopted (its dead writers' temporary files removed). Call it while
        holding the output the folder belongs to.

        Raises :class:`ResumeError` for a leftover folder without ``resume`` or ``restart``, one
        without a readable manifest, or one of another run (naming what differs).
        """
        if self.path.exists() and restart and not resume:
            self.remove()
        if self.path.exists():
            if not resume:
                raise ResumeError(
                    f"{self.path} holds an unfinished run: pass --resume to finish it or "
                    "--overwrite to start again"
                )
            old = self._leftover()
            if old is None:
                raise ResumeError(f"{self.path}: no readable {MANIFEST}; delete the folder")
            differ = self.differences(old)
            if differ:
                raise ResumeError(
                    f"cannot resume {self.path}: {', '.join(differ)} changed since the "
                    "interrupted run; delete it to start again"
                )
            self.manifest = old
            remove_temporaries(self.path)
            return True
        self.path.mkdir(parents=True)
        fsync(self.path.parent)
        with atomic_path(self.path / MANIFEST) as tmp:
            tmp.write_text(json.dumps(self.manifest, indent=2), encoding="utf-8")
        return False

    def reuse_or_restart(self) -> None:
        """Adopt a leftover folder of the same run, else start afresh (for caches, whose key
        already names the run: a mismatch can only be a folder killed before its manifest)."""
        if self.path.exists():
            old = self._leftover()
            if old is not None and not self.differences(old):
                self.manifest = old
                remove_temporaries(self.path)
                return
            shutil.rmtree(self.path)
        self.start(resume=False)

    def shard(self, number: int) -> Path:
        return self.path / f"shard-{number:06d}.h5"

    def done(self, count: int) -> set[int]:
        """Which of shards ``0..count-1`` are finished."""
        return {n for n in range(count) if self.shard(n).exists()}

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
