"""``contextvec pull``: a published model into the cache (resumable, verified), or ``--verify``
what is there."""

from __future__ import annotations

import argparse
import sys

from contextvec.cli.common import non_negative_int, positive_float

HELP = "download a published model (a name `contextvec models` lists, hf:OWNER/NAME, or an archive URL)"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pull", help=HELP,
        description=f"{HELP} into the cache ($CONTEXTVEC_CACHE, else ~/.cache/contextvec), and print its "
                    "directory. A pull that stops resumes where it stopped; nothing half-downloaded is "
                    "ever loaded. Then contextvec.load(NAME) and --model NAME load it, without a network.")
    p.add_argument("model", metavar="NAME|URL",
                   help="a registry name (elmo-original, elmoformanylangs-fr, tfhub-elmo-3, "
                        "bert-base-uncased, ...), hf:OWNER/NAME for any BERT-family checkpoint on the "
                        "Hugging Face Hub, or the URL of a .zip/.tar.gz archive of a model")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--verify", action="store_true",
                      help="download nothing: hash every file of the cached model against the checksums "
                           "recorded when it was pulled")
    what.add_argument("--force", action="store_true",
                      help="download again, replacing the cached copy")
    p.add_argument("--timeout", type=positive_float, default=30.0,
                   help="seconds without a byte before a try fails")
    p.add_argument("--retries", type=non_negative_int, default=3,
                   help="further tries after a failed one, each resuming the download")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from contextvec.hub.download import DownloadSettings
    from contextvec.hub.pull import PullSettings, pull, verify

    if args.verify:
        path, files = verify(args.model)
        print(f"{args.model}: {files} files match the checksums recorded when it was pulled", file=sys.stderr)
    else:
        settings = PullSettings(DownloadSettings(timeout=args.timeout, retries=args.retries,
                                                 progress=not args.quiet), force=args.force)
        path = pull(args.model, settings)
    print(path)
