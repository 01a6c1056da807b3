"""Entry point of the ``contextvec`` command."""

from __future__ import annotations

import argparse
import sys

from contextvec import __version__
from contextvec.cli import (
    convert,
    demo,
    embed,
    eval_bert,
    experiment,
    perplexity,
    probe,
    train_bert,
    train_bilm,
    train_mt,
    train_task,
    train_word_vectors,
    train_wordpiece,
    translate,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextvec", description="Deep contextualized word representations."
    )
    parser.add_argument("--version", action="version", version=f"contextvec {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, embed, convert, train_bilm, perplexity, probe, train_word_vectors, train_mt,
                   translate, train_task, experiment, train_wordpiece, train_bert, eval_bert):
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except KeyboardInterrupt:
        print("\ncontextvec: interrupted; finished work is kept, rerun with --resume",
              file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, FileExistsError, RuntimeError) as e:
        print(f"contextvec: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
