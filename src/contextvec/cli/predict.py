"""``contextvec predict DIR INPUT [OUTPUT]``: run a model saved by ``train-task --save-model``.

INPUT is plain text, one sentence per line (``--format text``, tokenized by ``--tokenizer``), or
the task's own files read by its reader (``--format task``: CoNLL-2003, SST trees, TREC labels),
``-`` for stdin. Text is streamed in chunks (bounded memory); a task file is read whole, then
predicted as one split, exactly as ``train-task`` scored it. OUTPUT (default or ``-``: stdout;
a file is written atomically) gets JSON lines (``{"tokens", "label"}`` or ``{"tokens", "tags"}``)
or, for NER, CoNLL (``token TAG`` lines, IOB2, a blank line after each sentence). ``--score``
(``--format task``) prints the task metric against the file's labels.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from contextvec.cli import common

if TYPE_CHECKING:
    from contextvec.tasks.spec import TaskSpec
    from contextvec.tasks.split import Split

HELP = "run a task model saved by train-task --save-model on new text or a task file"
DESCRIPTION = HELP + """. INPUT: text, one sentence per line, or (--format task) the task's own
file (CoNLL-2003, SST trees, TREC labels); - reads stdin. Text is streamed in chunks; a task file
is predicted as one split, exactly as train-task scored it. OUTPUT (default or -: stdout) gets JSON
lines ({"tokens", "label"} or {"tokens", "tags"}) or, for NER with --output-format conll, IOB2
"token TAG" lines. --score prints the task metric against a labelled task file."""
FORMATS = ("text", "task")
OUTPUT_FORMATS = ("jsonl", "conll")
TEXT_CHUNK = 1000
"""Sentences per streamed chunk of text input."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("predict", help=HELP, description=DESCRIPTION)
    p.add_argument("model_dir", metavar="DIR", help="a directory written by train-task --save-model")
    p.add_argument("input", metavar="INPUT", help="input file (plain or .gz), or - for stdin")
    p.add_argument("output", metavar="OUTPUT", nargs="?",
                   help="output file, or - for stdout (default: stdout; with --score: not written)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text: one sentence per line; task: the task's own file format, read by its "
                   "reader (default: text)")
    p.add_argument("--tokenizer", choices=("whitespace", "moses"), default="whitespace",
                   help="how --format text lines become tokens (default: whitespace)")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, default="jsonl",
                   help="jsonl, or conll for NER (default: jsonl)")
    p.add_argument("--score", action="store_true",
                   help="print the task metric against INPUT's labels (needs --format task)")
    p.add_argument("--max-sentences", type=common.positive_int,
                   help="--format task: only the first N sentences, as train-task --max-sentences "
                   "(default: all)")
    p.add_argument("--batch-size", type=common.positive_int,
                   help="sentences per task-model batch (default: the batch training evaluated with)")
    p.add_argument("--embed-batch-size", type=common.positive_int,
                   help="sentences per encoder batch (default: the one training used)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0 (default: cpu)")
    p.add_argument("--threads", type=common.thread_count, help="torch CPU threads (default: torch's choice)")
    common.add_overwrite_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar (default: shown)")
    p.set_defaults(run=run)


def _text_sentences(stream: BinaryIO, source: str, tokenizer_name: str) -> Iterator[list[str]]:
    """Tokenized lines; each line is decoded on its own, so a bad byte is reported at its line."""
    from contextvec.text.tokenize import Tokenizer

    tokenize = Tokenizer(tokenizer_name)
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{source}, line {number}: not UTF-8 ({error.reason})") from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark would join the first token
        tokens = tokenize(line)[0] if line.strip() else []
        if not tokens:
            raise ValueError(f"{source}, line {number}: empty line (expected one sentence per line)")
        yield tokens


@contextlib.contextmanager
def _opened_input(path: str) -> Iterator[BinaryIO]:
    if path == "-":
        yield sys.stdin.buffer
    elif path.endswith(".gz"):
        with gzip.open(path, "rb") as stream:
            yield stream
    else:
        with open(path, "rb") as stream:
            yield stream


@contextlib.contextmanager
def _opened_output(path: str | None) -> Iterator[TextIO | None]:
    from contextvec.io.atomic import atomic_path

    if path is None:
        yield None
    elif path == "-":
        yield sys.stdout
    else:
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as stream:
            yield stream


def _write(stream: TextIO, tokens: list[str], predicted: object, conll: bool) -> None:
    if conll:
        stream.write("".join(f"{t} {tag}\n" for t, tag in zip(tokens, predicted, strict=True)) + "\n")
    else:
        key = "tags" if isinstance(predicted, list) else "label"
        stream.write(json.dumps({"tokens": tokens, key: predicted}, ensure_ascii=False) + "\n")


def _check(args: argparse.Namespace) -> str | None:
    """Validate the arguments before any work; returns the output path (None: not written)."""
    if args.max_sentences and args.format != "task":
        raise ValueError("--max-sentences is for --format task (text input is streamed whole)")
    if args.score and args.format != "task":
        raise ValueError("--score needs labels: give the task's own file with --format task")
    if args.input == "":
        raise ValueError("INPUT is an empty path; give a file, or - for standard input")
    if args.input != "-":
        path = Path(args.input)
        if path.is_dir():
            raise IsADirectoryError(f"INPUT {path} is a directory; give a file")
        if not path.exists():
            raise FileNotFoundError(f"INPUT {path} does not exist")
    output = args.output if args.output is not None or args.score else "-"
    if output not in (None, "-"):
        common.check_output(output, inputs=[None if args.input == "-" else args.input],
                            overwrite=args.overwrite)
    return output


def run(args: argparse.Namespace) -> None:
    import torch
    from tqdm import tqdm

    from contextvec.tasks.saved import load_task_model

    output = _check(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    model = load_task_model(args.model_dir, device=args.device)
    conll = args.output_format == "conll"
    if conll and not model.tagging:
        raise ValueError(f"--output-format conll is for NER; {model.spec.name} predicts a label per sentence")
    split = None
    if args.format == "task":  # read whole and predicted as one split, as train-task scored it
        split = (_read_task_stdin(model.spec, args.max_sentences) if args.input == "-"
                 else model.spec.load(args.input, args.max_sentences))
    loaded = time.perf_counter() - started
    predictions, source = [], "<stdin>" if args.input == "-" else args.input
    with (_opened_input(args.input) if split is None else contextlib.nullcontext()) as stream, \
            _opened_output(output) as out:
        sentences = split.sentences if split is not None else _text_sentences(stream, source, args.tokenizer)
        chunk = len(split) if split is not None else TEXT_CHUNK
        stream_out = model.predict_stream(sentences, chunk, args.batch_size, args.embed_batch_size)
        total = None if split is None else chunk
        with tqdm(unit="sent", desc="predict", disable=args.quiet, total=total) as bar:
            for tokens, predicted in stream_out:
                if out is not None:
                    _write(out, tokens, predicted, conll)
                predictions.append(predicted if args.score else None)
                bar.update(1)
    seconds = time.perf_counter() - started - loaded
    count = len(predictions)
    print(f"predicted {count} sentences in {seconds:.2f} s ({count / max(seconds, 1e-9):.1f} sentences/s; "
          f"loading {loaded:.1f} s)", file=sys.stderr)
    if args.score:
        scores = model.score(split, predictions)
        metric, reported = model.spec.metric, model.config.get("reported") or {}
        print(f"{model.spec.name} {metric} {scores[metric]:.6f} on {count} sentences of {source} "
              f"(training reported dev {metric} {reported.get('dev')})",
              file=sys.stderr if output == "-" else sys.stdout)


def _read_task_stdin(spec: TaskSpec, max_sentences: int | None) -> Split:
    """A task file given as ``-``: copied to a temporary file for the task's reader."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as tmp:
        tmp.write(sys.stdin.read())
    try:
        return spec.load(tmp.name, max_sentences)
    finally:
        Path(tmp.name).unlink(missing_ok=True)
