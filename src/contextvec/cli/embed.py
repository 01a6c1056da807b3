"""``contextvec embed``: a text file (one tokenized sentence per line) -> HDF5 of vectors."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from contextvec.cli.common import (
    add_model_arguments,
    add_overwrite_argument,
    check_output,
    model_spec,
    positive_int,
)
from contextvec.documents.settings import CONTEXTS
from contextvec.encoders.outputs import POOL_MODES
from contextvec.io.text_lines import EMPTY_LINE_POLICIES, INVALID_UTF8_POLICIES, read_once
from contextvec.io.vector_storage import COMPRESSIONS, DEFAULT_GZIP_LEVEL, DTYPES, GZIP_LEVELS
from contextvec.text.tokenize import Tokenizer

if TYPE_CHECKING:  # the library loads only when the command runs (fast --help)
    from contextvec.bulk import BulkSettings

ENGINES = ("local", "ray")


def gzip_level(text: str) -> int:
    """``--gzip-level``: an integer from 1 to 9 (zlib's levels)."""
    try:
        level = int(text)
    except ValueError:
        level = 0
    if level not in GZIP_LEVELS:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to 9, got {text!r}")
    return level
HELP = "embed a file of whitespace-tokenized sentences into HDF5 (allennlp `elmo` layout)"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("embed", help=HELP, description=HELP)
    p.add_argument("input_file", nargs="+", metavar="INPUT",
                   help="UTF-8 text (plain or .gz), one whitespace-tokenized sentence per line; "
                        "- reads standard input; several inputs (--engine ray) are one corpus, "
                        "keyed by line number through the files in order")
    p.add_argument("output_file", metavar="OUTPUT",
                   help="HDF5 file to write (--engine ray: a folder of shards, or with --merge a file)")
    layers = p.add_mutually_exclusive_group(required=True)
    layers.add_argument("--all", dest="layers", action="store_const", const="all",
                        help="every layer: datasets of shape (layers, tokens, dim)")
    layers.add_argument("--top", dest="layers", action="store_const", const="top",
                        help="the top layer: (tokens, dim)")
    layers.add_argument("--average", dest="layers", action="store_const", const="average",
                        help="the mean of the layers: (tokens, dim)")
    p.add_argument("--pool", choices=POOL_MODES,
                   help="one vector per sentence: pool the tokens away (default: token vectors)")
    add_model_arguments(p)
    p.add_argument("--batch-size", type=positive_int, default=64,
                   help="sentences per batch (default: 64)")
    p.add_argument("--max-tokens", type=positive_int, default=4096,
                   help="padded tokens per batch at most (default: 4096); longer sentences run alone")
    p.add_argument("--use-sentence-keys", action="store_true",
                   help="key datasets by sentence text instead of line index (unique, not empty, no '/' "
                        "or NUL character)")
    p.add_argument("--forget-sentences", action="store_true",
                   help="do not write the sentence_to_index dataset")
    p.add_argument("--resume", action="store_true",
                   help="finish an interrupted run of the same input, model and settings (its "
                        "finished chunks are kept; a damaged one is named and computed again)")
    add_overwrite_argument(p)
    p.add_argument("--empty-lines", choices=EMPTY_LINE_POLICIES, default="error",
                   help="error (default): refuse, naming the lines; keep: a 0-token dataset")
    p.add_argument("--invalid-utf8", choices=INVALID_UTF8_POLICIES, default="error",
                   help="error (default): refuse, naming the lines; replace: decode with U+FFFD")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="stored precision: float32 (default, allennlp's layout), float16 (half the "
                        "bytes), bfloat16 (uint16 bits with a contextvec_dtype attribute)")
    p.add_argument("--compression", choices=COMPRESSIONS, default="none",
                   help="HDF5 filter of every dataset: none (default), gzip (any HDF5 reader), lzf "
                        "(faster, h5py only)")
    p.add_argument("--gzip-level", type=gzip_level, metavar="1-9",
                   help=f"gzip's level (default: {DEFAULT_GZIP_LEVEL}); needs --compression gzip")
    p.add_argument("--chunk-lines", type=positive_int, default=2048,
                   help="lines per resumable shard (default: 2048); a resumed run keeps the first value")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (what a resume reuses, and Ctrl-C's one line, still show)")
    docs = p.add_argument_group("documents (see docs/documents.md)")
    docs.add_argument("--documents", action="store_true",
                      help="the input is documents (blank lines or -DOCSTART- lines between them): one "
                           "HDF5 group per document, with each token's character offsets")
    docs.add_argument("--context", choices=CONTEXTS, default="sentence",
                      help="sentence (default): each sentence alone; document: each sentence read with "
                           "its document (needs --documents)")
    docs.add_argument("--tokenizer", choices=Tokenizer.NAMES, default="whitespace",
                      help="how --documents lines become tokens: whitespace (default), moses, "
                           "moses-sentences (a line may hold several sentences)")
    docs.add_argument("--chunk-tokens", type=positive_int, metavar="N",
                      help="late chunking: one vector per N consecutive tokens of a document, pooled "
                           "(--pool, default mean) after the document's pass, instead of token vectors")
    docs.add_argument("--pass-tokens", type=positive_int, default=4096, metavar="N",
                      help="tokens held in memory per pass over a document (default: 4096)")
    engine = p.add_argument_group("engine (see docs/ray.md)")
    engine.add_argument("--engine", choices=ENGINES, default="local",
                        help="local (default): this process; ray: workers on a Ray cluster")
    engine.add_argument("--ray-address",
                        help="a running Ray cluster, e.g. 10.0.0.1:6379 or auto (default: start one here)")
    engine.add_argument("--workers", type=positive_int,
                        help="Ray workers, each loading the model once (default: one per CPU, or per GPU "
                             "with --device cuda); --threads is per worker (default: 1)")
    engine.add_argument("--merge", action="store_true",
                        help="Ray: merge the shards into one HDF5 file in the local engine's layout")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    if args.documents:
        return _run_documents(args)
    needs_documents = [flag for flag, given in (
        ("--context document", args.context != "sentence"), ("--tokenizer", args.tokenizer != "whitespace"),
        ("--chunk-tokens", args.chunk_tokens is not None)) if given]
    if needs_documents:
        raise ValueError(f"{', '.join(needs_documents)} need(s) --documents")
    from contextvec.bulk import BulkSettings

    settings = BulkSettings(
        layers=args.layers, pool=args.pool, batch_size=args.batch_size, max_tokens=args.max_tokens,
        sentence_keys=args.use_sentence_keys, forget_sentences=args.forget_sentences,
        empty_lines=args.empty_lines, invalid_utf8=args.invalid_utf8, chunk_lines=args.chunk_lines,
        resume=args.resume, overwrite=args.overwrite, progress=not args.quiet,
        dtype=args.dtype, compression=args.compression, gzip_level=args.gzip_level,
    )
    if args.engine == "ray":
        return _run_ray(args, settings)
    ray_only = [flag for flag, given in (("--ray-address", args.ray_address), ("--workers", args.workers),
                                         ("--merge", args.merge)) if given]
    if ray_only:
        raise ValueError(f"{', '.join(ray_only)} need(s) --engine ray")
    if len(args.input_file) > 1:
        raise ValueError("several inputs need --engine ray (or concatenate them into one file)")
    from contextvec.bulk import embed_to_hdf5

    # before the model loads; held until the command ends
    output = check_output(args.output_file, inputs=[i for i in args.input_file if i != "-"],
                          overwrite=args.overwrite, resume=args.resume)
    with _spooled(args.input_file) as sources:
        path = embed_to_hdf5(model_spec(args), sources[0], output, settings)
    print(f"wrote {path}")


def _run_documents(args: argparse.Namespace) -> None:
    """``--documents``: one call of the documents room; what it cannot do is refused first."""
    refused = [flag for flag, given in (
        ("--resume", args.resume), ("--engine ray", args.engine != "local"),
        ("--use-sentence-keys", args.use_sentence_keys), ("--forget-sentences", args.forget_sentences),
        ("--empty-lines keep", args.empty_lines != "error"),
    ) if given]
    if refused:
        raise ValueError(f"{', '.join(refused)}: not with --documents")
    if len(args.input_file) > 1:
        raise ValueError("--documents reads one input file")
    from contextvec.documents import DocumentSettings
    from contextvec.documents.hdf5 import embed_documents_to_hdf5
    from contextvec.io.vector_storage import VectorStorage

    settings = DocumentSettings(context=args.context, layers=args.layers, pool=args.pool,
                                chunk_tokens=args.chunk_tokens, tokenizer=args.tokenizer,
                                pass_tokens=args.pass_tokens, batch_size=args.batch_size,
                                max_tokens=args.max_tokens)
    storage = VectorStorage(args.dtype, args.compression, args.gzip_level)
    output = check_output(args.output_file, inputs=[i for i in args.input_file if i != "-"],
                          overwrite=args.overwrite)
    with _spooled(args.input_file) as sources:
        path = embed_documents_to_hdf5(model_spec(args), sources[0], output, settings, storage,
                                       invalid_utf8=args.invalid_utf8, overwrite=args.overwrite,
                                       progress=not args.quiet)
    print(f"wrote {path}")


@contextlib.contextmanager
def _spooled(inputs: list[str]) -> Iterator[list[str | Path]]:
    """The inputs, with each one that can be read only once (``-``: standard input, at most
    once; a pipe or FIFO such as ``<(zcat f.gz)``) copied to a temporary file: the lines are
    read twice (checked, then embedded). An empty one is named here, not by its copy's name."""
    if inputs.count("-") > 1:
        raise ValueError("standard input (-) can be read only once")
    with tempfile.TemporaryDirectory() as spool:
        sources: list[str | Path] = list(inputs)
        for number, given in enumerate(inputs):
            if given != "-" and not read_once(given):
                continue
            copy = Path(spool) / f"{number}-{'stdin.txt' if given == '-' else Path(given).name}"
            with open(copy, "wb") as f, contextlib.ExitStack() as stack:
                source = sys.stdin.buffer if given == "-" else stack.enter_context(open(given, "rb"))
                shutil.copyfileobj(source, f)
            if copy.stat().st_size == 0:
                name = "standard input (-)" if given == "-" else given
                raise ValueError(f"{name} is empty: there is nothing to embed")
            sources[number] = copy
        yield sources


def _run_ray(args: argparse.Namespace, settings: BulkSettings) -> None:
    """``--engine ray``: Ray is imported only now, and its absence is one line (exit 2)."""
    from contextvec.distributed import RaySettings, embed_ray, require_ray

    require_ray()
    if not args.merge and Path(args.output_file).suffix in (".h5", ".hdf5") \
            and not Path(args.output_file).is_dir():
        raise ValueError(f"--engine ray writes a folder of shards: name a folder, not "
                         f"{args.output_file}, or pass --merge for one HDF5 file")
    spec = model_spec(args)
    cluster = RaySettings(workers=args.workers, address=args.ray_address, merge=args.merge)
    with _spooled(args.input_file) as sources:
        summary = embed_ray(sources, args.output_file, spec, settings, cluster)
    rate = f", {summary.tokens / summary.seconds:.0f} tokens/s" if summary.seconds else ""
    print(f"wrote {summary.output} ({summary.blocks_run} of {summary.blocks} blocks computed now on "
          f"{summary.workers} workers{rate})")
