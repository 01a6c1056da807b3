"""One policy for reading model files that may come from anyone.

A model file is data, never instructions: every reader in ``io/`` opens the files a model
directory names through :func:`model_file` (a regular file inside the directory: no link out of
it, no FIFO or device that would block or never end), reads small files through
:func:`read_bounded`, and checks every size a file declares against what the file holds
(:func:`check_declared`) before it allocates anything. Every refusal is an
:class:`UntrustedFileError`: a ``ValueError`` whose one-line message names the file and what is
wrong, which the command line turns into exit code 2.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import stat
from pathlib import Path
from typing import Any

import h5py
import torch

__all__ = ["HDF5_EXPANSION_CAP", "SMALL_FILE_CAP", "UntrustedFileError", "check_declared",
           "check_hdf5_dataset", "error_line", "model_file", "read_bounded", "read_json",
           "read_torch_weights", "regular_file"]

#: The most a configuration or vocabulary file may hold (JSON, dictionaries, protobuf indexes):
#: the largest published ones are a few megabytes, so a larger one is not one of them.
SMALL_FILE_CAP = 256 * 1024 * 1024


class UntrustedFileError(ValueError):
    """A model file that is not what its format says it is: the message names the file."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{os.fspath(path)}: {problem}")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def regular_file(path: str | os.PathLike) -> Path:
    """``path`` if it is (or links to) a regular file; refused in one line otherwise
    (``FileNotFoundError`` where there is nothing at ``path``).

    Checked before the file is opened, so that a FIFO never blocks and a device never streams.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:  # not a bad file but an absent one: what open() would raise
        raise FileNotFoundError(f"{path}: no such file") from None
    except OSError as e:
        raise UntrustedFileError(path, f"cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(mode):
        raise UntrustedFileError(path, f"is {_kind(mode)}, not a regular file")
    return path


def model_file(directory: str | os.PathLike, name: str | os.PathLike) -> Path:
    """The file ``name`` of the model ``directory``: a regular file that lies inside it.

    ``name`` may come from the model's own configuration, so an absolute path, ``..`` or a
    symbolic link that leads out of the directory is refused, as is anything but a regular file.
    Links inside the directory are followed, and so are links from a Hugging Face cache snapshot
    (``.../models--NAME/snapshots/REVISION``) into its own repository folder, where the hub keeps
    the files it links to (``.../models--NAME/blobs``).
    """
    directory = Path(directory)
    path = directory / name
    if "\0" in os.fspath(name):
        raise UntrustedFileError(directory, f"names a file with a NUL character ({os.fspath(name)!r})")
    root = Path(os.path.realpath(directory))
    allowed = root.parent.parent if root.parent.name == "snapshots" else root
    target = os.path.realpath(path)
    if os.path.commonpath([allowed, target]) != str(allowed):
        raise UntrustedFileError(path, f"lies outside the model directory {directory} "
                                       f"(it leads to {target}); refusing to read it")
    return regular_file(path)


def read_bounded(path: str | os.PathLike, cap: int = SMALL_FILE_CAP) -> bytes:
    """The bytes of the regular file ``path``, refused without reading if it holds over ``cap``."""
    path = regular_file(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise UntrustedFileError(path, f"holds {size:,} bytes, more than the {cap:,} a file "
                                           "of its kind may hold")
        # Sized by what the file holds: a read of the cap would reserve the cap for every file.
        data = f.read(size + 1)
    if len(data) > size:
        raise UntrustedFileError(path, "grew while it was read; read it again once it is complete")
    return data


def check_declared(path: str | os.PathLike, what: str, declared: int, available: int) -> int:
    """``declared`` if the file ``path`` can hold it (``available`` bytes or items), else refused.

    Called before anything of the declared size is allocated, so that a small file cannot ask
    for gigabytes.
    """
    if declared < 0:
        raise UntrustedFileError(path, f"declares a negative {what} ({declared})")
    if declared > available:
        raise UntrustedFileError(path, f"declares {what} of {declared:,}, but holds only "
                                       f"{available:,}")
    return declared


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: str | os.PathLike, cap: int = SMALL_FILE_CAP) -> Any:
    """The content of the JSON file ``path`` (read through :func:`read_bounded`), refused in one
    line if it is not UTF-8 JSON. ``NaN`` and ``Infinity``, which Python's parser accepts but JSON
    has not, are refused too: no size in a configuration can be one."""
    data = read_bounded(path, cap)
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise UntrustedFileError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except (ValueError, RecursionError) as e:
        reason = str(e) if isinstance(e, ValueError) else "nested too deeply"
        raise UntrustedFileError(path, f"not valid JSON ({reason})") from None


# The name torch's refusals give of the object (their wording varies with the module).
_UNREADABLE = "not a weights-only PyTorch checkpoint"
_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def read_torch_weights(path: str | os.PathLike) -> Any:
    """What the PyTorch file ``path`` holds, unpickled with ``weights_only=True``: tensors and
    plain containers only, so no code in the file runs.

    A file that holds other Python objects is refused in one line of our own (torch's refusal
    advises loading it with ``weights_only=False``, which would run that code); anything else
    torch cannot read is one line naming the file too.
    """
    path = regular_file(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        found = _GLOBAL.search(str(e))
        if found is not None:
            raise UntrustedFileError(path, f"holds Python objects other than tensors ({found.group(1)}); "
                                           "contextvec refuses to run them, so it does not load this "
                                           "file") from None
        if "Weights only" in str(e):  # torch's text goes on to advise weights_only=False
            raise UntrustedFileError(path, f"{_UNREADABLE}: its pickle holds more than tensors and "
                                           "containers, which contextvec refuses to unpickle") from None
        raise UntrustedFileError(path, f"{_UNREADABLE} ({error_line(e)[:200]})") from None
    # torch's readers raise whatever the bytes lead them to (RuntimeError, EOFError, KeyError,
    # struct.error, ...): every one is a file that is not a PyTorch file.
    except Exception as e:  # noqa: BLE001
        raise UntrustedFileError(path, f"{_UNREADABLE} ({error_line(e)[:200]})") from None


def error_line(error: BaseException, last: bool = False) -> str:
    """The first (or ``last``) line of ``error``'s text, or its type's name where it has none:
    a library's error, cut to fit into a one-line message."""
    text = str(error).strip()
    return text.splitlines()[-1 if last else 0].strip() if text else type(error).__name__


_STORED = {h5py.h5d.CONTIGUOUS: "contiguous", h5py.h5d.CHUNKED: "chunked", h5py.h5d.COMPACT: "compact"}

#: How many times its stored bytes a compressed HDF5 dataset may expand to. Float weights
#: compress little (random bits in every mantissa), so a dataset that claims much more is
#: a small file asking for a large allocation.
HDF5_EXPANSION_CAP = 64
_SLACK = 4096  # tiny datasets: compression headers may outweigh the data


def check_hdf5_dataset(path: str | os.PathLike, name: str, dataset: h5py.Dataset) -> h5py.Dataset:
    """``dataset`` (called ``name`` in the HDF5 file ``path``) if reading it reads its own bytes
    in the file and not much more than those; refused in one line otherwise, before it is read.

    HDF5 lets a dataset keep its data in other files (external storage, virtual datasets), which
    would read any local file into a model, and lets it declare more than it holds (chunks never
    written read as the fill value, compressed chunks expand), which would let a small file ask
    for gigabytes. A model's datasets are contiguous, chunked or compact storage inside the file,
    written in full; compressed chunks may expand at most :data:`HDF5_EXPANSION_CAP` times.
    """
    if dataset.external:
        files = ", ".join(str(entry[0]) for entry in dataset.external)
        raise UntrustedFileError(path, f"dataset {name} keeps its data in other files ({files}); "
                                       "a model's datasets must lie inside its file")
    if dataset.is_virtual:
        raise UntrustedFileError(path, f"dataset {name} is a virtual dataset (its data lies in other "
                                       "datasets or files); a model's datasets must lie inside its file")
    plist = dataset.id.get_create_plist()
    layout = plist.get_layout()
    if layout not in _STORED:
        raise UntrustedFileError(path, f"dataset {name} has a storage layout ({layout}) other than "
                                       "contiguous, chunked or compact")
    stored, declared = dataset.id.get_storage_size(), dataset.size * dataset.dtype.itemsize
    if layout == h5py.h5d.CHUNKED and dataset.size:
        chunks = math.prod(-(-n // c) for n, c in zip(dataset.shape, dataset.chunks, strict=True))
        written = dataset.id.get_num_chunks()
        if written < chunks:
            raise UntrustedFileError(path, f"dataset {name} has {written:,} of its {chunks:,} chunks "
                                           "written (its data was never written in full)")
    if plist.get_nfilters():
        if declared > HDF5_EXPANSION_CAP * stored + _SLACK:
            raise UntrustedFileError(path, f"dataset {name} declares {declared:,} bytes but its "
                                           f"compressed storage holds {stored:,}: more than "
                                           f"{HDF5_EXPANSION_CAP} times as much, not model weights")
    elif stored < declared:
        raise UntrustedFileError(path, f"dataset {name} declares {declared:,} bytes but its storage "
                                       f"in the file holds {stored:,} (data never written)")
    return dataset
