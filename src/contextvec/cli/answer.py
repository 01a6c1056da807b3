"""``contextvec answer DIR --question Q --context FILE``: ask a saved question-answering model
(``train-task squad --save-model DIR``) one question on one context.

The context is the whole of FILE (``-``: stdin), read as UTF-8 without newline translation (a
byte-order mark at the start is dropped), so an answer's ``start`` and ``end`` are character
offsets into exactly that text. A question longer than the model's ``max_query`` word pieces is
cut to its first ``max_query`` pieces, as BERT's reference code does; a context longer than a
row holds is read in overlapping windows.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from contextvec.cli import common
from contextvec.cli.qa_options import add_reading_arguments

HELP = "answer a question on a context with a question-answering model saved by train-task squad"
DESCRIPTION = HELP + """. The context is the whole of FILE (- reads stdin), UTF-8; each answer is a
span of it: its text, its character offsets (start, end: context[start:end] is the text) and its
score. A question of more word pieces than the model's max_query is cut to its first max_query
pieces (as BERT's reference code); a long context is read in overlapping windows, of another length
with --max-length (up to the model's positions: fewer windows), in lower-precision weights with
--precision, without retraining."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("answer", help=HELP, description=DESCRIPTION)
    p.add_argument("model_dir", metavar="DIR", help="a directory written by train-task squad --save-model")
    p.add_argument("--question", required=True, help="the question")
    p.add_argument("--context", required=True, metavar="FILE",
                   help="a UTF-8 text file whose whole text is the context, or - for stdin")
    p.add_argument("--n-best", type=common.positive_int, default=1,
                   help="answers to print, best first (fewer if the context has fewer spans)")
    p.add_argument("--json", action="store_true",
                   help='print one JSON list of {"text", "start", "end", "score"} instead of lines')
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0 (default: cpu)")
    p.add_argument("--threads", type=common.thread_count, help="torch CPU threads (default: torch's choice)")
    add_reading_arguments(p)
    p.set_defaults(run=run)


def read_context(source: str) -> str:
    """The whole text of file ``source`` (``-``: stdin) as UTF-8, a leading byte-order mark
    dropped and line breaks kept as they are (offsets count the characters of the file)."""
    if source == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        path = Path(source)
        if path.is_dir():
            raise IsADirectoryError(f"--context {path} is a directory; give a text file")
        if not path.exists():
            raise FileNotFoundError(f"--context {path} does not exist")
        data, name = path.read_bytes(), str(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{name}: not UTF-8 text (byte {e.start}: {e.reason})") from None


def run(args: argparse.Namespace) -> None:
    from contextvec.jobs.qa import AnswerSettings, run_answer

    settings = AnswerSettings(args.model_dir, args.question, read_context(args.context), args.n_best,
                              args.device, args.threads, args.max_length, args.precision or "fp32")
    # A context without any span to give gets no answer (the model's empty answer is no span).
    answers = [a for a in run_answer(settings) if math.isfinite(a.score)]
    if args.json:
        print(json.dumps([a.to_dict() for a in answers], ensure_ascii=False))
        return
    if not answers:
        print("no answer: the context has no span to give", file=sys.stderr)
    for a in answers:
        text = " ".join(a.text.split())  # one line; --json keeps the exact characters
        print(f"{text}\t(characters {a.start}-{a.end}, score {a.score:.4f})")
