"""Loading a pulled model by its name (every file hashed against the pull's record while the model
loads) against loading the same files by their directory (no check).

Run on an idle machine, from the repository root:

    PYTHONPATH=src python benchmarks/pulled_load.py               # 3 loads of each, alternated
    PYTHONPATH=src python benchmarks/pulled_load.py --repeats 5 --out pulled.json

The model is bilm-tf's ``2x4096_512_2048cnn_2xhighway`` with random weights (``options.json`` +
``weights.hdf5``, the original ELMo's size), pulled through ``contextvec.hub.pull.pull`` from a
server on 127.0.0.1 into a temporary cache. Each of the three ways is run once to warm the page
cache, then ``--repeats`` times in turn, so the machine's drift falls on all of them:

- ``by name``: ``contextvec.load(NAME)``, the files hashed on a thread while the model loads;
- ``by directory``: ``contextvec.load(DIR)``, the same files unchecked;
- ``hash alone``: ``contextvec.hub.pull.verify(NAME)``, what hashing before the load would add.

It prints the best time of each and the check's cost: by name over by directory.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

import contextvec
from contextvec.encoders.bilm import PRESETS, ElmoBiLM
from contextvec.encoders.bilm.loader import save_bilm_tf
from contextvec.hub.download import DownloadSettings
from contextvec.hub.pull import PullSettings, pull, verify

NAME = "elmo-bench"


def pulled_model(tmp: Path) -> Path:
    """The original-sized ELMo written as bilm-tf files, served on 127.0.0.1 and pulled into a
    cache under ``tmp`` (``$CONTEXTVEC_CACHE``, ``$CONTEXTVEC_REGISTRY`` point there)."""
    published = tmp / "published"
    published.mkdir()
    save_bilm_tf(ElmoBiLM(PRESETS["elmo-original"]), published / "options.json", published / "weights.hdf5")
    handler = functools.partial(_QuietHandler, directory=str(published))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}"
        entry = {"name": NAME, "format": "bilm-tf", "description": "random weights", "language": "en",
                 "source": "benchmark", "files": [{"url": f"{url}/{f}", "name": f}
                                                  for f in ("options.json", "weights.hdf5")]}
        (tmp / "registry.json").write_text(json.dumps({"models": [entry]}))
        os.environ["CONTEXTVEC_CACHE"] = str(tmp / "cache")
        os.environ["CONTEXTVEC_REGISTRY"] = str(tmp / "registry.json")
        path = pull(NAME, PullSettings(DownloadSettings(progress=False)))
        server.shutdown()
    return path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each way (default: 3)")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = pulled_model(Path(tmp))
        ways: dict[str, Callable[[], object]] = {
            "by name": lambda: contextvec.load(NAME),
            "by directory": lambda: contextvec.load(path),
            "hash alone": lambda: verify(NAME),
        }
        for fn in ways.values():
            fn()  # the page cache warm, the imports done
        times: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(args.repeats):
            for way, fn in ways.items():
                times[way].append(seconds(fn))
        megabytes = sum(p.stat().st_size for p in path.iterdir()) / 2**20
    best = {way: min(ts) for way, ts in times.items()}
    overhead = best["by name"] / best["by directory"] - 1
    print(f"model: bilm-tf elmo-original, random weights, {megabytes:.1f} MiB; torch threads "
          f"{torch.get_num_threads()}; {platform.processor() or platform.machine()}; best of {args.repeats}")
    print(f"{'way':<14} {'best s':>8}   all s")
    for way, ts in times.items():
        print(f"{way:<14} {best[way]:>8.3f}   {' '.join(f'{t:.3f}' for t in ts)}")
    print(f"the check's cost: {overhead:+.1%} of the load by directory "
          f"(hashing first would add {best['hash alone'] / best['by directory']:.0%})")
    if args.out:
        results = {"megabytes": round(megabytes, 1), "repeats": args.repeats, "seconds": times, "best": best,
                   "overhead": overhead}
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
