"""``contextvec predict DIR INPUT [OUTPUT]``: run a model saved by ``train-task --save-model``.

INPUT is plain text, one sentence per line (``--format text``, tokenized by ``--tokenizer``; for
a sentence-pair task one pair per line, the two sentences separated by a tab), or the task's own
files read by its reader (``--format task``: CoNLL-2003, SST trees, TREC labels, GLUE's train or
unlabeled test TSVs), ``-`` for stdin. Text is streamed in chunks (bounded memory); a task file is
read whole, then predicted as one split, exactly as ``train-task`` scored it. OUTPUT (default or
``-``: stdout; a file is written atomically) gets JSON lines (``{"tokens", "label"}``,
``{"tokens", "tags"}``; a pair adds ``"second"``, a regression task gives ``"score"``), for NER
CoNLL (``token TAG`` lines, IOB2, a blank line after each sentence), or for a GLUE task GLUE's
submission format (``index<TAB>prediction`` under that header: the file's own ids, labels as
GLUE spells them, STS-B scores clipped to 0-5). ``--score`` (``--format task``) prints the task's
metrics against the file's labels.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from contextvec.cli import common
from contextvec.cli.qa_options import add_reading_arguments
from contextvec.jobs.predict import InputFormat, OutputFormat, PredictSettings, run_predict
from contextvec.text.tokenize import LINE_TOKENIZERS

HELP = "run a task model saved by train-task --save-model on new text or a task file"
DESCRIPTION = HELP + """. INPUT: text, one sentence per line (a pair task: the two sentences of a
pair on one line, separated by a tab), or (--format task) the task's own file (CoNLL-2003, SST
trees, TREC labels, GLUE's train.tsv or unlabeled test.tsv); - reads stdin. Text is streamed in
chunks; a task file is predicted as one split, exactly as train-task scored it. OUTPUT (default or
-: stdout) gets JSON lines ({"tokens", "label"}, {"tokens", "tags"}; pairs add "second", STS-B
gives "score"), for NER with --output-format conll IOB2 "token TAG" lines, or for a GLUE task with
--output-format glue GLUE's submission rows ("index<TAB>prediction"). --score prints the task's
metrics against a labelled task file. A question-answering model (train-task squad) reads a SQuAD
v1.1 JSON file and writes the official predictions file ({question_id: answer}); --score prints the
official exact match and F1 against the file's answers; --max-length and --precision change how it
reads (rows of another length, lower-precision weights) without retraining."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("predict", help=HELP, description=DESCRIPTION)
    p.add_argument("model_dir", metavar="DIR", help="a directory written by train-task --save-model")
    p.add_argument("input", metavar="INPUT", help="input file (plain or .gz), or - for stdin")
    p.add_argument("output", metavar="OUTPUT", nargs="?",
                   help="output file, or - for stdout (default: stdout; with --score: not written)")
    p.add_argument("--format", choices=[f.value for f in InputFormat], default="text",
                   help="text: one sentence per line; task: the task's own file format, read by its "
                   "reader (default: text)")
    p.add_argument("--tokenizer", choices=LINE_TOKENIZERS,
                   help="how --format text lines (each sentence of a tab-separated pair) become tokens "
                   "(default: as the task's files were tokenized: moses for GLUE's raw-text tasks and "
                   "your pairs, whitespace for the others)")
    p.add_argument("--output-format", choices=[f.value for f in OutputFormat], default="jsonl",
                   help="jsonl; conll for NER; glue for a GLUE task: GLUE's submission format, "
                   "index<TAB>prediction rows with the file's ids (default: jsonl)")
    p.add_argument("--score", action="store_true",
                   help="print the task's metrics against INPUT's labels (needs --format task)")
    p.add_argument("--max-sentences", type=common.positive_int,
                   help="--format task: only the first N sentences (SQuAD: questions), as train-task "
                   "--max-sentences (default: all)")
    p.add_argument("--batch-size", type=common.positive_int,
                   help="items per task-model batch (default: the batch training evaluated with)")
    p.add_argument("--embed-batch-size", type=common.positive_int,
                   help="sentences per encoder batch (default: the one training used)")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0 (default: cpu)")
    p.add_argument("--threads", type=common.thread_count, help="torch CPU threads (default: torch's choice)")
    add_reading_arguments(p.add_argument_group("question-answering models (train-task squad)"))
    common.add_overwrite_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar (default: shown)")
    p.set_defaults(run=run)


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


def _check(args: argparse.Namespace) -> str | None:
    """Check the input and output files before any work; returns the output path (None: not written)."""
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


def _run_qa(args: argparse.Namespace) -> None:
    """A saved question-answering model: INPUT is SQuAD JSON, OUTPUT the official predictions file."""
    from contextvec.jobs.qa import PredictQASettings, run_predict_qa

    if args.format != "text" or args.tokenizer or args.output_format != "jsonl" or args.embed_batch_size:
        raise ValueError("a question-answering model reads SQuAD JSON and writes its predictions file: "
                         "drop --format, --tokenizer, --output-format and --embed-batch-size")
    job = PredictQASettings(args.model_dir, args.input, args.score, args.max_sentences, args.batch_size,
                            args.device, args.threads, args.max_length, args.precision or "fp32")
    output = _check(args)
    result = run_predict_qa(job)
    with _opened_output(output) as out:
        if out is not None:
            out.write(json.dumps(result.predictions, ensure_ascii=False) + "\n")
    print(result.timing_line(), file=sys.stderr)
    if args.score:
        print(result.score_line(), file=sys.stderr if output == "-" else sys.stdout)


def run(args: argparse.Namespace) -> None:
    from contextvec.tasks.qa.record import is_qa_model

    if is_qa_model(args.model_dir):
        _run_qa(args)
        return
    if args.max_length is not None or args.precision is not None:
        raise ValueError(f"--max-length and --precision are for question-answering models (train-task "
                         f"squad); {args.model_dir} is not one")
    job = PredictSettings(args.model_dir, args.input, args.format, args.tokenizer, args.output_format,
                          args.score, args.max_sentences, args.batch_size, args.embed_batch_size,
                          args.device, args.threads, not args.quiet)
    output = _check(args)
    with _opened_output(output) as out:
        result = run_predict(job, out)
    print(result.timing_line(), file=sys.stderr)
    if args.score:
        print(result.score_line(), file=sys.stderr if output == "-" else sys.stdout)
