"""Entry point of the ``contextvec`` command.

A subcommand's module (and with it torch and the models) is imported only when that subcommand
runs, so ``contextvec --help`` answers at once. :data:`COMMANDS` is the one list of commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from contextvec.allocator import keep_freed_memory
from contextvec.cli.common import release_outputs
from contextvec.extras import MissingExtra

# name -> (module under contextvec.cli, one-line help); a test checks each module uses the same help.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "show contextual vectors at work on the bundled model (or --model)"),
    "embed": ("embed", "embed a file of whitespace-tokenized sentences into HDF5 (allennlp `elmo` layout)"),
    "serve": ("serve", "serve contextual vectors over HTTP (/v1/embed, OpenAI-compatible /v1/embeddings)"),
    "export": ("export", "export an ELMo, CoVe or BERT to ONNX (dynamic batch and length) with what a "
                         "runtime needs beside it"),
    "pull": ("pull", "download a published model (a name `contextvec models` lists, hf:OWNER/NAME, or an "
                     "archive URL)"),
    "models": ("models", "list the published models `contextvec pull` knows and those in the cache (size, "
                         "language, path)"),
    "info": ("info", "say what a model directory holds (format, family, vocabulary, layers, dimensions, "
                     "fingerprint) and how each precision runs it on this CPU"),
    "convert": ("convert",
                "convert a model between bilm-tf (options.json + weights.hdf5) and native safetensors"),
    "train-bilm": ("train_bilm", "train a biLM (ELMo) or a forward char-CNN LM (Kim et al.) on a corpus"),
    "perplexity": ("perplexity",
                   "forward, backward and average perplexity of a trained model on held-out text"),
    "probe": ("probe", "linear probes of each frozen layer and of a learned scalar mix"),
    "train-word-vectors": ("train_word_vectors",
                           "train static word vectors (word2vec or fastText, via gensim) on a corpus"),
    "train-mt": ("train_mt",
                 "train CoVe's attentional seq2seq translation model (MT-LSTM encoder) on parallel files"),
    "translate": ("translate", "translate a file with a model trained by train-mt"),
    "bleu": ("translate", "translate a source file and score it against references (sacrebleu, uncased)"),
    "train-task": ("train_task", "train a task model (NER, SST, TREC, GLUE's tasks, your sentence pairs) "
                                 "with or without contextual vectors, or fine-tune BERT"),
    "predict": ("predict", "run a task model saved by train-task --save-model on new text or a task file"),
    "answer": ("answer",
               "answer a question on a context with a question-answering model saved by train-task squad"),
    "experiment": ("experiment",
                   "the ELMo paper's analyses: last layer vs all layers, placement, sample efficiency"),
    "train-wordpiece": ("train_wordpiece",
                        "train a BERT WordPiece vocabulary (vocab.txt + tokenizer.json) on text files"),
    "train-bert": ("train_bert",
                   "pretrain a BERT (masked LM + next sentence prediction) on document-structured text"),
    "eval-bert": ("eval_bert",
                  "masked-LM accuracy and perplexity and NSP accuracy of a BERT with pretraining heads"),
}


class DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help states its default, unless it already says "default"."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        # By identity: 0 == False, and a default of 0 is one to show. A --no-X flag's default
        # True would read as "--no-X is on".
        if (action.option_strings and action.default not in (None, argparse.SUPPRESS)
                and action.default is not False and not isinstance(action, argparse._StoreFalseAction)
                and action.help != argparse.SUPPRESS and "default" not in text.lower()):
            text += " (default: %(default)s)"
        return text


class RawDescriptionDefaultsFormatter(DefaultsFormatter, argparse.RawDescriptionHelpFormatter):
    """:class:`DefaultsFormatter` for commands whose description is laid out by hand."""


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (and exit code 2) and defaults in every help."""

    def __init__(self, *args, **kwargs) -> None:
        given = kwargs.get("formatter_class", argparse.HelpFormatter)
        kwargs["formatter_class"] = (RawDescriptionDefaultsFormatter
                                     if issubclass(given, argparse.RawDescriptionHelpFormatter)
                                     else DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class VersionAction(argparse.Action):
    """``--version``: the installed package's version, read only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from contextvec import __version__

        print(f"contextvec {__version__}")
        parser.exit()


def _module(name: str):
    return importlib.import_module(f"contextvec.cli.{COMMANDS[name][0]}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, that command's full parser, else help lines only."""
    parser = Parser(prog="contextvec", description="Deep contextualized word representations.")
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=Parser)
    for name, (_, help_text) in COMMANDS.items():
        if command is not None and COMMANDS[name][0] == COMMANDS[command][0]:
            continue  # added in full below
        subparsers.add_parser(name, help=help_text, add_help=False)
    if command is not None:
        _module(command).add_parser(subparsers)
    return parser


def _command(argv: list[str]) -> str | None:
    """The subcommand named on the command line, if any (the first word not an option)."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(_command(argv)).parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    except MissingExtra as e:  # a command whose module imports an extra's package at its top
        print(f"contextvec: error: {e}", file=sys.stderr)
        return 2
    keep_freed_memory()  # after parsing: --help and bad options return before it
    try:
        try:
            args.run(args)
        finally:
            release_outputs()
    except KeyboardInterrupt as e:
        if not e.args:  # a command that handles Ctrl-C itself has already said what it kept
            print("\ncontextvec: interrupted (commands that take --resume keep their finished work)",
                  file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, RuntimeError, LookupError, MissingExtra) as e:
        # Expected failures (bad input, missing files, refused outputs, an extra not installed)
        # end in one line, exit 2.
        # OSError covers FileNotFoundError, FileExistsError, IsADirectoryError, PermissionError
        # and a full disk (ENOSPC).
        message = str(e) or type(e).__name__
        if isinstance(e, OSError) and e.filename and str(e.filename) not in message:
            message = f"{e.filename}: {message}"
        print(f"contextvec: error: {message}", file=sys.stderr)
        return 2
    except MemoryError:
        # A size option (batch, rows, unroll, vocabulary, ...) far beyond this machine's memory.
        print("contextvec: error: out of memory: the sizes asked for (batch, rows, unroll, hidden, "
              "vocabulary, ...) need more memory than this machine has; give smaller ones", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
