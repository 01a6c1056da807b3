"""Arguments and helpers shared by several subcommands."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the heavy imports wait until a command runs (fast --help)
    from contextvec.api import ModelSpec


def add_model_arguments(parser: argparse.ArgumentParser, precision: bool = True) -> None:
    """``--model``/``--options-file``/``--weight-file``, ``--device``, ``--threads`` and, unless
    ``precision`` is False (commands that save the model), ``--precision``."""
    group = parser.add_argument_group("model (default: the bundled model)")
    group.add_argument(
        "--model", help="a bundled model's name (default: elmo-en-small) or a model directory: "
                        "bilm-tf files, a contextvec model (ELMo, CoVe), an HF BERT model or an "
                        "ELMoForManyLangs directory"
    )
    group.add_argument("--options-file", help="bilm-tf options.json (with --weight-file)")
    group.add_argument("--weight-file", help="bilm-tf weights.hdf5 (with --options-file)")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0 (default: cpu)")
    parser.add_argument("--threads", type=thread_count,
                        help="torch CPU threads (default: torch's choice)")
    if precision:
        add_precision_argument(parser, "--precision", "for inference", default="fp32")


def add_precision_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, flag: str,
                           whose: str, default: str | None) -> None:
    """The one ``--precision`` option (``flag``: its name, e.g. ``--task-precision``), with
    ``whose`` in its help: ``"weight precision {whose}: fp32 ..."``. ``default`` None lets a
    command tell whether it was given."""
    from contextvec.encoders.precision import PRECISIONS  # a command's own parser: torch is wanted anyway

    parser.add_argument(flag, default=default, choices=PRECISIONS,
                        help=f"weight precision {whose}: fp32 (default, exact), bf16 (CPUs with native "
                             "bf16 only) or int8; see docs/precision.md")


def model_spec(args: argparse.Namespace) -> ModelSpec:
    """What :func:`add_model_arguments`' options ask to load (checked: a ``ValueError`` for both
    ``--model`` and bilm-tf files)."""
    from contextvec.api import ModelSpec

    return ModelSpec(args.model, args.options_file, args.weight_file, args.device, args.threads,
                     getattr(args, "precision", "fp32"))


# -- argparse types: every numeric option is range-checked at parse time (exit code 2) ---------

def _number(kind: type, test, wanted: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if kind is float and value != value:  # NaN passes every comparison below
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        if not test(value):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text}")
        return value

    parse.__name__ = wanted  # argparse names the type in its messages
    return parse


positive_int = _number(int, lambda v: v > 0, "an integer > 0")
non_negative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
FLOAT32_MAX = 3.4028234663852886e38
"""Rates and weights become float32 tensors: a larger number is not one."""
positive_float = _number(float, lambda v: 0 < v <= FLOAT32_MAX, "a number > 0 (at most 3.4e38)")
non_negative_float = _number(float, lambda v: 0 <= v <= FLOAT32_MAX, "a number >= 0 (at most 3.4e38)")
probability = _number(float, lambda v: 0 <= v < 1, "a probability in [0, 1)")
"""Dropout-like rates: 1.0 would drop everything."""

INT32_MAX = 2**31 - 1
positive_int32 = _number(int, lambda v: 0 < v <= INT32_MAX, f"an integer in 1..{INT32_MAX}")
non_negative_int32 = _number(int, lambda v: 0 <= v <= INT32_MAX, f"an integer in 0..{INT32_MAX}")
"""Numbers handed to C code as an int (gensim's window, negatives, dims): larger ones overflow."""
SEED_MAX = 2**32 - 1
seed = _number(int, lambda v: 0 <= v <= SEED_MAX, f"an integer in 0..{SEED_MAX}")
"""Random seeds: numpy's and gensim's generators take at most 32 bits."""
MAX_VOCAB_SIZE = 2**20
vocab_size = _number(int, lambda v: 0 < v <= MAX_VOCAB_SIZE, f"an integer in 1..{MAX_VOCAB_SIZE}")
"""Vocabulary sizes of trained WordPiece tokenizers: the tokenizers library reserves room for
the whole size first, and a failed reservation aborts the process."""
port_number = _number(int, lambda v: 0 <= v <= 65535, "a port number 0..65535")
MAX_THREADS = 4096
_threads = _number(int, lambda v: 0 < v <= MAX_THREADS, f"an integer in 1..{MAX_THREADS}")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, else the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def thread_count(text: str) -> int:
    """``--threads``: 1..MAX_THREADS; more than the CPUs this process may use is said on stderr
    (not refused: with ``--engine ray`` the threads run on the cluster's machines)."""
    value = _threads(text)
    cpus = usable_cpus()
    if value > cpus:
        print(f"contextvec: warning: --threads {value} is more than the {cpus} CPU(s) this process may "
              "use here; threads beyond them take turns, which is slower", file=sys.stderr)
    return value


thread_count.__name__ = _threads.__name__


# -- outputs: never overwrite silently, never write over an input ------------------------------

def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing output (default: refuse)")


def check_output(
    output: str | os.PathLike,
    *,
    inputs: Iterable[str | os.PathLike | None] = (),
    overwrite: bool = False,
    resume: bool | None = None,
    directory: bool = False,
) -> Path:
    """The path the command writes for ``output`` (a symbolic link leads to its target), after
    refusing one that cannot be written (:func:`~contextvec.io.atomic.output_target`: empty,
    ``-``, the wrong kind, a FIFO or device, a missing folder), one that another run holds, one
    that is an input (also through links), or one that exists while neither ``overwrite`` nor
    ``resume`` is given (``resume=None``: the command has no ``--resume``).

    The output (and its ``.parts`` folder) is held until the command ends
    (:func:`release_outputs`): a second run on it is refused at once, naming this process.
    Raises ``OSError``/``ValueError``/``RuntimeError`` subclasses with a one-line message.
    """
    from contextvec.io.atomic import output_lock, output_target, refuse_to_replace

    target = output_target(output, directory=directory)
    if directory:  # made with its parents by the run; the lock lies beside it
        target.parent.mkdir(parents=True, exist_ok=True)
    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun, rank 0 holds it for the launch
        _HELD.enter_context(output_lock(target))
    refuse_to_replace(target, Path(output), inputs=inputs,
                      in_use=target.exists() and not (directory and not any(target.iterdir())),
                      replace=bool(overwrite or resume), suggest_resume=directory and resume is not None)
    return target


_HELD = contextlib.ExitStack()
"""The outputs this command holds (:func:`check_output`)."""


def release_outputs() -> None:
    """Let go of the outputs :func:`check_output` took (``main`` calls it when a command ends)."""
    _HELD.close()
