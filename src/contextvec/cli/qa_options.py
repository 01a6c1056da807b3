"""How a saved question-answering model reads at inference: ``--max-length`` and ``--precision``
(``answer``, ``predict``), ``--task-max-length`` and ``--task-precision`` (``serve``, whose
``--precision`` is the served encoder's). The names are ``load_qa_model``'s keywords."""

from __future__ import annotations

import argparse

from contextvec.cli import common


def add_reading_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                          prefix: str = "") -> None:
    """``--{prefix}max-length`` and ``--{prefix}precision``. Both default to None (the saved
    window length; fp32), so a command can tell whether they were given."""
    parser.add_argument(f"--{prefix}max-length", type=common.positive_int, metavar="N",
                        help="a fine-tuned BERT reader's pieces per row instead of its saved length (at "
                             "most the model's positions; the stride between windows stays the saved "
                             "one; default: the saved length)")
    common.add_precision_argument(
        parser, f"--{prefix}precision", "of the question-answering model (a span model: of its encoder)",
        default=None)
