"""ELMo tokens/s: ONNX Runtime on the graph `contextvec export` writes vs contextvec's own engine.

    pip install 'contextvec[onnx]'
    python benchmarks/onnx_speed.py          # bundled model; --batch-sizes 1,32 --threads 2 [--passive]

Run it on an idle machine: one run, back to back. Both engines get the same sentences (the
reference ``elmo-small/sentences.txt`` cycled to ``--sentences``) in the same length-sorted
batches (:func:`contextvec.text.batching.length_batches`), with the same number of threads, and
return the same thing: float32 numpy arrays (layers, tokens, dim) per sentence, character ids
computed inside the timing on both sides. Passes are interleaved (pass 1 of every engine, then
pass 2, ...); each row is the median.

- **contextvec**: the encoder called on the batch's token lists (``Encoder.forward``). Its
  char-CNN token cache is emptied before every pass, so only repeats within a pass are reused;
  ``contextvec cnn-all`` empties it before every batch (each batch's distinct tokens through the
  CNN, as the ONNX graph does with every position).
- **ORT**: :func:`contextvec.text.chars.batch_to_char_ids` and the mask, one
  ``InferenceSession.run`` (all graph optimizations, sequential execution).

The accuracy line gives the largest |ORT - contextvec| over every layer of every sentence.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bert_speed import cpu_name, ort_runtime  # the same CPU name and ORT set-up for both scripts

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference" / "elmo-small"
FLAGS_SHOWN = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="an ELMo contextvec.load reads (default: the bundled one)")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--passive", action="store_true", help="idle threads sleep, not spin (both engines)")
    args = parser.parse_args()
    if args.passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read once, when torch's OpenMP starts
    import onnxruntime as ort
    import torch

    import contextvec
    from contextvec.encoders.precision import cpu_flags
    from contextvec.text.batching import length_batches
    from contextvec.text.chars import batch_to_char_ids

    torch.set_num_threads(args.threads)
    lines = (REFERENCE / "sentences.txt").read_text("utf-8").splitlines()
    words = [line.split() for line in (lines * (args.sentences // len(lines) + 1))[: args.sentences]]
    n_tokens = sum(len(w) for w in words)
    encoder = contextvec.load(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        path = contextvec.export_onnx(encoder, Path(tmp) / "elmo.onnx")
        runtime = ort_runtime(path, args.threads, args.passive)

    def run_ours(cnn_all: bool) -> Callable[[list[list[str]]], list[np.ndarray]]:
        def run(batch: list[list[str]]) -> list[np.ndarray]:
            if cnn_all:
                encoder.clear_caches()
            with torch.no_grad():
                layers = encoder(batch).layers.numpy()
            return [layers[:, b, : len(s)] for b, s in enumerate(batch)]
        return run

    def run_ort(batch: list[list[str]]) -> list[np.ndarray]:
        ids = batch_to_char_ids(batch).numpy()
        mask = (ids > 0).any(-1).astype(np.int64)
        (layers,) = runtime.run(None, {"char_ids": ids, "mask": mask})
        return [layers[b, :, : len(s)] for b, s in enumerate(batch)]

    engines = {"contextvec": run_ours(False), "contextvec cnn-all": run_ours(True), "ORT": run_ort}
    print(f"{cpu_name()}; flags: {' '.join(f for f in FLAGS_SHOWN if f in cpu_flags())}")
    print(f"torch {torch.__version__}, onnxruntime {ort.__version__}, {args.threads} threads; "
          f"{len(words)} sentences, {n_tokens} tokens; median of {args.passes} interleaved passes; "
          f"idle threads {'sleep' if args.passive else 'spin'}")
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        batches = [[words[i] for i in idx] for idx in length_batches([len(w) for w in words], batch_size)]
        times: dict[str, list[float]] = {name: [] for name in engines}
        outputs: dict[str, list[np.ndarray]] = {}
        for _ in range(args.passes):
            for name, run in engines.items():
                encoder.clear_caches()
                start = time.perf_counter()
                outputs[name] = [vectors for batch in batches for vectors in run(batch)]
                times[name].append(time.perf_counter() - start)
        rates = {name: n_tokens / statistics.median(t) for name, t in times.items()}
        print(f"\nbatch {batch_size} ({len(batches)} length-sorted batches)")
        for name, rate in rates.items():
            print(f"  {name:20s} {rate:9.1f} tokens/s   x{rate / rates['contextvec']:.2f} contextvec")
        worst = max(float(np.abs(a - b).max(initial=0.0))
                    for a, b in zip(outputs["ORT"], outputs["contextvec"], strict=True))
        print(f"  max |ORT - contextvec| over all layers: {worst:.2e}")


if __name__ == "__main__":
    main()
