"""Options and checks shared by the training and evaluation subcommands (train-bilm, train-bert,
train-mt, train-wordpiece, train-word-vectors, perplexity, eval-bert, translate, bleu)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from contextvec.cli.common import add_overwrite_argument, check_output, thread_count


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless it says it already or has none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        # By identity: 0 == False, and a default of 0 is one to show.
        if "default" in text or action.default in (None, argparse.SUPPRESS) or action.default is False:
            return text
        return super()._get_help_string(action) or text


def add_command(subparsers: argparse._SubParsersAction, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose help shows every option's default."""
    return subparsers.add_parser(name, help=text, description=text, formatter_class=HelpFormatter)


def device(text: str) -> str:
    """argparse type of ``--device``: a torch device this torch can use."""
    try:
        parsed = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"not a torch device: {text!r} (e.g. cpu, cuda:0)") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: CUDA is not available to this torch "
                                         f"({torch.__version__}); use --device cpu")
    return text


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", type=device, default="cpu", help="torch device, e.g. cpu or cuda:0")


def add_run_arguments(parser: argparse.ArgumentParser, resume: bool = True, overwrite: bool = True,
                      threads: bool = True) -> None:
    """``--resume`` (resumable runs), ``--overwrite`` (commands that write), ``--threads``,
    ``--quiet``."""
    if resume:
        parser.add_argument("--resume", action="store_true",
                            help="continue from the output's checkpoint")
    if overwrite:
        add_overwrite_argument(parser)
    if threads:
        parser.add_argument("--threads", type=thread_count, help="torch CPU threads (default: torch's)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def add_evaluation_command(subparsers: argparse._SubParsersAction, name: str, text: str,
                           files: str, model: str) -> argparse.ArgumentParser:
    """A command scoring a trained model (``--model``) on held-out ``files``."""
    parser = add_command(subparsers, name, text)
    parser.add_argument("files", nargs="+", help=files)
    parser.add_argument("--model", required=True, help=model)
    add_run_arguments(parser, resume=False, overwrite=False)
    return parser


def set_threads(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)


def prepare_output(output: str | os.PathLike | None, inputs: Iterable[Any] = (), *,
                   overwrite: bool = False, resume: bool | None = None, directory: bool = False) -> None:
    """:func:`~contextvec.cli.common.check_output` with every error as one line (``ValueError``).

    ``inputs``: paths or lists of paths (globs are left to the readers).
    """
    if output is None:
        return
    flat: list[str | None] = []
    for given in inputs:
        flat.extend([given] if given is None or isinstance(given, (str, os.PathLike)) else given)
    try:
        check_output(output, inputs=flat, overwrite=overwrite, resume=resume, directory=directory)
    except (IsADirectoryError, NotADirectoryError) as e:
        raise ValueError(str(e)) from None


def overwrite_outputs(args: argparse.Namespace, output: str | os.PathLike, names: Sequence[str]) -> None:
    """With ``--overwrite`` (and no ``--resume``), remove what an earlier run wrote in ``output``."""
    from contextvec.training.loop import clear_outputs

    if args.overwrite and not getattr(args, "resume", False) and Path(output).is_dir():
        clear_outputs(output, tuple(names))


FROM_PRESET = " (default: the preset's or config's)"


def add_overrides(parser: argparse.ArgumentParser, values: Sequence[tuple[str, Any, str]] = (),
                  choices: Sequence[tuple[str, Sequence[str], str]] = (),
                  flags: Mapping[str, str] | None = None) -> None:
    """An option group overriding fields of a preset/config: ``(field, type, help)`` values,
    ``(field, choices, help)`` choices and ``{field: help}`` on/off flags (``--no-...``)."""
    group = parser.add_argument_group("overrides of the preset/config")
    for name, kind, text in values:
        group.add_argument("--" + name.replace("_", "-"), type=kind, help=text + FROM_PRESET)
    for name, names, text in choices:
        group.add_argument("--" + name.replace("_", "-"), choices=names, help=text + FROM_PRESET)
    for name, text in (flags or {}).items():
        group.add_argument("--" + name.replace("_", "-"), action=argparse.BooleanOptionalAction,
                           default=None, help=text + FROM_PRESET)


def overrides(config: Any, args: argparse.Namespace, names: Iterable[str]) -> Any:
    """``config`` with the options of ``names`` that were given."""
    return dataclasses.replace(config, **{k: getattr(args, k) for k in names
                                          if getattr(args, k) is not None})
