"""The two output forms of the Ray engine: a folder of shards, or one merged HDF5 file.

A folder holds ``manifest.json`` (the run: input hashes, model fingerprint, settings),
``shard-NNNNNN.h5`` per block and, written last, ``done.json``: a folder without it is
unfinished (``--resume`` completes it).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from contextvec.bulk import check_finished
from contextvec.distributed.inputs import Corpus
from contextvec.io.atomic import atomic_path, output_target, refuse_to_replace
from contextvec.io.shards import MANIFEST, ResumeError, ShardDir

DONE = "done.json"


def output_path(output: str | os.PathLike, merge: bool) -> Path:
    """The absolute path written for ``output`` (a symbolic link's target): a folder, or with
    ``merge`` a file; refuses the wrong kind, a FIFO or device, an empty path or ``-``
    (:func:`~contextvec.io.atomic.output_target`)."""
    if os.fspath(output) not in ("", "-"):  # output_target says what those are
        if not merge and Path(output).is_file():
            raise NotADirectoryError(f"the output {output} is a file; the Ray engine writes a "
                                     "folder of shards (or pass --merge for one HDF5 file)")
        if merge and Path(output).is_dir():
            raise IsADirectoryError(f"the output {output} is a directory; --merge writes one HDF5 file")
    output = output_target(output, directory=not merge).resolve()
    if not output.parent.is_dir():
        raise FileNotFoundError(f"the folder of the output {output} does not exist")
    return output


def prepare_ray_output(output: Path, inputs: Sequence[str | os.PathLike], merge: bool, resume: bool,
                       overwrite: bool) -> Path:
    """Refuse an output that is an input, of the wrong kind (:func:`output_path`), or in the
    way; with ``overwrite`` (and no ``resume``) empty a folder of an earlier run. Returns the
    absolute path (a symbolic link's target)."""
    named, output = output, output_path(output, merge)
    in_use = output.exists() and (merge or any(output.iterdir()))
    refuse_to_replace(output, named, inputs=inputs, in_use=in_use, replace=overwrite or resume,
                      suggest_resume=True)
    if not merge and output.exists() and not resume and (overwrite or not in_use):
        if in_use and not (output / MANIFEST).exists():
            raise FileExistsError(f"{named} is not a folder written by contextvec (no {MANIFEST}); "
                                  "refusing to delete it")
        shutil.rmtree(output)
    return output


def check_settings_early(parts_path: Path, manifest: dict) -> None:
    """Refuse a resume whose inputs or settings differ before any worker loads the model (the
    model's fingerprint, not in ``manifest`` yet, is checked once the workers have it)."""
    try:
        old = json.loads((parts_path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return  # nothing to compare: ShardDir.start says what is wrong, if anything
    differ = ShardDir(parts_path, manifest, free={"chunk_lines", "model"}).differences(old)
    if differ:
        raise ResumeError(f"cannot resume {parts_path}: {', '.join(differ)} changed since the "
                          "interrupted run; delete it to start again")


def finished_already(output: Path, parts: ShardDir, merge: bool, overwrite: bool) -> bool:
    """Whether a resumed run is already complete (checked to be the same run, else refused)."""
    if not merge:
        if not (output / DONE).exists():
            return False
        parts.start(resume=True)  # refuses a folder of another run, naming what differs
        return True
    if parts.path.exists() or not output.exists() or overwrite:
        return False
    check_finished(output, parts)
    return True


def finish_folder(parts: ShardDir, corpus: Corpus, n_blocks: int) -> None:
    """Mark a complete folder: ``done.json`` says where each input's lines are."""
    for stale in parts.path.glob(".shard-*.tmp*"):  # left by workers killed while writing
        stale.unlink()
    done = {
        "n_lines": corpus.n_lines,
        "n_shards": n_blocks,
        "chunk_lines": parts.manifest["chunk_lines"],
        "shard_pattern": "shard-{:06d}.h5",
        "inputs": [{"path": str(f.path), "first_key": f.first_key, "n_lines": f.n_lines}
                   for f in corpus.files],
    }
    with atomic_path(parts.path / DONE) as tmp:
        tmp.write_text(json.dumps(done, indent=2), encoding="utf-8")
