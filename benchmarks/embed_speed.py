"""Tokens/s of ``Encoder.embed`` for ELMo, and the fraction of this machine's fp32 matmul peak.

Run on an idle machine (a second busy process makes 2-thread timings meaningless):

    python benchmarks/embed_speed.py                   # small + original, batch 32 and 1
    python benchmarks/embed_speed.py --configs original --batch-sizes 32
    python benchmarks/embed_speed.py --precision int8   # bf16/int8 weights (docs/precision.md)

Sentences (``--sentences``, ``sentences.py``): by default ``reference/elmo-small/sentences.txt``
cycled to 500 (7,166 tokens), the set on which allennlp's ``Elmo`` was timed
(``ALLENNLP_TOKENS_PER_S``: a yardstick from one CPU, so the allennlp ratio means something only
on a CPU of that kind); ``wikitext`` takes as many distinct sentences of real text. "small" uses
the reference elmo-small weights; "original" random weights with the 2x4096_512_2048cnn_2xhighway
dimensions. Each row is the median of ``--passes`` passes.

Two modes per row: ``embed`` is ``Encoder.embed`` as shipped (the char-CNN runs once per
distinct token, and the first LSTM layer projects a batch's repeated tokens once; the token
cache is emptied before every pass, so only repeats within one pass are reused: the cycled
sentences repeat a lot, real text less); ``cnn-all`` runs the char-CNN on every token position
and the LSTMs on every position's vector, as allennlp does, to show the biLSTM-bound speed. "of
peak" divides the FLOPs actually executed (recorded call by call: the char-CNN's tokens over the
character columns it kept after skipping trailing padding, the LSTMs' as ``flops.LstmWork``
counts them) by the measured matmul peak. The allennlp ratio compares with its batch-32 figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from pathlib import Path

import torch
from checkpoints import original_elmo
from flops import CnnWork, LstmWork, matmul_peak
from sentences import SOURCES, benchmark_sentences

import contextvec
from contextvec.encoders.bilm import ElmoEncoder
from contextvec.encoders.precision import PRECISIONS, apply_precision
from contextvec.text.batching import length_batches
from contextvec.text.chars import batch_to_char_ids

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference"
ALLENNLP_TOKENS_PER_S = {"small": 423, "original": 111}


def embed_cnn_all(encoder: ElmoEncoder, sentences: list[list[str]], batch_size: int) -> None:
    """The same computation with the char-CNN run on every token position (no reuse)."""
    bilm = encoder.bilm
    with torch.inference_mode():
        for batch in length_batches([len(s) for s in sentences], batch_size, 4096):
            ids = batch_to_char_ids([sentences[i] for i in batch])
            mask = (ids > 0).any(-1)
            tokens = torch.zeros(*mask.shape, encoder.config.projection_dim)
            tokens[mask] = bilm.token_encoder(ids[mask])
            bilm.contextualize(tokens, mask)


def load(name: str) -> ElmoEncoder:
    if name == "small":
        return contextvec.load(REFERENCE / "elmo-small")
    return original_elmo()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="small,original")
    parser.add_argument("--batch-sizes", default="32,1")
    parser.add_argument("--n-sentences", type=int, default=500)
    parser.add_argument("--sentences", choices=SOURCES, default="reference")
    parser.add_argument("--batch1-sentences", type=int, default=100,
                        help="sentences for batch size 1 (it is slow on 'original')")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS)
    args = parser.parse_args()

    sentences = benchmark_sentences(args.sentences, args.n_sentences)
    torch.set_num_threads(args.threads)
    peak = matmul_peak()
    print(f"fp32 matmul peak (2048^3, {args.threads} threads): {peak:.1f} GFLOP/s")
    print(f"{'config':<9} {'batch':>5} {'mode':<8} {'sents':>5} {'tokens':>6} {'tokens/s':>9} "
          f"{'vs allennlp':>11} {'GFLOP/s':>8} {'of peak':>7}")
    for name in args.configs.split(","):
        encoder = apply_precision(load(name), args.precision)
        cnn_work = CnnWork(encoder.bilm.token_encoder, encoder.config)
        lstm_work = LstmWork(encoder.bilm.layers, encoder.config)
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            subset = sentences if batch_size > 1 else sentences[: args.batch1_sentences]
            n_tokens = sum(map(len, subset))
            runs = {
                "embed": partial(encoder.embed, subset, batch_size=batch_size),
                "cnn-all": partial(embed_cnn_all, encoder, subset, batch_size),
            }
            for mode, run in runs.items():
                encoder.embed(subset[:batch_size], batch_size=batch_size)  # warm-up
                times = []
                for _ in range(args.passes):
                    encoder.clear_caches()
                    cnn_work.flops = lstm_work.flops = 0.0
                    start = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - start)
                seconds = statistics.median(times)
                rate = n_tokens / seconds
                gflops = (lstm_work.flops + cnn_work.flops) / seconds / 1e9
                ratio = rate / ALLENNLP_TOKENS_PER_S[name]
                print(f"{name:<9} {batch_size:>5} {mode:<8} {len(subset):>5} {n_tokens:>6} "
                      f"{rate:>9.0f} {ratio:>10.2f}x {gflops:>8.1f} {gflops / peak:>7.1%}",
                      flush=True)


if __name__ == "__main__":
    main()
